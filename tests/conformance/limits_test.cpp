// SPDX-License-Identifier: BSD-3-Clause
// The limits dat_ia_query(3DAT) reports are real, and an IA holds thousands
// of objects at a constant cost each.
//
// - max_pzs, max_evds, max_eps, max_lmrs: that many objects can exist in one
//   IA (a few thousand are made when the limit is larger), and where the
//   limit was reached one more fails with DAT_INSUFFICIENT_RESOURCES (the
//   create calls' man pages: "The operation failed due to resource
//   limitations"). A limit the transport cannot reach (file descriptors run
//   out first) is a wrong report, never a reason to make fewer here.
// - max_evd_qlen, max_dto_per_ep, max_iov_segments_per_dto: an EVD of the
//   largest queue, an EP with that many receives (all posted, one more is
//   DAT_INSUFFICIENT_RESOURCES: dat_ep_post_recv(3DAT)), a DTO with that
//   many segments.
// - Creating and freeing one object costs the same with a thousand or many
//   thousands of its kind in the IA: the per-object time of the first and
//   of the last thousand is compared (minimum over chunks of 256, so a
//   scheduler hiccup does not count; a factor of 5 plus 2 us, so only a
//   cost that grows with the number of objects, an O(n) scan, fails).
// - An idle connection costs the process no more CPU time with a thousand
//   EVDs in its IA than with a few: what a transport does in the background
//   (a progress thread) follows what is connected and what completes, never
//   the number of queues.
#include "connected.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <functional>
#include <sstream>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kReach = 65536; // objects made when the limit is larger
constexpr std::size_t kChunk = 64;    // objects per timed chunk
constexpr std::size_t kWindow = 16;   // chunks of the first and of the last thousand
constexpr double kGrowthFactor = 5.0;
constexpr double kSlackUs = 2.0;

std::size_t open_fds() {
    std::size_t n = 0;
    if (DIR *d = opendir("/proc/self/fd")) {
        while (readdir(d))
            ++n;
        closedir(d);
    }
    return n;
}

// Per-object time (us) of each chunk of kChunk calls of `step(i)`; stops at
// the first call that fails (its index in *stopped, its code in *failed).
std::vector<double> timed(std::size_t n, const std::function<DAT_RETURN(std::size_t)> &step, std::size_t *stopped,
                          DAT_RETURN *failed) {
    std::vector<double> chunks;
    *stopped = n;
    *failed = DAT_SUCCESS;
    for (std::size_t first = 0; first < n; first += kChunk) {
        const std::size_t last = std::min(n, first + kChunk);
        const auto t0 = Clock::now();
        for (std::size_t i = first; i < last; ++i) {
            DAT_RETURN r = step(i);
            if (r != DAT_SUCCESS) {
                *stopped = i;
                *failed = r;
                return chunks;
            }
        }
        const std::chrono::duration<double, std::micro> took = Clock::now() - t0;
        if (last - first == kChunk)
            chunks.push_back(took.count() / kChunk);
    }
    return chunks;
}

// The cost of one object does not grow with how many exist: empty, or what
// grew. Frees (oldest first) are judged both ways: a free that searches
// what is left gets cheaper as objects go. A creation cheaper at the end
// than at the start is warm-up (an emulated CPU translates each path the
// first time it runs), not a cost of how many exist.
// Under TSan each descriptor operation also updates the sanitizer's own
// per-descriptor state, whose cost grows with the descriptors open (EVD
// create: 140 us per object among the first thousand, 780 among the last of
// 3712, where the plain and ASan builds stay flat): the cost per object is
// judged in the other builds; the limits themselves are checked in all.
constexpr const char *kGrowthUnjudged =
    conformance::kTsanBuild ? "a TSan build (its descriptor bookkeeping grows with the descriptors open)" : nullptr;

std::string growth(const std::string &what, const std::vector<double> &chunks, bool both_ways) {
    if (chunks.size() < 2 * kWindow)
        return {}; // fewer than two thousand: nothing to compare
    const double first = *std::min_element(chunks.begin(), chunks.begin() + kWindow);
    const double last = *std::min_element(chunks.end() - kWindow, chunks.end());
    if (last <= kGrowthFactor * first + kSlackUs && (!both_ways || first <= kGrowthFactor * last + kSlackUs))
        return {};
    std::ostringstream text;
    text << what << ": " << first << " us per object among the first thousand, " << last << " us among the last ("
         << chunks.size() * kChunk << " objects)";
    return text.str();
}

