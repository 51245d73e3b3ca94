// SPDX-License-Identifier: BSD-3-Clause
// Event dispatchers: a FIFO of ready DAT_EVENTs in front of the transport's
// completion queue. Completions move from the queue into the FIFO only
// when there is room (the queue is the backpressure), provider events
// (connections, flushes) are never lost (they spill past qlen and raise one
// overflow async event), software events beyond qlen get DAT_QUEUE_FULL.
// Waiting blocks in poll() on the transport's completion fd and the EVD's
// eventfd: no busy loop, and the timeout shrinks across wake-ups.
#include "boundary.hpp"
#include "consume.hpp"
#include "ep.hpp"
#include "slots.hpp"
#include "wait.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <pthread.h>
#include <unordered_map>
#include <poll.h>
#include <thread>
#include <sys/eventfd.h>
#include <unistd.h>
#include <vector>

namespace dat2::kit {

namespace {

constexpr unsigned kValidFlags = DAT_EVD_SOFTWARE_FLAG | DAT_EVD_CR_FLAG | DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG |
                                 DAT_EVD_RMR_BIND_FLAG | DAT_EVD_ASYNC_FLAG;

// The FIFO's storage (ring_length); its capacity is qlen.
std::size_t ring_storage(DAT_COUNT qlen) { return ring_length(static_cast<std::size_t>(std::max<DAT_COUNT>(qlen, 0))); }

std::size_t capacity(const Evd &evd) { return static_cast<std::size_t>(evd.qlen); }

void ring_push_locked(Evd &evd, const DAT_EVENT &e) {
    evd.ring[(evd.head + evd.count) & (evd.ring.size() - 1)] = e;
    ++evd.count;
}

// The oldest event, copied once: straight into the consumer's buffer.
void ring_pop_locked(Evd &evd, DAT_EVENT &out) {
    out = evd.ring[evd.head];
    evd.head = (evd.head + 1) & (evd.ring.size() - 1);
    --evd.count;
}

} // namespace

// evd_completion_slot_locked (dto.hpp) past the FIFO's room: draining
// everything may exceed qlen.
DAT_EVENT &evd_spill_slot_locked(Evd &evd) {
    evd.spill.emplace_back();
    return evd.spill.back();
}

namespace {

// Evd::feeds_cno from `cno` and `enabled`; true when it changed (the
// transport is then told, without evd.mu: cq_cno_changed).
bool evd_cno_changed_locked(Evd &evd) {
    const bool feeds = evd.cno != nullptr && evd.enabled;
    return evd.feeds_cno.exchange(feeds, std::memory_order_relaxed) != feeds;
}

DAT_RETURN set_evd_flag(DAT_EVD_HANDLE evd_handle, bool Evd::*flag, bool value) {
    Evd *evd;
    if (DAT_RETURN r = handle_cast(evd_handle, evd))
        return r;
    std::lock_guard<Lock> lock(evd->mu);
    evd->*flag = value;
    return DAT_SUCCESS;
}

DAT_RETURN evd_check_dequeuer(Evd &evd) {
    if (evd.waiter)
        return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    return DAT_SUCCESS;
}

} // namespace

namespace {

// evd_fill_locked's body, inline in dat_evd_dequeue: every poll, empty or
// not, comes through here, and the call cost as much as the checks.
__attribute__((always_inline)) inline void fill_locked(Evd &evd) {
    while (!evd.spill.empty() && evd.count < capacity(evd)) {
        ring_push_locked(evd, evd.spill.front());
        evd.spill.pop_front();
    }
    if (!evd.cq || !evd.spill.empty())
        return;
    Completion c[32];
    while (evd.count < capacity(evd)) {
        int room = static_cast<int>(std::min<std::size_t>(32, capacity(evd) - evd.count));
        int n = evd.ia->transport->cq_read(evd, c, room);
        if (n <= 0)
            break;
        detail::consume_locked(evd, c, n);
        if (n < room)
            break; // a short read emptied the queue: a second poll (a syscall on tcp) would find nothing
    }
}

} // namespace

void evd_fill_locked(Evd &evd) { fill_locked(evd); }

// Every completion the queue holds, whatever the room: used before an EP's
// records go away and before a disconnect event, so that ordering holds.
void evd_drain_all_locked(Evd &evd) {
    if (!evd.cq)
        return;
    Completion c[32];
    for (;;) {
        int n = evd.ia->transport->cq_read(evd, c, 32);
        if (n <= 0)
            break;
        dto_consume_locked(evd, c, n);
    }
}

// The CNO to trigger for what just reached the FIFO, decided under evd.mu
// together with the push (a waiter that takes the event right after must
// not see the CNO fire: dat_evd_wait(3DAT) preempts it). CNOs are
// edge-triggered: `arrived` says whether a new event came in.
static Cno *cno_to_notify_locked(Evd &evd, bool arrived) {
    Cno *cno = arrived && evd.cno && evd.enabled && !evd.waiter ? evd.cno : nullptr;
    if (cno)
        cno->notifying.fetch_add(1); // under the lock that detaching it takes
    return cno;
}

static void wake_and_notify(Evd &evd, Cno *cno) {
    signal_fd(evd.wake_fd);
    if (cno)
        cno_notify(*cno, evd); // drops the count cno_to_notify_locked took
}

bool evd_collect(Evd &evd) {
    std::lock_guard<Lock> lock(evd.mu);
    const std::size_t before = evd.count;
    evd_drain_all_locked(evd);
    return evd.count != before;
}

void evd_wake(Evd &evd) {
    // Completions may have arrived in the transport's queue: pull them in
    // (a transport's "maybe" wake-up must not reach the CNO by itself).
    Cno *cno;
    {
        std::lock_guard<Lock> lock(evd.mu);
        std::size_t before = evd.count;
        if (evd.cno && evd.enabled && !evd.waiter)
            evd_fill_locked(evd);
        cno = cno_to_notify_locked(evd, evd.count > before);
    }
    wake_and_notify(evd, cno);
}

void evd_wake_waiters(Evd &evd) {
    if (evd.inside.load(std::memory_order_seq_cst) > 0)
        signal_fd(evd.wake_fd);
}

void evd_request_done(Evd &evd, Op &op, DAT_DTO_COMPLETION_STATUS status, bool silent, bool flushing) {
    Cno *cno;
    {
        std::lock_guard<Lock> lock(evd.mu);
        const std::size_t before = evd.count + evd.spill.size();
        request_done_locked(evd, op, status, 0, silent, flushing);
        cno = cno_to_notify_locked(evd, evd.count + evd.spill.size() > before);
    }
    wake_and_notify(evd, cno);
}

void evd_push(Evd &evd, const DAT_EVENT &event) {
    bool overflow = false;
    Cno *cno;
    {
        std::lock_guard<Lock> lock(evd.mu);
        DAT_EVENT e = event;
        e.evd_handle = &evd;
        if (evd.spill.empty() && evd.count < capacity(evd)) {
            ring_push_locked(evd, e);
        } else {
            // Spilled completions that still fit within qlen are not an
            // overflow: only more events than qlen are.
            overflow = evd.count + evd.spill.size() >= capacity(evd) && !evd.overflowed;
            evd.overflowed = evd.overflowed || overflow;
            evd.spill.push_back(e);
        }
        cno = cno_to_notify_locked(evd, true);
    }
    wake_and_notify(evd, cno);
    if (overflow && !(evd.flags & DAT_EVD_ASYNC_FLAG)) {
        DAT2_ERR("EVD %p: queue of %d events overflowed; events kept beyond qlen\n", (void *)&evd, evd.qlen);
        post_async(*evd.ia, DAT_ASYNC_ERROR_EVD_OVERFLOW, &evd, DAT_EVD_OVERFLOW_ERROR);
    }
}

namespace {
// Asynchronous events are rare; one lock guards every IA's async_evd and the
// IAs that borrowed an EVD of another IA.
std::mutex async_mu;
std::multimap<Evd *, Ia *> &async_borrowers() {
    static auto *m = new std::multimap<Evd *, Ia *>;
    return *m;
}
// Held across fork() (docs/fork.md): registered at load, as the arena's.
[[maybe_unused]] const int fork_handlers =
    pthread_atfork([] { async_mu.lock(); }, [] { async_mu.unlock(); }, [] { async_mu.unlock(); });
} // namespace

void post_async(Ia &ia, DAT_EVENT_NUMBER number, DAT_HANDLE object, DAT_COUNT reason) {
    DAT_EVENT e;
    std::memset(&e, 0, sizeof e);
    e.event_number = number;
    e.event_data.asynch_error_event_data.dat_handle = object;
    e.event_data.asynch_error_event_data.reason = reason;
    std::lock_guard<std::mutex> lock(async_mu);
    if (ia.async_evd)
        evd_push(*ia.async_evd, e);
}

void async_evd_borrow(Ia &ia, Evd &evd) {
    std::lock_guard<std::mutex> lock(async_mu);
    evd.users.fetch_add(1); // dat_evd_free: in use
    async_borrowers().emplace(&evd, &ia);
    ia.async_evd = &evd;
    ia.async_evd_owned = false;
}

void async_evd_return(Ia &ia) {
    std::lock_guard<std::mutex> lock(async_mu);
    if (ia.async_evd_owned || !ia.async_evd)
        return;
    auto range = async_borrowers().equal_range(ia.async_evd);
    for (auto it = range.first; it != range.second; ++it)
        if (it->second == &ia) {
            async_borrowers().erase(it);
            break;
        }
    ia.async_evd->users.fetch_sub(1);
    ia.async_evd = nullptr;
}

// ---- connection EVDs of other IAs ----------------------------------------------

namespace {

// Connection EVDs of another IA. dat_ep_create(3DAT) asks only for "the
// Event Dispatcher where Connection events are reported", and dat_ia_open(3DAT)
// lets IAs of one Provider share an asynchronous EVD: connection events are
// the kit's own (no transport queue behind them), so an EVD of any IA of the
// same Provider may take them (dapltest -T L -w N gives every IA's EPs the
// connection EVD of the first). That IA may close first (abruptly):
// evd_release then takes the EVD from these EPs under foreign_mu, which
// also covers every event posted to a foreign EVD.
std::mutex foreign_mu;
std::unordered_multimap<Evd *, Ep *> &foreign_users() {
    static auto *users = new std::unordered_multimap<Evd *, Ep *>; // outlives every IA
    return *users;
}

} // namespace

DAT_RETURN connect_evd_cast(const Ia &ia, DAT_EVD_HANDLE h, Evd *&out) {
    if (DAT_RETURN r = handle_cast(h, out, DAT_INVALID_HANDLE_EVD_CONN))
        return r;
    if (out->provider != ia.provider)
        return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CONN);
    return DAT_SUCCESS;
}

