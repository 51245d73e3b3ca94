// SPDX-License-Identifier: BSD-3-Clause
// The kit's rules over the scripted transport (tests/core/scripted_transport.hpp):
// completion order, failures and flushes, suppression, completions that
// stand for earlier requests, the barrier fence, receives posted before a
// connection, refused posts, SRQs, connect timeouts and disconnects. The
// transport does only what each test tells it, so every path runs the way
// the test says, on every run.
//
// One EVD per side takes DTO and connection events alike, so that the
// order of flushes and the disconnect event is visible.
#include "scripted_transport.hpp"

#include <dat2/udat.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

using dat2::test::ScriptedTransport;
using kit_op_t = dat2::kit::Op *;
using namespace std::chrono_literals;

constexpr DAT_COMPLETION_FLAGS kDefault = DAT_COMPLETION_DEFAULT_FLAG;
constexpr DAT_COMPLETION_FLAGS kSuppress = DAT_COMPLETION_SUPPRESS_FLAG;
constexpr DAT_COMPLETION_FLAGS kFence = DAT_COMPLETION_BARRIER_FENCE_FLAG;

std::string hex(DAT_RETURN r) {
    char b[32];
    std::snprintf(b, sizeof b, "0x%x", r);
    return b;
}

#define ASSERT_OK(expr)                                                                                                \
    do {                                                                                                               \
        DAT_RETURN r_ = (expr);                                                                                        \
        ASSERT_EQ(r_, DAT_SUCCESS) << #expr << " -> " << hex(r_);                                                      \
    } while (0)

class Environment : public ::testing::Environment {
public:
    void SetUp() override {
        // No dat.conf entry: the scripted providers register themselves.
        setenv("DAT_OVERRIDE", "/dev/null", 1);
        dat2::test::register_scripted("scripted", "");
        dat2::test::register_scripted("scripted-ordered", "in_order=1 fence=1 recv_before_connect=1");
        dat2::test::register_scripted("scripted-srq", "srq=64");
        dat2::test::register_scripted("scripted-recvs-unordered", "recvs_out_of_order=1");
    }
};
const auto *const kEnvironment = ::testing::AddGlobalTestEnvironment(new Environment);

// What a test looks at of an event.
struct Seen {
    DAT_EVENT_NUMBER number;
    DAT_UINT64 cookie = 0;
    DAT_DTO_COMPLETION_STATUS status = DAT_DTO_SUCCESS;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    bool operator==(const Seen &o) const { return number == o.number && cookie == o.cookie && status == o.status; }
};
std::ostream &operator<<(std::ostream &os, const Seen &s) {
    return os << "{event " << std::hex << s.number << std::dec << " cookie " << s.cookie << " status " << s.status
              << "}";
}
Seen dto(DAT_UINT64 cookie, DAT_DTO_COMPLETION_STATUS status = DAT_DTO_SUCCESS) {
    return {DAT_DTO_COMPLETION_EVENT, cookie, status};
}
Seen conn(DAT_EVENT_NUMBER n) { return {n}; }
DAT_DTO_COOKIE cookie_of(DAT_UINT64 v) {
    DAT_DTO_COOKIE c;
    c.as_64 = v;
    return c;
}

// One IA of a scripted provider with a PZ, a 4 KiB LMR, one EVD for
// everything and one EP.
struct Side {
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
    DAT_LMR_CONTEXT lmr_context = 0;
    DAT_RMR_CONTEXT rmr_context = 0;
    std::vector<char> buffer = std::vector<char>(4096);

