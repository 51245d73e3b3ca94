// SPDX-License-Identifier: BSD-3-Clause
// The libfabric transport: DAT over connection-oriented libfabric
// endpoints (FI_EP_MSG). One IA = fabric + domain + event queue + a CM
// thread that turns event-queue entries into DAT connection events.
#pragma once

#include "kit.hpp"
#include "ofi_cm_data.hpp"
#include "wait.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <sys/uio.h>
#include <rdma/fi_rma.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace dat2::ofi {

inline constexpr std::uint32_t kApiVersion = FI_VERSION(1, 11);

// -FI_E* / errno -> DAT, in one place.
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
};
bool parse_params(const std::string &text, Params &out, std::string &error);

// link_timeout_ms on the TCP socket under a connected `ep` (TCP_USER_TIMEOUT
// and keepalive); false when the endpoint has no TCP socket of its own.
bool bound_link_timeout(fid_ep *ep, unsigned ms);

// Private data framing (CmHeader, frame_cm_data, unframe_cm_data): ofi_cm_data.hpp.

// The kit's resolved segments as libfabric's iovec and descriptor arrays;
// returns their total length.
inline std::uint64_t to_iov(const kit::Segment *segs, int nsegs, iovec *iov, void **desc) {
    std::uint64_t total = 0;
    for (int i = 0; i < nsegs; ++i) {
        iov[i].iov_base = segs[i].addr;
        iov[i].iov_len = segs[i].length;
        desc[i] = segs[i].desc;
        total += segs[i].length;
    }
    return total;
}

struct OfiEp;
struct OfiPsp;

class OfiTransport final : public kit::Transport {
public:
    OfiTransport(kit::Ia &ia, const Params &params);
    ~OfiTransport() override;
    DAT_RETURN open(); // everything that can fail

    void query(DAT_IA_ATTR &ia_attr, DAT_PROVIDER_ATTR &provider_attr) override;
    const sockaddr *address() const override { return reinterpret_cast<const sockaddr *>(&addr_); }

    DAT_RETURN cq_open(kit::Evd &evd) override;
    void cq_close(kit::Evd &evd) override;
    int cq_read(kit::Evd &evd, kit::Completion *out, int max) override;
    int cq_fd(kit::Evd &evd) override;
    bool cq_arm(kit::Evd &evd) override;

    DAT_RETURN mr_register(kit::Lmr &lmr) override;
    void mr_deregister(kit::Lmr &lmr) override;
    DAT_RETURN rmr_open(kit::Rmr &rmr) override;
    void rmr_close(kit::Rmr &rmr) override;
    DAT_RETURN rmr_bind(kit::Rmr &rmr, kit::Ep &ep, const kit::Lmr &lmr, std::uintptr_t addr, DAT_VLEN len,
                        DAT_MEM_PRIV_FLAGS privileges) override;
    DAT_RETURN rmr_unbind(kit::Rmr &rmr, kit::Ep *ep) override;

    DAT_RETURN ep_open(kit::Ep &ep) override;
    void ep_close(kit::Ep &ep) override;
    void ep_reset(kit::Ep &ep) override;
    DAT_RETURN connect(kit::Ep &ep, const sockaddr *addr, DAT_CONN_QUAL qual, const void *pdata,
                       std::size_t pdata_len, DAT_TIMEOUT timeout) override;
    DAT_RETURN disconnect(kit::Ep &ep, bool graceful) override;
    DAT_RETURN psp_open(kit::Psp &psp, const DAT_CONN_QUAL *qual, DAT_CONN_QUAL *assigned) override;
    void psp_close(kit::Psp &psp) override;
    DAT_RETURN accept(kit::Cr &cr, kit::Ep &ep, const void *pdata, std::size_t pdata_len) override;
    DAT_RETURN reject(kit::Cr &cr, const void *pdata, std::size_t pdata_len) override;
    void cr_release(kit::Cr &cr) override;
    DAT_RETURN post(kit::Ep &ep, kit::PostKind kind, kit::Op &op, const kit::Segment *segs, int nsegs,
                    const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags) override;
    bool send_with_invalidate() const override;
    kit::ExtCaps ext_caps() const override { return ext_caps_; }
    DAT_RETURN post_ext(kit::Ep &ep, kit::Op &op, const kit::Segment *segs, int nsegs, const DAT_RMR_TRIPLET &remote,
                        DAT_COMPLETION_FLAGS flags) override;
    DAT_RETURN srq_open(kit::Srq &srq) override;
    void srq_close(kit::Srq &srq) override;
    DAT_RETURN srq_post(kit::Srq &srq, kit::Op &op, const kit::Segment *segs, int nsegs) override;
    DAT_RETURN ep_break(kit::Ep &ep) override;

private:
    struct Request; // a connection request awaiting accept/reject

