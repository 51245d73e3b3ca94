// SPDX-License-Identifier: BSD-3-Clause
// Connected-pair fixture of the connection-management, DTO, disconnect,
// security and peer-death suites.
//
// Two IAs are opened in one process from the same IA name: a server and a
// client. Each has a PZ, a connection-request EVD, a connection EVD, a
// request (send-side) EVD and a recv EVD, and one Endpoint. The server
// listens on a PSP from dat_psp_create_any(), so suites that ctest runs in
// parallel never clash on a connection qualifier.
//
// Nothing here may hang: every wait is dat_evd_wait() with a finite timeout
// that fails the test, and the per-test watchdog of ConformanceTest ends the
// process (with the name of the test) should a DAT call itself never return.
#pragma once

#include "conformance.hpp"

#include <netinet/in.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace conformance {

// Every wait for an event that should come: long enough for a loaded CI
// machine, short enough that a missing event fails quickly.
constexpr DAT_TIMEOUT kEventTimeoutUs = 10'000'000;
// How long we watch for an event that must not come.
constexpr DAT_TIMEOUT kQuietTimeoutUs = 300'000;

// Local read and write: what the suites' send and receive buffers need.
constexpr DAT_MEM_PRIV_FLAGS kLocalRw =
    static_cast<DAT_MEM_PRIV_FLAGS>(DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG);

// ---- text for failure messages ----------------------------------------------
std::string event_name(DAT_EVENT_NUMBER n);
std::string dto_status_name(DAT_DTO_COMPLETION_STATUS s);
std::string ep_state_name(DAT_EP_STATE s);
std::string event_text(const DAT_EVENT &ev); // type plus the interesting data

// ---- events -----------------------------------------------------------------
// dat_evd_wait() for one event, threshold 1, finite timeout.
DAT_RETURN next_event(DAT_EVD_HANDLE evd, DAT_EVENT *ev, DAT_TIMEOUT timeout_us = kEventTimeoutUs);

// Waits for the next event on `evd` and checks that it is of type `want`;
// fails (naming what came instead, or the timeout) otherwise.
::testing::AssertionResult wait_event(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want, DAT_EVENT *out = nullptr,
                                      DAT_TIMEOUT timeout_us = kEventTimeoutUs);

// The next event must be a DTO completion (of any status).
::testing::AssertionResult wait_dto(DAT_EVD_HANDLE evd, DAT_EVENT *out, DAT_TIMEOUT timeout_us = kEventTimeoutUs);

// The next event must be a DTO completion with DAT_DTO_SUCCESS and this cookie.
::testing::AssertionResult wait_dto_ok(DAT_EVD_HANDLE evd, DAT_UINT64 cookie, DAT_EVENT *out = nullptr,
                                       DAT_TIMEOUT timeout_us = kEventTimeoutUs);

// A thread asleep in `wait` while this one runs `post`: what each
// returned, and how long after the post began the waiter returned. The
// second form waits in dat_evd_wait on `evd` (for up to 10 s).
struct WaitAcrossPost {
    DAT_RETURN post = DAT_SUCCESS, wait = DAT_SUCCESS;
    DAT_EVENT event{}; // the second form's
    long ms = 0;
};
WaitAcrossPost wait_across_post(const std::function<DAT_RETURN()> &wait, const std::function<DAT_RETURN()> &post);
WaitAcrossPost wait_across_post(DAT_EVD_HANDLE evd, const std::function<DAT_RETURN()> &post);

// Waits for the next connection event that ends a connection
// (DAT_CONNECTION_EVENT_DISCONNECTED or DAT_CONNECTION_EVENT_BROKEN).
::testing::AssertionResult wait_connection_end(DAT_EVD_HANDLE evd, DAT_EVENT *out = nullptr,
                                               DAT_TIMEOUT timeout_us = kEventTimeoutUs);

// No event arrives on `evd` within `timeout_us`.
::testing::AssertionResult no_event(DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout_us = kQuietTimeoutUs);

// Dequeues and returns everything currently queued (dat_evd_dequeue).
std::vector<DAT_EVENT> drain(DAT_EVD_HANDLE evd);

DAT_DTO_COOKIE cookie(DAT_UINT64 v);

