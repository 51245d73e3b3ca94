// SPDX-License-Identifier: BSD-3-Clause
// The verbs transport: DAT over rdma-core. One IA = one RDMA device port,
// addressed by an IP address of its netdev (as OFED's cma provider), with
// its own device context and rdma_cm event channel, whose events (and the
// device's) the IA's event loop turns into DAT connection events.
//
// Files by object: verbs_ia.cpp (params, device, attributes), verbs_cm.cpp
// (connections, service points, device events), verbs_ep.cpp (queue pairs,
// posts), verbs_cq.cpp (completion queues), verbs_mr.cpp (protection
// domains, LMRs, memory windows), verbs_srq.cpp.
//
// Queue pairs are managed by the plugin, not by librdmacm: a QP exists from
// dat_ep_create on (receives may be posted before any connection), and
// rdma_cm only carries its number; the plugin moves it through
// INIT/RTR/RTS with the attributes rdma_init_qp_attr() gives, and to ERROR
// when the connection ends.
#pragma once

#include "transport.hpp"
#include "verbs_cm_data.hpp"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace dat2::verbs {

struct VerbsMw;

// ibv_wc_status -> DAT DTO status (errno: kit::errno_to_dat).
DAT_DTO_COMPLETION_STATUS to_dto_status(ibv_wc_status status);
inline DAT_RETURN to_dat(int err, DAT_RETURN fallback) { return kit::errno_to_dat(err, fallback); }

// What dat.conf's ia_params select (see plugins/verbs/README.md).
struct Params {
    std::string device;  // RDMA device name; empty or "any": whichever has an address
    int port = 0;        // 0: the first active port
    std::string netdev;  // network interface whose address the IA takes
    std::string address; // the IA address itself
};
bool parse_params(const std::string &text, Params &out, std::string &error);

// Private data framing (CmKind, frame_cm_data, unframe_cm_data): verbs_cm_data.hpp.

// The kit's resolved segments as a scatter/gather list (the LMR's lkey is
// the segment's descriptor); returns their total length. One segment, the
// common post, is copied without the loop (as ofi's to_iov).
inline std::uint64_t to_sges(const kit::Segment *segs, int nsegs, ibv_sge *sge) {
    if (__builtin_expect(nsegs == 1, 1)) {
        sge[0].addr = reinterpret_cast<std::uintptr_t>(segs[0].addr);
        sge[0].length = static_cast<std::uint32_t>(segs[0].length);
        sge[0].lkey = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(segs[0].desc));
        return segs[0].length;
    }
    std::uint64_t total = 0;
    for (int i = 0; i < nsegs; ++i) {
        sge[i].addr = reinterpret_cast<std::uintptr_t>(segs[i].addr);
        sge[i].length = static_cast<std::uint32_t>(segs[i].length);
        sge[i].lkey = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(segs[i].desc));
        total += segs[i].length;
    }
    return total;
}

// One ibv_cq of a DTO EVD.
struct CqPart {
    ibv_cq *cq = nullptr;
    int committed = 0; // work requests the QPs on this CQ may have outstanding
};

// The completion queues behind a DTO EVD, with its own completion channel
// so that each EVD has an fd to block on. A CQ holds at most the device's
// max_cqe completions and must hold all its QPs can have outstanding (an
// overrun breaks every QP on it): when the EPs on the EVD need more, the
// EVD gets another CQ on the same channel (cq_commit), so that how many
// EPs an EVD serves is not bounded by max_cqe.
struct VerbsCq {
    kit::Evd *evd = nullptr;
    ibv_comp_channel *channel = nullptr;
    kit::Lock mu; // poll, arm, resize, parts (a QP's build adds parts without the EVD's lock)
    // parts[0] is made with the EVD; never shrinks until the EVD goes
    // (deque: an EP keeps a pointer to the part its QP uses).
    std::deque<CqPart> parts;
    ibv_cq *only = nullptr; // parts[0].cq while it is the only part: cq_read's path without the deque
    std::size_t next_part = 0; // where cq_read starts polling, so that no part starves
    // Completions polled while arming (to close the race between the last
    // empty poll and the notification request): read before the CQs.
    static constexpr int kStash = 32;
    ibv_wc stash[kStash];
    int stash_head = 0, stash_count = 0;
    bool armed = false; // every part is
    // Some part may be: its notification must be taken from the channel,
    // even when arming another part failed (the channel would stay readable).
    bool may_notify = false;
    // While the EVD feeds a CNO: the channel's fd on the loop, which wakes
    // the EVD for a consumer that waits outside DAT (cq_cno_changed).
    std::mutex cno_mu; // changes of cno_watch
    kit::EventLoop::Watch *cno_watch = nullptr;
};