    void open(const char *name) {
        ASSERT_OK(dat_ia_open(const_cast<char *>(name), 16, &async_evd, &ia));
        ASSERT_OK(dat_pz_create(ia, &pz));
        ASSERT_OK(dat_evd_create(
            ia, 256, DAT_HANDLE_NULL,
            static_cast<DAT_EVD_FLAGS>(DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG | DAT_EVD_CR_FLAG), &evd));
        DAT_REGION_DESCRIPTION region;
        region.for_va = buffer.data();
        DAT_VLEN registered = 0;
        DAT_VADDR address = 0;
        ASSERT_OK(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, buffer.size(), pz, DAT_MEM_PRIV_ALL_FLAG,
                                 DAT_VA_TYPE_VA, &lmr, &lmr_context, &rmr_context, &registered, &address));
        ASSERT_OK(dat_ep_create(ia, pz, evd, evd, evd, nullptr, &ep));
    }
    ~Side() {
        if (ia)
            dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    }
    ScriptedTransport &script() const { return ScriptedTransport::of(pz); }

    DAT_LMR_TRIPLET iov(std::size_t offset = 0, std::size_t len = 64) const {
        DAT_LMR_TRIPLET t;
        t.lmr_context = lmr_context;
        t.virtual_address = reinterpret_cast<DAT_VADDR>(buffer.data() + offset);
        t.segment_length = len;
        return t;
    }
    DAT_RMR_TRIPLET remote() const {
        DAT_RMR_TRIPLET r;
        r.rmr_context = 0x77;
        r.virtual_address = 0x1000;
        r.segment_length = 4096;
        return r;
    }
    DAT_RETURN send(DAT_UINT64 cookie, DAT_COMPLETION_FLAGS flags = kDefault) {
        DAT_LMR_TRIPLET t = iov();
        return dat_ep_post_send(ep, 1, &t, cookie_of(cookie), flags);
    }
    DAT_RETURN recv(DAT_UINT64 cookie) {
        DAT_LMR_TRIPLET t = iov(1024);
        return dat_ep_post_recv(ep, 1, &t, cookie_of(cookie), kDefault);
    }
    DAT_RETURN write(DAT_UINT64 cookie, DAT_COMPLETION_FLAGS flags = kDefault) {
        DAT_LMR_TRIPLET t = iov();
        DAT_RMR_TRIPLET r = remote();
        return dat_ep_post_rdma_write(ep, 1, &t, cookie_of(cookie), &r, flags);
    }
    DAT_RETURN read(DAT_UINT64 cookie, DAT_COMPLETION_FLAGS flags = kDefault) {
        DAT_LMR_TRIPLET t = iov(2048);
        DAT_RMR_TRIPLET r = remote();
        r.segment_length = t.segment_length; // a read brings all of the remote buffer
        return dat_ep_post_rdma_read(ep, 1, &t, cookie_of(cookie), &r, flags);
    }

    // Every event queued now, in order.
    std::vector<Seen> events() {
        std::vector<Seen> out;
        DAT_EVENT e;
        while (dat_evd_dequeue(evd, &e) == DAT_SUCCESS) {
            Seen s{e.event_number};
            if (e.event_number == DAT_DTO_COMPLETION_EVENT) {
                s.cookie = e.event_data.dto_completion_event_data.user_cookie.as_64;
                s.status = e.event_data.dto_completion_event_data.status;
                s.ep = e.event_data.dto_completion_event_data.ep_handle;
            } else if (e.event_number != DAT_CONNECTION_REQUEST_EVENT) {
                s.ep = e.event_data.connect_event_data.ep_handle;
            }
            out.push_back(s);
        }
        return out;
    }
    // The next event, waiting up to `timeout`.
    bool wait(Seen &out, std::chrono::milliseconds timeout = 2000ms) {
        DAT_EVENT e;
        DAT_COUNT more = 0;
        if (dat_evd_wait(evd, static_cast<DAT_TIMEOUT>(timeout.count() * 1000), 1, &e, &more) != DAT_SUCCESS)
            return false;
        out = Seen{e.event_number};
        if (e.event_number == DAT_DTO_COMPLETION_EVENT) {
            out.cookie = e.event_data.dto_completion_event_data.user_cookie.as_64;
            out.status = e.event_data.dto_completion_event_data.status;
        }
        return true;
    }

    DAT_RETURN start_connect(DAT_TIMEOUT timeout = DAT_TIMEOUT_INFINITE) {
        sockaddr_in peer{};
        peer.sin_family = AF_INET;
        peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return dat_ep_connect(ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&peer), 1, timeout, 0, nullptr,
                              DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
    }
    // Connected, with the ESTABLISHED event taken.
    void connect() {
        ASSERT_OK(start_connect());
        script().establish(ep);
        EXPECT_EQ(events(), std::vector<Seen>{conn(DAT_CONNECTION_EVENT_ESTABLISHED)});
    }
    DAT_EP_STATE state() {
        DAT_EP_STATE s = DAT_EP_STATE_UNCONNECTED;
        dat_ep_get_status(ep, &s, nullptr, nullptr);
        return s;
    }
    bool requests_idle() {
        DAT_BOOLEAN idle = DAT_FALSE;
        dat_ep_get_status(ep, nullptr, nullptr, &idle);
        return idle == DAT_TRUE;
    }
    bool recvs_idle() {
        DAT_BOOLEAN idle = DAT_FALSE;
        dat_ep_get_status(ep, nullptr, &idle, nullptr);
        return idle == DAT_TRUE;
    }
    kit_op_t op(std::size_t n) { return script().op(ep, n); }
    std::size_t posted() { return script().log(ep).posted.size(); }
};

