// SPDX-License-Identifier: BSD-3-Clause
// Blocking primitives the kit and transports share: a deadline that turns
// a DAT_TIMEOUT into the shrinking poll() timeout of each wake-up, and the
// eventfds that wake waiters.
#pragma once

#include <dat2/udat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <poll.h>
#include <unistd.h>

namespace dat2::kit {

class Deadline {
public:
    using Clock = std::chrono::steady_clock;

    static Deadline never() { return Deadline(Clock::time_point::max()); }
    // A DAT_TIMEOUT in microseconds; DAT_TIMEOUT_INFINITE never expires.
    static Deadline after_us(DAT_TIMEOUT timeout_us) {
        if (timeout_us == DAT_TIMEOUT_INFINITE)
            return never();
        return Deadline(Clock::now() + std::chrono::microseconds(timeout_us));
    }
    template <class Rep, class Period> static Deadline after(std::chrono::duration<Rep, Period> d) {
        return Deadline(Clock::now() + d);
    }

    bool is_never() const { return at_ == Clock::time_point::max(); }
    bool expired() const { return !is_never() && Clock::now() >= at_; }
    // poll() timeout for what is left: -1 for never, rounded up to whole ms.
    int poll_ms() const {
        if (is_never())
            return -1;
        auto left = std::chrono::duration_cast<std::chrono::microseconds>(at_ - Clock::now()).count();
        return static_cast<int>(std::clamp<long long>((left + 999) / 1000, 0, 1 << 30));
    }
    bool operator<(const Deadline &o) const { return at_ < o.at_; }

private:
    explicit Deadline(Clock::time_point at) : at_(at) {}
    Clock::time_point at_;
};

// The smaller of a poll() timeout and another (-1 means none).
inline int min_poll_ms(int a, int b) {
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    return std::min(a, b);
}

// Counts the threads inside a blocking call, so that freeing the object can
// wake them and wait until they have left.
class ScopedCount {
public:
    explicit ScopedCount(std::atomic<int> &n) : n_(n) { n_.fetch_add(1); }
    ~ScopedCount() { n_.fetch_sub(1); }
    ScopedCount(const ScopedCount &) = delete;
    ScopedCount &operator=(const ScopedCount &) = delete;

private:
    std::atomic<int> &n_;
};

// Wakes whoever polls an eventfd; best effort (a full counter is still awake).
inline void signal_fd(int fd) {
    std::uint64_t one = 1;
    ssize_t rc = ::write(fd, &one, sizeof one);
    (void)rc;
}

// Resets a non-blocking eventfd.
inline void drain_fd(int fd) {
    std::uint64_t v;
    while (::read(fd, &v, sizeof v) == sizeof v) {
    }
}

// Whether `fd` shows all of `events` (POLLIN...) right now, without waiting.
inline bool fd_ready_now(int fd, short events) {
    pollfd p{fd, events, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & events) == events;
}

// Marks an object as going away and waits until every thread counted in
// `inside` has left its blocking call, waking them through `fd`.
inline void evict_waiters(std::atomic<bool> &aborted, const std::atomic<int> &inside, int fd) {
    aborted = true;
    while (inside.load() != 0) {
        signal_fd(fd);
        std::this_thread::yield();
    }
}

// Waits until `count` is at most `n`: what it counts (a notification, a
// transport's look at an object going away) is short, but may run a
// consumer's callback, so a long wait sleeps instead of spinning.
inline void wait_count_at_most(const std::atomic<int> &count, int n) {
    for (int spins = 0; count.load() > n; ++spins) {
        if (spins < 1000)
            std::this_thread::yield();
        else
            std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
}

} // namespace dat2::kit
