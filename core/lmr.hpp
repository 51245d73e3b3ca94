// SPDX-License-Identifier: BSD-3-Clause
// LMR contexts: what DTOs name local memory by.
#pragma once

#include "internal.hpp"

namespace dat2::kit {

bool lmr_covers(const Lmr &lmr, DAT_VADDR va, DAT_VLEN len);

// The live LMR a context names, or nullptr. Lock-free (post path).
Lmr *lmr_by_context(Ia &ia, DAT_LMR_CONTEXT context);

// Resolves a local triplet for a DTO on an EP of `pz` that needs `privilege`
// (DAT_MEM_PRIV_LOCAL_READ_FLAG for sources, LOCAL_WRITE for sinks). Errors
// per dat_ep_post_send(3DAT): unknown context or missing privilege ->
// DAT_PRIVILEGES_VIOLATION, outside the LMR -> DAT_INVALID_PARAMETER,
// another PZ -> DAT_PROTECTION_VIOLATION.
DAT_RETURN resolve_segment(Ia &ia, Pz *pz, const DAT_LMR_TRIPLET &t, DAT_MEM_PRIV_FLAGS privilege, Segment &out);
// Every triplet of `iov` (zero-length ones skipped: DAT ignores their other
// members) into `segs`, their count and total length.
DAT_RETURN resolve_segments(Ia &ia, Pz *pz, const DAT_LMR_TRIPLET *iov, DAT_COUNT n, DAT_MEM_PRIV_FLAGS privilege,
                            Segment *segs, int &nsegs, std::uint64_t &total);

} // namespace dat2::kit
