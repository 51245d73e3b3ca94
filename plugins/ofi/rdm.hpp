// SPDX-License-Identifier: BSD-3-Clause
// The libfabric transport over reliable-datagram endpoints (FI_EP_RDM): shm,
// tcp;ofi_rxm, udp;ofi_rxd here; efa, cxi, psm3, opx elsewhere. DAT's
// connections are made by a connection manager of our own over a TCP side
// channel on the IA's IP address (rdm_cm.cpp, wire format rdm_cm_wire.hpp):
// a PSP listens on the port of its qualifier, the two sides exchange their
// fabric addresses, tags and private data, and the socket stays open for the
// connection's life, so that a peer's death is seen as its end.
//
// Data: DAT Endpoints that share a pair of EVDs share one libfabric
// endpoint (RdmFabricEp) bound to those EVDs' completion queues; a
// connection is a peer address in the domain's address vector and a pair of
// tags, one per direction, drawn afresh for every connection. Receives are
// tagged receives of the connection's tag from the peer's address only
// (FI_DIRECTED_RECV where the provider has it): a message from anyone else,
// or from an earlier connection, never matches. Sends are tagged sends to
// the peer's tag.
//
// Files by object: rdm_ia.cpp (open, attributes, progress), rdm_cm.cpp
// (connections, service points), rdm_ep.cpp (endpoints, posts, extended
// DTOs), rdm_cq.cpp (completion queues), rdm_mr.cpp (LMRs, RMRs).
#pragma once

#include "ofi.hpp"
#include "rdm_cm_wire.hpp"

#include <rdma/fi_tagged.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace dat2::ofi {

struct RdmCtxBlock;

// The receives one libfabric endpoint holds for all the EPs that share it
// (RdmFabricEp::recv_budget). A provider takes an unexpected message, and
// the hello of a connection, from the same pool of entries as the posted
// receives (shm: 1024); once posted receives fill it, the message at the
// head of shm's queue can never be taken and nothing behind it moves. So
// posts stop short of the pool: the rest stays for what the transport and
// the unexpected messages need. Counted by reference: the endpoint holds
// one, each receive with the provider one more (it may complete after the
// endpoint is gone).
struct RdmRecvBudget {
    std::atomic<long> refs{1};
    long capacity = 0;
    // One more receive, unless `capacity` are with the provider.
    bool take() {
        if (refs.fetch_add(1, std::memory_order_acq_rel) - 1 < capacity)
            return true;
        release();
        return false;
    }
    void release() {
        if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
            delete this;
    }
};

// The last two segments of a receive that has no room for the scratch
// buffer behind its segments (RdmTransport::post_recv): posted as one buffer
// of ours, and copied out to them when the receive completes.
struct RdmBounce {
    iovec to[2];
    std::size_t skip; // bytes of the message that go to the segments before them
    // nullptr when out of memory.
    static RdmBounce *make(const iovec *last_two, std::size_t skip);
    static void destroy(RdmBounce *b) { std::free(b); }
    unsigned char *data() { return reinterpret_cast<unsigned char *>(this + 1); }
    std::size_t length() const { return to[0].iov_len + to[1].iov_len; }
    // What a message of `received` bytes put here, into `to`.
    void copy_out(std::size_t received);
};

// The libfabric context of one DTO record of an EP (one per kit::Op of the
// EP, same index). A write with immediate data is two libfabric operations,
// each with a part of its own.
struct RdmCtx {
    struct Part {
        fi_context2 provider; // libfabric's scratch (FI_CONTEXT2): first, the part's address is the context
        RdmCtx *owner;
    };
    Part part[2];
    RdmCtxBlock *block = nullptr;
    std::uint8_t left = 0; // parts not completed yet
    // Atomic for the scans at a connection's end (the loop thread); the post
    // and completion paths store without a locked instruction.
    // A receive with the provider, cancelled when the connection ends:
    std::atomic<bool> recv_posted{false};
    // A receive, RDMA read or fetching atomic with the provider
    // (Transport::ops_writing_memory); cleared with release at the
    // completion, so that a scan that sees it clear sees the data written.
    std::atomic<bool> writes_memory{false};
    DAT_DTO_COMPLETION_STATUS status = DAT_DTO_SUCCESS;
    // A receive's, from its post to its completion (nullptr otherwise).
    RdmBounce *bounce = nullptr;
    RdmRecvBudget *budget = nullptr;
};

// The contexts of an EP's records. A libfabric endpoint is shared by many
// DAT Endpoints, so an operation of a freed or reset EP may still complete
// later (a send to a peer that died, a receive being filled): its context
// must stay valid and its completion must not reach the kit, whose record
// may have been reused. A block is retired when its EP is reset or freed
// (or its records rebuilt); it is freed once its last operation completed.
struct RdmCtxBlock {
    std::atomic<int> refs{1}; // the EP's, plus one per operation with the provider
    std::atomic<bool> retired{false};
    // The connection broke because the peer left an RMA unanswered
    // (progress_round): it does not progress, and nobody waits for it.
    std::atomic<bool> peer_stalled{false};
    kit::Op *base = nullptr; // ep.ops.data() when made
    std::size_t n = 0;       // records; ctx holds one more, the receive of the connection's hello (kHelloRecv)
    std::unique_ptr<RdmCtx[]> ctx;
    void release() {
        if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
            delete this;
    }
};

// The hello of a connection: each side sends the other an empty message
// with this bit set in the peer's tag as soon as it knows the peer, and
// receives one. Providers that set up their own peer state lazily on the
// first message (shm maps the peer's region and waits for the peer to answer
// before it takes a message or RMA for it) do so while the connection is
// being established, not at the consumer's first DTO, which a peer that
// stopped progressing would leave refused for ever.
inline constexpr std::uint64_t kHelloBit = 1ull << 60;
inline constexpr std::size_t kHelloRecv = 0; // after the records in a block

