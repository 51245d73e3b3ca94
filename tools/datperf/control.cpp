// SPDX-License-Identifier: BSD-3-Clause
// The control connection between server and client, and the connections
// each workload sets up.
#include "session.hpp"

#include "session.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace datperf {

// ---- control messages --------------------------------------------------------------------

namespace {

constexpr std::size_t kSlotSize = 256;
static_assert(sizeof(CtrlMsg) <= kSlotSize, "a control message fits one slot");

const char *msg_name(Msg m) {
    switch (m) {
    case Msg::Hello: return "Hello";
    case Msg::Run: return "Run";
    case Msg::Ready: return "Ready";
    case Msg::Done: return "Done";
    case Msg::Quit: return "Quit";
    case Msg::Bye: return "Bye";
    }
    return "an unknown message";
}

DAT_TIMEOUT dat_timeout(double seconds) {
    double us = seconds * 1e6;
    return us >= static_cast<double>(UINT32_MAX - 1) ? DAT_TIMEOUT_INFINITE : static_cast<DAT_TIMEOUT>(us);
}

} // namespace

CtrlMsg ctrl_message(Msg type) {
    CtrlMsg m;
    std::memset(&m, 0, sizeof m);
    m.magic = kCtrlMagic;
    m.type = type;
    return m;
}

CtrlMsg run_message(const Phase &ph) {
    CtrlMsg m = ctrl_message(Msg::Run);
    m.workload = ph.workload;
    m.completion = ph.completion;
    m.size = ph.size;
    m.iters = ph.iters;
    m.warmup = ph.warmup;
    m.window = static_cast<std::uint32_t>(ph.window);
    m.endpoints = static_cast<std::uint32_t>(ph.endpoints);
    m.op = ph.op;
    return m;
}

Phase phase_of(const CtrlMsg &m) {
    Phase ph;
    ph.workload = m.workload;
    ph.completion = m.completion == Completion::Wait ? Completion::Wait : Completion::Poll;
    ph.size = m.size;
    ph.iters = m.iters;
    ph.warmup = m.warmup;
    ph.window = static_cast<int>(std::max<std::uint32_t>(1, m.window));
    ph.endpoints = static_cast<int>(m.endpoints);
    ph.op = m.op;
    return ph;
}

void Control::create(Ia &ia, DAT_EVD_HANDLE conn_evd, double timeout_s) {
    timeout_s_ = timeout_s;
    mem_.create(ia, (kSlots + 1) * kSlotSize, "control messages");
    dat_check(dat_evd_create(ia.get(), 2 * kSlots + 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, evd_.out()),
              "dat_evd_create");
    DAT_EP_ATTR attr = endpoint_attr(ia, kSlotSize, kSlots, 4, 0);
    dat_check(dat_ep_create(ia.get(), ia.pz(), evd_.get(), evd_.get(), conn_evd, &attr, ep_.out()), "dat_ep_create");
    // Receives may be posted before the connection: the peer's first
    // message always finds one.
    for (int slot = 0; slot < kSlots; ++slot)
        post_recv(slot);
}