// The next `n` events on `evd` are DAT_DTO_ERR_FLUSHED completions with the
// cookies first, first+1, ... (posting order); fails at the first that is not.
::testing::AssertionResult flushed_in_order(DAT_EVD_HANDLE evd, int n, DAT_UINT64 first);

// dat_ep_connect with the suites' defaults (best effort QoS, default flags).
DAT_RETURN connect_ep(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual,
                      DAT_TIMEOUT timeout_us = kEventTimeoutUs, DAT_COUNT pdata_size = 0, const void *pdata = nullptr);

// ---- queries ----------------------------------------------------------------
DAT_EP_STATE ep_state(DAT_EP_HANDLE ep); // via dat_ep_get_status
// Polls dat_ep_get_status until the state is `want` (or the timeout passes).
::testing::AssertionResult ep_state_becomes(DAT_EP_HANDLE ep, DAT_EP_STATE want,
                                            DAT_TIMEOUT timeout_us = kEventTimeoutUs);
DAT_RETURN query_ia(DAT_IA_HANDLE ia, DAT_IA_ATTR *ia_attr, DAT_PROVIDER_ATTR *prov_attr);
// The provider-specific attributes of `ia`, by name (a failed query fails the test).
std::map<std::string, std::string> provider_attrs(DAT_IA_HANDLE ia);
DAT_EP_ATTR query_ep_attr(DAT_EP_HANDLE ep);

// Endpoint attributes the suites use: RC, 64 request and recv DTOs, up to
// 4 IOV segments, messages and RDMA up to 1 MiB (all within what the IA
// reports), default completion flags.
DAT_EP_ATTR suite_ep_attr(DAT_IA_HANDLE ia);

// ---- memory -----------------------------------------------------------------
// A page-aligned allocation of which [reg_off, reg_off + reg_len) is
// registered as one LMR; the rest is guard memory for canary checks.
struct Buffer {
    unsigned char *data = nullptr;
    size_t size = 0;
    size_t reg_off = 0, reg_len = 0;
    DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
    DAT_LMR_CONTEXT lmr_context = 0;
    DAT_RMR_CONTEXT rmr_context = 0;
    DAT_VLEN registered_size = 0;
    DAT_VADDR registered_address = 0;

    Buffer() = default;
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;
    ~Buffer();

    // Allocates `total` bytes and registers [off, off + len) (len 0: the rest).
    DAT_RETURN create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, size_t total, DAT_MEM_PRIV_FLAGS priv = DAT_MEM_PRIV_ALL_FLAG,
                      size_t off = 0, size_t len = 0);
    DAT_RETURN free_lmr(); // dat_lmr_free, keeps the memory
    void release();        // frees LMR and memory

    DAT_LMR_TRIPLET iov(size_t off, size_t len) const;
    DAT_RMR_TRIPLET rmr(size_t off, size_t len) const;
    void fill(unsigned char seed);   // a recognisable pattern from `seed`
    void fill_byte(unsigned char b); // every byte the same
    // Offset of the first byte in [off, off+len) that differs from the
    // pattern `fill(seed)` wrote (pattern position counted from `pat_off`),
    // or -1 when all match.
    long mismatch(size_t off, size_t len, unsigned char seed, size_t pat_off) const;
    long mismatch_byte(size_t off, size_t len, unsigned char b) const;
};

unsigned char pattern_byte(unsigned char seed, size_t i);

// ---- one side of a connection -------------------------------------------------
struct Side {
    OpenIa ia;
    DAT_EVD_HANDLE cr_evd = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE conn_evd = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE req_evd = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE recv_evd = DAT_HANDLE_NULL;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;

