// SPDX-License-Identifier: BSD-3-Clause
// datperf's comparison peers: fi_pingpong, perftest, OFED dtest -W.
#include "peers.hpp"

#include "proc.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

namespace datperf {

namespace {

std::vector<std::string> words(const std::string &line) {
    std::istringstream in(line);
    std::vector<std::string> out;
    std::string w;
    while (in >> w)
        out.push_back(w);
    return out;
}

bool parse_double(const std::string &text, double *out) {
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
std::string error_line(const std::string &output) {
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

// Why the RDMA peers cannot run here: "" when the host has an RDMA device.
std::string rdma_device_missing() {
    DIR *d = opendir("/sys/class/infiniband");
    bool any = false;
    if (d) {
        while (dirent *e = readdir(d))
            any |= e->d_name[0] != '.';
        closedir(d);
    }
    return any ? "" : "no RDMA device on this host (/sys/class/infiniband is empty)";
}

// ---- running a server and a client -----------------------------------------------------------

// What a peer's server and client are, and how to know the server is ready.
struct PairSpec {
    std::string tool;                        // for messages
    std::vector<std::string> server, client; // argv
    std::vector<std::string> env;            // added to ours, both sides
    int listen_port = 0;                     // ready once a TCP listener is on it
};

// Starts the server, waits until it listens, runs the client to its end and
// collects the client's output (the server gets 10 s to end after it).
// False with *error: a side that cannot start, a server that never listens,
// a client that hangs or fails.
bool run_pair(const PairSpec &spec, const PeerRequest &req, std::string *client_output, std::string *command,
              std::string *error) {
    std::string prefix;
    for (const auto &e : spec.env)
        prefix += e + " ";
    *command = prefix + shell_quote(spec.server) + " & " + prefix + shell_quote(spec.client);
    if (tcp_port_listening(spec.listen_port)) {
        *error = "TCP port " + std::to_string(spec.listen_port) + " is already in use before the " + spec.tool +
                 " server starts";
        return false;
    }
    Process srv, cli;
    if (!srv.start(spec.server, spec.env, req.server_cpu, error))
        return false;
    // The clients do not retry: start one once the server listens.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!tcp_port_listening(spec.listen_port)) {
        if (!srv.running()) {
            *error = "the " + spec.tool + " server exited before listening: " + error_line(srv.output());
            return false;
        }
        if (std::chrono::steady_clock::now() > deadline) {
            *error = "the " + spec.tool + " server does not listen on port " + std::to_string(spec.listen_port) +
                     " after 10 s";
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!cli.start(spec.client, spec.env, req.client_cpu, error))
        return false;
    int status = 0;
    const double limit = std::max(60.0, req.timeout_s * 4);
    if (!cli.wait(limit, &status)) {
        *error = "the " + spec.tool + " client still runs after " + std::to_string(static_cast<int>(limit)) + " s";
        return false;
    }
    *client_output = cli.output();
    int server_status = 0;
    if (!srv.wait(10, &server_status))
        srv.stop();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        *error = "the " + spec.tool + " client failed (" + status_text(status) + "): " + error_line(*client_output);
        return false;
    }
    return true;
}

// ---- fi_pingpong ---------------------------------------------------------------------------

// libfabric's own ping-pong (fabtests, package libfabric-bin) over the IA's
// kind of endpoint (msg, or rdm for the plugin's RDM transport: shm, rxm):
// `fi_pingpong -p P -e msg|rdm -I N -S SIZE -B PORT` serves,
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
    std::string missing() const override {
        std::string path;
        return find_program("fi_pingpong", &path) ? "" : "fi_pingpong not found on PATH (Debian package libfabric-bin)";
    }

    bool run_once(const PeerRequest &req, double *latency_us, double *mb_s, std::string *command,
                  std::string *error) override {
        PairSpec spec;
        spec.tool = "fi_pingpong";
        spec.listen_port = free_tcp_port();
        if (spec.listen_port <= 0) {
            *error = "no free TCP port";
            return false;
        }
        std::vector<std::string> common = {
            "fi_pingpong",           "-p", req.provider, "-e", req.endpoint, "-I", std::to_string(req.iters), "-S",
            std::to_string(req.size)};
        spec.server = spec.client = common;
        spec.server.insert(spec.server.end(), {"-B", std::to_string(spec.listen_port)});
        spec.client.insert(spec.client.end(), {"-P", std::to_string(spec.listen_port), req.address});
        if (loopback_address(req.address))
            for (const char *var : {"FI_TCP_IFACE", "FI_SOCKETS_IFACE", "FI_UDP_IFACE"})
                if (!std::getenv(var))
                    spec.env.push_back(std::string(var) + "=lo");
        std::string out;
        return run_pair(spec, req, &out, command, error) && parse_fi_pingpong(out, req.size, latency_us, mb_s, error);
    }
};

// ---- datperf-fi-bw ----------------------------------------------------------------------------

// Streaming bandwidth straight over libfabric's RDM endpoints (tools/fi_bw.cpp,
// built and installed beside datperf; Debian packages no fabtests bandwidth
// program): `datperf-fi-bw -p P -o send|write|read -S SIZE -I N -W WINDOW -B
// PORT` serves, the same with `-P PORT ADDRESS` is the client. It asks for
// what the RDM transport asks for: sends ordered after sends and writes
// (-O) and delivery-complete writes (-D). Its figure: 10^6
// bytes a second at the client, from the first measured post to the last
// completion, as our streaming workloads count.
class FiBw : public ComparePeer {
public:
    std::string name() const override { return "fi_bw"; }
    bool counterpart_of(Workload w) const override {
        return w == Workload::WriteBw || w == Workload::ReadBw || w == Workload::SendBw;
    }
    std::string figure() const override { return "bandwidth of a run at the initiator (10^6 B/s)"; }
    std::string missing() const override {
        std::string path;
        return program(&path) ? "" : "datperf-fi-bw not found beside datperf nor on PATH (built with libfabric)";
    }

