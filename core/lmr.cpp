// SPDX-License-Identifier: BSD-3-Clause
// Local memory regions: registration through the transport, contexts that
// DTOs resolve without a lock, and the reference rules of the seeds (an
// LMR in use by an RMR or another LMR cannot be freed; its rmr_context
// exists only when remote access was asked for).
#include "lmr.hpp"

#include "boundary.hpp"
#include "slots.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace dat2::kit {

namespace {

// DAT_IB_MEM_PRIV_REMOTE_ATOMIC (dat_ib_extensions.h): the target of
// atomic operations; dtestx registers every buffer with it.
constexpr DAT_MEM_PRIV_FLAGS kRemoteAtomic = DAT_MEM_PRIV_EXTENSION_BASE;
constexpr DAT_MEM_PRIV_FLAGS kValidPrivileges = static_cast<DAT_MEM_PRIV_FLAGS>(DAT_MEM_PRIV_ALL_FLAG | kRemoteAtomic);

// False when some page of [addr, addr+len) is not mapped (len > 0, no
// overflow). A provider that does not pin memory (libfabric tcp, shm)
// would register such a range and fault in the first DTO that touches it;
// verbs refuses it (EFAULT). msync(MS_ASYNC) checks the mappings and does
// nothing else.
bool range_is_mapped(std::uintptr_t addr, std::uintptr_t len) {
    static const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const std::uintptr_t start = addr & ~(page - 1);
    const std::uintptr_t end = addr + len;
    return ::msync(reinterpret_cast<void *>(start), end - start, MS_ASYNC) == 0 || errno != ENOMEM;
}

// True when [addr, addr+len) lies in shared mappings of this process: a
// DAT_MEM_TYPE_SHARED_VIRTUAL region must have been created shared.
bool range_is_shared(std::uintptr_t addr, std::uintptr_t len) {
    FILE *maps = std::fopen("/proc/self/maps", "re");
    if (!maps)
        return true; // cannot tell: do not refuse
    std::uintptr_t covered = addr;
    char line[512];
    while (std::fgets(line, sizeof line, maps)) {
        std::uintptr_t lo, hi;
        char perms[8] = {};
        if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s", &lo, &hi, perms) != 3)
            continue;
        if (lo <= covered && covered < hi) {
            if (perms[3] != 's')
                break;
            covered = hi;
            if (covered >= addr + len)
                break;
        }
    }
    std::fclose(maps);
    return covered >= addr + len;
}

// The high half of every LMR context, from one counter for the process:
// dat_lmr_create(3DAT) scopes an lmr_context to the consumer's address
// space, so the first LMRs of two IAs (the same slot of each table) must
// not share a context, or one IA's would name an LMR of the other in a
// post. A freed slot's old context stays dead until the counter comes
// round to it with that slot taken again.
std::uint16_t next_lmr_generation() {
    static std::atomic<std::uint16_t> next{1};
    std::uint16_t g;
    do
        g = next.fetch_add(1, std::memory_order_relaxed);
    while (g == 0);
    return g;
}

DAT_RETURN context_alloc(Ia &ia, Lmr &lmr) {
    std::lock_guard<std::mutex> lock(ia.mu);
    if (ia.lmr_free.empty())
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
    std::uint32_t idx = ia.lmr_free.back();
    ia.lmr_free.pop_back();
    lmr.lmr_context = (static_cast<std::uint32_t>(next_lmr_generation()) << 16) | idx;
    ia.lmr_table[idx].store(&lmr, std::memory_order_release);
    return DAT_SUCCESS;
}

void context_free(Ia &ia, Lmr &lmr) {
    std::lock_guard<std::mutex> lock(ia.mu);
    std::uint32_t idx = lmr.lmr_context & 0xffff;
    ia.lmr_table[idx].store(nullptr, std::memory_order_release);
    ia.lmr_free.push_front(idx); // reuse last: stale contexts stay dead longer
}

} // namespace

DAT_RETURN segment_refused(const Lmr *lmr, Pz *pz, const DAT_LMR_TRIPLET &t, DAT_MEM_PRIV_FLAGS privilege) {
    const bool read = privilege == DAT_MEM_PRIV_LOCAL_READ_FLAG;
    if (!lmr || (!read && !(lmr->privileges & privilege)))
        return DAT_ERROR(DAT_PRIVILEGES_VIOLATION, read ? DAT_PRIVILEGES_READ : DAT_PRIVILEGES_WRITE);
    if (pz && lmr->pz != pz)
        return DAT_ERROR(DAT_PROTECTION_VIOLATION, read ? DAT_PROTECTION_READ : DAT_PROTECTION_WRITE);
    if (!lmr_covers(*lmr, t.virtual_address, t.segment_length))
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    // The LMR went away since resolve_segment read it: its context names nothing now.
    return DAT_ERROR(DAT_PRIVILEGES_VIOLATION, read ? DAT_PRIVILEGES_READ : DAT_PRIVILEGES_WRITE);
}

