// SPDX-License-Identifier: BSD-3-Clause
#include "connected.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

namespace conformance {

// ---- text -------------------------------------------------------------------

std::string event_name(DAT_EVENT_NUMBER n) {
    switch (n) {
#define C(x)                                                                                                           \
    case x: return #x;
        C(DAT_DTO_COMPLETION_EVENT)
        C(DAT_RMR_BIND_COMPLETION_EVENT)
        C(DAT_CONNECTION_REQUEST_EVENT)
        C(DAT_CONNECTION_EVENT_ESTABLISHED)
        C(DAT_CONNECTION_EVENT_PEER_REJECTED)
        C(DAT_CONNECTION_EVENT_NON_PEER_REJECTED)
        C(DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR)
        C(DAT_CONNECTION_EVENT_DISCONNECTED)
        C(DAT_CONNECTION_EVENT_BROKEN)
        C(DAT_CONNECTION_EVENT_TIMED_OUT)
        C(DAT_CONNECTION_EVENT_UNREACHABLE)
        C(DAT_ASYNC_ERROR_EVD_OVERFLOW)
        C(DAT_ASYNC_ERROR_IA_CATASTROPHIC)
        C(DAT_ASYNC_ERROR_EP_BROKEN)
        C(DAT_ASYNC_ERROR_TIMED_OUT)
        C(DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR)
        C(DAT_HA_DOWN_TO_1)
        C(DAT_HA_UP_TO_MULTI_PATH)
        C(DAT_SOFTWARE_EVENT)
#undef C
    default: {
        std::ostringstream os;
        os << "event 0x" << std::hex << static_cast<unsigned>(n);
        return os.str();
    }
    }
}

namespace {
// names[v] with `prefix`, or `what` and the number when v is out of the table.
template <size_t N>
std::string table_name(const char *const (&names)[N], unsigned v, const char *prefix, const char *what) {
    if (v < N)
        return std::string(prefix) + names[v];
    return std::string(what) + " " + std::to_string(v);
}
} // namespace

std::string dto_status_name(DAT_DTO_COMPLETION_STATUS s) {
    static const char *const names[] = {"DAT_DTO_SUCCESS",
                                        "DAT_DTO_ERR_FLUSHED",
                                        "DAT_DTO_ERR_LOCAL_LENGTH",
                                        "DAT_DTO_ERR_LOCAL_EP",
                                        "DAT_DTO_ERR_LOCAL_PROTECTION",
                                        "DAT_DTO_ERR_BAD_RESPONSE",
                                        "DAT_DTO_ERR_REMOTE_ACCESS",
                                        "DAT_DTO_ERR_REMOTE_RESPONDER",
                                        "DAT_DTO_ERR_TRANSPORT",
                                        "DAT_DTO_ERR_RECEIVER_NOT_READY",
                                        "DAT_DTO_ERR_PARTIAL_PACKET",
                                        "DAT_RMR_OPERATION_FAILED",
                                        "DAT_DTO_ERR_LOCAL_MM_ERROR"};
    return table_name(names, static_cast<unsigned>(s), "", "dto status");
}

std::string ep_state_name(DAT_EP_STATE s) {
    static const char *const names[] = {"UNCONNECTED",
                                        "UNCONFIGURED_UNCONNECTED",
                                        "RESERVED",
                                        "UNCONFIGURED_RESERVED",
                                        "PASSIVE_CONNECTION_PENDING",
                                        "UNCONFIGURED_PASSIVE",
                                        "ACTIVE_CONNECTION_PENDING",
                                        "TENTATIVE_CONNECTION_PENDING",
                                        "UNCONFIGURED_TENTATIVE",
                                        "CONNECTED",
                                        "DISCONNECT_PENDING",
                                        "DISCONNECTED",
                                        "COMPLETION_PENDING",
                                        "CONNECTED_SINGLE_PATH",
                                        "CONNECTED_MULTI_PATH"};
    return table_name(names, static_cast<unsigned>(s), "DAT_EP_STATE_", "ep state");
}

std::string event_text(const DAT_EVENT &ev) {
    std::ostringstream os;
    os << event_name(ev.event_number);
    switch (ev.event_number) {
    case DAT_DTO_COMPLETION_EVENT: {
        const auto &d = ev.event_data.dto_completion_event_data;
        os << " {status " << dto_status_name(d.status) << ", cookie 0x" << std::hex << d.user_cookie.as_64 << std::dec
           << ", length " << d.transfered_length << ", operation " << d.operation << ", ep " << d.ep_handle << "}";
        break;
    }
    case DAT_CONNECTION_REQUEST_EVENT: {
        const auto &d = ev.event_data.cr_arrival_event_data;
        os << " {cr " << d.cr_handle << ", conn_qual " << d.conn_qual << "}";
        break;
    }
    case DAT_CONNECTION_EVENT_ESTABLISHED:
    case DAT_CONNECTION_EVENT_PEER_REJECTED:
    case DAT_CONNECTION_EVENT_NON_PEER_REJECTED:
    case DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR:
    case DAT_CONNECTION_EVENT_DISCONNECTED:
    case DAT_CONNECTION_EVENT_BROKEN:
    case DAT_CONNECTION_EVENT_TIMED_OUT:
    case DAT_CONNECTION_EVENT_UNREACHABLE: {
        const auto &d = ev.event_data.connect_event_data;
        os << " {ep " << d.ep_handle << ", private_data_size " << d.private_data_size << "}";
        break;
    }
    default: break;
    }
    return os.str();
}

// ---- events -----------------------------------------------------------------

DAT_RETURN next_event(DAT_EVD_HANDLE evd, DAT_EVENT *ev, DAT_TIMEOUT timeout_us) {
    DAT_COUNT nmore = 0;
    return dat_evd_wait(evd, timeout_us, 1, ev, &nmore);
}

::testing::AssertionResult wait_event(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want, DAT_EVENT *out,
                                      DAT_TIMEOUT timeout_us) {
    DAT_EVENT ev{};
    DAT_RETURN r = next_event(evd, &ev, timeout_us);
    if (r != DAT_SUCCESS)
        return ::testing::AssertionFailure() << "waiting " << timeout_us / 1000 << " ms for " << event_name(want)
                                             << ": dat_evd_wait -> " << ret_text(r);
    if (out)
        *out = ev;
    if (ev.event_number != want)
        return ::testing::AssertionFailure() << "expected " << event_name(want) << ", got " << event_text(ev);
    return ::testing::AssertionSuccess();
}

::testing::AssertionResult wait_dto(DAT_EVD_HANDLE evd, DAT_EVENT *out, DAT_TIMEOUT timeout_us) {
    return wait_event(evd, DAT_DTO_COMPLETION_EVENT, out, timeout_us);
}

::testing::AssertionResult wait_dto_ok(DAT_EVD_HANDLE evd, DAT_UINT64 ck, DAT_EVENT *out, DAT_TIMEOUT timeout_us) {
    DAT_EVENT ev{};
    auto r = wait_dto(evd, &ev, timeout_us);
    if (out)
        *out = ev;
    if (!r)
        return r;
    const auto &d = ev.event_data.dto_completion_event_data;
    if (d.status != DAT_DTO_SUCCESS || d.user_cookie.as_64 != ck)
        return ::testing::AssertionFailure()
               << "expected a successful completion with cookie 0x" << std::hex << ck << ", got " << event_text(ev);
    return ::testing::AssertionSuccess();
}

WaitAcrossPost wait_across_post(const std::function<DAT_RETURN()> &wait, const std::function<DAT_RETURN()> &post) {
    WaitAcrossPost w;
    std::atomic<bool> waiting{false};
    std::chrono::steady_clock::time_point woke;
    std::thread waiter([&] {
        waiting.store(true);
        w.wait = wait();
        woke = std::chrono::steady_clock::now();
    });
    while (!waiting.load())
        std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(50)); // asleep by now
    const auto posted = std::chrono::steady_clock::now();
    w.post = post();
    waiter.join();
    w.ms = static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(woke - posted).count());
    return w;
}

