// SPDX-License-Identifier: BSD-3-Clause
// datperf, the DAT benchmark: ping-pong latency (send/recv, RDMA write),
// streaming bandwidth (write, read, send), connection rate; compared with
// libfabric's fi_pingpong in the same run. Only the public DAT API: it runs
// as well against OFED's libdat2 and providers.
//
// In the one-command mode this process only orchestrates: every run forks a
// server child and a client child (which streams its figures back through
// a pipe), so no DAT or libfabric state ever crosses a fork. After each of
// our sizes the peers run at that size while our session waits: both
// measure the same moment of a shared machine. --server and --connect run
// one role in this process instead.
#include "peers.hpp"
#include "proc.hpp"
#include "report.hpp"
#include "session.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <thread>

namespace datperf {
namespace {

// The error has been printed already (by a child process).
struct Reported {};

// ---- results through a pipe -------------------------------------------------------------------

// The client child streams its results, one tab-separated line per record:
// "info" once connected, "test" as each workload starts, "point" after each
// size (then it waits for a byte on the go pipe before the next), "end".
void write_info(std::FILE *out, const SessionInfo &i) {
    std::fprintf(out, "info\t%s\t%s\t%s\t%s\t%s\n", i.ia_name.c_str(), i.vendor.c_str(), i.ia_address.c_str(),
                 i.server_address.c_str(), i.timer.c_str());
    std::fflush(out);
}

void write_test(std::FILE *out, const TestResult &t) {
    std::fprintf(out, "test\t%u\t%d\t%d\n", static_cast<unsigned>(t.workload), t.completion == Completion::Wait,
                 t.window);
    std::fflush(out);
}

void write_point(std::FILE *out, const Point &p) {
    std::fprintf(out, "point\t%llu\t%llu\t%d\t%.17g\t%.17g\t%.17g\t%.17g\t%.17g\t%.17g\t%.17g\t%.17g\n",
                 static_cast<unsigned long long>(p.size), static_cast<unsigned long long>(p.iters),
                 p.has_latency ? 1 : 0, p.median_us, p.p99_us, p.min_us, p.max_us, p.avg_us, p.mb_s, p.msg_s,
                 p.seconds);
    std::fflush(out);
}

// A list of threads as "tid,main,pct,name;..." ("-": none).
std::string threads_text(const std::vector<ThreadCpu> &threads) {
    std::string out;
    for (const auto &t : threads) {
        std::string name = t.name;
        for (char &c : name)
            if (c == ',' || c == ';' || c == '\t' || c == '\n')
                c = '_';
        char buf[64];
        std::snprintf(buf, sizeof buf, "%d,%d,%.17g,", static_cast<int>(t.tid), t.main ? 1 : 0, t.pct);
        out += (out.empty() ? "" : ";") + std::string(buf) + name;
    }
    return out.empty() ? "-" : out;
}

// The scale workload's rows, one line each: "scale", every figure of
// scale_fields() (nan: not measured), then each side's threads.
void write_scale(std::FILE *out, const std::vector<ScaleRow> &rows) {
    for (const auto &row : rows) {
        std::fprintf(out, "scale");
        for (const auto &f : scale_fields())
            std::fprintf(out, "\t%.17g", row.*f.member);
        std::fprintf(out, "\t%s\t%s\n", threads_text(row.client_threads).c_str(),
                     threads_text(row.server_threads).c_str());
    }
    std::fflush(out);
}

std::vector<std::string> fields(const std::string &line) {
    std::vector<std::string> out;
    std::size_t start = 0;
    for (;;) {
        auto tab = line.find('\t', start);
        out.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
        if (tab == std::string::npos)
            return out;
        start = tab + 1;
    }
}

std::vector<ThreadCpu> threads_of_text(const std::string &text) {
    std::vector<ThreadCpu> out;
    if (text == "-")
        return out;
    std::size_t start = 0;
    while (start <= text.size()) {
        auto end = text.find(';', start);
        std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
        ThreadCpu t;
        char name[64] = "";
        int tid = 0, main = 0;
        if (std::sscanf(item.c_str(), "%d,%d,%lf,%63[^\n]", &tid, &main, &t.pct, name) >= 3) {
            t.tid = tid;
            t.main = main != 0;
            t.name = name;
            out.push_back(t);
        }
        if (end == std::string::npos)
            break;
        start = end + 1;
    }
    return out;
}

// One line of the stream into *r; the point it adds, if any, in *added.
// False at "end".
bool read_line(const std::string &line, SessionResults *r, const Point **added) {
    *added = nullptr;
    auto f = fields(line);
    if (f[0] == "info" && f.size() == 6) {
        r->info = SessionInfo{f[1], f[2], f[3], f[4], f[5]};
    } else if (f[0] == "test" && f.size() == 4) {
        TestResult t;
        t.workload = static_cast<Workload>(std::stoul(f[1]));
        t.completion = f[2] == "1" ? Completion::Wait : Completion::Poll;
        t.window = std::stoi(f[3]);
        r->tests.push_back(t);
    } else if (f[0] == "point" && f.size() == 12 && !r->tests.empty()) {
        Point p;
        p.size = std::stoull(f[1]);
        p.iters = std::stoull(f[2]);
        p.has_latency = f[3] == "1";
        double *v[] = {&p.median_us, &p.p99_us, &p.min_us, &p.max_us, &p.avg_us, &p.mb_s, &p.msg_s, &p.seconds};
        for (std::size_t i = 0; i < 8; ++i)
            *v[i] = std::stod(f[4 + i]);
        r->tests.back().points.push_back(p);
        *added = &r->tests.back().points.back();
    } else if (f[0] == "scale" && f.size() == scale_fields().size() + 3 && !r->tests.empty()) {
        ScaleRow row;
        for (std::size_t i = 0; i < scale_fields().size(); ++i)
            row.*scale_fields()[i].member = std::stod(f[1 + i]);
        row.client_threads = threads_of_text(f[scale_fields().size() + 1]);
        row.server_threads = threads_of_text(f[scale_fields().size() + 2]);
        r->tests.back().scale.push_back(row);
    } else if (f[0] == "end") {
        return false;
    }
    return true;
}

// ---- comparison peers ---------------------------------------------------------------------------

// The libfabric provider an fi_* peer should use: --peer-provider, else
// what the IA's vendor name says ("libfabric tcp", "libfabric shm rdm"),
// else tcp.
std::string peer_provider(const Options &opt, const SessionInfo &info) {
    if (!opt.peer_provider.empty())
        return opt.peer_provider;
    const std::string prefix = "libfabric ";
    if (info.vendor.rfind(prefix, 0) == 0 && info.vendor.size() > prefix.size()) {
        std::string p = info.vendor.substr(prefix.size());
        return p.substr(0, p.find(' '));
    }
    return "tcp";
}

// Its endpoint type: rdm where the vendor name says so (the plugin's RDM
// transport: "libfabric shm rdm"), else msg.
std::string peer_endpoint(const SessionInfo &info) {
    const std::string suffix = " rdm";
    return info.vendor.size() > suffix.size() &&
                   info.vendor.compare(info.vendor.size() - suffix.size(), suffix.size(), suffix) == 0
               ? "rdm"
               : "msg";
}

// The peers asked for and their results per workload. They run size by
// size right after ours, while our session waits, so that both measure the
// same moment of a shared machine.
struct Peers {
    const Options &opt;
    std::vector<std::unique_ptr<ComparePeer>> list;
    std::map<Workload, std::vector<PeerResult>> results;

