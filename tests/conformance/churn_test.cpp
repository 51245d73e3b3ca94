// SPDX-License-Identifier: BSD-3-Clause
// Connection churn (issue 7): thousands of connect / accept / message /
// disconnect cycles between two IAs of one process, each cycle ending in
// dat_ep_reset or in dat_ep_free and a new Endpoint, and registering and
// freeing an LMR. After a warm-up the process's open file descriptors
// (/proc/self/fd) and resident memory (/proc/self/statm) must stay flat: a
// leak of one descriptor, socket or libfabric object per connection, or of
// a few hundred bytes per cycle, fails. Resident memory may grow in a few
// steps, where a provider's pool gains a chunk, but not again and again.
//
// DAT2_CHURN_CYCLES (default 5000) and DAT2_CHURN_SECONDS (default 40) bound
// the run: it stops at whichever comes first and judges what it did, provided
// at least kMinMeasured cycles ran after the warm-up (a slow sanitizer build
// still gets there).
#include "connected.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

namespace {

using namespace conformance;

constexpr long kWarmup = 100; // cycles before the first sample: pools, caches, arena chunks
// ... and more, while resident memory still grows by more than kSettledKiB
// per kWarmup cycles, up to a quarter of the run: a provider may fill its
// buffer pools lazily over its first seconds (rxm's endpoints do). A leak
// never settles: it is judged over the rest.
constexpr long kSettledKiB = 256;
constexpr long kMinMeasured = 300; // cycles after it, at the least
constexpr long kFdSlack = 4;       // descriptors the process may gain meanwhile (none expected)

// After the warm-up resident memory is sampled every kWarmup cycles. Two
// kinds of growth are not leaks, and a run of this length cannot wait
// either out:
// - A step: a provider's buffer pool that runs out gains a whole chunk,
//   zeroed when made. rxm (ofi-rxm) posts to tcp exactly the receive
//   buffers its pool's first chunks hold; the first message that arrives
//   before its receive is posted is kept and a new buffer takes its place,
//   so the pool gains a chunk, once per endpoint. Here that message is the
//   transport's first on a connection when the peer's comes first: a race
//   that can happen at any cycle, or never. A window that grew by more than
//   kStepKiB is a step, and there may be one per IA of the pair
//   (kPoolSteps). More is a pool that keeps growing: a leak that hides in a
//   pool.
// - A queue allocated up front whose pages become resident as it is written
//   the first time round: rxm's completion queue over tcp (calloc'd) takes
//   three 48-byte entries a cycle on each side. kFirstTouchBytesPerCycle is
//   that with room to spare.
// The windows that are not steps may together grow by kRssSlackKiB
// (allocator noise) and kFirstTouchBytesPerCycle per cycle.
constexpr long kRssSlackKiB = 2048;
constexpr long kStepKiB = 1024;
constexpr long kPoolSteps = 2;
constexpr long kFirstTouchBytesPerCycle = 384;

long env_long(const char *name, long fallback) {
    const char *v = std::getenv(name);
    return v && *v ? std::strtol(v, nullptr, 0) : fallback;
}

long open_fds() {
    long n = 0;
    DIR *d = ::opendir("/proc/self/fd");
    if (!d)
        return -1;
    while (dirent *e = ::readdir(d))
        if (e->d_name[0] != '.')
            ++n;
    ::closedir(d);
    return n - 1; // the directory's own descriptor
}

long rss_kib() {
    long pages = 0, resident = 0;
    FILE *f = std::fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    int got = std::fscanf(f, "%ld %ld", &pages, &resident);
    std::fclose(f);
    return got == 2 ? resident * (::sysconf(_SC_PAGESIZE) / 1024) : -1;
}

// Under ASan (quarantine of freed memory) and TSan (shadow memory, history)
// resident memory grows by design: only descriptors are judged there.
constexpr const char *kRssUnjudged = conformance::kAsanBuild || conformance::kTsanBuild
                                         ? "a sanitizer build (its allocator keeps freed memory)"
                                         : nullptr;

class ChurnTest : public ConnectedTest {
protected:
    // One cycle: connect, one message each way checked, disconnect from
    // either side (graceful or abrupt), drain, then reset or free+recreate.
    void cycle(long i) {
        Buffer recv, send;
        ASSERT_DAT_OK(server.post_recvs(recv, 1, 0x1000 + i, 64));
        ASSERT_NO_FATAL_FAILURE(connect_pair());
        ASSERT_DAT_OK(client.register_buffer(send, 64));
        send.fill(static_cast<unsigned char>(i));
        DAT_LMR_TRIPLET t = send.iov(0, 64);
        ASSERT_DAT_OK(dat_ep_post_send(client.ep, 1, &t, cookie(0x2000 + i), DAT_COMPLETION_DEFAULT_FLAG));
        ASSERT_TRUE(wait_dto_ok(client.req_evd, 0x2000 + i));
        ASSERT_TRUE(wait_dto_ok(server.recv_evd, 0x1000 + i));
        ASSERT_EQ(recv.mismatch(0, 64, static_cast<unsigned char>(i), 0), -1) << "cycle " << i << ": data differs";
        Side &from = i % 2 ? client : server;
        ASSERT_NO_FATAL_FAILURE(disconnect_pair(from, (i / 2) % 2 ? DAT_CLOSE_ABRUPT_FLAG : DAT_CLOSE_GRACEFUL_FLAG));
        for (Side *s : {&server, &client})
            for (DAT_EVD_HANDLE evd : {s->req_evd, s->recv_evd, s->conn_evd})
                drain(evd);
        if (i % 4 == 3) {
            for (Side *s : {&server, &client}) {
                ASSERT_DAT_OK(dat_ep_free(s->ep));
                s->ep = DAT_HANDLE_NULL;
                ASSERT_DAT_OK(s->create_ep());
            }
        } else {
            ASSERT_DAT_OK(dat_ep_reset(server.ep));
            ASSERT_DAT_OK(dat_ep_reset(client.ep));
        }
        // The buffers' LMRs are freed here (Buffer's destructor): one LMR
        // registration per side per cycle.
    }