WaitAcrossPost wait_across_post(DAT_EVD_HANDLE evd, const std::function<DAT_RETURN()> &post) {
    DAT_EVENT event{};
    WaitAcrossPost w = wait_across_post(
        [&] {
            DAT_COUNT nmore = 0;
            return dat_evd_wait(evd, 10'000'000, 1, &event, &nmore);
        },
        post);
    w.event = event;
    return w;
}

::testing::AssertionResult wait_connection_end(DAT_EVD_HANDLE evd, DAT_EVENT *out, DAT_TIMEOUT timeout_us) {
    DAT_EVENT ev{};
    DAT_RETURN r = next_event(evd, &ev, timeout_us);
    if (r != DAT_SUCCESS)
        return ::testing::AssertionFailure()
               << "waiting " << timeout_us / 1000 << " ms for DISCONNECTED or BROKEN: dat_evd_wait -> " << ret_text(r);
    if (out)
        *out = ev;
    if (ev.event_number != DAT_CONNECTION_EVENT_DISCONNECTED && ev.event_number != DAT_CONNECTION_EVENT_BROKEN)
        return ::testing::AssertionFailure() << "expected DISCONNECTED or BROKEN, got " << event_text(ev);
    return ::testing::AssertionSuccess();
}

::testing::AssertionResult no_event(DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout_us) {
    DAT_EVENT ev{};
    DAT_RETURN r = next_event(evd, &ev, timeout_us);
    if (r == DAT_SUCCESS)
        return ::testing::AssertionFailure() << "unexpected event " << event_text(ev);
    if (DAT_GET_TYPE(r) != DAT_TIMEOUT_EXPIRED)
        return ::testing::AssertionFailure() << "dat_evd_wait -> " << ret_text(r) << " (expected a timeout)";
    return ::testing::AssertionSuccess();
}

std::vector<DAT_EVENT> drain(DAT_EVD_HANDLE evd) {
    std::vector<DAT_EVENT> out;
    for (int i = 0; i < 100000; ++i) {
        DAT_EVENT ev{};
        if (dat_evd_dequeue(evd, &ev) != DAT_SUCCESS)
            break;
        out.push_back(ev);
    }
    return out;
}

DAT_DTO_COOKIE cookie(DAT_UINT64 v) {
    DAT_DTO_COOKIE c;
    c.as_64 = v;
    return c;
}

