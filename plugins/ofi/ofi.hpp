// SPDX-License-Identifier: BSD-3-Clause
// The libfabric transport: DAT over connection-oriented libfabric
// endpoints (FI_EP_MSG). One IA = fabric + domain + event queue; the IA's
// event loop (kit::EventLoop) reads the event queue and drives the
// provider's progress on the completion queues.
//
// Files by object: ofi_ia.cpp (params, open, attributes), ofi_cm.cpp
// (connections, service points, link loss), ofi_ep.cpp (endpoints, posts),
// ofi_cq.cpp (completion queues and progress), ofi_mr.cpp (LMRs, RMRs),
// ofi_srq.cpp (shared receive contexts), ofi_ext.cpp (extended DTOs).
#pragma once

#include "ofi_cm_data.hpp"
#include "transport.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace dat2::ofi {

inline constexpr std::uint32_t kApiVersion = FI_VERSION(1, 11);

// fi_getinfo, serialized with fork(): libfabric takes a lock of its own in
// every fi_getinfo and has no fork handler, so a child forked while another
// thread was inside it would wait on that lock for ever at its first IA.
int getinfo(const char *node, std::uint64_t flags, const fi_info *hints, fi_info **info);

// Remote CQ data of the message that ends a write with immediate data
// (ofi_ext.cpp): bit 63 set (data without it, from builds that sent an
// rmr_context with a send with invalidate, is ignored), the written length
// in bits 32..62, the immediate data below.
inline constexpr std::uint64_t kImmedTag = 1ull << 63;
inline constexpr std::uint64_t kMaxImmedLength = 0x7fffffff;

// -FI_E* as DAT: kit::errno_to_dat (the same numbers) and libfabric's own.
DAT_RETURN to_dat(int fi_err, DAT_RETURN fallback);
DAT_DTO_COMPLETION_STATUS to_dto_status(int fi_err);
const char *fi_text(int fi_err);

// What dat.conf's ia_params select (see plugins/ofi/README.md).
struct Params {
    std::string provider;
    std::string address;
    std::string domain;
    std::string fabric;
    unsigned link_timeout_ms = 0; // 0: the kernel's TCP defaults (README, "Link loss")
    std::string ep_type;          // "msg", "rdm", or empty: msg where the provider has it (ofi_plugin.cpp)
    // write_completion=transmit: RDMA writes complete once sent, not once
    // the target placed them (README, "RDMA write completion").
    bool write_transmit = false;
};
bool parse_params(const std::string &text, Params &out, std::string &error);

// link_timeout_ms on the TCP socket under a connected `ep` (TCP_USER_TIMEOUT
// and keepalive); false when the endpoint has no TCP socket of its own.
bool bound_link_timeout(fid_ep *ep, unsigned ms);

// The kit's resolved segments as libfabric's iovec and descriptor arrays;
// returns their total length. One segment, the common post, is copied
// without the loop: the vectorized loop's set-up cost more than the copy.
inline std::uint64_t to_iov(const kit::Segment *segs, int nsegs, iovec *iov, void **desc) {
    if (__builtin_expect(nsegs == 1, 1)) {
        iov[0].iov_base = segs[0].addr;
        iov[0].iov_len = segs[0].length;
        desc[0] = segs[0].desc;
        return segs[0].length;
    }
    std::uint64_t total = 0;
    for (int i = 0; i < nsegs; ++i) {
        iov[i].iov_base = segs[i].addr;
        iov[i].iov_len = segs[i].length;
        desc[i] = segs[i].desc;
        total += segs[i].length;
    }
    return total;
}

// A post libfabric refused: the queue full (-FI_EAGAIN), or an error that
// is logged with `what` and the IA's name. Out of line: posts rarely fail.
DAT_RETURN refused_post(const char *ia, const char *what, ssize_t rc);

// Posts a send or a receive of the kit's segments on `ep` (an endpoint, or
// a shared receive context), its completion naming `op`.
inline ssize_t post_msg(fid_ep *ep, bool recv, kit::Op &op, const kit::Segment *segs, int nsegs) {
    iovec iov[kit::kMaxIov];
    void *desc[kit::kMaxIov];
    to_iov(segs, nsegs, iov, desc);
    fi_msg msg{};
    msg.msg_iov = iov;
    msg.desc = desc;
    msg.iov_count = static_cast<std::size_t>(nsegs);
    msg.context = &op;
    return recv ? fi_recvmsg(ep, &msg, FI_COMPLETION) : fi_sendmsg(ep, &msg, FI_COMPLETION);
}

