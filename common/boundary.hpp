// SPDX-License-Identifier: BSD-3-Clause
// The C boundary. Every function the project exports (libdat2's DAT calls,
// the kit's DAT_PROVIDER slots) runs its body inside guarded(): no C++
// exception crosses into C; std::bad_alloc becomes DAT_INSUFFICIENT_RESOURCES,
// anything else DAT_INTERNAL_ERROR, each with the error class bit set.
#pragma once

#include "dat2_internal.h"
#include "log.hpp"

#include <exception>
#include <new>

namespace dat2 {

// Inline always: it wraps every call of the C ABI, the post and poll paths
// included, and a frame of its own there costs as much as a call's checks.
template <class F> __attribute__((always_inline)) inline DAT_RETURN guarded(const char *call, F &&body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc &) {
        DAT2_ERR("%s: out of memory\n", call);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    } catch (const std::exception &e) {
        DAT2_ERR("%s: internal error: %s\n", call, e.what());
        return DAT_ERROR(DAT_INTERNAL_ERROR, 0);
    } catch (...) {
        DAT2_ERR("%s: internal error\n", call);
        return DAT_ERROR(DAT_INTERNAL_ERROR, 0);
    }
}

// "Nothing yet" results carry no error class bit: programs written for OFED
// test them both ways, `ret == DAT_QUEUE_EMPTY` (dtest's polling loop) and
// DAT_GET_TYPE(ret) == DAT_QUEUE_EMPTY; only the bare code satisfies both.
inline constexpr DAT_RETURN kQueueEmpty = DAT_QUEUE_EMPTY;
inline constexpr DAT_RETURN kTimeoutExpired = DAT_TIMEOUT_EXPIRED;

// DAT_INVALID_PARAMETER naming the argument at `position` (1-based).
inline DAT_RETURN invalid_arg(int position) {
    return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1 + (position - 1));
}

} // namespace dat2