void lmr_release(Lmr &lmr) {
    Ia &ia = *lmr.ia;
    ia.transport->mr_deregister(lmr);
    context_free(ia, lmr);
    if (lmr.pz)
        lmr.pz->users.fetch_sub(1);
    if (lmr.parent)
        lmr.parent->users.fetch_sub(1);
    ia_untrack(ia, &lmr);
    destroy_object(&lmr);
}

namespace slot {

DAT_RETURN lmr_create(DAT_IA_HANDLE ia_handle, DAT_MEM_TYPE mem_type, DAT_REGION_DESCRIPTION region, DAT_VLEN length,
                      DAT_PZ_HANDLE pz_handle, DAT_MEM_PRIV_FLAGS privileges, DAT_VA_TYPE va_type,
                      DAT_LMR_HANDLE *lmr_out, DAT_LMR_CONTEXT *lmr_context, DAT_RMR_CONTEXT *rmr_context,
                      DAT_VLEN *registered_size, DAT_VADDR *registered_address) {
    return guarded("dat_lmr_create", [&]() -> DAT_RETURN {
        Ia *ia;
        if (DAT_RETURN r = handle_cast(ia_handle, ia))
            return r;
        Pz *pz;
        if (DAT_RETURN r = handle_cast_in(ia, pz_handle, pz))
            return r;
        if (privileges & ~kValidPrivileges)
            return invalid_arg(6);
        if (va_type != DAT_VA_TYPE_VA) {
            if (va_type == DAT_VA_TYPE_ZB)
                return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
            return invalid_arg(7);
        }
        if (!lmr_out)
            return invalid_arg(8);
        std::uintptr_t address = 0;
        Lmr *parent = nullptr;
        const char *cookie = nullptr;
        switch (mem_type) {
        case DAT_MEM_TYPE_VIRTUAL:
            address = reinterpret_cast<std::uintptr_t>(region.for_va);
            if (!address)
                return invalid_arg(3);
            if (length == 0)
                return invalid_arg(4);
            if (address + length < address)
                return invalid_arg(4);
            if (!range_is_mapped(address, length)) {
                DAT2_ERR("dat_lmr_create: region %#" PRIxPTR "+%" PRIu64 " is not mapped in this process\n", address,
                         static_cast<std::uint64_t>(length));
                return invalid_arg(3);
            }
            break;
        case DAT_MEM_TYPE_LMR:
            // The region names an LMR handle: an invalid one is an invalid handle.
            if (DAT_RETURN r = handle_cast_in(ia, region.for_lmr_handle, parent))
                return r;
            address = parent->address;
            length = parent->length; // man page: the length argument is ignored
            break;
        case DAT_MEM_TYPE_SHARED_VIRTUAL:
            address = reinterpret_cast<std::uintptr_t>(region.for_shared_memory.virtual_address);
            cookie = region.for_shared_memory.shared_memory_id ? *region.for_shared_memory.shared_memory_id : nullptr;
            if (!address || !cookie)
                return invalid_arg(3);
            if (length == 0)
                return invalid_arg(4);
            if (!range_is_shared(address, length)) {
                DAT2_ERR("dat_lmr_create: shared virtual region %#" PRIxPTR "+%" PRIu64 " is not a shared mapping\n",
                         address, static_cast<std::uint64_t>(length));
                return DAT_ERROR(DAT_INVALID_STATE, 0);
            }
            break;
        default: return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
        }
        if (address + length < address)
            return invalid_arg(4);
        Lmr *lmr = make_object<Lmr>(ia->provider, ia);
        if (!lmr)
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        lmr->mem_type = mem_type;
        lmr->region = region;
        if (cookie)
            std::memcpy(lmr->cookie, cookie, DAT_LMR_COOKIE_SIZE);
        lmr->pz = pz;
        lmr->parent = parent;
        lmr->address = address;
        lmr->length = length;
        lmr->privileges = privileges;
        lmr->va_type = va_type;
        if (DAT_RETURN r = context_alloc(*ia, *lmr)) {
            destroy_object(lmr);
            return r;
        }
        Registration reg;
        if (DAT_RETURN r = ia->transport->mr_register(*lmr, reg)) {
            context_free(*ia, *lmr);
            destroy_object(lmr);
            return r;
        }
        lmr->mr = reg.mr;
        lmr->desc = reg.desc;
        lmr->rmr_context = reg.rmr_context;
        lmr->has_rmr_context =
            (privileges & (DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG | kRemoteAtomic)) != 0;
        if (!lmr->has_rmr_context)
            lmr->rmr_context = 0;
        pz->users.fetch_add(1);
        if (parent)
            parent->users.fetch_add(1);
        ia_track(*ia, lmr);
        publish(lmr);
        *lmr_out = lmr;
        if (lmr_context)
            *lmr_context = lmr->lmr_context;
        if (rmr_context)
            *rmr_context = lmr->rmr_context;
        if (registered_size)
            *registered_size = lmr->length;
        if (registered_address)
            *registered_address = lmr->address;
        return DAT_SUCCESS;
    });
}

DAT_RETURN lmr_query(DAT_LMR_HANDLE lmr_handle, DAT_LMR_PARAM_MASK mask, DAT_LMR_PARAM *param) {
    return guarded("dat_lmr_query", [&]() -> DAT_RETURN {
        Lmr *lmr;
        if (DAT_RETURN r = handle_cast(lmr_handle, lmr))
            return r;
        if (!param)
            return invalid_arg(3);
        if (mask & ~DAT_LMR_FIELD_ALL)
            return invalid_arg(2);
        if (mask & DAT_LMR_FIELD_IA_HANDLE)
            ia_handle_for_consumer(lmr->ia, &param->ia_handle);
        if (mask & DAT_LMR_FIELD_MEM_TYPE)
            param->mem_type = lmr->mem_type;
        if (mask & DAT_LMR_FIELD_REGION_DESC)
            param->region_desc = lmr->region;
        if (mask & DAT_LMR_FIELD_LENGTH)
            param->length = lmr->length;
        if (mask & DAT_LMR_FIELD_PZ_HANDLE)
            param->pz_handle = lmr->pz;
        if (mask & DAT_LMR_FIELD_MEM_PRIV)
            param->mem_priv = lmr->privileges;
        if (mask & DAT_LMR_FIELD_VA_TYPE)
            param->va_type = lmr->va_type;
        if (mask & DAT_LMR_FIELD_LMR_CONTEXT)
            param->lmr_context = lmr->lmr_context;
        if (mask & DAT_LMR_FIELD_RMR_CONTEXT)
            param->rmr_context = lmr->rmr_context;
        if (mask & DAT_LMR_FIELD_REGISTERED_SIZE)
            param->registered_size = lmr->length;
        if (mask & DAT_LMR_FIELD_REGISTERED_ADDRESS)
            param->registered_address = lmr->address;
        return DAT_SUCCESS;
    });
}

DAT_RETURN lmr_free(DAT_LMR_HANDLE lmr_handle) {
    return guarded("dat_lmr_free", [&]() -> DAT_RETURN {
        Lmr *lmr;
        if (DAT_RETURN r = handle_cast(lmr_handle, lmr))
            return r;
        if (lmr->users.load() != 0)
            return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_LMR_IN_USE);
        lmr_release(*lmr);
        return DAT_SUCCESS;
    });
}

