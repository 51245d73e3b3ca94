// SPDX-License-Identifier: BSD-3-Clause
#include "event_loop.hpp"

#include "dat2_internal.h"
#include "log.hpp"

#include <cerrno>
#include <cstring>
#include <future>
#include <memory>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace dat2::kit {

struct EventLoop::Watch {
    int fd;
    FdHandler fn;
    bool live = true;
};

struct EventLoop::Timer {
    Handler fn;
    bool armed = false;
    bool freed_by_own_handler = false; // the loop deletes it when the handler returns
    Deadline when = Deadline::never();
};

// The epoll set exists from the start: a transport watches its fds while
// it opens, before the thread runs.
EventLoop::EventLoop(std::string name) : name_(std::move(name)) {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epoll_fd_ < 0 || wake_fd_ < 0) {
        DAT2_ERR("%s: event loop: %s\n", name_.c_str(), std::strerror(errno));
        return;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr; // the wake-up
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
        DAT2_ERR("%s: event loop: epoll_ctl: %s\n", name_.c_str(), std::strerror(errno));
        ::close(epoll_fd_);
        epoll_fd_ = -1;
    }
}

EventLoop::~EventLoop() {
    stop();
    for (Watch *w : graveyard_)
        delete w;
    if (epoll_fd_ >= 0)
        ::close(epoll_fd_);
    if (wake_fd_ >= 0)
        ::close(wake_fd_);
}

DAT_RETURN EventLoop::start() {
    if (epoll_fd_ < 0 || wake_fd_ < 0)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0); // logged by the constructor
    try {
        thread_ = std::thread([this] { run(); });
    } catch (const std::system_error &e) {
        DAT2_ERR("%s: event loop thread: %s\n", name_.c_str(), e.what());
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
    }
    return DAT_SUCCESS;
}

void EventLoop::stop() {
    if (!thread_.joinable())
        return;
    stopping_ = true;
    wake();
    if (on_loop_thread()) {
        thread_.detach(); // cannot join itself; it returns after this handler
        return;
    }
    thread_.join();
    thread_id_ = std::thread::id();
}

void EventLoop::wake() {
    if (wake_fd_ >= 0)
        signal_fd(wake_fd_);
}

EventLoop::Watch *EventLoop::watch(int fd, std::uint32_t events, FdHandler fn) {
    auto *w = new Watch{fd, std::move(fn)};
    epoll_event ev{};
    ev.events = events;
    ev.data.ptr = w;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
        DAT2_ERR("%s: watching fd %d: epoll_ctl: %s\n", name_.c_str(), fd, std::strerror(errno));
        delete w;
        return nullptr;
    }
    return w;
}

void EventLoop::modify(Watch *w, std::uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.ptr = w;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, w->fd, &ev) == 0)
        return;
    const int err = errno;
    {
        // A handler that modifies its own watch while another thread
        // unwatches it (the fd already out of the epoll set) is no fault.
        std::lock_guard<std::mutex> lock(mu_);
        if (err == ENOENT && !w->live)
            return;
    }
    DAT2_ERR("%s: fd %d: epoll_ctl: %s\n", name_.c_str(), w->fd, std::strerror(err));
}

void EventLoop::unwatch(Watch *w) {
    if (!w)
        return;
    std::unique_lock<std::mutex> lock(mu_);
    w->live = false; // before the fd leaves the set: modify() then knows why it is gone
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, w->fd, nullptr);
    // An epoll result already taken may still name it: freed by the loop
    // once it waits again (or by the destructor).
    graveyard_.push_back(w);
    wait_not_running(lock, w);
}

EventLoop::Timer *EventLoop::timer(Handler fn) { return new Timer{std::move(fn)}; }

void EventLoop::arm(Timer *t, Deadline when) {
    bool earliest;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (t->armed)
            timers_.erase({t->when, t});
        t->when = when;
        t->armed = !when.is_never();
        if (!t->armed)
            return;
        const auto inserted = timers_.insert({when, t}).first;
        earliest = inserted == timers_.begin();
    }
    if (earliest && !on_loop_thread())
        wake(); // the loop sleeps too long otherwise
}

void EventLoop::disarm(Timer *t) {
    std::lock_guard<std::mutex> lock(mu_);
    if (t->armed)
        timers_.erase({t->when, t});
    t->armed = false;
}