::testing::AssertionResult flushed_in_order(DAT_EVD_HANDLE evd, int n, DAT_UINT64 first) {
    for (int i = 0; i < n; ++i) {
        DAT_EVENT ev{};
        if (auto r = wait_dto(evd, &ev); !r)
            return r << " (completion " << i << " of " << n << " flushed ones)";
        const auto &d = ev.event_data.dto_completion_event_data;
        if (d.status != DAT_DTO_ERR_FLUSHED || d.user_cookie.as_64 != first + i)
            return ::testing::AssertionFailure()
                   << "completion " << i << ": expected DAT_DTO_ERR_FLUSHED with cookie 0x" << std::hex << first + i
                   << " (posting order), got " << event_text(ev);
    }
    return ::testing::AssertionSuccess();
}

DAT_RETURN connect_ep(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual, DAT_TIMEOUT timeout_us,
                      DAT_COUNT pdata_size, const void *pdata) {
    return dat_ep_connect(ep, addr, qual, timeout_us, pdata_size, const_cast<void *>(pdata), DAT_QOS_BEST_EFFORT,
                          DAT_CONNECT_DEFAULT_FLAG);
}

::testing::AssertionResult accept_of_departed_peer(DAT_CR_HANDLE cr, DAT_EP_HANDLE ep, DAT_EVD_HANDLE conn_evd,
                                                   bool *accepted) {
    DAT_RETURN r = dat_cr_accept(cr, ep, 0, nullptr);
    if (accepted)
        *accepted = r == DAT_SUCCESS;
    if (r != DAT_SUCCESS) {
        if (ep_state(ep) != DAT_EP_STATE_UNCONNECTED)
            return ::testing::AssertionFailure()
                   << "the refused accept (" << ret_text(r) << ") left the Endpoint " << ep_state_name(ep_state(ep));
        return ::testing::AssertionSuccess();
    }
    DAT_EVENT ev{};
    if (DAT_RETURN w = next_event(conn_evd, &ev); w != DAT_SUCCESS)
        return ::testing::AssertionFailure() << "no connection event after the accept: dat_evd_wait -> " << ret_text(w);
    if (ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED) {
        auto end = wait_connection_end(conn_evd);
        if (!end)
            return end << " (connected to a departed peer, and it stays so)";
        return end;
    }
    if (ev.event_number != DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR)
        return ::testing::AssertionFailure()
               << "expected ESTABLISHED or ACCEPT_COMPLETION_ERROR, got " << event_text(ev);
    return ::testing::AssertionSuccess();
}

// ---- queries ----------------------------------------------------------------

DAT_EP_STATE ep_state(DAT_EP_HANDLE ep) {
    DAT_EP_STATE st = static_cast<DAT_EP_STATE>(-1);
    DAT_BOOLEAN ri = DAT_FALSE, qi = DAT_FALSE;
    if (dat_ep_get_status(ep, &st, &ri, &qi) != DAT_SUCCESS)
        return static_cast<DAT_EP_STATE>(-1);
    return st;
}

::testing::AssertionResult ep_state_becomes(DAT_EP_HANDLE ep, DAT_EP_STATE want, DAT_TIMEOUT timeout_us) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(timeout_us);
    DAT_EP_STATE st;
    for (;;) {
        st = ep_state(ep);
        if (st == want)
            return ::testing::AssertionSuccess();
        if (std::chrono::steady_clock::now() > deadline)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return ::testing::AssertionFailure() << "endpoint state " << ep_state_name(st) << ", expected "
                                         << ep_state_name(want);
}

DAT_RETURN query_ia(DAT_IA_HANDLE ia, DAT_IA_ATTR *ia_attr, DAT_PROVIDER_ATTR *prov_attr) {
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    return dat_ia_query(ia, &async, ia_attr ? DAT_IA_FIELD_ALL : DAT_IA_FIELD_NONE, ia_attr,
                        prov_attr ? DAT_PROVIDER_FIELD_ALL : DAT_PROVIDER_FIELD_NONE, prov_attr);
}

std::map<std::string, std::string> provider_attrs(DAT_IA_HANDLE ia) {
    IaAttributes a;
    std::map<std::string, std::string> out;
    EXPECT_DAT_OK(a.query(ia));
    const DAT_PROVIDER_ATTR &p = a.provider();
    for (DAT_COUNT i = 0; i < p.num_provider_specific_attr; ++i)
        out[p.provider_specific_attr[i].name] = p.provider_specific_attr[i].value;
    return out;
}

DAT_EP_ATTR query_ep_attr(DAT_EP_HANDLE ep) {
    DAT_EP_PARAM p{};
    // A failed query must not pass for an Endpoint with zero limits (a test
    // would skip for "limits too small" instead of failing).
    DAT_RETURN r = dat_ep_query(ep, DAT_EP_FIELD_ALL, &p);
    EXPECT_EQ(r, DAT_SUCCESS) << "dat_ep_query -> " << ret_text(r);
    return p.ep_attr;
}

