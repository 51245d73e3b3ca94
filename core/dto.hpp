// SPDX-License-Identifier: BSD-3-Clause
// DTO records and the order of their completions (core/dto.cpp), for the
// kit's other files.
#pragma once

#include "internal.hpp"

namespace dat2::kit {

// (Re)builds an EP's record pools; no DTO may be outstanding.
void ep_build_records(Ep &ep);
// Returns a DTO record to its EP's free list (ops_mu held for the _locked one).
void op_recycle(Op &op);
void op_recycle_locked(Op &op);
// A free record of `ep` for a receive or a request (counted as posted; its
// rseq taken for a request); `evd`, where its completion goes, is drained
// once when none is free. nullptr when the queue is full.
Op *ep_take_op(Ep &ep, Evd &evd, bool recv);
// Takes back every record: nothing of the EP can complete any more.
void ep_reclaim_records(Ep &ep);

// A request of `op.ep` is done (its state no longer kPosted): reported now,
// with every held one after it, when all earlier requests are, else held
// until they are (Ep::req_held). `silent`: no event (a post that failed);
// `flushing`: held successes released by it are reported flushed. Holds
// evd.mu (the _locked form) or takes it and wakes the EVD's waiters (evd.cpp).
void request_done_locked(Evd &evd, Op &op, DAT_DTO_COMPLETION_STATUS status, std::uint32_t length, bool silent,
                         bool flushing);
void evd_request_done(Evd &evd, Op &op, DAT_DTO_COMPLETION_STATUS status, bool silent, bool flushing);
// Capabilities::recvs_out_of_order: a receive the transport refused (kHeld,
// given back when its turn comes) or will never fill (kPosted, flushed with
// the connection) lets the receives after it be reported. Takes evd.mu.
void recv_turn_passes(Evd &evd, Op &op);
// Turns completions read from the transport into events; evd.mu held.
void dto_consume_locked(Evd &evd, const Completion *c, int n);
// Where the next completion event is built, in place (an event is 120
// bytes: built elsewhere, it would be copied once more): the consumer's
// buffer while dat_evd_dequeue reads with nothing queued (Evd::direct),
// else the FIFO's next slot, or past the FIFO's room or behind events
// already spilled (order holds) a new spill entry (evd_spill_slot_locked,
// evd.cpp). evd.mu held. Inline: every reported completion comes here.
DAT_EVENT &evd_spill_slot_locked(Evd &evd);
inline DAT_EVENT &evd_completion_slot_locked(Evd &evd) {
    if (DAT_EVENT *e = evd.direct) {
        evd.direct = nullptr; // the consumer's buffer: built there, never queued
        return *e;
    }
    if (__builtin_expect(!evd.spill.empty() || evd.count == static_cast<std::size_t>(evd.qlen), 0))
        return evd_spill_slot_locked(evd);
    DAT_EVENT &e = evd.ring[(evd.head + evd.count) & (evd.ring.size() - 1)];
    ++evd.count;
    return e;
}

// Reports every posted DTO of the EP as flushed, in posting order, on its
// EVDs. Called once the transport guarantees nothing more completes.
// remote_refused: the oldest outstanding RDMA or atomic operation reports
// DAT_DTO_ERR_REMOTE_ACCESS (ConnectionReport::refused).
void ep_flush_outstanding(Ep &ep, bool remote_refused = false);
// Moves every completion queued for the EP's EVDs into their FIFOs; none
// when the EP has no DTO outstanding (ep_may_have_completions).
void ep_drain_completions(Ep &ep);
// Reads the EP's completions until the transport no longer writes into
// the consumer's memory for it (Transport::ops_writing_memory), at most
// kWritersGrace; a log line names what is left after that.
void ep_await_writers(Ep &ep);
// Whether a completion of one of the EP's DTOs may be queued at the
// transport or still come: a DTO is outstanding, or the EP has an SRQ.
bool ep_may_have_completions(Ep &ep);

// An extended DTO (core/ext.cpp) riding on ep_post: checked as the
// PostKind given (kRdmaWrite or kRdmaRead), posted with Transport::post_ext.
struct ExtPost {
    ExtKind kind;
    std::uint32_t immed;
    std::uint64_t operand[2];
};
// The DAT_DTOS an extended DTO reports (DAT_IB_DTO_*).
DAT_DTOS ext_operation(ExtKind kind);
// The DTO post path of dat_ep_post_send/recv/rdma_read/rdma_write (checks,
// LMR triplets, records), for the calls of other files that end in a DTO.
DAT_RETURN ep_post(DAT_EP_HANDLE ep, PostKind kind, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                   const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags, const ExtPost *ext = nullptr);
// DAT_COMPLETION_BARRIER_FENCE_FLAG: returns once the EP's earlier RDMA
// Reads have completed (or the connection is gone).
DAT_RETURN ep_fence_reads(Ep &ep);

} // namespace dat2::kit
