// SPDX-License-Identifier: BSD-3-Clause
// Event Dispatcher: dat_evd_create, dat_evd_query(3DAT), dat_evd_post_se(3DAT),
// dat_evd_dequeue(3DAT), dat_evd_wait(3DAT), dat_evd_enable(3DAT), dat_evd_disable(3DAT),
// dat_evd_set_unwaitable(3DAT), dat_evd_clear_unwaitable(3DAT), dat_evd_resize(3DAT),
// dat_evd_free(3DAT). Software events only, no connections.
//
// The reference has no dat_evd_create page; its expectations below follow the
// ia_query(3DAT) merging matrix and the DAT error model (bad values are
// DAT_INVALID_PARAMETER, bad handles DAT_INVALID_HANDLE).
#include "conformance.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <future>
#include <limits>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using conformance::EvdWait;
using conformance::HandleKind;
using conformance::kLongWaitUs;
using conformance::returns_within;
using conformance::software_event;
using conformance::start_evd_wait;
using conformance::still_blocked;
using Clock = std::chrono::steady_clock;

void *tag(std::uintptr_t n) { return reinterpret_cast<void *>(n); }

// The facets of DAT_EVD_STATE (udat.h): enabled/disabled and waitable/unwaitable.
constexpr unsigned kEnableFacet = DAT_EVD_STATE_ENABLED | DAT_EVD_STATE_DISABLED;
constexpr unsigned kWaitFacet = DAT_EVD_STATE_WAITABLE | DAT_EVD_STATE_UNWAITABLE;

class EvdTest : public conformance::ConformanceTest {
protected:
    void SetUp() override {
        ConformanceTest::SetUp();
        ASSERT_DAT_OK(ia_.open(GetParam()));
        ASSERT_DAT_OK(attrs_.query(ia_.ia));
    }
    void TearDown() override {
        for (DAT_EVD_HANDLE evd : evds_)
            dat_evd_free(evd);
        ConformanceTest::TearDown();
    }

    // A software EVD freed at the end of the test (unless the test frees it).
    DAT_EVD_HANDLE make_evd(DAT_COUNT qlen, DAT_EVD_FLAGS flags = DAT_EVD_SOFTWARE_FLAG,
                            DAT_CNO_HANDLE cno = DAT_HANDLE_NULL) {
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_evd_create(ia_.ia, qlen, cno, flags, &evd);
        EXPECT_EQ(r, DAT_SUCCESS) << "dat_evd_create -> " << conformance::ret_text(r);
        if (r == DAT_SUCCESS)
            evds_.push_back(evd);
        return evd;
    }
    void forget(DAT_EVD_HANDLE evd) { evds_.erase(std::remove(evds_.begin(), evds_.end(), evd), evds_.end()); }

    DAT_EVD_PARAM query(DAT_EVD_HANDLE evd) {
        DAT_EVD_PARAM param{};
        DAT_RETURN r = dat_evd_query(evd, DAT_EVD_FIELD_ALL, &param);
        EXPECT_EQ(r, DAT_SUCCESS) << "dat_evd_query -> " << conformance::ret_text(r);
        return param;
    }

    void post(DAT_EVD_HANDLE evd, std::uintptr_t n) {
        DAT_EVENT ev = software_event(tag(n));
        ASSERT_DAT_OK(dat_evd_post_se(evd, &ev));
    }

    // Dequeues one event and checks it is software event `n` of `evd`.
    void expect_dequeue(DAT_EVD_HANDLE evd, std::uintptr_t n) {
        DAT_EVENT ev{};
        ASSERT_DAT_OK(dat_evd_dequeue(evd, &ev));
        EXPECT_EQ(ev.event_number, DAT_SOFTWARE_EVENT);
        EXPECT_EQ(ev.evd_handle, evd);
        EXPECT_EQ(ev.event_data.software_event_data.pointer, tag(n));
    }

    conformance::OpenIa ia_;
    conformance::IaAttributes attrs_;
    std::vector<DAT_EVD_HANDLE> evds_;
};

// ---- creation -------------------------------------------------------------------

const DAT_EVD_FLAGS kStreamFlags[6] = {DAT_EVD_SOFTWARE_FLAG,   DAT_EVD_CR_FLAG,       DAT_EVD_DTO_FLAG,
                                       DAT_EVD_CONNECTION_FLAG, DAT_EVD_RMR_BIND_FLAG, DAT_EVD_ASYNC_FLAG};

TEST_P(EvdTest, CreateWithEachStreamFlag) {
    for (DAT_EVD_FLAGS flag : kStreamFlags) {
        SCOPED_TRACE(::testing::Message() << "evd_flags 0x" << std::hex << flag);
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        ASSERT_DAT_OK(dat_evd_create(ia_.ia, 8, DAT_HANDLE_NULL, flag, &evd));
        DAT_EVD_PARAM p = query(evd);
        EXPECT_EQ(p.evd_flags, flag);
        EXPECT_GE(p.evd_qlen, 8);
        EXPECT_DAT_OK(dat_evd_free(evd));
    }
}