    // Registers [addr, addr + len) with `access`; the key becomes *key (it
    // must fit a 32-bit rmr_context).
    DAT_RETURN register_range(std::uintptr_t addr, DAT_VLEN len, std::uint64_t access, fid_mr **mr,
                              DAT_RMR_CONTEXT *key);
    void cm_loop();
    void handle_cm_event(std::uint32_t event, void *buf, ssize_t len);
    void handle_cm_error();
    // A request for qualifier `asked`, which shares the port of `opsp`'s
    // qualifier, is refused as if nobody listened; frees `info`. cm_mu_ held.
    void refuse_other_qual(OfiPsp &opsp, fi_info *info, DAT_CONN_QUAL asked);
    void check_deadlines();
    // Creates, binds and enables the libfabric endpoint of `ep`; cm_mu_ held.
    DAT_RETURN make_endpoint(OfiEp &oep, fi_info *info);
    void close_endpoint(OfiEp &oep); // cm_mu_ held
    OfiEp *ep_by_fid(const fid *f);
    fid_cq *cq_of(kit::Evd *evd);
    // Completions of one libfabric queue; `taker` (an EP with an SRQ, whose
    // own queue this is) becomes op.ep of each.
    int read_queue(fid_cq *cq, kit::Ep *taker, kit::Completion *out, int max);
    int read_srq_queues(kit::Evd &evd, kit::Completion *out, int max);
    // Turns one libfabric completion (`status` from its error entry, if any)
    // into the kit's; false when it reports nothing yet (one part of a write
    // with immediate data).
    bool translate(void *context, std::uint64_t flags, std::size_t len, std::uint64_t data,
                   DAT_DTO_COMPLETION_STATUS status, kit::Ep *taker, kit::Completion &out);

    // Extended DTOs (dat_ib_extensions.h), found in open(): atomics where
    // the domain has them (fi_query_atomic), write with immediate data where
    // remote CQ data holds 64 bits and a send is ordered after a write.
    kit::ExtCaps ext_caps_;
    void find_ext_caps(); // sets ext_caps_ and the slot pool; domain_ open
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
    std::mutex immed_mu_;
    ImmedSlot *immed_free_ = nullptr;
    ImmedSlot *immed_slot_of(void *context) const;
    // One part of `slot` completed with `status`: the DTO record once both
    // have (the slot goes back to the pool), else nullptr.
    // `status` becomes the DTO's (the first error of either part).
    kit::Op *immed_part_done(ImmedSlot &slot, DAT_DTO_COMPLETION_STATUS &status);
    void close_srq_queue(OfiEp &oep); // the EP is closed: drops what its queue holds

    kit::Ia &ia_;
    Params params_;
    fi_info *info_ = nullptr;
    fid_fabric *fabric_ = nullptr;
    fid_domain *domain_ = nullptr;
    fid_eq *eq_ = nullptr;
    fid_cq *null_cq_ = nullptr; // bound where an EP has no EVD for a direction
    int eq_fd_ = -1;
    int wake_fd_ = -1; // eventfd: wakes the CM thread (new deadline, or stop)
    int poll_fd_ = -1; // epoll set of the CM thread: eq_fd_, wake_fd_ and the queues' wait fds
    std::atomic<bool> stopping_{false};
    sockaddr_storage addr_{};