    explicit Peers(const Options &o) : opt(o) {}
    bool any_for(Workload w) const {
        return std::any_of(list.begin(), list.end(), [&](const auto &p) { return p->counterpart_of(w); });
    }
    void run_at(const SessionInfo &session, Workload w, std::uint64_t size) {
        auto &mine = results[w];
        for (const auto &peer : list) {
            if (!peer->counterpart_of(w))
                continue;
            auto it =
                std::find_if(mine.begin(), mine.end(), [&](const PeerResult &r) { return r.peer == peer->name(); });
            if (it == mine.end()) {
                mine.emplace_back();
                it = mine.end() - 1;
            }
            PeerRequest req;
            req.workload = w;
            req.size = size;
            // The peer has no warm-up of its own: it runs as many iterations
            // as we did, ours included.
            const std::uint64_t n = iters_for(opt, w, size);
            req.iters = n + warmup_for(opt, w, n);
            req.address = session.server_address;
            req.provider = peer_provider(opt, session);
            req.endpoint = peer_endpoint(session);
            req.window = static_cast<int>(opt.window);
            req.device = opt.peer_device;
            req.gid_index = opt.peer_gid;
            req.netdev = interface_of(session.server_address);
            req.timeout_s = opt.timeout_s;
            req.server_cpu = opt.server_cpu;
            req.client_cpu = opt.client_cpu;
            run_peer(*peer, req, opt.peer_repeats, &*it, opt.progress > 0);
        }
    }
};

// ---- child processes --------------------------------------------------------------------------

// pin_to_cpu, saying why on stderr when it cannot.
bool pin_or_say(int cpu) {
    std::string error;
    if (pin_to_cpu(cpu, &error))
        return true;
    std::fprintf(stderr, "datperf: %s\n", error.c_str());
    return false;
}

// Forks a child that runs `body` and exits with its result; the child dies
// with us.
template <typename Body> pid_t fork_child(Body body) {
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        throw Error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        int rc = body();
        std::fflush(stdout);
        std::exit(rc);
    }
    return pid;
}

// waitpid with a deadline; true when it exited (status in *status).
bool wait_child(pid_t pid, double timeout_s, int *status) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            return true;
        if (std::chrono::steady_clock::now() > deadline)
            return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

// Waits `grace_s` for the child, then stops it. True when it ended on its own.
bool end_child(pid_t pid, double grace_s, int *status) {
    if (wait_child(pid, grace_s, status))
        return true;
    kill(pid, SIGTERM);
    if (!wait_child(pid, 3, status)) {
        kill(pid, SIGKILL);
        waitpid(pid, status, 0);
    }
    return false;
}

// Reads `fd` line by line, handing each to `on_line` (false: stop), until
// EOF or until `give_up` says so (checked every 200 ms).
template <typename OnLine, typename GiveUp> void read_lines(int fd, OnLine on_line, GiveUp give_up) {
    std::string pending;
    char buf[4096];
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        int n = poll(&p, 1, 200);
        if (n > 0) {
            ssize_t got = read(fd, buf, sizeof buf);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0)
                return;
            pending.append(buf, static_cast<std::size_t>(got));
            std::size_t nl;
            while ((nl = pending.find('\n')) != std::string::npos) {
                std::string line = pending.substr(0, nl);
                pending.erase(0, nl + 1);
                if (!on_line(line))
                    return;
            }
            continue;
        }
        if (n < 0 && errno != EINTR)
            return;
        if (give_up())
            return;
    }
}