TEST_P(EvdTest, CreateWithFlagCombinationsFollowsTheMergingMatrix) {
    // dat_ia_query(3DAT): evd_stream_merging_supported says which event streams can feed the
    // same EVD. Index order (udat.h): software, CR, DTO, connection, RMR bind, async.
    const DAT_PROVIDER_ATTR &pa = attrs_.provider();
    for (unsigned set = 1; set < 64; ++set) {
        DAT_EVD_FLAGS flags = static_cast<DAT_EVD_FLAGS>(0);
        bool supported = true;
        for (int i = 0; i < 6; ++i) {
            if (!(set & (1u << i)))
                continue;
            flags = static_cast<DAT_EVD_FLAGS>(flags | kStreamFlags[i]);
            for (int j = 0; j < 6; ++j)
                if ((set & (1u << j)) && !pa.evd_stream_merging_supported[i][j])
                    supported = false;
        }
        SCOPED_TRACE(::testing::Message() << "evd_flags 0x" << std::hex << flags
                                          << (supported ? " (merge supported)" : " (merge not supported)"));
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_evd_create(ia_.ia, 8, DAT_HANDLE_NULL, flags, &evd);
        if (supported) {
            EXPECT_EQ(r, DAT_SUCCESS) << conformance::ret_text(r);
            if (r == DAT_SUCCESS) {
                EXPECT_EQ(query(evd).evd_flags, flags);
                EXPECT_DAT_OK(dat_evd_free(evd));
            }
        } else {
            EXPECT_TRUE(DAT_GET_TYPE(r) == DAT_INVALID_PARAMETER || DAT_GET_TYPE(r) == DAT_MODEL_NOT_SUPPORTED)
                << conformance::ret_text(r);
            if (r == DAT_SUCCESS)
                dat_evd_free(evd);
        }
    }
}

TEST_P(EvdTest, CreateQlenZeroOrNegativeIsInvalidParameter) {
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    EXPECT_DAT_ERR(dat_evd_create(ia_.ia, 0, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_evd_create(ia_.ia, -5, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd), DAT_INVALID_PARAMETER, 0);
}

TEST_P(EvdTest, CreateQlenAboveMaxIsRefused) {
    const DAT_COUNT max = attrs_.ia.max_evd_qlen;
    if (max == std::numeric_limits<DAT_COUNT>::max())
        GTEST_SKIP() << "max_evd_qlen is the largest DAT_COUNT";
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    DAT_RETURN r = dat_evd_create(ia_.ia, max + 1, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd);
    // dat_ia_query(3DAT): "Max EVD queue size: Maximum size of the EVD queue supported by an IA."
    // No dat_evd_create page says which code refuses more: DAT_INVALID_PARAMETER (a value out of
    // range) and DAT_INSUFFICIENT_RESOURCES (OFED's choice) are both accepted.
    EXPECT_TRUE(DAT_GET_TYPE(r) == DAT_INVALID_PARAMETER || DAT_GET_TYPE(r) == DAT_INSUFFICIENT_RESOURCES)
        << "qlen " << max + 1 << " -> " << conformance::ret_text(r);
    if (r == DAT_SUCCESS)
        dat_evd_free(evd);
}

TEST_P(EvdTest, CreateAtMaxQlenIsAccepted) {
    // dat_ia_query(3DAT): max_evd_qlen is the "Maximum size of the EVD queue supported by an
    // IA": an EVD of exactly that size can be created (when it fits in memory here: a
    // provider may allocate the whole queue at once).
    const DAT_COUNT max = attrs_.ia.max_evd_qlen;
    ASSERT_GE(max, 1);
    constexpr std::size_t kAffordable = 256u << 20;
    if (static_cast<std::size_t>(max) > kAffordable / sizeof(DAT_EVENT))
        GTEST_SKIP() << "max_evd_qlen " << max << " events would need more than " << (kAffordable >> 20)
                     << " MiB of queue";
    DAT_EVD_HANDLE evd = make_evd(max);
    ASSERT_NE(evd, DAT_HANDLE_NULL);
    EXPECT_GE(query(evd).evd_qlen, max);
    post(evd, 1);
    expect_dequeue(evd, 1);
}

TEST_P(EvdTest, CreateBadArguments) {
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    EXPECT_DAT_ERR(dat_evd_create(ia_.ia, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, nullptr), DAT_INVALID_PARAMETER,
                   0);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_create(DAT_HANDLE_NULL, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd),
                              HandleKind::Ia);
    // A PZ where the CNO belongs.
    EXPECT_DAT_INVALID_HANDLE(dat_evd_create(ia_.ia, 8, ia_.pz, DAT_EVD_SOFTWARE_FLAG, &evd), HandleKind::Cno);
}

