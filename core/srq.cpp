// SPDX-License-Identifier: BSD-3-Clause
// Shared receive queues (dat_srq_*, dat_ep_create_with_srq) and the
// receive-side accounting of Endpoints (dat_ep_recv_query,
// dat_ep_set_watermark). srq.hpp says what the kit can know of an SRQ.
#include "srq.hpp"

#include "boundary.hpp"
#include "ep.hpp"
#include "lmr.hpp"
#include "log.hpp"
#include "slots.hpp"

#include <algorithm>

namespace dat2::kit {

namespace {

// DAT 2.0 gives the SRQ low watermark and the EP soft high watermark their
// asynchronous reasons (DAT_SRQ_LOW_WATERMARK_EVENT with the SRQ handle,
// DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT with the EP's) but no event number;
// OFED's providers deliver their SRQ events (limit reached, last WQE
// reached) as DAT_ASYNC_ERROR_EP_BROKEN, and so does the kit. The handle
// and the reason tell them apart.
constexpr DAT_EVENT_NUMBER kSrqAsyncEvent = DAT_ASYNC_ERROR_EP_BROKEN;

// srq.mu held, or the SRQ not published yet.
void add_records(Srq &srq, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        Op &op = srq.ops.emplace_back();
        op.srq = &srq;
        op.is_recv = true;
        op.operation = DAT_DTO_RECEIVE;
        op.next_free = srq.free_ops;
        srq.free_ops = &op;
    }
}

Op *take_locked(Srq &srq) {
    if (srq.posted >= srq.max_recv_dtos || !srq.free_ops)
        return nullptr;
    Op *op = srq.free_ops;
    srq.free_ops = op->next_free;
    ++srq.posted;
    op->seq = srq.next_seq++;
    return op;
}

void give_back_locked(Srq &srq, Op &op) {
    op.state.store(Op::kFree, std::memory_order_relaxed);
    op.ep = nullptr;
    op.next_free = srq.free_ops;
    srq.free_ops = &op;
    --srq.posted;
}

// dat_srq_set_lw(3DAT): fires when the buffers on the SRQ are below the
// watermark, once per setting. A watermark of 0 (DAT_SRQ_LW_DEFAULT) never does.
bool low_watermark_crossed_locked(Srq &srq) {
    if (!srq.lw_armed || srq.posted >= srq.low_watermark)
        return false;
    srq.lw_armed = false;
    return true;
}

void post_low_watermark(Srq &srq) {
    DAT2_LOG(log::kGeneric, "SRQ %p: fewer than %d receives queued: low watermark event\n", (void *)&srq,
             srq.low_watermark);
    post_async(*srq.ia, kSrqAsyncEvent, &srq, DAT_SRQ_LOW_WATERMARK_EVENT);
}

// A crossing that could not be reported where it happened (srq_op_done).
void post_pending_low_watermark(Srq &srq) {
    if (srq.lw_pending.load(std::memory_order_relaxed) && srq.lw_pending.exchange(false))
        post_low_watermark(srq);
}

// The distinct recv EVDs of the SRQ's EPs.
std::vector<Evd *> recv_evds(Srq &srq) {
    std::vector<Evd *> evds;
    std::lock_guard<Lock> lock(srq.mu);
    for (Ep *ep : srq.eps)
        if (ep->recv_evd && std::find(evds.begin(), evds.end(), ep->recv_evd) == evds.end())
            evds.push_back(ep->recv_evd);
    return evds;
}

// Moves the completions the transport holds for the SRQ's EPs into their
// recv EVDs: as many as fit, or every one (`all`, to get records back).
void pull_completions(Srq &srq, bool all) {
    for (Evd *evd : recv_evds(srq)) {
        {
            std::lock_guard<Lock> lock(evd->mu);
            if (all)
                evd_drain_all_locked(*evd);
            else
                evd_fill_locked(*evd);
        }
        evd_wake(*evd); // what moved out of the queue no longer wakes anyone by itself
    }
}

// Completions of the SRQ's receives that wait in recv EVDs for the consumer
// (dat_srq_resize(3DAT) counts them as outstanding).
DAT_COUNT unreaped(Srq &srq) {
    std::vector<Ep *> eps;
    {
        std::lock_guard<Lock> lock(srq.mu);
        eps = srq.eps;
    }
    auto ours = [&](const DAT_EVENT &e) {
        const auto &d = e.event_data.dto_completion_event_data;
        return e.event_number == DAT_DTO_COMPLETION_EVENT && d.operation == DAT_DTO_RECEIVE &&
               std::find(eps.begin(), eps.end(), static_cast<Ep *>(d.ep_handle)) != eps.end();
    };
    DAT_COUNT n = 0;
    for (Evd *evd : recv_evds(srq)) {
        std::lock_guard<Lock> lock(evd->mu);
        for (std::size_t i = 0; i < evd->count; ++i)
            n += ours(evd->ring[(evd->head + i) & (evd->ring.size() - 1)]);
        for (const DAT_EVENT &e : evd->spill)
            n += ours(e);
    }
    return n;
}

} // namespace

