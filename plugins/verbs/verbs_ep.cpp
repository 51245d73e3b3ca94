// SPDX-License-Identifier: BSD-3-Clause
// Endpoints over RC queue pairs: the QP of each EP, made with the EP (so
// that receives can be posted before any connection) and moved through its
// states as connections come and go, and the post paths.
#include "verbs.hpp"

#include "log.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace dat2::verbs {

namespace {

VerbsEp &vep_of(kit::Ep &ep) { return *static_cast<VerbsEp *>(ep.tp); }

} // namespace

// ---- queue pairs ------------------------------------------------------------------------

DAT_RETURN VerbsTransport::build_qp(VerbsEp &vep) {
    kit::Ep &ep = *vep.owner;
    if (vep.qp)
        destroy_qp(vep);
    VerbsCq *scq = cq_of(ep.request_evd), *rcq = cq_of(ep.recv_evd);
    // Send slots beyond the consumer's: the graceful-disconnect marker, and
    // window binds and invalidations (two per dat_rmr_bind).
    const int send_depth = std::max(1, ep.attr.max_request_dtos) + kReservedSendSlots;
    // With an SRQ the QP has no receive queue; its share of the SRQ's
    // completions lands in the recv EVD's CQ.
    const int recv_depth = ep.srq ? std::min(ep.srq->max_recv_dtos, 1024) : std::max(1, ep.attr.max_recv_dtos);
    CqPart *spart = cq_commit(*scq, send_depth);
    if (!spart)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    CqPart *rpart = cq_commit(*rcq, recv_depth);
    if (!rpart) {
        cq_uncommit(*scq, spart, send_depth);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    }
    ibv_pd *pd = pd_acquire(ep.pz);
    if (!pd) {
        cq_uncommit(*scq, spart, send_depth);
        cq_uncommit(*rcq, rpart, recv_depth);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
    }
    ibv_qp_init_attr a{};
    a.send_cq = spart->cq;
    a.recv_cq = rpart->cq;
    a.cap.max_send_wr = static_cast<std::uint32_t>(send_depth);
    a.cap.max_recv_wr = static_cast<std::uint32_t>(recv_depth);
    a.cap.max_send_sge = static_cast<std::uint32_t>(
        std::max({1, ep.attr.max_request_iov, ep.attr.max_rdma_read_iov, ep.attr.max_rdma_write_iov}));
    a.cap.max_recv_sge = static_cast<std::uint32_t>(std::max(1, ep.attr.max_recv_iov));
    a.cap.max_inline_data = max_inline_;
    a.qp_type = IBV_QPT_RC;
    if (ep.srq) {
        a.srq = static_cast<ibv_srq *>(ep.srq->tp);
        a.cap.max_recv_wr = a.cap.max_recv_sge = 0;
    }
    // Every DAT request is signalled (the kit recycles its record at the
    // completion); the plugin's window operations are not.
    ibv_qp *qp = ibv_create_qp(pd, &a);
    const char *step = "ibv_create_qp";
    int err = qp ? 0 : errno;
    if (qp) {
        // INIT now, so that receives can be posted before any connection;
        // rdma_init_qp_attr() refines it once the connection's path is known.
        ibv_qp_attr attr{};
        attr.qp_state = IBV_QPS_INIT;
        attr.pkey_index = 0;
        attr.port_num = port_;
        attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
                               (atomics_supported() ? IBV_ACCESS_REMOTE_ATOMIC : 0);
        step = "QP to INIT";
        err = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
        if (err) {
            ibv_destroy_qp(qp);
            qp = nullptr;
        }
    }
    if (!qp) {
        DAT2_ERR("%s: %s (send %d x %u, recv %d x %u): %s\n", name(), step, send_depth, a.cap.max_send_sge, recv_depth,
                 a.cap.max_recv_sge, std::strerror(err));
        pd_release(ep.pz);
        cq_uncommit(*scq, spart, send_depth);
        cq_uncommit(*rcq, rpart, recv_depth);
        return to_dat(err, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP));
    }
    vep.qp = qp;
    {
        std::lock_guard<std::mutex> lock(qp_eps_mu_);
        qp_eps_[qp->qp_num] = &ep;
        vep.qp_nums.push_back(qp->qp_num);
    }
    vep.unsignaled_limit = std::max(1, ep.attr.max_request_dtos / 2);
    vep.qp_pz = ep.pz;
    vep.send_cq = scq;
    vep.recv_cq = rcq;
    vep.send_part = spart;
    vep.recv_part = rpart;
    vep.send_depth = send_depth;
    vep.recv_depth = recv_depth;
    vep.max_inline = a.cap.max_inline_data;
    vep.responder_resources = static_cast<std::uint8_t>(
        std::clamp(std::min(ep.attr.max_rdma_read_in, dev_attr_.max_qp_rd_atom), 0, UINT8_MAX));
    vep.initiator_depth = static_cast<std::uint8_t>(
        std::clamp(std::min(ep.attr.max_rdma_read_out, dev_attr_.max_qp_init_rd_atom), 0, UINT8_MAX));
    vep.qp_rebinds.store(ep.rebinds, std::memory_order_release); // last: the QP is ready for posters
    return DAT_SUCCESS;
}