// ---- query ----------------------------------------------------------------------

TEST_P(EvdTest, QueryReturnsTheCreationParameters) {
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_cno_create(ia_.ia, conformance::no_agent(), &cno));
    const auto flags = static_cast<DAT_EVD_FLAGS>(DAT_EVD_SOFTWARE_FLAG | DAT_EVD_DTO_FLAG);
    DAT_EVD_HANDLE evd = make_evd(16, flags, cno);
    ASSERT_NE(evd, DAT_HANDLE_NULL);
    DAT_HANDLE_TYPE type{};
    EXPECT_DAT_OK(dat_get_handle_type(evd, &type));
    EXPECT_EQ(type, DAT_HANDLE_TYPE_EVD);

    DAT_EVD_PARAM p = query(evd);
    EXPECT_EQ(p.ia_handle, ia_.ia); // the Consumer's IA handle
    EXPECT_GE(p.evd_qlen, 16);
    EXPECT_EQ(p.cno_handle, cno);
    EXPECT_EQ(p.evd_flags, flags);
    // A new EVD is enabled and waitable (dat_evd_query(3DAT) reports the state).
    EXPECT_EQ(p.evd_state & kEnableFacet, unsigned(DAT_EVD_STATE_ENABLED)) << std::hex << p.evd_state;
    EXPECT_EQ(p.evd_state & kWaitFacet, unsigned(DAT_EVD_STATE_WAITABLE)) << std::hex << p.evd_state;

    // Each field alone.
    DAT_EVD_PARAM one{};
    ASSERT_DAT_OK(dat_evd_query(evd, DAT_EVD_FIELD_CNO, &one));
    EXPECT_EQ(one.cno_handle, cno);
    ASSERT_DAT_OK(dat_evd_query(evd, DAT_EVD_FIELD_IA_HANDLE, &one));
    EXPECT_EQ(one.ia_handle, ia_.ia);

    ASSERT_DAT_OK(dat_evd_modify_cno(evd, DAT_HANDLE_NULL));
    EXPECT_EQ(query(evd).cno_handle, DAT_HANDLE_NULL);
    EXPECT_DAT_OK(dat_evd_free(evd));
    forget(evd);
    EXPECT_DAT_OK(dat_cno_free(cno));
}

TEST_P(EvdTest, QueryInvalidMaskIsInvalidParameter) {
    DAT_EVD_HANDLE evd = make_evd(4);
    DAT_EVD_PARAM p{};
    // dat_evd_query(3DAT): DAT_INVALID_PARAMETER "The evd_param_mask parameter is invalid."
    EXPECT_DAT_ERR(dat_evd_query(evd, static_cast<DAT_EVD_PARAM_MASK>(0x100), &p), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_evd_query(evd, DAT_EVD_FIELD_ALL, nullptr), DAT_INVALID_PARAMETER, 0);
}

// ---- post, dequeue ----------------------------------------------------------------

TEST_P(EvdTest, PostSeThenDequeueReturnsTheExactEvent) {
    DAT_EVD_HANDLE evd = make_evd(8);
    int cookie = 42;
    DAT_EVENT in = software_event(&cookie);
    ASSERT_DAT_OK(dat_evd_post_se(evd, &in));
    DAT_EVENT out{};
    out.event_number = DAT_DTO_COMPLETION_EVENT; // must be overwritten
    ASSERT_DAT_OK(dat_evd_dequeue(evd, &out));
    EXPECT_EQ(out.event_number, DAT_SOFTWARE_EVENT);
    EXPECT_EQ(out.evd_handle, evd);
    // dat_evd_post_se(3DAT): the parameters "are opaque to a Provider"; the pointer comes back.
    EXPECT_EQ(out.event_data.software_event_data.pointer, &cookie);
    // dat_evd_dequeue(3DAT): DAT_QUEUE_EMPTY "There are no entries on the Event Dispatcher queue."
    EXPECT_DAT_ERR(dat_evd_dequeue(evd, &out), DAT_QUEUE_EMPTY, 0);
}

TEST_P(EvdTest, DequeueIsFifo) {
    DAT_EVD_HANDLE evd = make_evd(16);
    for (std::uintptr_t n = 1; n <= 10; ++n)
        post(evd, n);
    // dat_evd_dequeue(3DAT): events of one Event Stream come back in the order posted.
    for (std::uintptr_t n = 1; n <= 10; ++n)
        expect_dequeue(evd, n);
    DAT_EVENT out{};
    EXPECT_DAT_ERR(dat_evd_dequeue(evd, &out), DAT_QUEUE_EMPTY, 0);
    // Interleaved posts and dequeues keep the order too.
    post(evd, 11);
    post(evd, 12);
    expect_dequeue(evd, 11);
    post(evd, 13);
    expect_dequeue(evd, 12);
    expect_dequeue(evd, 13);
}

