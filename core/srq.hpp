// SPDX-License-Identifier: BSD-3-Clause
// Shared receive queues (struct Srq: core/kit.hpp), and the receive-side
// accounting of Endpoints that goes with them (dat_ep_recv_query,
// dat_ep_set_watermark): core/srq.cpp. What the kit knows about an SRQ is:
// buffers posted, and completions generated (in the EVDs) or not yet reaped.
#pragma once

#include "internal.hpp"

namespace dat2::kit {

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