void srq_op_done(Op &op) {
    Srq &srq = *op.srq;
    // A completion is consumed under the lock of the EVD being filled, the
    // recv EVD of the EP that took the buffer; when that EVD is also the
    // async EVD, the event waits for the next call on the SRQ.
    const Evd *held = op.ep ? op.ep->recv_evd : nullptr;
    bool fire;
    {
        std::lock_guard<Lock> lock(srq.mu);
        give_back_locked(srq, op);
        fire = low_watermark_crossed_locked(srq);
        if (fire && held && (held->flags & DAT_EVD_ASYNC_FLAG)) {
            srq.lw_pending.store(true);
            fire = false;
        }
    }
    if (fire)
        post_low_watermark(srq);
}

void srq_drop(Op &op) { srq_op_done(op); }

void srq_attach(Srq &srq, Ep &ep) {
    std::lock_guard<Lock> lock(srq.mu);
    srq.eps.push_back(&ep);
    srq.users.fetch_add(1);
}

void srq_detach(Srq &srq, Ep &ep) {
    std::lock_guard<Lock> lock(srq.mu);
    srq.eps.erase(std::remove(srq.eps.begin(), srq.eps.end(), &ep), srq.eps.end());
    srq.users.fetch_sub(1);
}

void srq_ep_flushed(Ep &ep) {
    // dtestsrq (and any OFED consumer) waits for this before freeing the EP.
    post_async(*ep.ia, kSrqAsyncEvent, &ep, DAT_EP_TRANSFER_TO_ERROR);
}

void srq_release(Srq &srq) {
    Ia &ia = *srq.ia;
    ia.transport->srq_close(srq);
    {
        // No EP uses the SRQ: what is still queued has nowhere to complete.
        std::lock_guard<Lock> lock(srq.mu);
        if (srq.posted)
            DAT2_LOG(log::kGeneric, "SRQ %p freed with %d receives queued: dropped\n", (void *)&srq, srq.posted);
        for (Op &op : srq.ops)
            if (op.state.load(std::memory_order_relaxed) != Op::kFree)
                give_back_locked(srq, op);
    }
    if (srq.pz)
        srq.pz->users.fetch_sub(1);
    ia_untrack(ia, &srq);
    destroy_object(&srq);
}

void ep_check_watermarks(Ep &ep, bool established) {
    // The receive buffers at a plain EP: posted and not completed
    // (dat_ep_recv_query(3DAT)). EPs with an SRQ never arm watermarks.
    const DAT_COUNT at_ep = ep.recvs_posted.load(std::memory_order_relaxed);
    DAT_COUNT soft = ep.soft_high_watermark.load();
    if (!established && soft != DAT_WATERMARK_INFINITE && at_ep > soft &&
        ep.soft_high_watermark.compare_exchange_strong(soft, DAT_WATERMARK_INFINITE)) {
        DAT2_LOG(log::kGeneric, "EP %p: %d receives exceed the soft high watermark %d\n", (void *)&ep, at_ep, soft);
        post_async(*ep.ia, kSrqAsyncEvent, &ep, DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT);
    }
    const DAT_COUNT hard = ep.hard_high_watermark.load();
    if (hard != DAT_WATERMARK_INFINITE && at_ep > hard && ep.state.load() == DAT_EP_STATE_CONNECTED) {
        DAT2_LOG(log::kGeneric, "EP %p: %d receives exceed the hard high watermark %d: breaking the connection\n",
                 (void *)&ep, at_ep, hard);
        if (DAT_RETURN r = ep.ia->transport->ep_break(ep))
            DAT2_ERR("EP %p: the transport cannot break the connection (0x%x)\n", (void *)&ep, r);
    }
}