class LimitsTest : public conformance::ConformanceTest {
protected:
    void SetUp() override {
        ConformanceTest::SetUp();
        ASSERT_DAT_OK(ia_.open(GetParam()));
        ASSERT_DAT_OK(attr_.query(ia_.ia));
    }

    // Makes objects until the IA holds `limit` of them (`existing` are there
    // already) or kReach were made; at the limit, one more must fail with
    // DAT_INSUFFICIENT_RESOURCES. Then frees them, oldest first. Both
    // phases must cost the same per object throughout.
    void exercise(const std::string &what, DAT_COUNT limit, std::size_t existing,
                  const std::function<DAT_RETURN(DAT_HANDLE *)> &make,
                  const std::function<DAT_RETURN(DAT_HANDLE)> &destroy) {
        ASSERT_GT(limit, 0) << what << ": the IA reports no limit";
        ASSERT_GE(static_cast<std::size_t>(limit), existing);
        const std::size_t room = static_cast<std::size_t>(limit) - existing;
        const std::size_t n = std::min(room, kReach);
        std::vector<DAT_HANDLE> made(n + 1, DAT_HANDLE_NULL);
        const std::size_t fds_before = open_fds();
        std::size_t stopped;
        DAT_RETURN failed;
        auto create = timed(
            n, [&](std::size_t i) { return make(&made[i]); }, &stopped, &failed);
        EXPECT_EQ(stopped, n) << what << ": creating object " << stopped + existing + 1 << " of the " << limit
                              << " dat_ia_query reports failed: " << conformance::ret_text(failed)
                              << " (open file descriptors: " << open_fds() << ")";
        if (stopped == n && n == room) {
            // dat_ia_query's limit is reached: one more is refused.
            DAT_RETURN r = make(&made[n]);
            EXPECT_EQ(DAT_GET_TYPE(r), DAT_INSUFFICIENT_RESOURCES)
                << what << ": one past max (" << limit << ") -> " << conformance::ret_text(r);
            if (r == DAT_SUCCESS)
                EXPECT_DAT_OK(destroy(made[n]));
        }
        // A slow last thousand may be another process's moment on a busy
        // machine (other tests running beside this one) rather than a cost
        // of how many exist: those objects are freed and made again, at most
        // twice, and timed anew. A cost that grows with the objects shows
        // every time.
        for (int again = 0; again < 2 && stopped == n && !growth(what + " create", create, false).empty(); ++again) {
            const std::size_t base = (create.size() - kWindow) * kChunk, k = kWindow * kChunk;
            for (std::size_t i = base; i < base + k; ++i)
                ASSERT_EQ(destroy(made[i]), DAT_SUCCESS) << what << " " << i;
            std::size_t remade;
            DAT_RETURN remake_failed;
            const std::vector<double> tail = timed(
                k, [&](std::size_t i) { return make(&made[base + i]); }, &remade, &remake_failed);
            ASSERT_EQ(remade, k) << what << ": making object " << base + remade + existing + 1
                                 << " again failed: " << conformance::ret_text(remake_failed);
            std::printf("%s: the last thousand made again (a slow moment, or a cost that grows?)\n", what.c_str());
            std::copy(tail.begin(), tail.end(), create.end() - kWindow);
        }
        const std::size_t fds_used = open_fds() - fds_before;
        DAT_RETURN free_failed;
        std::size_t free_stopped;
        auto release = timed(
            stopped, [&](std::size_t i) { return destroy(made[i]); }, &free_stopped, &free_failed);
        EXPECT_EQ(free_stopped, stopped) << what << ": freeing failed: " << conformance::ret_text(free_failed);
        RecordProperty(what + "_made", static_cast<int>(stopped));
        std::printf("%s: limit %d, made %zu (%zu file descriptors)\n", what.c_str(), limit, stopped, fds_used);
        for (const std::string &g : {growth(what + " create", create, false), growth(what + " free", release, true)}) {
            if (g.empty())
                continue;
            if (kGrowthUnjudged)
                std::printf("%s: not judged in %s\n", g.c_str(), kGrowthUnjudged);
            else
                ADD_FAILURE() << g;
        }
    }

    conformance::OpenIa ia_;
    conformance::IaAttributes attr_;
    std::vector<char> buffer_ = std::vector<char>(65536);
};