    bool run_once(const PeerRequest &req, double *latency_us, double *mb_s, std::string *command,
                  std::string *error) override {
        (void)latency_us;
        if (req.endpoint != "rdm") {
            *error = "datperf-fi-bw measures reliable-datagram endpoints only (this IA's are " + req.endpoint + ")";
            return false;
        }
        std::string path;
        if (!program(&path)) {
            *error = missing();
            return false;
        }
        PairSpec spec;
        spec.tool = "datperf-fi-bw";
        spec.listen_port = free_tcp_port();
        if (spec.listen_port <= 0) {
            *error = "no free TCP port";
            return false;
        }
        const char *op = req.workload == Workload::WriteBw ? "write" : req.workload == Workload::ReadBw ? "read" : "send";
        std::vector<std::string> common = {path, "-p", req.provider, "-o", op, "-S", std::to_string(req.size),
                                           "-I", std::to_string(req.iters), "-W", std::to_string(std::max(1, req.window))};
        common.push_back("-O");
        if (req.workload == Workload::WriteBw)
            common.push_back("-D");
        spec.server = spec.client = common;
        spec.server.insert(spec.server.end(), {"-B", std::to_string(spec.listen_port)});
        spec.client.insert(spec.client.end(), {"-P", std::to_string(spec.listen_port), req.address});
        if (loopback_address(req.address))
            for (const char *var : {"FI_TCP_IFACE", "FI_UDP_IFACE"})
                if (!std::getenv(var))
                    spec.env.push_back(std::string(var) + "=lo");
        std::string out;
        return run_pair(spec, req, &out, command, error) && parse_fi_bw(out, mb_s, error);
    }

private:
    // Beside datperf (the build tree), in datperf's helpers directory
    // (installed: <libexecdir>/dat2), else on PATH.
    static bool program(std::string *path) {
        char self[4096];
        const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n > 0) {
            std::string dir(self, static_cast<std::size_t>(n));
            dir.erase(dir.rfind('/') + 1);
            for (const std::string &candidate :
                 {dir + "datperf-fi-bw", dir + DATPERF_HELPERS_FROM_BIN + "/datperf-fi-bw"})
                if (access(candidate.c_str(), X_OK) == 0) {
                    *path = candidate;
                    return true;
                }
        }
        return find_program("datperf-fi-bw", path);
    }
};

// ---- perftest ------------------------------------------------------------------------------

// perftest (package perftest) on an RDMA device: `TOOL -d DEV [-x GID]
// -n ITERS -s SIZE -p PORT` serves, the same plus the server's address is
// the client; PORT is its TCP exchange port (a free one per run). The
// latency tools report one-way latency (t_typical: the median); the
// bandwidth tools get --window as their send queue depth (-t), like our
// streaming workloads, and report in MiB/s (we convert).
class Perftest : public ComparePeer {
public:
    Perftest(std::string tool, Workload w, bool latency) : tool_(std::move(tool)), workload_(w), latency_(latency) {}
    std::string name() const override { return tool_; }
    bool counterpart_of(Workload w) const override { return w == workload_; }
    std::string figure() const override {
        return latency_ ? "median one-way latency of a run (t_typical)"
                        : "average bandwidth of a run (message rate x size, 10^6 B/s)";
    }
    std::string missing() const override {
        std::string path;
        if (!find_program(tool_, &path))
            return tool_ + " not found on PATH (Debian package perftest)";
        return rdma_device_missing();
    }

