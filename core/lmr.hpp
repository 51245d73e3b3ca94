// SPDX-License-Identifier: BSD-3-Clause
// LMR contexts: what DTOs name local memory by.
#pragma once

#include "internal.hpp"

namespace dat2::kit {

// Everything below is inline: every post resolves each of its segments
// here, and the calls cost as much as the checks they make.

// [va, va + len) lies inside the LMR (no overflow on hostile values).
inline bool lmr_covers(const Lmr &lmr, DAT_VADDR va, DAT_VLEN len) {
    return va >= lmr.address && len <= lmr.length && va - lmr.address <= lmr.length - len;
}

// The live LMR a context names, or nullptr. Lock-free (post path).
inline Lmr *lmr_by_context(Ia &ia, DAT_LMR_CONTEXT context) {
    std::uint32_t idx = context & 0xffff;
    if (idx == 0 || idx >= static_cast<std::uint32_t>(kMaxLmrs))
        return nullptr;
    Lmr *lmr = ia.lmr_table[idx].load(std::memory_order_acquire);
    if (!lmr || lmr->lmr_context != context)
        return nullptr;
    return lmr;
}

// Why a triplet was refused (out of line: the refusals are rare).
DAT_RETURN segment_refused(const Lmr *lmr, Pz *pz, const DAT_LMR_TRIPLET &t, DAT_MEM_PRIV_FLAGS privilege);

// Resolves a local triplet for a DTO on an EP of `pz` that needs `privilege`
// (DAT_MEM_PRIV_LOCAL_READ_FLAG for sources, LOCAL_WRITE for sinks). Errors
// per dat_ep_post_send(3DAT): unknown context or missing privilege ->
// DAT_PRIVILEGES_VIOLATION, outside the LMR -> DAT_INVALID_PARAMETER,
// another PZ -> DAT_PROTECTION_VIOLATION.
inline DAT_RETURN resolve_segment(Ia &ia, Pz *pz, const DAT_LMR_TRIPLET &t, DAT_MEM_PRIV_FLAGS privilege,
                                  Segment &out) {
    const Lmr *lmr = lmr_by_context(ia, t.lmr_context);
    // Local read is always allowed (as on every RDMA device: verbs has no
    // flag for it, and DAT programs written for OFED rely on that).
    if (__builtin_expect(!lmr || (privilege != DAT_MEM_PRIV_LOCAL_READ_FLAG && !(lmr->privileges & privilege)) ||
                             (pz && lmr->pz != pz) || !lmr_covers(*lmr, t.virtual_address, t.segment_length),
                         0))
        return segment_refused(lmr, pz, t, privilege);
    out.addr = reinterpret_cast<void *>(static_cast<std::uintptr_t>(t.virtual_address));
    out.length = t.segment_length;
    out.desc = lmr->desc;
    return DAT_SUCCESS;
}

// Every triplet of `iov` (zero-length ones skipped: DAT ignores their other
// members) into `segs`, their count and total length.
inline DAT_RETURN resolve_segments(Ia &ia, Pz *pz, const DAT_LMR_TRIPLET *iov, DAT_COUNT n,
                                   DAT_MEM_PRIV_FLAGS privilege, Segment *segs, int &nsegs, std::uint64_t &total) {
    nsegs = 0;
    total = 0;
    for (DAT_COUNT i = 0; i < n; ++i) {
        if (iov[i].segment_length == 0)
            continue;
        if (DAT_RETURN r = resolve_segment(ia, pz, iov[i], privilege, segs[nsegs]))
            return r;
        total += segs[nsegs].length;
        ++nsegs;
    }
    return DAT_SUCCESS;
}

} // namespace dat2::kit
