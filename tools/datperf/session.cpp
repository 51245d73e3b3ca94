// SPDX-License-Identifier: BSD-3-Clause
// datperf's DAT side: the IA, registered memory, events, the control
// connection, connection setup, and the server and client sessions.
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

// ---- errors -------------------------------------------------------------------

std::string dat_text(DAT_RETURN r)
{
    const char *major = nullptr, *minor = nullptr;
    if (dat_strerror(r, &major, &minor) != DAT_SUCCESS || !major) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "DAT_RETURN 0x%x", static_cast<unsigned>(r));
        return buf;
    }
    std::string s = major;
    if (minor && *minor)
        s += std::string(" ") + minor;
    return s;
}

void dat_fail(DAT_RETURN r, const char *call, const std::string &context)
{
    std::string msg = std::string(call) + ": " + dat_text(r);
    if (!context.empty())
        msg += " (" + context + ")";
    throw Error(msg);
}

std::string dto_status_text(DAT_DTO_COMPLETION_STATUS s)
{
    static const char *const names[] = {
        "DAT_DTO_SUCCESS",           "DAT_DTO_ERR_FLUSHED",           "DAT_DTO_ERR_LOCAL_LENGTH",
        "DAT_DTO_ERR_LOCAL_EP",      "DAT_DTO_ERR_LOCAL_PROTECTION",  "DAT_DTO_ERR_BAD_RESPONSE",
        "DAT_DTO_ERR_REMOTE_ACCESS", "DAT_DTO_ERR_REMOTE_RESPONDER",  "DAT_DTO_ERR_TRANSPORT",
        "DAT_DTO_ERR_RECEIVER_NOT_READY", "DAT_DTO_ERR_PARTIAL_PACKET", "DAT_RMR_OPERATION_FAILED",
        "DAT_DTO_ERR_LOCAL_MM_ERROR"};
    auto i = static_cast<unsigned>(s);
    return i < sizeof names / sizeof names[0] ? names[i] : "DTO status " + std::to_string(i);
}

std::string event_text(const DAT_EVENT &ev)
{
    switch (ev.event_number) {
    case DAT_DTO_COMPLETION_EVENT: {
        const auto &d = ev.event_data.dto_completion_event_data;
        return "DTO completion " + dto_status_text(d.status) + " (cookie " + std::to_string(d.user_cookie.as_64) +
               ", length " + std::to_string(d.transfered_length) + ")";
    }
    case DAT_CONNECTION_REQUEST_EVENT: return "DAT_CONNECTION_REQUEST_EVENT";
    case DAT_CONNECTION_EVENT_ESTABLISHED: return "DAT_CONNECTION_EVENT_ESTABLISHED";
    case DAT_CONNECTION_EVENT_PEER_REJECTED: return "DAT_CONNECTION_EVENT_PEER_REJECTED";
    case DAT_CONNECTION_EVENT_NON_PEER_REJECTED:
        return "DAT_CONNECTION_EVENT_NON_PEER_REJECTED (nobody listens there?)";
    case DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR: return "DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR";
    case DAT_CONNECTION_EVENT_DISCONNECTED: return "DAT_CONNECTION_EVENT_DISCONNECTED";
    case DAT_CONNECTION_EVENT_BROKEN: return "DAT_CONNECTION_EVENT_BROKEN";
    case DAT_CONNECTION_EVENT_TIMED_OUT: return "DAT_CONNECTION_EVENT_TIMED_OUT";
    case DAT_CONNECTION_EVENT_UNREACHABLE: return "DAT_CONNECTION_EVENT_UNREACHABLE";
    case DAT_ASYNC_ERROR_EVD_OVERFLOW: return "DAT_ASYNC_ERROR_EVD_OVERFLOW";
    default: {
        char buf[48];
        std::snprintf(buf, sizeof buf, "event 0x%x", static_cast<unsigned>(ev.event_number));
        return buf;
    }
    }
}

// ---- registry ---------------------------------------------------------------------

