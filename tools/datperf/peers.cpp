// SPDX-License-Identifier: BSD-3-Clause
// datperf's comparison peers; fi_pingpong for now.
#include "peers.hpp"

#include "proc.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

namespace datperf {

namespace {

std::vector<std::string> words(const std::string &line)
{
    std::istringstream in(line);
    std::vector<std::string> out;
    std::string w;
    while (in >> w)
        out.push_back(w);
    return out;
}

bool parse_double(const std::string &text, double *out)
{
    if (text.empty())
        return false;
    char *end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || (*end != '\0' && *end != 's'))
        return false;
    *out = v;
    return true;
}

// The first line of `output` that looks like an error, else its last line.
std::string error_line(const std::string &output)
{
    std::istringstream in(output);
    std::string line, last;
    while (std::getline(in, line)) {
        if (line.find("error") != std::string::npos || line.find("rror:") != std::string::npos)
            return line;
        if (!line.empty())
            last = line;
    }
    return last.empty() ? "no output" : last;
}

bool loopback_address(const std::string &a) { return a.rfind("127.", 0) == 0 || a == "::1" || a == "localhost"; }

// ---- fi_pingpong ---------------------------------------------------------------------------

// libfabric's own ping-pong (fabtests, package libfabric-bin) over MSG
// endpoints: `fi_pingpong -p P -e msg -I N -S SIZE -B PORT` serves,
// the same with `-P PORT ADDRESS` is the client. PORT is its out-of-band
// control port (its data connection uses an ephemeral one): we take a free
// one per run, so that parallel runs do not clash. Its figure is the mean
// one-way latency of the run (total time / 2 / iterations, "usec/xfer").
// On loopback, FI_TCP_IFACE=lo (and sockets', udp's) keeps the data path
// on lo (libfabric otherwise binds eth0's address even for 127.0.0.1).
class FiPingpong : public ComparePeer {
public:
    std::string name() const override { return "fi_pingpong"; }
    bool counterpart_of(Workload w) const override { return w == Workload::PingPong; }
    std::string figure() const override { return "mean one-way latency of a run (usec/xfer)"; }
    std::string missing() const override
    {
        std::string path;
        return find_program("fi_pingpong", &path) ? "" : "fi_pingpong not found on PATH (Debian package libfabric-bin)";
    }

    bool run_once(const PeerRequest &req, double *latency_us, double *mb_s, std::string *command,
                  std::string *error) override
    {
        const int port = free_tcp_port();
        if (port <= 0) {
            *error = "no free TCP port";
            return false;
        }
        std::vector<std::string> common = {"fi_pingpong", "-p", req.provider, "-e", "msg", "-I",
                                           std::to_string(req.iters), "-S", std::to_string(req.size)};
        std::vector<std::string> server = common, client = common;
        server.insert(server.end(), {"-B", std::to_string(port)});
        client.insert(client.end(), {"-P", std::to_string(port), req.address});
        std::vector<std::string> env;
        if (loopback_address(req.address))
            for (const char *var : {"FI_TCP_IFACE", "FI_SOCKETS_IFACE", "FI_UDP_IFACE"})
                if (!std::getenv(var))
                    env.push_back(std::string(var) + "=lo");
        std::string prefix;
        for (const auto &e : env)
            prefix += e + " ";
        *command = prefix + shell_quote(server) + " & " + prefix + shell_quote(client);

        Process srv, cli;
        if (!srv.start(server, env, error))
            return false;
        // The client does not retry: start it once the server listens.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!tcp_port_listening(port)) {
            if (!srv.running()) {
                *error = "the fi_pingpong server exited before listening: " + error_line(srv.output());
                return false;
            }
            if (std::chrono::steady_clock::now() > deadline) {
                *error = "the fi_pingpong server does not listen on port " + std::to_string(port) + " after 10 s";
                return false;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        if (!cli.start(client, env, error))
            return false;
        int status = 0;
        const double limit = std::max(60.0, req.timeout_s * 4);
        if (!cli.wait(limit, &status)) {
            *error = "the fi_pingpong client still runs after " + std::to_string(static_cast<int>(limit)) + " s";
            return false;
        }
        const std::string out = cli.output();
        int server_status = 0;
        if (!srv.wait(10, &server_status))
            srv.stop();
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            *error = "the fi_pingpong client failed (" + status_text(status) + "): " + error_line(out);
            return false;
        }
        return parse_fi_pingpong(out, req.size, latency_us, mb_s, error);
    }
};

} // namespace