void Control::post_recv(int slot) {
    DAT_LMR_TRIPLET iov = mem_.iov(static_cast<std::size_t>(slot) * kSlotSize, kSlotSize);
    DAT_DTO_COOKIE c;
    c.as_64 = static_cast<DAT_UINT64>(slot);
    dat_check(dat_ep_post_recv(ep_.get(), 1, &iov, c, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_recv");
}

void Control::send(const CtrlMsg &m, Events &ev) {
    std::memcpy(mem_.data() + kSlots * kSlotSize, &m, sizeof m);
    DAT_LMR_TRIPLET iov = mem_.iov(kSlots * kSlotSize, sizeof m);
    DAT_DTO_COOKIE c;
    c.as_64 = kSlots;
    dat_check(dat_ep_post_send(ep_.get(), 1, &iov, c, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_send");
    ++sends_posted_;
    while (sends_done_ < sends_posted_)
        pump(ev, "the completion of a control message", timeout_s_);
}

void Control::pump(Events &ev, const char *waiting_for, double timeout_s) {
    DAT_EVENT e;
    ev.next_waiting(evd_.get(), &e, waiting_for, timeout_s);
    if (e.event_number != DAT_DTO_COMPLETION_EVENT)
        throw Error("control connection: unexpected " + event_text(e));
    const auto &d = e.event_data.dto_completion_event_data;
    if (d.status != DAT_DTO_SUCCESS)
        throw Error("control connection: " + dto_status_text(d.status) + " while waiting for " + waiting_for +
                    " (the peer went away?)");
    if (d.user_cookie.as_64 >= static_cast<DAT_UINT64>(kSlots)) {
        ++sends_done_;
        return;
    }
    auto slot = static_cast<int>(d.user_cookie.as_64);
    CtrlMsg m;
    std::memcpy(&m, mem_.data() + static_cast<std::size_t>(slot) * kSlotSize, sizeof m);
    if (d.transfered_length < sizeof m || m.magic != kCtrlMagic)
        throw Error("control connection: a message that is not datperf's (" + std::to_string(d.transfered_length) +
                    " bytes)");
    received_.push_back(m);
    post_recv(slot);
}

CtrlMsg Control::receive(Events &ev, Msg expect, const char *waiting_for, double timeout_s) {
    if (timeout_s < 0)
        timeout_s = timeout_s_;
    while (received_.empty())
        pump(ev, waiting_for, timeout_s);
    CtrlMsg m = received_.front();
    received_.pop_front();
    if (expect != Msg{} && m.type != expect)
        throw Error(std::string("control protocol: expected ") + msg_name(expect) + ", got " + msg_name(m.type));
    return m;
}

// ---- connections ----------------------------------------------------------------------------

DAT_EP_ATTR endpoint_attr(const Ia &ia, std::uint64_t max_size, int recv_dtos, int request_dtos, int rdma_reads) {
    const DAT_IA_ATTR &a = ia.attr();
    auto lim = [](DAT_COUNT want, DAT_COUNT max) { return max > 0 ? std::min(want, max) : want; };
    auto lim_len = [](std::uint64_t want, std::uint64_t max) {
        return static_cast<DAT_SEG_LENGTH>(max > 0 ? std::min(want, max) : want);
    };
    DAT_EP_ATTR e;
    std::memset(&e, 0, sizeof e);
    e.service_type = DAT_SERVICE_TYPE_RC;
    e.max_message_size = lim_len(max_size, a.max_message_size);
    e.max_rdma_size = lim_len(max_size, a.max_rdma_size);
    e.qos = DAT_QOS_BEST_EFFORT;
    e.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    e.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    e.max_recv_dtos = lim(recv_dtos, a.max_dto_per_ep);
    e.max_request_dtos = lim(request_dtos, a.max_dto_per_ep);
    e.max_recv_iov = 1;
    e.max_request_iov = 1;
    e.max_rdma_read_in = lim(rdma_reads, a.max_rdma_read_per_ep_in);
    e.max_rdma_read_out = lim(rdma_reads, a.max_rdma_read_per_ep_out);
    e.srq_soft_hw = DAT_HW_DEFAULT;
    e.max_rdma_read_iov = 1;
    e.max_rdma_write_iov = 1;
    return e;
}

namespace {

const char *role_name(ConnRole r) {
    switch (r) {
    case ConnRole::Control: return "control";
    case ConnRole::Data: return "data";
    case ConnRole::ConnRate: return "conn-rate";
    case ConnRole::Scale: return "scale";
    }
    return "unknown";
}

} // namespace

void connect_endpoint(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual, ConnRole role,
                      DAT_EVD_HANDLE conn_evd, Events &ev, double timeout_s) {
    ConnTag tag{kCtrlMagic, role};
    const std::string where = sockaddr_text(addr) + " port " + std::to_string(qual);
    DAT_RETURN r = dat_ep_connect(ep, addr, qual, dat_timeout(timeout_s), sizeof tag, &tag, DAT_QOS_BEST_EFFORT,
                                  DAT_CONNECT_DEFAULT_FLAG);
    if (r != DAT_SUCCESS)
        dat_fail(r, "dat_ep_connect", std::string(role_name(role)) + " connection to " + where);
    DAT_EVENT e;
    ev.next_waiting(conn_evd, &e, "the connection to be established", timeout_s);
    if (e.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
        throw Error(std::string("the ") + role_name(role) + " connection to " + where + " failed: " + event_text(e));
}

DAT_CR_HANDLE request_of(const DAT_EVENT &e, ConnRole role) {
    if (e.event_number != DAT_CONNECTION_REQUEST_EVENT)
        throw Error("expected a connection request, got " + event_text(e));
    DAT_CR_HANDLE cr = e.event_data.cr_arrival_event_data.cr_handle;
    DAT_CR_PARAM p;
    std::memset(&p, 0, sizeof p);
    dat_check(dat_cr_query(cr, DAT_CR_FIELD_ALL, &p), "dat_cr_query");
    ConnTag tag{0, ConnRole{}};
    if (p.private_data && p.private_data_size >= static_cast<DAT_COUNT>(sizeof tag))
        std::memcpy(&tag, p.private_data, sizeof tag);
    if (tag.magic != kCtrlMagic || tag.role != role) {
        dat_cr_reject(cr, 0, nullptr);
        throw Error(std::string("expected the client's ") + role_name(role) + " connection, got " +
                    (tag.magic == kCtrlMagic ? std::string("its ") + role_name(tag.role) + " connection"
                                             : "a request that is not datperf's (rejected)"));
    }
    return cr;
}

void wait_request(DAT_EVD_HANDLE cr_evd, ConnRole role, Events &ev, double timeout_s, DAT_CR_HANDLE *cr_out) {
    DAT_EVENT e;
    ev.next_waiting(cr_evd, &e, "a connection request", timeout_s);
    *cr_out = request_of(e, role);
}

void accept_request(DAT_CR_HANDLE cr, DAT_EP_HANDLE ep, DAT_EVD_HANDLE conn_evd, Events &ev, double timeout_s) {
    dat_check(dat_cr_accept(cr, ep, 0, nullptr), "dat_cr_accept");
    DAT_EVENT e;
    ev.next_waiting(conn_evd, &e, "the accepted connection to be established", timeout_s);
    if (e.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
        throw Error("the accepted connection failed: " + event_text(e));
}

} // namespace datperf
