// SPDX-License-Identifier: BSD-3-Clause
// Memory: protection domains (one per DAT PZ), LMRs as memory regions, and
// RMRs as type 2B memory windows.
#include "verbs.hpp"

#include "log.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace dat2::verbs {

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
        DAT2_ERR("%s: ibv_alloc_pd: %s\n", name(), std::strerror(errno));
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
        DAT2_ERR("%s: ibv_dealloc_pd: %s\n", name(), std::strerror(rc));
    pds_.erase(it);
}

// ---- memory ----------------------------------------------------------------------------

DAT_RETURN VerbsTransport::mr_register(kit::Lmr &lmr, kit::Registration &out) {
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
        DAT2_ERR("%s: registering %#lx+%lu: %s\n", name(), static_cast<unsigned long>(lmr.address),
                 static_cast<unsigned long>(lmr.length), std::strerror(err));
        pd_release(lmr.pz);
        if (err == EFAULT)
            return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3); // not mapped, or not writable
        return to_dat(err, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION));
    }
    out.mr = mr;
    out.desc = reinterpret_cast<void *>(static_cast<std::uintptr_t>(mr->lkey));
    out.rmr_context = mr->rkey;
    return DAT_SUCCESS;
}

void VerbsTransport::mr_deregister(kit::Lmr &lmr) {
    if (!lmr.mr)
        return;
    if (int rc = ibv_dereg_mr(static_cast<ibv_mr *>(lmr.mr)))
        DAT2_ERR("%s: ibv_dereg_mr: %s\n", name(), std::strerror(rc));
    pd_release(lmr.pz);
}

// ---- memory windows ------------------------------------------------------------------
// The kit treats a bind as done when rmr_bind returns: the bind and
// invalidate work requests are posted unsignalled on the EP's QP, which runs
// them before anything posted after them (the Consumer sends the new context
// to its peer only afterwards); the new rkey is known at posting. A failure
// surfaces as an error completion that breaks the connection.

namespace {

DAT_RETURN replace_window(VerbsMw &vm) {
    ibv_mw *fresh = ibv_alloc_mw(vm.mw->pd, IBV_MW_TYPE_2);
    if (!fresh)
        return to_dat(errno, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION));
    ibv_dealloc_mw(vm.mw); // the old binding's rkey opens nothing from here on
    vm.mw = fresh;
    vm.rkey = fresh->rkey;
    vm.bound_qp = 0;
    return DAT_SUCCESS;
}

} // namespace

DAT_RETURN VerbsTransport::rmr_open(kit::Rmr &rmr, void *&tp) {
    if (!mw_supported_)
        return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    ibv_pd *pd = pd_acquire(rmr.pz);
    if (!pd)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
    ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
    if (!mw) {
        const int err = errno;
        DAT2_ERR("%s: ibv_alloc_mw: %s\n", name(), std::strerror(err));
        pd_release(rmr.pz);
        return to_dat(err, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION));
    }
    auto *vm = new VerbsMw;
    vm->mw = mw;
    vm->rkey = mw->rkey;
    tp = vm;
    return DAT_SUCCESS;
}

void VerbsTransport::index_window(VerbsMw &vm) {
    if (vm.indexed_qp == vm.bound_qp)
        return;
    if (vm.indexed_qp) {
        auto it = windows_by_qp_.find(vm.indexed_qp);
        std::vector<VerbsMw *> &list = it->second;
        list.erase(std::find(list.begin(), list.end(), &vm));
        if (list.empty())
            windows_by_qp_.erase(it);
    }
    if (vm.bound_qp)
        windows_by_qp_[vm.bound_qp].push_back(&vm);
    vm.indexed_qp = vm.bound_qp;
}

// A type 2 window bound through a QP may hold that QP on the device (rxe's
// ibv_destroy_qp waits until no window does). The binding ends with the QP
// on any device, so each window bound through it becomes a fresh, unbound
// one first.
void VerbsTransport::unbind_windows_of(std::uint32_t qp_num) {
    std::lock_guard<std::mutex> lock(windows_mu_);
    auto it = windows_by_qp_.find(qp_num);
    if (it == windows_by_qp_.end())
        return;
    const std::vector<VerbsMw *> bound = std::move(it->second);
    windows_by_qp_.erase(it);
    for (VerbsMw *vm : bound) {
        vm->indexed_qp = 0;
        if (replace_window(*vm) != DAT_SUCCESS)
            DAT2_ERR("%s: a window bound through QP %u stays bound until the QP is gone: ibv_alloc_mw: %s\n",
                     name(), qp_num, std::strerror(errno));
        index_window(*vm);
    }
}