// Nothing of the QP completes after this: completions already queued stay
// in the CQs (the kit drains them while the EP still exists).
void VerbsTransport::destroy_qp(VerbsEp &vep) {
    if (!vep.qp)
        return;
    unbind_windows_of(vep.qp->qp_num);
    if (int rc = ibv_destroy_qp(vep.qp))
        DAT2_ERR("%s: ibv_destroy_qp: %s\n", name(), std::strerror(rc));
    vep.qp = nullptr;
    // Its unsignalled requests are gone with it (flushed by the kit).
    vep.unsignaled_run = 0;
    vep.last_unsignaled.store(nullptr);
    vep.marker_last.store(nullptr);
    cq_uncommit(*vep.send_cq, vep.send_part, vep.send_depth);
    cq_uncommit(*vep.recv_cq, vep.recv_part, vep.recv_depth);
    pd_release(vep.qp_pz);
    vep.send_cq = vep.recv_cq = nullptr;
    vep.send_part = vep.recv_part = nullptr;
}

constexpr std::uint8_t kMinRnrTimer = 12; // IB's code for 0.64 ms

// The QP to RTR or RTS with the connection's attributes (rdma_init_qp_attr
// on the id). `rd_atomic`: the negotiated RDMA read depth to use instead
// of the CM's (-1: the CM's).
int VerbsTransport::move_qp(VerbsEp &vep, rdma_cm_id *id, ibv_qp_state state, int rd_atomic) {
    ibv_qp_attr attr{};
    int mask = 0;
    if (state == IBV_QPS_RTR) {
        // Port and P_Key of the connection's path, then RTR.
        attr.qp_state = IBV_QPS_INIT;
        if (rdma_init_qp_attr(id, &attr, &mask))
            return errno;
        if (int rc = ibv_modify_qp(vep.qp, &attr, mask))
            return rc;
    }
    attr = ibv_qp_attr{};
    attr.qp_state = state;
    if (rdma_init_qp_attr(id, &attr, &mask))
        return errno;
    if (state == IBV_QPS_RTR) {
        // As librdmacm: old kernels set RoCE-only mask bits for InfiniBand.
        if (port_attr_.link_layer == IBV_LINK_LAYER_INFINIBAND)
            mask &= ~0xe00000;
        if (rd_atomic >= 0)
            attr.max_dest_rd_atomic = static_cast<std::uint8_t>(rd_atomic);
        // The wait this side's receiver-not-ready answer asks of a sender
        // whose message came before its receive. The CM's is code 0: 655 ms,
        // a stall that a receive posted a moment late should not cost.
        // Code 12 is 0.64 ms (OFED dapl's default too).
        attr.min_rnr_timer = kMinRnrTimer;
        mask |= IBV_QP_MIN_RNR_TIMER;
    } else if (rd_atomic >= 0) {
        attr.max_rd_atomic = static_cast<std::uint8_t>(rd_atomic);
    }
    return ibv_modify_qp(vep.qp, &attr, mask);
}

