// SPDX-License-Identifier: BSD-3-Clause
// DAT handles are pointers to objects whose first word is the DAT_PROVIDER
// pointer. Every kit object starts with this standard-layout header, lives
// in the type-stable Arena, and is reached from a handle only through
// handle_cast(), which turns NULL, foreign, freed and wrong-type handles
// into DAT_INVALID_HANDLE with the subtype the caller names.
#pragma once

#include "arena.hpp"
#include "dat2_internal.h"

#include <dat2/dat_registry.h>
#include <dat2/udat_redirection.h>

#include <atomic>
#include <cstdint>
#include <new>
#include <utility>

namespace dat2::kit {

struct Ia;

inline constexpr std::uint32_t kLiveMagic = 0xDA7A0B1E;
inline constexpr std::uint32_t kDeadMagic = 0xDEADDA7A;

struct ObjectHeader {
    const DAT_PROVIDER *provider; // DAT: the first word of every handle
    std::atomic<std::uint32_t> magic;
    DAT_HANDLE_TYPE type;
    DAT_CONTEXT context;
    Ia *ia; // owning IA; the IA itself for an IA
    // Links among the IA's children of the same type (ObjectList, kit.hpp).
    ObjectHeader *sibling_prev;
    ObjectHeader *sibling_next;
    bool listed;
};
static_assert(std::is_standard_layout_v<ObjectHeader>);
static_assert(offsetof(ObjectHeader, provider) == 0);

// Subtype used when a handle of family T is invalid.
template <class T> struct HandleTraits;

// Allocates a T (derived from ObjectHeader) in the arena. nullptr when out of
// memory; the object is not visible as a live handle until publish().
template <class T, class... Args> T *make_object(const DAT_PROVIDER *provider, Ia *ia, Args &&...args) {
    static_assert(sizeof(T) <= Arena::kMaxSlot, "object too large for the arena");
    void *mem = Arena::instance().allocate(sizeof(T));
    if (!mem)
        return nullptr;
    T *obj;
    try {
        obj = new (mem) T(std::forward<Args>(args)...);
    } catch (...) {
        Arena::instance().deallocate(mem);
        throw;
    }
    obj->provider = provider;
    obj->type = HandleTraits<T>::kType;
    obj->ia = ia;
    obj->context.as_64 = 0;
    obj->sibling_prev = obj->sibling_next = nullptr;
    obj->listed = false;
    return obj;
}

template <class T> void publish(T *obj) { obj->magic.store(kLiveMagic, std::memory_order_release); }

// Marks the handle dead, destroys the object and returns its slot. The
// header words stay readable (arena slots are never unmapped), so a stale
// handle later reads kDeadMagic.
template <class T> void destroy_object(T *obj) {
    if (!obj)
        return;
    obj->magic.store(kDeadMagic, std::memory_order_release);
    const DAT_PROVIDER *provider = obj->provider;
    obj->~T();
    auto *hdr = reinterpret_cast<ObjectHeader *>(static_cast<void *>(obj));
    // Keep dispatch through a stale handle working; written only if the
    // destructor changed it, since the registry may read it meanwhile.
    if (hdr->provider != provider)
        hdr->provider = provider;
    // An atomic store, not a constructor: a stale handle's check may load
    // it from another thread at this moment.
    static_assert(sizeof(hdr->magic) == sizeof(std::uint32_t));
    __atomic_store_n(reinterpret_cast<std::uint32_t *>(static_cast<void *>(&hdr->magic)), kDeadMagic, __ATOMIC_RELEASE);
    Arena::instance().deallocate(obj);
}

// The one checked conversion from a handle. `subtype` overrides the family's
// default subtype (EVD handles have one per role).
// Inline always: it is on every call's path, and a call to it costs as
// much as the check.
template <class T>
__attribute__((always_inline)) inline DAT_RETURN handle_cast(DAT_HANDLE h, T *&out,
                                                             DAT_RETURN subtype = HandleTraits<T>::kSubtype) {
    const DAT_RETURN bad = DAT_ERROR(DAT_INVALID_HANDLE, subtype);
    if (h == DAT_HANDLE_NULL || !Arena::instance().owns(h))
        return bad;
    auto *hdr = static_cast<ObjectHeader *>(h);
    if (hdr->magic.load(std::memory_order_acquire) != kLiveMagic || hdr->type != HandleTraits<T>::kType)
        return bad;
    out = static_cast<T *>(hdr);
    return DAT_SUCCESS;
}

// handle_cast() for a handle that must belong to `ia`: an object of another
// IA (another domain underneath) is an invalid handle here.
template <class T>
DAT_RETURN handle_cast_in(const Ia *ia, DAT_HANDLE h, T *&out, DAT_RETURN subtype = HandleTraits<T>::kSubtype) {
    if (DAT_RETURN r = handle_cast(h, out, subtype))
        return r;
    if (out->ia != ia)
        return DAT_ERROR(DAT_INVALID_HANDLE, subtype);
    return DAT_SUCCESS;
}

// Any live kit object, whatever its type.
inline ObjectHeader *any_object(DAT_HANDLE h) {
    if (h == DAT_HANDLE_NULL || !Arena::instance().owns(h))
        return nullptr;
    auto *hdr = static_cast<ObjectHeader *>(h);
    return hdr->magic.load(std::memory_order_acquire) == kLiveMagic ? hdr : nullptr;
}

} // namespace dat2::kit