std::vector<std::string> registry_names()
{
    constexpr DAT_COUNT kMax = 256;
    std::vector<DAT_PROVIDER_INFO> infos(kMax);
    std::vector<DAT_PROVIDER_INFO *> ptrs(kMax);
    for (DAT_COUNT i = 0; i < kMax; ++i)
        ptrs[static_cast<std::size_t>(i)] = &infos[static_cast<std::size_t>(i)];
    DAT_COUNT n = 0;
    std::vector<std::string> names;
    if (dat_registry_list_providers(kMax, &n, ptrs.data()) != DAT_SUCCESS)
        return names;
    for (DAT_COUNT i = 0; i < n && i < kMax; ++i) {
        const char *name = infos[static_cast<std::size_t>(i)].ia_name;
        names.emplace_back(name, strnlen(name, DAT_NAME_MAX_LENGTH));
    }
    return names;
}

std::string names_text(const std::vector<std::string> &names)
{
    constexpr std::size_t kShown = 8;
    std::string out;
    for (std::size_t i = 0; i < names.size() && i < kShown; ++i)
        out += (i ? ", " : "") + names[i];
    if (names.size() > kShown)
        out += " and " + std::to_string(names.size() - kShown) + " more (datinfo --no-open lists them)";
    return out;
}

// ---- the IA -------------------------------------------------------------------------

std::string sockaddr_text(const sockaddr *sa)
{
    char buf[INET6_ADDRSTRLEN] = "";
    if (!sa)
        return "(none)";
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in *>(sa)->sin_addr, buf, sizeof buf);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr, buf, sizeof buf);
    else
        return "(address family " + std::to_string(sa->sa_family) + ")";
    return buf;
}

Ia::~Ia()
{
    pz_.reset();
    if (ia_ != DAT_HANDLE_NULL && dat_ia_close(ia_, DAT_CLOSE_GRACEFUL_FLAG) != DAT_SUCCESS)
        dat_ia_close(ia_, DAT_CLOSE_ABRUPT_FLAG);
}

void Ia::open(const std::string &name)
{
    name_ = name;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    async_evd_ = DAT_HANDLE_NULL;
    DAT_RETURN r = dat_ia_open(const_cast<char *>(name.c_str()), 16, &async_evd_, &ia);
    if (r != DAT_SUCCESS) {
        const std::string known = names_text(registry_names());
        throw Error("cannot open IA '" + name + "': " + dat_text(r) +
                    (known.empty() ? std::string(" (the registry lists no dat.conf entry)")
                                   : " (dat.conf entries: " + known + ")"));
    }
    ia_ = ia;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    dat_check(dat_ia_query(ia_, &async, DAT_IA_FIELD_ALL, &attr_, 0, nullptr), "dat_ia_query");
    const sockaddr *sa = attr_.ia_address_ptr;
    if (sa && sa->sa_family == AF_INET)
        std::memcpy(&address_, sa, sizeof(sockaddr_in));
    else if (sa && sa->sa_family == AF_INET6)
        std::memcpy(&address_, sa, sizeof(sockaddr_in6));
    attr_.ia_address_ptr = nullptr; // points into the provider; we keep our copy
    dat_check(dat_pz_create(ia_, pz_.out()), "dat_pz_create");
}

std::string Ia::vendor() const
{
    return std::string(attr_.vendor_name, strnlen(attr_.vendor_name, sizeof attr_.vendor_name));
}

std::string Ia::address_text() const { return sockaddr_text(reinterpret_cast<const sockaddr *>(&address_)); }

// ---- registered memory ----------------------------------------------------------------

Memory::~Memory()
{
    lmr_.reset();
    std::free(data_);
}

