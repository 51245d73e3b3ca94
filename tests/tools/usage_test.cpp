// SPDX-License-Identifier: BSD-3-Clause
// What datperf's scale workload reads about its own process (usage.cpp):
// descriptors counted exactly, CPU charged to the thread that spent it and
// not to one that sleeps, the process's CPU over a sleep near zero. Bounds
// are loose where the machine's load could move a figure: a thread that
// spins 200 ms has spent some CPU however loaded the machine is, and a
// sleeping process none to speak of.
#include "../../tools/datperf/usage.hpp"

#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace {

TEST(UsageTest, CountsEveryDescriptorOpenedAndClosed) {
    const long before = datperf::open_fds();
    ASSERT_GT(before, 0);
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    EXPECT_EQ(datperf::open_fds(), before + 2);
    close(p[0]);
    close(p[1]);
    EXPECT_EQ(datperf::open_fds(), before);
}

TEST(UsageTest, ResidentMemoryGrowsWithTouchedPages) {
    const double before = datperf::rss_kib();
    ASSERT_GT(before, 0);
    constexpr std::size_t kBytes = 64 << 20;
    auto *block = static_cast<volatile char *>(std::malloc(kBytes));
    ASSERT_NE(block, nullptr);
    for (std::size_t i = 0; i < kBytes; i += 4096)
        block[i] = 1;
    EXPECT_GT(datperf::rss_kib(), before + 32 * 1024); // at least half of the 64 MiB touched
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    std::free(const_cast<char *>(block));
    GTEST_SKIP() << "the heap figure comes from glibc's mallinfo2, which a sanitizer's allocator replaces (it reads 0)";
#else
    const datperf::HeapUse heap = datperf::heap_use();
    EXPECT_GE(heap.in_use_kib, 64 * 1024); // an mmapped block, in hblkhd
    std::free(const_cast<char *>(block));
#endif
}

TEST(UsageTest, ChargesCpuToTheThreadThatSpinsAndNotToTheProcessAsleep) {
    std::atomic<pid_t> spinner_tid{0};
    std::atomic<bool> stop{false};
    std::thread spinner([&] {
        spinner_tid = static_cast<pid_t>(syscall(SYS_gettid));
        while (!stop.load(std::memory_order_relaxed)) {
        }
    });
    while (spinner_tid == 0)
        std::this_thread::yield();
    const auto before = datperf::CpuSnapshot::take();
    datperf::sleep_for_seconds(0.2);
    const auto after = datperf::CpuSnapshot::take();
    stop = true;
    spinner.join();

    EXPECT_GT(after.process_pct_since(before), 1.0);
    const auto threads = after.threads_since(before);
    ASSERT_GE(threads.size(), 2u);
    EXPECT_EQ(threads.front().tid, spinner_tid.load()) << "the busiest thread is the one that spun";
    EXPECT_FALSE(threads.front().main);
    for (const auto &t : threads) {
        if (t.main) {
            EXPECT_LT(t.pct, 5.0) << "the main thread slept";
        }
    }

    // Now nothing spins: the process sleeps.
    const auto quiet0 = datperf::CpuSnapshot::take();
    datperf::sleep_for_seconds(0.2);
    const auto quiet1 = datperf::CpuSnapshot::take();
    EXPECT_LT(quiet1.process_pct_since(quiet0), 5.0);
}

TEST(UsageTest, ReadsThisThreadsCpuTime) {
    const auto tid = static_cast<pid_t>(syscall(SYS_gettid));
    const double t0 = datperf::thread_cpu_seconds(tid);
    ASSERT_GE(t0, 0);
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(50)) {
    }
    EXPECT_GT(datperf::thread_cpu_seconds(tid), t0);
    EXPECT_LT(datperf::thread_cpu_seconds(-1), 0) << "no such thread";
}

} // namespace
