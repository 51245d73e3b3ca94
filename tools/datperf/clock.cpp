// SPDX-License-Identifier: BSD-3-Clause
// The sample clock: the TSC where clock_gettime is slow, converted at a rate
// measured against clock_gettime.
#include "session.hpp"

#include "session.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace datperf {

// ---- sample clock ----------------------------------------------------------------------

namespace {

// The mean cost of one steady_clock::now(), in nanoseconds.
double clock_cost_ns() {
    constexpr int kCalls = 256;
    const auto t0 = Clock::now();
    for (int i = 0; i < kCalls - 2; ++i)
        (void)Clock::now();
    const auto t1 = Clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / (kCalls - 1);
}

} // namespace

bool SampleClock::choose(const std::string &choice, [[maybe_unused]] std::string *error) {
    const double cost_ns = clock_cost_ns();
    bool want_tsc = choice == "tsc" || (choice == "auto" && cost_ns > 150);
#if !defined(__x86_64__)
    if (choice == "tsc") {
        *error = "--timer tsc: this CPU has no time-stamp counter datperf can read (x86-64 only)";
        return false;
    }
    want_tsc = false;
#endif
    tsc_ = want_tsc;
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s (clock_gettime costs %.0f ns a call here)", tsc_ ? "TSC" : "clock_gettime",
                  cost_ns);
    description_ = buf;
    return true;
}

double SampleClock::us_per_tick(const Mark &since) const {
    const Mark end = mark();
    if (!tsc_)
        return 1e-3; // nanosecond stamps
    if (end.stamp <= since.stamp)
        throw Error("the time-stamp counter did not advance over a phase (--timer clock measures without it)");
    return us_between(since.wall, end.wall) / static_cast<double>(end.stamp - since.stamp);
}

SampleClock &sample_clock() {
    static SampleClock clock;
    return clock;
}

} // namespace datperf
