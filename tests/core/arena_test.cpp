// SPDX-License-Identifier: BSD-3-Clause
// The kit's type-stable object arena: what makes checking a freed, foreign
// or wrong-type DAT handle safe.
#include "arena.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

using dat2::kit::Arena;

namespace {

TEST(Arena, SlotsAreZeroedAlignedAndOwned) {
    Arena a(std::size_t(4) << 20);
    for (std::size_t size : {1u, 40u, 64u, 65u, 200u, 4096u, 16384u}) {
        auto *p = static_cast<unsigned char *>(a.allocate(size));
        ASSERT_NE(p, nullptr) << size;
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
        EXPECT_TRUE(a.owns(p));
        for (std::size_t i = 0; i < size; ++i)
            ASSERT_EQ(p[i], 0) << "size " << size << " byte " << i;
        std::memset(p, 0xab, size);
    }
    EXPECT_EQ(a.allocate(16385), nullptr);
}

TEST(Arena, ForeignAndInteriorPointersAreNotOwned) {
    Arena a(std::size_t(4) << 20);
    auto *p = static_cast<char *>(a.allocate(100)); // a 128-byte slot
    int local = 0;
    EXPECT_FALSE(a.owns(nullptr));
    EXPECT_FALSE(a.owns(&local));
    EXPECT_FALSE(a.owns(p + 8));
    EXPECT_FALSE(a.owns(p + 64));
    EXPECT_TRUE(a.owns(p + 128)) << "the next slot of the chunk";
    // Reserved but never committed: not ours yet, and never touched.
    EXPECT_FALSE(a.owns(p + Arena::kChunkSize * 3));
}

TEST(Arena, FreedSlotsStayReadableAndAreReusedLast) {
    Arena a(std::size_t(4) << 20);
    std::vector<void *> slots;
    for (int i = 0; i < 8; ++i)
        slots.push_back(a.allocate(64));
    void *first = slots[0];
    static_cast<std::uint32_t *>(first)[1] = 0xdead;
    a.deallocate(first);
    // Still mapped and owned: a stale handle can be inspected safely.
    EXPECT_TRUE(a.owns(first));
    EXPECT_EQ(static_cast<std::uint32_t *>(first)[1], 0xdeadu);
    // Not handed out again before the rest of the free slots.
    std::set<void *> next;
    for (int i = 0; i < 100; ++i)
        next.insert(a.allocate(64));
    EXPECT_EQ(next.count(first), 0u);
    a.deallocate(&first); // not ours: ignored
}

TEST(Arena, ExhaustionIsANullNotACrash) {
    Arena a(std::size_t(1) << 20); // 16 chunks
    std::size_t n = 0;
    while (a.allocate(16384))
        ++n;
    EXPECT_EQ(n, 16u * 4);
    EXPECT_EQ(a.chunks_in_use(), 16u);
    EXPECT_EQ(a.allocate(64), nullptr);
}

TEST(Arena, ThousandsOfObjectsAcrossSizeClasses) {
    Arena a(std::size_t(64) << 20);
    std::vector<void *> all;
    for (int i = 0; i < 10000; ++i) {
        void *p = a.allocate(64u << (i % 5));
        ASSERT_NE(p, nullptr);
        all.push_back(p);
    }
    std::set<void *> unique(all.begin(), all.end());
    EXPECT_EQ(unique.size(), all.size());
    for (void *p : all)
        ASSERT_TRUE(a.owns(p));
}

// Lookups race with allocation and release (run under TSan in CI).
TEST(Arena, ConcurrentAllocateReleaseAndLookup) {
    Arena a(std::size_t(64) << 20);
    std::atomic<bool> stop{false};
    std::atomic<int> bad{0};
    std::thread checker([&] {
        int local;
        while (!stop.load()) {
            if (a.owns(&local))
                ++bad;
        }
    });
    std::vector<std::thread> workers;
    for (int t = 0; t < 3; ++t) {
        workers.emplace_back([&] {
            std::vector<void *> mine;
            for (int i = 0; i < 5000; ++i) {
                void *p = a.allocate(96);
                if (!p || !a.owns(p))
                    ++bad;
                mine.push_back(p);
                if (mine.size() > 50) {
                    a.deallocate(mine.front());
                    mine.erase(mine.begin());
                }
            }
            for (void *p : mine)
                a.deallocate(p);
        });
    }
    for (auto &w : workers)
        w.join();
    stop = true;
    checker.join();
    EXPECT_EQ(bad.load(), 0);
}

} // namespace