struct VerbsEp;
struct VerbsPsp;
struct Request; // a connection request awaiting accept or reject

class VerbsTransport final : public kit::Transport {
public:
    VerbsTransport(kit::Ia &ia, const Params &params);
    ~VerbsTransport() override;

    DAT_RETURN open(kit::Capabilities &caps) override;
    void query(DAT_IA_ATTR &ia_attr, DAT_PROVIDER_ATTR &provider_attr) override;
    void facts(kit::TransportFacts &out) const override;
    const sockaddr *address() const override { return reinterpret_cast<const sockaddr *>(&addr_); }

    DAT_RETURN cq_open(kit::Evd &evd, void *&cq) override;
    void cq_close(kit::Evd &evd) override;
    int cq_read(kit::Evd &evd, kit::Completion *out, int max) override;
    int cq_fd(kit::Evd &evd) override;
    void cq_cno_changed(kit::Evd &evd) override;
    void cno_cq_ready(kit::Evd &evd); // the loop's handler of a cno_watch
    bool cq_arm(kit::Evd &evd) override;

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
    bool own_completions_queued(kit::Ep &ep) override;
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
    void refuse(rdma_cm_id *id);
    void cr_release(kit::Cr &cr) override;

    DAT_RETURN post_recv(kit::Ep &ep, kit::Op &op, const kit::Segment *segs, int nsegs,
                         DAT_COMPLETION_FLAGS flags) override;
    DAT_RETURN post(kit::Ep &ep, kit::PostKind kind, kit::Op &op, const kit::Segment *segs, int nsegs,
                    const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags) override;
    // dat_ib_extensions.h: write with immediate data always, the 64-bit
    // atomics where the device has them (IBV_ATOMIC_HCA or _GLOB).
    DAT_RETURN post_ext(kit::Ep &ep, kit::Op &op, const kit::Segment *segs, int nsegs, const DAT_RMR_TRIPLET &remote,
                        DAT_COMPLETION_FLAGS flags) override;
    bool atomics_supported() const { return dev_attr_.atomic_cap != IBV_ATOMIC_NONE; }

    DAT_RETURN srq_open(kit::Srq &srq, void *&tp) override;
    void srq_close(kit::Srq &srq) override;
    DAT_RETURN srq_post(kit::Srq &srq, kit::Op &op, const kit::Segment *segs, int nsegs) override;

private:
    // ---- IA (verbs_ia.cpp)
    DAT_RETURN select_device(std::string &device_name);

    // ---- connection events (verbs_cm.cpp), on the loop. The handlers
    // run with mu_ held and fill `report`, delivered once mu_ is released.
    void read_cm_events();
    void handle_cm_event(rdma_cm_event &event, kit::ConnectionReport &report);
    void read_async_events();
    void on_connect_request(rdma_cm_event &event, VerbsPsp &psp, kit::ConnectionReport &report);
    void on_addr_resolved(VerbsEp &vep, kit::ConnectionReport &report);
    void on_route_resolved(VerbsEp &vep, kit::ConnectionReport &report);
    void on_connect_response(VerbsEp &vep, rdma_cm_event &event, kit::ConnectionReport &report);
    void on_connection_error(VerbsEp &vep, rdma_cm_event &event, kit::ConnectionReport &report);
    void on_peer_disconnect(VerbsEp &vep, kit::ConnectionReport &report);
    void break_connection(VerbsEp &vep, const char *why, kit::ConnectionReport &report);
    // Work posted to the loop (by id: the EP may be gone by then).
    void dto_failed(std::uint64_t id);
    void drained(std::uint64_t id);
    void disconnect_expired(std::uint64_t id);
    // The EP leaves its connection: QP to ERROR (what was posted flushes),
    // the id detached (returned, for release_id once mu_ is released).
    rdma_cm_id *end_connection(VerbsEp &vep);
    // An rdma_cm_id goes away: at once, or, while the loop handles an
    // rdma_cm event, once that event is acknowledged (rdma_destroy_id
    // waits for the acknowledgement of the id's events). mu_ not held.
    void release_id(rdma_cm_id *id);
    void destroy_doomed_ids(); // loop only, mu_ not held