void register_connect_evd(Ep &ep) {
    ep.connect_evd_foreign = ep.connect_evd && ep.connect_evd->ia != ep.ia;
    if (ep.connect_evd_foreign) {
        std::lock_guard<std::mutex> lock(foreign_mu);
        foreign_users().emplace(ep.connect_evd, &ep);
    }
}

void release_connect_evd(Ep &ep) {
    if (!ep.connect_evd_foreign) {
        if (ep.connect_evd)
            ep.connect_evd->users.fetch_sub(1);
        return;
    }
    std::lock_guard<std::mutex> lock(foreign_mu);
    if (Evd *evd = ep.connect_evd) { // not taken by evd_release yet
        auto range = foreign_users().equal_range(evd);
        for (auto it = range.first; it != range.second; ++it)
            if (it->second == &ep) {
                foreign_users().erase(it);
                break;
            }
        evd->users.fetch_sub(1);
    }
    ep.connect_evd_foreign = false;
}

void post_connection_evd(Ep &ep, const DAT_EVENT &e) {
    if (ep.connect_evd_foreign) {
        std::lock_guard<std::mutex> lock(foreign_mu);
        if (ep.connect_evd)
            evd_push(*ep.connect_evd, e);
    } else if (ep.connect_evd) {
        evd_push(*ep.connect_evd, e);
    }
}