class KitRules : public ::testing::Test {
protected:
    Side side;
};

// ---- completion order ---------------------------------------------------------

TEST_F(KitRules, RequestsCompletedOutOfOrderAreReportedInPostingOrder) {
    side.open("scripted");
    side.connect();
    for (DAT_UINT64 c : {1, 2, 3})
        ASSERT_OK(side.send(c));
    side.script().complete(side.op(2));
    side.script().complete(side.op(1));
    EXPECT_EQ(side.events(), std::vector<Seen>{}) << "held behind the first request";
    side.script().complete(side.op(0));
    EXPECT_EQ(side.events(), (std::vector<Seen>{dto(1), dto(2), dto(3)}));
    EXPECT_TRUE(side.requests_idle());
}

TEST_F(KitRules, ReceivesAreReportedAsTheyComplete) {
    side.open("scripted");
    side.connect();
    ASSERT_OK(side.recv(1));
    ASSERT_OK(side.recv(2));
    side.script().complete(side.op(1), DAT_DTO_SUCCESS, 10);
    EXPECT_EQ(side.events(), std::vector<Seen>{dto(2)});
}

// A transport whose receives may complete out of posting order (rxm's
// rendezvous): reported in posting order (dat_srq_create(3DAT): "in the
// order of the posted matching Sends").
TEST_F(KitRules, ReceivesCompletedOutOfOrderAreReportedInPostingOrderWhereTheTransportSaysSo) {
    side.open("scripted-recvs-unordered");
    // Four receives at most: the second round below goes round the ring of held receives.
    DAT_EP_PARAM param{};
    param.ep_attr.max_recv_dtos = 4;
    ASSERT_OK(dat_ep_modify(side.ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &param));
    side.connect();
    for (DAT_UINT64 c : {1, 2, 3})
        ASSERT_OK(side.recv(c));
    side.script().complete(side.op(2), DAT_DTO_SUCCESS, 10);
    side.script().complete(side.op(1), DAT_DTO_SUCCESS, 10);
    EXPECT_EQ(side.events(), std::vector<Seen>{}) << "held behind the first receive";
    EXPECT_FALSE(side.recvs_idle());
    side.script().complete(side.op(0), DAT_DTO_SUCCESS, 10);
    EXPECT_EQ(side.events(), (std::vector<Seen>{dto(1), dto(2), dto(3)}));
    EXPECT_TRUE(side.recvs_idle());
    // And again, receives 4 and 5 at the ring's last and first positions.
    for (DAT_UINT64 c : {4, 5})
        ASSERT_OK(side.recv(c));
    side.script().complete(side.op(4), DAT_DTO_SUCCESS, 10);
    side.script().complete(side.op(3), DAT_DTO_SUCCESS, 10);
    EXPECT_EQ(side.events(), (std::vector<Seen>{dto(4), dto(5)}));
}

TEST_F(KitRules, AReceiveTheTransportRefusesPassesItsTurnInTheReceivesOrder) {
    side.open("scripted-recvs-unordered");
    side.connect();
    ASSERT_OK(side.recv(1));
    side.script().fail_next_post(DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0));
    EXPECT_EQ(side.recv(2), DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0));
    ASSERT_OK(side.recv(3));
    side.script().complete(side.op(1), DAT_DTO_SUCCESS, 10); // the transport's second receive is 3
    EXPECT_EQ(side.events(), std::vector<Seen>{}) << "held behind receive 1";
    side.script().complete(side.op(0), DAT_DTO_SUCCESS, 10);
    EXPECT_EQ(side.events(), (std::vector<Seen>{dto(1), dto(3)}));
    EXPECT_TRUE(side.recvs_idle()) << "the refused receive's record is back too";
    // Refused while it is its turn.
    side.script().fail_next_post(DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0));
    EXPECT_EQ(side.recv(4), DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0));
    ASSERT_OK(side.recv(5));
    side.script().complete(side.op(side.posted() - 1), DAT_DTO_SUCCESS, 10);
    EXPECT_EQ(side.events(), std::vector<Seen>{dto(5)});
}