void close_all(std::initializer_list<int> fds) {
    for (int fd : fds)
        close(fd);
}

// One run of the one-command mode: a server child on a PSP of its choosing,
// a client child that connects to the IA's own address and streams its
// figures back. After each size the peers of that workload run, then the
// client goes on (a byte on the go pipe).
SessionResults loopback_run(const Options &opt, const std::string &ia_name, Peers &peers) {
    int ready[2], results[2], go[2];
    if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(results, O_CLOEXEC) != 0 || pipe2(go, O_CLOEXEC) != 0)
        throw Error(std::string("pipe: ") + std::strerror(errno));
    pid_t server = fork_child([&] {
        close_all({ready[0], results[0], results[1], go[0], go[1]});
        if (!pin_or_say(opt.server_cpu))
            return 1; // the parent sees no listener and stops
        return run_server(opt, ia_name, ready[1]);
    });
    close(ready[1]);
    int status = 0;
    std::string qual_line;
    bool listening = false;
    const auto started = std::chrono::steady_clock::now();
    read_lines(
        ready[0],
        [&](const std::string &l) {
            qual_line = l;
            listening = true;
            return false;
        },
        [&] { return std::chrono::steady_clock::now() - started > std::chrono::duration<double>(opt.timeout_s + 10); });
    close(ready[0]);
    if (!listening) {
        close_all({results[0], results[1], go[0], go[1]});
        end_child(server, 5, &status);
        throw Reported{}; // the server said why
    }
    const DAT_CONN_QUAL qual = std::stoull(qual_line);

    pid_t client = fork_child([&] {
        close_all({results[0], go[1]});
        if (!pin_or_say(opt.client_cpu))
            return 1;
        std::FILE *out = fdopen(results[1], "w");
        if (!out)
            return 1;
        ClientHooks hooks;
        hooks.on_info = [&](const SessionInfo &i) { write_info(out, i); };
        hooks.on_test = [&](const TestResult &t) { write_test(out, t); };
        hooks.on_scale = [&](const std::vector<ScaleRow> &rows) { write_scale(out, rows); };
        hooks.on_point = [&](const Point &p) {
            write_point(out, p);
            char c;
            ssize_t n;
            while ((n = read(go[0], &c, 1)) < 0 && errno == EINTR) {
            }
            if (n != 1)
                throw Error("the parent process went away");
        };
        int rc = 1;
        try {
            run_client(opt, ia_name, "", qual, hooks);
            std::fprintf(out, "end\n");
            rc = 0;
        } catch (const std::exception &e) {
            std::fprintf(stderr, "datperf: %s\n", e.what());
        }
        std::fclose(out);
        return rc;
    });
    close_all({results[1], go[0]});

    // Should the server die, the client learns it from a broken connection;
    // should it not, we end it 5 s later.
    bool server_done = false;
    std::chrono::steady_clock::time_point server_died{};
    SessionResults r;
    bool complete = false;
    read_lines(
        results[0],
        [&](const std::string &l) {
            const Point *added = nullptr;
            if (!read_line(l, &r, &added)) {
                complete = true;
                return false;
            }
            if (added) {
                if (peers.any_for(r.tests.back().workload))
                    peers.run_at(r.info, r.tests.back().workload, added->size);
                const char c = 'g';
                if (write(go[1], &c, 1) != 1)
                    return false;
            }
            return true;
        },
        [&] {
            if (!server_done && waitpid(server, &status, WNOHANG) == server) {
                server_done = true;
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                    server_died = std::chrono::steady_clock::now();
            }
            return server_died != std::chrono::steady_clock::time_point{} &&
                   std::chrono::steady_clock::now() - server_died > std::chrono::seconds(5);
        });
    close_all({results[0], go[1]});
    int client_status = 0;
    end_child(client, 15, &client_status);
    if (!server_done)
        server_done = end_child(server, 15, &status);
    if (server_done && WIFSIGNALED(status)) // on its own, not stopped by us
        std::fprintf(stderr, "datperf: the server process was %s\n", status_text(status).c_str());
    if (!WIFEXITED(client_status) || WEXITSTATUS(client_status) != 0 || !complete) {
        if (WIFSIGNALED(client_status))
            std::fprintf(stderr, "datperf: the client process was %s\n", status_text(client_status).c_str());
        throw Reported{};
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw Reported{};
    return r;
}