void EventLoop::timer_free(Timer *t) {
    if (!t)
        return;
    std::unique_lock<std::mutex> lock(mu_);
    if (t->armed)
        timers_.erase({t->when, t});
    t->armed = false;
    if (on_loop_thread() && running_ == t) {
        t->freed_by_own_handler = true;
        return;
    }
    // Another thread: once the handler returned, the loop no longer looks at it.
    wait_not_running(lock, t);
    delete t;
}

void EventLoop::post(Handler fn) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        posted_.push_back(std::move(fn));
    }
    wake();
}

void EventLoop::sync() {
    std::unique_lock<std::mutex> lock(mu_);
    wait_not_running(lock, nullptr);
}

void EventLoop::call(Handler fn) {
    if (on_loop_thread() || !thread_.joinable()) {
        fn();
        return;
    }
    submit([&fn] { fn(); }).wait();
}

std::future<void> EventLoop::submit(Handler fn) {
    // The promise lives in the posted handler, not with the caller, who may
    // return as soon as it is set, while set_value() is still running.
    auto ran = std::make_shared<std::promise<void>>();
    std::future<void> done = ran->get_future();
    post([fn = std::move(fn), ran] {
        fn();
        ran->set_value();
    });
    return done;
}

// Waits while the loop runs the handler of `what` (any handler: nullptr).
void EventLoop::wait_not_running(std::unique_lock<std::mutex> &lock, const void *what) {
    if (on_loop_thread() || !running_ || (what && running_ != what))
        return;
    const std::uint64_t seen = handled_;
    handler_done_.wait(lock, [&] { return handled_ != seen; });
}

void EventLoop::enter_handler(const void *what) { running_ = what; }

void EventLoop::leave_handler() {
    running_ = nullptr;
    ++handled_;
    handler_done_.notify_all();
}

void EventLoop::run() {
    thread_id_ = std::this_thread::get_id();
    epoll_event ready[64];
    while (!stopping_) {
        int timeout_ms = -1;
        if (idle_hook_) {
            {
                std::lock_guard<std::mutex> lock(mu_);
                enter_handler(&idle_hook_);
            }
            timeout_ms = idle_hook_();
            std::lock_guard<std::mutex> lock(mu_);
            leave_handler();
        }
        {
            std::lock_guard<std::mutex> lock(mu_);
            for (Watch *w : graveyard_)
                delete w; // no epoll result of the last wait is left
            graveyard_.clear();
            if (!posted_.empty())
                timeout_ms = 0;
            if (!timers_.empty())
                timeout_ms = min_poll_ms(timeout_ms, timers_.begin()->first.poll_ms());
        }
        const int n = ::epoll_wait(epoll_fd_, ready, 64, timeout_ms);
        if (stopping_)
            break;
        if (n < 0 && errno != EINTR)
            DAT2_ERR("%s: event loop: epoll_wait: %s\n", name_.c_str(), std::strerror(errno));
        for (int i = 0; i < n; ++i) {
            auto *w = static_cast<Watch *>(ready[i].data.ptr);
            if (!w) {
                drain_fd(wake_fd_);
                continue;
            }
            {
                std::lock_guard<std::mutex> lock(mu_);
                if (!w->live)
                    continue;
                enter_handler(w);
            }
            w->fn(ready[i].events);
            std::lock_guard<std::mutex> lock(mu_);
            leave_handler();
        }
        // Timers due, earliest first; a handler may arm timers again.
        for (;;) {
            Timer *t;
            {
                std::lock_guard<std::mutex> lock(mu_);
                if (timers_.empty() || !timers_.begin()->first.expired())
                    break;
                t = timers_.begin()->second;
                timers_.erase(timers_.begin());
                t->armed = false;
                enter_handler(t);
            }
            t->fn();
            std::lock_guard<std::mutex> lock(mu_);
            leave_handler();
            if (t->freed_by_own_handler)
                delete t;
        }
        std::vector<Handler> work;
        {
            std::lock_guard<std::mutex> lock(mu_);
            work.swap(posted_);
            if (!work.empty())
                enter_handler(this);
        }
        if (work.empty())
            continue;
        for (Handler &fn : work)
            fn();
        std::lock_guard<std::mutex> lock(mu_);
        leave_handler();
    }
}

} // namespace dat2::kit