void VerbsTransport::qp_error(VerbsEp &vep) {
    if (!vep.qp)
        return;
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    if (int rc = ibv_modify_qp(vep.qp, &attr, IBV_QP_STATE))
        DAT2_ERR("%s: QP %u to ERROR: %s\n", name(), vep.qp->qp_num, std::strerror(rc));
}

// ---- endpoints ----------------------------------------------------------------------------

DAT_RETURN VerbsTransport::ep_open(kit::Ep &ep, void *&tp) {
    auto vep = std::make_unique<VerbsEp>();
    vep->owner = &ep;
    std::lock_guard<std::mutex> lock(mu_);
    vep->id_key = next_id_++;
    const std::uint64_t id = vep->id_key;
    if (DAT_RETURN r = build_qp(*vep))
        return r;
    vep->disconnect_timer = loop().timer([this, id] { disconnect_expired(id); });
    add_ep_key(*vep);
    eps_by_id_[id] = vep.get();
    tp = vep.release();
    return DAT_SUCCESS;
}

void VerbsTransport::ep_close(kit::Ep &ep) {
    auto *vep = static_cast<VerbsEp *>(ep.tp);
    if (!vep)
        return;
    rdma_cm_id *id;
    {
        std::lock_guard<std::mutex> lock(mu_);
        eps_.erase(vep->key);
        eps_by_id_.erase(vep->id_key);
        destroy_qp(*vep); // first: no completion of it appears after this
        id = vep->id;
        vep->id = nullptr;
    }
    loop().sync(); // a handler that found the EP has returned
    loop().timer_free(vep->disconnect_timer);
    vep->disconnect_timer = nullptr;
    release_id(id); // a connection still up ends here (the peer sees DISCONNECTED)
}

// Set for the rest of the EP's life once it posted work of its own: a
// drain is one poll of the EP's queues, where telling whether such a
// completion is still queued would need a count kept on the completion path.
bool VerbsTransport::own_completions_queued(kit::Ep &ep) {
    auto *vep = static_cast<VerbsEp *>(ep.tp);
    return vep && vep->own_wrs.load(std::memory_order_relaxed);
}

// The kit has read every completion of the EP (the marker's names the
// VerbsEp, an SRQ receive's the QP number).
void VerbsTransport::ep_free(kit::Ep &ep) {
    auto *vep = static_cast<VerbsEp *>(ep.tp);
    if (!vep)
        return;
    {
        // Not a scan of every EP's entries: freeing stays O(QPs of this EP).
        std::lock_guard<std::mutex> lock(qp_eps_mu_);
        for (std::uint32_t num : vep->qp_nums)
            if (auto it = qp_eps_.find(num); it != qp_eps_.end() && it->second == &ep)
                qp_eps_.erase(it);
    }
    delete vep;
}

void VerbsTransport::ep_reset(kit::Ep &ep) {
    VerbsEp &vep = vep_of(ep);
    rdma_cm_id *id;
    {
        std::lock_guard<std::mutex> lock(mu_);
        id = end_connection(vep);
        // A fresh QP: the old one's queues are gone with it, nothing it held
        // can complete into a record the kit hands out again.
        if (DAT_RETURN r = build_qp(vep))
            DAT2_ERR("%s: EP %p: no new QP after reset (0x%x); it is rebuilt when next used\n", name(), (void *)&ep, r);
    }
    loop().sync();
    release_id(id);
}

// ---- posting ----------------------------------------------------------------------------------

