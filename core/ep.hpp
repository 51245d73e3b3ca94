// SPDX-License-Identifier: BSD-3-Clause
// Endpoint internals shared by ep.cpp and cm.cpp.
#pragma once

#include "kit.hpp"

namespace dat2::kit {

// Reports every posted DTO of the EP as flushed, in posting order, on its
// EVDs. Called once the transport guarantees nothing more completes.
void ep_flush_outstanding(Ep &ep);
// Moves every completion queued for the EP's EVDs into their FIFOs.
void ep_drain_completions(Ep &ep);
// Returns a DTO record to its EP's free list (ops_mu held for the _locked one).
void op_recycle(Op &op);
void op_recycle_locked(Op &op);
void ep_post_connection_event(Ep &ep, DAT_EVENT_NUMBER number, const void *pdata, std::size_t len);

} // namespace dat2::kit