// to_iov, with an empty message or RMA handed over as one empty segment,
// never as none: rxd 1.17 reads iov[0] of every send and write whatever the
// count (rxd_tx_entry_init_common). Returns the count to pass with `iov`
// and `desc`; `total`, when asked for, the bytes.
inline char rdm_no_byte;
inline std::size_t rdm_iov(const kit::Segment *segs, int nsegs, iovec *iov, void **desc,
                           std::uint64_t *total = nullptr) {
    const std::uint64_t bytes = to_iov(segs, nsegs, iov, desc);
    if (total)
        *total = bytes;
    if (nsegs > 0)
        return static_cast<std::size_t>(nsegs);
    iov[0] = {&rdm_no_byte, 0};
    desc[0] = nullptr;
    return 1;
}

// An RDMA write's flags. Delivery completion: a write the target refuses
// (key, range, access) fails at the initiator, and on shm it takes the
// target's checked path even where the domain's ordering would allow the
// other. Not for a write of no bytes: shm 1.17 never completes one asked for
// delivery completion, and there is nothing to deliver or refuse (InfiniBand
// checks no key for it either).
inline std::uint64_t rdm_write_flags(std::uint64_t total) {
    return total ? FI_COMPLETION | FI_DELIVERY_COMPLETE : FI_COMPLETION;
}

// The libfabric domain of a protection zone (rdm_mr.cpp), with its address
// vector and null queue. A domain is the scope of libfabric's memory keys:
// the target's endpoint looks a key up in its own domain only (shm's
// ofi_mr_map_verify, rxm's tcp), so an RDMA access with the key of a region
// of another PZ finds nothing and is refused.
struct RdmAvEntry {
    fi_addr_t addr;
    int refs;
};
struct RdmDomain {
    fid_domain *domain = nullptr;
    std::uint8_t tag = 0; // 1..rdmwire::kMaxPzTag: the high bits of its rmr_contexts (where pz_tags_)
    fid_av *av = nullptr;
    fid_cq *null_cq = nullptr; // bound where an EP has no EVD for a direction
    int users = 0;             // LMRs, RMR bindings and libfabric endpoints in it (dom_mu_)
    // mu_ held:
    std::unordered_map<std::string, RdmAvEntry> av_entries;
    std::deque<std::string> av_idle; // entries whose last connection ended, oldest first (may repeat)
    std::uint64_t departures_seen = 0; // departed_endpoints().count when av_entries were last looked at
};

// One libfabric endpoint, shared by the DAT Endpoints of one pair of EVDs in one PZ.
struct RdmCq;
struct RdmFabricEp {
    fid_ep *ep = nullptr;
    RdmDomain *dom = nullptr;               // counted
    RdmCq *tx_q = nullptr, *rx_q = nullptr; // the EVDs' queues (nullptr: the null queue)
    kit::Evd *request_evd = nullptr, *recv_evd = nullptr;
    fid_cq *tx_cq = nullptr, *rx_cq = nullptr; // the queues it is bound to
    std::string name;                          // fi_getname: what peers put in their address vector
    // Counts the RDMA writes and reads peers carried out through it
    // (FI_RMA_EVENT; nullptr where the provider has none), so that the loop
    // sees remote operations land while its consumer does not look
    // (progress_round). One per endpoint, bound before fi_enable: reading a
    // counter drives the progress of every endpoint bound to it, and one
    // not yet enabled must not be driven (shm reads the region it maps only
    // at fi_enable).
    fid_cntr *rma_cntr = nullptr;
    std::uint64_t rma_seen = 0; // the loop's: the count at its last round
    RdmRecvBudget *recv_budget = nullptr; // the consumers' receives it holds

    RdmFabricEp() = default;
    RdmFabricEp(const RdmFabricEp &) = delete;
    RdmFabricEp &operator=(const RdmFabricEp &) = delete;
    ~RdmFabricEp() {
        if (recv_budget)
            recv_budget->release();
    }

    // Closes the endpoint, then its counter. While its queues live on:
    // RdmTransport::close_fep.
    void close() {
        if (ep)
            fi_close(&ep->fid);
        ep = nullptr;
        if (rma_cntr)
            fi_close(&rma_cntr->fid);
        rma_cntr = nullptr;
    }
};

// A request the provider kept refusing, as it is to be posted again.
struct RdmDeferred {
    kit::PostKind kind = kit::PostKind::kSend;
    RdmCtx *ctx = nullptr;
    std::uint64_t flags = 0; // the send's
    std::uint64_t data = 0;  // the send's remote CQ data
    fi_rma_iov rma{};        // the write's or read's
    std::size_t nsegs = 0;
    iovec iov[kit::kMaxIov];
    void *desc[kit::kMaxIov];
};