struct OfiEp;
struct OfiPsp;
struct OfiRequest;

// The libfabric domain of a protection zone (ofi_mr.cpp). A domain is the
// scope of libfabric's memory keys: the target's endpoint looks a key up in
// its own domain only, so an RDMA access with the key of a region in another
// PZ finds nothing and fails, as on an InfiniBand device whose protection
// domains differ.
struct OfiDomain {
    fid_domain *domain = nullptr;
    fid_cq *null_cq = nullptr; // bound where an EP has no EVD for a direction
    int users = 0;             // LMRs, EPs, RMRs and SRQs of its PZ
    int cq_parts = 0;          // completion queues of EVDs opened in it
    bool ia_own = false;       // the IA's first domain, closed with the IA
};

// The completion queues behind a DTO EVD: one in each domain its EPs are in
// (a queue serves endpoints of its own domain only), and another in a domain
// whenever its queues there each have kBindsPerPart endpoint bindings.
// libfabric 1.17's tcp walks every endpoint bound to a queue at each read
// of it, and binds and closes by linear searches of the queue's lists,
// under the lock its reads hold: the size of a queue, not the number of
// connections, is what a connection's setup, end and free then cost.
// An EVD with fewer than kBindsPerPart bindings (64 EPs that send and
// receive on it, 128 that use it one way) has one queue.
struct OfiCq {
    static constexpr int kMaxParts = 128;
    static constexpr int kBindsPerPart = 128; // an EP with both directions on the EVD binds twice
    struct Part {
        OfiDomain *dom;
        fid_cq *cq;
    };
    Part parts[kMaxParts];
    std::atomic<int> count{0}; // parts written before the count is (release)
    // With two parts or more: an epoll set of their wait fds (each event's
    // data the part's fid_cq).
    int wait_fd = -1;
    // OfiTransport::srq_posts_ when this EVD last read the SRQ queues
    // (under srq_queues_mu_).
    std::uint64_t srq_seen = 0;
};

// What a queue's wait fd does not show: a queue (opened by open_cq) is
// `hot` (its fid's context) while it may have work that its fd does not
// announce: completions whose signal the provider's progress consumed, a
// message that waited for a receive now posted (tcp goes back to it only
// when it walks the queue's endpoints). A read of an EVD reads its parts
// beyond the first only when their fd is readable or they are hot.
using PartHot = std::atomic<bool>;
inline PartHot *part_hot(fid_cq *cq) { return static_cast<PartHot *>(cq->fid.context); }

class OfiTransport final : public kit::Transport {
public:
    OfiTransport(kit::Ia &ia, const Params &params);
    ~OfiTransport() override;

    DAT_RETURN open(kit::Capabilities &caps) override;
    void query(DAT_IA_ATTR &ia_attr, DAT_PROVIDER_ATTR &provider_attr) override;
    void facts(kit::TransportFacts &out) const override;
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

    DAT_RETURN srq_open(kit::Srq &srq, void *&tp) override;
    void srq_close(kit::Srq &srq) override;
    DAT_RETURN srq_post(kit::Srq &srq, kit::Op &op, const kit::Segment *segs, int nsegs) override;

private:
    // ---- connections (ofi_cm.cpp); the event queue's handler runs on the loop
    void read_event_queue();
    void handle_cm_event(std::uint32_t event, void *buf, ssize_t len);
    void handle_cm_error();
    // Refuses a request as if nobody listened (NON_PEER_REJECTED), saying
    // why in the log; frees `info`. mu_ held.
    void refuse(OfiPsp &opsp, fi_info *info, const char *why);
    void request_answered(OfiRequest *req);
    bool listener_done_locked(const OfiPsp &opsp) const;
    void close_listener(OfiPsp *opsp);
    void close_listener_on(std::uint16_t port);
    static void ask_to_close_listeners_on(std::uint16_t port);
    void break_connection(std::uint64_t id); // ep_break, on the loop
    void disconnect_expired(std::uint64_t id);

    // ---- endpoints (ofi_ep.cpp), mu_ held
    // Creates, binds and enables the libfabric endpoint of `oep` in the
    // domain of its EP's PZ; `grown` as cq_part().
    DAT_RETURN make_endpoint(OfiEp &oep, fi_info *info, bool &grown);
    void close_endpoint(OfiEp &oep);
    void unbind_queues(OfiEp &oep); // what make_endpoint counted to its queues
    OfiEp *ep_by_fid(const fid *f);

