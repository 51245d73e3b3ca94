// SPDX-License-Identifier: BSD-3-Clause
// datperf's outputs: the table, JSON, CSV and the gnuplot chart.
#pragma once

#include "datperf.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace datperf {

struct WorkloadReport {
    Workload workload = Workload::PingPong;
    Completion completion = Completion::Poll;
    int window = 1;
    std::vector<std::vector<Point>> runs; // [run][size]
    std::vector<Point> combined;          // [size]: the figure over runs
    std::vector<PeerResult> peers;
};

struct Report {
    SessionInfo info;
    std::string mode; // "one command" or "two hosts"
    int runs = 0;
    std::vector<WorkloadReport> tests;
};

// Adds one run's results (creating the workload entries on the first).
void add_run(Report *report, const std::vector<TestResult> &tests);
// Fills every `combined` from the runs.
void combine(Report *report);

void print_table(std::FILE *out, const Report &r);
void write_json(std::FILE *out, const Report &r);
void write_csv(std::FILE *out, const Report &r);
// Latency and bandwidth against size, one line per run and per peer.
bool write_plot(const std::string &path, const Report &r, std::string *error);

} // namespace datperf
