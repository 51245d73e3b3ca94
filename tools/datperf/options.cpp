// SPDX-License-Identifier: BSD-3-Clause
// datperf's command line: workloads, sizes, iteration counts and outputs.
#include "datperf.hpp"

#include "dat2_version.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sched.h>
#include <set>

namespace datperf {

const std::vector<WorkloadInfo> &workloads() {
    static const std::vector<WorkloadInfo> table = {
        {Workload::PingPong, "pingpong", "send/recv ping-pong", true, true},
        {Workload::WriteLat, "write-lat", "RDMA-write ping-pong, polling the last byte of the buffer", true, true},
        {Workload::WriteBw, "write", "RDMA-write streaming bandwidth", false, true},
        {Workload::ReadBw, "read", "RDMA-read streaming bandwidth", false, true},
        {Workload::SendBw, "send", "send/recv streaming bandwidth", false, true},
        {Workload::ConnRate, "conn-rate", "connection establishment rate", false, false},
        {Workload::Scale, "scale", "costs against the number of connected pairs", false, false},
        {Workload::Ring, "ring",
         "RDMA writes into a ring the target polls, credits back by RDMA write (MPI eager RDMA)", false, true},
    };
    return table;
}

const WorkloadInfo &info(Workload w) {
    for (const auto &i : workloads())
        if (i.id == w)
            return i;
    return workloads().front();
}

const WorkloadInfo *find_workload(const std::string &name) {
    for (const auto &i : workloads())
        if (name == i.name)
            return &i;
    return nullptr;
}

const char *completion_name(Completion c) { return c == Completion::Poll ? "poll" : "wait"; }

bool cpu_usable(int cpu, std::string *error) {
    cpu_set_t allowed;
    if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof allowed, &allowed) != 0 ||
        !CPU_ISSET(cpu, &allowed)) {
        *error = "cannot run on CPU " + std::to_string(cpu) + " (--pin): not one this process may use";
        return false;
    }
    return true;
}

bool pin_to_cpu(int cpu, std::string *error) {
    if (cpu < 0)
        return true;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        *error = "cannot run on CPU " + std::to_string(cpu) + " (--pin): " + std::strerror(errno);
        return false;
    }
    return true;
}

bool parse_size(const std::string &text, std::uint64_t *out) {
    if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])))
        return false;
    errno = 0;
    char *end = nullptr;
    unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (errno != 0)
        return false;
    std::string suffix(end);
    std::transform(suffix.begin(), suffix.end(), suffix.begin(), [](unsigned char c) { return std::tolower(c); });
    unsigned shift = 0;
    if (suffix.empty() || suffix == "b")
        shift = 0;
    else if (suffix == "k" || suffix == "kb" || suffix == "kib")
        shift = 10;
    else if (suffix == "m" || suffix == "mb" || suffix == "mib")
        shift = 20;
    else if (suffix == "g" || suffix == "gb" || suffix == "gib")
        shift = 30;
    else
        return false;
    if (v > (UINT64_MAX >> shift))
        return false;
    *out = static_cast<std::uint64_t>(v) << shift;
    return true;
}

std::string size_text(std::uint64_t bytes) {
    static const char *const units[] = {"", "k", "m", "g"};
    unsigned u = 0;
    while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) {
        bytes /= 1024;
        ++u;
    }
    return std::to_string(bytes) + units[u];
}