struct RdmEp {
    kit::Ep *owner = nullptr;
    std::uint64_t id = 0;
    // Set before the connection can carry anything (ep_transport_ready), read
    // without a lock by the post paths.
    RdmFabricEp *fep = nullptr;
    fi_addr_t peer = FI_ADDR_UNSPEC;
    std::uint64_t tag = 0;         // our receives match it
    std::uint64_t swept_tag = 0;   // the last tag whose leftovers were handed to sweep_ended
    std::uint64_t peer_tag = 0;    // our sends carry it
    std::uint8_t peer_pz_tag = 0;  // its Endpoint's PZ tag (0: its contexts carry none)
    std::string peer_name;         // its address vector entry (counted, rdm_cm.cpp)
    RdmDomain *peer_dom = nullptr; // the domain whose address vector holds it
    RdmCtxBlock *block = nullptr;
    // ep_close's retired block, with a reference of ours until ep_free:
    // the kit asks how many of its operations still write memory.
    RdmCtxBlock *closing = nullptr;
    std::uint64_t conn = 0;           // its side-channel connection (RdmConn::id), 0: none
    std::atomic<int> requests_out{0}; // requests with the provider (a graceful disconnect waits for them)
    bool closed = false;              // ep_close: no new connection
    // An RDMA write since the last send (fence_after_write_ only); posting
    // threads of the EP set and take it without a lock.
    std::atomic<bool> wrote{false};
    // A receive posted before the connection did not fit when the connection
    // came (post_recv): the connection ends once established.
    std::atomic<bool> recv_refused{false};
    // A graceful disconnect waits (on this timer) for the requests in flight.
    kit::EventLoop::Timer *disconnect_timer = nullptr;
    bool graceful_pending = false;
    std::chrono::steady_clock::time_point graceful_deadline{};
    // RDMA and atomic operations with the provider, and when one last
    // completed (or the first was posted): an operation the target never
    // answers breaks the connection (kRmaAnswerTimeout, progress_round).
    std::atomic<int> rma_out{0};
    std::atomic<std::int64_t> rma_stamp_ns{0};
    // When we last asked the peer to drive its progress (RdmTransport::nudge).
    std::atomic<std::int64_t> nudged_ns{0};
    // The loop's nudges for the operations outstanding since rma_stamp_ns
    // was nudge_stamp_ns: each waits twice as long as the one before.
    std::int64_t nudge_stamp_ns = 0;
    unsigned loop_nudges = 0;
    // Messages sent on the connection, and received (completions read): a
    // disconnect names how many it follows, and the receiving side ends the
    // connection once those arrived (or after kDrainTimeout): the side
    // channel may overtake data still in the fabric (rxm's tcp stream).
    std::atomic<std::uint64_t> msgs_out{0}, msgs_in{0};
    // Requests the provider still refused when the post path's bound ran
    // out (a peer that does not progress: stopped, or starved of CPU), in
    // posting order: taken as posted (DAT_INSUFFICIENT_RESOURCES is for a
    // full request queue, which the kit counts), handed to the provider
    // before any later request (post paths, the loop's rounds), dropped when
    // the connection ends (the kit flushes them). defer_mu: after mu_.
    std::mutex defer_mu;
    std::deque<RdmDeferred> deferred;
    std::atomic<bool> has_deferred{false};
    std::uint64_t drain_until_msgs = 0; // the peer's disconnect: messages to wait for
    bool draining = false;
    std::chrono::steady_clock::time_point drain_deadline{};
};

// A connection of the side channel.
struct RdmConn {
    enum State : std::uint8_t {
        kConnecting,   // active: TCP connect in progress
        kAwaitAccept,  // active: request sent
        kAwaitRequest, // passive: accepted socket, no request yet
        kRequested,    // passive: a CR holds it
        kAwaitReady,   // passive: accept sent
        kConnected,
        kDead,     // passive, a CR holds it: the peer went away before the consumer answered
        kDraining, // the peer disconnected; its last messages are still on their way
    };
    std::uint64_t id = 0;
    int fd = -1;
    State state = kConnecting;
    RdmEp *ep = nullptr;     // active side; passive once accepted
    kit::Psp *psp = nullptr; // passive: the service point it came through
    DAT_CONN_QUAL psp_qual = 0;
    kit::EventLoop::Watch *watch = nullptr;
    kit::EventLoop::Timer *timer = nullptr; // passive: a request must come within kHandshakeTimeout
    unsigned char in[rdmwire::kMaxMessage];
    std::size_t in_len = 0;
    unsigned char request[rdmwire::kMaxMessage]; // active: sent once the socket connects
    std::size_t request_len = 0;
    bool disconnect_sent = false;
    std::string peer_name;        // passive: the requester's fabric address
    std::uint64_t peer_tag = 0;   // passive: the requester's tag
    std::uint8_t peer_pz_tag = 0; // passive: the requester's PZ tag
    sockaddr_storage peer_addr{}; // passive: the requester's IP address and port
};

struct RdmPsp {
    kit::Psp *owner = nullptr;
    int fd = -1;
    DAT_CONN_QUAL conn_qual = 0;
    kit::EventLoop::Watch *watch = nullptr;
};

// An LMR: a registration for local use and one for its remote privileges (rdm_mr.cpp).
struct RdmMr {
    RdmDomain *dom = nullptr; // of the LMR's PZ, counted
    fid_mr *local = nullptr;
    fid_mr *remote = nullptr;
};

// An RMR: a registration of its own of the bound range (rdm_mr.cpp).
struct RdmRmr {
    RdmDomain *dom = nullptr; // of the RMR's PZ while bound, counted
    fid_mr *mr = nullptr;
};

// A DTO EVD's completion queues: one in each domain (PZ) its EPs are in,
// as a queue serves endpoints of its own domain only. Nearly always one.
struct RdmEvdQueues;
struct RdmCq {
    fid_cq *cq = nullptr;
    RdmDomain *dom = nullptr;
    kit::Evd *evd = nullptr;
    RdmEvdQueues *owner = nullptr;
    // Its wait fd; -1: none (shm), or no longer trusted (close_fep): the
    // loop polls it. Written under mu_, parts_mu_ and the owner's wait_mu.
    int fd = -1;
    std::uint64_t polled_round = 0; // progress_round: each queue once a round
    std::uint64_t seen_reads = 0;   // the loop's: owner->reads when it last looked
    std::uint32_t seen_dequeues = 0; // the loop's: evd->dequeues when it last looked
    bool was_nonempty = false;
    // This round's view (progress_round): the consumer dequeued since the
    // last round, someone waits in dat_evd_wait, the EVD feeds a CNO and
    // nobody waits in it (the CNO's consumer waits outside DAT, on its fd
    // or its agent: the loop reads for it), the queue was looked at.
    bool consumer_polls = false;
    bool waiter = false;
    bool cno_only = false;
    bool looked = false;
    // Its fd on the loop (where it has one), armed while nobody else drives
    // the queue's endpoints: rxm's fd includes its tcp sockets, and a
    // target that only watches its memory has no progress but the loop's
    // (arm_queue). The loop's, as `armed` and `keep_quiet` (this round: an
    // endpoint of the queue is driven by its consumer).
    kit::EventLoop::Watch *watch = nullptr;
    bool armed = false;
    bool keep_quiet = false;
};