bool parse_fi_pingpong(const std::string &output, std::uint64_t size, double *usec_per_xfer, double *mb_s,
                       std::string *error)
{
    std::istringstream in(output);
    std::string line;
    std::vector<std::string> header;
    int col_bytes = -1, col_usec = -1, col_mbs = -1;
    while (std::getline(in, line)) {
        auto w = words(line);
        if (w.empty())
            continue;
        if (w[0] == "bytes") {
            header = w;
            col_bytes = col_usec = col_mbs = -1;
            for (std::size_t i = 0; i < w.size(); ++i) {
                if (w[i] == "bytes")
                    col_bytes = static_cast<int>(i);
                else if (w[i] == "usec/xfer")
                    col_usec = static_cast<int>(i);
                else if (w[i] == "MB/sec")
                    col_mbs = static_cast<int>(i);
            }
            continue;
        }
        if (header.empty() || col_bytes < 0 || col_usec < 0 || w.size() != header.size())
            continue;
        std::uint64_t bytes = 0;
        if (!parse_size(w[static_cast<std::size_t>(col_bytes)], &bytes) || bytes != size)
            continue;
        double usec = 0, mbs = 0;
        if (!parse_double(w[static_cast<std::size_t>(col_usec)], &usec) || usec <= 0)
            continue;
        if (col_mbs >= 0)
            parse_double(w[static_cast<std::size_t>(col_mbs)], &mbs);
        *usec_per_xfer = usec;
        *mb_s = mbs;
        return true;
    }
    if (header.empty())
        *error = "no 'bytes ... usec/xfer' table in fi_pingpong's output: " + error_line(output);
    else if (col_usec < 0)
        *error = "fi_pingpong's table has no usec/xfer column";
    else
        *error = "fi_pingpong's table has no row for " + std::to_string(size) + " bytes";
    return false;
}

std::vector<std::string> peer_names() { return {"fi_pingpong"}; }

std::unique_ptr<ComparePeer> make_peer(const std::string &name)
{
    if (name == "fi_pingpong")
        return std::make_unique<FiPingpong>();
    return nullptr;
}

void run_peer(ComparePeer &peer, const PeerRequest &req, int repeats, PeerResult *into, bool progress)
{
    const bool latency = info(req.workload).latency;
    into->peer = peer.name();
    into->workload = req.workload;
    into->figure = peer.figure();
    auto it = std::find_if(into->points.begin(), into->points.end(),
                           [&](const PeerPoint &p) { return p.size == req.size; });
    if (it == into->points.end()) {
        into->points.emplace_back();
        it = into->points.end() - 1;
        it->size = req.size;
        it->iters = req.iters;
    }
    PeerPoint &pt = *it;
    if (into->points.size() == 1) // the first size: is the peer there at all?
        into->error = peer.missing();
    if (!into->error.empty())
        return;
    for (int r = 0; r < repeats; ++r) {
        if (progress) {
            std::fprintf(stderr, "\rdatperf: %s %s: run %d/%d   ", peer.name().c_str(), size_text(req.size).c_str(),
                         r + 1, repeats);
            std::fflush(stderr);
        }
        double lat = 0, mbs = 0;
        std::string command, error;
        if (peer.run_once(req, &lat, &mbs, &command, &error))
            pt.samples.push_back(latency ? lat : mbs);
        else
            pt.error = error;
        if (into->command.empty())
            into->command = command;
    }
    pt.ok = !pt.samples.empty();
    if (pt.ok) {
        const double m = median_of(pt.samples);
        if (latency) {
            pt.median_us = m;
            pt.mb_s = static_cast<double>(pt.size) / m;
        } else {
            pt.mb_s = m;
        }
    }
    if (progress) {
        std::fprintf(stderr, "\r%60s\r", "");
        std::fflush(stderr);
    }
}

} // namespace datperf
