// SPDX-License-Identifier: BSD-3-Clause
// The completion path, inline: completions read from the transport turned
// into events in DAT's order and their records recycled (core/dto.cpp for
// the rules). In a header so that dat_evd_dequeue (core/evd.cpp) builds a
// completion's event without a call of its own: the call cost as much as
// the work of a completion.
#pragma once

#include "dto.hpp"
#include "slots.hpp"
#include "srq.hpp"

#include <utility>

namespace dat2::kit::detail {

// The bodies of op_recycle_locked and op_recycle, inline on the
// completion path: a completion recycles its record, and the calls cost
// as much as the work.
__attribute__((always_inline)) inline void recycle_locked(Op &op) {
    Ep &ep = *op.ep;
    op.state.store(Op::kFree, std::memory_order_relaxed);
    Op *&head = op.is_recv ? ep.free_recvs : ep.free_requests;
    op.next_free = head;
    head = &op;
    (op.is_recv ? ep.recvs_posted : ep.requests_posted).fetch_sub(1, std::memory_order_relaxed);
    if (!op.is_recv && op.operation == DAT_DTO_RDMA_READ)
        ep.reads_posted.fetch_sub(1, std::memory_order_release);
}

__attribute__((always_inline)) inline void recycle(Op &op) {
    if (op.srq) {
        srq_op_done(op);
        return;
    }
    std::lock_guard<Lock> lock(op.ep->ops_mu);
    recycle_locked(op);
}

// Zeroes an event with 16-byte stores: GCC turns a memset of its 120
// bytes, or a loop of stores, into `rep stos`, whose start-up costs more
// than the stores; an expanded sequence of stores it leaves as it is.
typedef long long EventChunk __attribute__((vector_size(16), aligned(8), may_alias));
constexpr std::size_t kEventChunks = sizeof(DAT_EVENT) / 16;
template <std::size_t... I>
__attribute__((always_inline)) inline void zero_chunks(DAT_EVENT &e, std::index_sequence<I...>) {
    auto *p = reinterpret_cast<unsigned char *>(&e);
    ((*reinterpret_cast<EventChunk *>(p + 16 * I) = EventChunk{}), ...);
    if (sizeof(DAT_EVENT) % 16 != 0) // the tail, overlapping the last chunk
        *reinterpret_cast<EventChunk *>(p + sizeof(DAT_EVENT) - 16) = EventChunk{};
}
__attribute__((always_inline)) inline void zero_event(DAT_EVENT &e) {
    zero_chunks(e, std::make_index_sequence<kEventChunks>{});
}

// fill_dto_event, inline on the completion path (as recycle()).
__attribute__((always_inline)) inline void fill_event(DAT_EVENT &e, const Op &op, DAT_DTO_COMPLETION_STATUS status,
                                                      std::uint32_t length) {
    zero_event(e);
    e.event_number = DAT_DTO_COMPLETION_EVENT;
    auto &d = e.event_data.dto_completion_event_data;
    d.ep_handle = op.ep;
    d.user_cookie = op.cookie;
    d.status = status;
    d.transfered_length = status == DAT_DTO_SUCCESS ? (op.is_recv ? length : op.length) : 0;
    d.operation = op.operation;
    if (op.ext != ExtKind::kNone) {
        if (op.ext == ExtKind::kRmrBind)
            rmr_bind_event(e, op, status);
        else
            ext_event(e, op, nullptr);
    }
}

// Reports a request whose turn it is; its record is recycled unless it
// stays kFlushed until the transport's late completion for it.
__attribute__((always_inline)) inline void report_request_locked(Evd &evd, Op &op, DAT_DTO_COMPLETION_STATUS status,
                                                                 std::uint32_t length, bool silent) {
    if (!silent && !(op.suppress && status == DAT_DTO_SUCCESS)) {
        DAT_EVENT &e = evd_completion_slot_locked(evd);
        fill_event(e, op, status, length);
        e.evd_handle = &evd;
    }
    if (op.state.load(std::memory_order_acquire) != Op::kFlushed)
        recycle(op);
}

// request_done_locked's body, inline on the completion path (as recycle()).
__attribute__((always_inline)) inline void done_locked(Evd &evd, Op &op, DAT_DTO_COMPLETION_STATUS status,
                                                       std::uint32_t length, bool silent, bool flushing) {
    Ep &ep = *op.ep;
    const std::size_t n = ep.req_held.size();
    if (op.rseq != ep.req_report_rseq && n > 0) {
        // An earlier request of the EP is still outstanding: wait for it.
        op.held_status = status;
        op.held_length = length;
        op.held_silent = silent;
        ep.req_held[op.rseq & (n - 1)] = &op;
        return;
    }
    // dat_ep_disconnect(3DAT): "If an in-progress DTO is completed
    // unsuccessfully, all follow on in-progress DTOs in the same direction
    // also must be completed unsuccessfully" -- also when the transport
    // reported them done: libfabric tcp completes a send once the kernel has
    // it, so a send behind a write that then fails may never have arrived.
    if (ep.requests_failed && status == DAT_DTO_SUCCESS && !silent)
        status = DAT_DTO_ERR_FLUSHED;
    report_request_locked(evd, op, status, length, silent);
    ++ep.req_report_rseq;
    bool failed = flushing || status != DAT_DTO_SUCCESS || ep.requests_failed;
    while (n > 0) {
        Op *h = ep.req_held[ep.req_report_rseq & (n - 1)];
        if (!h || h->rseq != ep.req_report_rseq)
            break;
        ep.req_held[ep.req_report_rseq & (n - 1)] = nullptr;
        const DAT_DTO_COMPLETION_STATUS st =
            failed && h->held_status == DAT_DTO_SUCCESS ? DAT_DTO_ERR_FLUSHED : h->held_status;
        failed = failed || st != DAT_DTO_SUCCESS;
        report_request_locked(evd, *h, st, h->held_length, h->held_silent);
        ++ep.req_report_rseq;
    }
    ep.requests_failed = failed;
}

// A request a later completion stands for (Capabilities::requests_in_order): only a
// suppressed send or RDMA write may have been posted without a completion.
inline bool completes_implicitly(const Op &op) {
    return op.suppress && op.ext == ExtKind::kNone &&
           (op.operation == DAT_DTO_SEND || op.operation == DAT_DTO_RDMA_WRITE);
}

// `x`, a request of a transport that completes requests in order, has
// completed: the requests of its EP posted before it (Ep::post_mu made
// that the queue's order) and still posted went out without a completion
// of their own, and succeeded. Reported in order (silently: they were
// suppressed), up to the first that is something else. While nothing
// failed and none of them has a held request behind it, their records go
// back in one take of ops_mu: a consumer that suppresses its sends has one
// of these for nearly every completion it reads.
void report_implied_locked(Evd &evd, const Op &x);

// Reports a receive whose turn it is and recycles its record.
__attribute__((always_inline)) inline void report_recv_locked(Evd &evd, Op &op, const Completion &c) {
    // A suppressed receive's event is still built: the invalidation
    // below happens either way.
    DAT_EVENT unreported;
    DAT_EVENT &e = op.suppress && c.status == DAT_DTO_SUCCESS ? unreported : evd_completion_slot_locked(evd);
    fill_event(e, op, c.status, c.length);
    if (c.immed != Completion::Immed::kNone && c.status == DAT_DTO_SUCCESS)
        ext_event(e, op, &c); // a receive consumed by immediate data
    e.evd_handle = &evd;
    if (c.invalidate && c.status == DAT_DTO_SUCCESS)
        rmr_invalidate(*op.ep, c.rmr_context, e);
    recycle(op);
}

// Capabilities::recvs_out_of_order: a receive completed before an earlier
// one of its EP waits for it (Ep::recv_held); and once the receive whose
// turn it was is reported, those waiting behind it, in order.
void hold_recv_locked(Op &op, const Completion &c);
void release_held_recvs_locked(Evd &evd, Ep &ep);

// dto_consume_locked's body.
__attribute__((always_inline)) inline void consume_locked(Evd &evd, const Completion *c, int n) {
    for (int i = 0; i < n; ++i) {
        Op &op = *c[i].op;
        if (c[i].ep)
            op.ep = c[i].ep; // a receive of an SRQ: the EP that took it
        if (!op.is_recv) {
            // Requests: reported in posting order (request_done_locked).
            std::uint8_t expected = Op::kPosted;
            if (!op.state.compare_exchange_strong(expected, Op::kHeld, std::memory_order_acq_rel)) {
                // Flushed by a disconnect: drop the late one (a flush still
                // waiting for its turn keeps its record until the EP is reset).
                const std::size_t held = op.ep->req_held.size();
                if (!held || op.ep->req_held[op.rseq & (held - 1)] != &op)
                    op_recycle(op);
                continue;
            }
            if (op.rseq != op.ep->req_report_rseq && op.ep->ia->caps.requests_in_order)
                report_implied_locked(evd, op);
            done_locked(evd, op, c[i].status, c[i].length, false, false);
            continue;
        }
        Ep &ep = *op.ep;
        const bool in_order = !ep.recv_held.empty() && !op.srq;
        if (__builtin_expect(in_order && op.rseq != ep.recv_report_rseq, 0)) {
            hold_recv_locked(op, c[i]);
            continue;
        }
        std::uint8_t expected = Op::kPosted;
        if (!op.state.compare_exchange_strong(expected, Op::kFree, std::memory_order_acq_rel)) {
            // Already reported as flushed by a disconnect: drop the late one.
            op_recycle(op);
            continue;
        }
        report_recv_locked(evd, op, c[i]);
        if (in_order && ep.recv_held[++ep.recv_report_rseq & (ep.recv_held.size() - 1)])
            release_held_recvs_locked(evd, ep);
    }
}

} // namespace dat2::kit::detail