struct RdmEvdQueues {
    static constexpr int kMaxParts = 8;
    RdmCq *parts[kMaxParts] = {};
    std::atomic<int> count{0}; // parts written before the count is (release)
    // dat_evd_wait's fd: the one part's; with two or more, an epoll set of
    // theirs; -1 when a part has none (shm).
    std::atomic<int> wait_fd{-1};
    int epoll_fd = -1;
    // Held across cq_arm's fi_trywait, and by close_fep while an endpoint
    // bound to a part closes: libfabric 1.17's rxm leaves a closed
    // endpoint's entry in the queue's wait set, and fi_trywait then reads
    // freed memory. A queue whose endpoint closed stops using its fd.
    std::mutex wait_mu;
    // dat_evd_wait on a queue without a wait fd polls it for this long
    // before it sleeps (cq_arm): a reply of a peer on the same host comes
    // within microseconds, the loop's next look within a millisecond.
    std::chrono::steady_clock::time_point spin_until{};
    bool spinning = false;
    // Activity as the loop sees it: completions the consumer read, and a
    // queue that became non-empty (completions nobody reads are no news).
    std::atomic<std::uint64_t> reads{0};
};

class RdmTransport final : public kit::Transport {
public:
    RdmTransport(kit::Ia &ia, const Params &params);
    ~RdmTransport() override;

    DAT_RETURN open(kit::Capabilities &caps) override;
    void query(DAT_IA_ATTR &ia_attr, DAT_PROVIDER_ATTR &provider_attr) override;
    void facts(kit::TransportFacts &f) const override;
    const sockaddr *address() const override { return reinterpret_cast<const sockaddr *>(&addr_); }

    DAT_RETURN cq_open(kit::Evd &evd, void *&cq) override;
    void cq_close(kit::Evd &evd) override;
    int cq_read(kit::Evd &evd, kit::Completion *out, int max) override;
    int cq_fd(kit::Evd &evd) override;
    bool cq_arm(kit::Evd &evd) override;
    void cq_cno_changed(kit::Evd &evd) override;

    DAT_RETURN mr_register(kit::Lmr &lmr, kit::Registration &out) override;
    void mr_deregister(kit::Lmr &lmr) override;
    DAT_RETURN rmr_open(kit::Rmr &rmr, void *&tp) override;
    void rmr_close(kit::Rmr &rmr) override;
    DAT_RETURN rmr_bind(kit::Rmr &rmr, kit::Ep &ep, const kit::Lmr &lmr, std::uintptr_t addr, DAT_VLEN len,
                        DAT_MEM_PRIV_FLAGS privileges, DAT_RMR_CONTEXT &context) override;
    DAT_RETURN rmr_unbind(kit::Rmr &rmr, kit::Ep *ep) override;

    DAT_RETURN ep_open(kit::Ep &ep, void *&tp) override;
    void ep_close(kit::Ep &ep) override;
    void ep_free(kit::Ep &ep) override;
    void ep_reset(kit::Ep &ep) override;
    std::size_t ops_writing_memory(kit::Ep &ep) override;
    DAT_RETURN connect(kit::Ep &ep, const sockaddr *addr, DAT_CONN_QUAL qual, const void *pdata, std::size_t pdata_len,
                       DAT_TIMEOUT timeout) override;
    void connect_cancel(kit::Ep &ep) override;
    DAT_RETURN disconnect(kit::Ep &ep, bool graceful) override;
    DAT_RETURN ep_break(kit::Ep &ep) override;
    DAT_RETURN psp_open(kit::Psp &psp, const DAT_CONN_QUAL *qual, DAT_CONN_QUAL *assigned, void *&tp) override;
    void psp_close(kit::Psp &psp) override;
    DAT_RETURN accept(kit::Cr &cr, kit::Ep &ep, const void *pdata, std::size_t pdata_len) override;
    DAT_RETURN reject(kit::Cr &cr, const void *pdata, std::size_t pdata_len) override;
    void cr_release(kit::Cr &cr) override;