namespace slot {

DAT_RETURN srq_create(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz_handle, DAT_SRQ_ATTR *attr, DAT_SRQ_HANDLE *srq_out) {
    return guarded("dat_srq_create", [&]() -> DAT_RETURN {
        Ia *ia;
        if (DAT_RETURN r = handle_cast(ia_handle, ia))
            return r;
        Pz *pz;
        if (DAT_RETURN r = handle_cast_in(ia, pz_handle, pz))
            return r;
        if (!attr)
            return invalid_arg(3);
        if (!srq_out)
            return invalid_arg(4);
        if (ia->caps.max_srq_recvs == 0) {
            DAT2_LOG(log::kGeneric, "dat_srq_create(%s): the transport has no shared receive queues\n",
                     ia->name.c_str());
            return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
        }
        if (attr->max_recv_dtos <= 0 || attr->max_recv_dtos > ia->caps.max_srq_recvs || attr->max_recv_iov < 0 ||
            attr->max_recv_iov > ia->caps.max_iov || attr->low_watermark < 0 ||
            attr->low_watermark > attr->max_recv_dtos)
            return invalid_arg(3);
        Srq *srq = make_object<Srq>(ia->provider, ia);
        if (!srq)
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
        srq->pz = pz;
        srq->max_recv_iov = std::max<DAT_COUNT>(attr->max_recv_iov, 1);
        srq->max_recv_dtos = attr->max_recv_dtos;
        srq->low_watermark = attr->low_watermark;
        srq->lw_armed = true;
        try {
            add_records(*srq, static_cast<std::size_t>(attr->max_recv_dtos));
        } catch (...) {
            destroy_object(srq);
            throw;
        }
        if (DAT_RETURN r = ia->transport->srq_open(*srq, srq->tp)) {
            destroy_object(srq);
            return DAT_GET_TYPE(r) == DAT_NOT_IMPLEMENTED ? DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0) : r;
        }
        pz->users.fetch_add(1);
        ia_track(*ia, srq);
        publish(srq);
        *srq_out = srq;
        // dat_srq_create(3DAT): a low watermark above DAT_SRQ_LW_DEFAULT
        // fires at once, the SRQ has no buffers yet.
        bool fire;
        {
            std::lock_guard<Lock> lock(srq->mu);
            fire = low_watermark_crossed_locked(*srq);
        }
        if (fire)
            post_low_watermark(*srq);
        return DAT_SUCCESS;
    });
}

DAT_RETURN srq_free(DAT_SRQ_HANDLE srq_handle) {
    return guarded("dat_srq_free", [&]() -> DAT_RETURN {
        Srq *srq;
        if (DAT_RETURN r = handle_cast(srq_handle, srq))
            return r;
        if (srq->users.load() != 0)
            return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_IN_USE);
        srq_release(*srq);
        return DAT_SUCCESS;
    });
}

DAT_RETURN srq_post_recv(DAT_SRQ_HANDLE srq_handle, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie) {
    return guarded("dat_srq_post_recv", [&]() -> DAT_RETURN {
        Srq *srq;
        if (DAT_RETURN r = handle_cast(srq_handle, srq))
            return r;
        if (n < 0 || n > srq->max_recv_iov)
            return invalid_arg(2);
        if (n > 0 && !iov)
            return invalid_arg(3);
        Segment segs[kMaxIov];
        int nsegs = 0;
        std::uint64_t total = 0;
        if (DAT_RETURN r =
                resolve_segments(*srq->ia, srq->pz, iov, n, DAT_MEM_PRIV_LOCAL_WRITE_FLAG, segs, nsegs, total))
            return r;
        Op *op;
        {
            std::lock_guard<Lock> lock(srq->mu);
            op = take_locked(*srq);
        }
        if (!op) {
            // Records come back when their completions are read: a consumer
            // that does not poll its recv EVDs still gets them.
            pull_completions(*srq, true);
            std::lock_guard<Lock> lock(srq->mu);
            op = take_locked(*srq);
        }
        if (!op)
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
        op->suppress = false;
        op->cookie = cookie;
        op->length = static_cast<std::uint32_t>(total);
        op->ep = nullptr;
        op->state.store(Op::kPosted, std::memory_order_release);
        DAT_RETURN r = srq->ia->transport->srq_post(*srq, *op, segs, nsegs);
        if (r != DAT_SUCCESS) {
            std::lock_guard<Lock> lock(srq->mu);
            give_back_locked(*srq, *op);
        }
        post_pending_low_watermark(*srq);
        return r;
    });
}