void usage(std::FILE *out) {
    std::fprintf(out,
                 "usage: datperf [options] [WORKLOAD[,WORKLOAD...]]\n"
                 "  Measures a DAT provider through the public DAT API only (any libdat2.so.2:\n"
                 "  ours or OFED's). By default the server runs in a child process and the\n"
                 "  client connects to the address the IA reports (dat_ia_query).\n"
                 "\n"
                 "workloads:\n"
                 "  pingpong            send/recv ping-pong (the default)\n"
                 "  write-lat           RDMA-write ping-pong; each side polls the last byte of its\n"
                 "                      buffer (like dtest -W and ib_write_lat)\n"
                 "  write, read, send   streaming bandwidth with --window operations outstanding\n"
                 "  conn-rate           connections per second for --endpoints endpoints\n"
                 "  scale               N pairs connected in batches over one PSP, one connection\n"
                 "                      EVD and one DTO EVD per side (--pairs): at each count the\n"
                 "                      per-pair setup time of the batch, both processes' CPU\n"
                 "                      while asleep (--idle), fds and RSS per pair, the ping-pong\n"
                 "                      of the data connection among them (smallest --sizes, else\n"
                 "                      64 B; --iters); then per-pair teardown time by batch, and\n"
                 "                      the fds and RSS after. Raises RLIMIT_NOFILE to the hard limit\n"
                 "  ring                RDMA writes into a ring of --window slots that the target\n"
                 "                      polls (each slot's last byte), slots handed back by RDMA\n"
                 "                      write; both sides dequeue one shared EVD between looks at\n"
                 "                      memory (MPI's eager RDMA path); messages per second\n"
                 "  Latency is one-way: round trip / 2, in microseconds (us). MB/s is 10^6 bytes\n"
                 "  per second; for the ping-pongs it is size / one-way latency.\n"
                 "\n"
                 "sizes and counts:\n"
                 "  --sizes LIST        message sizes, e.g. 1,64,4k,64k,1m (1 B to 4 MiB;\n"
                 "                      default 1,64,4k,64k,1m)\n"
                 "  --sweep MIN:MAX     powers of two from MIN to MAX, e.g. 1:4m\n"
                 "  -n, --iters N       measured iterations per size (default: 1000 up to 64 KiB,\n"
                 "                      then 64 MiB worth, at least 50; streaming: 256 MiB worth\n"
                 "                      within 200..10000)\n"
                 "  --warmup N          unmeasured iterations before them (default: a tenth, at\n"
                 "                      most 100)\n"
                 "  --window N          outstanding operations of write/read/send, slots of ring,\n"
                 "                      outstanding connects of conn-rate (default 64; clamped to\n"
                 "                      the IA's limits)\n"
                 "  --endpoints N       endpoints of conn-rate (default 100)\n"
                 "  --pairs LIST        pair counts of scale, ascending: e.g. 128,256,1024 or\n"
                 "                      MIN:MAX, doubling (default 128:4096)\n"
                 "  --idle SEC          scale: how long both processes sleep at each count while\n"
                 "                      their CPU time is measured (default 3; 0: not measured)\n"
                 "  --self              scale: both ends of every pair in the client process,\n"
                 "                      connected to itself through a PSP of its own (one\n"
                 "                      connection EVD for requests and connections); the server\n"
                 "                      holds only the data connection\n"
                 "  --poll              completions by dat_evd_dequeue busy-polling (default of\n"
                 "                      pingpong and write-lat)\n"
                 "  --wait              completions by dat_evd_wait (default of the others;\n"
                 "                      write-lat always polls memory and refuses it)\n"
                 "  --runs N            the whole measurement N times (default 1); the table shows\n"
                 "                      the median over runs (minimum of minimums)\n"
                 "\n"
                 "provider and hosts:\n"
                 "  -P, --provider IA   dat.conf entry to use (default: the first entry\n"
                 "                      dat_registry_list_providers returns, else ofi-tcp)\n"
                 "  --server            serve one client on --port and exit (two hosts)\n"
                 "  --connect HOST      the client, against a datperf --server on HOST\n"
                 "  --port N            connection qualifier (default %ld with --server and\n"
                 "                      --connect; in one-command mode any free one)\n"
                 "  --timeout SEC       give up when nothing happens for SEC seconds (default 30)\n"
                 "  --pin S,C           run the server on CPU S and the client on CPU C, the peers\n"
                 "                      of --compare too (two busy pollers on two CPUs, as\n"
                 "                      perftest is usually run); with --server or --connect:\n"
                 "                      --pin N, this process on CPU N\n"
                 "  --timer T           the client's sample clock: clock (clock_gettime), tsc\n"
                 "                      (x86 rdtsc, its rate measured over each size), auto\n"
                 "                      (default: tsc where clock_gettime costs over 150 ns a\n"
                 "                      call, as in an emulated VM; the heading says which)\n"
                 "\n"
                 "outputs:\n"
                 "  --json[=FILE]       JSON; on stdout instead of the table, or into FILE\n"
                 "  --csv[=FILE]        CSV; on stdout instead of the table, or into FILE\n"
                 "  --plot FILE.png     latency and bandwidth against size (gnuplot), one line per\n"
                 "                      run and per peer; scale: its figures against the pair\n"
                 "                      count (into FILE-scale.png when other workloads are plotted)\n"
                 "  --progress, --no-progress\n"
                 "                      a progress line on stderr for sizes that take over a\n"
                 "                      second (default: when stderr is a terminal)\n"
                 "\n"
                 "comparison:\n"
                 "  --compare[=PEER,...]  runs peer programs on the same sizes in the same run and\n"
                 "                      shows our figures as ratios to the peer's median (one-command\n"
                 "                      mode only). Peers: fi_pingpong (default; for pingpong);\n"
                 "                      fi_bw (write, read, send over RDM IAs: datperf-fi-bw,\n"
                 "                      streaming straight over libfabric with the RDM\n"
                 "                      transport's ordering and delivery-complete writes);\n"
                 "                      on an RDMA device (perftest): ib_send_lat (pingpong),\n"
                 "                      ib_write_lat (write-lat), ib_write_bw, ib_read_bw,\n"
                 "                      ib_send_bw (write, read, send); dtest (write-lat: OFED\n"
                 "                      dapl's dtest -W through OFED's libdat2 and cma provider)\n"
                 "  --peer-repeats N    runs of the peer per size (default 3)\n"
                 "  --peer-provider P   libfabric provider for fi_pingpong and fi_bw (default:\n"
                 "                      from the IA's vendor name \"libfabric P\", else tcp)\n"
                 "  --peer-device DEV   RDMA device of the perftest peers (default: theirs)\n"
                 "  --peer-gid N        GID index of the perftest peers (-x; RoCEv2 IPv4 on rxe: 1)\n"
                 "\n"
                 "--version prints datperf's version (dat2's), --help this text.\n"
                 "\n"
                 "Exit status: 0 measured, 1 a DAT call, a connection, a child process or an\n"
                 "output failed (the reason is on stderr), 2 bad usage. A peer that fails shows\n"
                 "in the table, not in the exit status. More: tools/datperf/README.md.\n",
                 kDefaultPort);
}

