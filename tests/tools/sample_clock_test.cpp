// SPDX-License-Identifier: BSD-3-Clause
// datperf's sample clock (--timer): its ticks, converted at the rate it
// measured over one span, give the wall clock's time over another span. A
// wrong rate (ticks taken for nanoseconds, a rate inverted) is off by the
// TSC's GHz or more; the tolerance is 5%. The machine's load can only
// stretch one attempt's two readings apart, so the best of five is judged.
#include "../../tools/datperf/session.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace {

using datperf::Clock;
using datperf::SampleClock;
using datperf::us_between;

void spin_for_us(double us) {
    const auto start = Clock::now();
    while (us_between(start, Clock::now()) < us) {
    }
}

// |ticks converted - wall| / wall over a 30 ms span, the best of five.
double best_relative_error(const SampleClock &clock) {
    const SampleClock::Mark cal = clock.mark();
    spin_for_us(20000);
    const double us_per_tick = clock.us_per_tick(cal);
    double best = 1e9;
    for (int attempt = 0; attempt < 5; ++attempt) {
        const auto w0 = Clock::now();
        const SampleClock::Stamp t0 = clock.now();
        spin_for_us(30000);
        const SampleClock::Stamp t1 = clock.now();
        const auto w1 = Clock::now();
        const double wall = us_between(w0, w1);
        best = std::min(best, std::fabs(static_cast<double>(t1 - t0) * us_per_tick - wall) / wall);
    }
    return best;
}

// choose(mode): the clock it says, named in its description, converting right.
void expect_chosen(const char *mode, bool tsc, const char *description_start) {
    SampleClock clock;
    std::string error;
    ASSERT_TRUE(clock.choose(mode, &error)) << error;
    EXPECT_EQ(clock.tsc(), tsc);
    EXPECT_EQ(clock.description().rfind(description_start, 0), 0u) << clock.description();
    EXPECT_LT(best_relative_error(clock), 0.05);
}

TEST(SampleClock, ClockGettimeStampsConvertToMicroseconds) {
    expect_chosen("clock", false, "clock_gettime (clock_gettime costs ");
}

TEST(SampleClock, TscTicksConvertAtTheMeasuredRate) {
#if defined(__x86_64__)
    expect_chosen("tsc", true, "TSC (clock_gettime costs ");
#else
    GTEST_SKIP() << "--timer tsc reads the x86-64 time-stamp counter only";
#endif
}

TEST(SampleClock, AutoNamesTheClockItChose) {
    SampleClock clock;
    std::string error;
    ASSERT_TRUE(clock.choose("auto", &error)) << error;
    const std::string want = clock.tsc() ? "TSC (" : "clock_gettime (";
    EXPECT_EQ(clock.description().rfind(want, 0), 0u) << clock.description();
    EXPECT_LT(best_relative_error(clock), 0.05);
}

} // namespace
