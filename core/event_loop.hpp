// SPDX-License-Identifier: BSD-3-Clause
// The thread every transport's connection management runs on: one per IA.
// A transport watches its file descriptors (an rdma_cm channel, a libfabric
// event queue, completion queue wait fds), arms timers (disconnect
// fallbacks) and posts work (a break asked for from inside a kit callback);
// the kit arms connect timeouts here. Handlers run on the loop's thread, one
// at a time, with no lock of the loop's held: a handler may call the kit's
// on_*() callbacks, which may call back into the transport.
//
// Lifetime: a handler may use an object it found under the transport's own
// lock after releasing that lock, because whoever frees the object first
// unregisters it and then calls sync(), which returns once a handler that
// may have found it has returned. unwatch() and timer_free() do that
// themselves.
#pragma once

#include "wait.hpp"

#include <dat2/udat.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace dat2::kit {

class EventLoop {
public:
    using FdHandler = std::function<void(std::uint32_t events)>;
    using Handler = std::function<void()>;
    struct Watch;
    struct Timer;

    explicit EventLoop(std::string name);
    ~EventLoop(); // stop()
    EventLoop(const EventLoop &) = delete;
    EventLoop &operator=(const EventLoop &) = delete;

    // Starts the thread; DAT_INSUFFICIENT_RESOURCES (logged) when it, the
    // epoll set or the eventfd cannot be made.
    DAT_RETURN start();
    // Ends the thread after the handler it is running, if any; what is still
    // watched or armed never runs again. Idempotent.
    void stop();

    // Runs `fn(events)` on the loop whenever epoll(7) reports `events`
    // (EPOLLIN...) on `fd`, level-triggered. nullptr (logged) on failure.
    Watch *watch(int fd, std::uint32_t events, FdHandler fn);
    // The events a watch waits for (0: none, the fd stays registered).
    void modify(Watch *w, std::uint32_t events);
    // After this returns, `fn` of the watch does not run again, nor is it
    // running on another thread. From inside its own handler: allowed.
    void unwatch(Watch *w);

    // A timer, disarmed; its handler runs on the loop once its deadline is
    // reached. arm() replaces the deadline of an armed timer.
    Timer *timer(Handler fn);
    void arm(Timer *t, Deadline when);
    void disarm(Timer *t);
    // As unwatch(): not running and never again once this returns.
    void timer_free(Timer *t);

    // Runs `fn` on the loop soon (in posting order). Used where a caller
    // may not block or take the transport's lock (inside kit callbacks).
    void post(Handler fn);
    // post(), and a future that is ready once `fn` has run, or once the loop
    // was destroyed without running it (its promise then breaks).
    std::future<void> submit(Handler fn);

    // Returns once the handler the loop is running now (the idle hook
    // included), if any, has returned. No-op on the loop's own thread. The
    // caller holds no lock a handler may take.
    void sync();
    // Runs `fn` on the loop and returns once it has run: work that must not
    // interleave with the loop's handlers (at once on the loop's own thread,
    // or when no loop thread runs). The caller holds no lock a handler may
    // take.
    void call(Handler fn);
    bool on_loop_thread() const { return std::this_thread::get_id() == thread_id_.load(); }

    // Runs before every wait: work that must be redone until it reports
    // nothing (a transport's completion queues that may still hold work);
    // returns the longest the loop may then sleep, in ms (-1: until an fd
    // or timer). One per loop; set before start().
    void set_idle_hook(std::function<int()> fn) { idle_hook_ = std::move(fn); }

private:
    void run();
    void wake();
    // Marks the start and the end of a handler (under mu_), for sync().
    void enter_handler(const void *what);
    void leave_handler();
    void wait_not_running(std::unique_lock<std::mutex> &lock, const void *what);

    std::string name_;
    int epoll_fd_ = -1;
    int wake_fd_ = -1;
    std::thread thread_;
    std::atomic<std::thread::id> thread_id_{};
    std::atomic<bool> stopping_{false};
    std::function<int()> idle_hook_;

    std::mutex mu_; // everything below
    std::condition_variable handler_done_;
    const void *running_ = nullptr;  // the watch or timer (or `this`: posted work) being handled
    std::uint64_t handled_ = 0;      // handlers finished
    std::vector<Watch *> graveyard_; // unwatched, freed once no epoll result can name them
    std::set<std::pair<Deadline, Timer *>> timers_;
    std::vector<Handler> posted_;
};

} // namespace dat2::kit