    bool run_once(const PeerRequest &req, double *latency_us, double *mb_s, std::string *command,
                  std::string *error) override {
        PairSpec spec;
        spec.tool = tool_;
        spec.listen_port = free_tcp_port();
        if (spec.listen_port <= 0) {
            *error = "no free TCP port";
            return false;
        }
        std::vector<std::string> common = {tool_};
        if (!req.device.empty())
            common.insert(common.end(), {"-d", req.device});
        if (req.gid_index >= 0)
            common.insert(common.end(), {"-x", std::to_string(req.gid_index)});
        common.insert(common.end(), {"-n", std::to_string(req.iters), "-s", std::to_string(req.size), "-p",
                                     std::to_string(spec.listen_port)});
        if (!latency_)
            common.insert(common.end(), {"-t", std::to_string(std::max(1, req.window))});
        spec.server = spec.client = common;
        spec.client.push_back(req.address);
        std::string out;
        return run_pair(spec, req, &out, command, error) &&
               parse_perftest(out, latency_, req.size, latency_us, mb_s, error);
    }

private:
    std::string tool_;
    Workload workload_;
    bool latency_;
};

// ---- OFED dapl's dtest -W --------------------------------------------------------------------

// OFED's RDMA-write ping-pong (dapl2-utils) through OFED's libdat2 and its
// cma provider (libdaplofa) on the interface that holds the IA's address:
// the DAT implementation we replace, on the same device. dtest's client
// learns the server's address over TCP port 15828 (fixed: one run at a
// time), then connects to conn_qual 45248. Its figure: total time / 2 /
// iterations of a polled RDMA-write ping-pong, like our write-lat.
class DtestW : public ComparePeer {
public:
    std::string name() const override { return "dtest"; }
    bool counterpart_of(Workload w) const override { return w == Workload::WriteLat; }
    std::string figure() const override { return "mean one-way latency of a run (dtest -W, OFED cma provider)"; }
    std::string missing() const override {
        std::string path;
        if (!find_program("dtest", &path))
            return "dtest not found on PATH (Debian package dapl2-utils)";
        if (access(kOfedProvider, R_OK) != 0)
            return std::string(kOfedProvider) + " missing (Debian package libdapl2)";
        return rdma_device_missing();
    }

