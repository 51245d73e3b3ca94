// SPDX-License-Identifier: BSD-3-Clause
// DAT 1.2 handles (Obj) and DAT 1.2 <-> 2.0 return codes.
#include "dat12.hpp"

#include "arena.hpp"
#include "log.hpp"

#include <cstring>
#include <mutex>

namespace dat12 {

namespace {

// Guards the IAs' lists of objects and the first-sight wrapping of provider
// objects. Held across a provider's set_consumer_context (a store) only.
std::mutex &objects_mu() {
    static std::mutex *mu = new std::mutex; // never destroyed: atexit closes
    return *mu;
}

dat2::kit::Arena &arena() noexcept { return dat2::kit::Arena::instance(); }

// Never an object of any provider: what to20() passes for a bad handle.
alignas(64) const unsigned char kNoObject[4096] = {};

Obj *allocate(DAT_HANDLE_TYPE t, Obj *ia, v2::DAT_HANDLE h20, const v2::DAT_PROVIDER *p20) {
    void *mem = arena().allocate(sizeof(Obj));
    if (!mem)
        return nullptr;
    auto *o = new (mem) Obj{};
    o->table = &kTable;
    o->type = t;
    o->h20 = h20;
    o->p20 = p20;
    o->ia = ia ? ia : o;
    return o;
}

void link(Obj *o) { // objects_mu held
    Obj *ia = o->ia;
    o->prev = ia;
    o->next = ia->next;
    if (ia->next)
        ia->next->prev = o;
    ia->next = o;
}

void unlink(Obj *o) { // objects_mu held
    if (o->prev)
        o->prev->next = o->next;
    if (o->next)
        o->next->prev = o->prev;
    o->prev = o->next = nullptr;
}

void release(Obj *o) {
    o->magic.store(kDeadMagic, std::memory_order_release);
    arena().deallocate(o); // the slot stays mapped: a stale handle reads kDeadMagic
}

// The 2.0 object's consumer context names its wrapper.
bool attach(Obj *o) {
    v2::DAT_CONTEXT ctx;
    ctx.as_ptr = o;
    return o->p20->set_consumer_context_func(o->h20, ctx) == v2::DAT_SUCCESS;
}

} // namespace

Obj *as(DAT_HANDLE h, DAT_HANDLE_TYPE t) noexcept {
    Obj *o = as_any(h);
    return o && o->type == t ? o : nullptr;
}

Obj *as_any(DAT_HANDLE h) noexcept {
    if (!h || !arena().owns(h))
        return nullptr;
    auto *o = static_cast<Obj *>(h);
    return o->magic.load(std::memory_order_acquire) == kLiveMagic ? o : nullptr;
}

v2::DAT_HANDLE to20(DAT_HANDLE h, DAT_HANDLE_TYPE t) noexcept {
    if (!h)
        return nullptr;
    Obj *o = as(h, t);
    return o ? o->h20 : const_cast<unsigned char *>(kNoObject);
}

Obj *new_ia(v2::DAT_IA_HANDLE registry_ia, v2::DAT_IA_HANDLE provider_ia) {
    auto *p20 = *static_cast<const v2::DAT_PROVIDER *const *>(provider_ia);
    Obj *ia = allocate(DAT_HANDLE_TYPE_IA, nullptr, provider_ia, p20);
    if (!ia)
        return nullptr;
    ia->registry_ia = registry_ia;
    attach(ia);
    ia->magic.store(kLiveMagic, std::memory_order_release);
    return ia;
}

Obj *reserve(DAT_HANDLE_TYPE t, Obj *ia) { return allocate(t, ia, nullptr, ia->p20); }

bool publish(Obj *o, v2::DAT_HANDLE h20) {
    o->h20 = h20;
    std::lock_guard<std::mutex> lock(objects_mu());
    if (!attach(o))
        return false;
    link(o);
    o->magic.store(kLiveMagic, std::memory_order_release);
    return true;
}

void discard(Obj *o) { release(o); }

Obj *wrap(DAT_HANDLE_TYPE t, Obj *ia, v2::DAT_HANDLE h20) {
    Obj *o = reserve(t, ia);
    if (o && !publish(o, h20)) {
        release(o);
        return nullptr;
    }
    return o;
}

DAT_HANDLE to12(Obj *ia, v2::DAT_HANDLE h20, DAT_HANDLE_TYPE t) {
    if (!h20)
        return DAT_HANDLE_NULL;
    auto *p20 = *static_cast<const v2::DAT_PROVIDER *const *>(h20);
    // A freed object (the EP of a completion dequeued after dat_ep_free)
    // has no context to read: it has no 1.2 handle either.
    v2::DAT_CONTEXT ctx{};
    if (p20->get_consumer_context_func(h20, &ctx) != v2::DAT_SUCCESS)
        return DAT_HANDLE_NULL;
    if (ctx.as_ptr) {
        Obj *o = as(ctx.as_ptr, t);
        return o && o->h20 == h20 ? o : DAT_HANDLE_NULL;
    }
    // First sight of an object the provider made (no context yet). Made
    // under the lock, so that two threads seeing it at once agree on one.
    std::lock_guard<std::mutex> lock(objects_mu());
    if (p20->get_consumer_context_func(h20, &ctx) != v2::DAT_SUCCESS)
        return DAT_HANDLE_NULL;
    if (ctx.as_ptr) {
        Obj *o = as(ctx.as_ptr, t);
        return o && o->h20 == h20 ? o : DAT_HANDLE_NULL;
    }
    Obj *o = allocate(t, ia, h20, p20);
    if (!o) {
        DAT2_ERR("libdat.so.1: out of memory for the handle of a provider object (type %d)", t);
        return DAT_HANDLE_NULL;
    }
    attach(o);
    link(o);
    o->magic.store(kLiveMagic, std::memory_order_release);
    return o;
}

void unwrap(Obj *o) {
    {
        std::lock_guard<std::mutex> lock(objects_mu());
        unlink(o);
    }
    release(o);
}

void unwrap_all(Obj *ia) {
    std::lock_guard<std::mutex> lock(objects_mu());
    while (Obj *o = ia->next) {
        unlink(o);
        release(o);
    }
    release(ia);
}

void log_exception(const char *call, const std::exception *e) noexcept {
    DAT2_ERR("%s: %s", call, e ? e->what() : "out of memory or internal error");
}

// ---- return codes ------------------------------------------------------------
//
// The type field is the same in both versions up to DAT_CONN_QUAL_UNAVAILABLE;
// DAT 2.0 added four (mapped to their nearest 1.2 meaning) and moved
// DAT_NOT_IMPLEMENTED. The subtypes are the same list with two entries
// inserted in 2.0 (DAT_INVALID_HANDLE_CSP, DAT_INVALID_STATE_SRQ_SHUTDOWN).

static_assert(int(v2::DAT_INVALID_HANDLE_SRQ) == int(DAT_INVALID_HANDLE_SRQ));
static_assert(int(v2::DAT_INVALID_HANDLE1) == int(DAT_INVALID_HANDLE1) + 1);
static_assert(int(v2::DAT_INVALID_STATE_SRQ_IN_USE) == int(DAT_INVALID_STATE_SRQ_IN_USE) + 1);
static_assert(int(v2::DAT_PRIVILEGES_READ) == int(DAT_PRIVILEGES_READ) + 2);
static_assert(int(v2::DAT_THREAD_SAFETY_NOT_FOUND) == int(DAT_THREAD_SAFETY_NOT_FOUND) + 2);
static_assert(int(v2::DAT_CONN_QUAL_UNAVAILABLE) == int(DAT_CONN_QUAL_UNAVAILABLE));

namespace {

int subtype12(int s) {
    if (s <= v2::DAT_INVALID_HANDLE_SRQ)
        return s;
    if (s == v2::DAT_INVALID_HANDLE_CSP)
        return DAT_NO_SUBTYPE;
    if (s <= v2::DAT_INVALID_STATE_SRQ_IN_USE)
        return s - 1;
    if (s == v2::DAT_INVALID_STATE_SRQ_SHUTDOWN)
        return DAT_INVALID_STATE_SRQ_ERROR;
    if (s <= v2::DAT_THREAD_SAFETY_NOT_FOUND)
        return s - 2;
    return DAT_NO_SUBTYPE; // extension subtypes
}

int subtype20(int s) {
    if (s <= DAT_INVALID_HANDLE_SRQ)
        return s;
    if (s <= DAT_INVALID_STATE_SRQ_IN_USE)
        return s + 1;
    if (s <= DAT_THREAD_SAFETY_NOT_FOUND)
        return s + 2;
    return -1; // DAT_INVALID_RO_COOKIE and undefined values
}

} // namespace

DAT_RETURN ret12(v2::DAT_RETURN r) noexcept {
    if (r == v2::DAT_SUCCESS)
        return DAT_SUCCESS;
    const v2::DAT_RETURN cls = r & ~(v2::kTypeMask | v2::kSubtypeMask);
    const v2::DAT_RETURN type = r & v2::kTypeMask;
    const DAT_RETURN sub = static_cast<DAT_RETURN>(subtype12(static_cast<int>(r & v2::kSubtypeMask)));
    switch (type) {
    case v2::DAT_NOT_IMPLEMENTED: return DAT_NOT_IMPLEMENTED | sub; // carries both class bits in DAT 1.2
    case v2::DAT_RESERVED_LMR: return cls | DAT_INVALID_STATE | sub;
    case v2::DAT_PORT_IN_USE: return cls | DAT_CONN_QUAL_IN_USE | sub;
    case v2::DAT_COMM_NOT_SUPPORTED: return cls | DAT_MODEL_NOT_SUPPORTED | sub;
    default:
        if (type > v2::DAT_CONN_QUAL_UNAVAILABLE)
            return cls | DAT_INTERNAL_ERROR; // an extension's code
        return cls | type | sub;
    }
}

DAT_RETURN ret12(v2::DAT_RETURN r, std::initializer_list<int> args) noexcept {
    DAT_RETURN out = ret12(r);
    if ((out & DAT_TYPE_MASK) != DAT_INVALID_PARAMETER)
        return out;
    const int sub = static_cast<int>(out & DAT_SUBTYPE_MASK);
    const int n = sub - DAT_INVALID_ARG1 + 1;
    if (n < 1 || n > DAT_INVALID_ARG10 - DAT_INVALID_ARG1 + 1 || n > static_cast<int>(args.size()))
        return out;
    const int m = args.begin()[n - 1];
    return (out & ~DAT_SUBTYPE_MASK) | (m ? DAT_INVALID_ARG1 + m - 1 : DAT_NO_SUBTYPE);
}

v2::DAT_RETURN ret20(DAT_RETURN r) noexcept {
    const DAT_RETURN type = r & DAT_TYPE_MASK;
    const int sub = subtype20(static_cast<int>(r & DAT_SUBTYPE_MASK));
    const v2::DAT_RETURN sub20 = sub < 0 ? v2::kSubtypeMask : static_cast<v2::DAT_RETURN>(sub);
    // DAT 1.2's DAT_NOT_IMPLEMENTED (0xFFFF0000) keeps its type bits
    // (0x3FFF0000): DAT 2.0's DAT_NOT_IMPLEMENTED with both class bits.
    return (r & ~(DAT_TYPE_MASK | DAT_SUBTYPE_MASK)) | type | sub20;
}

} // namespace dat12