DAT_EP_ATTR suite_ep_attr(DAT_IA_HANDLE ia) {
    DAT_IA_ATTR ia_attr{};
    DAT_RETURN r = query_ia(ia, &ia_attr, nullptr);
    EXPECT_EQ(r, DAT_SUCCESS) << "dat_ia_query -> " << ret_text(r);
    auto lim = [](DAT_COUNT want, DAT_COUNT max) { return max > 0 ? std::min(want, max) : want; };
    auto lim_len = [](DAT_SEG_LENGTH want, DAT_SEG_LENGTH max) { return max > 0 ? std::min(want, max) : want; };
    DAT_EP_ATTR a{};
    a.service_type = DAT_SERVICE_TYPE_RC;
    a.max_message_size = lim_len(1u << 20, ia_attr.max_message_size);
    a.max_rdma_size = lim_len(1u << 20, ia_attr.max_rdma_size);
    a.qos = DAT_QOS_BEST_EFFORT;
    a.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.max_recv_dtos = lim(64, ia_attr.max_dto_per_ep);
    a.max_request_dtos = lim(64, ia_attr.max_dto_per_ep);
    a.max_recv_iov = lim(4, ia_attr.max_iov_segments_per_dto);
    a.max_request_iov = lim(4, ia_attr.max_iov_segments_per_dto);
    a.max_rdma_read_in = lim(4, ia_attr.max_rdma_read_per_ep_in);
    a.max_rdma_read_out = lim(4, ia_attr.max_rdma_read_per_ep_out);
    a.srq_soft_hw = DAT_HW_DEFAULT;
    a.max_rdma_read_iov = lim(4, ia_attr.max_iov_segments_per_rdma_read);
    a.max_rdma_write_iov = lim(4, ia_attr.max_iov_segments_per_rdma_write);
    return a;
}

// ---- memory -----------------------------------------------------------------

unsigned char pattern_byte(unsigned char seed, size_t i) {
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u + seed * 0x9E3779B9u;
    return static_cast<unsigned char>((x >> 24) ^ (x >> 11) ^ seed);
}

Buffer::~Buffer() { release(); }

DAT_RETURN Buffer::create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, size_t total, DAT_MEM_PRIV_FLAGS priv, size_t off,
                          size_t len) {
    release();
    void *p = nullptr;
    if (posix_memalign(&p, 4096, std::max<size_t>(total, 1)) != 0)
        return DAT_INSUFFICIENT_RESOURCES;
    data = static_cast<unsigned char *>(p);
    size = total;
    std::memset(data, 0, size);
    reg_off = off;
    reg_len = len ? len : total - off;
    DAT_REGION_DESCRIPTION region;
    region.for_va = data + reg_off;
    return dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, reg_len, pz, priv, DAT_VA_TYPE_VA, &lmr, &lmr_context,
                          &rmr_context, &registered_size, &registered_address);
}

DAT_RETURN Buffer::free_lmr() {
    if (lmr == DAT_HANDLE_NULL)
        return DAT_SUCCESS;
    DAT_RETURN r = dat_lmr_free(lmr);
    lmr = DAT_HANDLE_NULL;
    return r;
}

void Buffer::release() {
    free_lmr();
    std::free(data);
    data = nullptr;
    size = 0;
}

DAT_LMR_TRIPLET Buffer::iov(size_t off, size_t len) const {
    DAT_LMR_TRIPLET t{};
    t.virtual_address = reinterpret_cast<uintptr_t>(data + off);
    t.segment_length = static_cast<DAT_SEG_LENGTH>(len);
    t.lmr_context = lmr_context;
    return t;
}

DAT_RMR_TRIPLET Buffer::rmr(size_t off, size_t len) const {
    DAT_RMR_TRIPLET t{};
    t.virtual_address = reinterpret_cast<uintptr_t>(data + off);
    t.segment_length = static_cast<DAT_SEG_LENGTH>(len);
    t.rmr_context = rmr_context;
    return t;
}

void Buffer::fill(unsigned char seed) {
    for (size_t i = 0; i < size; ++i)
        data[i] = pattern_byte(seed, i);
}

void Buffer::fill_byte(unsigned char b) { std::memset(data, b, size); }

long Buffer::mismatch(size_t off, size_t len, unsigned char seed, size_t pat_off) const {
    for (size_t i = 0; i < len; ++i)
        if (data[off + i] != pattern_byte(seed, pat_off + i))
            return static_cast<long>(off + i);
    return -1;
}

long Buffer::mismatch_byte(size_t off, size_t len, unsigned char b) const {
    for (size_t i = 0; i < len; ++i)
        if (data[off + i] != b)
            return static_cast<long>(off + i);
    return -1;
}

// ---- Side -------------------------------------------------------------------

DAT_RETURN Side::open(const std::string &name) {
    DAT_RETURN r = ia.open(name);
    if (r != DAT_SUCCESS)
        return r;
    if ((r = dat_evd_create(ia.ia, 16, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd)) != DAT_SUCCESS)
        return r;
    if ((r = dat_evd_create(ia.ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_evd)) != DAT_SUCCESS)
        return r;
    if ((r = dat_evd_create(ia.ia, 512, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &req_evd)) != DAT_SUCCESS)
        return r;
    return dat_evd_create(ia.ia, 512, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &recv_evd);
}