TEST_F(KitRules, AConnectionEndFlushesTheReceivesHeldBehindAnOutstandingOne) {
    side.open("scripted-recvs-unordered");
    side.connect();
    for (DAT_UINT64 c : {1, 2, 3})
        ASSERT_OK(side.recv(c));
    side.script().complete(side.op(1), DAT_DTO_SUCCESS, 10); // held behind receive 1
    side.script().end_connection(side.ep, false);
    EXPECT_EQ(side.events(), (std::vector<Seen>{dto(1, DAT_DTO_ERR_FLUSHED), dto(2, DAT_DTO_ERR_FLUSHED),
                                                dto(3, DAT_DTO_ERR_FLUSHED), conn(DAT_CONNECTION_EVENT_DISCONNECTED)}));
    side.script().complete(side.op(0), DAT_DTO_SUCCESS, 10); // late: dropped
    EXPECT_EQ(side.events(), std::vector<Seen>{});
    ASSERT_OK(dat_ep_reset(side.ep));
    EXPECT_TRUE(side.recvs_idle());
    side.connect();
    ASSERT_OK(side.recv(4));
    side.script().complete(side.op(side.posted() - 1), DAT_DTO_SUCCESS, 10);
    EXPECT_EQ(side.events(), std::vector<Seen>{dto(4)}) << "the order starts again after the reset";
}

TEST_F(KitRules, AFailedRequestFlushesTheSuccessesHeldBehindIt) {
    side.open("scripted");
    side.connect();
    ASSERT_OK(side.write(1));
    ASSERT_OK(side.send(2));
    ASSERT_OK(side.send(3));
    side.script().complete(side.op(1)); // the send "completed" before the write that precedes it
    side.script().complete(side.op(0), DAT_DTO_ERR_REMOTE_ACCESS);
    side.script().complete(side.op(2));
    EXPECT_EQ(side.events(), (std::vector<Seen>{dto(1, DAT_DTO_ERR_REMOTE_ACCESS), dto(2, DAT_DTO_ERR_FLUSHED),
                                                dto(3, DAT_DTO_ERR_FLUSHED)}));
}

// ---- suppression ------------------------------------------------------------------

TEST_F(KitRules, ASuppressedSuccessIsSilentAndASuppressedFailureIsReported) {
    side.open("scripted");
    side.connect();
    ASSERT_OK(side.send(1, kSuppress));
    ASSERT_OK(side.send(2, kSuppress));
    side.script().complete(side.op(0));
    EXPECT_EQ(side.events(), std::vector<Seen>{});
    side.script().complete(side.op(1), DAT_DTO_ERR_TRANSPORT);
    EXPECT_EQ(side.events(), std::vector<Seen>{dto(2, DAT_DTO_ERR_TRANSPORT)});
    EXPECT_TRUE(side.requests_idle()) << "both records are back";
}

TEST_F(KitRules, WithInOrderRequestsACompletionStandsForTheSuppressedOnesBeforeIt) {
    side.open("scripted-ordered");
    side.connect();
    ASSERT_OK(side.send(1, kSuppress));
    ASSERT_OK(side.write(2, kSuppress));
    ASSERT_OK(side.send(3));
    // The transport posted 1 and 2 without completions of their own.
    side.script().complete(side.op(2));
    EXPECT_EQ(side.events(), std::vector<Seen>{dto(3)});
    EXPECT_TRUE(side.requests_idle()) << "the suppressed requests' records came back with it";
}

TEST_F(KitRules, AfterAFailureTheSuppressedRequestsACompletionStandsForAreReportedFlushed) {
    side.open("scripted-ordered");
    side.connect();
    ASSERT_OK(side.write(1));
    ASSERT_OK(side.send(2, kSuppress));
    ASSERT_OK(side.send(3));
    side.script().complete(side.op(0), DAT_DTO_ERR_REMOTE_ACCESS);
    side.script().complete(side.op(2));
    EXPECT_EQ(side.events(), (std::vector<Seen>{dto(1, DAT_DTO_ERR_REMOTE_ACCESS), dto(2, DAT_DTO_ERR_FLUSHED),
                                                dto(3, DAT_DTO_ERR_FLUSHED)}));
    EXPECT_TRUE(side.requests_idle());
}

