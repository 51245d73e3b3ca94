// SPDX-License-Identifier: BSD-3-Clause
// datperf: percentiles of one size, and the figure of several runs.
#include "datperf.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace datperf {

namespace {

// Nearest-rank percentile of sorted samples: the smallest sample that at
// least q of the samples do not exceed.
double percentile(const std::vector<double> &sorted, double q) {
    if (sorted.empty())
        return 0;
    auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
    return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

} // namespace

double median_of(std::vector<double> v) {
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void fill_latency(std::vector<double> &samples_us, Point *p) {
    p->has_latency = !samples_us.empty();
    if (samples_us.empty())
        return;
    std::sort(samples_us.begin(), samples_us.end());
    p->median_us = median_of(samples_us);
    p->p99_us = percentile(samples_us, 0.99);
    p->min_us = samples_us.front();
    p->max_us = samples_us.back();
    p->avg_us = std::accumulate(samples_us.begin(), samples_us.end(), 0.0) / static_cast<double>(samples_us.size());
}

Point combine_runs(const std::vector<Point> &runs) {
    if (runs.size() == 1)
        return runs.front();
    Point c;
    if (runs.empty())
        return c;
    c.size = runs.front().size;
    c.has_latency = runs.front().has_latency;
    c.iters = runs.front().iters; // per run
    std::vector<double> med, p99, avg, mb, msg, secs;
    c.min_us = runs.front().min_us;
    c.max_us = runs.front().max_us;
    for (const auto &r : runs) {
        med.push_back(r.median_us);
        p99.push_back(r.p99_us);
        avg.push_back(r.avg_us);
        mb.push_back(r.mb_s);
        msg.push_back(r.msg_s);
        secs.push_back(r.seconds);
        c.min_us = std::min(c.min_us, r.min_us);
        c.max_us = std::max(c.max_us, r.max_us);
    }
    c.median_us = median_of(med);
    c.p99_us = median_of(p99);
    c.avg_us = median_of(avg);
    c.mb_s = median_of(mb);
    c.msg_s = median_of(msg);
    c.seconds = median_of(secs);
    return c;
}

const std::vector<ScaleField> &scale_fields() {
#define DATPERF_SCALE_FIELD(f)                                                                                         \
    ScaleField { #f, &ScaleRow::f }
    static const std::vector<ScaleField> fields = {
        DATPERF_SCALE_FIELD(pairs),
        DATPERF_SCALE_FIELD(after),
        DATPERF_SCALE_FIELD(batch),
        DATPERF_SCALE_FIELD(setup_us),
        DATPERF_SCALE_FIELD(teardown_us),
        DATPERF_SCALE_FIELD(create_us),
        DATPERF_SCALE_FIELD(connect_us),
        DATPERF_SCALE_FIELD(disconnect_us),
        DATPERF_SCALE_FIELD(free_us),
        DATPERF_SCALE_FIELD(passive_create_us),
        DATPERF_SCALE_FIELD(accept_us),
        DATPERF_SCALE_FIELD(passive_free_us),
        DATPERF_SCALE_FIELD(client_cpu_pct),
        DATPERF_SCALE_FIELD(server_cpu_pct),
        DATPERF_SCALE_FIELD(client_fds),
        DATPERF_SCALE_FIELD(server_fds),
        DATPERF_SCALE_FIELD(client_rss_kib),
        DATPERF_SCALE_FIELD(server_rss_kib),
        DATPERF_SCALE_FIELD(client_heap_kib),
        DATPERF_SCALE_FIELD(server_heap_kib),
        DATPERF_SCALE_FIELD(client_heap_free_kib),
        DATPERF_SCALE_FIELD(server_heap_free_kib),
        DATPERF_SCALE_FIELD(client_rss_trimmed_kib),
        DATPERF_SCALE_FIELD(server_rss_trimmed_kib),
        DATPERF_SCALE_FIELD(pp_median_us),
        DATPERF_SCALE_FIELD(pp_p99_us),
        DATPERF_SCALE_FIELD(pp_min_us),
    };
#undef DATPERF_SCALE_FIELD
    return fields;
}

ScaleRow combine_scale_runs(const std::vector<ScaleRow> &runs) {
    if (runs.empty())
        return ScaleRow{};
    ScaleRow c = runs.front();
    for (const auto &f : scale_fields()) {
        std::vector<double> v;
        for (const auto &r : runs)
            if (!std::isnan(r.*f.member))
                v.push_back(r.*f.member);
        c.*f.member = v.empty() ? kNotMeasured : median_of(v);
    }
    // Each side's threads from the run whose CPU figure is nearest the
    // median: the busiest thread's share then matches the total shown.
    auto nearest = [&](double ScaleRow::*cpu) -> const ScaleRow & {
        const ScaleRow *best = &runs.front();
        for (const auto &r : runs)
            if (std::fabs(r.*cpu - c.*cpu) < std::fabs(best->*cpu - c.*cpu))
                best = &r;
        return *best;
    };
    c.client_threads = nearest(&ScaleRow::client_cpu_pct).client_threads;
    c.server_threads = nearest(&ScaleRow::server_cpu_pct).server_threads;
    return c;
}

} // namespace datperf