    // Runs `one_cycle(i)` until DAT2_CHURN_CYCLES or DAT2_CHURN_SECONDS,
    // then judges descriptors and resident memory after the warm-up.
    void run_and_judge(const std::function<void(long)> &one_cycle);
};

void ChurnTest::run_and_judge(const std::function<void(long)> &one_cycle) {
    const long cycles = env_long("DAT2_CHURN_CYCLES", 5000);
    const auto budget = std::chrono::seconds(env_long("DAT2_CHURN_SECONDS", 40));
    ASSERT_GT(cycles, kWarmup + kMinMeasured) << "DAT2_CHURN_CYCLES too small to judge";
    const auto start = std::chrono::steady_clock::now();
    long fd0 = -1, rss0 = -1;
    auto measured_start = start;
    long done = 0;
    long warmup = 0, last_rss = -1;
    std::vector<long> windows; // KiB resident memory grew by in each kWarmup cycles after the warm-up
    for (long i = 0; i < cycles; ++i) {
        ASSERT_NO_FATAL_FAILURE(one_cycle(i)) << "in cycle " << i;
        done = i + 1;
        if (done % kWarmup == 0) {
            const long rss = rss_kib();
            if (warmup) {
                windows.push_back(rss - last_rss);
            } else {
                const auto elapsed = std::chrono::steady_clock::now() - start;
                const bool settled = last_rss >= 0 && rss - last_rss <= kSettledKiB;
                if (settled || done >= cycles / 4 || elapsed > budget / 4) {
                    warmup = done;
                    fd0 = open_fds();
                    rss0 = rss;
                    measured_start = std::chrono::steady_clock::now();
                }
            }
            last_rss = rss;
        }
        if (warmup && done > warmup && std::chrono::steady_clock::now() - start > budget)
            break;
    }
    const long fd1 = open_fds(), rss1 = rss_kib();
    if (warmup && done % kWarmup != 0)
        windows.push_back(rss1 - last_rss);
    long steps = 0, step_kib = 0, largest_other = 0;
    for (long w : windows) {
        if (w > kStepKiB) {
            ++steps;
            step_kib += w;
        } else {
            largest_other = std::max(largest_other, w);
        }
    }
    const auto now = std::chrono::steady_clock::now();
    const double secs = std::chrono::duration<double>(now - start).count();
    const double measured_secs = std::chrono::duration<double>(now - measured_start).count();
    const long measured = warmup ? done - warmup : 0;
    std::printf("churn: %ld cycles in %.1f s (%.0f cycles/s); after %ld warm-up cycles: fds %ld -> %ld, "
                "RSS %ld -> %ld KiB over %ld cycles (%.1f s): %ld step(s) of %ld KiB in all, other %ld-cycle "
                "windows at most +%ld KiB\n",
                done, secs, done / secs, warmup, fd0, fd1, rss0, rss1, measured, measured_secs, steps, step_kib,
                kWarmup, largest_other);
    std::fflush(stdout);
    RecordProperty("cycles", std::to_string(done));
    ASSERT_GE(measured, kMinMeasured) << "only " << measured << " cycles after the warm-up within the time budget";
    ASSERT_GT(fd0, 0);
    EXPECT_LE(fd1 - fd0, kFdSlack) << "open file descriptors grew by " << (fd1 - fd0) << " over " << measured
                                   << " connections";
    if (kRssUnjudged) {
        std::printf("churn: resident memory not judged: %s\n", kRssUnjudged);
    } else {
        EXPECT_LE(steps, kPoolSteps) << "resident memory grew by more than " << kStepKiB << " KiB within " << kWarmup
                                     << " cycles " << steps << " times (" << step_kib << " KiB in all) over "
                                     << measured << " cycles: a pool that keeps growing";
        const long steady = rss1 - rss0 - step_kib;
        const long allowed = kRssSlackKiB + measured * kFirstTouchBytesPerCycle / 1024;
        EXPECT_LE(steady, allowed) << "resident memory grew by " << steady << " KiB over " << measured
                                   << " cycles besides " << steps << " step(s) of " << step_kib
                                   << " KiB in all (at most " << allowed << ")";
    }
}

TEST_P(ChurnTest, ThousandsOfConnectionsLeaveFdsAndMemoryFlat) {
    run_and_judge([this](long i) { cycle(i); });
}

// One IA connecting to itself, cycle after cycle, with no DTO posted and its
// DTO EVDs never read: whatever the transport sends or receives by itself
// to set a connection up (the RDM transport's hello) must not hold memory
// until the consumer reads those EVDs.
TEST_P(ChurnTest, ConnectionsWhoseDtoEvdsAreNeverReadLeaveMemoryFlat) {
    OpenIa ia;
    ASSERT_DAT_OK(ia.open(GetParam()));
    IaAddress addr;
    ASSERT_DAT_OK(ia_address(ia.ia, &addr));
    // Requests and receives on EVDs of their own: a transport that reads
    // one queue for both would see its own sends' completions beside its
    // receives'.
    DAT_EVD_HANDLE cr_evd, conn_evd, req_evd, recv_evd;
    ASSERT_DAT_OK(dat_evd_create(ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd));
    ASSERT_DAT_OK(dat_evd_create(ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_evd));
    ASSERT_DAT_OK(dat_evd_create(ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &req_evd));
    ASSERT_DAT_OK(dat_evd_create(ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &recv_evd));
    DAT_CONN_QUAL qual = 0;
    DAT_PSP_HANDLE psp;
    ASSERT_DAT_OK(dat_psp_create_any(ia.ia, &qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp));
    run_and_judge([&](long i) {
        DAT_EP_HANDLE active, passive;
        ASSERT_DAT_OK(dat_ep_create(ia.ia, ia.pz, recv_evd, req_evd, conn_evd, nullptr, &active));
        ASSERT_DAT_OK(dat_ep_create(ia.ia, ia.pz, recv_evd, req_evd, conn_evd, nullptr, &passive));
        ASSERT_DAT_OK(connect_ep(active, addr.ptr(), qual));
        DAT_EVENT ev;
        ASSERT_TRUE(wait_event(cr_evd, DAT_CONNECTION_REQUEST_EVENT, &ev));
        ASSERT_DAT_OK(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, passive, 0, nullptr));
        for (int k = 0; k < 2; ++k)
            ASSERT_TRUE(wait_event(conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED));
        ASSERT_DAT_OK(dat_ep_disconnect(i % 2 ? active : passive, DAT_CLOSE_GRACEFUL_FLAG));
        for (int k = 0; k < 2; ++k)
            ASSERT_TRUE(wait_event(conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
        ASSERT_DAT_OK(dat_ep_free(active));
        ASSERT_DAT_OK(dat_ep_free(passive));
    });
    EXPECT_DAT_OK(dat_psp_free(psp));
    for (DAT_EVD_HANDLE evd : {recv_evd, req_evd, conn_evd, cr_evd})
        EXPECT_DAT_OK(dat_evd_free(evd));
}

// Threads that connect, accept, disconnect and free Endpoints of one IA while
// another thread closes that IA abruptly: dat_ia_close(3DAT) destroys every
// object, and each call made on one afterwards, or caught in the middle,
// fails or completes; none crashes (a CR answered while the close destroyed
// it, an EP freed by both, a connect or accept whose Endpoint the close
// freed underneath it did). The threads stop at their first failed call.
TEST_P(ChurnTest, ThreadsChurningConnectionsWhileAnotherClosesTheIaAbruptly) {
    OpenIa ia;
    ASSERT_DAT_OK(ia.open(GetParam()));
    DAT_IA_ATTR attr{};
    ASSERT_DAT_OK(dat_ia_query(ia.ia, nullptr, DAT_IA_FIELD_ALL, &attr, DAT_PROVIDER_FIELD_NONE, nullptr));
    sockaddr_storage addr{};
    std::memcpy(&addr, attr.ia_address_ptr,
                attr.ia_address_ptr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    DAT_EVD_HANDLE cr_evd, conn_evd, dto_evd;
    ASSERT_DAT_OK(dat_evd_create(ia.ia, 64, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd));
    ASSERT_DAT_OK(dat_evd_create(ia.ia, 4096, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_evd));
    ASSERT_DAT_OK(dat_evd_create(ia.ia, 4096, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto_evd));
    DAT_CONN_QUAL qual = 0;
    DAT_PSP_HANDLE psp;
    ASSERT_DAT_OK(dat_psp_create_any(ia.ia, &qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp));
    const DAT_IA_HANDLE h = ia.ia;
    const DAT_PZ_HANDLE pz = ia.pz;
    std::atomic<bool> stop{false};
    std::atomic<long> connected{0};
    std::vector<std::thread> threads;
    // The server: an Endpoint per request, accepted; its Endpoints go with the IA.
    threads.emplace_back([&] {
        while (!stop) {
            DAT_EVENT ev;
            DAT_COUNT n;
            const DAT_RETURN r = dat_evd_wait(cr_evd, 20000, 1, &ev, &n);
            if (DAT_GET_TYPE(r) == DAT_TIMEOUT_EXPIRED)
                continue;
            DAT_EP_HANDLE ep;
            if (r != DAT_SUCCESS || dat_ep_create(h, pz, dto_evd, dto_evd, conn_evd, nullptr, &ep) != DAT_SUCCESS ||
                dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, ep, 0, nullptr) != DAT_SUCCESS)
                return;
        }
    });
    // Connection events of both sides, read and dropped.
    threads.emplace_back([&] {
        while (!stop) {
            DAT_EVENT ev;
            DAT_COUNT n;
            const DAT_RETURN r = dat_evd_wait(conn_evd, 20000, 1, &ev, &n);
            if (r != DAT_SUCCESS && DAT_GET_TYPE(r) != DAT_TIMEOUT_EXPIRED)
                return;
        }
    });
    for (int c = 0; c < 3; ++c)
        threads.emplace_back([&, c] {
            for (long i = c; !stop; ++i) {
                DAT_EP_HANDLE ep;
                if (dat_ep_create(h, pz, dto_evd, dto_evd, conn_evd, nullptr, &ep) != DAT_SUCCESS)
                    return;
                if (dat_ep_connect(ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&addr), qual, 1000000, 0, nullptr,
                                   DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG) != DAT_SUCCESS)
                    return;
                // Now and then freed while it connects; else once connected
                // (or given up after 20 ms), disconnected one way or the other.
                for (int w = 0; i % 4 != 3 && w < 200; ++w) {
                    DAT_EP_STATE st;
                    DAT_BOOLEAN in, out;
                    if (dat_ep_get_status(ep, &st, &in, &out) != DAT_SUCCESS)
                        return;
                    if (st == DAT_EP_STATE_CONNECTED) {
                        ++connected;
                        break;
                    }
                    std::this_thread::sleep_for(std::chrono::microseconds(100));
                }
                if (i % 4 == 1 && dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG) != DAT_SUCCESS)
                    return;
                if (i % 4 == 2 && dat_ep_disconnect(ep, DAT_CLOSE_ABRUPT_FLAG) != DAT_SUCCESS)
                    return;
                if (dat_ep_free(ep) != DAT_SUCCESS)
                    return;
            }
        });
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    EXPECT_DAT_OK(dat_ia_close(h, DAT_CLOSE_ABRUPT_FLAG));
    ia.ia = DAT_HANDLE_NULL; // closed here, and its PZ with it
    ia.pz = DAT_HANDLE_NULL;
    stop = true;
    for (auto &t : threads)
        t.join();
    EXPECT_GT(connected.load(), 0) << "no connection was made before the close: nothing was raced";
}

INSTANTIATE_OVER_IAS(ChurnTest);

} // namespace
