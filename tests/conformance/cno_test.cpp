// SPDX-License-Identifier: BSD-3-Clause
// Consumer Notification Object: dat_cno_create(3DAT), dat_cno_query(3DAT),
// dat_cno_modify_agent(3DAT), dat_cno_wait(3DAT), dat_cno_free(3DAT), and its EVD side,
// dat_evd_modify_cno(3DAT); DAT 2.0's dat_cno_fd_create and dat_cno_trigger (dat.h; no
// man page: a CNO whose file descriptor is readable while it is triggered, and the call
// that says which EVD triggered it). Software events only, no connections.
#include "conformance.hpp"

#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using conformance::CnoWait;
using conformance::HandleKind;
using conformance::kLongWaitUs;
using conformance::no_agent;
using conformance::returns_within;
using conformance::software_event;
using conformance::start_cno_wait;
using conformance::still_blocked;
using Clock = std::chrono::steady_clock;

// A junk value to see that dat_cno_wait writes its evd_handle output.
DAT_EVD_HANDLE not_written() { return reinterpret_cast<DAT_EVD_HANDLE>(std::uintptr_t(0x5a5a5a5a)); }

// Records OS Wait Proxy Agent invocations.
struct AgentLog {
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<std::pair<void *, DAT_EVD_HANDLE>> calls;

    static void DAT_API record(DAT_PVOID instance, DAT_EVD_HANDLE evd) {
        auto *log = static_cast<AgentLog *>(instance);
        std::lock_guard<std::mutex> lock(log->mutex);
        log->calls.emplace_back(instance, evd);
        log->cv.notify_all();
    }
    DAT_OS_WAIT_PROXY_AGENT agent() { return DAT_OS_WAIT_PROXY_AGENT{this, &AgentLog::record}; }
    bool wait_calls(std::size_t n, std::chrono::milliseconds limit) {
        std::unique_lock<std::mutex> lock(mutex);
        return cv.wait_for(lock, limit, [&] { return calls.size() >= n; });
    }
};

void DAT_API other_agent_func(DAT_PVOID, DAT_EVD_HANDLE) {}

::testing::AssertionResult has_no_agent(const DAT_CNO_PARAM &p) {
    // dat_cno_query(3DAT): "A value of DAT_OS_WAIT_PROXY_AGENT_NULL in cno_param indicates that
    // there are no Proxy Agent associated with the CNO." DAT 2.0 adds proxy_type, whose
    // DAT_PROXY_TYPE_NONE says the same (FD only for dat_cno_fd_create's CNOs); the agent
    // itself must read as NULL too, for programs that look at it alone.
    if (p.proxy_type == DAT_PROXY_TYPE_NONE && p.proxy.agent.proxy_agent_func == nullptr &&
        p.proxy.agent.instance_data == nullptr)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "proxy_type " << p.proxy_type << ", agent {instance_data "
                                         << p.proxy.agent.instance_data << ", proxy_agent_func "
                                         << reinterpret_cast<void *>(p.proxy.agent.proxy_agent_func) << "}";
}

class CnoTest : public conformance::ConformanceTest {
protected:
    void SetUp() override {
        ConformanceTest::SetUp();
        ASSERT_DAT_OK(ia_.open(GetParam()));
    }

    DAT_CNO_HANDLE make_cno(DAT_OS_WAIT_PROXY_AGENT agent = no_agent()) {
        DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_cno_create(ia_.ia, agent, &cno);
        EXPECT_EQ(r, DAT_SUCCESS) << "dat_cno_create -> " << conformance::ret_text(r);
        return cno;
    }
    DAT_EVD_HANDLE make_evd(DAT_CNO_HANDLE cno) {
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_evd_create(ia_.ia, 8, cno, DAT_EVD_SOFTWARE_FLAG, &evd);
        EXPECT_EQ(r, DAT_SUCCESS) << "dat_evd_create -> " << conformance::ret_text(r);
        return evd;
    }
    DAT_CNO_PARAM query(DAT_CNO_HANDLE cno) {
        DAT_CNO_PARAM p;
        std::memset(&p, 0x55, sizeof p); // what the query leaves unwritten shows
        DAT_RETURN r = dat_cno_query(cno, DAT_CNO_FIELD_ALL, &p);
        EXPECT_EQ(r, DAT_SUCCESS) << "dat_cno_query -> " << conformance::ret_text(r);
        return p;
    }
    static void post(DAT_EVD_HANDLE evd, std::uintptr_t n) {
        DAT_EVENT ev = software_event(reinterpret_cast<void *>(n));
        ASSERT_DAT_OK(dat_evd_post_se(evd, &ev));
    }

