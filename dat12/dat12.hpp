// SPDX-License-Identifier: BSD-3-Clause
// libdat.so.1: the DAT 1.2 consumer API over libdat2's registry and the same
// DAT 2.0 providers (docs/dat12.md).
//
// Every handle a DAT 1.2 program holds is an Obj: a small wrapper in the
// type-stable arena (core/arena.hpp) whose first word is this library's DAT
// 1.2 provider table, so that programs built against headers whose dat_*
// calls are macros through DAT_HANDLE_TO_PROVIDER() reach us too. The
// wrapper holds the DAT 2.0 handle of the object, which the provider's
// DAT 2.0 table is called with; the DAT 2.0 object's consumer context holds
// the wrapper, so a DAT 2.0 handle in an event or a query result maps back
// to the 1.2 handle in O(1). The 1.2 consumer's own context lives in the
// wrapper.
#pragma once

#include "v2.hpp"

#include <dat/udat.h>
#include <dat/dat_registry.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <new>

namespace dat12 {

inline constexpr std::uint32_t kLiveMagic = 0xDA712A11;
inline constexpr std::uint32_t kDeadMagic = 0xDEAD0012;

struct Obj {
    const DAT_PROVIDER *table; // DAT 1.2: the first word of every handle
    std::atomic<std::uint32_t> magic;
    DAT_HANDLE_TYPE type;
    v2::DAT_HANDLE h20;            // the DAT 2.0 object; for an IA the provider's IA
    const v2::DAT_PROVIDER *p20;   // its provider's table
    DAT_CONTEXT context;           // the 1.2 consumer's
    Obj *ia;                       // owning IA; an IA's is itself
    Obj *prev, *next;              // the IA's objects (objects.cpp), freed with it
    v2::DAT_IA_HANDLE registry_ia; // IA: libdat2's handle, for dat_ia_close
    Obj *async_evd;                // IA: the 1.2 handle of its async EVD
    DAT_OS_WAIT_PROXY_AGENT agent; // CNO: the consumer's agent; the provider calls ours
};

extern const DAT_PROVIDER kTable;

// A live Obj of type t (any type for as_any), or nullptr: NULL, foreign,
// freed and wrong-type handles never reach a provider.
Obj *as(DAT_HANDLE h, DAT_HANDLE_TYPE t) noexcept;
Obj *as_any(DAT_HANDLE h) noexcept;

// The DAT 2.0 handle to pass for a 1.2 handle argument: NULL stays NULL; a
// handle that is not a live Obj of type t becomes a handle no provider
// owns, so that the provider answers with its own DAT_INVALID_HANDLE (and
// its order of checks).
v2::DAT_HANDLE to20(DAT_HANDLE h, DAT_HANDLE_TYPE t) noexcept;

// Wraps a DAT 2.0 object this library just created for `ia` (the IA's
// provider made it). nullptr when out of memory: the caller then frees the
// 2.0 object. reserve() + publish() do the same in two steps, for a handle
// needed before the provider call (a CNO's agent); discard() drops a
// reserved one.
Obj *wrap(DAT_HANDLE_TYPE t, Obj *ia, v2::DAT_HANDLE h20);
Obj *reserve(DAT_HANDLE_TYPE t, Obj *ia);
bool publish(Obj *o, v2::DAT_HANDLE h20);
void discard(Obj *o);
// The 1.2 handle of a DAT 2.0 object of `ia` seen in an event or a query,
// made on first sight for objects the provider created (CRs, EPs of
// provider-created PSPs). NULL for NULL.
DAT_HANDLE to12(Obj *ia, v2::DAT_HANDLE h20, DAT_HANDLE_TYPE t);
void unwrap(Obj *o);
// Frees the wrappers of everything an IA owned (after the provider closed it).
void unwrap_all(Obj *ia);
// Publishes an IA wrapper made by wrap() (IAs own no list).
Obj *new_ia(v2::DAT_IA_HANDLE registry_ia, v2::DAT_IA_HANDLE provider_ia);

// Return codes. ret12() maps a DAT 2.0 code to DAT 1.2; `args` renumbers a
// DAT_INVALID_ARGn subtype where the 1.2 call's arguments differ (args[n-1]
// is the 1.2 position of 2.0 argument n, 0 for one 1.2 does not have).
DAT_RETURN ret12(v2::DAT_RETURN r) noexcept;
DAT_RETURN ret12(v2::DAT_RETURN r, std::initializer_list<int> args) noexcept;
v2::DAT_RETURN ret20(DAT_RETURN r) noexcept;

inline DAT_RETURN error(DAT_RETURN type, int subtype) noexcept {
    return DAT_CLASS_ERROR | type | static_cast<DAT_RETURN>(subtype);
}
inline DAT_RETURN invalid_arg(int position) noexcept {
    return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1 + position - 1);
}
inline DAT_RETURN invalid_handle(int subtype) noexcept { return error(DAT_INVALID_HANDLE, subtype); }

// No C++ exception crosses the C boundary. (The kit's guarded() speaks
// DAT 2.0's types; this is its twin for DAT 1.2's.)
void log_exception(const char *call, const std::exception *e) noexcept;
template <class F> DAT_RETURN guarded(const char *call, F &&body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc &) {
        log_exception(call, nullptr);
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    } catch (const std::exception &e) {
        log_exception(call, &e);
        return error(DAT_INTERNAL_ERROR, 0);
    } catch (...) {
        log_exception(call, nullptr);
        return error(DAT_INTERNAL_ERROR, 0);
    }
}

// Structure conversions (convert.cpp). *12 functions write a 1.2 structure
// from the 2.0 one; *20 the other way.
bool event12(Obj *evd, const v2::DAT_EVENT &in, DAT_EVENT *out);
bool event20(const DAT_EVENT &in, v2::DAT_EVENT *out);
void ia_attr12(const v2::DAT_IA_ATTR &in, DAT_IA_ATTR *out);
void provider_attr12(const v2::DAT_PROVIDER_ATTR &in, DAT_PROVIDER_ATTR *out);
void ep_attr20(const DAT_EP_ATTR &in, v2::DAT_EP_ATTR *out);
void ep_attr12(const v2::DAT_EP_ATTR &in, DAT_EP_ATTR *out);
void ep_param12(Obj *ep, const v2::DAT_EP_PARAM &in, DAT_EP_PARAM *out);
v2::DAT_EP_PARAM_MASK ep_mask20(DAT_EP_PARAM_MASK mask);
// false when a segment is longer than DAT 2.0 lengths can say (4 GiB - 1)
bool lmr_triplet20(const DAT_LMR_TRIPLET &in, v2::DAT_LMR_TRIPLET *out);
void lmr_triplet12(const v2::DAT_LMR_TRIPLET &in, DAT_LMR_TRIPLET *out);
bool rmr_triplet20(const DAT_RMR_TRIPLET &in, v2::DAT_RMR_TRIPLET *out);
DAT_EP_STATE ep_state12(v2::DAT_EP_STATE s);
DAT_SRQ_STATE srq_state12(v2::DAT_SRQ_STATE s);

} // namespace dat12