    // Opens the IA, its PZ and the four EVDs.
    DAT_RETURN open(const std::string &name);
    // Creates `ep` on the four EVDs (NULL attr: suite_ep_attr()).
    DAT_RETURN create_ep(const DAT_EP_ATTR *attr = nullptr);
    DAT_RETURN create_ep_on(DAT_EP_HANDLE *ep, DAT_EVD_HANDLE recv, DAT_EVD_HANDLE req, DAT_EVD_HANDLE conn,
                            const DAT_EP_ATTR *attr = nullptr);
    // b.create() on this side's IA and PZ.
    DAT_RETURN register_buffer(Buffer &b, size_t total, DAT_MEM_PRIV_FLAGS priv = kLocalRw, size_t off = 0,
                               size_t len = 0);
    // Registers `n` * `each` bytes in `b` and posts `n` receives of `each`
    // bytes on `ep` with the cookies first, first+1, ...
    DAT_RETURN post_recvs(Buffer &b, int n, DAT_UINT64 first, size_t each = 256);
    void free_ep(); // dat_ep_free (ignoring the result), handle cleared
    void close();
    ~Side() { close(); }
};

// The IA address as dat_ia_query() reports it, copied.
struct IaAddress {
    sockaddr_storage storage{};
    DAT_IA_ADDRESS_PTR ptr() { return reinterpret_cast<DAT_IA_ADDRESS_PTR>(&storage); }
    std::string text() const;
};
DAT_RETURN ia_address(DAT_IA_HANDLE ia, IaAddress *out);

// A connection request whose active side is gone (it aborted, its Endpoint
// was freed, or its process died) is accepted on `ep`. dat_cr_accept(3DAT)
// leaves three outcomes: the accept fails without "any effect on the local
// Endpoint" (it stays UNCONNECTED), it ends in
// DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, or the connection is
// ESTABLISHED and then ends (DISCONNECTED or BROKEN). `*accepted` says
// whether the accept call succeeded (then the Endpoint's receives are flushed).
::testing::AssertionResult accept_of_departed_peer(DAT_CR_HANDLE cr, DAT_EP_HANDLE ep, DAT_EVD_HANDLE conn_evd,
                                                   bool *accepted = nullptr);

// ---- the fixture ----------------------------------------------------------------
class ConnectedTest : public ConformanceTest {
protected:
    void SetUp() override;    // opens server and client, the PSP, both EPs (UNCONNECTED)
    void TearDown() override; // frees everything; never blocks on the peer

    // Client connects to the server's PSP; the server accepts on server.ep;
    // both sides see DAT_CONNECTION_EVENT_ESTABLISHED. Use with
    // ASSERT_NO_FATAL_FAILURE. The events are returned when asked for.
    void connect_pair(const void *client_pdata = nullptr, DAT_COUNT client_pdata_size = 0,
                      const void *server_pdata = nullptr, DAT_COUNT server_pdata_size = 0,
                      DAT_EVENT *client_established = nullptr, DAT_EVENT *server_established = nullptr);
    // The two halves, for tests that need to act in between.
    void client_connect(const void *pdata = nullptr, DAT_COUNT size = 0, DAT_TIMEOUT timeout_us = kEventTimeoutUs);
    DAT_CR_HANDLE server_wait_cr(DAT_EVENT *cr_event = nullptr); // 0 on failure (test failed)
    // The server accepts `cr` on `ep` (server.ep by default); both sides see
    // DAT_CONNECTION_EVENT_ESTABLISHED. Use with ASSERT_NO_FATAL_FAILURE.
    void accept_pair(DAT_CR_HANDLE cr, const void *pdata = nullptr, DAT_COUNT pdata_size = 0,
                     DAT_EVENT *client_established = nullptr, DAT_EVENT *server_established = nullptr,
                     DAT_EP_HANDLE ep = DAT_HANDLE_NULL);

    // Disconnects `from` (graceful or abrupt) and waits for
    // DAT_CONNECTION_EVENT_DISCONNECTED on both sides.
    void disconnect_pair(Side &from, DAT_CLOSE_FLAGS flags = DAT_CLOSE_GRACEFUL_FLAG);

    // A connection qualifier on which nothing listens (a PSP from
    // dat_psp_create_any() that was freed again).
    DAT_CONN_QUAL unused_conn_qual();

    // Whether the provider reports every flag of `flags` in
    // completion_flags_supported.
    bool provider_supports(DAT_COMPLETION_FLAGS flags);