TEST_P(LimitsTest, ReportedLimitsArePositive) {
    const DAT_IA_ATTR &a = attr_.ia;
    for (auto [name, value] : {std::pair<const char *, DAT_COUNT>{"max_eps", a.max_eps},
                               {"max_dto_per_ep", a.max_dto_per_ep},
                               {"max_evds", a.max_evds},
                               {"max_evd_qlen", a.max_evd_qlen},
                               {"max_iov_segments_per_dto", a.max_iov_segments_per_dto},
                               {"max_lmrs", a.max_lmrs},
                               {"max_pzs", a.max_pzs}})
        EXPECT_GT(value, 0) << name;
    EXPECT_GT(a.max_lmr_block_size, 0u);
    EXPECT_GT(a.max_message_size, 0u);
}

TEST_P(LimitsTest, MaxPzs) {
    // OpenIa made one PZ.
    exercise(
        "PZ", attr_.ia.max_pzs, 1, [&](DAT_HANDLE *h) { return dat_pz_create(ia_.ia, h); },
        [](DAT_HANDLE h) { return dat_pz_free(h); });
}

TEST_P(LimitsTest, MaxEvds) {
    // Completion EVDs, the costliest kind (a transport queue each); the
    // IA's async EVD is one already.
    exercise(
        "EVD", attr_.ia.max_evds, 1,
        [&](DAT_HANDLE *h) { return dat_evd_create(ia_.ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, h); },
        [](DAT_HANDLE h) { return dat_evd_free(h); });
}

TEST_P(LimitsTest, MaxEps) {
    DAT_EVD_HANDLE dto = DAT_HANDLE_NULL, conn = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_evd_create(ia_.ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto));
    ASSERT_DAT_OK(dat_evd_create(ia_.ia, 64, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn));
    DAT_EP_ATTR small;
    std::memset(&small, 0, sizeof small);
    small.service_type = DAT_SERVICE_TYPE_RC;
    small.max_message_size = 4096;
    small.max_rdma_size = 4096;
    small.max_recv_dtos = small.max_request_dtos = 1;
    small.max_recv_iov = small.max_request_iov = 1;
    exercise(
        "EP", attr_.ia.max_eps, 0,
        [&](DAT_HANDLE *h) { return dat_ep_create(ia_.ia, ia_.pz, dto, dto, conn, &small, h); },
        [](DAT_HANDLE h) { return dat_ep_free(h); });
    EXPECT_DAT_OK(dat_evd_free(dto));
    EXPECT_DAT_OK(dat_evd_free(conn));
}

TEST_P(LimitsTest, MaxLmrs) {
    // Every LMR registers its own 16 bytes of one buffer.
    std::size_t next = 0;
    exercise(
        "LMR", attr_.ia.max_lmrs, 0,
        [&](DAT_HANDLE *h) {
            char *at = buffer_.data() + (next++ * 16) % (buffer_.size() - 16);
            return conformance::create_lmr(ia_.ia, ia_.pz, at, 16, DAT_MEM_PRIV_LOCAL_WRITE_FLAG, h);
        },
        [](DAT_HANDLE h) { return dat_lmr_free(h); });
}

TEST_P(LimitsTest, LargestEvdQueue) {
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_evd_create(ia_.ia, attr_.ia.max_evd_qlen, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd));
    // Filled to the brim with software events, which all come back.
    static char marker;
    for (DAT_COUNT i = 0; i < std::min<DAT_COUNT>(attr_.ia.max_evd_qlen, 100000); ++i) {
        DAT_EVENT ev = conformance::software_event(&marker);
        DAT_RETURN r = dat_evd_post_se(evd, &ev);
        ASSERT_EQ(r, DAT_SUCCESS) << "event " << i + 1 << ": " << conformance::ret_text(r);
    }
    DAT_EVD_PARAM p{};
    ASSERT_DAT_OK(dat_evd_query(evd, DAT_EVD_FIELD_EVD_QLEN, &p));
    EXPECT_GE(p.evd_qlen, attr_.ia.max_evd_qlen);
    EXPECT_DAT_OK(dat_evd_free(evd));
}