    // ---- completion queues and progress (ofi_cq.cpp)
    // Completions of one libfabric queue; `taker` (an EP with an SRQ, whose
    // own queue this is) becomes Completion::ep of each.
    int read_queue(fid_cq *cq, kit::Ep *taker, kit::Completion *out, int max);
    // `took`, when given: set when the read took entries (more may remain).
    inline int read_queue_inline(fid_cq *cq, kit::Ep *taker, kit::Completion *out, int max,
                                 bool *took = nullptr); // ofi_cq.cpp only
    // cq_read beyond an EVD's first part: the parts whose fd is readable or
    // which are hot (PartHot).
    int read_other_parts(OfiCq &c, int parts, kit::Completion *out, int max);
    // Turns one libfabric completion (`status` from its error entry, if any)
    // into the kit's; false when it reports nothing yet (one part of a write
    // with immediate data).
    inline bool translate(void *context, std::uint64_t flags, std::size_t len, std::uint64_t data,
                          DAT_DTO_COMPLETION_STATUS status, kit::Ep *taker, kit::Completion &out); // ofi_cq.cpp only

    // ---- memory and protection zones (ofi_mr.cpp)
    // Registers [addr, addr + len) in `dom` with `access`; the key becomes
    // *key (it must fit a 32-bit rmr_context).
    DAT_RETURN register_range(OfiDomain &dom, std::uintptr_t addr, DAT_VLEN len, std::uint64_t access, fid_mr **mr,
                              DAT_RMR_CONTEXT *key);
    // The domain of `pz` (made for its first user), counted; nullptr (logged)
    // when libfabric makes none. An object without a PZ uses the IA's.
    OfiDomain *domain_acquire(const kit::Pz *pz);
    void domain_release(OfiDomain *dom);
    std::mutex dom_mu_; // the map and the counts
    std::unordered_map<const kit::Pz *, OfiDomain *> pz_domains_;
    OfiDomain base_;          // domain_: taken by the first PZ, and the first part of every EVD's queues
    bool base_taken_ = false; // by a PZ
    void domain_close_if_unused(OfiDomain *dom); // dom_mu_ held
    // A queue of `evd` in `dom` with room for `binds` more endpoint
    // bindings, counted to it (made when none has room), or dom's null
    // queue without an EVD; mu_ held. `grown`: a queue was added (the EVD's
    // waiters must look again once mu_ is released).
    fid_cq *cq_part(kit::Evd *evd, OfiDomain &dom, int binds, bool &grown);
    void cq_unbind(fid_cq *cq, int binds); // mu_ held; what cq_part counted
    // EVDs with a part (not their first) whose last binding went: the loop
    // closes such parts once they are empty, so that the queues, and their
    // fds, follow the number of connections down as well as up (mu_).
    std::vector<kit::Evd *> retiring_;
    struct Retired {
        fid_cq *cq;
        OfiDomain *dom;
    };
    // mu_ held, on the loop: takes the unbound, empty parts out of the EVDs
    // of retiring_ whose lock it can take now, into `out` to be closed once
    // mu_ is released; whether any EVD is left to look at again.
    bool retire_parts_locked(std::vector<Retired> &out);
    fid_cq *open_cq(OfiDomain &dom, std::size_t size); // with its PartHot
    static void close_cq(fid_cq *cq);                  // and its PartHot

    // ---- shared receive queues (ofi_srq.cpp)
    int read_srq_queues(kit::Evd &evd, kit::Completion *out, int max);
    void close_srq_queue(OfiEp &oep); // the EP is closed: drops what its queue holds
    // The largest shared receive context the domain makes (0: none usable).
    DAT_COUNT probe_srq_size();
    // The deepest transmit (or receive) queue the provider gives an endpoint.
    std::size_t deepest_queue(bool tx) const;
    std::size_t max_tx_size_ = 0; // deepest_queue(true)