void Memory::create(Ia &ia, std::size_t len, const char *what)
{
    void *p = nullptr;
    if (posix_memalign(&p, 4096, len) != 0)
        throw Error(std::string("out of memory for ") + what + " (" + std::to_string(len) + " bytes)");
    data_ = static_cast<unsigned char *>(p);
    len_ = len;
    std::memset(data_, 0, len_); // touch every page before measuring
    DAT_REGION_DESCRIPTION region;
    region.for_va = data_;
    DAT_VLEN registered_size = 0;
    DAT_VADDR registered_address = 0;
    DAT_RETURN r = dat_lmr_create(ia.get(), DAT_MEM_TYPE_VIRTUAL, region, len_, ia.pz(), DAT_MEM_PRIV_ALL_FLAG,
                                  DAT_VA_TYPE_VA, lmr_.out(), &lmr_context_, &rmr_context_, &registered_size,
                                  &registered_address);
    if (r != DAT_SUCCESS)
        dat_fail(r, "dat_lmr_create", std::string(what) + ", " + std::to_string(len_) + " bytes");
}

// ---- sample clock ----------------------------------------------------------------------

namespace {

// The mean cost of one steady_clock::now(), in nanoseconds.
double clock_cost_ns()
{
    constexpr int kCalls = 256;
    const auto t0 = Clock::now();
    for (int i = 0; i < kCalls - 2; ++i)
        (void)Clock::now();
    const auto t1 = Clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / (kCalls - 1);
}

} // namespace

bool SampleClock::choose(const std::string &choice, [[maybe_unused]] std::string *error)
{
    const double cost_ns = clock_cost_ns();
    bool want_tsc = choice == "tsc" || (choice == "auto" && cost_ns > 150);
#if !defined(__x86_64__)
    if (choice == "tsc") {
        *error = "--timer tsc: this CPU has no time-stamp counter datperf can read (x86-64 only)";
        return false;
    }
    want_tsc = false;
#endif
    tsc_ = want_tsc;
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s (clock_gettime costs %.0f ns a call here)", tsc_ ? "TSC" : "clock_gettime",
                  cost_ns);
    description_ = buf;
    return true;
}

double SampleClock::us_per_tick(const Mark &since) const
{
    const Mark end = mark();
    if (!tsc_)
        return 1e-3; // nanosecond stamps
    if (end.stamp <= since.stamp)
        throw Error("the time-stamp counter did not advance over a phase (--timer clock measures without it)");
    return us_between(since.wall, end.wall) / static_cast<double>(end.stamp - since.stamp);
}

SampleClock &sample_clock()
{
    static SampleClock clock;
    return clock;
}

// ---- events ---------------------------------------------------------------------------

void Events::check_deadline(Spin &s, const char *waiting_for)
{
    const auto now = Clock::now();
    if (s.since == Clock::time_point{}) {
        s.since = now; // the first check starts the clock
        return;
    }
    if (now - s.since > std::chrono::duration<double>(timeout_s_)) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "nothing for %.0f s", timeout_s_);
        throw Error(std::string(buf) + " while waiting for " + waiting_for + " (--timeout)");
    }
}

void Events::next_slow(DAT_EVD_HANDLE evd, DAT_EVENT *ev, const char *waiting_for, DAT_RETURN r)
{
    Spin spin_state;
    for (;;) {
        if (DAT_GET_TYPE(r) != DAT_QUEUE_EMPTY)
            dat_fail(r, "dat_evd_dequeue", std::string("waiting for ") + waiting_for);
        spin(spin_state, waiting_for);
        r = dat_evd_dequeue(evd, ev);
        if (r == DAT_SUCCESS)
            return;
    }
}

void Events::next_waiting(DAT_EVD_HANDLE evd, DAT_EVENT *ev, const char *waiting_for, double timeout_s)
{
    const auto since = Clock::now();
    for (;;) {
        DAT_COUNT nmore = 0;
        DAT_RETURN r = dat_evd_wait(evd, 100000, 1, ev, &nmore); // 100 ms slices: the deadline
        if (r == DAT_SUCCESS)
            return;
        if (DAT_GET_TYPE(r) != DAT_TIMEOUT_EXPIRED)
            dat_fail(r, "dat_evd_wait", std::string("waiting for ") + waiting_for);
        if (timeout_s > 0 && Clock::now() - since > std::chrono::duration<double>(timeout_s)) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "nothing for %.0f s", timeout_s);
            throw Error(std::string(buf) + " while waiting for " + waiting_for + " (--timeout)");
        }
    }
}

