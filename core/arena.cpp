// SPDX-License-Identifier: BSD-3-Clause
#include "arena.hpp"

#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <pthread.h>
#include <sys/mman.h>
#include <vector>

namespace dat2::kit {

namespace {

// Size classes: powers of two from kMinSlot to kMaxSlot.
constexpr std::size_t kClasses = 9; // 64 .. 16384

std::size_t class_of(std::size_t size) {
    std::size_t slot = Arena::kMinSlot, c = 0;
    while (slot < size) {
        slot <<= 1;
        ++c;
    }
    return c;
}

} // namespace

struct Arena::Impl {
    std::mutex mu;
    std::size_t next_chunk = 0; // chunks are committed in address order
    std::size_t max_chunks = 0;
    std::deque<void *> free_slots[kClasses];
};

std::atomic<Arena *> Arena::instance_{nullptr};

Arena &Arena::create_instance() noexcept {
    // 1 GiB of address space, committed 64 KiB at a time; never destroyed
    // so that handles stay checkable until the process ends. (Out of
    // memory here is out of memory at the first DAT call: terminate.)
    static Arena *arena = [] {
        auto *a = new Arena(std::size_t(1) << 30);
        instance_.store(a, std::memory_order_release);
        return a;
    }();
    return *arena;
}

// The arena's lock is held across fork(): a child opens IAs of its own
// (docs/fork.md), and another thread of the parent may have been
// allocating. Registered when the library loads: a handler registered on
// first use could come while a fork is under way, after its prepare handlers
// ran, and the lock taken right after would be held in the child for ever.
void Arena::lock_for_fork() noexcept { instance().impl_->mu.lock(); }
void Arena::unlock_after_fork() noexcept { instance().impl_->mu.unlock(); }

namespace {
[[maybe_unused]] const int fork_handlers =
    pthread_atfork(Arena::lock_for_fork, Arena::unlock_after_fork, Arena::unlock_after_fork);
} // namespace

Arena::Arena(std::size_t reserve_bytes) : impl_(new Impl) {
    reserve_bytes &= ~(kChunkSize - 1);
    void *p = ::mmap(nullptr, reserve_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return; // allocate() then fails with nullptr
    base_ = reinterpret_cast<std::uintptr_t>(p);
    reserved_ = reserve_bytes;
    impl_->max_chunks = reserve_bytes >> kChunkShift;
    chunk_slot_ = new std::atomic<std::uint32_t>[impl_->max_chunks];
    for (std::size_t i = 0; i < impl_->max_chunks; ++i)
        chunk_slot_[i].store(0, std::memory_order_relaxed);
}

Arena::~Arena() {
    if (reserved_)
        ::munmap(reinterpret_cast<void *>(base_), reserved_);
    delete[] chunk_slot_;
    delete impl_;
}

void *Arena::allocate(std::size_t size) noexcept {
    if (size > kMaxSlot || !reserved_)
        return nullptr;
    const std::size_t c = class_of(size == 0 ? 1 : size);
    const std::size_t slot = kMinSlot << c;
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto &free_list = impl_->free_slots[c];
    if (free_list.empty()) {
        if (impl_->next_chunk == impl_->max_chunks)
            return nullptr;
        const std::size_t chunk = impl_->next_chunk;
        char *start = reinterpret_cast<char *>(base_ + (chunk << kChunkShift));
        if (::mprotect(start, kChunkSize, PROT_READ | PROT_WRITE) != 0)
            return nullptr;
        try {
            for (std::size_t off = 0; off + slot <= kChunkSize; off += slot)
                free_list.push_back(start + off);
        } catch (const std::bad_alloc &) {
            return nullptr;
        }
        ++impl_->next_chunk;
        chunk_slot_[chunk].store(static_cast<std::uint32_t>(slot), std::memory_order_release);
    }
    void *p = free_list.front();
    free_list.pop_front();
    std::memset(p, 0, slot);
    return p;
}

void Arena::deallocate(void *p) noexcept {
    if (!owns(p))
        return;
    const std::size_t chunk = (reinterpret_cast<std::uintptr_t>(p) - base_) >> kChunkShift;
    const std::size_t slot = chunk_slot_[chunk].load(std::memory_order_acquire);
    std::lock_guard<std::mutex> lock(impl_->mu);
    try {
        impl_->free_slots[class_of(slot)].push_back(p);
    } catch (const std::bad_alloc &) {
        // The slot is lost to reuse, never to validation: still type-stable.
    }
}

std::size_t Arena::chunks_in_use() const noexcept {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->next_chunk;
}

} // namespace dat2::kit