TEST_P(LimitsTest, MaxDtoPerEpReceivesArePosted) {
    const DAT_COUNT n = attr_.ia.max_dto_per_ep;
    ASSERT_GT(n, 0);
    DAT_EVD_HANDLE dto = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(
        dat_evd_create(ia_.ia, std::min(attr_.ia.max_evd_qlen, 2 * n), DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto));
    DAT_EP_ATTR a;
    std::memset(&a, 0, sizeof a);
    a.service_type = DAT_SERVICE_TYPE_RC;
    a.max_message_size = 4096;
    a.max_rdma_size = 4096;
    a.max_recv_dtos = n;
    a.max_request_dtos = n;
    a.max_recv_iov = a.max_request_iov = std::min(attr_.ia.max_iov_segments_per_dto, 4);
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_ep_create(ia_.ia, ia_.pz, dto, dto, DAT_HANDLE_NULL, &a, &ep));
    DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(conformance::create_lmr(ia_.ia, ia_.pz, buffer_.data(), 4096, DAT_MEM_PRIV_LOCAL_WRITE_FLAG, &lmr));
    DAT_LMR_PARAM lp{};
    ASSERT_DAT_OK(dat_lmr_query(lmr, DAT_LMR_FIELD_LMR_CONTEXT, &lp));
    DAT_LMR_TRIPLET seg{};
    seg.virtual_address = reinterpret_cast<DAT_VADDR>(buffer_.data());
    seg.segment_length = 64;
    seg.lmr_context = lp.lmr_context;
    DAT_DTO_COOKIE cookie{};
    // Receives are kept until a connection exists (dat_ep_post_recv(3DAT)
    // allows posting in the Unconnected state).
    for (DAT_COUNT i = 0; i < n; ++i) {
        DAT_RETURN r = dat_ep_post_recv(ep, 1, &seg, cookie, DAT_COMPLETION_DEFAULT_FLAG);
        ASSERT_EQ(r, DAT_SUCCESS) << "receive " << i + 1 << ": " << conformance::ret_text(r);
    }
    DAT_RETURN past = dat_ep_post_recv(ep, 1, &seg, cookie, DAT_COMPLETION_DEFAULT_FLAG);
    EXPECT_EQ(DAT_GET_TYPE(past), DAT_INSUFFICIENT_RESOURCES)
        << "receive " << n + 1 << " of max_recv_dtos " << n << ": " << conformance::ret_text(past);
    // One past max_dto_per_ep is not an Endpoint the IA can have.
    a.max_recv_dtos = n + 1;
    DAT_EP_HANDLE too_big = DAT_HANDLE_NULL;
    EXPECT_NE(dat_ep_create(ia_.ia, ia_.pz, dto, dto, DAT_HANDLE_NULL, &a, &too_big), DAT_SUCCESS);
    EXPECT_DAT_OK(dat_ep_free(ep));
    EXPECT_DAT_OK(dat_lmr_free(lmr));
    EXPECT_DAT_OK(dat_evd_free(dto));
}

TEST_P(LimitsTest, ConnectionEvdOfAnotherIaTakesItsEndpointsEvents) {
    // dapltest -T L -w 8 gives the EPs of 8 IAs the connection EVD of the
    // first (core/ep.cpp); when that IA closes first (abruptly) the others'
    // EPs lose the EVD, they are not left pointing at a freed one.
    conformance::OpenIa other;
    ASSERT_DAT_OK(other.open(GetParam()));
    DAT_EVD_HANDLE conn = DAT_HANDLE_NULL, dto = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_evd_create(other.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn));
    ASSERT_DAT_OK(dat_evd_create(ia_.ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto));
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_ep_create(ia_.ia, ia_.pz, dto, dto, conn, nullptr, &ep));
    DAT_EP_PARAM p{};
    ASSERT_DAT_OK(dat_ep_query(ep, DAT_EP_FIELD_CONNECT_EVD_HANDLE, &p));
    EXPECT_EQ(p.connect_evd_handle, conn);
    // In use: neither the EVD nor, gracefully, its IA can go.
    EXPECT_DAT_ERR(dat_evd_free(conn), DAT_INVALID_STATE, 0);
    other.close(); // abrupt
    ASSERT_DAT_OK(dat_ep_query(ep, DAT_EP_FIELD_CONNECT_EVD_HANDLE, &p));
    EXPECT_EQ(p.connect_evd_handle, DAT_HANDLE_NULL);
    EXPECT_DAT_OK(dat_ep_free(ep));
    EXPECT_DAT_OK(dat_evd_free(dto));
}

INSTANTIATE_OVER_IAS(LimitsTest);

class LimitsConnectedTest : public conformance::ConnectedTest {
protected:
    // CPU time (ms, every thread of the process) while the connection idles.
    static double idle_cpu_ms() {
        const double before = cpu_ms();
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
        return cpu_ms() - before;
    }
    static double cpu_ms() {
        timespec t{};
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
    }