TEST_P(EvdTest, DequeueOnEmptyIsQueueEmpty) {
    DAT_EVD_HANDLE evd = make_evd(4);
    DAT_EVENT out{};
    EXPECT_DAT_ERR(dat_evd_dequeue(evd, &out), DAT_QUEUE_EMPTY, 0);
    EXPECT_DAT_ERR(dat_evd_dequeue(evd, &out), DAT_QUEUE_EMPTY, 0);
}

TEST_P(EvdTest, PostSeBadEventIsInvalidParameter) {
    DAT_EVD_HANDLE evd = make_evd(4);
    // dat_evd_post_se(3DAT): DAT_INVALID_PARAMETER "The event parameter is invalid."
    EXPECT_DAT_ERR(dat_evd_post_se(evd, nullptr), DAT_INVALID_PARAMETER, 0);
    // dat_evd_post_se(3DAT): "The first element in the event provides the type of the event
    // (DAT_EVENT_TYPE_SOFTWARE)"; a Consumer cannot post a provider event.
    DAT_EVENT ev = software_event(nullptr);
    ev.event_number = DAT_CONNECTION_EVENT_ESTABLISHED;
    EXPECT_DAT_ERR(dat_evd_post_se(evd, &ev), DAT_INVALID_PARAMETER, 0);
    DAT_EVENT out{};
    EXPECT_DAT_ERR(dat_evd_dequeue(evd, &out), DAT_QUEUE_EMPTY, 0); // nothing was queued
}

TEST_P(EvdTest, OverflowIsQueueFullAndTheEventIsNotQueued) {
    DAT_EVD_HANDLE evd = make_evd(4);
    const DAT_COUNT qlen = query(evd).evd_qlen;
    ASSERT_GE(qlen, 4);
    ASSERT_LE(qlen, 1 << 20) << "queue too large to fill in a test";
    for (DAT_COUNT n = 1; n <= qlen; ++n)
        ASSERT_NO_FATAL_FAILURE(post(evd, static_cast<std::uintptr_t>(n))) << "event " << n;
    // dat_evd_post_se(3DAT): "If the event queue is full, the operation is completed
    // unsuccessfully and returns DAT_QUEUE_FULL. The event is not queued."
    DAT_EVENT extra = software_event(tag(0xdead));
    EXPECT_DAT_ERR(dat_evd_post_se(evd, &extra), DAT_QUEUE_FULL, 0);
    for (DAT_COUNT n = 1; n <= qlen; ++n)
        ASSERT_NO_FATAL_FAILURE(expect_dequeue(evd, static_cast<std::uintptr_t>(n)));
    DAT_EVENT out{};
    EXPECT_DAT_ERR(dat_evd_dequeue(evd, &out), DAT_QUEUE_EMPTY, 0);
    // dat_evd_post_se(3DAT): "the asynchronous Event Dispatcher is not effected."
    EXPECT_DAT_ERR(dat_evd_dequeue(ia_.async_evd, &out), DAT_QUEUE_EMPTY, 0);
    // And the queue accepts events again.
    post(evd, 77);
    expect_dequeue(evd, 77);
}

// ---- wait ----------------------------------------------------------------------------