// `evd` goes away: EPs of other IAs that report their connection events
// there lose it.
static void forget_connect_evd(Evd &evd) {
    std::lock_guard<std::mutex> lock(foreign_mu);
    auto range = foreign_users().equal_range(&evd);
    for (auto it = range.first; it != range.second; ++it) {
        it->second->connect_evd = nullptr; // its connection events go nowhere now
        evd.users.fetch_sub(1);
    }
    foreign_users().erase(range.first, range.second);
}

void evd_release(Evd &evd) {
    forget_connect_evd(evd); // EPs of other IAs reporting here
    // A thread still blocked in dat_evd_wait (abrupt dat_ia_close) returns
    // DAT_ABORT; the EVD goes away only once it has left.
    evict_waiters(evd.aborted, evd.inside, evd.wake_fd);
    if (evd.cno && evd.cno->evds.fetch_sub(1) == 1)
        signal_fd(evd.cno->fd); // its last EVD is gone: release CNO waiters
    if (evd.cq)
        evd.ia->transport->cq_close(evd);
    if (evd.wake_fd >= 0)
        ::close(evd.wake_fd);
    {
        std::lock_guard<std::mutex> lock(async_mu);
        if (evd.ia->async_evd == &evd)
            evd.ia->async_evd = nullptr;
        // IAs that borrowed it (their owner closed abruptly) lose it.
        auto range = async_borrowers().equal_range(&evd);
        for (auto it = range.first; it != range.second; ++it)
            it->second->async_evd = nullptr;
        async_borrowers().erase(range.first, range.second);
    }
    ia_untrack(*evd.ia, &evd);
    destroy_object(&evd);
}