    // Connections whose DTOs complete on one EVD set per side, as MPI makes
    // them: the client's EPs send and receive on cdto, the server's on sreq
    // and srecv. (A transport may spread an EVD's connections over several
    // queues of its own, as ofi does over libfabric tcp, whose per-queue
    // costs grow with the endpoints on it.)
    struct Pair {
        DAT_EP_HANDLE c = DAT_HANDLE_NULL, s = DAT_HANDLE_NULL;
    };
    DAT_EVD_HANDLE cdto = DAT_HANDLE_NULL, sreq = DAT_HANDLE_NULL, srecv = DAT_HANDLE_NULL;
    std::vector<Pair> pairs;

    void make_shared_evds(DAT_COUNT qlen) {
        ASSERT_DAT_OK(dat_evd_create(client.ia.ia, qlen, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &cdto));
        ASSERT_DAT_OK(dat_evd_create(server.ia.ia, qlen, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &sreq));
        ASSERT_DAT_OK(dat_evd_create(server.ia.ia, qlen, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &srecv));
    }
    // Pair i, connected; with `recv`, a receive (cookie i) posted on the
    // server's EP before the connection.
    ::testing::AssertionResult connect_shared(int i, const DAT_LMR_TRIPLET *recv) {
        Pair p;
        if (DAT_RETURN r = client.create_ep_on(&p.c, cdto, cdto, client.conn_evd))
            return ::testing::AssertionFailure() << "client EP " << i << ": " << conformance::ret_text(r);
        if (DAT_RETURN r = server.create_ep_on(&p.s, srecv, sreq, server.conn_evd)) {
            dat_ep_free(p.c);
            return ::testing::AssertionFailure() << "server EP " << i << ": " << conformance::ret_text(r);
        }
        pairs.push_back(p);
        if (recv) {
            DAT_LMR_TRIPLET t = *recv;
            if (DAT_RETURN r = dat_ep_post_recv(p.s, 1, &t, conformance::cookie(static_cast<DAT_UINT64>(i)),
                                                DAT_COMPLETION_DEFAULT_FLAG))
                return ::testing::AssertionFailure() << "receive " << i << ": " << conformance::ret_text(r);
        }
        if (DAT_RETURN r = conformance::connect_ep(p.c, server_addr.ptr(), port))
            return ::testing::AssertionFailure() << "connect " << i << ": " << conformance::ret_text(r);
        DAT_EVENT ev{};
        auto got = conformance::wait_event(server.cr_evd, DAT_CONNECTION_REQUEST_EVENT, &ev);
        if (!got)
            return got << " (pair " << i << ")";
        if (DAT_RETURN r = dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, p.s, 0, nullptr))
            return ::testing::AssertionFailure() << "accept " << i << ": " << conformance::ret_text(r);
        for (DAT_EVD_HANDLE conn : {server.conn_evd, client.conn_evd})
            if (!(got = conformance::wait_event(conn, DAT_CONNECTION_EVENT_ESTABLISHED)))
                return got << " (pair " << i << ")";
        return ::testing::AssertionSuccess();
    }
    void end_shared_pairs() {
        for (Pair &p : pairs) {
            EXPECT_DAT_OK(dat_ep_disconnect(p.c, DAT_CLOSE_GRACEFUL_FLAG));
            EXPECT_TRUE(conformance::wait_connection_end(client.conn_evd));
            EXPECT_TRUE(conformance::wait_connection_end(server.conn_evd));
            EXPECT_DAT_OK(dat_ep_free(p.c));
            EXPECT_DAT_OK(dat_ep_free(p.s));
        }
        pairs.clear();
    }
    void TearDown() override {
        end_shared_pairs();
        for (DAT_EVD_HANDLE e : {cdto, sreq, srecv})
            if (e != DAT_HANDLE_NULL)
                EXPECT_DAT_OK(dat_evd_free(e));
        conformance::ConnectedTest::TearDown();
    }
};

TEST_P(LimitsConnectedTest, IdleConnectionCostsNoMoreWithAThousandEvds) {
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    const double few = idle_cpu_ms();
    // Whether an IA can hold this many is MaxEvds' question; here the EVDs
    // that could be made are enough, if they are hundreds.
    DAT_IA_ATTR attr{};
    ASSERT_DAT_OK(conformance::query_ia(client.ia.ia, &attr, nullptr));
    const DAT_COUNT want = std::min<DAT_COUNT>(1000, attr.max_evds - 8);
    std::vector<DAT_EVD_HANDLE> evds;
    DAT_RETURN r = DAT_SUCCESS;
    while (static_cast<DAT_COUNT>(evds.size()) < want) {
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        if ((r = dat_evd_create(client.ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &evd)) != DAT_SUCCESS)
            break;
        evds.push_back(evd);
    }
    const double many = idle_cpu_ms();
    for (DAT_EVD_HANDLE evd : evds)
        EXPECT_DAT_OK(dat_evd_free(evd));
    ASSERT_GE(evds.size(), 256u) << "EVD " << evds.size() + 1 << ": " << conformance::ret_text(r);
    std::printf("idle connection: %.1f ms CPU in 400 ms with the pair's EVDs, %.1f ms with %zu more\n", few, many,
                evds.size());
    // Measured (ofi tcp, 1000 EVDs): ~10 ms either way; ~65-130 ms when the
    // progress thread visited every queue each millisecond.
    EXPECT_LE(many, 2 * few + 10.0) << "an idle connection cost " << many << " ms of CPU time in 400 ms with "
                                    << evds.size() << " more EVDs in the IA, " << few << " ms without them";
}