namespace {

bool parse_long(const std::string &text, long lo, long hi, long *out) {
    if (text.empty())
        return false;
    errno = 0;
    char *end = nullptr;
    long v = std::strtol(text.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

std::vector<std::string> split(const std::string &s, char sep) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : s) {
        if (c == sep) {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    out.push_back(cur);
    return out;
}

bool size_in_range(std::uint64_t v) { return v >= kMinSize && v <= kMaxSize; }

} // namespace

bool parse_options(int argc, char **argv, Options *opt, int *exit_code) {
    *exit_code = 2;
    std::set<std::uint64_t> sizes;
    bool sizes_given = false;
    std::size_t pin_given = 0;
    auto bad = [&](const std::string &msg) {
        std::fprintf(stderr, "datperf: %s (datperf --help for usage)\n", msg.c_str());
        return false;
    };
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i], value;
        bool has_inline = false;
        if (a.rfind("--", 0) == 0) {
            auto eq = a.find('=');
            if (eq != std::string::npos) {
                value = a.substr(eq + 1);
                a = a.substr(0, eq);
                has_inline = true;
            }
        }
        // The argument of an option that requires one.
        auto need = [&](std::string *out) {
            if (has_inline) {
                *out = value;
                return true;
            }
            if (i + 1 >= argc)
                return false;
            *out = argv[++i];
            return true;
        };
        auto number = [&](long lo, long hi, long *out) {
            std::string v;
            if (!need(&v))
                return bad("option " + a + " needs a value");
            if (!parse_long(v, lo, hi, out))
                return bad("option " + a + ": '" + v + "' is not a number in " + std::to_string(lo) + ".." +
                           std::to_string(hi));
            return true;
        };
        long n = 0;
        std::string v;
        if (a == "-h" || a == "--help") {
            usage(stdout);
            *exit_code = 0;
            return false;
        } else if (a == "--version") {
            std::printf("datperf %s (dat2)\n", DAT2_VERSION);
            *exit_code = 0;
            return false;
        } else if (a == "-P" || a == "--provider") {
            if (!need(&opt->provider) || opt->provider.empty())
                return bad("option " + a + " needs an IA name");
        } else if (a == "--sizes") {
            if (!need(&v))
                return bad("--sizes needs a list, e.g. 1,64,4k");
            for (const auto &item : split(v, ',')) {
                std::uint64_t s = 0;
                if (!parse_size(item, &s) || !size_in_range(s))
                    return bad("--sizes: '" + item + "' is not a size from 1 to 4m");
                sizes.insert(s);
            }
            sizes_given = true;
        } else if (a == "--sweep") {
            if (!need(&v))
                return bad("--sweep needs MIN:MAX");
            auto parts = split(v, ':');
            std::uint64_t lo = 0, hi = 0;
            if (parts.size() != 2 || !parse_size(parts[0], &lo) || !parse_size(parts[1], &hi) || !size_in_range(lo) ||
                !size_in_range(hi) || lo > hi)
                return bad("--sweep: '" + v + "' is not MIN:MAX with 1 <= MIN <= MAX <= 4m");
            // MIN, then every power of two above it up to MAX.
            for (std::uint64_t s = lo; s <= hi;) {
                sizes.insert(s);
                std::uint64_t p = 1;
                while (p <= s)
                    p <<= 1;
                s = p;
            }
            sizes_given = true;
        } else if (a == "-n" || a == "--iters") {
            if (!number(1, 100000000, &n))
                return false;
            opt->iters = n;
        } else if (a == "--warmup") {
            if (!number(0, 100000000, &n))
                return false;
            opt->warmup = n;
        } else if (a == "--window") {
            if (!number(1, 4096, &n))
                return false;
            opt->window = static_cast<int>(n);
        } else if (a == "--endpoints") {
            if (!number(1, 10000, &n))
                return false;
            opt->endpoints = static_cast<int>(n);
        } else if (a == "--pairs") {
            if (!need(&v))
                return bad("--pairs needs a list, e.g. 128,256,1024, or MIN:MAX");
            std::set<std::uint64_t> counts;
            auto count_of = [](const std::string &item, std::uint64_t *out) {
                long c = 0;
                if (!parse_long(item, 1, kMaxPairs, &c))
                    return false;
                *out = static_cast<std::uint64_t>(c);
                return true;
            };
            auto parts = split(v, ':');
            if (parts.size() == 2) {
                std::uint64_t lo = 0, hi = 0;
                if (!count_of(parts[0], &lo) || !count_of(parts[1], &hi) || lo > hi)
                    return bad("--pairs: '" + v +
                               "' is not MIN:MAX with 1 <= MIN <= MAX <= " + std::to_string(kMaxPairs));
                for (std::uint64_t c = lo; c < hi; c *= 2)
                    counts.insert(c);
                counts.insert(hi);
            } else {
                for (const auto &item : split(v, ',')) {
                    std::uint64_t c = 0;
                    if (!count_of(item, &c))
                        return bad("--pairs: '" + item + "' is not a count from 1 to " + std::to_string(kMaxPairs));
                    counts.insert(c);
                }
            }
            opt->pairs.assign(counts.begin(), counts.end());
        } else if (a == "--idle") {
            if (!number(0, 600, &n))
                return false;
            opt->idle_s = static_cast<double>(n);
        } else if (a == "--self") {
            opt->scale_self = true;
        } else if (a == "--poll" || a == "--wait") {
            Completion c = a == "--poll" ? Completion::Poll : Completion::Wait;
            if (opt->completion_forced && opt->completion != c)
                return bad("--poll and --wait exclude each other");
            opt->completion_forced = true;
            opt->completion = c;
        } else if (a == "--runs") {
            if (!number(1, 1000, &n))
                return false;
            opt->runs = static_cast<int>(n);
        } else if (a == "--server") {
            opt->role = Role::Server;
        } else if (a == "--connect") {
            if (!need(&opt->host) || opt->host.empty())
                return bad("--connect needs a host");
            opt->role = Role::Client;
        } else if (a == "--port") {
            if (!number(0, 65535, &n))
                return false;
            opt->port = n;
        } else if (a == "--timer") {
            if (!need(&opt->timer))
                return bad("--timer needs auto, clock or tsc");
            if (opt->timer != "auto" && opt->timer != "clock" && opt->timer != "tsc")
                return bad("--timer: '" + opt->timer + "' is none of auto, clock, tsc");
#if !defined(__x86_64__)
            if (opt->timer == "tsc")
                return bad("--timer tsc: datperf reads the time-stamp counter on x86-64 only");
#endif
        } else if (a == "--timeout") {
            if (!number(1, 86400, &n))
                return false;
            opt->timeout_s = static_cast<double>(n);
        } else if (a == "--json") {
            if (has_inline)
                opt->json_path = value;
            else
                opt->json = true;
        } else if (a == "--csv") {
            if (has_inline)
                opt->csv_path = value;
            else
                opt->csv = true;
        } else if (a == "--plot") {
            if (!need(&opt->plot_path) || opt->plot_path.empty())
                return bad("--plot needs a file name");
        } else if (a == "--progress") {
            opt->progress = 1;
        } else if (a == "--no-progress") {
            opt->progress = 0;
        } else if (a == "--compare") {
            if (has_inline) {
                for (const auto &p : split(value, ','))
                    if (!p.empty())
                        opt->compare.push_back(p);
            } else {
                opt->compare.push_back("fi_pingpong");
            }
        } else if (a == "--peer-repeats") {
            if (!number(1, 100, &n))
                return false;
            opt->peer_repeats = static_cast<int>(n);
        } else if (a == "--peer-provider") {
            if (!need(&opt->peer_provider) || opt->peer_provider.empty())
                return bad("--peer-provider needs a libfabric provider name");
        } else if (a == "--peer-device") {
            if (!need(&opt->peer_device) || opt->peer_device.empty())
                return bad("--peer-device needs an RDMA device name (ibv_devices lists them)");
        } else if (a == "--pin") {
            if (!need(&v))
                return bad("--pin needs CPUS: S,C (one-command mode) or N (--server, --connect)");
            std::vector<long> cpus;
            for (const auto &item : split(v, ',')) {
                long cpu = 0;
                if (!parse_long(item, 0, CPU_SETSIZE - 1, &cpu))
                    return bad("--pin: '" + item + "' is not a CPU number");
                cpus.push_back(cpu);
            }
            if (cpus.size() > 2)
                return bad("--pin takes one or two CPU numbers, not '" + v + "'");
            opt->server_cpu = static_cast<int>(cpus[0]);
            opt->client_cpu = static_cast<int>(cpus.back());
            pin_given = cpus.size();
        } else if (a == "--peer-gid") {
            if (!number(0, 255, &n))
                return false;
            opt->peer_gid = static_cast<int>(n);
        } else if (!a.empty() && a[0] != '-') {
            for (const auto &name : split(a, ',')) {
                const WorkloadInfo *w = find_workload(name);
                if (!w) {
                    std::string known;
                    for (const auto &k : workloads())
                        known += std::string(known.empty() ? "" : ", ") + k.name;
                    return bad("unknown workload '" + name + "' (workloads: " + known + ")");
                }
                if (std::find(opt->workloads.begin(), opt->workloads.end(), w->id) == opt->workloads.end())
                    opt->workloads.push_back(w->id);
            }
        } else {
            return bad("unknown option '" + std::string(argv[i]) + "'");
        }
    }