    // ---- extended DTOs (ofi_ext.cpp): atomics where the domain has them
    // (fi_query_atomic), write with immediate data where remote CQ data
    // holds 64 bits and a send is ordered after a write.
    kit::ExtCaps find_ext_caps(); // and the slot pool; domain_ open
    DAT_RETURN post_write_immed(OfiEp &oep, kit::Op &op, const kit::Segment *segs, int nsegs,
                                const DAT_RMR_TRIPLET &remote);
    DAT_RETURN post_atomic(OfiEp &oep, kit::Op &op, const kit::Segment &result, const DAT_RMR_TRIPLET &remote);
    // A write with immediate data is two libfabric operations: the RDMA
    // write, then an empty message whose remote CQ data carries the
    // immediate data and the written length. The message consumes the
    // target's oldest receive, as InfiniBand's write with immediate does
    // (fi_writedata would consume none), and arrives after the data
    // (FI_ORDER_SAW). The DTO completes once both have; each part has its
    // own libfabric context in a slot of this pool, told apart from DTO
    // records by its address.
    struct ImmedSlot {
        fi_context2 write_ctx;
        fi_context2 send_ctx;
        kit::Op *op = nullptr;
        int left = 0; // parts not completed yet
        DAT_DTO_COMPLETION_STATUS status = DAT_DTO_SUCCESS;
        ImmedSlot *next_free = nullptr;
    };
    static constexpr std::size_t kImmedSlots = 1024; // writes with immediate data in flight per IA
    std::unique_ptr<ImmedSlot[]> immed_slots_;
    // The slots' address range (0, 0: none): every completion's context is
    // compared with it, so the test is two compares, not a call.
    std::uintptr_t immed_lo_ = 0, immed_hi_ = 0;
    std::mutex immed_mu_;
    ImmedSlot *immed_free_ = nullptr;
    ImmedSlot *immed_slot_of(void *context) const {
        const auto at = reinterpret_cast<std::uintptr_t>(context);
        if (at < immed_lo_ || at >= immed_hi_)
            return nullptr;
        return &immed_slots_[(at - immed_lo_) / sizeof(ImmedSlot)];
    }
    // One part of `slot` completed with `status`: the DTO record once both
    // have (the slot goes back to the pool), else nullptr. `status` becomes
    // the DTO's (the first error of either part).
    kit::Op *immed_part_done(ImmedSlot &slot, DAT_DTO_COMPLETION_STATUS &status);
    // The flags of every RDMA write: delivery completion unless the IA's
    // params ask for transmit completion.
    std::uint64_t write_flags() const {
        return params_.write_transmit ? FI_COMPLETION : FI_COMPLETION | FI_DELIVERY_COMPLETE;
    }

    Params params_;
    fi_info *info_ = nullptr;
    fid_fabric *fabric_ = nullptr;
    fid_domain *domain_ = nullptr;
    fid_eq *eq_ = nullptr;
    kit::EventLoop::Watch *eq_watch_ = nullptr;
    sockaddr_storage addr_{};
    DAT_COUNT max_srq_recvs_ = 0;

    // Everything below: the endpoints, service points and completion queues
    // the loop's handlers look up, and the progress state.
    std::mutex mu_;
    // Events name the endpoint's fid; an event that outlives its endpoint
    // (closed while the event was queued) finds nothing: lookups compare
    // the pointer, never read the fid.
    std::unordered_map<const fid *, OfiEp *> eps_by_fid_;
    std::unordered_map<std::uint64_t, OfiEp *> eps_by_id_; // posted work names an EP by id
    std::uint64_t next_id_ = 1;
    std::unordered_map<const fid *, OfiPsp *> psps_;

