// SPDX-License-Identifier: BSD-3-Clause
// Completion queues behind DTO EVDs, protection domains and memory
// registration.
//
// Blocking: every CQ has its own completion channel, whose fd the kit
// polls in dat_evd_wait and dat_cno_wait (cq_fd). cq_arm() takes the
// pending notification, re-arms the CQ and then polls it once more, since
// a completion that arrived between the kit's last empty read and the
// re-arm raises no notification; what that poll finds is kept in a small
// stash that cq_read() hands out first.
#include "verbs.hpp"

#include "log.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>

namespace dat2::verbs {

namespace {
VerbsCq &cq_ref(kit::Evd &evd) { return *static_cast<VerbsCq *>(evd.cq); }
constexpr int kPollBatch = 32;
} // namespace

DAT_RETURN VerbsTransport::cq_open(kit::Evd &evd) {
    auto *c = new VerbsCq;
    c->evd = &evd;
    c->channel = ibv_create_comp_channel(ctx_);
    int flags = c->channel ? ::fcntl(c->channel->fd, F_GETFL) : -1;
    if (flags < 0 || ::fcntl(c->channel->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        DAT2_ERR("%s: completion channel: %s\n", ia_.name.c_str(), std::strerror(errno));
        if (c->channel)
            ibv_destroy_comp_channel(c->channel);
        delete c;
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    }
    // Grows with the EPs that use it (cq_commit): a CQ that overruns breaks
    // every QP on it, so it is never smaller than what they can have posted.
    const int size = std::min(dev_attr_.max_cqe, std::max(256, static_cast<int>(evd.qlen)));
    ibv_cq *cq = ibv_create_cq(ctx_, size, c, c->channel, 0);
    if (!cq) {
        DAT2_ERR("%s: ibv_create_cq(%d): %s\n", ia_.name.c_str(), size, std::strerror(errno));
        ibv_destroy_comp_channel(c->channel);
        delete c;
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    }
    c->parts.push_back(CqPart{cq, 0});
    evd.cq = c;
    return DAT_SUCCESS;
}

void VerbsTransport::cq_close(kit::Evd &evd) {
    VerbsCq *c = static_cast<VerbsCq *>(evd.cq);
    if (!c)
        return;
    {
        // An EP that dat_ep_modify moved to other EVDs still has its QP on
        // this CQ (the kit does not tell the transport); it is idle and
        // unconnected, so its QP goes, to be rebuilt when next used.
        std::lock_guard<std::recursive_mutex> lock(cm_mu_);
        for (auto &[key, vep] : eps_)
            if (vep->qp && (vep->send_cq == c || vep->recv_cq == c))
                destroy_qp(*vep);
    }
    {
        std::lock_guard<kit::Lock> lock(c->mu);
        ibv_cq *ev_cq;
        void *ev_ctx;
        while (ibv_get_cq_event(c->channel, &ev_cq, &ev_ctx) == 0)
            ibv_ack_cq_events(ev_cq, 1);
    }
    for (CqPart &p : c->parts)
        if (int rc = ibv_destroy_cq(p.cq))
            DAT2_ERR("%s: ibv_destroy_cq: %s\n", ia_.name.c_str(), std::strerror(rc));
    ibv_destroy_comp_channel(c->channel);
    delete c;
    evd.cq = nullptr;
}

CqPart *VerbsTransport::cq_commit(VerbsCq &c, int depth) {
    if (&c == null_cq_)
        return &c.parts.front();
    if (depth > dev_attr_.max_cqe) {
        // ia_.max_dtos keeps every work queue within one CQ.
        DAT2_ERR("%s: a work queue of %d does not fit a completion queue (the device allows %d)\n",
                 ia_.name.c_str(), depth, dev_attr_.max_cqe);
        return nullptr;
    }
    std::lock_guard<kit::Lock> lock(c.mu);
    for (CqPart &p : c.parts) {
        if (p.committed + depth <= p.cq->cqe) {
            p.committed += depth;
            return &p;
        }
    }
    for (CqPart &p : c.parts) {
        const int need = p.committed + depth;
        if (need > dev_attr_.max_cqe)
            continue;
        // Room for what is committed, and for the completions of QPs that
        // are gone but not yet read (a reset EP's flushes): twice as much.
        const int want = std::min(dev_attr_.max_cqe, std::max(need * 2, p.cq->cqe * 2));
        if (int rc = ibv_resize_cq(p.cq, want)) {
            // Some devices cannot resize: another CQ then.
            DAT2_LOG(log::kGeneric, "%s: ibv_resize_cq(%d): %s\n", ia_.name.c_str(), want, std::strerror(rc));
            break;
        }
        p.committed = need;
        return &p;
    }
    // The EVD's CQs are full: one more on its channel, armed like the others
    // (a waiter blocked on the channel must hear of its completions).
    const int size = std::min(dev_attr_.max_cqe, std::max(256, depth * 2));
    ibv_cq *cq = ibv_create_cq(ctx_, size, &c, c.channel, 0);
    if (!cq) {
        DAT2_ERR("%s: EVD %p: another completion queue (%d, for %d work requests beyond the %zu it has): %s\n",
                 ia_.name.c_str(), (void *)c.evd, size, depth, c.parts.size(), std::strerror(errno));
        return nullptr;
    }
    if (c.armed) {
        if (int rc = ibv_req_notify_cq(cq, 0)) {
            DAT2_ERR("%s: ibv_req_notify_cq: %s\n", ia_.name.c_str(), std::strerror(rc));
            ibv_destroy_cq(cq);
            return nullptr;
        }
    }
    c.parts.push_back(CqPart{cq, depth});
    return &c.parts.back();
}

void VerbsTransport::cq_uncommit(VerbsCq &c, CqPart *part, int depth) {
    if (&c == null_cq_ || !part)
        return;
    std::lock_guard<kit::Lock> lock(c.mu);
    part->committed -= depth;
}

// One work completion as the kit wants it: 1, or 0 for the plugin's own
// work requests (the marker gives 1 when it stands for unsignalled requests).
int VerbsTransport::translate(const ibv_wc &wc, kit::Completion &out) {
    if (wc.wr_id & kWrTags) {
        auto *vep = reinterpret_cast<VerbsEp *>(static_cast<std::uintptr_t>(wc.wr_id & ~kWrTags));
        if (wc.wr_id & kWrMarker) {
            // The graceful-disconnect marker: every request before it completed.
            vep->drained.store(true);
            any_flagged_.store(true);
            kit::signal_fd(wake_fd_);
            // Requests posted unsignalled after the last signalled one have
            // no completion of their own: the last of them before the marker
            // is reported here, and the kit reports the earlier ones before
            // it. Not when the marker was flushed: one of them may have
            // failed, and its own completion says so.
            kit::Op *u = wc.status == IBV_WC_SUCCESS ? vep->marker_last.exchange(nullptr) : nullptr;
            if (!u)
                return 0;
            kit::Op *expected = u;
            vep->last_unsignaled.compare_exchange_strong(expected, nullptr); // reported: no longer pending
            out.op = u;
            out.status = DAT_DTO_SUCCESS;
            out.length = 0;
            out.invalidate = false;
            out.rmr_context = 0;
            out.immed = kit::Completion::Immed::kNone;
            out.immed_data = 0;
            return 1;
        } else if (wc.status == IBV_WC_SUCCESS || wc.status == IBV_WC_WR_FLUSH_ERR) {
            return 0;
        } else {
            // A window bind or invalidation failed: the QP is in error now.
            DAT2_LOG(log::kGeneric, "%s: window operation on EP %p failed: %s (opcode %d, vendor error %#x)\n",
                     ia_.name.c_str(), (void *)vep->owner, ibv_wc_status_str(wc.status), wc.opcode, wc.vendor_err);
            vep->broken.store(true);
        }
        any_flagged_.store(true);
        kit::signal_fd(wake_fd_);
        return 0;
    }
    out.op = reinterpret_cast<kit::Op *>(static_cast<std::uintptr_t>(wc.wr_id));
    if (out.op->srq) {
        // A receive from an SRQ: the QP that took it names the EP.
        kit::Ep *ep = nullptr;
        {
            std::lock_guard<std::mutex> lock(qp_eps_mu_);
            auto it = qp_eps_.find(wc.qp_num);
            if (it != qp_eps_.end())
                ep = it->second;
        }
        if (!ep) {
            DAT2_ERR("%s: SRQ receive completed on QP %u, which belongs to no EP\n", ia_.name.c_str(), wc.qp_num);
            kit::srq_drop(*out.op);
            return 0;
        }
        out.op->ep = ep;
    }
    out.status = to_dto_status(wc.status);
    out.length = wc.byte_len;
    // The kit reuses its array of completions: every field is written.
    out.invalidate = wc.status == IBV_WC_SUCCESS && (wc.wc_flags & wc_with_inv_);
    out.rmr_context = out.invalidate ? wc.invalidated_rkey : 0;
    // A receive consumed by immediate data (dat_ib_extensions.h): a peer's
    // RDMA write with immediate (byte_len is the written length) or a send
    // with immediate. wc.opcode is valid only for a successful completion.
    out.immed = kit::Completion::Immed::kNone;
    out.immed_data = 0;
    if (wc.status == IBV_WC_SUCCESS && out.op->is_recv && (wc.wc_flags & IBV_WC_WITH_IMM)) {
        out.immed = wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM ? kit::Completion::Immed::kRdmaWrite
                                                            : kit::Completion::Immed::kSend;
        out.immed_data = wc.imm_data; // as sent (post_ext)
    }
    // A message longer than the receive buffer: InfiniBand says local length
    // error, Soft-RoCE says local QP operation error (its copy into the
    // scatter list fails as malformed). The kit has checked the receive's
    // segments, so that is what it means on a receive.
    if (wc.status == IBV_WC_LOC_QP_OP_ERR && out.op->is_recv)
        out.status = DAT_DTO_ERR_LOCAL_LENGTH;
    if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR) {
        // The QP is in the error state now: the connection is over. The CM
        // thread ends it (it cannot be done here, under the EVD's lock).
        auto *vep = static_cast<VerbsEp *>(out.op->ep->tp);
        DAT2_LOG(log::kGeneric, "%s: DTO on EP %p failed: %s (vendor error %#x)\n", ia_.name.c_str(),
                 (void *)out.op->ep, ibv_wc_status_str(wc.status), wc.vendor_err);
        if (vep && !vep->broken.exchange(true)) {
            any_flagged_.store(true);
            kit::signal_fd(wake_fd_);
        }
    }
    return 1;
}

int VerbsTransport::cq_read(kit::Evd &evd, kit::Completion *out, int max) {
    VerbsCq &c = cq_ref(evd);
    std::lock_guard<kit::Lock> lock(c.mu);
    int n = 0;
    while (n < max && c.stash_count > 0) {
        n += translate(c.stash[c.stash_head++], out[n]);
        --c.stash_count;
    }
    const std::size_t parts = c.parts.size();
    std::size_t k = c.next_part;
    for (std::size_t i = 0; i < parts && n < max; ++i) {
        ibv_cq *cq = c.parts[k].cq;
        if (++k == parts)
            k = 0;
        while (n < max) {
            ibv_wc wc[kPollBatch];
            const int want = std::min(kPollBatch, max - n);
            const int got = ibv_poll_cq(cq, want, wc);
            if (got < 0) {
                DAT2_ERR("%s: ibv_poll_cq: %d\n", ia_.name.c_str(), got);
                break;
            }
            for (int j = 0; j < got; ++j)
                n += translate(wc[j], out[n]);
            if (got < want)
                break;
        }
    }
    if (parts > 1)
        c.next_part = (c.next_part + 1) % parts;
    return n;
}

int VerbsTransport::cq_fd(kit::Evd &evd) { return cq_ref(evd).channel->fd; }

bool VerbsTransport::cq_arm(kit::Evd &evd) {
    VerbsCq &c = cq_ref(evd);
    std::lock_guard<kit::Lock> lock(c.mu);
    // Only an armed CQ can have raised a notification (reading the channel
    // is a system call: not when nothing can be there).
    if (c.armed) {
        ibv_cq *ev_cq;
        void *ev_ctx;
        while (ibv_get_cq_event(c.channel, &ev_cq, &ev_ctx) == 0) {
            ibv_ack_cq_events(ev_cq, 1);
            c.armed = false; // a notification disarms its CQ: all are armed again below
        }
    }
    if (c.stash_count > 0)
        return false;
    if (!c.armed) {
        for (CqPart &p : c.parts) {
            if (int rc = ibv_req_notify_cq(p.cq, 0)) {
                DAT2_ERR("%s: ibv_req_notify_cq: %s\n", ia_.name.c_str(), std::strerror(rc));
                return false; // the kit then polls instead of blocking
            }
        }
        c.armed = true;
    }
    int got = 0;
    for (CqPart &p : c.parts) {
        const int r = ibv_poll_cq(p.cq, VerbsCq::kStash - got, c.stash + got);
        if (r > 0)
            got += r;
        if (got == VerbsCq::kStash)
            break;
    }
    if (got > 0) {
        c.stash_head = 0;
        c.stash_count = got;
        return false;
    }
    return true;
}

// ---- protection domains ------------------------------------------------------------
// One per DAT PZ, made when the PZ's first LMR or EP needs it and freed
// with the last: the kit has no PZ hook for transports, and an RDMA access
// with an LMR of another PZ must fail at the target like on any verbs device.

ibv_pd *VerbsTransport::pd_acquire(kit::Pz *pz) {
    std::lock_guard<std::mutex> lock(pd_mu_);
    auto it = pds_.find(pz);
    if (it != pds_.end()) {
        ++it->second.users;
        return it->second.pd;
    }
    ibv_pd *pd = ibv_alloc_pd(ctx_);
    if (!pd) {
        DAT2_ERR("%s: ibv_alloc_pd: %s\n", ia_.name.c_str(), std::strerror(errno));
        return nullptr;
    }
    pds_[pz] = PdUse{pd, 1};
    return pd;
}

void VerbsTransport::pd_release(kit::Pz *pz) {
    std::lock_guard<std::mutex> lock(pd_mu_);
    auto it = pds_.find(pz);
    if (it == pds_.end() || --it->second.users > 0)
        return;
    if (int rc = ibv_dealloc_pd(it->second.pd))
        DAT2_ERR("%s: ibv_dealloc_pd: %s\n", ia_.name.c_str(), std::strerror(rc));
    pds_.erase(it);
}

// ---- memory ----------------------------------------------------------------------------

DAT_RETURN VerbsTransport::mr_register(kit::Lmr &lmr) {
    ibv_pd *pd = pd_acquire(lmr.pz);
    if (!pd)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
    // Local read needs no flag. Remote write needs local write in verbs;
    // memory that only allows reads registers without either.
    // Windows (RMRs) bind to any LMR: every region allows it.
    int access = mw_supported_ ? IBV_ACCESS_MW_BIND : 0;
    if (lmr.privileges & (DAT_MEM_PRIV_LOCAL_WRITE_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG))
        access |= IBV_ACCESS_LOCAL_WRITE;
    if (lmr.privileges & DAT_MEM_PRIV_REMOTE_READ_FLAG)
        access |= IBV_ACCESS_REMOTE_READ;
    if (lmr.privileges & DAT_MEM_PRIV_REMOTE_WRITE_FLAG)
        access |= IBV_ACCESS_REMOTE_WRITE;
    // Atomics (dat_ib_extensions.h) need their own flag in verbs: given with
    // DAT_IB_MEM_PRIV_REMOTE_ATOMIC, and with remote write (an atomic is a
    // write to the region; DAT 2.0 has no other privilege for it). Like
    // remote write it needs local write.
    if (atomics_supported() && (lmr.privileges & (DAT_MEM_PRIV_REMOTE_WRITE_FLAG | DAT_MEM_PRIV_EXTENSION_BASE)))
        access |= IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE;
    ibv_mr *mr = ibv_reg_mr(pd, reinterpret_cast<void *>(lmr.address), lmr.length, access);
    if (!mr) {
        const int err = errno;
        DAT2_ERR("%s: registering %#lx+%lu: %s\n", ia_.name.c_str(), static_cast<unsigned long>(lmr.address),
                 static_cast<unsigned long>(lmr.length), std::strerror(err));
        pd_release(lmr.pz);
        if (err == EFAULT)
            return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3); // not mapped, or not writable
        return to_dat(err, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION));
    }
    lmr.mr = mr;
    lmr.desc = reinterpret_cast<void *>(static_cast<std::uintptr_t>(mr->lkey));
    lmr.rmr_context = mr->rkey;
    return DAT_SUCCESS;
}