void VerbsTransport::rmr_close(kit::Rmr &rmr) {
    auto *vm = static_cast<VerbsMw *>(rmr.tp);
    if (!vm)
        return;
    {
        std::lock_guard<std::mutex> lock(windows_mu_);
        vm->bound_qp = 0;
        index_window(*vm);
    }
    if (int rc = ibv_dealloc_mw(vm->mw))
        DAT2_ERR("%s: ibv_dealloc_mw: %s\n", name(), std::strerror(rc));
    delete vm;
    pd_release(rmr.pz);
}

DAT_RETURN VerbsTransport::rmr_bind(kit::Rmr &rmr, kit::Ep &ep, const kit::Lmr &lmr, std::uintptr_t addr, DAT_VLEN len,
                                    DAT_MEM_PRIV_FLAGS privileges, DAT_RMR_CONTEXT &context) {
    auto &vm = *static_cast<VerbsMw *>(rmr.tp);
    auto &vep = *static_cast<VerbsEp *>(ep.tp);
    std::lock_guard<std::mutex> lock(windows_mu_);
    Reindex reindex{*this, vm};
    ibv_qp *qp = vep.qp;
    if (!qp)
        return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
    const std::uint64_t tag = reinterpret_cast<std::uintptr_t>(&vep) | kWrWindow;
    // A window bound through another QP (the EP was reset, or another EP
    // bound it) cannot be invalidated on this one: a fresh window instead.
    if (vm.bound_qp && vm.bound_qp != qp->qp_num)
        if (DAT_RETURN r = replace_window(vm))
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
    vep.own_wrs.store(true, std::memory_order_relaxed);
    if (int rc = ibv_post_send(qp, first, &bad)) {
        DAT2_ERR("%s: binding a window on QP %u: %s\n", name(), qp->qp_num, std::strerror(rc));
        if (bad == &bind && first == &inv)
            vm.bound_qp = 0; // invalidated, not bound again
        return rc == ENOMEM ? DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0) : to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    // The provider tells the device the window's current rkey from the
    // ibv_mw (a type 2 bind posted on a QP does not update it): keep it so.
    vm.mw->rkey = rkey;
    vm.rkey = rkey;
    vm.bound_qp = qp->qp_num;
    context = rkey;
    return DAT_SUCCESS;
}

DAT_RETURN VerbsTransport::rmr_unbind(kit::Rmr &rmr, kit::Ep *ep) {
    auto &vm = *static_cast<VerbsMw *>(rmr.tp);
    std::lock_guard<std::mutex> lock(windows_mu_);
    Reindex reindex{*this, vm};
    if (!vm.bound_qp)
        return DAT_SUCCESS;
    auto *vep = ep ? static_cast<VerbsEp *>(ep->tp) : nullptr;
    if (vep && vep->qp && vep->qp->qp_num == vm.bound_qp) {
        ibv_send_wr inv{}, *bad = nullptr;
        inv.wr_id = reinterpret_cast<std::uintptr_t>(vep) | kWrWindow;
        inv.opcode = IBV_WR_LOCAL_INV;
        inv.invalidate_rkey = vm.rkey;
        vep->own_wrs.store(true, std::memory_order_relaxed);
        if (int rc = ibv_post_send(vep->qp, &inv, &bad)) {
            DAT2_ERR("%s: invalidating a window on QP %u: %s\n", name(), vep->qp->qp_num, std::strerror(rc));
            return rc == ENOMEM ? DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0)
                                : to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
        }
        vm.bound_qp = 0;
        return DAT_SUCCESS;
    }
    // Freed, invalidated by the peer (the device did it already), or bound
    // through another QP: no QP here to invalidate it on.
    return replace_window(vm);
}


} // namespace dat2::verbs