// A connection that ended (a graceful disconnect, the EPs kept) costs the
// process no more CPU than it did while it was up: nothing the transport
// still watches for it keeps its threads awake.
TEST_P(LimitsConnectedTest, AConnectionThatEndedCostsNoMoreThanAnIdleOne) {
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    const double up = idle_cpu_ms();
    ASSERT_NO_FATAL_FAILURE(disconnect_pair(client));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const double ended = idle_cpu_ms();
    std::printf("%.1f ms CPU in 400 ms while the connection was up, %.1f ms once it ended\n", up, ended);
    EXPECT_LE(ended, 2 * up + 20.0) << "the ended connection cost " << ended << " ms of CPU time in 400 ms, " << up
                                    << " ms while it was up";
    EXPECT_LT(up, 200.0) << "an idle connection kept a CPU busy half the time";
}

// Hundreds of connections whose DTOs complete on one EVD per side: every
// completion arrives, through dat_evd_wait and dat_evd_dequeue, and once the
// connections are gone the process holds the descriptors it held before
// them, while the EVDs live on and serve a new connection.
TEST_P(LimitsConnectedTest, HundredsOfConnectionsOnSharedEvdsCompleteAndGiveTheirDescriptorsBack) {
    constexpr int kPairs = 200;
    constexpr size_t kEach = 8;
    ASSERT_NO_FATAL_FAILURE(make_shared_evds(2 * kPairs + 16));
    conformance::Buffer out, in;
    ASSERT_DAT_OK(client.register_buffer(out, kEach * kPairs));
    ASSERT_DAT_OK(server.register_buffer(in, kEach * kPairs));
    auto connect_one = [&](int i) {
        const DAT_LMR_TRIPLET t = in.iov(kEach * static_cast<size_t>(i), kEach);
        return connect_shared(i, &t);
    };
    auto send_one = [&](int i) -> ::testing::AssertionResult {
        std::memcpy(out.data + out.reg_off + kEach * static_cast<size_t>(i), &i, sizeof i);
        DAT_LMR_TRIPLET t = out.iov(kEach * static_cast<size_t>(i), kEach);
        if (DAT_RETURN r = dat_ep_post_send(pairs[static_cast<size_t>(i)].c, 1, &t, conformance::cookie(1000 + i),
                                            DAT_COMPLETION_DEFAULT_FLAG))
            return ::testing::AssertionFailure() << "send " << i << ": " << conformance::ret_text(r);
        return ::testing::AssertionSuccess();
    };
    auto teardown = [&]() { end_shared_pairs(); };
    // A first connection and its end: what a transport keeps for the EVDs
    // or the IA once they have served one is not the connections' cost.
    ASSERT_TRUE(connect_one(0));
    ASSERT_TRUE(send_one(0));
    ASSERT_TRUE(conformance::wait_dto_ok(cdto, 1000));
    ASSERT_TRUE(conformance::wait_dto_ok(srecv, 0));
    teardown();
    const std::size_t before = open_fds();

    for (int i = 0; i < kPairs; ++i)
        ASSERT_TRUE(connect_one(i));
    const std::size_t connected = open_fds();
    for (int i = 0; i < kPairs; ++i)
        ASSERT_TRUE(send_one(i));
    // The receives by dat_evd_wait, the sends by dat_evd_dequeue.
    std::vector<int> seen(kPairs, 0);
    for (int k = 0; k < kPairs; ++k) {
        DAT_EVENT ev{};
        ASSERT_TRUE(conformance::wait_dto(srecv, &ev)) << "receive " << k + 1 << " of " << kPairs;
        const DAT_DTO_COMPLETION_EVENT_DATA &d = ev.event_data.dto_completion_event_data;
        ASSERT_EQ(d.status, DAT_DTO_SUCCESS) << conformance::dto_status_name(d.status);
        const DAT_UINT64 i = d.user_cookie.as_64;
        ASSERT_LT(i, static_cast<DAT_UINT64>(kPairs));
        int value = -1;
        std::memcpy(&value, in.data + in.reg_off + kEach * i, sizeof value);
        EXPECT_EQ(value, static_cast<int>(i)) << "the receive of pair " << i << " holds another pair's message";
        ++seen[i];
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), kPairs);
    int sends = 0;
    for (auto deadline = Clock::now() + std::chrono::seconds(10); sends < kPairs && Clock::now() < deadline;) {
        DAT_EVENT ev{};
        if (dat_evd_dequeue(cdto, &ev) != DAT_SUCCESS)
            continue;
        ASSERT_EQ(ev.event_number, DAT_DTO_COMPLETION_EVENT);
        ASSERT_EQ(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
        ++sends;
    }
    EXPECT_EQ(sends, kPairs) << "send completions dequeued";
    teardown();
    // A transport may give queues back on its own thread: a while to do so.
    std::size_t after = open_fds();
    for (auto deadline = Clock::now() + std::chrono::seconds(5); after > before && Clock::now() < deadline;
         after = open_fds())
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::printf("%d connections on shared EVDs: %zu descriptors before, %zu connected, %zu after\n", kPairs, before,
                connected, after);
    EXPECT_LE(after, before) << "descriptors not given back after the connections ended";

    // The EVDs serve a new connection.
    ASSERT_TRUE(connect_one(0));
    ASSERT_TRUE(send_one(0));
    EXPECT_TRUE(conformance::wait_dto_ok(cdto, 1000));
    EXPECT_TRUE(conformance::wait_dto_ok(srecv, 0));
}