void VerbsTransport::mr_deregister(kit::Lmr &lmr) {
    if (!lmr.mr)
        return;
    if (int rc = ibv_dereg_mr(static_cast<ibv_mr *>(lmr.mr)))
        DAT2_ERR("%s: ibv_dereg_mr: %s\n", ia_.name.c_str(), std::strerror(rc));
    lmr.mr = nullptr;
    lmr.desc = nullptr;
    pd_release(lmr.pz);
}

// ---- memory windows ------------------------------------------------------------------
// The kit treats a bind as done when rmr_bind returns: the bind and
// invalidate work requests are posted unsignalled on the EP's QP, which runs
// them before anything posted after them (the Consumer sends the new context
// to its peer only afterwards); the new rkey is known at posting. A failure
// surfaces as an error completion that breaks the connection.

namespace {

DAT_RETURN replace_window(ibv_pd *pd, VerbsMw &vm) {
    ibv_mw *fresh = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
    if (!fresh)
        return to_dat(errno, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION));
    ibv_dealloc_mw(vm.mw); // the old binding's rkey opens nothing from here on
    vm.mw = fresh;
    vm.rkey = fresh->rkey;
    vm.bound_qp = 0;
    return DAT_SUCCESS;
}

} // namespace

DAT_RETURN VerbsTransport::rmr_open(kit::Rmr &rmr) {
    if (!mw_supported_)
        return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    ibv_pd *pd = pd_acquire(rmr.pz);
    if (!pd)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
    ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
    if (!mw) {
        const int err = errno;
        DAT2_ERR("%s: ibv_alloc_mw: %s\n", ia_.name.c_str(), std::strerror(err));
        pd_release(rmr.pz);
        return to_dat(err, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION));
    }
    auto *vm = new VerbsMw;
    vm->mw = mw;
    vm->rkey = mw->rkey;
    rmr.tp = vm;
    return DAT_SUCCESS;
}