    // When the provider sets lmr_sync_req (dat_ia_query), the
    // dat_lmr_sync_rdma_read/write(3DAT) calls a portable consumer makes
    // around RDMA; no-ops otherwise.
    void sync_rdma_read(DAT_IA_HANDLE ia, const Buffer &b, size_t off, size_t len);
    void sync_rdma_write(DAT_IA_HANDLE ia, const Buffer &b, size_t off, size_t len);
    // After an RDMA Write into `b` completed at its initiator: the mismatch
    // (Buffer::mismatch) of [off, off + len) against fill(seed) once synced.
    // Under transmit completion (transmit_write_completion()) the data may
    // still be on its way: looked at again for up to 5 s until it matches.
    long landed(DAT_IA_HANDLE ia, const Buffer &b, size_t off, size_t len, unsigned char seed, size_t pat_off);

    // Posts an RDMA Write (`write`) or Read on client.ep between `local`, from
    // `local_off`, and `remote`, and judges it as one the target must refuse
    // (security_test, rmr_test). The post itself may refuse it
    // (DAT_PROTECTION_VIOLATION, DAT_PRIVILEGES_VIOLATION, DAT_LENGTH_ERROR);
    // posted, it must complete with an error -- DAT_DTO_ERR_REMOTE_ACCESS, or
    // any error with the client's connection broken (always broken when
    // `must_break`) -- never succeed. A refused Read must not bring back the
    // target's pattern (Buffer::fill(target_seed), counted from
    // `target_pat_off` at remote.virtual_address). The caller checks that the
    // target memory is unchanged.
    void expect_rdma_refused(bool write, Buffer &local, size_t local_off, const DAT_RMR_TRIPLET &remote,
                             unsigned char target_seed, size_t target_pat_off, bool must_break = false);

    std::string ia_name;
    Side server, client;
    bool lmr_sync_req = false;
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    DAT_CONN_QUAL port = 0;
    IaAddress server_addr;
    DAT_COUNT max_private_data_size = 0;
};

// ---- a peer in a child process (peer death, stopped peer) --------------------------
// Messages the child sends on its pipe.
struct PeerMsg {
    enum Kind : uint32_t { Port = 1, ConnectPosted, Established, Lmr, Error, RequestHeld };
    uint32_t kind = 0;
    uint32_t rmr_context = 0;
    uint64_t value = 0; // Port: conn qual; Error: DAT_RETURN or event number
    uint64_t addr = 0;  // Lmr: virtual address of the registered region
    uint64_t len = 0;   // Lmr: its length
};

class ChildPeer {
public:
    enum class Role {
        // Opens the IA, listens on dat_psp_create_any() (sends Port),
        // accepts the first request (sends Established), and with
        // `expose_lmr` also registers 64 KiB with remote read/write whose
        // pattern is fill(0x5A) and sends it (Lmr) after Established.
        Server,
        // Reads a Port message, opens the IA, connects to 127.0.0.1 (its own
        // IA address) on that port (sends ConnectPosted), waits for the
        // connection (sends Established).
        Client,
        // As Server, but takes the first request without answering it
        // (sends RequestHeld) and waits.
        HoldingServer,
    };
    // Forks. Call before the parent opens any IA. In the child this never
    // returns. False (with errno) if fork or pipe failed.
    bool start(const std::string &ia_name, Role role, bool expose_lmr = false);
    bool send(const PeerMsg &m);
    // Reads one message, waiting at most `timeout_ms`.
    ::testing::AssertionResult receive(PeerMsg *m, int timeout_ms = kEventTimeoutUs / 1000);
    ::testing::AssertionResult receive_kind(PeerMsg::Kind kind, PeerMsg *m, int timeout_ms = kEventTimeoutUs / 1000);
    void signal(int sig);
    // SIGSTOP, and waits until the child has stopped.
    bool stop();
    void kill_and_reap(); // SIGKILL and waitpid
    pid_t pid() const { return pid_; }
    ~ChildPeer() { kill_and_reap(); }

    // This process as the client of a Server child: reads the child's Port,
    // connects `side.ep` to it (127.0.0.1) and waits until both sides report
    // the connection established. Lmr messages that follow are left unread.
    ::testing::AssertionResult connect_from(Side &side);

private:
    [[noreturn]] void run_child(const std::string &ia_name, Role role, bool expose_lmr);
    pid_t pid_ = -1;
    int to_child_ = -1, from_child_ = -1;
};

} // namespace conformance
