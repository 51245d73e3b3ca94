// SPDX-License-Identifier: BSD-3-Clause
// libdat2's state: the static registry (dat.conf entries and their loaded
// libraries), the dynamic registry (providers that registered themselves)
// and the table that turns provider IA pointers into the small integers
// consumers see, as OFED does.
#pragma once

#include <dat2/udat.h>
#include "dat2_internal.h"
#include <dat2/dat_registry.h>

#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdint>

namespace dat2::registry {

DAT_RETURN add_provider(const DAT_PROVIDER *provider, const DAT_PROVIDER_INFO *info);
DAT_RETURN remove_provider(const DAT_PROVIDER *provider, const DAT_PROVIDER_INFO *info);
DAT_RETURN list_providers(DAT_COUNT max_to_return, DAT_COUNT *entries_returned,
                          DAT_PROVIDER_INFO *(dat_provider_list[]));
DAT_RETURN providers_related(const char *name1, const char *name2, DAT_HA_RELATIONSHIP *answer);

// `dat12`: for libdat.so.1, whose DAT 1.x requests also take u2.0 entries.
DAT_RETURN ia_open(const char *name, DAT_COUNT async_evd_qlen, DAT_EVD_HANDLE *async_evd, DAT_IA_HANDLE *ia_handle,
                   DAT_UINT32 major, DAT_UINT32 minor, DAT_BOOLEAN thread_safety, bool dat12 = false);
DAT_RETURN ia_close(DAT_IA_HANDLE ia_handle, DAT_CLOSE_FLAGS flags);

// Consumer IA handle (small integer) <-> provider IA pointer. A value that is
// not a live small integer is looked up as a provider pointer and its small
// integer returned, which is how providers report the consumer's handle.
DAT_RETURN translate_ia(DAT_IA_HANDLE handle, DAT_IA_HANDLE *out);
// Every provider table ever registered. Append-only and lock-free (a slot
// is written before the count that covers it is released), so that
// dispatch can refuse a handle whose first word is not a provider table.
inline constexpr std::size_t kMaxKnownProviders = 1024;
extern std::atomic<const DAT_PROVIDER *> g_known[kMaxKnownProviders];
extern std::atomic<std::size_t> g_known_count;
// The first table registered by a provider library that exports
// kGuardsDtoSlots (static_config.hpp): its DTO post slots and
// dat_evd_dequeue catch their own exceptions, so dispatch calls them without
// a guard of its own, which would keep the call from being a tail call.
// Set once, like g_known.
extern std::atomic<const DAT_PROVIDER *> g_guarded_first;
// known_provider() beyond the first table (registry.cpp).
bool known_provider_scan(const DAT_PROVIDER *p) noexcept;
// True for a table some provider registered: dispatch refuses handles whose
// first word is anything else. The first table is compared inline: every
// DAT call asks, and a process nearly always has one provider.
inline bool known_provider(const DAT_PROVIDER *p) noexcept {
    if (g_known_count.load(std::memory_order_acquire) > 0 && g_known[0].load(std::memory_order_relaxed) == p)
        return true;
    return known_provider_scan(p);
}

// A consumer's handle may point anywhere, unmapped memory included (OFED's
// library crashes there): its first word is read only once its page is
// known to be mapped. A page is remembered once it held a provider's object
// (a direct-mapped cache of 4096 pages, so that a process's handles, in a
// few pages of the kit's arena, which is never unmapped, cost a compare);
// any other page costs one system call. A remembered page of a foreign
// provider's heap that is later returned to the system is the one case
// left unguarded.
inline constexpr std::size_t kPageShift = 12;
inline constexpr std::size_t kMappedPages = 4096; // a power of two
extern std::atomic<std::uintptr_t> g_mapped_pages[kMappedPages];
// Whether the word at `p` is mapped, asking the kernel (registry.cpp).
bool probe_mapped(const void *p) noexcept;
// `p` is a provider's object: its page stays mapped.
inline void remember_page(const void *p) noexcept {
    const std::uintptr_t page = reinterpret_cast<std::uintptr_t>(p) >> kPageShift;
    g_mapped_pages[page & (kMappedPages - 1)].store(page, std::memory_order_relaxed);
}
// The cache alone: no call, so that a dispatch that finds its page there
// stays a tail call.
inline bool page_known(const void *p) noexcept {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t page = a >> kPageShift;
    // An aligned word lies in one page; any other is probed (every object's
    // address is aligned).
    return (a & (sizeof(void *) - 1)) == 0 &&
           g_mapped_pages[page & (kMappedPages - 1)].load(std::memory_order_relaxed) == page;
}
inline bool word_readable(const void *p) noexcept { return __builtin_expect(page_known(p), 1) || probe_mapped(p); }

// dat_extension_op's DAT_OPEN_EXTENSION_BASE ops (by IA name, no handle) and
// DAT_CLOSE_EXTENSION_BASE ops, as OFED routes them: the open takes a
// reference on the provider that the close gives back.
DAT_RETURN extension_open(const char *name, DAT_EXTENDED_OP op, va_list args);
DAT_RETURN extension_close(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args);

} // namespace dat2::registry