void VerbsTransport::rmr_close(kit::Rmr &rmr) {
    auto *vm = static_cast<VerbsMw *>(rmr.tp);
    if (!vm)
        return;
    if (int rc = ibv_dealloc_mw(vm->mw))
        DAT2_ERR("%s: ibv_dealloc_mw: %s\n", ia_.name.c_str(), std::strerror(rc));
    delete vm;
    rmr.tp = nullptr;
    pd_release(rmr.pz);
}

DAT_RETURN VerbsTransport::rmr_bind(kit::Rmr &rmr, kit::Ep &ep, const kit::Lmr &lmr, std::uintptr_t addr,
                                    DAT_VLEN len, DAT_MEM_PRIV_FLAGS privileges) {
    auto &vm = *static_cast<VerbsMw *>(rmr.tp);
    auto &vep = *static_cast<VerbsEp *>(ep.tp);
    ibv_qp *qp = vep.qp;
    if (!qp)
        return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
    const std::uint64_t tag = reinterpret_cast<std::uintptr_t>(&vep) | kWrWindow;
    // A window bound through another QP (the EP was reset, or another EP
    // bound it) cannot be invalidated on this one: a fresh window instead.
    if (vm.bound_qp && vm.bound_qp != qp->qp_num)
        if (DAT_RETURN r = replace_window(pd_of(rmr.pz), vm))
            return r;
    ibv_send_wr inv{}, bind{}, *bad = nullptr;
    const std::uint32_t rkey = ibv_inc_rkey(vm.rkey);
    bind.wr_id = tag;
    bind.opcode = IBV_WR_BIND_MW;
    bind.bind_mw.mw = vm.mw;
    bind.bind_mw.rkey = rkey;
    bind.bind_mw.bind_info.mr = static_cast<ibv_mr *>(lmr.mr);
    bind.bind_mw.bind_info.addr = addr;
    bind.bind_mw.bind_info.length = len;
    bind.bind_mw.bind_info.mw_access_flags =
        ((privileges & DAT_MEM_PRIV_REMOTE_READ_FLAG) ? IBV_ACCESS_REMOTE_READ : 0) |
        ((privileges & DAT_MEM_PRIV_REMOTE_WRITE_FLAG) ? IBV_ACCESS_REMOTE_WRITE : 0);
    ibv_send_wr *first = &bind;
    if (vm.bound_qp) {
        // A type 2 window takes a new binding only when it is invalid.
        inv.wr_id = tag;
        inv.opcode = IBV_WR_LOCAL_INV;
        inv.invalidate_rkey = vm.rkey;
        inv.next = &bind;
        first = &inv;
    }
    if (int rc = ibv_post_send(qp, first, &bad)) {
        DAT2_ERR("%s: binding a window on QP %u: %s\n", ia_.name.c_str(), qp->qp_num, std::strerror(rc));
        if (bad == &bind && first == &inv)
            vm.bound_qp = 0; // invalidated, not bound again
        return rc == ENOMEM ? DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0) : to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    // The provider tells the device the window's current rkey from the
    // ibv_mw (a type 2 bind posted on a QP does not update it): keep it so.
    vm.mw->rkey = rkey;
    vm.rkey = rkey;
    vm.bound_qp = qp->qp_num;
    rmr.rmr_context = rkey;
    return DAT_SUCCESS;
}