    // ---- progress (ofi_cq.cpp). Every completion queue of the IA: the loop
    // drives their progress while the consumer is not polling (tcp moves data
    // only when asked, and an RDMA write must land while the target just
    // watches its memory), and wakes the EVD when completions are queued.
    // Their wait fds are watched on the loop, so that a round costs what is
    // ready or pending, never the number of queues or endpoints.
    //
    // A queue whose consumer keeps polling it (dat_evd_dequeue, Evd::dequeues
    // moves, nobody inside dat_evd_wait) needs none of this: its polls drive
    // libfabric's progress and find the completions, and the loop waking at
    // every message would take a CPU from the poller. Such a queue rests: its
    // fd unwatched, neither kicked nor woken for, until a look at the tick
    // finds its consumer gone quiet.
    struct WatchedCq {
        kit::Evd *evd;
        int fd; // its wait fd, or -1: none, always pending
        kit::EventLoop::Watch *watch = nullptr;
        bool pending = false;                        // in pending_: driven until its fd can be trusted
        std::chrono::steady_clock::time_point due{}; // pending: when it is driven next
        std::chrono::milliseconds backoff{0};
        bool resting = false;                           // in resting_, its fd unwatched
        std::uint32_t seen_dequeues = 0;                // evd->dequeues when the loop last looked
        std::chrono::steady_clock::time_point looked{}; // and when
        int binds = 0; // endpoint directions bound to a part of an EVD's queues (cq_part)
        bool found_queued = false; // what kick_progress's drive found
        int empty_wakes = 0;       // fd wakes in a row whose drive found nothing (woke_for_nothing)
        std::chrono::steady_clock::time_point empty_since{};
        bool suspect = false; // woke_for_nothing said so: fd_stays_readable looks at the fd
        bool muted = false;   // its watch waits for nothing (fd_stays_readable)
    };
    std::unordered_map<fid_cq *, WatchedCq> cqs_;
    std::vector<fid_cq *> pending_; // looked at every round
    std::vector<fid_cq *> resting_; // and at every tick while there are any
    std::chrono::steady_clock::time_point next_tick_{};
    std::chrono::steady_clock::time_point next_connect_check_{}; // fail_connects_to_departed_peers
    bool connects_maybe_pending_ = false; // set by connect(), cleared by a check that finds none (mu_)
    // The loop's idle hook: one round of progress; returns how long the
    // loop may sleep.
    int progress_round();
    // A queue's wait fd is readable (its watch handler).
    void cq_ready(fid_cq *cq);
    // Drives `cq`, a queue of `evd` (which feeds a CNO), now, and wakes
    // `evd` if completions are queued. The caller keeps `evd` alive.
    void look_for_cno(fid_cq *cq, kit::Evd &evd);
    // mu_ held. After a wake by w's fd: whether such wakes have found nothing
    // for long enough to look for peers that left (a peer's close behind a
    // message without a receive keeps the fd readable).
    static bool woke_for_nothing(WatchedCq &w, std::chrono::steady_clock::time_point now);
    // mu_ held, fi_trywait has just trusted w's fd. Whether the fd is
    // readable all the same, looked at after wakes that found nothing: a
    // provider whose fi_trywait does not look at its queue (sockets: an
    // error completion keeps the fd readable until the queue is read empty)
    // would wake the loop for good. Such a queue's watch waits for nothing
    // and the queue is driven on the backoff, until fi_trywait and the fd
    // agree again.
    bool fd_stays_readable(WatchedCq &w);
    void end_connections_of_departed_peers(); // mu_ not held
    bool connects_pending_locked() const;
    void fail_connects_to_departed_peers(); // mu_ not held
    // mu_ held. Whether the consumer dequeued from w's EVD since the loop
    // last looked, without waiting in dat_evd_wait (whose sleep needs the
    // loop's progress when the loop consumed the fd's signal).
    static bool consumer_polls(WatchedCq &w, std::chrono::steady_clock::time_point now);
    void rest(fid_cq *cq, WatchedCq &w);         // unwatched, into resting_
    void stop_resting(fid_cq *cq, WatchedCq &w); // watched again; the caller kicks it
    // Starts watching `cq` for `evd`, or makes an existing one's completions
    // wake `evd`; mu_ not held (held: the _locked form).
    DAT_RETURN watch_cq(fid_cq *cq, kit::Evd *evd);
    DAT_RETURN watch_cq_locked(fid_cq *cq, kit::Evd *evd);
    void unwatch_cq(fid_cq *cq); // mu_ not held; before fi_close
    // Runs the provider's progress on `cq` once; whether completions are queued.
    static bool drive(fid_cq *cq);
    // drive() and makes it pending, looked at in the next round (mu_ held);
    // its record, if watched.
    WatchedCq *kick_progress(fid_cq *cq);

