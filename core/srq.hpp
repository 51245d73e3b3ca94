// SPDX-License-Identifier: BSD-3-Clause
// Shared receive queues, and the receive-side accounting of Endpoints that
// goes with them (dat_ep_recv_query, dat_ep_set_watermark): core/srq.cpp.
//
// An SRQ holds receive records (Op with op.srq set) that the transport
// queues on its shared receive context; whichever EP of the SRQ takes one
// completes it on its own recv EVD (the transport names the EP in op.ep).
// The kit counts the records posted and not yet completed; it cannot see
// the moment an EP takes one (the transports report receives only once
// they complete), so what it knows about an SRQ is: buffers posted, and
// completions generated (in the EVDs) or not yet reaped.
#pragma once

#include "kit.hpp"

#include <deque>
#include <mutex>
#include <vector>

namespace dat2::kit {

struct Srq : ObjectHeader {
    Pz *pz = nullptr;
    DAT_COUNT max_recv_iov = 1;
    std::atomic<int> users{0}; // EPs created with it
    void *tp = nullptr;        // the transport's shared receive context
    // The low watermark was crossed where its event could not be posted
    // (under the lock of an EVD that is also the async EVD): the next call
    // on the SRQ posts it.
    std::atomic<bool> lw_pending{false};

    Lock mu; // everything below
    DAT_COUNT max_recv_dtos = 0;
    DAT_COUNT low_watermark = DAT_SRQ_LW_DEFAULT;
    bool lw_armed = false;
    // Receive records. A transport holds &op while one is posted, so they
    // never move: dat_srq_resize adds records, a shrink only lowers the limit.
    std::deque<Op> ops;
    Op *free_ops = nullptr;
    DAT_COUNT posted = 0; // records with the transport: queued, or taken by an EP and not completed
    std::vector<Ep *> eps;
    std::uint64_t next_seq = 0;
};

template <> struct HandleTraits<Srq> {
    static constexpr DAT_HANDLE_TYPE kType = DAT_HANDLE_TYPE_SRQ;
    static constexpr DAT_RETURN kSubtype = DAT_INVALID_HANDLE_SRQ;
};

// op_recycle() of an SRQ record: back on the SRQ's free list (its
// completion was consumed, or it was dropped); checks the low watermark.
void srq_op_done(Op &op);
// dat_ep_create_with_srq / the EP's free.
void srq_attach(Srq &srq, Ep &ep);
void srq_detach(Srq &srq, Ep &ep);
// An EP of the SRQ left its connection (its outstanding DTOs were just
// flushed): every SRQ buffer it took has completed. Reported on the async
// EVD as OFED's providers do (IB's "last WQE reached").
void srq_ep_flushed(Ep &ep);
// Frees the SRQ, its queued receives without completions (no EP uses it
// any more): dat_srq_free, ia_close.
void srq_release(Srq &srq);

// dat_ep_set_watermark: whether a watermark is armed on `ep` (post path),
// and the check after the count of receive buffers at the EP may have
// exceeded one, or the EP was just connected (`established`).
inline bool ep_watermarks_armed(const Ep &ep) {
    return ep.soft_high_watermark.load(std::memory_order_relaxed) != DAT_WATERMARK_INFINITE ||
           ep.hard_high_watermark.load(std::memory_order_relaxed) != DAT_WATERMARK_INFINITE;
}
void ep_check_watermarks(Ep &ep, bool established);

} // namespace dat2::kit