    DAT_RETURN post_recv(kit::Ep &ep, kit::Op &op, const kit::Segment *segs, int nsegs,
                         DAT_COMPLETION_FLAGS flags) override;
    DAT_RETURN post(kit::Ep &ep, kit::PostKind kind, kit::Op &op, const kit::Segment *segs, int nsegs,
                    const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags) override;
    DAT_RETURN post_ext(kit::Ep &ep, kit::Op &op, const kit::Segment *segs, int nsegs, const DAT_RMR_TRIPLET &remote,
                        DAT_COMPLETION_FLAGS flags) override;

private:
    DAT_RETURN post_failed(RdmCtx &c, ssize_t rc); // out of line: the refusal of a post
    inline DAT_RETURN post_context(RdmEp &rep, kit::Op &op, RdmCtx *&c);
    // ---- the side channel (rdm_cm.cpp); handlers run on the loop
    void listener_ready(RdmPsp *psp);
    void conn_ready(std::uint64_t id, std::uint32_t events);
    void handshake_expired(std::uint64_t id);
    // One whole message from the peer of `c`; mu_ held. Fills `report`;
    // false: the connection is to be dropped (`c` is then retired by the caller).
    // `ready`: the EP whose receives the kit may now hand over
    // (kit::ep_transport_ready, called once mu_ is released).
    void on_message(RdmConn &c, const rdmwire::Message &m, kit::ConnectionReport &report, bool &retire,
                    kit::Ep *&ready);
    // The socket of `c` ended or failed (mu_ held): what that means in its
    // state; whether `c` is to be retired.
    bool on_conn_lost(RdmConn &c, kit::ConnectionReport &report, int err);
    bool send_message(RdmConn &c, const rdmwire::Message &m);
    // Tells the peer of `rep` over `c` that the connection ends, naming how
    // many messages were sent before (the peer takes those before it
    // flushes its receives). mu_ held.
    void send_disconnect(RdmEp &rep, RdmConn &c);
    RdmConn *new_conn(int fd, RdmConn::State state); // mu_ held
    RdmConn *conn_by_id(std::uint64_t id);           // mu_ held
    // Takes `c` out of the tables (mu_ held); finish_retire() then frees it
    // without mu_ (it waits for its handlers).
    RdmConn *detach_conn(std::uint64_t id);
    void finish_retire(RdmConn *c);
    // The data path of `rep`'s connection is over (mu_ held): its receives
    // cancelled, its address vector entry released.
    void end_data_path(RdmEp &rep);
    // The peer of `rep` (mu_ held): its address vector entry, tag and PZ tag.
    DAT_RETURN attach_peer(RdmEp &rep, const std::string &peer_name, std::uint64_t peer_tag, std::uint8_t peer_pz_tag);
    // Starts `rep`'s side of a connection (mu_ held): its shared libfabric
    // endpoint and a new tag.
    DAT_RETURN prepare_data_path(RdmEp &rep, std::unique_lock<std::mutex> &lock);
    // A graceful disconnect whose requests are still in flight (the EP's timer).
    void graceful_check(std::uint64_t ep_id);
    void collect_for_disconnect(std::uint64_t ep_id); // the loop's, no lock held
    // Sends the disconnect, ends the data path and detaches the side channel
    // (mu_ held); fills `report`, returns the connection to retire.
    RdmConn *finish_disconnect(RdmEp &rep, kit::ConnectionReport &report);
    void break_connection(std::uint64_t ep_id);
    // break_connection on the loop, from any thread: out of line, as the
    // completion paths that ask for it rarely do.
    __attribute__((cold, noinline)) void break_connection_later(std::uint64_t ep_id);
    // The connection of `rep` breaks because its libfabric endpoint will
    // not answer (mu_ held): the report goes into `broken` and the side
    // channel into dead_conns_, both finished by the loop once mu_ is
    // released. Nothing of its operations will complete by itself.
    // `unanswered`: this EP's own RDMA or atomic operation went unanswered
    // (its oldest reports DAT_DTO_ERR_REMOTE_ACCESS).
    void break_stalled(RdmEp &rep, std::vector<kit::ConnectionReport> &broken, bool unanswered);
    // `fep` left an RMA unanswered (mu_ held): a provider may hold the
    // answers to everything the endpoint sends after it behind that one
    // (shm 1.17 walks an endpoint's responses in order and stops at the first
    // not answered; a refused RMA is never answered), so the connections
    // still on it break now, and new ones get a new endpoint.
    void retire_stalled(RdmFabricEp *fep, std::vector<kit::ConnectionReport> &broken);
    // An accept whose requester is gone: ACCEPT_COMPLETION_ERROR, from the loop.
    void fail_accept_later(RdmEp &rep);

    // ---- endpoints (rdm_ep.cpp)
    // mu_ held by `lock`, released while another thread builds the pair's
    // endpoint; makes it if ensure_fabric_ep did not.
    RdmFabricEp *fabric_ep_for(kit::Ep &ep, std::unique_lock<std::mutex> &lock);
    DAT_RETURN ensure_fabric_ep(kit::Ep &ep); // mu_ not held
    std::unique_ptr<RdmFabricEp> make_fabric_ep(kit::Ep &ep, RdmDomain &dom, bool &grown, bool mu_held);
    // From an endpoint's first binding to its fi_enable, a provider's
    // progress on a queue bound to it meets an endpoint not set up yet (shm's
    // has no region, and faults). Nobody reads those queues meanwhile:
    // consumers read under their EVD's lock, which make_fabric_ep holds; the
    // loop's rounds and drive_once read under mu_, and sweeps read the null
    // queue under dom_mu_: each looks at binding_ there first, and taking
    // each lock once after raising it waits out a read under way.
    class BindingWindow;
    void wake_grown(kit::Evd *request, kit::Evd *recv);
    void close_fabric_eps_of(kit::Evd &evd);
    // `key`: the provider's key of remote.rmr_context (remote_key).
    DAT_RETURN post_write_immed(RdmEp &rep, RdmCtx &c, kit::Op &op, const kit::Segment *segs, int nsegs,
                                const DAT_RMR_TRIPLET &remote, std::uint64_t key);
    DAT_RETURN post_atomic(RdmEp &rep, RdmCtx &c, kit::Op &op, const kit::Segment &result,
                           const DAT_RMR_TRIPLET &remote, std::uint64_t key);
    // The context of `op` in `rep`'s current block (a new block when the
    // EP's records were rebuilt), counted as with the provider.
    inline RdmCtx *take_ctx(RdmEp &rep, kit::Op &op); // rdm_ep.cpp only
    void give_back_ctx(RdmCtx &c); // the post failed
    static void writes_memory(RdmCtx &c) { c.writes_memory.store(true, std::memory_order_relaxed); }
    void retire_block(RdmEp &rep); // mu_ held
    // Zeroes the counts of a connection that ended (after retire_block).
    static void reset_connection_counts(kit::Ep &ep, RdmEp &rep);
    void cancel_receives(RdmEp &rep);                                       // mu_ held
    static void cancel_posted(RdmFabricEp &fep, const RdmCtxBlock &b);      // mu_ held
    bool peer_address_fits(const std::string &peer, const std::string &own) const;
    static void drop_null_queue(RdmDomain &dom); // dom_mu_ held
    int av_insert(RdmDomain &dom, const std::string &name, fi_addr_t &out); // mu_ held; 0 on success
    void av_release(RdmDomain &dom, const std::string &name);               // mu_ held