    bool run_once(const PeerRequest &req, double *latency_us, double *mb_s, std::string *command,
                  std::string *error) override {
        if (req.netdev.empty()) {
            *error = "no network interface holds " + req.address + " (OFED's cma entry names one)";
            return false;
        }
        // OFED's registry reads this file only: our libdat2 must not shadow
        // OFED's, so LD_LIBRARY_PATH is emptied for both sides.
        const std::string ia = "ofa-v2-cma-roe-" + req.netdev;
        if (conf_.empty() && !write_conf(ia, req.netdev, error))
            return false;
        PairSpec spec;
        spec.tool = "dtest";
        spec.listen_port = 15828;
        spec.env = {"DAT_OVERRIDE=" + conf_, "LD_LIBRARY_PATH="};
        std::vector<std::string> common = {
            "dtest", "-P", ia, "-W", "-B", std::to_string(req.iters), "-b", std::to_string(req.size)};
        spec.server = spec.client = common;
        spec.server.push_back("-s");
        spec.client.insert(spec.client.end(), {"-h", req.address});
        std::string out;
        return run_pair(spec, req, &out, command, error) && parse_dtest_pingpong(out, latency_us, mb_s, error);
    }
    ~DtestW() override {
        if (!conf_.empty())
            unlink(conf_.c_str());
    }

private:
    static constexpr const char *kOfedProvider = "/usr/lib/x86_64-linux-gnu/libdaplofa.so.2";
    std::string conf_;

    bool write_conf(const std::string &ia, const std::string &netdev, std::string *error) {
        int fd = make_temp_file("ofed", &conf_, error);
        if (fd < 0)
            return false;
        // OFED's registry wants nonthreadsafe entries (what dat_ia_open asks for).
        const std::string line =
            ia + " u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"" + netdev + " 0\" \"\"\n";
        const bool ok = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
        close(fd);
        if (!ok)
            *error = "cannot write " + conf_;
        return ok;
    }
};

} // namespace

bool parse_fi_pingpong(const std::string &output, std::uint64_t size, double *usec_per_xfer, double *mb_s,
                       std::string *error) {
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

bool parse_perftest(const std::string &output, bool latency, std::uint64_t size, double *latency_us, double *mb_s,
                    std::string *error) {
    std::istringstream in(output);
    std::string line;
    int col_figure = -1, col_rate = -1;
    bool header = false;
    while (std::getline(in, line)) {
        auto w = words(line);
        if (w.empty())
            continue;
        if (w[0] == "#bytes") {
            // Header names of two words ("BW average[MB/sec]", "99%
            // percentile[usec]") name one field of a row.
            std::vector<std::string> fields;
            for (std::size_t i = 0; i < w.size(); ++i) {
                const bool joins = (w[i] == "BW" || w[i].back() == '%') && i + 1 < w.size();
                fields.push_back(joins ? w[i] + " " + w[i + 1] : w[i]);
                i += joins ? 1 : 0;
            }
            header = true;
            col_figure = col_rate = -1;
            for (std::size_t i = 0; i < fields.size(); ++i) {
                if (fields[i] == (latency ? "t_typical[usec]" : "BW average[MB/sec]"))
                    col_figure = static_cast<int>(i);
                else if (fields[i] == "MsgRate[Mpps]")
                    col_rate = static_cast<int>(i);
            }
            continue;
        }
        if (!header || col_figure < 0 || static_cast<std::size_t>(col_figure) >= w.size())
            continue;
        std::uint64_t bytes = 0;
        if (!parse_size(w[0], &bytes) || bytes != size)
            continue;
        double figure = 0;
        if (!parse_double(w[static_cast<std::size_t>(col_figure)], &figure) || figure <= 0)
            continue;
        if (latency) {
            *latency_us = figure;
            *mb_s = static_cast<double>(size) / figure;
            return true;
        }
        double rate = 0;
        if (col_rate >= 0 && static_cast<std::size_t>(col_rate) < w.size() &&
            parse_double(w[static_cast<std::size_t>(col_rate)], &rate) && rate > 0)
            *mb_s = rate * static_cast<double>(size); // Mpps x bytes = 10^6 B/s
        else
            *mb_s = figure * 1.048576; // MiB/s
        return true;
    }
    if (!header)
        *error = "no '#bytes ...' result table in the output: " + error_line(output);
    else if (col_figure < 0)
        *error =
            std::string("the result table has no ") + (latency ? "t_typical[usec]" : "BW average[MB/sec]") + " column";
    else
        *error = "the result table has no row for " + std::to_string(size) + " bytes";
    return false;
}

bool parse_fi_bw(const std::string &output, double *mb_s, std::string *error) {
    std::istringstream in(output);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("fi_bw:", 0) != 0)
            continue;
        for (const std::string &w : words(line))
            if (w.rfind("MB/s=", 0) == 0 && parse_double(w.substr(5), mb_s) && *mb_s > 0)
                return true;
    }
    *error = "no 'fi_bw: ... MB/s=' line in datperf-fi-bw's output: " + error_line(output);
    return false;
}

