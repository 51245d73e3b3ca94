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
    std::vector<std::vector<ScaleRow>> scale_runs; // scale: [run][row]
    std::vector<ScaleRow> scale;                   // scale: [row], the figure over runs
};

// How the scale workload ran, for its heading.
struct ScaleConditions {
    std::string fd_limit; // what raise_fd_limit() did
    bool self = false;
    double idle_s = 0;
    std::uint64_t pingpong_size = 0, pingpong_iters = 0;
    Completion pingpong_completion = Completion::Poll;
};

struct Report {
    SessionInfo info;
    std::string mode; // "one command" or "two hosts"
    int runs = 0;
    std::vector<WorkloadReport> tests;
    ScaleConditions scale;
};

// Adds one run's results (creating the workload entries on the first).
void add_run(Report *report, const std::vector<TestResult> &tests);
// Fills every `combined` from the runs.
void combine(Report *report);

void print_table(std::FILE *out, const Report &r);
void write_json(std::FILE *out, const Report &r);
void write_csv(std::FILE *out, const Report &r);
// Latency and bandwidth against size, one line per run and per peer; the
// scale workload's figures against the pair count, into the same file when
// nothing else is plotted, else into scale_plot_path(path).
bool write_plot(const std::string &path, const Report &r, std::string *error);
std::string scale_plot_path(const std::string &path); // "out.png" -> "out-scale.png"

// The parts of the reports (report.cpp, scale_report.cpp).
bool write_size_plot(const std::string &path, const Report &r, std::string *error);
bool write_scale_plot(const std::string &path, const Report &r, std::string *error);
void print_scale(std::FILE *out, const Report &r, const WorkloadReport &w);
std::string scale_json(const Report &r, const WorkloadReport &w); // the "scale" object of its test
bool run_gnuplot(const std::string &script, std::string *error);
std::string json_number(double v); // "null" when not finite

} // namespace datperf