// The same EVDs polled by dat_evd_dequeue alone, with traffic on the
// connections made last (those a transport spreading an EVD over queues of
// its own puts on the last ones): messages that arrive before their
// receives are posted, and messages larger than a socket takes at once.
// ofi over tcp reads a queue other than an EVD's first only when its fd
// fires or it may have work the fd does not show; a transport that missed
// such work hangs here.
TEST_P(LimitsConnectedTest, ManyConnectionsOnSharedEvdsServeAPollingConsumer) {
    constexpr int kPairs = 200;
    constexpr int kLarge = 4; // the last pairs also carry a message of the largest size, up to 4 MiB
    constexpr size_t kEach = 8;
    ASSERT_NO_FATAL_FAILURE(make_shared_evds(2 * kPairs + 16));
    for (int i = 0; i < kPairs; ++i)
        ASSERT_TRUE(connect_shared(i, nullptr));
    DAT_EP_PARAM param{};
    ASSERT_DAT_OK(dat_ep_query(pairs.back().c, DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE, &param));
    const size_t kLargeLen = std::min<size_t>(size_t{4} << 20, param.ep_attr.max_message_size);
    conformance::Buffer cin, sout, cout, sin;
    ASSERT_DAT_OK(client.register_buffer(cin, kEach * kPairs));
    ASSERT_DAT_OK(server.register_buffer(sout, kEach * kPairs));
    ASSERT_DAT_OK(client.register_buffer(cout, kLargeLen * kLarge));
    ASSERT_DAT_OK(server.register_buffer(sin, kLargeLen * kLarge));
    // Polls until `want` completions have come from each EVD of `evds`,
    // each with DAT_DTO_SUCCESS, cookies base to base + want - 1 once each.
    auto poll_all = [&](std::initializer_list<DAT_EVD_HANDLE> evds, int want, DAT_UINT64 base) {
        std::vector<std::vector<int>> seen(evds.size(), std::vector<int>(static_cast<size_t>(want), 0));
        std::vector<int> got(evds.size(), 0);
        const auto deadline = Clock::now() + std::chrono::seconds(20);
        for (bool done = false; !done && Clock::now() < deadline;) {
            done = true;
            size_t k = 0;
            for (DAT_EVD_HANDLE evd : evds) {
                DAT_EVENT ev{};
                if (dat_evd_dequeue(evd, &ev) == DAT_SUCCESS) {
                    EXPECT_EQ(ev.event_number, DAT_DTO_COMPLETION_EVENT);
                    const DAT_DTO_COMPLETION_EVENT_DATA &d = ev.event_data.dto_completion_event_data;
                    EXPECT_EQ(d.status, DAT_DTO_SUCCESS) << conformance::dto_status_name(d.status);
                    const DAT_UINT64 i = d.user_cookie.as_64 - base;
                    if (i < static_cast<DAT_UINT64>(want))
                        ++seen[k][i];
                    else
                        ADD_FAILURE() << "cookie " << d.user_cookie.as_64;
                    ++got[k];
                }
                done = done && got[k] >= want;
                ++k;
            }
        }
        ::testing::AssertionResult r = ::testing::AssertionSuccess();
        for (size_t k = 0; k < seen.size(); ++k)
            if (std::count(seen[k].begin(), seen[k].end(), 1) != want)
                r = ::testing::AssertionFailure() << "EVD " << k << " of the poll: " << got[k] << " completions of "
                                                  << want << " within 20 s, polling";
        return r;
    };

    // Small messages first, their receives posted only once they have had
    // the time to arrive (their reader stopped at them). The client polls
    // all along, finding nothing yet.
    auto poll_nothing = [&](std::chrono::milliseconds how_long) {
        for (auto until = Clock::now() + how_long; Clock::now() < until;) {
            DAT_EVENT ev{};
            ASSERT_EQ(DAT_GET_TYPE(dat_evd_dequeue(cdto, &ev)), DAT_QUEUE_EMPTY);
        }
    };
    ASSERT_NO_FATAL_FAILURE(poll_nothing(std::chrono::milliseconds(20)));
    for (int i = 0; i < kPairs; ++i) {
        std::memcpy(sout.data + sout.reg_off + kEach * static_cast<size_t>(i), &i, sizeof i);
        DAT_LMR_TRIPLET t = sout.iov(kEach * static_cast<size_t>(i), kEach);
        ASSERT_DAT_OK(dat_ep_post_send(pairs[static_cast<size_t>(i)].s, 1, &t,
                                       conformance::cookie(static_cast<DAT_UINT64>(i)), DAT_COMPLETION_DEFAULT_FLAG));
    }
    ASSERT_NO_FATAL_FAILURE(poll_nothing(std::chrono::milliseconds(200)));
    for (int i = 0; i < kPairs; ++i) {
        DAT_LMR_TRIPLET t = cin.iov(kEach * static_cast<size_t>(i), kEach);
        ASSERT_DAT_OK(dat_ep_post_recv(pairs[static_cast<size_t>(i)].c, 1, &t,
                                       conformance::cookie(static_cast<DAT_UINT64>(i)), DAT_COMPLETION_DEFAULT_FLAG));
    }
    const auto t0 = Clock::now();
    ASSERT_TRUE(poll_all({cdto, sreq}, kPairs, 0)) << "messages sent before their receives were posted";
    std::printf("%d messages that came before their receives: all received %.3f ms after the receives\n", kPairs,
                std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    for (int i = 0; i < kPairs; ++i) {
        int value = -1;
        std::memcpy(&value, cin.data + cin.reg_off + kEach * static_cast<size_t>(i), sizeof value);
        EXPECT_EQ(value, i) << "the receive of pair " << i << " holds another pair's message";
    }

    // Then large messages on the last pairs, all in flight at once.
    for (int j = 0; j < kLarge; ++j) {
        const size_t off = kLargeLen * static_cast<size_t>(j);
        std::memset(cout.data + cout.reg_off + off, 'a' + j, kLargeLen);
        const Pair &p = pairs[static_cast<size_t>(kPairs - kLarge + j)];
        DAT_LMR_TRIPLET r = sin.iov(off, kLargeLen), s = cout.iov(off, kLargeLen);
        ASSERT_DAT_OK(dat_ep_post_recv(p.s, 1, &r, conformance::cookie(static_cast<DAT_UINT64>(500 + j)),
                                       DAT_COMPLETION_DEFAULT_FLAG));
        ASSERT_DAT_OK(dat_ep_post_send(p.c, 1, &s, conformance::cookie(static_cast<DAT_UINT64>(500 + j)),
                                       DAT_COMPLETION_DEFAULT_FLAG));
    }
    ASSERT_TRUE(poll_all({cdto, srecv}, kLarge, 500)) << "messages of " << kLargeLen << " bytes";
    for (int j = 0; j < kLarge; ++j) {
        const unsigned char *at = sin.data + sin.reg_off + kLargeLen * static_cast<size_t>(j);
        EXPECT_EQ(std::count(at, at + kLargeLen, static_cast<unsigned char>('a' + j)),
                  static_cast<std::ptrdiff_t>(kLargeLen))
            << "large message " << j;
    }
}

INSTANTIATE_OVER_IAS(LimitsConnectedTest);

} // namespace