DAT_RETURN VerbsTransport::rmr_unbind(kit::Rmr &rmr, kit::Ep *ep) {
    auto &vm = *static_cast<VerbsMw *>(rmr.tp);
    if (!vm.bound_qp)
        return DAT_SUCCESS;
    auto *vep = ep ? static_cast<VerbsEp *>(ep->tp) : nullptr;
    if (vep && vep->qp && vep->qp->qp_num == vm.bound_qp) {
        ibv_send_wr inv{}, *bad = nullptr;
        inv.wr_id = reinterpret_cast<std::uintptr_t>(vep) | kWrWindow;
        inv.opcode = IBV_WR_LOCAL_INV;
        inv.invalidate_rkey = vm.rkey;
        if (int rc = ibv_post_send(vep->qp, &inv, &bad)) {
            DAT2_ERR("%s: invalidating a window on QP %u: %s\n", ia_.name.c_str(), vep->qp->qp_num,
                     std::strerror(rc));
            return rc == ENOMEM ? DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0)
                                : to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
        }
        vm.bound_qp = 0;
        return DAT_SUCCESS;
    }
    // Freed, invalidated by the peer (the device did it already), or bound
    // through another QP: no QP here to invalidate it on.
    return replace_window(pd_of(rmr.pz), vm);
}

ibv_pd *VerbsTransport::pd_of(kit::Pz *pz) {
    std::lock_guard<std::mutex> lock(pd_mu_);
    auto it = pds_.find(pz);
    return it == pds_.end() ? nullptr : it->second.pd;
}

} // namespace dat2::verbs