DAT_RETURN srq_query(DAT_SRQ_HANDLE srq_handle, DAT_SRQ_PARAM_MASK mask, DAT_SRQ_PARAM *param) {
    return guarded("dat_srq_query", [&]() -> DAT_RETURN {
        Srq *srq;
        if (DAT_RETURN r = handle_cast(srq_handle, srq))
            return r;
        if (!param)
            return invalid_arg(3);
        if (mask & ~DAT_SRQ_FIELD_ALL)
            return invalid_arg(2);
        post_pending_low_watermark(*srq);
        DAT_COUNT waiting = 0;
        const bool counts = mask & (DAT_SRQ_FIELD_AVAILABLE_DTO_COUNT | DAT_SRQ_FIELD_OUTSTANDING_DTO_COUNT);
        if (counts) {
            // Receives that completed are no longer available: take their
            // completions from the transport first.
            pull_completions(*srq, false);
            waiting = unreaped(*srq);
        }
        std::lock_guard<Lock> lock(srq->mu);
        if (mask & DAT_SRQ_FIELD_IA_HANDLE)
            ia_handle_for_consumer(srq->ia, &param->ia_handle);
        if (mask & DAT_SRQ_FIELD_SRQ_STATE)
            param->srq_state = DAT_SRQ_STATE_OPERATIONAL;
        if (mask & DAT_SRQ_FIELD_PZ_HANDLE)
            param->pz_handle = srq->pz;
        if (mask & DAT_SRQ_FIELD_MAX_RECV_DTO)
            param->max_recv_dtos = srq->max_recv_dtos;
        if (mask & DAT_SRQ_FIELD_MAX_RECV_IOV)
            param->max_recv_iov = srq->max_recv_iov;
        if (mask & DAT_SRQ_FIELD_LOW_WATERMARK)
            param->low_watermark = srq->low_watermark;
        // Available: posted and not completed. A buffer an EP is filling
        // right now still counts (no transport reports that moment).
        if (mask & DAT_SRQ_FIELD_AVAILABLE_DTO_COUNT)
            param->available_dto_count = srq->posted;
        if (mask & DAT_SRQ_FIELD_OUTSTANDING_DTO_COUNT)
            param->outstanding_dto_count = srq->posted + waiting;
        return DAT_SUCCESS;
    });
}

DAT_RETURN srq_resize(DAT_SRQ_HANDLE srq_handle, DAT_COUNT max_recv_dtos) {
    return guarded("dat_srq_resize", [&]() -> DAT_RETURN {
        Srq *srq;
        if (DAT_RETURN r = handle_cast(srq_handle, srq))
            return r;
        if (max_recv_dtos <= 0 || max_recv_dtos > srq->ia->caps.max_srq_recvs)
            return invalid_arg(2);
        post_pending_low_watermark(*srq);
        const DAT_COUNT waiting = unreaped(*srq);
        std::lock_guard<Lock> lock(srq->mu);
        // dat_srq_resize(3DAT): never below what is outstanding (queued,
        // at EPs, or completed and not reaped), nor below the low watermark.
        if (max_recv_dtos < srq->posted + waiting || max_recv_dtos < srq->low_watermark)
            return DAT_ERROR(DAT_INVALID_STATE, 0);
        if (static_cast<std::size_t>(max_recv_dtos) > srq->ops.size())
            add_records(*srq, static_cast<std::size_t>(max_recv_dtos) - srq->ops.size());
        srq->max_recv_dtos = max_recv_dtos;
        return DAT_SUCCESS;
    });
}

DAT_RETURN srq_set_lw(DAT_SRQ_HANDLE srq_handle, DAT_COUNT low_watermark) {
    return guarded("dat_srq_set_lw", [&]() -> DAT_RETURN {
        Srq *srq;
        if (DAT_RETURN r = handle_cast(srq_handle, srq))
            return r;
        post_pending_low_watermark(*srq);
        bool fire;
        {
            std::lock_guard<Lock> lock(srq->mu);
            if (low_watermark < 0 || low_watermark > srq->max_recv_dtos)
                return invalid_arg(2);
            srq->low_watermark = low_watermark;
            srq->lw_armed = true;
            fire = low_watermark_crossed_locked(*srq);
        }
        if (fire)
            post_low_watermark(*srq);
        return DAT_SUCCESS;
    });
}

