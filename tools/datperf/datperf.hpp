// SPDX-License-Identifier: BSD-3-Clause
// datperf, the DAT benchmark: what its parts share. The options (options.cpp),
// the figures a measurement produces (stats.cpp), the DAT side (session.cpp:
// resources, connections, the control protocol; workloads.cpp: the measured
// loops), the reports (report.cpp) and the programs we compare against
// (peers.cpp). Only the public DAT API is used, so datperf runs unchanged
// against OFED's libdat2 and providers.
#pragma once

#include "usage.hpp"

#include <dat2/udat.h>

#include <cstdint>
#include <limits>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace datperf {

// ---- workloads ----------------------------------------------------------------

enum class Workload : std::uint32_t { PingPong = 1, WriteLat, WriteBw, ReadBw, SendBw, ConnRate, Scale, Ring };

struct WorkloadInfo {
    Workload id;
    const char *name;  // on the command line and in the outputs
    const char *title; // one line for the report
    bool latency;      // a ping-pong: a latency distribution per size
    bool sized;        // measured per message size (conn-rate: per endpoint count; scale: per pair count)
};

const std::vector<WorkloadInfo> &workloads();
const WorkloadInfo &info(Workload w);
const WorkloadInfo *find_workload(const std::string &name);

enum class Completion { Poll, Wait };
const char *completion_name(Completion c);

constexpr std::uint64_t kMinSize = 1;
constexpr std::uint64_t kMaxSize = std::uint64_t(4) << 20;
constexpr long kMaxPairs = 10000; // scale: pairs at most (conn-rate: endpoints)

// ---- options ------------------------------------------------------------------

enum class Role { Loopback, Server, Client };

struct Options {
    std::vector<Workload> workloads;  // in the order given; pingpong by default
    std::vector<std::uint64_t> sizes; // ascending, no duplicates
    long iters = -1;                  // -1: per size, see default_iters()
    long warmup = -1;                 // -1: a tenth of the iterations (at most 100)
    int window = 64;                  // outstanding operations of the streaming workloads
    int endpoints = 100;              // conn-rate
    std::vector<std::uint64_t> pairs; // scale: pair counts, ascending (default 128..4096, doubling)
    double idle_s = 3;                // scale: how long both processes sleep at each count
    bool scale_self = false;          // scale --self: both ends of every pair in the client process
    bool sizes_given = false;         // --sizes or --sweep
    bool completion_forced = false;   // --poll or --wait given
    Completion completion = Completion::Poll;
    std::string provider; // IA name; empty: the registry's first entry
    Role role = Role::Loopback;
    std::string host; // --connect
    long port = -1;   // connection qualifier; -1: any (loopback) or kDefaultPort
    int runs = 1;
    std::vector<std::string> compare; // peer names
    int peer_repeats = 3;
    std::string peer_provider;      // libfabric provider for fi_* peers; empty: from the IA
    std::string peer_device;        // RDMA device of the perftest peers; empty: theirs
    int peer_gid = -1;              // GID index of the perftest peers; -1: theirs
    bool json = false, csv = false; // on stdout instead of the table
    std::string json_path, csv_path, plot_path;
    int progress = -1;     // -1: when stderr is a terminal
    double timeout_s = 30; // longest wait for one event before giving up
    // --pin: CPUs of the server and the client (one-command mode; the peers
    // of --compare too), or of this process (--server, --connect); -1: unpinned.
    int server_cpu = -1, client_cpu = -1;
    std::string timer = "auto"; // --timer: the client's sample clock (auto, clock, tsc)
};

// Binds the calling process to `cpu` (sched_setaffinity); -1 does nothing.
// False with *error when the CPU is not one this process may use.
bool pin_to_cpu(int cpu, std::string *error);
// Whether this process may run on `cpu` (checked before any child starts).
bool cpu_usable(int cpu, std::string *error);

constexpr long kDefaultPort = 47111;

// Parses argv; on a usage error prints it and returns false with *exit_code
// set (0 for --help).
bool parse_options(int argc, char **argv, Options *opt, int *exit_code);
void usage(std::FILE *out);

// The completion mode a workload runs with: the forced one, else polling for
// the ping-pongs and waiting for the rest.
Completion completion_for(const Options &opt, Workload w);
// Iterations for one size: --iters, else 1000 up to 64 KiB and fewer above
// (64 MiB per size, at least 50); streaming: 256 MiB per size within
// [200, 10000]; conn-rate: the endpoint count; scale: its ping-pong's.
std::uint64_t iters_for(const Options &opt, Workload w, std::uint64_t size);
std::uint64_t warmup_for(const Options &opt, Workload w, std::uint64_t iters);
// The message size of the scale workload's ping-pong: the smallest of
// --sizes, else 64 B.
std::uint64_t scale_pingpong_size(const Options &opt);

// "4k" -> 4096 (k, m, g are powers of 1024; "KiB" and "KB" spellings too).
bool parse_size(const std::string &text, std::uint64_t *out);
std::string size_text(std::uint64_t bytes); // 4096 -> "4k"

// ---- errors -------------------------------------------------------------------

// Ends the benchmark: main prints what() once, prefixed "datperf: ".
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