TEST_F(KitRules, ARefusedPostAmongSuppressedOnesDoesNotHoldBackTheCompletionStandingForThem) {
    side.open("scripted-ordered");
    side.connect();
    ASSERT_OK(side.send(1, kSuppress));
    side.script().fail_next_post(DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0));
    EXPECT_EQ(side.send(2, kSuppress), DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0));
    ASSERT_OK(side.send(3, kSuppress));
    ASSERT_OK(side.send(4));
    side.script().complete(side.op(2)); // the transport's third post is request 4
    EXPECT_EQ(side.events(), std::vector<Seen>{dto(4)});
    EXPECT_TRUE(side.requests_idle());
}

TEST_F(KitRules, WithoutInOrderRequestsACompletionStandsOnlyForItself) {
    side.open("scripted");
    side.connect();
    ASSERT_OK(side.send(1, kSuppress));
    ASSERT_OK(side.send(2));
    side.script().complete(side.op(1));
    EXPECT_EQ(side.events(), std::vector<Seen>{}) << "held behind the suppressed send, which has not completed";
    EXPECT_FALSE(side.requests_idle());
    side.script().complete(side.op(0));
    EXPECT_EQ(side.events(), std::vector<Seen>{dto(2)});
}

TEST_F(KitRules, ACompletionStandsOnlyForSuppressedSendsAndWrites) {
    side.open("scripted-ordered");
    side.connect();
    ASSERT_OK(side.read(1, kSuppress)); // a read always completes by itself
    ASSERT_OK(side.send(2));
    side.script().complete(side.op(1));
    EXPECT_EQ(side.events(), std::vector<Seen>{});
    side.script().complete(side.op(0));
    EXPECT_EQ(side.events(), std::vector<Seen>{dto(2)});
}

// ---- refused posts -----------------------------------------------------------------

TEST_F(KitRules, APostTheTransportRefusesPassesItsTurnWithoutAnEvent) {
    side.open("scripted");
    side.connect();
    ASSERT_OK(side.send(1));
    side.script().fail_next_post(DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0));
    EXPECT_EQ(side.send(2), DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0));
    ASSERT_OK(side.send(3));
    side.script().complete(side.op(1)); // the transport's second post is request 3
    side.script().complete(side.op(0));
    EXPECT_EQ(side.events(), (std::vector<Seen>{dto(1), dto(3)}));
    EXPECT_TRUE(side.requests_idle());
}

// ---- disconnects and flushes -------------------------------------------------------

TEST_F(KitRules, AConnectionEndFlushesWhatIsOutstandingInPostingOrderBeforeItsEvent) {
    side.open("scripted");
    side.connect();
    ASSERT_OK(side.recv(1));
    ASSERT_OK(side.send(2));
    ASSERT_OK(side.recv(3));
    ASSERT_OK(side.send(4));
    side.script().complete(side.op(1)); // completed, not yet read
    side.script().end_connection(side.ep, false);
    EXPECT_EQ(side.events(), (std::vector<Seen>{dto(2), dto(1, DAT_DTO_ERR_FLUSHED), dto(3, DAT_DTO_ERR_FLUSHED),
                                                dto(4, DAT_DTO_ERR_FLUSHED), conn(DAT_CONNECTION_EVENT_DISCONNECTED)}));
    EXPECT_EQ(side.state(), DAT_EP_STATE_DISCONNECTED);
}

TEST_F(KitRules, ALateCompletionOfAFlushedDtoIsDropped) {
    side.open("scripted");
    side.connect();
    ASSERT_OK(side.send(1));
    ASSERT_OK(side.recv(2));
    side.script().end_connection(side.ep, true);
    EXPECT_EQ(side.events(), (std::vector<Seen>{dto(1, DAT_DTO_ERR_FLUSHED), dto(2, DAT_DTO_ERR_FLUSHED),
                                                conn(DAT_CONNECTION_EVENT_BROKEN)}));
    side.script().complete(side.op(0));
    side.script().complete(side.op(1));
    EXPECT_EQ(side.events(), std::vector<Seen>{});
    ASSERT_OK(dat_ep_reset(side.ep));
    EXPECT_TRUE(side.requests_idle());
}

// A receive the library took before the connection ended (rxm's rendezvous
// reads the message into it later) is not reported flushed, and the free
// does not return, while the library may still write its buffer: the kit
// reads the queues until the transport says it no longer does.
TEST_F(KitRules, AReceiveTheLibraryStillWritesIsReportedWhenItCompletesNotFlushedBefore) {
    side.open("scripted");
    side.connect();
    ASSERT_OK(side.recv(1));
    ASSERT_OK(side.recv(2));
    side.script().write_late(side.op(0), 3, DAT_DTO_SUCCESS, 8);
    side.script().end_connection(side.ep, false);
    EXPECT_EQ(side.events(), (std::vector<Seen>{dto(1), dto(2, DAT_DTO_ERR_FLUSHED),
                                                conn(DAT_CONNECTION_EVENT_DISCONNECTED)}));
}

