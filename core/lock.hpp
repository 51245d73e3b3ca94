// SPDX-License-Identifier: BSD-3-Clause
// The lock of the data path (an EVD's queue, an EP's DTO records, a
// transport's completion queue): taken once or more by every post and every
// dequeue, nearly always by one thread at a time.
//
// Uncontended, taking and giving it back is one compare-exchange and one
// exchange, inline: a call pair into pthread_mutex_lock/unlock costs more
// than the sections it guards (docs/performance.md has the counts).
// Contended, a thread spins briefly
// (the sections it guards are short), then sleeps in futex(2): a holder
// that is descheduled, or a transport call under an EVD's lock that blocks
// (libfabric progress), costs waiters no CPU. The futex protocol is the
// classic three-state one (0 free, 1 held, 2 held and maybe waited for).
// Thread sanitizer sees the acquire/release pairs on the state word (it no
// longer sees a mutex: no lock-order reports for these locks). Not fair,
// like glibc's default mutex: a thread that takes it again at once can keep
// a woken waiter waiting.
#pragma once

#include <atomic>
#include <cerrno>
#include <climits>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace dat2::kit {

class Lock {
public:
    Lock() = default;
    Lock(const Lock &) = delete;
    Lock &operator=(const Lock &) = delete;

    void lock() noexcept {
        int expected = 0;
        if (!state_.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed))
            lock_contended();
    }

    bool try_lock() noexcept {
        int expected = 0;
        return state_.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed);
    }

    void unlock() noexcept {
        if (state_.exchange(0, std::memory_order_release) == 2)
            wake_one();
    }

private:
    static_assert(sizeof(std::atomic<int>) == sizeof(int) && std::atomic<int>::is_always_lock_free,
                  "futex(2) needs the lock word to be a plain int");

    static void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }

    int *word() noexcept { return reinterpret_cast<int *>(&state_); }

    __attribute__((noinline)) void lock_contended() noexcept {
        for (int spin = 0; spin < 64; ++spin) {
            cpu_relax();
            int expected = 0;
            if (state_.load(std::memory_order_relaxed) == 0 &&
                state_.compare_exchange_weak(expected, 1, std::memory_order_acquire, std::memory_order_relaxed))
                return;
        }
        // From here on the holder must wake someone: mark the word 2.
        const int saved_errno = errno; // a lock leaves errno alone, as pthread_mutex_lock does
        while (state_.exchange(2, std::memory_order_acquire) != 0)
            syscall(SYS_futex, word(), FUTEX_WAIT_PRIVATE, 2, nullptr, nullptr, 0);
        errno = saved_errno;
    }

    __attribute__((noinline)) void wake_one() noexcept {
        const int saved_errno = errno;
        syscall(SYS_futex, word(), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
        errno = saved_errno;
    }

    std::atomic<int> state_{0};
};

} // namespace dat2::kit