    // An EP that takes its receives from an SRQ (libfabric shared receive
    // context) binds FI_RECV to a queue of its own: libfabric's completions
    // do not say which endpoint took a buffer, the queue does. cq_read of
    // the EP's recv EVD reads these queues too; the loop watches them.
    struct SrqQueue {
        fid_cq *cq;
        kit::Ep *ep;
        kit::Evd *evd; // ep's recv EVD when it last connected
    };
    std::mutex srq_queues_mu_; // taken under an EVD's lock, never the other way
    std::vector<SrqQueue> srq_queues_;
    std::size_t srq_next_ = 0; // round robin of read_srq_queues
    std::atomic<int> srq_queue_count_{0};
    // A receive posted to an SRQ may complete a message tcp already holds,
    // which no fd announces. A waiter about to sleep on an EVD that reads
    // SRQ queues registers it here (arm_srq), unless a post came since its
    // last read of them; srq_post wakes the registered EVDs. cq_close takes
    // an EVD out, so every one here is alive. Under srq_queues_mu_.
    std::vector<kit::Evd *> srq_sleepers_;
    std::uint64_t srq_posts_ = 0;
    bool arm_srq(kit::Evd &evd); // false: read again first
    void forget_srq_sleeper_locked(kit::Evd &evd); // under srq_queues_mu_
    // EVDs that feed a CNO (cq_cno_changed), whose consumer may wait outside
    // DAT: an SRQ post drives their SRQ queues at once (srq_look_for_cnos),
    // counted in srq_cno_looks_, for which cq_close waits once it took its
    // EVD out of here. Under srq_queues_mu_.
    std::vector<kit::Evd *> cno_evds_;
    std::atomic<int> srq_cno_looks_{0};
    void srq_look_for_cnos(const kit::Srq &srq);
    void forget_cno_evd(kit::Evd &evd); // cq_close
};

struct OfiEp {
    kit::Ep *owner = nullptr;
    std::uint64_t id = 0;
    // The loop thread closes `ep` when a connection fails or ends (and a
    // consumer thread when it disconnects) while another thread may be
    // posting on it (DAT lets receives be posted in any state): a post
    // holds post_mu from its read of `ep` until libfabric returns, and the
    // close and the assignment take it too.
    kit::Lock post_mu;
    fid_ep *ep = nullptr;
    OfiDomain *dom = nullptr;    // of `pz`, counted
    const kit::Pz *pz = nullptr; // the EP's PZ when `dom` was taken (dat_ep_modify may change it)
    bool shutdown_sent = false;
    int server_gone_seen = 0; // fail_connects_to_departed_peers' sightings
    // A graceful disconnect that libfabric does not confirm ends this long
    // after the shutdown was sent.
    kit::EventLoop::Timer *disconnect_timer = nullptr;
    fid_cq *srq_cq = nullptr; // FI_RECV of an EP with an SRQ (see SrqQueue), in `dom`
    // The EVDs' queues `ep` is bound to, as cq_part counted them: send_cq
    // with send_binds (2 when both directions share it), recv_cq once
    // (nullptr when shared, or when receives come from the SRQ's queue).
    fid_cq *send_cq = nullptr;
    fid_cq *recv_cq = nullptr;
    int send_binds = 0;
    // The hot flag of the queue its receives complete on (a part of the
    // recv EVD's queues, or no_part_hot), set by every receive posted;
    // valid while `ep` is.
    PartHot *recv_hot = &no_part_hot;
    PartHot no_part_hot{false};
    fid_cq *recv_queue = nullptr; // that queue (nullptr: none), as `recv_hot`
};

// A PSP's listener. A freed PSP's stays open, refusing, until the linger
// is over and the consumer has answered every request it was given
// (dat_psp_free(3DAT): those stay valid): the provider may report a request
// whose connection it accepted before the free, and a request can only be
// answered through its listener.
struct OfiPsp {
    kit::Psp *owner = nullptr;
    fid_pep *pep = nullptr;
    DAT_CONN_QUAL conn_qual = 0; // requests naming another one are refused
    std::uint16_t port = 0;
    // Under mu_:
    bool closing = false;     // freed: requests are refused
    bool linger_over = false; // the linger timer has fired
    bool close_posted = false;
    int requests = 0; // handed to the kit, not answered yet
    kit::EventLoop::Timer *linger = nullptr;
};

// A connection request handed to the kit (kit::Cr::tp).
struct OfiRequest {
    fi_info *info = nullptr;
    OfiPsp *listener = nullptr;
};

// An RMR: a registration of its own of the bound range, in its PZ's
// domain (ofi_mr.cpp).
struct OfiRmr {
    OfiDomain *dom = nullptr;
    fid_mr *mr = nullptr;
};

// An SRQ: a shared receive context of its PZ's domain (ofi_srq.cpp).
struct OfiSrq {
    OfiDomain *dom = nullptr;
    fid_ep *srx = nullptr;
};

} // namespace dat2::ofi