    std::thread cm_thread_;
    // Recursive: the kit callbacks the CM thread makes under it (a connection
    // request creating a provider Endpoint, refusing a request) call back in.
    std::recursive_mutex cm_mu_;
    // libfabric contexts are ids, not pointers: an event for an endpoint that
    // was closed meanwhile finds nothing instead of freed memory.
    std::uint64_t next_id_ = 1;
    std::map<std::uint64_t, OfiEp *> eps_;
    std::map<std::uint64_t, OfiPsp *> psps_;
    // Every completion queue of the IA: the CM thread drives their progress
    // while the consumer is not polling (tcp moves data only when asked, and
    // an RDMA write must land while the target just watches its memory), and
    // wakes the EVD when completions are queued. Their wait fds are in
    // poll_fd_, so that a round of the thread costs what is ready, pending or
    // connected, never the number of queues (dat_ia_query's max_evds of
    // them can exist). dat_evd_wait also sleeps on a queue's fd; the thread
    // wakes the EVD whenever it may have consumed the fd's signal.
    //
    // A queue whose consumer keeps polling it (dat_evd_dequeue, Evd::dequeues
    // moves, nobody inside dat_evd_wait) needs none of this: its polls drive
    // libfabric's progress and find the completions. Waking for it anyway
    // put this thread in the poller's way at every message (a busy-polled
    // tcp ping-pong: mean one-way latency 13.3 us against a median of 5.8).
    // Such a queue rests: out of poll_fd_, neither kicked nor woken for,
    // until a look at the tick finds its consumer gone quiet.
    struct WatchedCq {
        kit::Evd *evd;
        int fd;                          // its wait fd in poll_fd_, or -1: none, always pending
        bool pending = false;            // in pending_: may hold completions nobody was woken for
        std::uint64_t kicked = 0;        // the round whose progress it last had
        bool resting = false;            // in resting_, its fd out of poll_fd_
        std::uint32_t seen_dequeues = 0; // evd->dequeues when the thread last looked
    };
    // Keyed by queue: the key is what poll_fd_ reports, and a queue closed
    // meanwhile is simply not found.
    std::unordered_map<fid_cq *, WatchedCq> cqs_;
    std::vector<fid_cq *> pending_; // the thread looks at these every round
    std::vector<fid_cq *> resting_; // and at these every tick
    std::uint64_t round_ = 0;
    std::chrono::steady_clock::time_point next_tick_{};
    // cm_mu_ held. Whether the consumer dequeued from w's EVD since the
    // thread last looked, without waiting in dat_evd_wait (whose sleep needs
    // the thread's progress: tcp's fd does not tell when a socket drains).
    static bool consumer_polls(WatchedCq &w);
    void rest(fid_cq *cq, WatchedCq &w);        // out of poll_fd_, into resting_
    void stop_resting(fid_cq *cq, WatchedCq &w); // back into poll_fd_; the caller kicks it
    // Starts watching `cq` for `evd`, or makes an existing one's completions
    // wake `evd`; cm_mu_ not held.
    DAT_RETURN watch_cq(fid_cq *cq, kit::Evd *evd);
    void unwatch_cq(fid_cq *cq); // cm_mu_ not held; before fi_close
    // Drives progress on `cq` once this round and makes it pending (cm_mu_
    // held); its record, if watched.
    WatchedCq *kick_progress(fid_cq *cq);

    // An EP that takes its receives from an SRQ (libfabric shared receive
    // context) binds FI_RECV to a queue of its own: libfabric's completions
    // do not say which endpoint took a buffer, the queue does. cq_read of
    // the EP's recv EVD reads these queues too; the CM thread watches them.
    struct SrqQueue {
        fid_cq *cq;
        kit::Ep *ep;
        kit::Evd *evd; // ep's recv EVD when it last connected
    };
    std::mutex srq_queues_mu_; // taken under an EVD's lock, never the other way
    std::vector<SrqQueue> srq_queues_;
    std::size_t srq_next_ = 0; // round robin of read_srq_queues
    std::atomic<int> srq_queue_count_{0};
};

struct OfiEp {
    kit::Ep *owner = nullptr;
    std::uint64_t id = 0;
    fid_ep *ep = nullptr;
    // Receives posted before there is a libfabric endpoint.
    struct PendingRecv {
        kit::Op *op;
        std::vector<iovec> iov;
        std::vector<void *> desc;
    };
    std::vector<PendingRecv> pending;
    std::mutex pending_mu;
    kit::Deadline deadline = kit::Deadline::never(); // connect timeout, or disconnect fallback
    bool shutdown_sent = false;
    fid_cq *srq_cq = nullptr; // FI_RECV of an EP with an SRQ (see SrqQueue)
    // The queues `ep` is bound to: the CM thread drives them while it is connected.
    fid_cq *send_cq = nullptr;
    fid_cq *recv_cq = nullptr;
    std::atomic<bool> break_requested{false}; // ep_break: the CM thread breaks the connection
};

struct OfiPsp {
    kit::Psp *owner = nullptr;
    std::uint64_t id = 0;
    fid_pep *pep = nullptr;
    DAT_CONN_QUAL conn_qual = 0; // requests naming another one are refused (refuse_other_qual)
};

} // namespace dat2::ofi
