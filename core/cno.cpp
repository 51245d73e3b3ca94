// SPDX-License-Identifier: BSD-3-Clause
// Consumer notification objects. A CNO is triggered when an enabled EVD
// linked to it gets an event while nobody waits on that EVD directly.
// Provider and software events trigger it at once (and call the proxy
// agent); DTO completions are noticed by a waiter, which polls the linked
// EVDs' completion fds too.
#include "boundary.hpp"
#include "slots.hpp"
#include "wait.hpp"

#include <cerrno>
#include <poll.h>
#include <thread>
#include <sys/eventfd.h>
#include <unistd.h>

namespace dat2::kit {

namespace {

// EVDs of the CNO's IA that feed it.
std::vector<Evd *> linked_evds(Cno &cno) {
    std::vector<Evd *> out;
    std::lock_guard<std::mutex> lock(cno.ia->mu);
    for (ObjectHeader *o : cno.ia->objects.of_type(DAT_HANDLE_TYPE_EVD))
        if (static_cast<Evd *>(o)->cno == &cno)
            out.push_back(static_cast<Evd *>(o));
    return out;
}

// dat_cno_create(3DAT), dat_cno_modify_agent(3DAT): DAT_INVALID_PARAMETER
// for an invalid agent: instance data for no function to receive it.
bool agent_invalid(const DAT_OS_WAIT_PROXY_AGENT &agent) { return !agent.proxy_agent_func && agent.instance_data; }

DAT_RETURN make_cno(Ia *ia, DAT_OS_WAIT_PROXY_AGENT agent, Cno **out) {
    Cno *cno = make_object<Cno>(ia->provider, ia);
    if (!cno)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    cno->agent = agent;
    cno->fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (cno->fd < 0) {
        destroy_object(cno);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    ia_track(*ia, cno);
    publish(cno);
    *out = cno;
    return DAT_SUCCESS;
}

} // namespace

namespace {

// The agent calls this thread is in, innermost first: an agent may free its
// own CNO (dat_evd_modify_cno to NULL, then dat_cno_free), which must not
// wait for the notification it runs in, and that notification must not
// touch the CNO afterwards.
struct AgentCall {
    Cno *cno;
    bool freed;
    AgentCall *outer;
};
thread_local AgentCall *t_agent_calls = nullptr;

} // namespace

void cno_notify(Cno &cno, Evd &evd) {
    DAT_OS_WAIT_PROXY_AGENT agent;
    {
        std::lock_guard<std::mutex> lock(cno.mu);
        cno.triggered = &evd;
        agent = cno.agent;
        // dat_cno_create(3DAT): once invoked, the agent is no longer
        // associated with the CNO.
        cno.agent = DAT_OS_WAIT_PROXY_AGENT{nullptr, nullptr};
    }
    signal_fd(cno.fd);
    if (!agent.proxy_agent_func) {
        cno.notifying.fetch_sub(1);
        return;
    }
    // Still counted while the agent runs: a dat_cno_free in another thread
    // returns only once the agent has, and the consumer may then free what
    // the agent uses.
    AgentCall call{&cno, false, t_agent_calls};
    t_agent_calls = &call;
    agent.proxy_agent_func(agent.instance_data, &evd);
    t_agent_calls = call.outer;
    if (!call.freed)
        cno.notifying.fetch_sub(1);
}

void cno_release(Cno &cno) {
    evict_waiters(cno.aborted, cno.inside, cno.fd);
    for (Evd *evd : linked_evds(cno)) {
        std::lock_guard<Lock> lock(evd->mu);
        evd->cno = nullptr;
        evd->feeds_cno.store(false, std::memory_order_relaxed);
    }
    // A notification taken before the EVDs let go may still be on its way,
    // or running the agent: not those of this thread (an agent freeing its
    // own CNO), which then leave the CNO alone.
    int own = 0;
    for (AgentCall *c = t_agent_calls; c; c = c->outer)
        if (c->cno == &cno) {
            c->freed = true;
            ++own;
        }
    wait_count_at_most(cno.notifying, own);
    if (cno.fd >= 0)
        ::close(cno.fd);
    ia_untrack(*cno.ia, &cno);
    destroy_object(&cno);
}

namespace slot {

DAT_RETURN cno_create(DAT_IA_HANDLE ia_handle, DAT_OS_WAIT_PROXY_AGENT agent, DAT_CNO_HANDLE *cno_out) {
    return guarded("dat_cno_create", [&]() -> DAT_RETURN {
        Ia *ia;
        if (DAT_RETURN r = handle_cast(ia_handle, ia))
            return r;
        if (agent_invalid(agent))
            return invalid_arg(2);
        if (!cno_out)
            return invalid_arg(3);
        Cno *cno;
        if (DAT_RETURN r = make_cno(ia, agent, &cno))
            return r;
        *cno_out = cno;
        return DAT_SUCCESS;
    });
}

DAT_RETURN cno_fd_create(DAT_IA_HANDLE ia_handle, DAT_FD *fd, DAT_CNO_HANDLE *cno_out) {
    return guarded("dat_cno_fd_create", [&]() -> DAT_RETURN {
        Ia *ia;
        if (DAT_RETURN r = handle_cast(ia_handle, ia))
            return r;
        if (!fd)
            return invalid_arg(2);
        if (!cno_out)
            return invalid_arg(3);
        Cno *cno;
        if (DAT_RETURN r = make_cno(ia, DAT_OS_WAIT_PROXY_AGENT{nullptr, nullptr}, &cno))
            return r;
        cno->fd_cno = true;
        *fd = cno->fd;
        *cno_out = cno;
        return DAT_SUCCESS;
    });
}

DAT_RETURN cno_trigger(DAT_CNO_HANDLE cno_handle, DAT_EVD_HANDLE *evd_out) {
    Cno *cno;
    if (DAT_RETURN r = handle_cast(cno_handle, cno))
        return r;
    if (!evd_out)
        return invalid_arg(2);
    drain_fd(cno->fd);
    std::lock_guard<std::mutex> lock(cno->mu);
    *evd_out = cno->triggered;
    cno->triggered = nullptr;
    if (!*evd_out)
        return kQueueEmpty;
    return DAT_SUCCESS;
}

DAT_RETURN cno_modify_agent(DAT_CNO_HANDLE cno_handle, DAT_OS_WAIT_PROXY_AGENT agent) {
    Cno *cno;
    if (DAT_RETURN r = handle_cast(cno_handle, cno))
        return r;
    if (agent_invalid(agent))
        return invalid_arg(2);
    std::lock_guard<std::mutex> lock(cno->mu);
    cno->agent = agent;
    return DAT_SUCCESS;
}

DAT_RETURN cno_query(DAT_CNO_HANDLE cno_handle, DAT_CNO_PARAM_MASK mask, DAT_CNO_PARAM *param) {
    return guarded("dat_cno_query", [&]() -> DAT_RETURN {
        Cno *cno;
        if (DAT_RETURN r = handle_cast(cno_handle, cno))
            return r;
        if (!param)
            return invalid_arg(3);
        // The mask's values are not one bit a field (DAT_CNO_FIELD_PROXY is
        // 3, DAT_CNO_FIELD_ALL 4): any of them reports everything; bits
        // beyond them are DAT_INVALID_PARAMETER, as in the other queries.
        constexpr unsigned kCnoFields = DAT_CNO_FIELD_IA_HANDLE | DAT_CNO_FIELD_PROXY_TYPE | DAT_CNO_FIELD_ALL;
        if (static_cast<unsigned>(mask) & ~kCnoFields)
            return invalid_arg(2);
        std::lock_guard<std::mutex> lock(cno->mu);
        ia_handle_for_consumer(cno->ia, &param->ia_handle);
        if (cno->fd_cno) {
            param->proxy_type = DAT_PROXY_TYPE_FD;
            param->proxy.fd = cno->fd;
        } else {
            // dat_cno_query(3DAT): DAT_OS_WAIT_PROXY_AGENT_NULL when the CNO
            // has no agent (never given one, given NULL, or its agent ran).
            // The type then says NONE too, and the agent still reads as
            // NULL, for programs that look at either.
            const bool none = !cno->agent.proxy_agent_func && !cno->agent.instance_data;
            param->proxy_type = none ? DAT_PROXY_TYPE_NONE : DAT_PROXY_TYPE_AGENT;
            param->proxy.agent = cno->agent;
        }
        return DAT_SUCCESS;
    });
}

DAT_RETURN cno_free(DAT_CNO_HANDLE cno_handle) {
    return guarded("dat_cno_free", [&]() -> DAT_RETURN {
        Cno *cno;
        if (DAT_RETURN r = handle_cast(cno_handle, cno))
            return r;
        {
            std::lock_guard<std::mutex> lock(cno->mu);
            if (cno->waiting)
                return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_CNO_IN_USE);
        }
        if (cno->evds.load() != 0)
            return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_CNO_IN_USE);
        cno_release(*cno);
        return DAT_SUCCESS;
    });
}

DAT_RETURN cno_wait(DAT_CNO_HANDLE cno_handle, DAT_TIMEOUT timeout, DAT_EVD_HANDLE *evd_out) {
    return guarded("dat_cno_wait", [&]() -> DAT_RETURN {
        Cno *cno;
        if (DAT_RETURN r = handle_cast(cno_handle, cno))
            return r;
        if (!evd_out)
            return invalid_arg(3);
        const Deadline deadline = Deadline::after_us(timeout);
        ScopedCount inside(cno->inside);
        {
            std::lock_guard<std::mutex> lock(cno->mu);
            cno->waiting = true;
        }
        const bool had_evds = cno->evds.load() > 0;
        DAT_RETURN result = kQueueEmpty;
        Evd *hit = nullptr;
        for (;;) {
            {
                std::lock_guard<std::mutex> lock(cno->mu);
                if (cno->triggered) {
                    hit = cno->triggered;
                    cno->triggered = nullptr;
                }
            }
            // dat_cno_wait(3DAT): waiters are released with a NULL EVD when
            // the IA goes away or when all its EVDs are freed.
            if (cno->aborted.load() || (had_evds && cno->evds.load() == 0)) {
                result = DAT_SUCCESS;
                hit = nullptr;
                break;
            }
            std::vector<Evd *> evds = linked_evds(*cno);
            std::vector<pollfd> fds{{cno->fd, POLLIN, 0}};
            // The EVDs this wait sleeps for count it in their `inside`, as
            // dat_evd_wait does: a transport whose queues have no fd (cq_fd
            // -1) wakes an EVD (evd_wake, which triggers the CNO) only while
            // someone is inside; freeing one wakes us through its wake_fd.
            std::vector<Evd *> watched;
            bool may_block = true;
            for (Evd *evd : evds) {
                if (hit)
                    break;
                std::lock_guard<Lock> lock(evd->mu);
                if (!evd->enabled || evd->waiter)
                    continue;
                // Counted before the read, as dat_evd_wait is: a post that
                // finds nobody counted (evd_wake_waiters) came before it.
                if (evd->cq)
                    evd->inside.fetch_add(1);
                std::size_t before = evd->count;
                evd_fill_locked(*evd);
                if (evd->count > before) { // new completions: an edge
                    if (evd->cq)
                        evd->inside.fetch_sub(1);
                    hit = evd;
                    break;
                }
                if (evd->cq) {
                    watched.push_back(evd);
                    fds.push_back({evd->wake_fd, POLLIN, 0});
                    int fd = evd->ia->transport->cq_fd(*evd);
                    if (fd >= 0)
                        fds.push_back({fd, POLLIN, 0});
                    if (!evd->ia->transport->cq_arm(*evd))
                        may_block = false;
                }
            }
            bool failed = false;
            if (!hit && !deadline.expired()) {
                const int ms = may_block ? deadline.poll_ms() : min_poll_ms(deadline.poll_ms(), 1);
                failed = ::poll(fds.data(), fds.size(), ms) < 0 && errno != EINTR;
                drain_fd(cno->fd);
            }
            for (Evd *evd : watched) {
                drain_fd(evd->wake_fd);
                evd->inside.fetch_sub(1);
            }
            if (hit) {
                result = DAT_SUCCESS;
                break;
            }
            if (failed || deadline.expired())
                break;
        }
        {
            std::lock_guard<std::mutex> lock(cno->mu);
            cno->waiting = false;
        }
        *evd_out = hit;
        return result;
    });
}

} // namespace slot
} // namespace dat2::kit
