// SPDX-License-Identifier: BSD-3-Clause
// datperf's comparison peers: other programs that measure the same thing
// on the same host, run in the same datperf invocation, so that our figures
// can be given as ratios to theirs (noise of a shared machine hits both).
//
// A peer is one class: which of our workloads it is the counterpart of, how
// to run it once at one size (server and client), and how to read its
// figure from its output: libfabric's fi_pingpong; perftest's ib_send_lat,
// ib_write_lat, ib_write_bw, ib_read_bw and ib_send_bw; OFED dapl's dtest -W
// (RDMA-write ping-pong through OFED's libdat2 and its cma provider).
#pragma once

#include "datperf.hpp"

#include <memory>
#include <string>
#include <vector>

namespace datperf {

struct PeerRequest {
    Workload workload = Workload::PingPong;
    std::uint64_t size = 0;
    std::uint64_t iters = 0;
    std::string address;          // where the server listens (the IA's address)
    std::string provider;         // libfabric provider name, for fi_* peers
    std::string endpoint = "msg"; // its libfabric endpoint type: msg, or rdm (the RDM transport's IAs)
    int window = 1;               // outstanding operations of the streaming workloads
    std::string device;           // RDMA device of the perftest peers ("" : theirs)
    int gid_index = -1;           // their GID index (-x), -1: theirs
    std::string netdev;           // the network interface holding `address` (OFED's dat.conf entry)
    double timeout_s = 30;
    int server_cpu = -1, client_cpu = -1; // --pin: both sides of the peer where ours run
};

class ComparePeer {
public:
    virtual ~ComparePeer() = default;
    virtual std::string name() const = 0;
    virtual bool counterpart_of(Workload w) const = 0;
    // What its number is, for the report.
    virtual std::string figure() const = 0;
    // Why it cannot run here ("" when it can).
    virtual std::string missing() const = 0;
    // One measurement at one size: one-way latency in microseconds (latency
    // workloads) or bandwidth in 10^6 B/s (the others). False with *error.
    virtual bool run_once(const PeerRequest &req, double *latency_us, double *mb_s, std::string *command,
                          std::string *error) = 0;
};

// Every peer we know, by name.
std::vector<std::string> peer_names();
std::unique_ptr<ComparePeer> make_peer(const std::string &name);

// fi_pingpong's table, e.g.
//   bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec
//   64      1k      =1k      125k        0.02s      7.33       8.73       0.11
// The row of `size`: columns found by their header names, sizes with
// k/m/g suffixes. False with *error when there is no such row.
bool parse_fi_pingpong(const std::string &output, std::uint64_t size, double *usec_per_xfer, double *mb_s,
                       std::string *error);

// perftest's result row for `size` and `iters`: the latency tools'
// t_typical (their median, one-way, us), or the bandwidth tools' message
// rate times the size (10^6 B/s; their "MB/sec" columns are MiB/s). Columns
// are found by their header names. False with *error.
bool parse_perftest(const std::string &output, bool latency, std::uint64_t size, double *latency_us, double *mb_s,
                    std::string *error);

// datperf-fi-bw's "fi_bw: op=write size=65536 iters=4096 seconds=0.0123
// MB/s=21800.5" line: the MB/s (10^6 B/s). False with *error.
bool parse_fi_bw(const std::string &output, double *mb_s, std::string *error);

// dtest -W's "RDMA write PingPong: (N x SIZE) Total T us: latency L us, BW B MB/s"
// line: L (one-way, us). False with *error.
bool parse_dtest_pingpong(const std::string &output, double *latency_us, double *mb_s, std::string *error);

// The network interface that holds IPv4 `address` ("" when none does).
std::string interface_of(const std::string &address);

// Runs `peer` `repeats` times at one size and adds the samples to `into`
// (its point for that size is created on first use; the median recomputed).
void run_peer(ComparePeer &peer, const PeerRequest &req, int repeats, PeerResult *into, bool progress);

} // namespace datperf