namespace {
DAT_RETURN sync_check(DAT_IA_HANDLE ia_handle, const DAT_LMR_TRIPLET *iov, DAT_VLEN n) {
    Ia *ia;
    if (DAT_RETURN r = handle_cast(ia_handle, ia))
        return r;
    // No segments: nothing to make visible (the man pages do not call it invalid).
    if (n > 0 && !iov)
        return invalid_arg(2);
    for (DAT_VLEN i = 0; i < n; ++i) {
        // dat.h, DAT_LMR_TRIPLET: with a segment_length of 0 "the other two
        // elements of the dat_lmr_triplet are irrelevant and can be invalid",
        // as in the DTO posts (resolve_segments).
        if (iov[i].segment_length == 0)
            continue;
        Lmr *lmr = lmr_by_context(*ia, iov[i].lmr_context);
        if (!lmr || !lmr_covers(*lmr, iov[i].virtual_address, iov[i].segment_length))
            return invalid_arg(2);
    }
    // x86-64 DMA is cache coherent: nothing to flush once the ranges check out.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return DAT_SUCCESS;
}
} // namespace

DAT_RETURN lmr_sync_rdma_read(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET *iov, DAT_VLEN n) {
    return guarded("dat_lmr_sync_rdma_read", [&] { return sync_check(ia, iov, n); });
}

DAT_RETURN lmr_sync_rdma_write(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET *iov, DAT_VLEN n) {
    return guarded("dat_lmr_sync_rdma_write", [&] { return sync_check(ia, iov, n); });
}

} // namespace slot
} // namespace dat2::kit