std::string dat_text(DAT_RETURN r); // "DAT_INVALID_PARAMETER DAT_INVALID_ARG2"
// Throws Error("CALL: TEXT (CONTEXT)").
[[noreturn]] void dat_fail(DAT_RETURN r, const char *call, const std::string &context = std::string());
inline void dat_check(DAT_RETURN r, const char *call) {
    if (__builtin_expect(r != DAT_SUCCESS, 0))
        dat_fail(r, call);
}
std::string dto_status_text(DAT_DTO_COMPLETION_STATUS s);
std::string event_text(const DAT_EVENT &ev);

// ---- results ------------------------------------------------------------------

// One message size (conn-rate: one endpoint count) of one workload in one run.
struct Point {
    std::uint64_t size = 0;  // bytes; conn-rate: endpoints
    std::uint64_t iters = 0; // measured operations (messages, connections)
    bool has_latency = false;
    // Latency workloads: one-way latency (round trip / 2), microseconds.
    // conn-rate: time from dat_ep_connect to ESTABLISHED per connection.
    double median_us = 0, p99_us = 0, min_us = 0, max_us = 0, avg_us = 0;
    double mb_s = 0;    // 10^6 bytes per second (latency workloads: size / median)
    double msg_s = 0;   // operations per second (conn-rate: connections per second)
    double seconds = 0; // measured wall time of the whole size
};

// ---- the scale workload's results --------------------------------------------------

constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

// One pair count of the scale workload in one run. A pair is one endpoint
// on the client and one on the server, connected to each other (with
// --self, both in the client process). Figures that were not measured
// (the row at 0 pairs has no setup) are kNotMeasured.
struct ScaleRow {
    double pairs = 0;
    double after = 0; // 1: the row after every pair was torn down
    double batch = 0; // pairs connected to reach this count (and torn down to leave it)
    // Wall time of the batch over its pairs, in us: setup from the first
    // dat_ep_create to the last ESTABLISHED on both sides; teardown from
    // the first dat_ep_disconnect to the last dat_ep_free on both sides.
    double setup_us = kNotMeasured, teardown_us = kNotMeasured;
    // Time inside the calls, us per call, over the batch. Active: the
    // connecting side; passive: the accepting side.
    double create_us = kNotMeasured, connect_us = kNotMeasured, disconnect_us = kNotMeasured, free_us = kNotMeasured;
    double passive_create_us = kNotMeasured, accept_us = kNotMeasured, passive_free_us = kNotMeasured;
    // Each process asleep for --idle seconds: CPU time of all its threads,
    // in % of one CPU; descriptors, resident KiB and malloc heap (in use,
    // free but kept) at that count, before the sleep.
    double client_cpu_pct = kNotMeasured, server_cpu_pct = kNotMeasured;
    double client_fds = kNotMeasured, server_fds = kNotMeasured;
    double client_rss_kib = kNotMeasured, server_rss_kib = kNotMeasured;
    double client_heap_kib = kNotMeasured, server_heap_kib = kNotMeasured;
    double client_heap_free_kib = kNotMeasured, server_heap_free_kib = kNotMeasured;
    // The row after teardown: RSS once malloc gave back what it kept free
    // (malloc_trim), taken at the very end.
    double client_rss_trimmed_kib = kNotMeasured, server_rss_trimmed_kib = kNotMeasured;
    // The ping-pong of the data connection (its own EVDs) with the pairs
    // around it: one-way, us.
    double pp_median_us = kNotMeasured, pp_p99_us = kNotMeasured, pp_min_us = kNotMeasured;
    // Over the sleep, busiest first (a few).
    std::vector<ThreadCpu> client_threads, server_threads;
};

// The numeric figures of a ScaleRow by name, in one order: the pipe between
// processes, the JSON and the combining of runs all go through this list.
struct ScaleField {
    const char *name;
    double ScaleRow::*member;
};
const std::vector<ScaleField> &scale_fields();
// The row of several runs: the median of each figure over the runs that
// measured it; each side's threads from the run nearest its median CPU.
ScaleRow combine_scale_runs(const std::vector<ScaleRow> &runs);

struct TestResult {
    Workload workload = Workload::PingPong;
    Completion completion = Completion::Poll;
    int window = 1;
    std::vector<Point> points;
    std::vector<ScaleRow> scale; // the scale workload's rows instead of points
};

// Percentiles of samples (microseconds; sorted in place).
void fill_latency(std::vector<double> &samples, Point *p);
// The figure of several runs of one size: medians of medians, p99s and
// rates; minimum of minimums.
Point combine_runs(const std::vector<Point> &runs);
double median_of(std::vector<double> v);

// What a client session measured on, for the reports.
struct SessionInfo {
    std::string ia_name, vendor, ia_address, server_address;
    std::string timer; // the client's sample clock (SampleClock::description)
};

// ---- comparison peers -----------------------------------------------------------

struct PeerPoint {
    std::uint64_t size = 0;
    std::uint64_t iters = 0;
    bool ok = false;
    double median_us = 0; // median over repeats of the peer's own figure
    double mb_s = 0;
    std::vector<double> samples; // one per repeat: latency (us) or MB/s
    std::string error;
};

struct PeerResult {
    std::string peer;
    Workload workload = Workload::PingPong;
    std::string figure;  // what the peer's number is, for the report
    std::string command; // one example command line
    std::vector<PeerPoint> points;
    std::string error; // the peer could not run at all
};

} // namespace datperf