    // Frees the EVD, then the CNO it fed; both succeed.
    static void free_both(DAT_EVD_HANDLE evd, DAT_CNO_HANDLE cno) {
        EXPECT_DAT_OK(dat_evd_free(evd));
        EXPECT_DAT_OK(dat_cno_free(cno));
    }

    // A thread blocks in dat_cno_wait(cno); event `n` posted on `evd` wakes it
    // with DAT_SUCCESS and `evd` as the notifying EVD.
    static void expect_post_triggers(DAT_CNO_HANDLE cno, DAT_EVD_HANDLE evd, std::uintptr_t n) {
        auto waiter = start_cno_wait(cno, kLongWaitUs);
        ASSERT_TRUE(still_blocked(waiter));
        ASSERT_NO_FATAL_FAILURE(post(evd, n));
        ASSERT_TRUE(returns_within(waiter)) << "the software event did not trigger the CNO";
        CnoWait w = waiter.get();
        EXPECT_EQ(w.r, DAT_SUCCESS) << conformance::ret_text(w.r);
        EXPECT_EQ(w.evd, evd);
    }

    // A thread blocks in dat_cno_wait(cno) for 400 ms; event `n` posted on
    // `evd` does not wake it: it times out (DAT_QUEUE_EMPTY, NULL evd_handle).
    static void expect_post_does_not_trigger(DAT_CNO_HANDLE cno, DAT_EVD_HANDLE evd, std::uintptr_t n) {
        auto waiter = start_cno_wait(cno, 400'000);
        ASSERT_TRUE(still_blocked(waiter));
        ASSERT_NO_FATAL_FAILURE(post(evd, n));
        ASSERT_TRUE(returns_within(waiter)) << "the 400 ms dat_cno_wait did not time out";
        CnoWait w = waiter.get();
        EXPECT_DAT_ERR(w.r, DAT_QUEUE_EMPTY, 0);
        EXPECT_EQ(w.evd, DAT_HANDLE_NULL);
    }

    conformance::OpenIa ia_;
};

TEST_P(CnoTest, CreateQueryFree) {
    DAT_CNO_HANDLE cno = make_cno();
    ASSERT_NE(cno, DAT_HANDLE_NULL);
    DAT_HANDLE_TYPE type{};
    EXPECT_DAT_OK(dat_get_handle_type(cno, &type));
    EXPECT_EQ(type, DAT_HANDLE_TYPE_CNO);
    DAT_CNO_PARAM p = query(cno);
    EXPECT_EQ(p.ia_handle, ia_.ia);
    EXPECT_TRUE(has_no_agent(p));
    ASSERT_DAT_OK(dat_cno_free(cno));
    EXPECT_DAT_INVALID_HANDLE(dat_cno_query(cno, DAT_CNO_FIELD_ALL, &p), HandleKind::Cno);
}

TEST_P(CnoTest, CreateWithAgentIsReportedByQuery) {
    AgentLog log;
    DAT_CNO_HANDLE cno = make_cno(log.agent());
    ASSERT_NE(cno, DAT_HANDLE_NULL);
    DAT_CNO_PARAM p = query(cno);
    EXPECT_EQ(p.proxy_type, DAT_PROXY_TYPE_AGENT);
    EXPECT_EQ(p.proxy.agent.instance_data, &log);
    EXPECT_EQ(p.proxy.agent.proxy_agent_func, &AgentLog::record);
    EXPECT_DAT_OK(dat_cno_free(cno));
}

TEST_P(CnoTest, ModifyAgentIsReportedByQuery) {
    DAT_CNO_HANDLE cno = make_cno();
    int instance = 0;
    // dat_cno_modify_agent(3DAT) replaces the agent; DAT_OS_WAIT_PROXY_AGENT_NULL removes it.
    ASSERT_DAT_OK(dat_cno_modify_agent(cno, DAT_OS_WAIT_PROXY_AGENT{&instance, &other_agent_func}));
    DAT_CNO_PARAM p = query(cno);
    EXPECT_EQ(p.proxy_type, DAT_PROXY_TYPE_AGENT);
    EXPECT_EQ(p.proxy.agent.instance_data, &instance);
    EXPECT_EQ(p.proxy.agent.proxy_agent_func, &other_agent_func);
    ASSERT_DAT_OK(dat_cno_modify_agent(cno, no_agent()));
    EXPECT_TRUE(has_no_agent(query(cno)));
    EXPECT_DAT_OK(dat_cno_free(cno));
}

TEST_P(CnoTest, WaitTimesOutWithQueueEmptyAndNullEvd) {
    DAT_CNO_HANDLE cno = make_cno();
    DAT_EVD_HANDLE evd = make_evd(cno); // one EVD feeding it, never posted to
    DAT_EVD_HANDLE fired = not_written();
    const auto start = Clock::now();
    // dat_cno_wait(3DAT): DAT_QUEUE_EMPTY "The operation timed out without a notification";
    // "On a timeout, evd_handle is explicitly set to a null handle."
    EXPECT_DAT_ERR(dat_cno_wait(cno, 200'000, &fired), DAT_QUEUE_EMPTY, 0);
    const auto elapsed = Clock::now() - start;
    EXPECT_EQ(fired, DAT_HANDLE_NULL);
    EXPECT_GE(elapsed, 190ms) << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms";
    EXPECT_LT(elapsed, 2s) << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms";
    free_both(evd, cno);
}

TEST_P(CnoTest, EvdCreatedWithTheCnoTriggersTheWait) {
    DAT_CNO_HANDLE cno = make_cno();
    DAT_EVD_HANDLE evd = make_evd(cno);
    ASSERT_NO_FATAL_FAILURE(expect_post_triggers(cno, evd, 1));
    // dat_evd_modify_cno(3DAT): the events causing the unblocking "are present on the EVD".
    DAT_EVENT ev{};
    ASSERT_DAT_OK(dat_evd_dequeue(evd, &ev));
    EXPECT_EQ(ev.event_data.software_event_data.pointer, reinterpret_cast<void *>(1));
    free_both(evd, cno);
}

TEST_P(CnoTest, EvdAttachedByModifyCnoTriggersTheWait) {
    DAT_CNO_HANDLE cno = make_cno();
    DAT_EVD_HANDLE evd = make_evd(DAT_HANDLE_NULL);
    // dat_evd_modify_cno(3DAT): "Upon completion of the dat_evd_modify_cno() operation, the
    // passed IN new CNO is used for notification."
    ASSERT_DAT_OK(dat_evd_modify_cno(evd, cno));
    DAT_EVD_PARAM ep{};
    ASSERT_DAT_OK(dat_evd_query(evd, DAT_EVD_FIELD_CNO, &ep));
    EXPECT_EQ(ep.cno_handle, cno);
    ASSERT_NO_FATAL_FAILURE(expect_post_triggers(cno, evd, 1));
    free_both(evd, cno);
}

TEST_P(CnoTest, DetachedEvdNoLongerTriggers) {
    DAT_CNO_HANDLE cno = make_cno();
    DAT_EVD_HANDLE evd = make_evd(cno);
    DAT_EVD_HANDLE other = make_evd(cno); // keeps the CNO associated with an EVD
    ASSERT_DAT_OK(dat_evd_modify_cno(evd, DAT_HANDLE_NULL));
    ASSERT_NO_FATAL_FAILURE(expect_post_does_not_trigger(cno, evd, 1));
    EXPECT_DAT_OK(dat_evd_free(evd));
    EXPECT_DAT_OK(dat_evd_free(other));
    EXPECT_DAT_OK(dat_cno_free(cno));
}

TEST_P(CnoTest, DisabledEvdDoesNotTrigger) {
    DAT_CNO_HANDLE cno = make_cno();
    DAT_EVD_HANDLE evd = make_evd(cno);
    ASSERT_DAT_OK(dat_evd_disable(evd));
    // dat_cno_wait(3DAT): "An Event Dispatcher that is disabled ... does not deliver notifications."
    ASSERT_NO_FATAL_FAILURE(expect_post_does_not_trigger(cno, evd, 1));
    // dat_evd_enable(3DAT): enabled again, the arrival of an event triggers the CNO.
    ASSERT_DAT_OK(dat_evd_enable(evd));
    DAT_EVENT ev{};
    ASSERT_DAT_OK(dat_evd_dequeue(evd, &ev)); // the event that did not notify
    EXPECT_EQ(ev.event_data.software_event_data.pointer, reinterpret_cast<void *>(1));
    ASSERT_NO_FATAL_FAILURE(expect_post_triggers(cno, evd, 2));
    free_both(evd, cno);
}

TEST_P(CnoTest, DirectEvdWaiterPreemptsTheCno) {
    DAT_CNO_HANDLE cno = make_cno();
    DAT_EVD_HANDLE evd = make_evd(cno);
    auto evd_waiter = conformance::start_evd_wait(evd, kLongWaitUs);
    auto cno_waiter = start_cno_wait(cno, 600'000);
    // The kit decides whether to trigger the CNO under the same lock as the
    // push; deciding after waking the waiter let the CNO fire 1 run in 6.
    ASSERT_TRUE(still_blocked(cno_waiter));
    ASSERT_EQ(evd_waiter.wait_for(0s), std::future_status::timeout) << "dat_evd_wait returned early";
    post(evd, 1);
    // dat_evd_wait(3DAT): "The CNO associated with the evd_handle() is not triggered upon event
    // arrival if there is a Consumer blocked on dat_evd_wait() on this Event Dispatcher."
    ASSERT_TRUE(returns_within(evd_waiter));
    conformance::EvdWait e = evd_waiter.get();
    EXPECT_EQ(e.r, DAT_SUCCESS) << conformance::ret_text(e.r);
    EXPECT_EQ(e.ev.event_data.software_event_data.pointer, reinterpret_cast<void *>(1));
    ASSERT_TRUE(returns_within(cno_waiter));
    CnoWait c = cno_waiter.get();
    EXPECT_DAT_ERR(c.r, DAT_QUEUE_EMPTY, 0);
    EXPECT_EQ(c.evd, DAT_HANDLE_NULL);
    free_both(evd, cno);
}

TEST_P(CnoTest, AgentIsInvokedWhenTriggered) {
    AgentLog log;
    DAT_CNO_HANDLE cno = make_cno(log.agent());
    DAT_EVD_HANDLE evd = make_evd(cno);
    post(evd, 1);
    // dat_cno_create(3DAT): the agent "is invoked when the CNO is triggered".
    ASSERT_TRUE(log.wait_calls(1, 3000ms)) << "the OS Wait Proxy Agent was not invoked";
    {
        std::lock_guard<std::mutex> lock(log.mutex);
        EXPECT_EQ(log.calls[0].first, &log);
        EXPECT_EQ(log.calls[0].second, evd);
    }
    // dat_cno_create(3DAT): "After it is invoked, it is no longer associated with the CNO."
    EXPECT_TRUE(has_no_agent(query(cno)));
    free_both(evd, cno);
}

// The agent detaches its EVD and frees the CNO from inside its call: the
// call returns, and the CNO is gone (a stale handle afterwards).
TEST_P(CnoTest, AgentMayDetachItsEvdAndFreeTheCnoFromItsCall) {
    struct Freer {
        DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
        std::atomic<int> calls{0};
        DAT_RETURN detached = DAT_SUCCESS, freed = DAT_SUCCESS;
        static void invoked(DAT_PVOID self, DAT_EVD_HANDLE evd) {
            auto *f = static_cast<Freer *>(self);
            f->detached = dat_evd_modify_cno(evd, DAT_HANDLE_NULL);
            f->freed = dat_cno_free(f->cno);
            f->calls.fetch_add(1);
        }
    } freer;
    freer.cno = make_cno(DAT_OS_WAIT_PROXY_AGENT{&freer, &Freer::invoked});
    DAT_EVD_HANDLE evd = make_evd(freer.cno);
    // The agent runs in the posting thread: a post that never returns is
    // left behind (detached), and the test fails.
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread([evd, done] {
        post(evd, 1);
        done->store(true);
    }).detach();
    const auto start = std::chrono::steady_clock::now();
    while (!done->load() && std::chrono::steady_clock::now() - start < 3000ms)
        std::this_thread::sleep_for(1ms);
    ASSERT_TRUE(done->load()) << "the post whose agent frees the CNO did not return within 3 s";
    ASSERT_EQ(freer.calls.load(), 1) << "the agent was not invoked";
    EXPECT_DAT_OK(freer.detached);
    EXPECT_DAT_OK(freer.freed);
    EXPECT_DAT_ERR(dat_cno_free(freer.cno), DAT_INVALID_HANDLE, 0);
    EXPECT_DAT_OK(dat_evd_free(evd));
}

// dat_cno_free in another thread while the agent runs returns only once
// the agent has: the consumer may then free what the agent uses.
TEST_P(CnoTest, FreeingTheCnoWaitsForItsAgentRunningInAnotherThread) {
    struct Slow {
        std::atomic<bool> started{false}, finished{false};
        static void invoked(DAT_PVOID self, DAT_EVD_HANDLE) {
            auto *s = static_cast<Slow *>(self);
            s->started.store(true);
            std::this_thread::sleep_for(200ms);
            s->finished.store(true);
        }
    } slow;
    DAT_CNO_HANDLE cno = make_cno(DAT_OS_WAIT_PROXY_AGENT{&slow, &Slow::invoked});
    DAT_EVD_HANDLE evd = make_evd(cno);
    std::thread poster([evd] { post(evd, 1); });
    while (!slow.started.load())
        std::this_thread::sleep_for(1ms);
    ASSERT_DAT_OK(dat_evd_modify_cno(evd, DAT_HANDLE_NULL));
    EXPECT_DAT_OK(dat_cno_free(cno));
    EXPECT_TRUE(slow.finished.load()) << "dat_cno_free returned while the CNO's agent was still running";
    poster.join();
    EXPECT_DAT_OK(dat_evd_free(evd));
}

TEST_P(CnoTest, FreeWhileAnEvdReferencesItIsInvalidState) {
    DAT_CNO_HANDLE cno = make_cno();
    DAT_EVD_HANDLE evd = make_evd(cno);
    // dat_cno_free(3DAT): "A CNO cannot be deleted while it is referenced by an Event
    // Dispatcher" -> DAT_INVALID_STATE.
    EXPECT_DAT_ERR(dat_cno_free(cno), DAT_INVALID_STATE, 0);
    ASSERT_DAT_OK(dat_evd_modify_cno(evd, DAT_HANDLE_NULL));
    // Attached by dat_evd_modify_cno counts the same.
    DAT_EVD_HANDLE evd2 = make_evd(DAT_HANDLE_NULL);
    ASSERT_DAT_OK(dat_evd_modify_cno(evd2, cno));
    EXPECT_DAT_ERR(dat_cno_free(cno), DAT_INVALID_STATE, 0);
    EXPECT_DAT_OK(dat_evd_free(evd2));
    EXPECT_DAT_OK(dat_cno_free(cno));
    EXPECT_DAT_OK(dat_evd_free(evd));
}

TEST_P(CnoTest, FreeWhileAThreadWaitsIsInvalidState) {
    DAT_CNO_HANDLE cno = make_cno();
    auto waiter = start_cno_wait(cno, kLongWaitUs);
    ASSERT_TRUE(still_blocked(waiter));
    // dat_cno_free(3DAT): "... or while a thread is blocked on it" -> DAT_INVALID_STATE.
    EXPECT_DAT_ERR(dat_cno_free(cno), DAT_INVALID_STATE, 0);
    // dat_cno_free(3DAT) USAGE: unblock the waiter through a temporary software EVD.
    DAT_EVD_HANDLE temp = make_evd(DAT_HANDLE_NULL);
    ASSERT_DAT_OK(dat_evd_modify_cno(temp, cno));
    post(temp, 1);
    ASSERT_TRUE(returns_within(waiter)) << "the temporary EVD did not unblock the CNO";
    CnoWait w = waiter.get();
    EXPECT_EQ(w.r, DAT_SUCCESS) << conformance::ret_text(w.r);
    EXPECT_EQ(w.evd, temp);
    ASSERT_DAT_OK(dat_evd_modify_cno(temp, DAT_HANDLE_NULL));
    EXPECT_DAT_OK(dat_cno_free(cno));
    EXPECT_DAT_OK(dat_evd_free(temp));
}

TEST_P(CnoTest, FreeingItsLastEvdUnblocksTheWaiterWithNullEvd) {
    DAT_CNO_HANDLE cno = make_cno();
    DAT_EVD_HANDLE evd = make_evd(cno);
    auto waiter = start_cno_wait(cno, kLongWaitUs);
    ASSERT_TRUE(still_blocked(waiter));
    ASSERT_DAT_OK(dat_evd_free(evd));
    // dat_cno_wait(3DAT): waiters "are unblocked with the NULL handle returns for an unblocking
    // EVD evd_handle when the IA instance is destroyed or when all EVDs the CNO is associated
    // with are freed." (The page names no return code for it; a timeout it is not.)
    ASSERT_TRUE(returns_within(waiter)) << "freeing the last EVD did not unblock the CNO";
    CnoWait w = waiter.get();
    EXPECT_EQ(w.evd, DAT_HANDLE_NULL) << "returned " << conformance::ret_text(w.r);
    EXPECT_NE(DAT_GET_TYPE(w.r), DAT_QUEUE_EMPTY) << "the waiter timed out instead of being unblocked";
    EXPECT_DAT_OK(dat_cno_free(cno));
}

TEST_P(CnoTest, AbruptIaCloseUnblocksTheWaiterWithNullEvd) {
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_ia_open(conformance::ia_name_ptr(GetParam()), 8, &async, &ia));
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_cno_create(ia, no_agent(), &cno));
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_evd_create(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG, &evd));
    auto waiter = start_cno_wait(cno, kLongWaitUs);
    ASSERT_TRUE(still_blocked(waiter));
    ASSERT_DAT_OK(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG));
    // dat_ia_close(3DAT): "All the waiters on all CNOs ... are unblocked with the
    // DAT_HANDLE_NULL handle returns for an unblocking EVD."
    ASSERT_TRUE(returns_within(waiter)) << "the abrupt close did not unblock the CNO";
    CnoWait w = waiter.get();
    EXPECT_EQ(w.evd, DAT_HANDLE_NULL) << "returned " << conformance::ret_text(w.r);
    EXPECT_NE(DAT_GET_TYPE(w.r), DAT_QUEUE_EMPTY) << "the waiter timed out instead of being unblocked";
}