TEST_F(KitRules, AFreeReturnsOnlyOnceTheLibraryNoLongerWritesTheEndpointsBuffers) {
    side.open("scripted-ordered"); // takes receives before a connection
    ASSERT_OK(side.recv(1));
    side.script().write_late(side.op(0), 3, DAT_DTO_ERR_FLUSHED);
    ASSERT_OK(dat_ep_free(side.ep));
    side.ep = DAT_HANDLE_NULL;
    EXPECT_EQ(side.script().late_left(), 0u) << "dat_ep_free returned while the library still wrote";
}

// A transport's queue is shared by the EPs of an EVD, and reading it may
// cost what all of them cost (libfabric tcp's progress walks every endpoint
// bound to it): an EP with nothing outstanding ends and goes without it.
TEST_F(KitRules, AnIdleEndpointIsDisconnectedAndFreedWithoutReadingTheQueue) {
    side.open("scripted");
    side.connect();
    ASSERT_OK(side.recv(1));
    side.script().complete(side.op(0), DAT_DTO_SUCCESS, 8);
    EXPECT_EQ(side.events(), std::vector<Seen>{dto(1)}); // every record back
    const int reads = side.script().cq_reads();
    side.script().end_connection(side.ep, false);
    EXPECT_EQ(side.script().cq_reads(), reads) << "the disconnect read the queue";
    EXPECT_EQ(side.events(), std::vector<Seen>{conn(DAT_CONNECTION_EVENT_DISCONNECTED)});
    const int before_free = side.script().cq_reads();
    ASSERT_OK(dat_ep_free(side.ep));
    side.ep = DAT_HANDLE_NULL;
    EXPECT_EQ(side.script().cq_reads(), before_free) << "the free read the queue";
}

// What is outstanding keeps the order: a completion still in the queue is
// reported before the flushes and the event, also when freed unconnected.
TEST_F(KitRules, AFreeTakesTheCompletionsOfItsOutstandingDtosOutOfTheQueue) {
    side.open("scripted-ordered"); // takes receives before a connection
    ASSERT_OK(side.recv(1));
    side.script().complete(side.op(0), DAT_DTO_SUCCESS, 8);
    const int reads = side.script().cq_reads();
    ASSERT_OK(dat_ep_free(side.ep));
    side.ep = DAT_HANDLE_NULL;
    ASSERT_GT(side.script().cq_reads(), reads) << "the free left its completion in the queue";
    EXPECT_EQ(side.events(), std::vector<Seen>{dto(1)});
}

TEST_F(KitRules, GracefulAndAbruptDisconnectsReachTheTransport) {
    side.open("scripted");
    side.connect();
    ASSERT_OK(dat_ep_disconnect(side.ep, DAT_CLOSE_GRACEFUL_FLAG));
    EXPECT_EQ(side.state(), DAT_EP_STATE_DISCONNECT_PENDING);
    EXPECT_EQ(side.script().log(side.ep).disconnects, 1);
    EXPECT_TRUE(side.script().log(side.ep).last_graceful);
    ASSERT_OK(dat_ep_disconnect(side.ep, DAT_CLOSE_GRACEFUL_FLAG)); // "has no effect"
    EXPECT_EQ(side.script().log(side.ep).disconnects, 1);
    ASSERT_OK(dat_ep_disconnect(side.ep, DAT_CLOSE_ABRUPT_FLAG));
    EXPECT_EQ(side.script().log(side.ep).disconnects, 2);
    EXPECT_FALSE(side.script().log(side.ep).last_graceful);
    side.script().end_connection(side.ep, false);
    EXPECT_EQ(side.events(), std::vector<Seen>{conn(DAT_CONNECTION_EVENT_DISCONNECTED)});
    ASSERT_OK(dat_ep_disconnect(side.ep, DAT_CLOSE_ABRUPT_FLAG)); // a no-op once disconnected
    EXPECT_EQ(side.script().log(side.ep).disconnects, 2);
}