// Posts a request of the consumer's, under the kit's Ep::post_mu (kit::Capabilities::
// requests_in_order): its place in the send queue is its posting sequence.
// A suppressed send or RDMA write goes unsignalled unless max_request_dtos
// / 2 went so in a row; a signalled request clears VerbsEp::last_unsignaled
// (its completion will stand for it: the marker must not report it again).
// On failure nothing changed. Inline: it is on every request's path, and a
// call of its own costs as much as its work.
static inline __attribute__((always_inline)) int post_request(VerbsEp &vep, bool suppressed, kit::Op &op,
                                                              ibv_send_wr &wr) {
    kit::Op *const last = vep.last_unsignaled.load(std::memory_order_relaxed);
    const int run = vep.unsignaled_run;
    if (suppressed && run + 1 < vep.unsignaled_limit) {
        wr.send_flags &= ~IBV_SEND_SIGNALED;
        vep.unsignaled_run = run + 1;
        vep.last_unsignaled.store(&op, std::memory_order_relaxed);
    } else if (last || run) {
        vep.unsignaled_run = 0;
        vep.last_unsignaled.store(nullptr, std::memory_order_relaxed);
    }
    ibv_send_wr *bad = nullptr;
    const int rc = ibv_post_send(vep.qp, &wr, &bad);
    if (rc != 0) {
        vep.unsignaled_run = run;
        vep.last_unsignaled.store(last, std::memory_order_relaxed);
    }
    return rc;
}

// A post the device refused: the queue full (ENOMEM), or an errno that is
// logged with `what`.
DAT_RETURN VerbsTransport::post_failed(ibv_qp *qp, const char *what, int rc) {
    if (rc == ENOMEM)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
    DAT2_ERR("%s: posting %s on QP %u: %s\n", name(), what, qp->qp_num, std::strerror(rc));
    return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
}

DAT_RETURN VerbsTransport::post_recv(kit::Ep &ep, kit::Op &op, const kit::Segment *segs, int nsegs,
                                     DAT_COMPLETION_FLAGS) {
    VerbsEp &vep = vep_of(ep);
    if (!qp_matches(vep)) {
        // First post after dat_ep_modify changed the EP's EVDs, PZ or queue sizes.
        std::lock_guard<std::mutex> lock(mu_);
        if (!qp_matches(vep))
            if (DAT_RETURN r = build_qp(vep))
                return r;
    }
    ibv_qp *qp = vep.qp;
    if (!qp)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    ibv_sge sge[kit::kMaxIov];
    to_sges(segs, nsegs, sge);
    ibv_recv_wr wr, *bad = nullptr;
    wr.wr_id = reinterpret_cast<std::uintptr_t>(&op);
    wr.next = nullptr;
    wr.sg_list = sge;
    wr.num_sge = nsegs;
    if (const int rc = ibv_post_recv(qp, &wr, &bad))
        return post_failed(qp, "a DTO", rc);
    return DAT_SUCCESS;
}