namespace slot {

DAT_RETURN evd_create(DAT_IA_HANDLE ia_handle, DAT_COUNT qlen, DAT_CNO_HANDLE cno_handle, DAT_EVD_FLAGS flags,
                      DAT_EVD_HANDLE *evd_out) {
    return guarded("dat_evd_create", [&]() -> DAT_RETURN {
        Ia *ia;
        if (DAT_RETURN r = handle_cast(ia_handle, ia))
            return r;
        if (qlen <= 0 || qlen > kMaxEvdQlen)
            return invalid_arg(2);
        Cno *cno = nullptr;
        if (cno_handle != DAT_HANDLE_NULL)
            if (DAT_RETURN r = handle_cast_in(ia, cno_handle, cno))
                return r;
        if (flags == 0 || (flags & ~kValidFlags))
            return invalid_arg(4);
        if (!evd_out)
            return invalid_arg(5);
        if (!ia_has_room(*ia, DAT_HANDLE_TYPE_EVD, ia->caps.max_evds))
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
        Evd *evd = make_object<Evd>(ia->provider, ia);
        if (!evd)
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        evd->flags = flags;
        evd->qlen = qlen;
        try {
            evd->ring.resize(ring_storage(qlen));
        } catch (...) {
            destroy_object(evd);
            throw;
        }
        evd->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (evd->wake_fd < 0) {
            destroy_object(evd);
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
        }
        if (flags & (DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG)) {
            if (DAT_RETURN r = ia->transport->cq_open(*evd, evd->cq)) {
                ::close(evd->wake_fd);
                destroy_object(evd);
                return r;
            }
        }
        evd->cno = cno;
        evd_cno_changed_locked(*evd);
        if (cno)
            cno->evds.fetch_add(1);
        ia_track(*ia, evd);
        if (cno && evd->cq)
            ia->transport->cq_cno_changed(*evd);
        publish(evd);
        *evd_out = evd;
        return DAT_SUCCESS;
    });
}

DAT_RETURN evd_query(DAT_EVD_HANDLE evd_handle, DAT_EVD_PARAM_MASK mask, DAT_EVD_PARAM *param) {
    return guarded("dat_evd_query", [&]() -> DAT_RETURN {
        Evd *evd;
        if (DAT_RETURN r = handle_cast(evd_handle, evd))
            return r;
        if (!param)
            return invalid_arg(3);
        if (mask & ~DAT_EVD_FIELD_ALL)
            return invalid_arg(2);
        std::lock_guard<Lock> lock(evd->mu);
        if (mask & DAT_EVD_FIELD_IA_HANDLE)
            ia_handle_for_consumer(evd->ia, &param->ia_handle);
        if (mask & DAT_EVD_FIELD_EVD_QLEN)
            param->evd_qlen = evd->qlen;
        if (mask & DAT_EVD_FIELD_EVD_STATE)
            param->evd_state =
                static_cast<DAT_EVD_STATE>((evd->enabled ? DAT_EVD_STATE_ENABLED : DAT_EVD_STATE_DISABLED) |
                                           (evd->waitable ? DAT_EVD_STATE_WAITABLE : DAT_EVD_STATE_UNWAITABLE));
        if (mask & DAT_EVD_FIELD_CNO)
            param->cno_handle = evd->cno;
        if (mask & DAT_EVD_FIELD_EVD_FLAGS)
            param->evd_flags = evd->flags;
        return DAT_SUCCESS;
    });
}

DAT_RETURN evd_modify_cno(DAT_EVD_HANDLE evd_handle, DAT_CNO_HANDLE cno_handle) {
    return guarded("dat_evd_modify_cno", [&]() -> DAT_RETURN {
        Evd *evd;
        if (DAT_RETURN r = handle_cast(evd_handle, evd))
            return r;
        Cno *cno = nullptr;
        if (cno_handle != DAT_HANDLE_NULL)
            if (DAT_RETURN r = handle_cast_in(evd->ia, cno_handle, cno))
                return r;
        bool changed;
        {
            std::lock_guard<Lock> lock(evd->mu);
            if (evd->cno)
                evd->cno->evds.fetch_sub(1);
            evd->cno = cno;
            changed = evd_cno_changed_locked(*evd);
            if (cno)
                cno->evds.fetch_add(1);
        }
        if (changed && evd->cq)
            evd->ia->transport->cq_cno_changed(*evd);
        return DAT_SUCCESS;
    });
}

namespace {

// A disabled EVD triggers no CNO: the transport stops watching its queues
// for it.
DAT_RETURN set_evd_enabled(const char *call, DAT_EVD_HANDLE evd_handle, bool enabled) {
    return guarded(call, [&]() -> DAT_RETURN {
        Evd *evd;
        if (DAT_RETURN r = handle_cast(evd_handle, evd))
            return r;
        bool changed;
        {
            std::lock_guard<Lock> lock(evd->mu);
            evd->enabled = enabled;
            changed = evd_cno_changed_locked(*evd);
        }
        if (changed && evd->cq)
            evd->ia->transport->cq_cno_changed(*evd);
        return DAT_SUCCESS;
    });
}

} // namespace

DAT_RETURN evd_enable(DAT_EVD_HANDLE evd_handle) { return set_evd_enabled("dat_evd_enable", evd_handle, true); }

DAT_RETURN evd_disable(DAT_EVD_HANDLE evd_handle) { return set_evd_enabled("dat_evd_disable", evd_handle, false); }

DAT_RETURN evd_set_unwaitable(DAT_EVD_HANDLE evd_handle) {
    DAT_RETURN r = set_evd_flag(evd_handle, &Evd::waitable, false);
    if (r == DAT_SUCCESS)
        signal_fd(static_cast<Evd *>(evd_handle)->wake_fd); // a blocked waiter returns
    return r;
}

DAT_RETURN evd_clear_unwaitable(DAT_EVD_HANDLE evd_handle) { return set_evd_flag(evd_handle, &Evd::waitable, true); }

DAT_RETURN evd_dequeue(DAT_EVD_HANDLE evd_handle, DAT_EVENT *event) {
    // The body inline in guarded(): a poll's call costs as much as its checks.
    return guarded("dat_evd_dequeue", [&]() __attribute__((always_inline)) -> DAT_RETURN {
        Evd *evd;
        if (DAT_RETURN r = handle_cast(evd_handle, evd))
            return r;
        if (!event)
            return invalid_arg(2);
        std::lock_guard<Lock> lock(evd->mu);
        if (DAT_RETURN r = evd_check_dequeuer(*evd))
            return r;
        // Under evd->mu: a plain increment, no locked instruction.
        evd->dequeues.store(evd->dequeues.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        if (evd->count == 0) {
            // Nothing queued: the first completion read is the oldest event,
            // so it is built straight into the caller's buffer (no FIFO slot,
            // no second copy); whatever else the read brings queues behind it.
            // Cleared on every way out, a throw included: a later fill must
            // never write into this call's buffer.
            struct ClearDirect {
                Evd &evd;
                ~ClearDirect() { evd.direct = nullptr; }
            } clear{*evd};
            const bool direct = evd->spill.empty();
            if (direct)
                evd->direct = event;
            fill_locked(*evd);
            if (direct && !evd->direct)
                return DAT_SUCCESS;
        }
        if (evd->count == 0)
            return kQueueEmpty;
        ring_pop_locked(*evd, *event);
        return DAT_SUCCESS;
    });
}

DAT_RETURN evd_wait(DAT_EVD_HANDLE evd_handle, DAT_TIMEOUT timeout, DAT_COUNT threshold, DAT_EVENT *event,
                    DAT_COUNT *nmore) {
    return guarded("dat_evd_wait", [&]() -> DAT_RETURN {
        Evd *evd;
        if (DAT_RETURN r = handle_cast(evd_handle, evd))
            return r;
        if (!event)
            return invalid_arg(4);
        ScopedCount inside(evd->inside);
        std::unique_lock<Lock> lock(evd->mu);
        if (threshold <= 0 || threshold > evd->qlen)
            return invalid_arg(3);
        if (threshold > 1 && evd->notify_streams.load() > 0)
            return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_CONFIG_NOTIFY);
        if (!evd->waitable)
            return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE);
        if (DAT_RETURN r = evd_check_dequeuer(*evd))
            return r;
        evd->waiter = true;
        const Deadline deadline = Deadline::after_us(timeout);
        DAT_RETURN result = DAT_SUCCESS;
        // A transport may keep saying "read again" (cq_arm false) while
        // nothing comes: tcp while a message waits for its receive. After
        // kRereadSpin of that, the rounds wait on the fds for at most 1 ms.
        constexpr auto kRereadSpin = std::chrono::microseconds(200);
        std::size_t seen = evd->count;
        bool rereading = false;
        std::chrono::steady_clock::time_point rereading_since{};
        for (;;) {
            evd_fill_locked(*evd);
            if (evd->count >= static_cast<std::size_t>(threshold)) {
                ring_pop_locked(*evd, *event);
                break;
            }
            if (evd->count != seen) {
                seen = evd->count;
                rereading = false;
            }
            if (!evd->waitable) {
                result = DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE);
                break;
            }
            if (evd->aborted.load()) {
                result = DAT_ERROR(DAT_ABORT, 0); // dat_ia_close(3DAT): waiters return DAT_ABORT
                break;
            }
            if (deadline.expired()) {
                result = kTimeoutExpired;
                break;
            }
            const int ms = deadline.poll_ms();
            pollfd fds[2] = {{evd->wake_fd, POLLIN, 0}, {-1, POLLIN, 0}};
            int nfds = 1;
            bool may_block = true;
            if (evd->cq) {
                // Under the lock, as in dat_cno_wait: a transport may change
                // what stands behind the EVD's queue (ofi closes a queue
                // whose connections are gone) only while holding it.
                fds[1].fd = evd->ia->transport->cq_fd(*evd);
                nfds = fds[1].fd >= 0 ? 2 : 1;
                // fd < 0: the transport wakes the EVD itself when completions arrive.
                may_block = evd->ia->transport->cq_arm(*evd);
            }
            lock.unlock();
            int wait_ms = ms;
            if (may_block) {
                rereading = false;
            } else {
                const auto now = std::chrono::steady_clock::now();
                if (!rereading) {
                    rereading = true;
                    rereading_since = now;
                }
                wait_ms = now - rereading_since < kRereadSpin ? 0 : min_poll_ms(ms, 1);
            }
            if (wait_ms != 0) {
                int rc = ::poll(fds, nfds, wait_ms);
                if (rc < 0 && errno != EINTR) {
                    lock.lock();
                    result = DAT_ERROR(DAT_INTERNAL_ERROR, 0);
                    break;
                }
            }
            drain_fd(evd->wake_fd);
            lock.lock();
        }
        evd->waiter = false;
        if (nmore)
            *nmore = static_cast<DAT_COUNT>(evd->count + evd->spill.size());
        return result;
    });
}