    // Runs `post` (a libfabric post returning ssize_t) on `rep`'s endpoint
    // until the provider takes it: -FI_EAGAIN means "drive progress and try
    // again" (shm's first message to a peer waits for the peer to map our
    // region; a full queue drains as completions are written; shm takes one
    // small RDMA write per peer at a time, and the next only once the
    // target's progress has carried the last out). What waits for the
    // peer's progress asks the peer for it (nudge) rather than wait for its
    // loop's next round. Bounded: a send, write or read still refused then
    // waits in the EP's queue (RdmEp::deferred); for the rest, a queue that
    // stays full is the caller's DAT_INSUFFICIENT_RESOURCES.
    static constexpr std::chrono::milliseconds kPostBound{50};
    template <class Post>
    ssize_t post_retrying(RdmEp &rep, Post &&post, std::chrono::milliseconds bound = kPostBound) {
        ssize_t rc = post();
        if (rc != -FI_EAGAIN)
            return rc;
        RdmFabricEp &fep = *rep.fep;
        const auto start = std::chrono::steady_clock::now();
        const auto until = start + bound;
        for (unsigned i = 1; rc == -FI_EAGAIN; ++i) {
            drive_queues(fep);
            rc = post();
            if ((i & 15) == 0 && rc == -FI_EAGAIN) {
                const auto now = std::chrono::steady_clock::now();
                if (now > until)
                    break;
                if (now - start > kNudgeAfter)
                    nudge(rep);
            }
        }
        return rc;
    }
    // A zero-entry read of `fep`'s queues (progress) from a thread that holds
    // no lock of their EVDs, a post waiting for room: under those locks, as a
    // consumer reads, so that it never meets an endpoint being bound to them
    // (BindingWindow). A lock another thread holds skips its queue: that
    // thread drives the same progress.
    static void drive_queues(RdmFabricEp &fep);
    // Asks the peer of `rep` over the side channel (rdmwire::kNudge) to
    // drive its provider's progress for a while: an operation of ours waits
    // for it. At most one per kNudgeEvery; mu_ not held (nudge_locked: held).
    void nudge(RdmEp &rep);
    void nudge_locked(RdmEp &rep);
    static constexpr std::chrono::microseconds kNudgeAfter{1000};
    static constexpr std::chrono::milliseconds kLoopNudgeAfter{10}; // an RMA taken, unanswered
    static constexpr std::chrono::milliseconds kNudgeEvery{1};
    // How long a nudged IA runs its progress rounds back to back.
    static constexpr std::chrono::milliseconds kNudgedSpin{10};
    // How long its rounds go on back to back after a round saw peers' RDMA
    // operations land (RdmFabricEp::rma_cntr) while its consumer did not
    // poll: a stream of writes then lands at the provider's pace, not a
    // round's. Longer than a round, so that an initiator that slept until
    // its own round finds the target still going.
    static constexpr std::chrono::milliseconds kLandingSpin{2};

    // The connection's hello (kHelloBit), once the peer is attached; mu_ not held.
    void hello(RdmEp &rep);
    // Counts an RDMA or atomic operation posted on `rep` (rma_out).
    void rma_posted(RdmEp &rep);
    // A send, write or read counted as posted that the provider never got
    // (refused, or dropped from the EP's queue): its counts go back.
    void request_unposted(RdmEp &rep, kit::PostKind kind);
    // ---- deferred requests (RdmEp::deferred)
    ssize_t submit(RdmEp &rep, kit::PostKind kind, RdmCtx &c, const iovec *iov, void **desc, std::size_t n,
                   std::uint64_t flags, std::uint64_t data, const fi_rma_iov *rma); // one attempt
    // Queues `d` behind the others (defer_mu not held); the loop retries it.
    void defer(RdmEp &rep, RdmDeferred &&d);
    // Hands the provider what it takes of `rep`'s deferred requests, in
    // order (defer_mu held); true when none is left.
    bool drain_deferred(RdmEp &rep);
    void drop_deferred(RdmEp &rep); // the connection ended (mu_ held)

    // Closes `fep` (mu_ held; its queues may stay): see RdmEvdQueues::wait_mu.
    // `enable_called`: fi_enable was called on it.
    void close_fep(RdmFabricEp &fep, bool enable_called = true);
    // ---- completion queues (rdm_cq.cpp)
    int read_queue(RdmCq &q, kit::Completion *out, int max);
    inline int read_queue_inline(RdmCq &q, kit::Completion *out, int max); // rdm_cq.cpp only
    // The queue of `evd` in `dom` (made when missing; `grown` then), or dom's
    // null queue without an EVD; nullptr (logged) on failure.
    RdmCq *cq_part(kit::Evd *evd, RdmDomain &dom, bool &grown);
    fid_cq *open_cq(RdmDomain &dom, std::size_t size, int &fd);
    inline bool translate(void *context, std::uint64_t flags, std::size_t len, std::uint64_t data,
                          DAT_DTO_COMPLETION_STATUS status, kit::Completion &out); // rdm_cq.cpp only

    // ---- memory (rdm_mr.cpp)
    DAT_RETURN register_range(RdmDomain &dom, std::uintptr_t addr, DAT_VLEN len, std::uint64_t access, fid_mr **mr,
                              DAT_RMR_CONTEXT *key);