DAT_RETURN Side::create_ep_on(DAT_EP_HANDLE *out, DAT_EVD_HANDLE recv, DAT_EVD_HANDLE req, DAT_EVD_HANDLE conn,
                              const DAT_EP_ATTR *attr) {
    DAT_EP_ATTR a = attr ? *attr : suite_ep_attr(ia.ia);
    return dat_ep_create(ia.ia, ia.pz, recv, req, conn, &a, out);
}

DAT_RETURN Side::create_ep(const DAT_EP_ATTR *attr) { return create_ep_on(&ep, recv_evd, req_evd, conn_evd, attr); }

DAT_RETURN Side::register_buffer(Buffer &b, size_t total, DAT_MEM_PRIV_FLAGS priv, size_t off, size_t len) {
    return b.create(ia.ia, ia.pz, total, priv, off, len);
}

DAT_RETURN Side::post_recvs(Buffer &b, int n, DAT_UINT64 first, size_t each) {
    if (DAT_RETURN r = register_buffer(b, each * static_cast<size_t>(n)))
        return r;
    for (int i = 0; i < n; ++i) {
        DAT_LMR_TRIPLET t = b.iov(each * static_cast<size_t>(i), each);
        if (DAT_RETURN r = dat_ep_post_recv(ep, 1, &t, cookie(first + i), DAT_COMPLETION_DEFAULT_FLAG))
            return r;
    }
    return DAT_SUCCESS;
}

void Side::free_ep() {
    if (ep != DAT_HANDLE_NULL)
        dat_ep_free(ep);
    ep = DAT_HANDLE_NULL;
}

void Side::close() {
    free_ep();
    for (DAT_EVD_HANDLE *e : {&cr_evd, &conn_evd, &req_evd, &recv_evd}) {
        if (*e != DAT_HANDLE_NULL)
            dat_evd_free(*e);
        *e = DAT_HANDLE_NULL;
    }
    ia.close();
}

std::string IaAddress::text() const {
    char buf[INET6_ADDRSTRLEN] = "?";
    if (storage.ss_family == AF_INET) {
        auto *sin = reinterpret_cast<const sockaddr_in *>(&storage);
        inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf);
    } else if (storage.ss_family == AF_INET6) {
        auto *sin6 = reinterpret_cast<const sockaddr_in6 *>(&storage);
        inet_ntop(AF_INET6, &sin6->sin6_addr, buf, sizeof buf);
    }
    return buf;
}

DAT_RETURN ia_address(DAT_IA_HANDLE ia, IaAddress *out) {
    DAT_IA_ATTR attr{};
    DAT_RETURN r = query_ia(ia, &attr, nullptr);
    if (r != DAT_SUCCESS)
        return r;
    if (!attr.ia_address_ptr)
        return DAT_INVALID_ADDRESS;
    size_t len = attr.ia_address_ptr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    std::memcpy(&out->storage, attr.ia_address_ptr, len);
    return DAT_SUCCESS;
}

// ---- ConnectedTest -------------------------------------------------------------

void ConnectedTest::SetUp() {
    ConformanceTest::SetUp();
    ia_name = GetParam();
    ASSERT_DAT_OK(server.open(ia_name));
    ASSERT_DAT_OK(client.open(ia_name));
    ASSERT_DAT_OK(dat_psp_create_any(server.ia.ia, &port, server.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp));
    ASSERT_DAT_OK(ia_address(server.ia.ia, &server_addr));
    ASSERT_DAT_OK(server.create_ep());
    ASSERT_DAT_OK(client.create_ep());
    DAT_PROVIDER_ATTR pa{};
    ASSERT_DAT_OK(query_ia(server.ia.ia, nullptr, &pa));
    max_private_data_size = pa.max_private_data_size;
    lmr_sync_req = pa.lmr_sync_req == DAT_TRUE;
}

void ConnectedTest::sync_rdma_read(DAT_IA_HANDLE ia, const Buffer &b, size_t off, size_t len) {
    if (!lmr_sync_req)
        return;
    DAT_LMR_TRIPLET t = b.iov(off, len);
    EXPECT_DAT_OK(dat_lmr_sync_rdma_read(ia, &t, 1));
}

void ConnectedTest::sync_rdma_write(DAT_IA_HANDLE ia, const Buffer &b, size_t off, size_t len) {
    if (!lmr_sync_req)
        return;
    DAT_LMR_TRIPLET t = b.iov(off, len);
    EXPECT_DAT_OK(dat_lmr_sync_rdma_write(ia, &t, 1));
}

long ConnectedTest::landed(DAT_IA_HANDLE ia, const Buffer &b, size_t off, size_t len, unsigned char seed,
                           size_t pat_off) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
        sync_rdma_write(ia, b, off, len);
        const long at = b.mismatch(off, len, seed, pat_off);
        if (at == -1 || !transmit_write_completion() || std::chrono::steady_clock::now() > until)
            return at;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

void ConnectedTest::TearDown() {
    client.free_ep();
    server.free_ep();
    if (psp != DAT_HANDLE_NULL)
        dat_psp_free(psp);
    psp = DAT_HANDLE_NULL;
    client.close();
    server.close();
    ConformanceTest::TearDown();
}