DAT_RETURN evd_resize(DAT_EVD_HANDLE evd_handle, DAT_COUNT qlen) {
    return guarded("dat_evd_resize", [&]() -> DAT_RETURN {
        Evd *evd;
        if (DAT_RETURN r = handle_cast(evd_handle, evd))
            return r;
        if (qlen <= 0 || qlen > kMaxEvdQlen)
            return invalid_arg(2);
        std::lock_guard<Lock> lock(evd->mu);
        if (evd->waiter)
            return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
        if (static_cast<std::size_t>(qlen) < evd->count + evd->spill.size())
            return DAT_ERROR(DAT_INVALID_STATE, 0);
        std::vector<DAT_EVENT> ring(ring_storage(qlen));
        std::size_t n = 0;
        while (evd->count)
            ring_pop_locked(*evd, ring[n++]);
        while (!evd->spill.empty()) {
            ring[n++] = evd->spill.front();
            evd->spill.pop_front();
        }
        evd->ring.swap(ring);
        evd->head = 0;
        evd->count = n;
        evd->qlen = qlen;
        evd->overflowed = false;
        return DAT_SUCCESS;
    });
}

DAT_RETURN evd_post_se(DAT_EVD_HANDLE evd_handle, const DAT_EVENT *event) {
    return guarded("dat_evd_post_se", [&]() -> DAT_RETURN {
        Evd *evd;
        if (DAT_RETURN r = handle_cast(evd_handle, evd))
            return r;
        if (!event)
            return invalid_arg(2);
        if (event->event_number != DAT_SOFTWARE_EVENT)
            return invalid_arg(2);
        if (!(evd->flags & DAT_EVD_SOFTWARE_FLAG))
            return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
        Cno *cno;
        {
            std::lock_guard<Lock> lock(evd->mu);
            if (evd->count + evd->spill.size() >= capacity(*evd)) {
                return DAT_ERROR(DAT_QUEUE_FULL, 0);
            }
            DAT_EVENT e;
            std::memset(&e, 0, sizeof e);
            e.event_number = DAT_SOFTWARE_EVENT;
            e.evd_handle = evd;
            e.event_data.software_event_data = event->event_data.software_event_data;
            ring_push_locked(*evd, e);
            cno = cno_to_notify_locked(*evd, true);
        }
        wake_and_notify(*evd, cno);
        return DAT_SUCCESS;
    });
}