bool parse_dtest_pingpong(const std::string &output, double *latency_us, double *mb_s, std::string *error) {
    std::istringstream in(output);
    std::string line;
    while (std::getline(in, line)) {
        const auto at = line.find("RDMA write PingPong:");
        const auto lat = line.find("latency ");
        if (at == std::string::npos || lat == std::string::npos)
            continue;
        double us = 0;
        if (std::sscanf(line.c_str() + lat, "latency %lf us", &us) != 1 || us <= 0)
            continue;
        unsigned long long n = 0, size = 0;
        std::sscanf(line.c_str() + at, "RDMA write PingPong: (%llu x %llu)", &n, &size);
        *latency_us = us;
        *mb_s = size ? static_cast<double>(size) / us : 0;
        return true;
    }
    *error = "no 'RDMA write PingPong: ... latency' line in dtest's output: " + error_line(output);
    return false;
}

std::string interface_of(const std::string &address) {
    in_addr want{};
    if (inet_pton(AF_INET, address.c_str(), &want) != 1)
        return "";
    ifaddrs *list = nullptr;
    if (getifaddrs(&list) != 0)
        return "";
    std::string name;
    for (ifaddrs *i = list; i && name.empty(); i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
            reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr.s_addr == want.s_addr)
            name = i->ifa_name;
    freeifaddrs(list);
    return name;
}

std::vector<std::string> peer_names() {
    return {"fi_pingpong", "fi_bw", "ib_send_lat", "ib_write_lat", "ib_write_bw", "ib_read_bw", "ib_send_bw", "dtest"};
}

std::unique_ptr<ComparePeer> make_peer(const std::string &name) {
    if (name == "fi_pingpong")
        return std::make_unique<FiPingpong>();
    if (name == "fi_bw")
        return std::make_unique<FiBw>();
    if (name == "ib_send_lat")
        return std::make_unique<Perftest>(name, Workload::PingPong, true);
    if (name == "ib_write_lat")
        return std::make_unique<Perftest>(name, Workload::WriteLat, true);
    if (name == "ib_write_bw")
        return std::make_unique<Perftest>(name, Workload::WriteBw, false);
    if (name == "ib_read_bw")
        return std::make_unique<Perftest>(name, Workload::ReadBw, false);
    if (name == "ib_send_bw")
        return std::make_unique<Perftest>(name, Workload::SendBw, false);
    if (name == "dtest")
        return std::make_unique<DtestW>();
    return nullptr;
}

void run_peer(ComparePeer &peer, const PeerRequest &req, int repeats, PeerResult *into, bool progress) {
    const bool latency = info(req.workload).latency;
    into->peer = peer.name();
    into->workload = req.workload;
    into->figure = peer.figure();
    auto it =
        std::find_if(into->points.begin(), into->points.end(), [&](const PeerPoint &p) { return p.size == req.size; });
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