TEST_F(KitRules, PostsOnADisconnectedEndpointAreFlushedAtOnce) {
    side.open("scripted");
    side.connect();
    side.script().end_connection(side.ep, false);
    side.events();
    ASSERT_OK(side.recv(1));
    EXPECT_EQ(side.events(), std::vector<Seen>{dto(1, DAT_DTO_ERR_FLUSHED)});
    EXPECT_EQ(side.posted(), 0u) << "the transport never saw it";
}

// ---- the barrier fence ------------------------------------------------------------------

TEST_F(KitRules, WithoutATransportFenceAFencedDtoWaitsForEarlierReads) {
    side.open("scripted");
    side.connect();
    ASSERT_OK(side.read(1));
    std::atomic<bool> posted{false};
    std::thread fenced([&] {
        EXPECT_EQ(side.write(2, kFence), DAT_SUCCESS);
        posted = true;
    });
    std::this_thread::sleep_for(100ms);
    EXPECT_FALSE(posted.load()) << "posted before the read completed";
    EXPECT_EQ(side.posted(), 1u);
    side.script().complete(side.op(0));
    fenced.join();
    EXPECT_EQ(side.posted(), 2u);
    side.script().complete(side.op(1));
    EXPECT_EQ(side.events(), (std::vector<Seen>{dto(1), dto(2)}));
}

TEST_F(KitRules, WithATransportFenceAFencedDtoIsPostedAtOnceWithItsFlag) {
    side.open("scripted-ordered");
    side.connect();
    ASSERT_OK(side.read(1));
    ASSERT_OK(side.write(2, kFence));
    auto log = side.script().log(side.ep);
    ASSERT_EQ(log.posted.size(), 2u);
    EXPECT_TRUE(log.posted[1].flags & kFence);
}

// ---- receives before the connection ------------------------------------------------------

TEST_F(KitRules, ReceivesPostedBeforeTheConnectionReachTheTransportOnceItIsReady) {
    side.open("scripted");
    ASSERT_OK(side.recv(1));
    ASSERT_OK(side.recv(2));
    EXPECT_EQ(side.posted(), 0u);
    side.connect();
    ASSERT_OK(side.recv(3));
    auto log = side.script().log(side.ep);
    ASSERT_EQ(log.posted.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i)
        EXPECT_EQ(log.posted[i].op->cookie.as_64, i + 1) << "posting order";
}

TEST_F(KitRules, ATransportThatTakesEarlyReceivesGetsThemAtOnce) {
    side.open("scripted-ordered");
    ASSERT_OK(side.recv(1));
    EXPECT_EQ(side.posted(), 1u);
}

TEST_F(KitRules, ReceivesHeldForAConnectionThatFailsAreFlushedNotPosted) {
    side.open("scripted");
    ASSERT_OK(side.recv(1));
    ASSERT_OK(side.start_connect());
    dat2::kit::on_connect_failed(*static_cast<dat2::kit::Ep *>(side.ep), DAT_CONNECTION_EVENT_PEER_REJECTED, nullptr,
                                 0);
    EXPECT_EQ(side.events(),
              (std::vector<Seen>{dto(1, DAT_DTO_ERR_FLUSHED), conn(DAT_CONNECTION_EVENT_PEER_REJECTED)}));
    ASSERT_OK(dat_ep_reset(side.ep));
    side.connect();
    EXPECT_EQ(side.posted(), 0u) << "a flushed receive was posted after all";
}

// ---- connect timeouts ---------------------------------------------------------------------

TEST_F(KitRules, AConnectThatTimesOutIsCancelledAndReportedOnce) {
    side.open("scripted");
    ASSERT_OK(side.recv(1));
    ASSERT_OK(side.start_connect(20000)); // 20 ms
    Seen s{};
    ASSERT_TRUE(side.wait(s));
    EXPECT_EQ(s, dto(1, DAT_DTO_ERR_FLUSHED));
    ASSERT_TRUE(side.wait(s));
    EXPECT_EQ(s, conn(DAT_CONNECTION_EVENT_TIMED_OUT));
    EXPECT_EQ(side.script().log(side.ep).cancels, 1);
    side.script().establish(side.ep); // too late: ignored
    EXPECT_EQ(side.events(), std::vector<Seen>{});
    EXPECT_EQ(side.state(), DAT_EP_STATE_DISCONNECTED);
}