DAT_RETURN evd_free(DAT_EVD_HANDLE evd_handle) {
    return guarded("dat_evd_free", [&]() -> DAT_RETURN {
        Evd *evd;
        if (DAT_RETURN r = handle_cast(evd_handle, evd))
            return r;
        if (evd->users.load() != 0)
            return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_IN_USE);
        // Requests whose arrival events go with the EVD: nobody can answer
        // them now, and their requesters (and an RSP's Endpoint, Passive
        // Connection Pending) would wait for ever. The Provider rejects them.
        std::vector<DAT_CR_HANDLE> unread;
        {
            std::lock_guard<Lock> lock(evd->mu);
            if (evd->waiter)
                return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
            auto note = [&](const DAT_EVENT &e) {
                if (e.event_number == DAT_CONNECTION_REQUEST_EVENT)
                    unread.push_back(e.event_data.cr_arrival_event_data.cr_handle);
            };
            for (std::size_t i = 0; i < evd->count; ++i)
                note(evd->ring[(evd->head + i) & (evd->ring.size() - 1)]);
            for (const DAT_EVENT &e : evd->spill)
                note(e);
        }
        for (DAT_CR_HANDLE h : unread) {
            Cr *cr;
            if (handle_cast(h, cr) == DAT_SUCCESS && cr_claim(*cr))
                cr_refuse_unanswerable(*cr);
        }
        evd_release(*evd);
        return DAT_SUCCESS;
    });
}

} // namespace slot
} // namespace dat2::kit