void ConnectedTest::client_connect(const void *pdata, DAT_COUNT size, DAT_TIMEOUT timeout_us) {
    ASSERT_DAT_OK(connect_ep(client.ep, server_addr.ptr(), port, timeout_us, size, pdata));
}

DAT_CR_HANDLE ConnectedTest::server_wait_cr(DAT_EVENT *cr_event) {
    DAT_EVENT ev{};
    auto r = wait_event(server.cr_evd, DAT_CONNECTION_REQUEST_EVENT, &ev);
    EXPECT_TRUE(r);
    if (cr_event)
        *cr_event = ev;
    if (!r)
        return DAT_HANDLE_NULL;
    return ev.event_data.cr_arrival_event_data.cr_handle;
}

void ConnectedTest::connect_pair(const void *cpd, DAT_COUNT csize, const void *spd, DAT_COUNT ssize,
                                 DAT_EVENT *client_est, DAT_EVENT *server_est) {
    ASSERT_NO_FATAL_FAILURE(client_connect(cpd, csize));
    DAT_CR_HANDLE cr = server_wait_cr();
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    ASSERT_NO_FATAL_FAILURE(accept_pair(cr, spd, ssize, client_est, server_est));
}

void ConnectedTest::accept_pair(DAT_CR_HANDLE cr, const void *pdata, DAT_COUNT pdata_size, DAT_EVENT *client_est,
                                DAT_EVENT *server_est, DAT_EP_HANDLE ep) {
    ASSERT_DAT_OK(dat_cr_accept(cr, ep ? ep : server.ep, pdata_size, const_cast<void *>(pdata)));
    DAT_EVENT ev{};
    ASSERT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, server_est ? server_est : &ev));
    ASSERT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, client_est ? client_est : &ev));
}

