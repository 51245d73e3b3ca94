// SPDX-License-Identifier: BSD-3-Clause
// datperf's comparison peers: other programs that measure the same thing
// on the same host, run in the same datperf invocation, so that our figures
// can be given as ratios to theirs (noise of a shared machine hits both).
//
// A peer is one class: which of our workloads it is the counterpart of, how
// to run it once at one size (server and client), and how to read its
// figure from its output. fi_pingpong is the first; ib_send_lat,
// ib_write_lat and OFED's dtest (in the rxe VM) are meant to follow.
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
    std::string address;  // where the server listens (the IA's address)
    std::string provider; // libfabric provider name, for fi_* peers
    double timeout_s = 30;
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

// Runs `peer` `repeats` times at one size and adds the samples to `into`
// (its point for that size is created on first use; the median recomputed).
void run_peer(ComparePeer &peer, const PeerRequest &req, int repeats, PeerResult *into, bool progress);

} // namespace datperf