    // ---- QPs and protection domains (verbs_ep.cpp, verbs_mr.cpp)
    DAT_RETURN build_qp(VerbsEp &vep); // mu_ held
    void destroy_qp(VerbsEp &vep);     // mu_ held
    inline bool qp_matches(const VerbsEp &vep) const; // below: on every receive's path
    DAT_RETURN post_failed(ibv_qp *qp, const char *what, int rc); // out of line: posts rarely fail
    int move_qp(VerbsEp &vep, rdma_cm_id *id, ibv_qp_state state, int rd_atomic);
    void qp_error(VerbsEp &vep);
    ibv_pd *pd_acquire(kit::Pz *pz);
    void pd_release(kit::Pz *pz);
    VerbsCq *cq_of(kit::Evd *evd) { return evd && evd->cq ? static_cast<VerbsCq *>(evd->cq) : null_cq_; }
    // Room for `depth` more work requests in one of the EVD's CQs (grown or
    // added as needed): that CQ, or null when the device has no more.
    CqPart *cq_commit(VerbsCq &cq, int depth);
    void cq_uncommit(VerbsCq &cq, CqPart *part, int depth);
    inline int translate(const ibv_wc &wc, kit::Completion &out); // verbs_cq.cpp only
    __attribute__((noinline, cold)) int translate_rare(const ibv_wc &wc, kit::Completion &out);
    inline int poll_cq(ibv_cq *cq, kit::Completion *out, int n, int max); // verbs_cq.cpp only
    int poll_parts(VerbsCq &c, kit::Completion *out, int n, int max);       // c.mu held

    std::uint64_t add_ep_key(VerbsEp &vep); // a fresh key for vep's next rdma_cm_id; mu_ held
    VerbsEp *ep_by_key(std::uint64_t key);
    VerbsEp *ep_by_id(std::uint64_t id);

    Params params_;
    sockaddr_storage addr_{};
    ibv_context *ctx_ = nullptr;
    std::uint8_t port_ = 1;
    ibv_device_attr dev_attr_{};
    ibv_port_attr port_attr_{};
    rdma_event_channel *channel_ = nullptr;
    VerbsCq *null_cq_ = nullptr; // for an EP without an EVD in one direction
    std::uint32_t max_inline_ = 0;
    bool mw_supported_ = false;              // type 2B memory windows (RMRs, send with invalidate)
    unsigned wc_with_inv_ = IBV_WC_WITH_INV; // the wc_flags bit of a receive that invalidated
    DAT_COUNT max_srq_recvs_ = 0;
    kit::EventLoop::Watch *channel_watch_ = nullptr;
    kit::EventLoop::Watch *async_watch_ = nullptr;

    // The endpoints, service points and requests the loop's handlers look up.
    std::mutex mu_;
    // rdma_cm_id contexts are keys, not pointers: an event of an id whose
    // EP moved on (reset, new connection) finds nothing.
    std::uint64_t next_key_ = 1;
    std::unordered_map<std::uint64_t, VerbsEp *> eps_;       // by the key of its current id
    std::unordered_map<std::uint64_t, VerbsEp *> eps_by_id_; // by VerbsEp::id (timers, posted work)
    std::uint64_t next_id_ = 1;
    std::map<std::uint64_t, VerbsPsp *> psps_;
    std::map<std::uint64_t, Request *> requests_;
    // Loop only: inside read_cm_events (ids are destroyed after the ack),
    // and the ids its handlers let go of (destroyed once mu_ is released).
    bool in_cm_event_ = false;
    std::vector<rdma_cm_id *> doomed_ids_;

    // The EP of a QP number, for receives from an SRQ (their records are the
    // SRQ's: the completion names the QP, the kit wants the EP) and device
    // events. Entries stay until the EP is freed, after its last completions
    // were read.
    std::mutex qp_eps_mu_;
    std::unordered_map<std::uint32_t, kit::Ep *> qp_eps_;

    struct PdUse {
        ibv_pd *pd;
        int users;
    };
    std::mutex pd_mu_;
    std::map<kit::Pz *, PdUse> pds_; // one protection domain per DAT PZ

    // The windows bound through each QP (by QP number), unbound before
    // the QP is destroyed. windows_mu_ also guards each window's binding;
    // it is taken under mu_, never the other way.
    std::mutex windows_mu_;
    std::unordered_map<std::uint32_t, std::vector<VerbsMw *>> windows_by_qp_;
    void index_window(VerbsMw &vm); // windows_mu_ held; after vm.bound_qp changed
    // Indexes the window again when it leaves scope: on every return of a
    // function that changes a binding.
    struct Reindex {
        VerbsTransport &t;
        VerbsMw &vm;
        ~Reindex() { t.index_window(vm); }
    };
    void unbind_windows_of(std::uint32_t qp_num); // mu_ held
};