    // ---- protection zones (rdm_mr.cpp): a domain each
    // The domain of `pz`, counted (made for its first user; the first PZ
    // takes the IA's); nullptr (logged) when libfabric makes none.
    RdmDomain *domain_acquire(const kit::Pz *pz);
    void domain_release(RdmDomain *dom);
    RdmDomain *open_domain(); // nullptr: logged
    std::mutex dom_mu_;       // the tables below and the users counts; taken after mu_, never before
    std::vector<std::unique_ptr<RdmDomain>> domains_; // [0]: the IA's first; all closed with the IA
    std::unordered_map<const kit::Pz *, RdmDomain *> pz_domains_;
    std::vector<RdmDomain *> spare_domains_; // no user left: the next new PZ takes one
    std::mutex parts_mu_;                    // growing an EVD's queues (cq_part)

    // ---- progress (rdm_ia.cpp): the loop's idle hook
    int progress_round();
    // The loop watches `q`'s wait fd while the round may (fi_trywait trusts
    // it, kMaxFdWakes not spent), and stops watching it otherwise; true:
    // fi_trywait failed, and consumers waiting on the endpoint's queues are
    // to be woken.
    bool arm_queue(RdmCq &q, bool may);
    void queue_ready(RdmCq &q); // its watch handler: the round that follows drives it
    void watch_queue(RdmCq &q); // at its opening, disarmed
    // Wakes by queue fds a millisecond at most: a socket that stays readable
    // (a peer's hangup before rxm's connection management saw it) must not
    // turn the loop into a spin; a stream needs far fewer.
    static constexpr int kMaxFdWakes = 64;
    int fd_wakes_ = 0;               // the loop's: in the millisecond from fd_window_ns_
    bool fd_woke_ = false;           // the loop's: a queue's fd woke it since the last round
    std::int64_t fd_window_ns_ = 0;
    // Before endpoints of ours close: one progress pass of every RDM IA of
    // the process, this one included (no lock of ours held). shm does not
    // map the region of a peer in the same process but uses that endpoint's
    // own, which its close unmaps; what a peer has not taken from us by then
    // (the connection request shm sends ahead of the first message, a
    // message whose answer goes into our region) it would read from
    // unmapped memory.
    void drive_ias();
    void drive_once(); // the pass itself; takes mu_

    Params params_;
    fi_info *info_ = nullptr;
    fid_fabric *fabric_ = nullptr;
    fid_domain *domain_ = nullptr; // domains_[0]'s: what open() asks the provider about
    sockaddr_storage addr_{};      // the IA address: the side channel's IP
    // What the provider's attributes decided at open().
    bool directed_recv_ = false;     // FI_DIRECTED_RECV: receives name the peer
    bool fence_after_write_ = false; // no FI_ORDER_SAW: a send after a write carries FI_FENCE
    bool delivery_complete_ = true;
    bool user_keys_ = false; // no FI_MR_PROV_KEY: we choose the keys
    // Keys we choose, or the provider's that count up from 1 (util's key
    // map: shm, rxm, rxd): the top kPzTagBits of an rmr_context are then
    // its PZ's tag, and the key the rest (kKeyMask). An access with a
    // context of another PZ of the peer's IA is refused before the provider
    // sees it: shm answers a refused RMA with nothing, and what the
    // initiating endpoint sends afterwards waits behind it (retire_stalled).
    bool pz_tags_ = false;
    static constexpr unsigned kKeyBits = 32 - rdmwire::kPzTagBits;
    static constexpr std::uint64_t kKeyMask = (std::uint64_t(1) << kKeyBits) - 1;
    // The provider key of `ctx` for an RDMA access on `rep`'s connection;
    // false (logged) when the context names another PZ than the peer
    // Endpoint's (dat_ep_post_rdma_write(3DAT): DAT_PROTECTION_VIOLATION).
    bool remote_key(const RdmEp &rep, DAT_RMR_CONTEXT ctx, std::uint64_t &key) const;
    std::atomic<std::uint32_t> next_key_{1};
    std::uint64_t tag_base_ = 0; // random, per IA: tags of other IAs and processes differ
    std::atomic<std::uint32_t> next_tag_{1};