TEST_P(CnoTest, BadArguments) {
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    // dat_cno_create(3DAT): DAT_INVALID_HANDLE "The ia_handle parameter is invalid";
    // DAT_INVALID_PARAMETER "One of the parameters was invalid".
    EXPECT_DAT_INVALID_HANDLE(dat_cno_create(DAT_HANDLE_NULL, no_agent(), &cno), HandleKind::Ia);
    EXPECT_DAT_ERR(dat_cno_create(ia_.ia, no_agent(), nullptr), DAT_INVALID_PARAMETER, 0);
    // dat_cno_create(3DAT), dat_cno_modify_agent(3DAT): "or the agent parameter is invalid":
    // instance data for no function, refused alike by both.
    int instance = 0;
    const DAT_OS_WAIT_PROXY_AGENT half{&instance, nullptr};
    EXPECT_DAT_ERR(dat_cno_create(ia_.ia, half, &cno), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    cno = make_cno();
    EXPECT_DAT_ERR(dat_cno_modify_agent(cno, half), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    // dat_cno_query(3DAT): DAT_INVALID_PARAMETER "The cno_param_mask parameter is invalid."
    DAT_CNO_PARAM param{};
    EXPECT_DAT_ERR(dat_cno_query(cno, static_cast<DAT_CNO_PARAM_MASK>(0x100), &param), DAT_INVALID_PARAMETER,
                   DAT_INVALID_ARG2);
    EXPECT_DAT_ERR(dat_cno_query(cno, static_cast<DAT_CNO_PARAM_MASK>(~0u), &param), DAT_INVALID_PARAMETER,
                   DAT_INVALID_ARG2);
    for (DAT_CNO_PARAM_MASK m : {DAT_CNO_FIELD_IA_HANDLE, DAT_CNO_FIELD_PROXY_TYPE, DAT_CNO_FIELD_PROXY,
                                 DAT_CNO_FIELD_ALL}) {
        SCOPED_TRACE(::testing::Message() << "mask " << m);
        EXPECT_DAT_OK(dat_cno_query(cno, m, &param));
    }
    DAT_EVD_HANDLE fired = DAT_HANDLE_NULL;
    EXPECT_DAT_ERR(dat_cno_wait(cno, 0, nullptr), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_INVALID_HANDLE(dat_cno_wait(DAT_HANDLE_NULL, 0, &fired), HandleKind::Cno);
    EXPECT_DAT_INVALID_HANDLE(dat_cno_modify_agent(DAT_HANDLE_NULL, no_agent()), HandleKind::Cno);
    EXPECT_DAT_INVALID_HANDLE(dat_cno_modify_agent(ia_.pz, no_agent()), HandleKind::Cno);
    // dat_evd_modify_cno(3DAT): DAT_INVALID_HANDLE "Invalid DAT handle" -- a PZ as the CNO.
    DAT_EVD_HANDLE evd = make_evd(DAT_HANDLE_NULL);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_modify_cno(evd, ia_.pz), HandleKind::Cno);
    DAT_EVD_PARAM ep{};
    ASSERT_DAT_OK(dat_evd_query(evd, DAT_EVD_FIELD_CNO, &ep));
    EXPECT_EQ(ep.cno_handle, DAT_HANDLE_NULL) << "a refused modify_cno changed the EVD";
    free_both(evd, cno);
}

// ---- dat_cno_fd_create, dat_cno_trigger ------------------------------------------------

// Whether `fd` becomes readable within `ms` milliseconds.
bool readable_within(int fd, int ms) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

TEST_P(CnoTest, FdCnoBecomesReadableWhenTriggeredAndTriggerNamesTheEvd) {
    DAT_FD fd = -1;
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_cno_fd_create(ia_.ia, &fd, &cno));
    ASSERT_GE(fd, 0);
    ASSERT_NE(cno, DAT_HANDLE_NULL);
    DAT_HANDLE_TYPE type{};
    ASSERT_DAT_OK(dat_get_handle_type(cno, &type));
    EXPECT_EQ(type, DAT_HANDLE_TYPE_CNO);
    DAT_CNO_PARAM p = query(cno);
    EXPECT_EQ(p.ia_handle, ia_.ia);
    EXPECT_EQ(p.proxy_type, DAT_PROXY_TYPE_FD);
    EXPECT_EQ(p.proxy.fd, fd);
    DAT_EVD_HANDLE a = make_evd(cno), b = make_evd(cno);
    EXPECT_FALSE(readable_within(fd, 0)) << "readable before any event";
    DAT_EVD_HANDLE fired = not_written();
    EXPECT_DAT_ERR(dat_cno_trigger(cno, &fired), DAT_QUEUE_EMPTY, 0);
    EXPECT_EQ(fired, DAT_HANDLE_NULL);

    for (DAT_EVD_HANDLE evd : {b, a}) {
        ASSERT_NO_FATAL_FAILURE(post(evd, 7));
        ASSERT_TRUE(readable_within(fd, 2000)) << "an event on an EVD of the CNO did not make its fd readable";
        fired = not_written();
        ASSERT_DAT_OK(dat_cno_trigger(cno, &fired));
        EXPECT_EQ(fired, evd);
        // Consumed: the descriptor is quiet again until the next trigger.
        EXPECT_FALSE(readable_within(fd, 0)) << "still readable after dat_cno_trigger";
        EXPECT_DAT_ERR(dat_cno_trigger(cno, &fired), DAT_QUEUE_EMPTY, 0);
        DAT_EVENT ev{};
        ASSERT_DAT_OK(dat_evd_dequeue(evd, &ev));
        EXPECT_EQ(ev.event_number, DAT_SOFTWARE_EVENT);
    }
    // A dat_cno_wait on it works as on any CNO.
    ASSERT_NO_FATAL_FAILURE(expect_post_triggers(cno, a, 8));
    DAT_EVENT ev{};
    ASSERT_DAT_OK(dat_evd_dequeue(a, &ev));
    EXPECT_DAT_OK(dat_evd_free(b));
    free_both(a, cno);
}

TEST_P(CnoTest, FdCnoFeedsAnEpollSet) {
    // What dat_cno_fd_create is for: a program waiting in epoll on its own
    // descriptors and on DAT events together.
    DAT_FD fd = -1;
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_cno_fd_create(ia_.ia, &fd, &cno));
    DAT_EVD_HANDLE evd = make_evd(cno);
    int ep = ::epoll_create1(EPOLL_CLOEXEC);
    ASSERT_GE(ep, 0);
    epoll_event want{};
    want.events = EPOLLIN;
    want.data.u64 = 42;
    ASSERT_EQ(::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &want), 0);
    epoll_event got{};
    EXPECT_EQ(::epoll_wait(ep, &got, 1, 0), 0);
    std::thread poster([&] {
        std::this_thread::sleep_for(50ms);
        post(evd, 9);
    });
    EXPECT_EQ(::epoll_wait(ep, &got, 1, 5000), 1);
    EXPECT_EQ(got.data.u64, 42u);
    poster.join();
    DAT_EVD_HANDLE fired = DAT_HANDLE_NULL;
    EXPECT_DAT_OK(dat_cno_trigger(cno, &fired));
    EXPECT_EQ(fired, evd);
    EXPECT_EQ(::epoll_wait(ep, &got, 1, 0), 0) << "the epoll set still reports the CNO after dat_cno_trigger";
    ::close(ep);
    DAT_EVENT ev{};
    ASSERT_DAT_OK(dat_evd_dequeue(evd, &ev));
    free_both(evd, cno);
}