struct VerbsEp {
    kit::Ep *owner = nullptr;
    std::uint64_t id_key = 0; // VerbsTransport::eps_by_id_; never changes
    std::uint64_t key = 0;    // context of `id`
    rdma_cm_id *id = nullptr;
    ibv_qp *qp = nullptr;
    // What the QP was built for: dat_ep_modify may change them while the EP
    // is unconnected and idle, and the QP is rebuilt then.
    kit::Pz *qp_pz = nullptr;     // the PZ whose PD the QP holds
    // kit::Ep::rebinds when the QP was built; stored after `qp` (release),
    // loaded before it (acquire): a poster that sees the count sees the QP.
    std::atomic<std::uint32_t> qp_rebinds{0};
    VerbsCq *send_cq = nullptr, *recv_cq = nullptr;
    CqPart *send_part = nullptr, *recv_part = nullptr; // the CQs of send_cq and recv_cq the QP uses
    std::vector<std::uint32_t> qp_nums;                // its entries in qp_eps_ (one per QP it had)
    int send_depth = 0, recv_depth = 0;
    std::uint32_t max_inline = 0;
    std::uint8_t responder_resources = 0, initiator_depth = 0;
    // The framed private data rdma_connect sends once the route is resolved.
    unsigned char connect_data[kIbReqPrivateData + 200];
    std::size_t connect_len = 0;
    int resolve_ms = 2000;
    DAT_PORT_QUAL local_port = 0; // of an accepted connection, reported when established
    // A disconnect that the queue or the peer does not complete in time.
    kit::EventLoop::Timer *disconnect_timer = nullptr;
    // Graceful disconnect: a zero-length RDMA write (the marker) follows the
    // consumer's requests; its completion says they all completed, and only
    // then does the DREQ go out (the peer flushes what it has not received).
    bool drain_pending = false;
    bool disconnect_sent = false;
    std::atomic<bool> broken{false}; // a DTO failed: the loop ends the connection
    // Work requests of the plugin's own (the marker, window binds and
    // invalidations) were posted: their completions name this VerbsEp, and
    // no kit record counts them (own_completions_queued).
    std::atomic<bool> own_wrs{false};
    // Suppressed sends and RDMA writes go out unsignalled (kit::Ia::
    // requests_in_order): a later request's completion, or the marker's,
    // stands for them. The kit's Ep::post_mu, held around every request's
    // post, keeps these in send-queue order (post_request); one in
    // max_request_dtos / 2 in a row is signalled all the same, so that their
    // records come back to a consumer that never dequeues.
    int unsignaled_run = 0;                          // under Ep::post_mu
    int unsignaled_limit = 1;                        // max_request_dtos / 2 when the QP was built
    std::atomic<kit::Op *> last_unsignaled{nullptr}; // posted unsignalled, no signalled request after it
    std::atomic<kit::Op *> marker_last{nullptr};     // last_unsignaled when the marker was posted
};

// Work requests of the plugin's own carry a tagged VerbsEp pointer as
// wr_id (DAT records are aligned, bit 0 and 1 clear): the graceful-disconnect
// marker (signalled), and the unsignalled window binds and invalidations,
// whose completions show only when they fail.
inline constexpr std::uint64_t kWrMarker = 1, kWrWindow = 2, kWrTags = 3;
// Send queue slots of every QP beyond the Consumer's max_request_dtos: one
// for the marker, the rest for window binds and invalidations (unsignalled:
// their slots come back as later requests complete).
inline constexpr int kReservedSendSlots = 17;

// An RMR: a type 2B memory window, bound through (and usable over) the QP of
// the EP that bound it. A new binding of a window that is bound goes after
// an invalidation on the same QP; a window bound through a QP that is gone,
// or unbound with no QP at hand, is replaced by a fresh one.
struct VerbsMw {
    ibv_mw *mw = nullptr;
    std::uint32_t rkey = 0;       // the current binding's, or the last one's
    std::uint32_t bound_qp = 0;   // QP number the window is bound through; 0: unbound
    std::uint32_t indexed_qp = 0; // the windows_by_qp_ entry that lists it; 0: none
};

struct VerbsPsp {
    kit::Psp *owner = nullptr;
    std::uint64_t key = 0;
    rdma_cm_id *id = nullptr;
};

struct Request {
    std::uint64_t key = 0;
    rdma_cm_id *id = nullptr;
    std::uint8_t initiator_depth = 0, responder_resources = 0; // what the requester offered
    bool gone = false; // the requester gave up (REJECTED or error before the accept)
};

// Whether the EP's QP was built for its current EVDs and PZ (a
// dat_ep_modify since changes them; the SRQ is fixed at creation).
inline bool VerbsTransport::qp_matches(const VerbsEp &vep) const {
    return vep.qp_rebinds.load(std::memory_order_acquire) == vep.owner->rebinds && vep.qp;
}

} // namespace dat2::verbs