void ConnectedTest::disconnect_pair(Side &from, DAT_CLOSE_FLAGS flags) {
    Side &other = &from == &server ? client : server;
    ASSERT_DAT_OK(dat_ep_disconnect(from.ep, flags));
    ASSERT_TRUE(wait_event(from.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    ASSERT_TRUE(wait_event(other.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
}

DAT_CONN_QUAL ConnectedTest::unused_conn_qual() {
    DAT_CONN_QUAL q = 0;
    DAT_PSP_HANDLE p = DAT_HANDLE_NULL;
    DAT_RETURN r = dat_psp_create_any(client.ia.ia, &q, client.cr_evd, DAT_PSP_CONSUMER_FLAG, &p);
    EXPECT_EQ(r, DAT_SUCCESS) << ret_text(r);
    if (r == DAT_SUCCESS)
        EXPECT_DAT_OK(dat_psp_free(p));
    return q;
}

bool ConnectedTest::provider_supports(DAT_COMPLETION_FLAGS flags) {
    DAT_PROVIDER_ATTR pa{};
    if (query_ia(server.ia.ia, nullptr, &pa) != DAT_SUCCESS)
        return false;
    return (pa.completion_flags_supported & flags) == flags;
}

void ConnectedTest::expect_rdma_refused(bool write, Buffer &local, size_t local_off, const DAT_RMR_TRIPLET &remote,
                                        unsigned char target_seed, size_t target_pat_off, bool must_break) {
    constexpr unsigned char kSourceSeed = 0x5E; // what the initiator tries to write
    ASSERT_NE(target_seed, kSourceSeed);
    const DAT_UINT64 ck = 0x5EC0000000000000ull | remote.segment_length;
    DAT_LMR_TRIPLET l = local.iov(local_off, remote.segment_length);
    DAT_RETURN r;
    if (write) {
        local.fill(kSourceSeed);
        r = dat_ep_post_rdma_write(client.ep, 1, &l, cookie(ck), &remote, DAT_COMPLETION_DEFAULT_FLAG);
    } else {
        local.fill_byte(0);
        r = dat_ep_post_rdma_read(client.ep, 1, &l, cookie(ck), &remote, DAT_COMPLETION_DEFAULT_FLAG);
    }
    if (r != DAT_SUCCESS) {
        // dat_ep_post_rdma_write/read(3DAT) allow a synchronous refusal:
        // DAT_PROTECTION_VIOLATION, DAT_PRIVILEGES_VIOLATION, DAT_LENGTH_ERROR.
        auto t = DAT_GET_TYPE(r);
        EXPECT_TRUE(t == DAT_PROTECTION_VIOLATION || t == DAT_PRIVILEGES_VIOLATION || t == DAT_LENGTH_ERROR)
            << "post returned " << ret_text(r);
        return;
    }
    DAT_EVENT ev{};
    ASSERT_TRUE(wait_dto(client.req_evd, &ev)) << "the RDMA operation never completed";
    const auto &d = ev.event_data.dto_completion_event_data;
    EXPECT_EQ(d.user_cookie.as_64, ck);
    if (d.status == DAT_DTO_SUCCESS && write && transmit_write_completion()) {
        // Sent, then refused: the target breaks the connection instead.
        DAT_EVENT cev{};
        EXPECT_TRUE(wait_connection_end(client.conn_evd, &cev))
            << "a refused RDMA Write completed when sent (transmit completion) and the connection did not break";
    } else if (d.status == DAT_DTO_SUCCESS) {
        DAT_EVENT cev{};
        bool broke = wait_connection_end(client.conn_evd, &cev, 2'000'000);
        ADD_FAILURE() << "the RDMA " << (write ? "Write" : "Read")
                      << " the target must refuse completed with DAT_DTO_SUCCESS"
                      << (broke ? " (the connection then broke: " + event_text(cev) + ")"
                                : " and the connection stayed up");
    }
    if (d.status != DAT_DTO_SUCCESS && (must_break || d.status != DAT_DTO_ERR_REMOTE_ACCESS)) {
        DAT_EVENT cev{};
        EXPECT_TRUE(wait_connection_end(client.conn_evd, &cev))
            << "the RDMA completed with " << dto_status_name(d.status)
            << (must_break ? "; the connection must break"
                           : ", not DAT_DTO_ERR_REMOTE_ACCESS, and the connection did not break");
    }
    if (d.status != DAT_DTO_SUCCESS && d.status != DAT_DTO_ERR_REMOTE_ACCESS) {
        // dat_rmr_free(3DAT), dat_lmr_free(3DAT): a refused remote operation
        // reports DAT_DTO_ERR_REMOTE_ACCESS. Over libfabric tcp (the MSG
        // transport, and rxm over it) the target's provider ends the
        // connection without saying why: the initiator sees it end only.
        DAT_IA_ATTR attr{};
        ASSERT_DAT_OK(query_ia(client.ia.ia, &attr, nullptr));
        const std::string vendor = attr.vendor_name;
        if (vendor.find("tcp") == std::string::npos)
            ADD_FAILURE() << "the refused RDMA " << (write ? "Write" : "Read") << " completed with "
                          << dto_status_name(d.status) << ", not DAT_DTO_ERR_REMOTE_ACCESS (vendor " << vendor << ")";
    }
    if (!write && d.status != DAT_DTO_SUCCESS) {
        // A failed Read leaves the local buffer undefined, but it must not
        // hold the target's data.
        EXPECT_NE(local.mismatch(local_off, remote.segment_length, target_seed, target_pat_off), -1)
            << "the refused RDMA Read delivered the target's memory";
    }
}

// ---- ChildPeer ----------------------------------------------------------------

namespace {

bool write_all(int fd, const void *p, size_t n) {
    const char *c = static_cast<const char *>(p);
    while (n) {
        ssize_t w = ::write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        c += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

// 1: read a whole message, 0: EOF, -1: error, -2: timeout. Never waits
// longer than `timeout_ms` (there is no infinite wait).
int read_msg(int fd, PeerMsg *m, int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
    char *c = reinterpret_cast<char *>(m);
    size_t got = 0;
    while (got < sizeof *m) {
        int left = static_cast<int>(
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
        if (left <= 0)
            return -2;
        pollfd pfd{fd, POLLIN, 0};
        int pr = ::poll(&pfd, 1, left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0)
            return -1;
        if (pr == 0)
            continue;
        ssize_t r = ::read(fd, c + got, sizeof *m - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
        got += static_cast<size_t>(r);
    }
    return 1;
}

} // namespace

bool ChildPeer::start(const std::string &ia_name, Role role, bool expose_lmr) {
    int down[2], up[2];
    if (::pipe(down) != 0)
        return false;
    if (::pipe(up) != 0) {
        ::close(down[0]);
        ::close(down[1]);
        return false;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) {
        int err = errno;
        for (int fd : {down[0], down[1], up[0], up[1]})
            ::close(fd);
        errno = err;
        return false;
    }
    if (pid == 0) {
        ::close(down[1]);
        ::close(up[0]);
        to_child_ = down[0];
        from_child_ = up[1];
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent)
            _exit(3);
        run_child(ia_name, role, expose_lmr);
    }
    ::close(down[0]);
    ::close(up[1]);
    to_child_ = down[1];
    from_child_ = up[0];
    pid_ = pid;
    return true;
}

void ChildPeer::run_child(const std::string &ia_name, Role role, bool expose_lmr) {
    // In the child: DAT calls only, no gtest, leave through _exit.
    constexpr DAT_TIMEOUT kChildTimeoutUs = 30'000'000;
    auto fail = [this](uint64_t code) {
        PeerMsg m;
        m.kind = PeerMsg::Error;
        m.value = code;
        write_all(from_child_, &m, sizeof m);
        _exit(2);
    };
    auto say = [this](PeerMsg::Kind kind, const PeerMsg &with = PeerMsg{}) {
        PeerMsg m = with;
        m.kind = kind;
        if (!write_all(from_child_, &m, sizeof m))
            _exit(4);
    };
    DAT_EVENT ev{};
    // The next event on `evd` must be `want` (else the child reports and ends).
    auto expect_event = [&](DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want) {
        if (DAT_RETURN r = next_event(evd, &ev, kChildTimeoutUs))
            fail(r);
        if (ev.event_number != want)
            fail(ev.event_number);
    };
    // Heap objects on purpose: nothing is ever torn down in the child.
    Side *side = new Side;
    DAT_RETURN r = side->open(ia_name);
    if (r != DAT_SUCCESS)
        fail(r);
    if (role == Role::Server || role == Role::HoldingServer) {
        DAT_CONN_QUAL q = 0;
        DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
        if ((r = dat_psp_create_any(side->ia.ia, &q, side->cr_evd, DAT_PSP_CONSUMER_FLAG, &psp)) != DAT_SUCCESS)
            fail(r);
        PeerMsg pm;
        pm.value = q;
        say(PeerMsg::Port, pm);
        expect_event(side->cr_evd, DAT_CONNECTION_REQUEST_EVENT);
        if (role == Role::HoldingServer) {
            say(PeerMsg::RequestHeld);
            for (;;)
                ::pause();
        }
        if ((r = side->create_ep()) != DAT_SUCCESS)
            fail(r);
        Buffer *buf = nullptr;
        if (expose_lmr) {
            buf = new Buffer;
            if ((r = buf->create(side->ia.ia, side->ia.pz, 65536, DAT_MEM_PRIV_ALL_FLAG)) != DAT_SUCCESS)
                fail(r);
            buf->fill(0x5A);
        }
        if ((r = dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, side->ep, 0, nullptr)) != DAT_SUCCESS)
            fail(r);
        expect_event(side->conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        say(PeerMsg::Established);
        if (buf) {
            PeerMsg lm;
            lm.rmr_context = buf->rmr_context;
            lm.addr = reinterpret_cast<uintptr_t>(buf->data);
            lm.len = buf->size;
            say(PeerMsg::Lmr, lm);
        }
    } else {
        PeerMsg pm;
        if (read_msg(to_child_, &pm, 30000) != 1 || pm.kind != PeerMsg::Port)
            fail(0);
        if ((r = side->create_ep()) != DAT_SUCCESS)
            fail(r);
        IaAddress a;
        if ((r = ia_address(side->ia.ia, &a)) != DAT_SUCCESS)
            fail(r);
        if ((r = connect_ep(side->ep, a.ptr(), pm.value, kChildTimeoutUs)) != DAT_SUCCESS)
            fail(r);
        say(PeerMsg::ConnectPosted);
        expect_event(side->conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        say(PeerMsg::Established);
    }
    // Stay connected until killed or until the parent closes the pipe.
    for (;;) {
        char c;
        ssize_t n = ::read(to_child_, &c, 1);
        if (n > 0 || (n < 0 && errno == EINTR))
            continue;
        break;
    }
    _exit(0);
}

bool ChildPeer::send(const PeerMsg &m) { return to_child_ >= 0 && write_all(to_child_, &m, sizeof m); }

::testing::AssertionResult ChildPeer::receive(PeerMsg *m, int timeout_ms) {
    if (from_child_ < 0)
        return ::testing::AssertionFailure() << "no child";
    int r = read_msg(from_child_, m, timeout_ms);
    if (r == 1) {
        if (m->kind == PeerMsg::Error)
            return ::testing::AssertionFailure() << "child peer failed: " << ret_text(static_cast<DAT_RETURN>(m->value))
                                                 << " / " << event_name(static_cast<DAT_EVENT_NUMBER>(m->value));
        return ::testing::AssertionSuccess();
    }
    if (r == -2)
        return ::testing::AssertionFailure() << "no message from the child peer within " << timeout_ms << " ms";
    return ::testing::AssertionFailure() << "child peer pipe closed (child died?)";
}

::testing::AssertionResult ChildPeer::receive_kind(PeerMsg::Kind kind, PeerMsg *m, int timeout_ms) {
    PeerMsg tmp;
    if (!m)
        m = &tmp;
    auto r = receive(m, timeout_ms);
    if (!r)
        return r;
    if (m->kind != kind)
        return ::testing::AssertionFailure() << "child peer sent message " << m->kind << ", expected " << kind;
    return r;
}

::testing::AssertionResult ChildPeer::connect_from(Side &side) {
    PeerMsg pm;
    if (auto r = receive_kind(PeerMsg::Port, &pm); !r)
        return r;
    IaAddress addr;
    if (DAT_RETURN r = ia_address(side.ia.ia, &addr))
        return ::testing::AssertionFailure() << "ia_address -> " << ret_text(r);
    if (DAT_RETURN r = connect_ep(side.ep, addr.ptr(), pm.value))
        return ::testing::AssertionFailure() << "dat_ep_connect -> " << ret_text(r);
    if (auto r = wait_event(side.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED); !r)
        return r;
    return receive_kind(PeerMsg::Established, nullptr);
}

void ChildPeer::signal(int sig) {
    if (pid_ > 0)
        ::kill(pid_, sig);
}

bool ChildPeer::stop() {
    if (pid_ <= 0 || ::kill(pid_, SIGSTOP) != 0)
        return false;
    int status = 0;
    pid_t r;
    while ((r = ::waitpid(pid_, &status, WUNTRACED)) < 0 && errno == EINTR) {
    }
    return r == pid_ && WIFSTOPPED(status);
}

void ChildPeer::kill_and_reap() {
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        int status = 0;
        while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
        pid_ = -1;
    }
    if (to_child_ >= 0)
        ::close(to_child_);
    if (from_child_ >= 0)
        ::close(from_child_);
    to_child_ = from_child_ = -1;
}

} // namespace conformance