TEST_P(EvdTest, WaitOnEmptyTimesOut) {
    DAT_EVD_HANDLE evd = make_evd(4);
    DAT_EVENT ev{};
    DAT_COUNT nmore = -1;
    // dat_evd_wait(3DAT): on timeout with fewer than threshold events "the operation fails and
    // returns DAT_TIMEOUT_EXPIRED", and "an nmore value is returned".
    EXPECT_DAT_ERR(dat_evd_wait(evd, 0, 1, &ev, &nmore), DAT_TIMEOUT_EXPIRED, 0);
    EXPECT_EQ(nmore, 0);

    const auto start = Clock::now();
    nmore = -1;
    EXPECT_DAT_ERR(dat_evd_wait(evd, 200'000, 1, &ev, &nmore), DAT_TIMEOUT_EXPIRED, 0);
    const auto elapsed = Clock::now() - start;
    EXPECT_EQ(nmore, 0);
    // The timeout is in microseconds: 200 ms waits about 200 ms, not nothing and not forever.
    EXPECT_GE(elapsed, 190ms) << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms";
    EXPECT_LT(elapsed, 2s) << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms";
}

TEST_P(EvdTest, WaitTimeoutWithEventsBelowThresholdReportsNmore) {
    DAT_EVD_HANDLE evd = make_evd(8);
    post(evd, 1);
    post(evd, 2);
    DAT_EVENT ev{};
    DAT_COUNT nmore = -1;
    EXPECT_DAT_ERR(dat_evd_wait(evd, 50'000, 3, &ev, &nmore), DAT_TIMEOUT_EXPIRED, 0);
    // dat_evd_wait(3DAT): "no event is dequeued from the EVD" and nmore is the queue snapshot.
    EXPECT_EQ(nmore, 2);
    expect_dequeue(evd, 1);
    expect_dequeue(evd, 2);
}

TEST_P(EvdTest, WaitReturnsQueuedEventsInOrderWithNmore) {
    DAT_EVD_HANDLE evd = make_evd(8);
    post(evd, 1);
    post(evd, 2);
    post(evd, 3);
    for (std::uintptr_t n = 1; n <= 3; ++n) {
        DAT_EVENT ev{};
        DAT_COUNT nmore = -1;
        ASSERT_DAT_OK(dat_evd_wait(evd, kLongWaitUs, 1, &ev, &nmore));
        EXPECT_EQ(ev.event_number, DAT_SOFTWARE_EVENT);
        EXPECT_EQ(ev.evd_handle, evd);
        EXPECT_EQ(ev.event_data.software_event_data.pointer, tag(n));
        // dat_evd_wait(3DAT): nmore is "the number of events left on the Event Dispatcher queue
        // after the dat_evd_wait() returns".
        EXPECT_EQ(nmore, static_cast<DAT_COUNT>(3 - n));
    }
}

TEST_P(EvdTest, WaitThresholdReturnsOnlyWhenReached) {
    DAT_EVD_HANDLE evd = make_evd(8);
    auto waiter = start_evd_wait(evd, kLongWaitUs, 3);
    ASSERT_TRUE(still_blocked(waiter));
    post(evd, 1);
    post(evd, 2);
    // dat_evd_wait(3DAT): threshold is "The number of events that should be on the EVD queue
    // before the operation should return with DAT_SUCCESS" -- two are not enough.
    EXPECT_EQ(waiter.wait_for(300ms), std::future_status::timeout)
        << "dat_evd_wait(threshold 3) returned with 2 events queued";
    post(evd, 3);
    ASSERT_TRUE(returns_within(waiter)) << "third event did not wake the waiter";
    EvdWait w = waiter.get();
    ASSERT_EQ(w.r, DAT_SUCCESS) << conformance::ret_text(w.r);
    EXPECT_EQ(w.ev.event_number, DAT_SOFTWARE_EVENT);
    EXPECT_EQ(w.ev.event_data.software_event_data.pointer, tag(1)); // the first event is removed
    // dat_evd_wait(3DAT): "If the operation return value is DAT_SUCCESS, the nmore value is at
    // least the value of (threshold -1)"; nothing else touched the queue, so exactly 2.
    EXPECT_EQ(w.nmore, 2);
    expect_dequeue(evd, 2);
    expect_dequeue(evd, 3);
}

TEST_P(EvdTest, WaitThresholdOutOfRangeIsInvalidParameter) {
    DAT_EVD_HANDLE evd = make_evd(4);
    const DAT_COUNT qlen = query(evd).evd_qlen;
    DAT_EVENT ev{};
    DAT_COUNT nmore = 0;
    // dat_evd_wait(3DAT): "If the value of the threshold is larger than the Event Dispatcher
    // queue length, the operation fails with the return DAT_INVALID_PARAMETER. If a
    // non-positive value is specified for threshold, the operation fails and returns
    // DAT_INVALID_PARAMETER."
    EXPECT_DAT_ERR(dat_evd_wait(evd, 0, qlen + 1, &ev, &nmore), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_evd_wait(evd, 0, 0, &ev, &nmore), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_evd_wait(evd, 0, -1, &ev, &nmore), DAT_INVALID_PARAMETER, 0);
    // Even with events queued.
    post(evd, 1);
    EXPECT_DAT_ERR(dat_evd_wait(evd, 0, qlen + 1, &ev, &nmore), DAT_INVALID_PARAMETER, 0);
    expect_dequeue(evd, 1);
}

TEST_P(EvdTest, SecondWaiterAndDequeueDuringWaitAreInvalidState) {
    DAT_EVD_HANDLE evd = make_evd(8);
    auto waiter = start_evd_wait(evd);
    ASSERT_TRUE(still_blocked(waiter)) << "the first waiter";
    // dat_evd_wait(3DAT): "A Consumer that blocks performing a dat_evd_wait() on an Event
    // Dispatcher effectively takes exclusive ownership of that Event Dispatcher. Any other
    // dequeue operation (dat_evd_wait() or dat_evd_dequeue(3DAT)) on the Event Dispatcher is
    // rejected with a DAT_INVALID_STATE error code."
    DAT_EVENT ev{};
    DAT_COUNT nmore = 0;
    EXPECT_DAT_ERR(dat_evd_wait(evd, 0, 1, &ev, &nmore), DAT_INVALID_STATE, 0);
    EXPECT_DAT_ERR(dat_evd_wait(evd, 100'000, 1, &ev, &nmore), DAT_INVALID_STATE, 0);
    EXPECT_DAT_ERR(dat_evd_dequeue(evd, &ev), DAT_INVALID_STATE, 0);
    post(evd, 5);
    ASSERT_TRUE(returns_within(waiter)) << "posted event did not wake the waiter";
    EvdWait w = waiter.get();
    EXPECT_EQ(w.r, DAT_SUCCESS) << conformance::ret_text(w.r);
    EXPECT_EQ(w.ev.event_data.software_event_data.pointer, tag(5));
    // The EVD is free for other dequeuers again.
    EXPECT_DAT_ERR(dat_evd_dequeue(evd, &ev), DAT_QUEUE_EMPTY, 0);
}

TEST_P(EvdTest, WaitThresholdAboveOneOnUnsignalledDtoStreamIsInvalidState) {
    if (!(attrs_.provider().completion_flags_supported & DAT_COMPLETION_UNSIGNALLED_FLAG))
        GTEST_SKIP() << "the provider does not support DAT_COMPLETION_UNSIGNALLED_FLAG";
    DAT_EVD_HANDLE dto = make_evd(16, DAT_EVD_DTO_FLAG);
    DAT_EP_ATTR attr{};
    DAT_EP_PARAM defaults{};
    DAT_EP_HANDLE probe = DAT_HANDLE_NULL;
    // Start from the provider's defaults, change only the request completion flags.
    ASSERT_DAT_OK(dat_ep_create(ia_.ia, ia_.pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL, DAT_HANDLE_NULL, nullptr, &probe));
    ASSERT_DAT_OK(dat_ep_query(probe, DAT_EP_FIELD_ALL, &defaults));
    EXPECT_DAT_OK(dat_ep_free(probe));
    attr = defaults.ep_attr;
    attr.request_completion_flags = DAT_COMPLETION_UNSIGNALLED_FLAG;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_ep_create(ia_.ia, ia_.pz, DAT_HANDLE_NULL, dto, DAT_HANDLE_NULL, &attr, &ep));
    DAT_EVENT ev{};
    DAT_COUNT nmore = 0;
    // dat_evd_wait(3DAT): with DAT_COMPLETION_UNSIGNALLED_FLAG for Request Completion "the
    // threshold value must be 1. An attempt to specify some other value for threshold for this
    // case results in DAT_INVALID_STATE."
    EXPECT_DAT_ERR(dat_evd_wait(dto, 0, 2, &ev, &nmore), DAT_INVALID_STATE, 0);
    EXPECT_DAT_ERR(dat_evd_wait(dto, 0, 1, &ev, &nmore), DAT_TIMEOUT_EXPIRED, 0);
    EXPECT_DAT_OK(dat_ep_free(ep));
}

// ---- enable / disable -----------------------------------------------------------------

TEST_P(EvdTest, DisableEnableAreReportedAndIdempotent) {
    DAT_EVD_HANDLE evd = make_evd(4);
    ASSERT_DAT_OK(dat_evd_disable(evd));
    EXPECT_EQ(query(evd).evd_state & kEnableFacet, unsigned(DAT_EVD_STATE_DISABLED));
    // dat_evd_disable(3DAT): "If the Event Dispatcher is already disabled, this operation is no-op."
    EXPECT_DAT_OK(dat_evd_disable(evd));
    EXPECT_EQ(query(evd).evd_state & kEnableFacet, unsigned(DAT_EVD_STATE_DISABLED));
    ASSERT_DAT_OK(dat_evd_enable(evd));
    EXPECT_EQ(query(evd).evd_state & kEnableFacet, unsigned(DAT_EVD_STATE_ENABLED));
    // dat_evd_enable(3DAT): "If the Event Dispatcher is already enabled, this operation is no-op."
    EXPECT_DAT_OK(dat_evd_enable(evd));
    EXPECT_EQ(query(evd).evd_state & kEnableFacet, unsigned(DAT_EVD_STATE_ENABLED));
}

TEST_P(EvdTest, DisabledEvdStillServesDirectWaiters) {
    DAT_EVD_HANDLE evd = make_evd(4);
    ASSERT_DAT_OK(dat_evd_disable(evd));
    // dat_evd_enable(3DAT): "The enabling and disabling EVD has no effect on direct waiters on
    // the EVD."
    post(evd, 1);
    DAT_EVENT ev{};
    DAT_COUNT nmore = -1;
    ASSERT_DAT_OK(dat_evd_wait(evd, kLongWaitUs, 1, &ev, &nmore));
    EXPECT_EQ(ev.event_data.software_event_data.pointer, tag(1));
    EXPECT_EQ(nmore, 0);
    // A blocked waiter on a disabled EVD is woken by an arriving event.
    auto waiter = start_evd_wait(evd);
    ASSERT_TRUE(still_blocked(waiter));
    post(evd, 2);
    ASSERT_TRUE(returns_within(waiter));
    EvdWait w = waiter.get();
    EXPECT_EQ(w.r, DAT_SUCCESS) << conformance::ret_text(w.r);
    EXPECT_EQ(w.ev.event_data.software_event_data.pointer, tag(2));
    // And dequeue works as well.
    post(evd, 3);
    expect_dequeue(evd, 3);
}

// ---- waitable / unwaitable --------------------------------------------------------------

TEST_P(EvdTest, SetUnwaitableWakesABlockedWaiterWithInvalidState) {
    DAT_EVD_HANDLE evd = make_evd(4);
    auto waiter = start_evd_wait(evd);
    ASSERT_TRUE(still_blocked(waiter));
    const auto start = Clock::now();
    ASSERT_DAT_OK(dat_evd_set_unwaitable(evd));
    // dat_evd_set_unwaitable(3DAT): "threads already blocked in dat_evd_wait() are awakened and
    // return with a DAT_INVALID_STATE error without any further action by the Consumer."
    ASSERT_TRUE(returns_within(waiter)) << "blocked waiter not woken";
    EXPECT_DAT_ERR(waiter.get().r, DAT_INVALID_STATE, 0);
    EXPECT_LT(Clock::now() - start, 3s);
    EXPECT_EQ(query(evd).evd_state & kWaitFacet, unsigned(DAT_EVD_STATE_UNWAITABLE));
}

TEST_P(EvdTest, UnwaitableEvdRefusesWaitButQueuesAndDequeues) {
    DAT_EVD_HANDLE evd = make_evd(4);
    ASSERT_DAT_OK(dat_evd_set_unwaitable(evd));
    // dat_evd_set_unwaitable(3DAT): "The actual state ... is DAT_EVD_UNWAITABLE".
    EXPECT_EQ(query(evd).evd_state & kWaitFacet, unsigned(DAT_EVD_STATE_UNWAITABLE));
    DAT_EVENT ev{};
    DAT_COUNT nmore = 0;
    // "calls to dat_evd_wait(3DAT) return synchronously with a DAT_INVALID_STATE error".
    const auto start = Clock::now();
    EXPECT_DAT_ERR(dat_evd_wait(evd, 500'000, 1, &ev, &nmore), DAT_INVALID_STATE, 0);
    EXPECT_LT(Clock::now() - start, 400ms) << "the refused wait blocked";
    // "Events arriving on the EVD after it is set unwaitable ... can be retrieved with
    // dat_evd_dequeue(3DAT)."
    post(evd, 1);
    EXPECT_DAT_ERR(dat_evd_wait(evd, 500'000, 1, &ev, &nmore), DAT_INVALID_STATE, 0);
    expect_dequeue(evd, 1);

    // dat_evd_clear_unwaitable(3DAT): waits are permitted again; the state is DAT_EVD_WAITABLE.
    ASSERT_DAT_OK(dat_evd_clear_unwaitable(evd));
    EXPECT_EQ(query(evd).evd_state & kWaitFacet, unsigned(DAT_EVD_STATE_WAITABLE));
    post(evd, 2);
    ASSERT_DAT_OK(dat_evd_wait(evd, kLongWaitUs, 1, &ev, &nmore));
    EXPECT_EQ(ev.event_data.software_event_data.pointer, tag(2));
    EXPECT_DAT_ERR(dat_evd_wait(evd, 0, 1, &ev, &nmore), DAT_TIMEOUT_EXPIRED, 0);
}

// ---- resize ------------------------------------------------------------------------------

TEST_P(EvdTest, ResizeBelowQueuedEventsKeepsTheEvents) {
    DAT_EVD_HANDLE evd = make_evd(8);
    const DAT_COUNT before = query(evd).evd_qlen;
    for (std::uintptr_t n = 1; n <= 6; ++n)
        post(evd, n);
    DAT_RETURN r = dat_evd_resize(evd, 4);
    // dat_evd_resize(3DAT): DAT_INVALID_STATE "The number of entries on the event queue of the
    // Event Dispatcher exceeds the requested event queue length", and resizing "should not
    // cause any incoming or current events on the event queue to be lost".
    EXPECT_DAT_ERR(r, DAT_INVALID_STATE, 0);
    EXPECT_EQ(query(evd).evd_qlen, before) << "refused resize changed the EVD";
    for (std::uintptr_t n = 1; n <= 6; ++n)
        expect_dequeue(evd, n);
}

TEST_P(EvdTest, ResizeLargerKeepsEventsAndAcceptsMore) {
    DAT_EVD_HANDLE evd = make_evd(4);
    const DAT_COUNT old_qlen = query(evd).evd_qlen;
    ASSERT_LE(old_qlen, 1 << 16);
    for (DAT_COUNT n = 1; n <= old_qlen; ++n)
        post(evd, static_cast<std::uintptr_t>(n));
    const DAT_COUNT want = old_qlen * 2 + 8;
    if (want > attrs_.ia.max_evd_qlen)
        GTEST_SKIP() << "max_evd_qlen " << attrs_.ia.max_evd_qlen << " leaves no room to grow";
    ASSERT_DAT_OK(dat_evd_resize(evd, want));
    const DAT_COUNT new_qlen = query(evd).evd_qlen;
    EXPECT_GE(new_qlen, want);
    // The queue now holds more than before.
    for (DAT_COUNT n = old_qlen + 1; n <= want; ++n)
        ASSERT_NO_FATAL_FAILURE(post(evd, static_cast<std::uintptr_t>(n))) << "event " << n;
    for (DAT_COUNT n = 1; n <= want; ++n)
        ASSERT_NO_FATAL_FAILURE(expect_dequeue(evd, static_cast<std::uintptr_t>(n)));
    DAT_EVENT ev{};
    EXPECT_DAT_ERR(dat_evd_dequeue(evd, &ev), DAT_QUEUE_EMPTY, 0);
}

TEST_P(EvdTest, ResizeSmallerWhenEmptySucceeds) {
    DAT_EVD_HANDLE evd = make_evd(32);
    ASSERT_DAT_OK(dat_evd_resize(evd, 8));
    EXPECT_GE(query(evd).evd_qlen, 8);
    post(evd, 1);
    expect_dequeue(evd, 1);
}

TEST_P(EvdTest, ResizeToNonPositiveIsInvalidParameter) {
    DAT_EVD_HANDLE evd = make_evd(8);
    // dat_evd_resize(3DAT): DAT_INVALID_PARAMETER "The evd_min_qlen parameter is invalid".
    EXPECT_DAT_ERR(dat_evd_resize(evd, 0), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_evd_resize(evd, -3), DAT_INVALID_PARAMETER, 0);
    EXPECT_GE(query(evd).evd_qlen, 8);
}

// ---- free ---------------------------------------------------------------------------------

TEST_P(EvdTest, FreeWhileAnEndpointUsesItIsInvalidState) {
    // dat_evd_free(3DAT): DAT_INVALID_STATE "There are Event Streams associated with the Event
    // Dispatcher feeding it." -- for each EP stream in turn.
    for (int role = 0; role < 3; ++role) {
        SCOPED_TRACE(role == 0 ? "recv_evd" : role == 1 ? "request_evd" : "connect_evd");
        DAT_EVD_HANDLE evd = make_evd(8, role == 2 ? DAT_EVD_CONNECTION_FLAG : DAT_EVD_DTO_FLAG);
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        ASSERT_DAT_OK(dat_ep_create(ia_.ia, ia_.pz, role == 0 ? evd : DAT_HANDLE_NULL,
                                    role == 1 ? evd : DAT_HANDLE_NULL, role == 2 ? evd : DAT_HANDLE_NULL, nullptr,
                                    &ep));
        EXPECT_DAT_ERR(dat_evd_free(evd), DAT_INVALID_STATE, 0);
        DAT_EVD_PARAM p{};
        EXPECT_DAT_OK(dat_evd_query(evd, DAT_EVD_FIELD_ALL, &p)); // still alive
        EXPECT_DAT_OK(dat_ep_free(ep));
        EXPECT_DAT_OK(dat_evd_free(evd));
        forget(evd);
    }
}

TEST_P(EvdTest, FreeDropsQueuedEventsAndInvalidatesTheHandle) {
    DAT_EVD_HANDLE evd = make_evd(8);
    post(evd, 1);
    post(evd, 2);
    // dat_evd_free(3DAT): "All events on the queue of the specified Event Dispatcher are lost."
    ASSERT_DAT_OK(dat_evd_free(evd));
    forget(evd);
    // "Use of the handle of the destroyed Event Dispatcher in any consequent operation fails."
    DAT_EVENT ev{};
    EXPECT_DAT_INVALID_HANDLE(dat_evd_dequeue(evd, &ev), HandleKind::Evd);
    DAT_EVENT in = software_event(nullptr);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_post_se(evd, &in), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_free(evd), HandleKind::Evd);
}

INSTANTIATE_OVER_IAS(EvdTest);

} // namespace