    if (opt->workloads.empty())
        opt->workloads.push_back(Workload::PingPong);
    opt->sizes_given = sizes_given;
    if (!sizes_given)
        sizes = {1, 64, 4096, 65536, 1 << 20};
    if (opt->pairs.empty())
        opt->pairs = {128, 256, 512, 1024, 2048, 4096};
    opt->sizes.assign(sizes.begin(), sizes.end());
    if (opt->json && opt->csv)
        return bad("--json and --csv cannot both take stdout; give one a file (--csv=FILE)");
    if (opt->completion_forced && opt->completion == Completion::Wait &&
        std::find(opt->workloads.begin(), opt->workloads.end(), Workload::WriteLat) != opt->workloads.end())
        return bad("write-lat polls memory for the peer's writes: --wait does not apply to it");
    if (opt->completion_forced && opt->completion == Completion::Wait &&
        std::find(opt->workloads.begin(), opt->workloads.end(), Workload::Ring) != opt->workloads.end())
        return bad("ring polls memory for the peer's writes: --wait does not apply to it");
    if (opt->role != Role::Loopback && !opt->compare.empty())
        return bad("--compare runs its peers on this host: it needs the one-command mode (no --server/--connect)");
    if (opt->role == Role::Server &&
        (opt->json || opt->csv || !opt->json_path.empty() || !opt->csv_path.empty() || !opt->plot_path.empty()))
        return bad("the server measures nothing: give --json, --csv and --plot to the client");
    if (pin_given == 1 && opt->role == Role::Loopback)
        return bad("--pin needs two CPUs in one-command mode: S,C (server, client)");
    if (pin_given == 2 && opt->role != Role::Loopback)
        return bad("--pin takes one CPU with --server or --connect (this process)");
    const bool scale = std::find(opt->workloads.begin(), opt->workloads.end(), Workload::Scale) != opt->workloads.end();
    if (scale && (opt->csv || !opt->csv_path.empty()))
        return bad("scale has no CSV form: use --json");
    if (opt->scale_self && !scale)
        return bad("--self is an option of the scale workload");
    if (opt->role != Role::Loopback && opt->port < 0)
        opt->port = kDefaultPort;
    *exit_code = 0;
    return true;
}