DAT_RETURN VerbsTransport::post(kit::Ep &ep, kit::PostKind kind, kit::Op &op, const kit::Segment *segs, int nsegs,
                                const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags) {
    VerbsEp &vep = vep_of(ep);
    ibv_qp *qp = vep.qp;
    if (!qp)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    ibv_sge sge[kit::kMaxIov];
    const std::uint64_t total = to_sges(segs, nsegs, sge);
    // Only what these opcodes read on an RC QP is set: the UD, atomic,
    // bind and TSO unions are never read for them.
    ibv_send_wr wr;
    wr.wr_id = reinterpret_cast<std::uintptr_t>(&op);
    wr.next = nullptr;
    wr.sg_list = sge;
    wr.num_sge = nsegs;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = 0;
    wr.wr.rdma.remote_addr = 0;
    wr.wr.rdma.rkey = 0;
    switch (kind) {
    case kit::PostKind::kSend:
        wr.opcode = IBV_WR_SEND;
        if (remote) {
            // dat_ep_post_send_with_invalidate: the peer's device unbinds the window.
            wr.opcode = IBV_WR_SEND_WITH_INV;
            wr.invalidate_rkey = remote->rmr_context;
        }
        if (flags & DAT_COMPLETION_SOLICITED_WAIT_FLAG)
            wr.send_flags |= IBV_SEND_SOLICITED;
        break;
    case kit::PostKind::kRdmaWrite: wr.opcode = IBV_WR_RDMA_WRITE; break;
    default: wr.opcode = IBV_WR_RDMA_READ; break;
    }
    if (kind != kit::PostKind::kSend && remote) {
        wr.wr.rdma.remote_addr = remote->virtual_address;
        wr.wr.rdma.rkey = remote->rmr_context;
    }
    if (wr.opcode != IBV_WR_RDMA_READ && total && total <= vep.max_inline)
        wr.send_flags |= IBV_SEND_INLINE;
    if (flags & DAT_COMPLETION_BARRIER_FENCE_FLAG)
        wr.send_flags |= IBV_SEND_FENCE;
    if (const int rc =
            post_request(vep, (flags & DAT_COMPLETION_SUPPRESS_FLAG) && wr.opcode != IBV_WR_RDMA_READ, op, wr))
        return post_failed(qp, "a DTO", rc);
    return DAT_SUCCESS;
}

// dat_ib_post_rdma_write_immed, dat_ib_post_fetch_and_add and
// dat_ib_post_cmp_and_swap (core/ext.cpp checked them): the device's own
// operations. The immediate data travels as given, unswapped, as OFED's
// providers send it (ibv_send_wr.imm_data), so both ends read the value
// the consumer wrote.
DAT_RETURN VerbsTransport::post_ext(kit::Ep &ep, kit::Op &op, const kit::Segment *segs, int nsegs,
                                    const DAT_RMR_TRIPLET &remote, DAT_COMPLETION_FLAGS flags) {
    VerbsEp &vep = vep_of(ep);
    ibv_qp *qp = vep.qp;
    if (!qp)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    ibv_sge sge[kit::kMaxIov];
    const std::uint64_t total = to_sges(segs, nsegs, sge);
    ibv_send_wr wr{};
    wr.wr_id = reinterpret_cast<std::uintptr_t>(&op);
    wr.sg_list = sge;
    wr.num_sge = nsegs;
    wr.send_flags = IBV_SEND_SIGNALED;
    switch (op.ext) {
    case kit::ExtKind::kRdmaWriteImmed:
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.imm_data = op.immed;
        wr.wr.rdma.remote_addr = remote.virtual_address;
        wr.wr.rdma.rkey = remote.rmr_context;
        if (total && total <= vep.max_inline)
            wr.send_flags |= IBV_SEND_INLINE;
        break;
    case kit::ExtKind::kFetchAdd:
    case kit::ExtKind::kCmpSwap:
        if (!atomics_supported())
            return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
        wr.opcode = op.ext == kit::ExtKind::kFetchAdd ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
        wr.wr.atomic.remote_addr = remote.virtual_address;
        wr.wr.atomic.rkey = remote.rmr_context;
        wr.wr.atomic.compare_add = op.operand[0];
        wr.wr.atomic.swap = op.ext == kit::ExtKind::kCmpSwap ? op.operand[1] : 0;
        break;
    case kit::ExtKind::kNone:
    case kit::ExtKind::kRmrBind: return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    }
    if (flags & DAT_COMPLETION_BARRIER_FENCE_FLAG)
        wr.send_flags |= IBV_SEND_FENCE;
    if (const int rc = post_request(vep, false, op, wr)) // signalled: clears last_unsignaled
        return post_failed(qp, "an extended DTO", rc);
    return DAT_SUCCESS;
}

} // namespace dat2::verbs