TEST_F(KitRules, AConnectionEstablishedInTimeIsNotCancelledAndCarriesTheAcceptData) {
    side.open("scripted");
    ASSERT_OK(side.start_connect(50000)); // 50 ms
    const char welcome[] = "welcome";
    side.script().establish(side.ep, 4242, welcome, sizeof welcome);
    std::this_thread::sleep_for(150ms);
    DAT_EVENT e;
    ASSERT_OK(dat_evd_dequeue(side.evd, &e));
    EXPECT_EQ(e.event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    ASSERT_EQ(e.event_data.connect_event_data.private_data_size, static_cast<DAT_COUNT>(sizeof welcome));
    EXPECT_EQ(std::memcmp(e.event_data.connect_event_data.private_data, welcome, sizeof welcome), 0);
    EXPECT_EQ(side.events(), std::vector<Seen>{});
    EXPECT_EQ(side.script().log(side.ep).cancels, 0);
    EXPECT_EQ(side.state(), DAT_EP_STATE_CONNECTED);
}

// ---- the passive side ----------------------------------------------------------------------

TEST_F(KitRules, AnAcceptedRequestIsEstablishedWithoutPrivateData) {
    side.open("scripted");
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    ASSERT_OK(dat_psp_create(side.ia, 77, side.evd, DAT_PSP_CONSUMER_FLAG, &psp));
    const char hello[] = "hello";
    side.script().request(psp, hello, sizeof hello);
    DAT_EVENT e;
    ASSERT_OK(dat_evd_dequeue(side.evd, &e));
    ASSERT_EQ(e.event_number, DAT_CONNECTION_REQUEST_EVENT);
    DAT_CR_HANDLE cr = e.event_data.cr_arrival_event_data.cr_handle;
    DAT_CR_PARAM param;
    ASSERT_OK(dat_cr_query(cr, DAT_CR_FIELD_ALL, &param));
    EXPECT_EQ(param.private_data_size, static_cast<DAT_COUNT>(sizeof hello));
    ASSERT_OK(side.recv(1));
    ASSERT_OK(dat_cr_accept(cr, side.ep, 0, nullptr));
    EXPECT_EQ(side.posted(), 1u) << "the early receive goes in at the accept";
    side.script().establish(side.ep, 4242, hello, sizeof hello);
    ASSERT_OK(dat_evd_dequeue(side.evd, &e));
    EXPECT_EQ(e.event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    EXPECT_EQ(e.event_data.connect_event_data.private_data_size, 0);
    DAT_EP_PARAM ep_param;
    ASSERT_OK(dat_ep_query(side.ep, DAT_EP_FIELD_LOCAL_PORT_QUAL, &ep_param));
    EXPECT_EQ(ep_param.local_port_qual, 4242u);
}

// ---- shared receive queues -------------------------------------------------------------------

TEST_F(KitRules, AnSrqReceiveCompletesOnTheEndpointThatTookIt) {
    side.open("scripted-srq");
    DAT_SRQ_ATTR attr{};
    attr.max_recv_dtos = 8;
    attr.max_recv_iov = 1;
    attr.low_watermark = DAT_SRQ_LW_DEFAULT;
    DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
    ASSERT_OK(dat_srq_create(side.ia, side.pz, &attr, &srq));
    DAT_EP_PARAM ep_param;
    ASSERT_OK(dat_ep_query(side.ep, DAT_EP_FIELD_ALL, &ep_param));
    DAT_EP_HANDLE ep2 = DAT_HANDLE_NULL;
    ASSERT_OK(dat_ep_create_with_srq(side.ia, side.pz, side.evd, side.evd, side.evd, srq, &ep_param.ep_attr, &ep2));
    for (DAT_UINT64 c : {1, 2}) {
        DAT_LMR_TRIPLET t = side.iov(1024 + 64 * c, 64);
        ASSERT_OK(dat_srq_post_recv(srq, 1, &t, cookie_of(c)));
    }
    ASSERT_EQ(side.script().srq_posted(srq), 2u);
    side.script().complete(side.script().srq_op(srq, 1), DAT_DTO_SUCCESS, 8, ep2);
    auto seen = side.events();
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0], dto(2));
    EXPECT_EQ(seen[0].ep, ep2);
    DAT_SRQ_PARAM p;
    ASSERT_OK(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, &p));
    EXPECT_EQ(p.available_dto_count, 1) << "the completed record left the SRQ";
    ASSERT_OK(dat_ep_free(ep2));
    ASSERT_OK(dat_srq_free(srq));
}

} // namespace