Completion completion_for(const Options &opt, Workload w) {
    if (w == Workload::WriteLat || w == Workload::Ring)
        return Completion::Poll;
    if (opt.completion_forced)
        return opt.completion;
    return info(w).latency ? Completion::Poll : Completion::Wait;
}

std::uint64_t iters_for(const Options &opt, Workload w, std::uint64_t size) {
    if (w == Workload::ConnRate)
        return static_cast<std::uint64_t>(opt.endpoints);
    if (opt.iters > 0)
        return static_cast<std::uint64_t>(opt.iters);
    if (w == Workload::Scale)
        return 1000;
    if (info(w).latency) {
        if (size <= 65536)
            return 1000;
        return std::max<std::uint64_t>(50, (std::uint64_t(64) << 20) / size);
    }
    return std::clamp<std::uint64_t>((std::uint64_t(256) << 20) / size, 200, 10000);
}

std::uint64_t warmup_for(const Options &opt, Workload w, std::uint64_t iters) {
    if (w == Workload::ConnRate)
        return 0;
    if (opt.warmup >= 0)
        return static_cast<std::uint64_t>(opt.warmup);
    return std::min<std::uint64_t>(100, iters / 10);
}

std::uint64_t scale_pingpong_size(const Options &opt) { return opt.sizes_given ? opt.sizes.front() : 64; }

} // namespace datperf
