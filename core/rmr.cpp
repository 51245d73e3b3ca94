// SPDX-License-Identifier: BSD-3-Clause
// Remote memory regions (memory windows): creation in a PZ, binding to a
// range of an LMR through an Endpoint (the transport hands out a new
// rmr_context each time, so the old one stops working), unbinding (a bind
// of length 0, a peer's send with invalidate, dat_rmr_free), and the two
// DAT 2.0 DTOs that name RMRs. The reference rules: a bound RMR counts as a
// user of its LMR (dat_lmr_free refuses), every RMR as a user of its PZ.
#include "boundary.hpp"
#include "ep.hpp"
#include "lmr.hpp"
#include "slots.hpp"

#include <cstring>

namespace dat2::kit {

namespace {

constexpr unsigned kBindFlags =
    DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG | DAT_COMPLETION_BARRIER_FENCE_FLAG;

DAT_RETURN make_rmr(DAT_PZ_HANDLE pz_handle, DAT_RMR_HANDLE *out, DAT_RMR_SCOPE scope) {
    Pz *pz;
    if (DAT_RETURN r = handle_cast(pz_handle, pz))
        return r;
    if (!out)
        return invalid_arg(2);
    Ia &ia = *pz->ia;
    if (ia.rmrs.fetch_add(1) >= kMaxRmrs) {
        ia.rmrs.fetch_sub(1);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
    }
    Rmr *rmr = nullptr;
    try {
        rmr = make_object<Rmr>(ia.provider, &ia);
    } catch (...) {
        ia.rmrs.fetch_sub(1);
        throw;
    }
    if (!rmr) {
        ia.rmrs.fetch_sub(1);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    rmr->pz = pz;
    rmr->scope = scope;
    if (DAT_RETURN r = ia.transport->rmr_open(*rmr, rmr->tp)) {
        destroy_object(rmr);
        ia.rmrs.fetch_sub(1);
        return r;
    }
    pz->users.fetch_add(1);
    ia_track(ia, rmr);
    publish(rmr);
    *out = rmr;
    return DAT_SUCCESS;
}

// Drops the binding; rmr.mu held. The transport's answer is returned, but
// the kit forgets the binding only when the transport did.
DAT_RETURN unbind_locked(Rmr &rmr, Ep *ep) {
    if (!rmr.lmr)
        return DAT_SUCCESS;
    if (DAT_RETURN r = rmr.ia->transport->rmr_unbind(rmr, ep))
        return r;
    rmr.lmr->users.fetch_sub(1);
    rmr.lmr = nullptr;
    rmr.range = DAT_LMR_TRIPLET{};
    rmr.privileges = DAT_MEM_PRIV_NONE_FLAG;
    rmr.rmr_context = 0;
    return DAT_SUCCESS;
}

// The bind's record: its completion takes its turn among the EP's requests
// (a bind is a request of the EP, as on an RDMA device's send queue), so it
// is never reported ahead of an earlier DTO that has not completed yet.
Op *take_bind_op(Ep &ep, Rmr &rmr, DAT_RMR_COOKIE cookie, DAT_COMPLETION_FLAGS flags) {
    Op *op = ep_take_op(ep, *ep.request_evd, false);
    if (!op)
        return nullptr;
    op->ext = ExtKind::kRmrBind;
    op->rmr = &rmr;
    op->cookie = cookie;
    op->suppress = (flags & DAT_COMPLETION_SUPPRESS_FLAG) != 0;
    op->length = 0;
    op->state.store(Op::kHeld, std::memory_order_release);
    return op;
}

// `silent`: the bind failed and said so by its return code.
void bind_done(Ep &ep, Op &op, DAT_DTO_COMPLETION_STATUS status, bool silent) {
    evd_request_done(*ep.request_evd, op, status, silent, false);
}

// The bound RMR of `ia` whose context is `context`, in `pz`; ia.mu held.
Rmr *bound_rmr_locked(Ia &ia, Pz *pz, DAT_RMR_CONTEXT context) {
    for (ObjectHeader *o : ia.objects.of_type(DAT_HANDLE_TYPE_RMR)) {
        auto *rmr = static_cast<Rmr *>(o);
        if (rmr->pz != pz)
            continue;
        std::lock_guard<std::mutex> lock(rmr->mu);
        if (rmr->lmr && rmr->rmr_context == context)
            return rmr;
    }
    return nullptr;
}

} // namespace

void rmr_release(Rmr &rmr) {
    Ia &ia = *rmr.ia;
    {
        std::lock_guard<std::mutex> lock(rmr.mu);
        if (rmr.lmr && unbind_locked(rmr, nullptr) != DAT_SUCCESS) {
            // The transport keeps nothing of a window it is told to close.
            DAT2_ERR("RMR %p: unbinding rmr_context %#x failed; freeing it anyway\n", (void *)&rmr, rmr.rmr_context);
            rmr.lmr->users.fetch_sub(1);
            rmr.lmr = nullptr;
        }
    }
    ia.transport->rmr_close(rmr);
    rmr.pz->users.fetch_sub(1);
    ia.rmrs.fetch_sub(1);
    ia_untrack(ia, &rmr);
    destroy_object(&rmr);
}

void rmr_invalidate(Ep &ep, DAT_RMR_CONTEXT context, DAT_EVENT &event) {
    Ia &ia = *ep.ia;
    bool invalidated = false;
    {
        // ia.mu keeps the RMR from being freed meanwhile (rmr_release
        // untracks it under ia.mu only after it has been unbound).
        std::lock_guard<std::mutex> lock(ia.mu);
        Rmr *rmr = bound_rmr_locked(ia, ep.pz, context);
        if (rmr) {
            std::lock_guard<std::mutex> rmr_lock(rmr->mu);
            // Bound to the same context still: nothing unbound it in between.
            invalidated = rmr->lmr && rmr->rmr_context == context && unbind_locked(*rmr, nullptr) == DAT_SUCCESS;
        }
    }
    if (!invalidated) {
        // A context that names no window of the EP's PZ opens nothing to close:
        // the message is delivered as a plain receive.
        DAT2_LOG(log::kGeneric, "EP %p: send with invalidate names rmr_context %#x, not a bound RMR of its PZ\n",
                 (void *)&ep, context);
        return;
    }
    event.event_data.dto_completion_event_data.operation = DAT_DTO_RECEIVE_WITH_INVALIDATE;
    event.event_data.dto_completion_event_data.rmr_context = context;
}

void rmr_bind_event(DAT_EVENT &e, const Op &op, DAT_DTO_COMPLETION_STATUS status) {
    std::memset(&e, 0, sizeof e);
    e.event_number = DAT_RMR_BIND_COMPLETION_EVENT;
    auto &d = e.event_data.rmr_completion_event_data;
    d.rmr_handle = op.rmr;
    d.user_cookie = op.cookie;
    d.status = status == DAT_DTO_SUCCESS ? DAT_RMR_BIND_SUCCESS : DAT_RMR_BIND_FAILURE;
}

namespace slot {

DAT_RETURN rmr_create(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE *rmr) {
    return guarded("dat_rmr_create", [&] { return make_rmr(pz, rmr, DAT_RMR_SCOPE_PZ); });
}

DAT_RETURN rmr_create_for_ep(DAT_PZ_HANDLE pz_handle, DAT_RMR_HANDLE *rmr) {
    return guarded("dat_rmr_create_for_ep", [&]() -> DAT_RETURN {
        Pz *pz;
        if (DAT_RETURN r = handle_cast(pz_handle, pz))
            return r;
        if (!rmr)
            return invalid_arg(2);
        // A window that any connection of the PZ could reach is not what the
        // Consumer asked for: refused where the transport cannot scope it
        // (rmr_scope_supported says so in dat_ia_query).
        if (!pz->ia->caps.rmr_scope_ep) {
            DAT2_LOG(log::kGeneric,
                     "%s: dat_rmr_create_for_ep: the transport cannot limit a window to one "
                     "Endpoint's connection (rmr_scope_supported is DAT_RMR_SCOPE_PZ)\n",
                     pz->ia->name.c_str());
            return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
        }
        return make_rmr(pz_handle, rmr, DAT_RMR_SCOPE_EP);
    });
}

DAT_RETURN rmr_query(DAT_RMR_HANDLE rmr_handle, DAT_RMR_PARAM_MASK mask, DAT_RMR_PARAM *param) {
    return guarded("dat_rmr_query", [&]() -> DAT_RETURN {
        Rmr *rmr;
        if (DAT_RETURN r = handle_cast(rmr_handle, rmr))
            return r;
        if (mask & ~DAT_RMR_FIELD_ALL)
            return invalid_arg(2);
        if (!param)
            return invalid_arg(3);
        std::lock_guard<std::mutex> lock(rmr->mu);
        if (mask & DAT_RMR_FIELD_IA_HANDLE)
            ia_handle_for_consumer(rmr->ia, &param->ia_handle);
        if (mask & DAT_RMR_FIELD_PZ_HANDLE)
            param->pz_handle = rmr->pz;
        // dat_rmr_query(3DAT): the binding's fields are not defined for an
        // unbound RMR; they read as zero then.
        if (mask & DAT_RMR_FIELD_LMR_TRIPLET)
            param->lmr_triplet = rmr->range;
        if (mask & DAT_RMR_FIELD_MEM_PRIV)
            param->mem_priv = rmr->privileges;
        if (mask & DAT_RMR_FIELD_RMR_CONTEXT)
            param->rmr_context = rmr->rmr_context;
        if (mask & DAT_RMR_FIELD_RMR_SCOPE)
            param->rmr_scope = rmr->scope;
        if (mask & DAT_RMR_FIELD_VA_TYPE)
            param->va_type = rmr->va_type;
        return DAT_SUCCESS;
    });
}

// dat_rmr_bind(3DAT). The bind is a request on `ep`: it completes with a
// DAT_RMR_BIND_COMPLETION_EVENT on the EP's request EVD, and on a
// Disconnected EP it is accepted and flushed at once (no effect). A
// segment_length of 0 unbinds; then the LMR handle, address, privileges and
// va_type are irrelevant and rmr_context is not written.
DAT_RETURN rmr_bind(DAT_RMR_HANDLE rmr_handle, DAT_LMR_HANDLE lmr_handle, const DAT_LMR_TRIPLET *triplet,
                    DAT_MEM_PRIV_FLAGS privileges, DAT_VA_TYPE va_type, DAT_EP_HANDLE ep_handle, DAT_RMR_COOKIE cookie,
                    DAT_COMPLETION_FLAGS flags, DAT_RMR_CONTEXT *rmr_context) {
    return guarded("dat_rmr_bind", [&]() -> DAT_RETURN {
        Rmr *rmr;
        if (DAT_RETURN r = handle_cast(rmr_handle, rmr))
            return r;
        Ia &ia = *rmr->ia;
        Ep *ep;
        if (DAT_RETURN r = handle_cast_in(&ia, ep_handle, ep))
            return r;
        if (!triplet)
            return invalid_arg(3);
        const bool unbind = triplet->segment_length == 0;
        Lmr *lmr = nullptr;
        if (!unbind) {
            // OFED's DAT 2.0 finds the LMR by the triplet's context alone and
            // programs written for it may pass no handle; a handle given must
            // be an LMR of this IA, the one the context names.
            if (lmr_handle != DAT_HANDLE_NULL)
                if (DAT_RETURN r = handle_cast_in(&ia, lmr_handle, lmr))
                    return r;
            Lmr *named = lmr_by_context(ia, triplet->lmr_context);
            if (!named || (lmr && named != lmr))
                return invalid_arg(3);
            lmr = named;
            // dat_rmr_bind(3DAT): "the target_address or segment_length
            // exceeded the limits of the existing LMR".
            if (!lmr_covers(*lmr, triplet->virtual_address, triplet->segment_length))
                return invalid_arg(3);
            if (privileges & ~DAT_MEM_PRIV_ALL_FLAG)
                return invalid_arg(4);
            if (va_type != DAT_VA_TYPE_VA)
                return va_type == DAT_VA_TYPE_ZB ? DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0) : invalid_arg(5);
            if (!rmr_context)
                return invalid_arg(9);
        }
        if (flags & ~kBindFlags)
            return invalid_arg(8);
        // "The value of DAT_COMPLETION_UNSIGNALLED_FLAG is only valid if the
        // Endpoint Request Completion Flags DAT_COMPLETION_UNSIGNALLED_FLAG."
        if ((flags & DAT_COMPLETION_UNSIGNALLED_FLAG) &&
            !(ep->attr.request_completion_flags & DAT_COMPLETION_UNSIGNALLED_FLAG))
            return invalid_arg(8);
        const DAT_EP_STATE state = ep->state.load(std::memory_order_acquire);
        if (state != DAT_EP_STATE_CONNECTED && state != DAT_EP_STATE_DISCONNECTED)
            return DAT_ERROR(DAT_INVALID_STATE, state == DAT_EP_STATE_DISCONNECT_PENDING
                                                    ? DAT_INVALID_STATE_EP_DISCPENDING
                                                    : DAT_INVALID_STATE_EP_NOTREADY);
        if (!ep->request_evd)
            return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_EVD_REQUEST);
        // The window, the memory under it and the Endpoint that binds it
        // belong to one Protection Zone.
        if (ep->pz != rmr->pz || (lmr && lmr->pz != rmr->pz))
            return DAT_ERROR(DAT_PROTECTION_VIOLATION, 0);
        // Remote write through the window needs the LMR's local write (as an
        // RDMA device requires of the memory region a window is bound to);
        // local read is always there (see resolve_segment).
        if (lmr && (privileges & DAT_MEM_PRIV_REMOTE_WRITE_FLAG) && !(lmr->privileges & DAT_MEM_PRIV_LOCAL_WRITE_FLAG))
            return DAT_ERROR(DAT_PRIVILEGES_VIOLATION, DAT_PRIVILEGES_WRITE);
        if (state == DAT_EP_STATE_CONNECTED && (flags & DAT_COMPLETION_BARRIER_FENCE_FLAG))
            if (DAT_RETURN r = ep_fence_reads(*ep))
                return r;
        Op *op = take_bind_op(*ep, *rmr, cookie, flags);
        if (!op)
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
        if (state == DAT_EP_STATE_DISCONNECTED) {
            // Accepted and flushed: reported as a failed bind, in its turn.
            bind_done(*ep, *op, DAT_DTO_ERR_FLUSHED, false);
            return DAT_SUCCESS;
        }
        DAT_RMR_CONTEXT context = 0;
        {
            std::lock_guard<std::mutex> lock(rmr->mu);
            if (unbind) {
                if (DAT_RETURN r = unbind_locked(*rmr, ep)) {
                    bind_done(*ep, *op, DAT_DTO_SUCCESS, true);
                    return r;
                }
            } else {
                const auto address = static_cast<std::uintptr_t>(triplet->virtual_address);
                const auto remote = static_cast<DAT_MEM_PRIV_FLAGS>(
                    privileges & (DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG));
                DAT_RMR_CONTEXT bound = 0;
                if (DAT_RETURN r =
                        ia.transport->rmr_bind(*rmr, *ep, *lmr, address, triplet->segment_length, remote, bound)) {
                    bind_done(*ep, *op, DAT_DTO_SUCCESS, true);
                    return r;
                }
                rmr->rmr_context = bound;
                lmr->users.fetch_add(1);
                if (rmr->lmr)
                    rmr->lmr->users.fetch_sub(1);
                rmr->lmr = lmr;
                rmr->range = *triplet;
                rmr->privileges = remote;
                rmr->va_type = va_type;
                context = rmr->rmr_context;
            }
        }
        // The transport bound synchronously, which fences every later DTO
        // of the EP behind the bind; its completion (unless suppressed) is
        // reported once every earlier request of the EP is.
        bind_done(*ep, *op, DAT_DTO_SUCCESS, false);
        if (!unbind)
            *rmr_context = context;
        return DAT_SUCCESS;
    });
}

DAT_RETURN rmr_free(DAT_RMR_HANDLE rmr_handle) {
    return guarded("dat_rmr_free", [&]() -> DAT_RETURN {
        Rmr *rmr;
        if (DAT_RETURN r = handle_cast(rmr_handle, rmr))
            return r;
        // dat_rmr_free(3DAT): allowed bound or unbound; a bound RMR is
        // unbound first, so its rmr_context stops working.
        rmr_release(*rmr);
        return DAT_SUCCESS;
    });
}

// A send whose arrival unbinds the peer's RMR `rmr_context` (the receive
// completes as DAT_DTO_RECEIVE_WITH_INVALIDATE naming it).
DAT_RETURN ep_post_send_with_invalidate(DAT_EP_HANDLE ep_handle, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                        DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags, DAT_BOOLEAN invalidate,
                                        DAT_RMR_CONTEXT rmr_context) {
    return guarded("dat_ep_post_send_with_invalidate", [&]() -> DAT_RETURN {
        if (!invalidate)
            return ep_post(ep_handle, PostKind::kSend, n, iov, cookie, nullptr, flags);
        Ep *ep;
        if (DAT_RETURN r = handle_cast(ep_handle, ep))
            return r;
        if (!ep->ia->caps.send_with_invalidate) {
            DAT2_LOG(log::kGeneric, "%s: the transport cannot carry a send with invalidate\n", ep->ia->name.c_str());
            return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
        }
        DAT_RMR_TRIPLET target{};
        target.rmr_context = rmr_context;
        return ep_post(ep_handle, PostKind::kSend, n, iov, cookie, &target, flags);
    });
}

// An RDMA Read whose local buffer is named by an RMR of this IA (the iWARP
// model: the sink is a window with remote write access). The window's
// range resolves to its LMR, and the Read goes the usual way.
DAT_RETURN ep_post_rdma_read_to_rmr(DAT_EP_HANDLE ep_handle, const DAT_RMR_TRIPLET *local, DAT_DTO_COOKIE cookie,
                                    const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags) {
    return guarded("dat_ep_post_rdma_read_to_rmr", [&]() -> DAT_RETURN {
        Ep *ep;
        if (DAT_RETURN r = handle_cast(ep_handle, ep))
            return r;
        if (!local)
            return invalid_arg(2);
        if (!remote)
            return invalid_arg(4);
        DAT_LMR_TRIPLET sink{};
        if (local->segment_length != 0) {
            Ia &ia = *ep->ia;
            bool found = false, writable = false, inside = false, same_pz = false;
            {
                std::lock_guard<std::mutex> lock(ia.mu);
                for (ObjectHeader *o : ia.objects.of_type(DAT_HANDLE_TYPE_RMR)) {
                    auto *rmr = static_cast<Rmr *>(o);
                    std::lock_guard<std::mutex> rmr_lock(rmr->mu);
                    if (!rmr->lmr || rmr->rmr_context != local->rmr_context)
                        continue;
                    found = true;
                    same_pz = rmr->pz == ep->pz;
                    writable = (rmr->privileges & DAT_MEM_PRIV_REMOTE_WRITE_FLAG) != 0;
                    const DAT_LMR_TRIPLET &w = rmr->range;
                    inside = local->virtual_address >= w.virtual_address && local->segment_length <= w.segment_length &&
                             local->virtual_address - w.virtual_address <= w.segment_length - local->segment_length;
                    sink.lmr_context = rmr->lmr->lmr_context;
                    break;
                }
            }
            if (!found || !writable)
                return DAT_ERROR(DAT_PRIVILEGES_VIOLATION, DAT_PRIVILEGES_WRITE);
            if (!same_pz)
                return DAT_ERROR(DAT_PROTECTION_VIOLATION, DAT_PROTECTION_WRITE);
            if (!inside)
                return invalid_arg(2);
            sink.virtual_address = local->virtual_address;
            sink.segment_length = local->segment_length;
        }
        return ep_post(ep_handle, PostKind::kRdmaRead, local->segment_length ? 1 : 0, &sink, cookie, remote, flags);
    });
}

} // namespace slot
} // namespace dat2::kit