DAT_RETURN ep_create_with_srq(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz_handle, DAT_EVD_HANDLE recv_evd_handle,
                              DAT_EVD_HANDLE request_evd_handle, DAT_EVD_HANDLE connect_evd_handle,
                              DAT_SRQ_HANDLE srq_handle, const DAT_EP_ATTR *attr, DAT_EP_HANDLE *ep_out) {
    return guarded("dat_ep_create_with_srq", [&]() -> DAT_RETURN {
        Ia *ia;
        if (DAT_RETURN r = handle_cast(ia_handle, ia))
            return r;
        Srq *srq;
        if (DAT_RETURN r = handle_cast_in(ia, srq_handle, srq))
            return r;
        if (!attr)
            return invalid_arg(7); // "Cannot be NULL"
        if (recv_evd_handle == DAT_HANDLE_NULL) {
            // The SRQ's buffers an EP takes complete only on its recv EVD:
            // without one they would leave the SRQ unreported.
            DAT2_LOG(log::kGeneric, "dat_ep_create_with_srq: an EP that uses an SRQ needs a recv EVD\n");
            return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
        }
        return ep_create_common("dat_ep_create_with_srq", ia_handle, pz_handle, recv_evd_handle, request_evd_handle,
                                connect_evd_handle, srq, attr, 7, ep_out);
    });
}

DAT_RETURN ep_recv_query(DAT_EP_HANDLE ep_handle, DAT_COUNT *nbufs_allocated, DAT_COUNT *bufs_alloc_span) {
    return guarded("dat_ep_recv_query", [&]() -> DAT_RETURN {
        Ep *ep;
        if (DAT_RETURN r = handle_cast(ep_handle, ep))
            return r;
        DAT_COUNT allocated = DAT_VALUE_UNKNOWN;
        // An EP with an SRQ: the transports report an SRQ buffer only once
        // its message completed, never the moment the EP took it.
        if (!ep->srq) {
            // dat_ep_recv_query(3DAT): without an SRQ a buffer is allocated
            // to the EP when posted, until its completion is generated.
            if (ep->recv_evd) {
                std::lock_guard<Lock> lock(ep->recv_evd->mu);
                evd_fill_locked(*ep->recv_evd);
            }
            allocated = 0;
            std::lock_guard<Lock> lock(ep->ops_mu);
            for (const Op &op : ep->ops)
                allocated += op.is_recv && op.state.load(std::memory_order_acquire) == Op::kPosted;
        }
        // Receives complete in order: the span is the number allocated.
        if (nbufs_allocated)
            *nbufs_allocated = allocated;
        if (bufs_alloc_span)
            *bufs_alloc_span = allocated;
        return DAT_SUCCESS;
    });
}

DAT_RETURN ep_set_watermark(DAT_EP_HANDLE ep_handle, DAT_COUNT soft_high, DAT_COUNT hard_high) {
    return guarded("dat_ep_set_watermark", [&]() -> DAT_RETURN {
        Ep *ep;
        if (DAT_RETURN r = handle_cast(ep_handle, ep))
            return r;
        if (soft_high < 0 && soft_high != DAT_WATERMARK_INFINITE)
            return invalid_arg(2);
        if (hard_high < 0 && hard_high != DAT_WATERMARK_INFINITE)
            return invalid_arg(3);
        if (ep->srq && (soft_high != DAT_WATERMARK_INFINITE || hard_high != DAT_WATERMARK_INFINITE)) {
            // The buffers an EP holds of its SRQ are those it took and has not
            // completed; no transport reports the taking, so no count could
            // exceed a watermark when it happens.
            DAT2_LOG(log::kGeneric,
                     "dat_ep_set_watermark: EP %p uses an SRQ; the SRQ buffers it holds are not "
                     "observable, high watermarks cannot be armed\n",
                     (void *)ep);
            return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
        }
        ep->soft_high_watermark.store(soft_high);
        ep->hard_high_watermark.store(hard_high);
        // dat_ep_set_watermark(3DAT): already exceeded fires now.
        if (ep_watermarks_armed(*ep))
            ep_check_watermarks(*ep, false);
        return DAT_SUCCESS;
    });
}

} // namespace slot
} // namespace dat2::kit
