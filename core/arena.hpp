// SPDX-License-Identifier: BSD-3-Clause
// Type-stable storage for DAT objects. DAT handles are raw pointers that
// consumers may pass after freeing them, or pass to the wrong call. Every
// object the kit hands out lives in one reserved address range that is never
// unmapped, carved into 64 KiB chunks of one slot size each, so deciding
// whether a pointer is one of our objects is a range check plus a table
// lookup, and reading the header of a freed object is always safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace dat2::kit {

class Arena {
public:
    static constexpr std::size_t kChunkShift = 16; // 64 KiB chunks
    static constexpr std::size_t kChunkSize = std::size_t(1) << kChunkShift;
    static constexpr std::size_t kMinSlot = 64;
    static constexpr std::size_t kMaxSlot = 16384;

    // The process-wide arena of this plugin (each plugin links its own kit).
    // Inline: every DAT call checks its handle through it.
    static Arena &instance() noexcept {
        Arena *a = instance_.load(std::memory_order_acquire);
        return a ? *a : create_instance();
    }

    // Storage for an object of `size` bytes, zero-filled, aligned to 64.
    // nullptr when the reservation is exhausted or size > kMaxSlot.
    void *allocate(std::size_t size) noexcept;
    // Returns a slot; its memory stays mapped and readable. Slots are reused
    // first-in first-out, so a stale handle rarely meets a new object at once.
    void deallocate(void *slot) noexcept;

    // True when `p` is the start of a slot in a committed chunk: live, freed
    // or never used (then zero-filled); the object header tells which.
    // Lock-free; never touches the memory at `p`. Inline, as instance().
    bool owns(const void *p) const noexcept {
        const auto addr = reinterpret_cast<std::uintptr_t>(p);
        if (addr < base_ || addr - base_ >= reserved_)
            return false;
        const std::uintptr_t off = addr - base_;
        const std::uint32_t slot = chunk_slot_[off >> kChunkShift].load(std::memory_order_acquire);
        // Slots are powers of two (kMinSlot << class) no larger than a chunk,
        // and chunks start at multiples of kChunkSize: a mask, not a division.
        return slot != 0 && (off & (slot - 1)) == 0;
    }

    std::size_t chunks_in_use() const noexcept;
    // pthread_atfork's: the lock taken before fork() and given back after.
    static void lock_for_fork() noexcept;
    static void unlock_after_fork() noexcept;

    explicit Arena(std::size_t reserve_bytes);
    ~Arena();
    Arena(const Arena &) = delete;
    Arena &operator=(const Arena &) = delete;

private:
    // The first call creates the arena (thread-safe); later ones read instance_.
    __attribute__((noinline, cold)) static Arena &create_instance() noexcept;
    static std::atomic<Arena *> instance_;

    struct Impl;
    Impl *impl_;
    std::uintptr_t base_ = 0;
    std::size_t reserved_ = 0;
    // Slot size of each committed chunk, 0 for none; read without a lock.
    std::atomic<std::uint32_t> *chunk_slot_ = nullptr;
};

} // namespace dat2::kit