    std::atomic<int> binding_{0}; // endpoints between binding and fi_enable (BindingWindow)
    std::mutex mu_;               // everything below
    std::unordered_map<std::uint64_t, std::unique_ptr<RdmConn>> conns_;
    std::uint64_t next_conn_id_ = 1;
    std::unordered_map<std::uint64_t, RdmEp *> eps_;
    std::uint64_t next_ep_id_ = 1;
    using FabricEpKey = std::tuple<RdmDomain *, kit::Evd *, kit::Evd *>;
    std::map<FabricEpKey, std::unique_ptr<RdmFabricEp>> fabric_eps_;
    std::set<FabricEpKey> building_; // by ensure_fabric_ep, mu_ released
    std::condition_variable building_done_;
    // Libfabric endpoints that left an RMA unanswered (retire_stalled): no
    // connection gets them any more; closed with their EVDs.
    std::vector<std::unique_ptr<RdmFabricEp>> stalled_feps_;
    // Every libfabric endpoint, in use or stalled (mu_ held).
    template <class F>
    void for_each_fep(F &&f) {
        for (auto &entry : fabric_eps_)
            f(*entry.second);
        for (auto &fep : stalled_feps_)
            f(*fep);
    }
    // Retired blocks with operations still with the provider, one reference
    // each (the EP's, handed over): freed once only that one is left, or
    // with the transport, whose endpoints no longer complete anything.
    std::vector<RdmCtxBlock *> retired_blocks_;
    void retire(RdmCtxBlock *b); // mu_ held: into retired_blocks_, or freed
    // What ended connections left unreceived. The provider keeps a message
    // no receive matched until one does, in entries that every receive of
    // the libfabric endpoint draws on (shm: rx_size of them, then every
    // receive and message of the IA's connections is refused), and no
    // receive will carry an ended connection's tag again. The loop's rounds
    // take such messages with receives of that tag (into scratch_ where it
    // exists, empty elsewhere) until one finds nothing (run_sweeps).
    struct RdmSweep {
        RdmFabricEp *fep = nullptr;
        std::uint64_t tag = 0;        // the ended connection's, or its hello's (kHelloBit)
        RdmCtxBlock *block = nullptr; // no records: its completions never reach the kit
        bool posted = false;          // its receive went to the provider in this pass
        bool cancelled = false;       // and the last one was cancelled
        int passes_left = 1;          // after the first that found nothing
        std::int64_t not_before_ns = 0;
        std::int64_t until_ns = 0; // a peer that goes on sending to the tag is not followed for ever
    };
    std::mutex sweeps_mu_; // sweeps_ only; taken last
    std::vector<RdmSweep> sweeps_;
    // Held by the loop while it sweeps without mu_, and by
    // close_fabric_eps_of before mu_: a sweep's endpoint and EVD stay.
    std::mutex sweep_run_mu_;
    // Where a message goes that is longer than the receive it matched: a
    // receive's last segment, as long as the longest message, reserved and
    // not committed, so that the provider never truncates: shm 1.17 never
    // completes a truncated message it moves by CMA (smr_cma_loop copies
    // until the whole of it fitted) or in segments. The sweeps' receives
    // take it whole.
    // shm only, and not where it wants local buffers registered (FI_MR_LOCAL).
    void *scratch_ = nullptr;
    std::size_t scratch_len_ = 0;
    long recv_budget_ = 0;                     // RdmRecvBudget::capacity of every libfabric endpoint
    std::size_t recv_iov_limit_ = 0;           // a receive with fewer segments gets the scratch as one more
    std::atomic<bool> scratch_written_{false}; // pages to give back (run_sweeps)
    void open_scratch();
    __attribute__((cold, noinline)) void oversized(kit::Completion &out);
    // A receive with a bounce buffer completed: its data out to the
    // consumer's segments (unless it failed or its EP is gone), the buffer freed.
    __attribute__((cold, noinline)) static void finish_bounce(RdmCtx &c, std::size_t len,
                                                              DAT_DTO_COMPLETION_STATUS status);
    static constexpr std::chrono::seconds kSweepFor{10};
    static constexpr std::chrono::milliseconds kSweepAgainAfter{20};
    static constexpr int kSweepsPerRound = 1024; // receives of one sweep in one round
    void sweep_ended(RdmEp &rep);                // any lock held
    // The loop's, no lock held; EVDs whose queue it read go to `wake`.
    // True: sweeps remain.
    bool run_sweeps(std::vector<kit::Evd *> &wake);
    bool sweep_step(RdmSweep &sw, std::int64_t now_ns, std::vector<kit::Evd *> &wake); // true: finished
    static constexpr std::size_t kAvIdleEntries = 64;
    // shm 1.17 reaches a peer endpoint of this process through that
    // endpoint's own mapping of its region, which fi_close unmaps, and
    // fi_enable of any endpoint touches the region of every peer in its
    // address vector: an entry for an endpoint of this process that has
    // closed (another IA's, or this one's) must leave the vector first.
    // Its names are unique in the process (a counter of shm's), so the
    // closed ones are noted process-wide and looked for.
    bool maps_local_peers_ = false;
    void note_departed(const RdmFabricEp &fep); // before its fi_close
    // mu_ held: removes the unused entries of dom that name a closed one.
    void forget_departed_peers(RdmDomain &dom);
    // EPs with RDMA or atomic operations outstanding (rma_out went from 0 to
    // 1 since the loop last looked): the loop breaks the connection of one
    // whose operations stay unanswered. Its own lock: taken on the post path.
    static constexpr std::chrono::milliseconds kRmaAnswerTimeout{2000};
    static constexpr std::chrono::milliseconds kDrainTimeout{1000};
    // How long the rounds go on after a connection ended with operations
    // out (end_data_path): longer than the kit waits for a peer's
    // (ep_await_writers, 2 s).
    static constexpr std::chrono::milliseconds kLingerProgress{5000};
    std::uint64_t round_ = 0;
    std::int64_t spin_until_ns_ = 0; // the loop's: a peer's nudge (kNudgedSpin), or landings (kLandingSpin)
    std::int64_t polled_ns_ = 0;     // the loop's: when a round last saw the consumer's dequeues move
    static constexpr int kMaxRoundMs = 64;
    // The slowest rounds while an EVD without a wait fd feeds a CNO: its
    // consumer waits outside DAT for the loop to wake it, for as long as
    // the CNO stays attached.
    static constexpr int kCnoRoundMs = 8;
    int round_ms_ = 1; // the loop's: how long the next wait may be
    std::chrono::steady_clock::time_point quiet_since_{};
    std::vector<RdmConn *> dead_conns_; // the loop's: retired once mu_ is released
    std::mutex rma_watch_mu_;
    std::vector<std::uint64_t> rma_watch_;
    std::vector<std::uint64_t> deferred_eps_; // EPs with deferred requests (rma_watch_mu_)
    int handshakes_ = 0; // passive side channels waiting for a request (bounded: kMaxHandshakes)
    int connected_ = 0;  // connections that exist: the loop drives progress while there are any
    // ... and until this time (steady clock, ns) after a connection ended
    // with operations still with the provider (end_data_path).
    std::int64_t linger_until_ns_ = 0;
};

} // namespace dat2::ofi