// ---- progress line ----------------------------------------------------------------------

void Progress::start(const std::string &label, std::uint64_t total)
{
    label_ = label;
    total_ = total;
    shown_ = false;
    start_ = last_ = Clock::now();
}

void Progress::tick_slow(std::uint64_t done)
{
    auto now = Clock::now();
    if (now - start_ < std::chrono::seconds(1) || now - last_ < std::chrono::milliseconds(250))
        return;
    last_ = now;
    shown_ = true;
    std::fprintf(stderr, "\rdatperf: %s: %llu/%llu (%.0f%%)   ", label_.c_str(),
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_),
                 total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0);
    std::fflush(stderr);
}

void Progress::finish()
{
    if (shown_) {
        std::fprintf(stderr, "\r%*s\r", static_cast<int>(label_.size()) + 48, "");
        std::fflush(stderr);
    }
    shown_ = false;
}

// ---- control messages --------------------------------------------------------------------

namespace {

constexpr std::size_t kSlotSize = 256;
static_assert(sizeof(CtrlMsg) <= kSlotSize, "a control message fits one slot");

const char *msg_name(Msg m)
{
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

DAT_TIMEOUT dat_timeout(double seconds)
{
    double us = seconds * 1e6;
    return us >= static_cast<double>(UINT32_MAX - 1) ? DAT_TIMEOUT_INFINITE : static_cast<DAT_TIMEOUT>(us);
}

} // namespace

CtrlMsg ctrl_message(Msg type)
{
    CtrlMsg m;
    std::memset(&m, 0, sizeof m);
    m.magic = kCtrlMagic;
    m.type = type;
    return m;
}

CtrlMsg run_message(const Phase &ph)
{
    CtrlMsg m = ctrl_message(Msg::Run);
    m.workload = ph.workload;
    m.completion = ph.completion;
    m.size = ph.size;
    m.iters = ph.iters;
    m.warmup = ph.warmup;
    m.window = static_cast<std::uint32_t>(ph.window);
    m.endpoints = static_cast<std::uint32_t>(ph.endpoints);
    return m;
}

Phase phase_of(const CtrlMsg &m)
{
    Phase ph;
    ph.workload = m.workload;
    ph.completion = m.completion == Completion::Wait ? Completion::Wait : Completion::Poll;
    ph.size = m.size;
    ph.iters = m.iters;
    ph.warmup = m.warmup;
    ph.window = static_cast<int>(std::max<std::uint32_t>(1, m.window));
    ph.endpoints = static_cast<int>(m.endpoints);
    return ph;
}

void Control::create(Ia &ia, DAT_EVD_HANDLE conn_evd, double timeout_s)
{
    timeout_s_ = timeout_s;
    mem_.create(ia, (kSlots + 1) * kSlotSize, "control messages");
    dat_check(dat_evd_create(ia.get(), 2 * kSlots + 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, evd_.out()),
              "dat_evd_create");
    DAT_EP_ATTR attr = endpoint_attr(ia, kSlotSize, kSlots, 4, 0);
    dat_check(dat_ep_create(ia.get(), ia.pz(), evd_.get(), evd_.get(), conn_evd, &attr, ep_.out()),
              "dat_ep_create");
    // Receives may be posted before the connection: the peer's first
    // message always finds one.
    for (int slot = 0; slot < kSlots; ++slot)
        post_recv(slot);
}

void Control::post_recv(int slot)
{
    DAT_LMR_TRIPLET iov = mem_.iov(static_cast<std::size_t>(slot) * kSlotSize, kSlotSize);
    DAT_DTO_COOKIE c;
    c.as_64 = static_cast<DAT_UINT64>(slot);
    dat_check(dat_ep_post_recv(ep_.get(), 1, &iov, c, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_recv");
}

void Control::send(const CtrlMsg &m, Events &ev)
{
    std::memcpy(mem_.data() + kSlots * kSlotSize, &m, sizeof m);
    DAT_LMR_TRIPLET iov = mem_.iov(kSlots * kSlotSize, sizeof m);
    DAT_DTO_COOKIE c;
    c.as_64 = kSlots;
    dat_check(dat_ep_post_send(ep_.get(), 1, &iov, c, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_send");
    ++sends_posted_;
    while (sends_done_ < sends_posted_)
        pump(ev, "the completion of a control message", timeout_s_);
}

void Control::pump(Events &ev, const char *waiting_for, double timeout_s)
{
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

CtrlMsg Control::receive(Events &ev, Msg expect, const char *waiting_for, double timeout_s)
{
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

DAT_EP_ATTR endpoint_attr(const Ia &ia, std::uint64_t max_size, int recv_dtos, int request_dtos, int rdma_reads)
{
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

const char *role_name(ConnRole r)
{
    switch (r) {
    case ConnRole::Control: return "control";
    case ConnRole::Data: return "data";
    case ConnRole::ConnRate: return "conn-rate";
    }
    return "unknown";
}

} // namespace

void connect_endpoint(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual, ConnRole role,
                      DAT_EVD_HANDLE conn_evd, Events &ev, double timeout_s)
{
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

DAT_CR_HANDLE request_of(const DAT_EVENT &e, ConnRole role)
{
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

void wait_request(DAT_EVD_HANDLE cr_evd, ConnRole role, Events &ev, double timeout_s, DAT_CR_HANDLE *cr_out)
{
    DAT_EVENT e;
    ev.next_waiting(cr_evd, &e, "a connection request", timeout_s);
    *cr_out = request_of(e, role);
}

void accept_request(DAT_CR_HANDLE cr, DAT_EP_HANDLE ep, DAT_EVD_HANDLE conn_evd, Events &ev, double timeout_s)
{
    dat_check(dat_cr_accept(cr, ep, 0, nullptr), "dat_cr_accept");
    DAT_EVENT e;
    ev.next_waiting(conn_evd, &e, "the accepted connection to be established", timeout_s);
    if (e.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
        throw Error("the accepted connection failed: " + event_text(e));
}

// ---- the data side, either role ---------------------------------------------------------------

namespace {

// Receives posted at once: twice the window (the sender may run a window
// ahead of the receiver's reposting), at least 16.
int recv_depth_for(int window) { return std::max(16, 2 * window); }

// Creates the data endpoint on `evd_out` and fills the DataPath with what
// the provider granted (dat_ep_query).
void create_data_endpoint(Ia &ia, Memory &mem, std::uint64_t max_size, int window, DAT_EVD_HANDLE conn_evd,
                          OwnedEvd &evd_out, OwnedEp &ep_out, DataPath *d)
{
    DAT_EP_ATTR want = endpoint_attr(ia, max_size, recv_depth_for(window), window + 1, window);
    dat_check(dat_evd_create(ia.get(), want.max_recv_dtos + want.max_request_dtos + 16, DAT_HANDLE_NULL,
                             DAT_EVD_DTO_FLAG, evd_out.out()),
              "dat_evd_create");
    DAT_RETURN r = dat_ep_create(ia.get(), ia.pz(), evd_out.get(), evd_out.get(), conn_evd, &want, ep_out.out());
    if (r != DAT_SUCCESS)
        dat_fail(r, "dat_ep_create",
                 "data endpoint: " + std::to_string(want.max_recv_dtos) + " receives, " +
                     std::to_string(want.max_request_dtos) + " requests, " + std::to_string(want.max_rdma_read_out) +
                     " RDMA reads, messages up to " + std::to_string(want.max_message_size) + " bytes");
    DAT_EP_PARAM got;
    std::memset(&got, 0, sizeof got);
    DAT_EP_ATTR granted = want;
    if (dat_ep_query(ep_out.get(), DAT_EP_FIELD_ALL, &got) == DAT_SUCCESS)
        granted = got.ep_attr;
    d->ep = ep_out.get();
    d->evd = evd_out.get();
    d->mem = &mem;
    d->max_size = max_size;
    d->recv_depth = std::max(1, std::min(granted.max_recv_dtos, want.max_recv_dtos));
    // One request slot is kept spare: the ping-pongs post the next message
    // before the completion of the previous one is reaped.
    d->request_depth = std::max(1, std::min(granted.max_request_dtos, want.max_request_dtos) - 1);
    d->read_depth = std::max(1, std::min(granted.max_rdma_read_out > 0 ? granted.max_rdma_read_out : window, window));
    if (granted.max_message_size < max_size)
        throw Error("the data endpoint takes messages up to " + std::to_string(granted.max_message_size) +
                    " bytes only; the largest size asked for is " + std::to_string(max_size));
}

CtrlMsg hello_of(const Memory &mem, std::uint64_t max_size, int window, int rdma_read_in)
{
    CtrlMsg m = ctrl_message(Msg::Hello);
    m.mem_address = reinterpret_cast<std::uintptr_t>(mem.data());
    m.mem_length = mem.size();
    m.rmr_context = mem.rmr_context();
    m.max_size = max_size;
    m.window = static_cast<std::uint32_t>(window);
    m.rdma_read_in = static_cast<std::uint32_t>(rdma_read_in);
    return m;
}

RemoteRegion remote_of(const CtrlMsg &hello)
{
    RemoteRegion r;
    r.address = hello.mem_address;
    r.length = hello.mem_length;
    r.rmr_context = hello.rmr_context;
    return r;
}

int granted_read_in(DAT_EP_HANDLE ep, int fallback)
{
    DAT_EP_PARAM p;
    std::memset(&p, 0, sizeof p);
    if (dat_ep_query(ep, DAT_EP_FIELD_ALL, &p) == DAT_SUCCESS && p.ep_attr.max_rdma_read_in > 0)
        return p.ep_attr.max_rdma_read_in;
    return fallback;
}

} // namespace

// ---- server ---------------------------------------------------------------------------------------

int run_server(const Options &opt, const std::string &ia_name, int ready_fd)
{
    const bool loopback = ready_fd >= 0;
    try {
        Events ev(opt.timeout_s);
        Ia ia; // first: everything below is freed before the IA closes
        ia.open(ia_name);
        OwnedEvd cr_evd, conn_evd;
        dat_check(dat_evd_create(ia.get(), 512, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, cr_evd.out()), "dat_evd_create");
        dat_check(dat_evd_create(ia.get(), 64, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, conn_evd.out()),
                  "dat_evd_create");
        OwnedPsp psp;
        DAT_CONN_QUAL qual = 0;
        if (opt.port >= 0) {
            qual = static_cast<DAT_CONN_QUAL>(opt.port);
            DAT_RETURN r = dat_psp_create(ia.get(), qual, cr_evd.get(), DAT_PSP_CONSUMER_FLAG, psp.out());
            if (r != DAT_SUCCESS)
                dat_fail(r, "dat_psp_create", "port " + std::to_string(qual) + " (in use?)");
        } else {
            dat_check(dat_psp_create_any(ia.get(), &qual, cr_evd.get(), DAT_PSP_CONSUMER_FLAG, psp.out()),
                      "dat_psp_create_any");
        }
        Control ctrl;
        ctrl.create(ia, conn_evd.get(), opt.timeout_s);
        if (loopback) {
            std::string line = std::to_string(qual) + "\n";
            if (write(ready_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
                throw Error("cannot tell the client the port");
            close(ready_fd);
        } else {
            std::printf("datperf server: %s (%s) on %s port %llu; waiting for a client\n", ia_name.c_str(),
                        ia.vendor().c_str(), ia.address_text().c_str(), static_cast<unsigned long long>(qual));
            std::fflush(stdout);
        }

        DAT_CR_HANDLE cr = DAT_HANDLE_NULL;
        wait_request(cr_evd.get(), ConnRole::Control, ev, loopback ? opt.timeout_s : 0, &cr);
        accept_request(cr, ctrl.ep(), conn_evd.get(), ev, opt.timeout_s);
        CtrlMsg hello = ctrl.receive(ev, Msg::Hello, "the client's Hello", opt.timeout_s);
        if (hello.max_size < 1 || hello.max_size > kMaxSize || hello.window < 1 || hello.window > 4096)
            throw Error("the client's Hello asks for sizes up to " + std::to_string(hello.max_size) +
                        " bytes with a window of " + std::to_string(hello.window) + ": out of range");

        Memory mem;
        mem.create(ia, 2 * hello.max_size, "data buffers");
        OwnedEvd data_evd;
        OwnedEp data_ep;
        DataPath d;
        create_data_endpoint(ia, mem, hello.max_size, static_cast<int>(hello.window), conn_evd.get(), data_evd,
                             data_ep, &d);
        d.remote = remote_of(hello);
        d.read_depth = std::min<int>(d.read_depth, static_cast<int>(std::max<std::uint32_t>(1, hello.rdma_read_in)));
        ctrl.send(hello_of(mem, hello.max_size, d.request_depth, granted_read_in(d.ep, d.read_depth)), ev);
        wait_request(cr_evd.get(), ConnRole::Data, ev, opt.timeout_s, &cr);
        accept_request(cr, d.ep, conn_evd.get(), ev, opt.timeout_s);

        ConnRateSetup crs;
        crs.ia = &ia;
        crs.cr_evd = cr_evd.get();
        crs.timeout_s = opt.timeout_s;
        for (;;) {
            // No deadline: between measurements the client may run the
            // comparison peers for a while; a client that goes away breaks
            // the control connection, which ends this wait.
            CtrlMsg m = ctrl.receive(ev, Msg{}, "the client's next request", 0);
            if (m.type == Msg::Quit) {
                ctrl.send(ctrl_message(Msg::Bye), ev);
                break;
            }
            if (m.type != Msg::Run)
                throw Error("control protocol: expected Run or Quit");
            const WorkloadInfo *known = nullptr;
            for (const auto &w : workloads())
                if (w.id == m.workload)
                    known = &w;
            if (!known)
                throw Error("the client asks for workload " + std::to_string(static_cast<unsigned>(m.workload)) +
                            ", which this datperf does not know");
            Phase ph = phase_of(m);
            if (known->sized && (ph.size < 1 || ph.size > hello.max_size))
                throw Error("the client asks for " + std::to_string(ph.size) + " bytes; its Hello said 1.." +
                            std::to_string(hello.max_size));
            ev.set_mode(ph.completion);
            server_phase(d, ctrl, ev, ph, crs);
        }
        if (!loopback)
            std::printf("datperf server: the client is done\n");
        return 0;
    } catch (const Error &e) {
        std::fprintf(stderr, "datperf (server): %s\n", e.what());
    } catch (const std::exception &e) {
        std::fprintf(stderr, "datperf (server): %s\n", e.what());
    }
    return 1;
}

// ---- client ---------------------------------------------------------------------------------------

namespace {

void resolve(const std::string &host, sockaddr_storage *out)
{
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (rc != 0 || !res)
        throw Error("cannot resolve '" + host + "': " + gai_strerror(rc));
    std::memcpy(out, res->ai_addr, std::min<std::size_t>(res->ai_addrlen, sizeof *out));
    freeaddrinfo(res);
}

// A label for the progress line: "pingpong 4k".
std::string phase_label(const Phase &ph)
{
    if (ph.workload == Workload::ConnRate)
        return std::string(info(ph.workload).name) + " " + std::to_string(ph.endpoints) + " endpoints";
    return std::string(info(ph.workload).name) + " " + size_text(ph.size);
}

} // namespace

SessionResults run_client(const Options &opt, const std::string &ia_name, const std::string &host,
                          DAT_CONN_QUAL qual, const ClientHooks &hooks)
{
    Events ev(opt.timeout_s);
    Progress progress(opt.progress > 0);
    Ia ia; // first: everything below is freed before the IA closes
    ia.open(ia_name);
    OwnedEvd conn_evd;
    dat_check(dat_evd_create(ia.get(), 64, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, conn_evd.out()),
              "dat_evd_create");
    Control ctrl;
    ctrl.create(ia, conn_evd.get(), opt.timeout_s);

    sockaddr_storage server{};
    if (host.empty())
        std::memcpy(&server, ia.address(), sizeof server);
    else
        resolve(host, &server);
    auto server_addr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&server);
    connect_endpoint(ctrl.ep(), server_addr, qual, ConnRole::Control, conn_evd.get(), ev, opt.timeout_s);

    std::uint64_t max_size = 64;
    for (auto w : opt.workloads)
        if (info(w).sized)
            max_size = std::max(max_size, opt.sizes.back());
    Memory mem;
    mem.create(ia, 2 * max_size, "data buffers");
    OwnedEvd data_evd;
    OwnedEp data_ep;
    DataPath d;
    create_data_endpoint(ia, mem, max_size, opt.window, conn_evd.get(), data_evd, data_ep, &d);
    ctrl.send(hello_of(mem, max_size, opt.window, granted_read_in(d.ep, d.read_depth)), ev);
    CtrlMsg hello = ctrl.receive(ev, Msg::Hello, "the server's Hello", opt.timeout_s);
    d.remote = remote_of(hello);
    // Reads in flight are bounded by what we may issue and the server serves.
    d.read_depth = std::min<int>(d.read_depth, static_cast<int>(std::max<std::uint32_t>(1, hello.rdma_read_in)));
    connect_endpoint(d.ep, server_addr, qual, ConnRole::Data, conn_evd.get(), ev, opt.timeout_s);

    SessionResults out;
    std::string timer_error;
    if (!sample_clock().choose(opt.timer, &timer_error))
        throw Error(timer_error);
    out.info.timer = sample_clock().description();
    out.info.ia_name = ia_name;
    out.info.vendor = ia.vendor();
    out.info.ia_address = ia.address_text();
    out.info.server_address = sockaddr_text(reinterpret_cast<const sockaddr *>(&server));
    if (hooks.on_info)
        hooks.on_info(out.info);

    ConnRateSetup crs;
    crs.ia = &ia;
    crs.server = server_addr;
    crs.qual = qual;
    crs.timeout_s = opt.timeout_s;
    for (auto w : opt.workloads) {
        TestResult t;
        t.workload = w;
        t.completion = completion_for(opt, w);
        switch (w) {
        case Workload::PingPong:
        case Workload::WriteLat: t.window = 1; break;
        case Workload::WriteBw:
        case Workload::SendBw: t.window = std::min(opt.window, d.request_depth); break;
        case Workload::ReadBw: t.window = std::min(opt.window, d.read_depth); break;
        case Workload::ConnRate: t.window = std::min(opt.window, 256); break;
        }
        if (hooks.on_test)
            hooks.on_test(t);
        std::vector<std::uint64_t> sizes = opt.sizes;
        if (!info(w).sized)
            sizes = {static_cast<std::uint64_t>(opt.endpoints)};
        for (auto size : sizes) {
            Phase ph;
            ph.workload = w;
            ph.completion = t.completion;
            ph.size = info(w).sized ? size : 0;
            ph.iters = iters_for(opt, w, size);
            ph.warmup = warmup_for(opt, w, ph.iters);
            ph.window = t.window;
            ph.endpoints = info(w).sized ? 0 : opt.endpoints;
            ev.set_mode(ph.completion);
            progress.start(phase_label(ph), ph.warmup + ph.iters);
            Point p = client_phase(d, ctrl, ev, ph, progress, crs);
            progress.finish();
            t.points.push_back(p);
            if (hooks.on_point)
                hooks.on_point(p);
        }
        out.tests.push_back(std::move(t));
    }
    ctrl.send(ctrl_message(Msg::Quit), ev);
    ctrl.receive(ev, Msg::Bye, "the server's Bye", opt.timeout_s);
    return out;
}

} // namespace datperf