bool write_file(const std::string &path, const Report &r, void (*writer)(std::FILE *, const Report &)) {
    std::FILE *f = std::fopen(path.c_str(), "w");
    if (!f) {
        std::fprintf(stderr, "datperf: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
        return false;
    }
    writer(f, r);
    return std::fclose(f) == 0;
}

int run(const Options &opt) {
    // Every pair of the scale workload holds descriptors (a socket per
    // endpoint on tcp); the children inherit the raised limit. A server
    // does not know what its client will run: it raises it anyway.
    const bool scale = std::find(opt.workloads.begin(), opt.workloads.end(), Workload::Scale) != opt.workloads.end();
    const std::string fd_limit = scale || opt.role == Role::Server ? raise_fd_limit() : std::string();

    // The IA: -P, else the registry's first entry, else ofi-tcp.
    const std::vector<std::string> names = registry_names();
    std::string ia_name = opt.provider;
    if (ia_name.empty())
        ia_name = names.empty() ? "ofi-tcp" : names.front();
    else if (!names.empty() && std::find(names.begin(), names.end(), ia_name) == names.end()) {
        std::fprintf(stderr, "datperf: no provider named '%s' in the DAT registry (dat.conf entries: %s)\n",
                     ia_name.c_str(), names_text(names).c_str());
        return 1;
    }

    for (int cpu : {opt.server_cpu, opt.client_cpu}) {
        std::string error;
        if (cpu >= 0 && !cpu_usable(cpu, &error)) {
            std::fprintf(stderr, "datperf: %s\n", error.c_str());
            return 1;
        }
    }
    // --server and --connect: --pin N set both CPUs to N, this process's.
    if (opt.role != Role::Loopback && !pin_or_say(opt.server_cpu))
        return 1;
    if (opt.role == Role::Server)
        return run_server(opt, ia_name, -1);

    Peers peers(opt);
    for (const auto &name : opt.compare) {
        auto p = make_peer(name);
        if (!p) {
            std::string known;
            for (const auto &n : peer_names())
                known += (known.empty() ? "" : ", ") + n;
            std::fprintf(stderr, "datperf: unknown peer '%s' (peers: %s)\n", name.c_str(), known.c_str());
            return 2;
        }
        bool used =
            std::any_of(opt.workloads.begin(), opt.workloads.end(), [&](Workload w) { return p->counterpart_of(w); });
        if (!used)
            std::fprintf(stderr, "datperf: %s has no counterpart among the workloads asked for; not run\n",
                         name.c_str());
        peers.list.push_back(std::move(p));
    }

    Report report;
    if (scale) {
        report.scale.fd_limit = fd_limit;
        report.scale.self = opt.scale_self;
        report.scale.idle_s = opt.idle_s;
        report.scale.pingpong_size = scale_pingpong_size(opt);
        report.scale.pingpong_iters = iters_for(opt, Workload::Scale, report.scale.pingpong_size);
        report.scale.pingpong_completion = opt.completion_forced ? opt.completion : Completion::Poll;
    }
    if (opt.role == Role::Client) {
        report.mode = "two hosts";
        if (opt.client_cpu >= 0)
            report.mode += " (this client on CPU " + std::to_string(opt.client_cpu) + ")";
        SessionResults r = run_client(opt, ia_name, opt.host, static_cast<DAT_CONN_QUAL>(opt.port));
        report.info = r.info;
        add_run(&report, r.tests);
    } else {
        report.mode = "one command (server in a child process)";
        if (opt.server_cpu >= 0)
            report.mode = "one command (server in a child process on CPU " + std::to_string(opt.server_cpu) +
                          ", client on CPU " + std::to_string(opt.client_cpu) + ", peers likewise)";
        for (int k = 0; k < opt.runs; ++k) {
            if (opt.progress > 0 && opt.runs > 1) {
                std::fprintf(stderr, "\rdatperf: run %d of %d   ", k + 1, opt.runs);
                std::fflush(stderr);
            }
            SessionResults r = loopback_run(opt, ia_name, peers);
            if (k == 0)
                report.info = r.info;
            add_run(&report, r.tests);
        }
        for (auto &w : report.tests)
            w.peers = peers.results[w.workload];
    }
    combine(&report);

    if (opt.json)
        write_json(stdout, report);
    else if (opt.csv)
        write_csv(stdout, report);
    else
        print_table(stdout, report);
    std::fflush(stdout);
    bool ok = true;
    if (!opt.json_path.empty())
        ok &= write_file(opt.json_path, report, write_json);
    if (!opt.csv_path.empty())
        ok &= write_file(opt.csv_path, report, write_csv);
    if (!opt.plot_path.empty()) {
        std::string error;
        if (!write_plot(opt.plot_path, report, &error)) {
            std::fprintf(stderr, "datperf: --plot %s: %s\n", opt.plot_path.c_str(), error.c_str());
            ok = false;
        }
    }
    return ok ? 0 : 1;
}

} // namespace
} // namespace datperf

int main(int argc, char **argv) {
    using namespace datperf;
    Options opt;
    int code = 0;
    if (!parse_options(argc, argv, &opt, &code))
        return code;
    if (opt.progress < 0)
        opt.progress = isatty(STDERR_FILENO) ? 1 : 0;
    try {
        return run(opt);
    } catch (const Reported &) {
    } catch (const std::exception &e) {
        std::fprintf(stderr, "datperf: %s\n", e.what());
    }
    return 1;
}