TEST_P(CnoTest, TriggerOfAPlainCnoNamesTheEvdNoWaiterTook) {
    DAT_CNO_HANDLE cno = make_cno();
    DAT_EVD_HANDLE evd = make_evd(cno);
    DAT_EVD_HANDLE fired = not_written();
    EXPECT_DAT_ERR(dat_cno_trigger(cno, &fired), DAT_QUEUE_EMPTY, 0);
    ASSERT_NO_FATAL_FAILURE(post(evd, 10));
    fired = DAT_HANDLE_NULL;
    EXPECT_DAT_OK(dat_cno_trigger(cno, &fired));
    EXPECT_EQ(fired, evd);
    EXPECT_DAT_ERR(dat_cno_trigger(cno, &fired), DAT_QUEUE_EMPTY, 0);
    DAT_EVENT ev{};
    ASSERT_DAT_OK(dat_evd_dequeue(evd, &ev));
    free_both(evd, cno);
}

TEST_P(CnoTest, FdCreateAndTriggerBadArguments) {
    DAT_FD fd = -1;
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    EXPECT_DAT_INVALID_HANDLE(dat_cno_fd_create(DAT_HANDLE_NULL, &fd, &cno), HandleKind::Ia);
    EXPECT_DAT_ERR(dat_cno_fd_create(ia_.ia, nullptr, &cno), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    EXPECT_DAT_ERR(dat_cno_fd_create(ia_.ia, &fd, nullptr), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    EXPECT_EQ(cno, DAT_HANDLE_NULL);
    DAT_EVD_HANDLE fired = DAT_HANDLE_NULL;
    EXPECT_DAT_INVALID_HANDLE(dat_cno_trigger(DAT_HANDLE_NULL, &fired), HandleKind::Cno);
    EXPECT_DAT_INVALID_HANDLE(dat_cno_trigger(ia_.pz, &fired), HandleKind::Cno);
    ASSERT_DAT_OK(dat_cno_fd_create(ia_.ia, &fd, &cno));
    EXPECT_DAT_ERR(dat_cno_trigger(cno, nullptr), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    EXPECT_DAT_OK(dat_cno_free(cno));
    // A freed CNO's handle is stale.
    EXPECT_DAT_INVALID_HANDLE(dat_cno_trigger(cno, &fired), HandleKind::Cno);
}

INSTANTIATE_OVER_IAS(CnoTest);

} // namespace
