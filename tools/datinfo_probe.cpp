// SPDX-License-Identifier: BSD-3-Clause
#include "datinfo_probe.hpp"

#include <dat2/udat.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <dirent.h>
#include <poll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace datinfo {

namespace {

constexpr DAT_TIMEOUT kWaitUs = 5 * 1000 * 1000;

std::string dat_text(DAT_RETURN r) {
    const char *major = "", *minor = "";
    if (dat_strerror(r, &major, &minor) != DAT_SUCCESS)
        return "DAT_RETURN " + std::to_string(r);
    return std::string(major) + (minor && *minor ? std::string(" ") + minor : "");
}

// The child's side: each step is announced on `fd` before it begins, so
// that the parent can say where a crash or a hang happened.
class Check {
public:
    explicit Check(int fd) : fd_(fd) {}

    void stage(const char *name) { say("stage " + std::string(name)); }
    void say(const std::string &line) {
        std::string l = line + "\n";
        ssize_t ignored = ::write(fd_, l.data(), l.size());
        (void)ignored;
    }

private:
    int fd_;
};

struct Side {
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL, cr_evd = DAT_HANDLE_NULL, conn_evd = DAT_HANDLE_NULL,
                   dto_evd = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
    DAT_LMR_CONTEXT lmr_context = 0;
    char buffer[64] = {};

    DAT_RETURN open(const std::string &name) {
        DAT_RETURN r = dat_ia_open(const_cast<char *>(name.c_str()), 8, &async_evd, &ia);
        if (r != DAT_SUCCESS)
            return r;
        if ((r = dat_pz_create(ia, &pz)) != DAT_SUCCESS)
            return r;
        if ((r = dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd)) != DAT_SUCCESS)
            return r;
        if ((r = dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_evd)) != DAT_SUCCESS)
            return r;
        if ((r = dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto_evd)) != DAT_SUCCESS)
            return r;
        if ((r = dat_ep_create(ia, pz, dto_evd, dto_evd, conn_evd, nullptr, &ep)) != DAT_SUCCESS)
            return r;
        DAT_REGION_DESCRIPTION region;
        region.for_va = buffer;
        DAT_RMR_CONTEXT rmr_context = 0;
        DAT_VLEN registered_size = 0;
        DAT_VADDR registered_address = 0;
        return dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, sizeof buffer, pz, DAT_MEM_PRIV_ALL_FLAG,
                              DAT_VA_TYPE_VA, &lmr, &lmr_context, &rmr_context, &registered_size, &registered_address);
    }

    void close() {
        if (ep != DAT_HANDLE_NULL)
            dat_ep_free(ep);
        if (lmr != DAT_HANDLE_NULL)
            dat_lmr_free(lmr);
        for (DAT_EVD_HANDLE e : {dto_evd, conn_evd, cr_evd})
            if (e != DAT_HANDLE_NULL)
                dat_evd_free(e);
        if (pz != DAT_HANDLE_NULL)
            dat_pz_free(pz);
        if (ia != DAT_HANDLE_NULL)
            dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    }

    DAT_LMR_TRIPLET iov() {
        DAT_LMR_TRIPLET t;
        t.lmr_context = lmr_context;
        t.virtual_address = reinterpret_cast<DAT_VADDR>(buffer);
        t.segment_length = sizeof buffer;
        return t;
    }
};

// Waits for one event of the given kind; "" or what came instead.
std::string expect(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want, DAT_EVENT *ev) {
    DAT_COUNT more = 0;
    DAT_RETURN r = dat_evd_wait(evd, kWaitUs, 1, ev, &more);
    if (r != DAT_SUCCESS)
        return "dat_evd_wait: " + dat_text(r);
    if (ev->event_number != want)
        return "unexpected event 0x" + [](unsigned v) {
            char b[16];
            std::snprintf(b, sizeof b, "%x", v);
            return std::string(b);
        }(static_cast<unsigned>(ev->event_number));
    return "";
}

// How long the process's threads ran or waited to run, in ms, summed
// (/proc/self/task/*/schedstat): a thread that spins is runnable the whole
// time however loaded the machine is, where its CPU time shrinks with the
// load (the probe runs beside a build). The CPU time where schedstat is
// missing.
double runnable_ms() {
    double ns = 0;
    bool any = false;
    if (DIR *d = ::opendir("/proc/self/task")) {
        while (dirent *e = ::readdir(d)) {
            if (e->d_name[0] == '.')
                continue;
            const std::string path = std::string("/proc/self/task/") + e->d_name + "/schedstat";
            if (FILE *f = std::fopen(path.c_str(), "r")) {
                unsigned long long on_cpu = 0, waiting = 0;
                if (std::fscanf(f, "%llu %llu", &on_cpu, &waiting) == 2) {
                    ns += static_cast<double>(on_cpu + waiting);
                    any = true;
                }
                std::fclose(f);
            }
        }
        ::closedir(d);
    }
    if (any)
        return ns / 1e6;
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
constexpr int kIdleMs = 300;

// The loopback check proper. Returns "" when it passed, else what failed.
std::string loopback(const std::string &name, Check &check) {
    Side server, client;
    std::string failure;
    auto fail = [&](const char *what, DAT_RETURN r) {
        failure = std::string(what) + ": " + dat_text(r);
        return failure;
    };
    auto run = [&]() -> std::string {
        check.stage("dat_ia_open");
        if (DAT_RETURN r = server.open(name))
            return fail("dat_ia_open and resources", r);
        if (DAT_RETURN r = client.open(name))
            return fail("second dat_ia_open and resources", r);
        check.stage("listen");
        DAT_CONN_QUAL qual = 0;
        DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
        if (DAT_RETURN r = dat_psp_create_any(server.ia, &qual, server.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp))
            return fail("dat_psp_create_any", r);
        DAT_IA_ATTR attr;
        std::memset(&attr, 0, sizeof attr);
        if (DAT_RETURN r = dat_ia_query(server.ia, nullptr, DAT_IA_FIELD_IA_ADDRESS_PTR, &attr, 0, nullptr))
            return fail("dat_ia_query", r);
        if (!attr.ia_address_ptr)
            return "dat_ia_query: the IA has no address";
        check.stage("connect");
        if (DAT_RETURN r = dat_ep_connect(client.ep, attr.ia_address_ptr, qual, kWaitUs, 0, nullptr,
                                          DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG))
            return fail("dat_ep_connect", r);
        check.stage("connection request");
        DAT_EVENT ev;
        std::string what = expect(server.cr_evd, DAT_CONNECTION_REQUEST_EVENT, &ev);
        if (!what.empty())
            return "no connection request: " + what;
        check.stage("accept");
        if (DAT_RETURN r = dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, server.ep, 0, nullptr))
            return fail("dat_cr_accept", r);
        check.stage("connection established");
        if (!(what = expect(server.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, &ev)).empty())
            return "server side not connected: " + what;
        if (!(what = expect(client.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, &ev)).empty())
            return "client side not connected: " + what;
        check.stage("send and receive");
        DAT_LMR_TRIPLET recv_iov = server.iov();
        DAT_DTO_COOKIE cookie;
        cookie.as_64 = 1;
        if (DAT_RETURN r = dat_ep_post_recv(server.ep, 1, &recv_iov, cookie, DAT_COMPLETION_DEFAULT_FLAG))
            return fail("dat_ep_post_recv", r);
        static const char kMessage[] = "datinfo loopback probe";
        std::memcpy(client.buffer, kMessage, sizeof kMessage);
        DAT_LMR_TRIPLET send_iov = client.iov();
        send_iov.segment_length = sizeof kMessage;
        cookie.as_64 = 2;
        if (DAT_RETURN r = dat_ep_post_send(client.ep, 1, &send_iov, cookie, DAT_COMPLETION_DEFAULT_FLAG))
            return fail("dat_ep_post_send", r);
        if (!(what = expect(client.dto_evd, DAT_DTO_COMPLETION_EVENT, &ev)).empty())
            return "no send completion: " + what;
        if (ev.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS)
            return "the send completed in error";
        if (!(what = expect(server.dto_evd, DAT_DTO_COMPLETION_EVENT, &ev)).empty())
            return "no receive completion: " + what;
        if (ev.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS ||
            ev.event_data.dto_completion_event_data.transfered_length != sizeof kMessage ||
            std::memcmp(server.buffer, kMessage, sizeof kMessage) != 0)
            return "the message arrived in error or altered";
        // dat_ep_post_recv(3DAT): a message larger than the receive completes
        // it with DAT_DTO_LENGTH_ERROR. A provider that truncates silently
        // hands MPI a short message as a whole one.
        check.stage("a message larger than the receive");
        recv_iov.segment_length = 4;
        cookie.as_64 = 3;
        if (DAT_RETURN r = dat_ep_post_recv(server.ep, 1, &recv_iov, cookie, DAT_COMPLETION_DEFAULT_FLAG))
            return fail("dat_ep_post_recv", r);
        cookie.as_64 = 4;
        if (DAT_RETURN r = dat_ep_post_send(client.ep, 1, &send_iov, cookie, DAT_COMPLETION_DEFAULT_FLAG))
            return fail("dat_ep_post_send", r);
        if (!(what = expect(server.dto_evd, DAT_DTO_COMPLETION_EVENT, &ev)).empty())
            return "no completion of the receive too small: " + what;
        if (ev.event_data.dto_completion_event_data.status != DAT_DTO_ERR_LOCAL_LENGTH)
            return ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS
                       ? std::string("a message larger than the posted receive completed it successfully, not with "
                                     "DAT_DTO_ERR_LOCAL_LENGTH (the provider truncates it silently)")
                       : "a message larger than the posted receive completed it with status " +
                             std::to_string(ev.event_data.dto_completion_event_data.status) +
                             ", not DAT_DTO_ERR_LOCAL_LENGTH";
        check.stage("disconnect");
        if (DAT_RETURN r = dat_ep_disconnect(client.ep, DAT_CLOSE_GRACEFUL_FLAG))
            return fail("dat_ep_disconnect", r);
        // The send of the message too large may have completed in error and
        // broken the connection (as on InfiniBand) or not: either end is one.
        what = expect(client.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED, &ev);
        if (!what.empty() && ev.event_number != DAT_CONNECTION_EVENT_BROKEN)
            return "client side not disconnected: " + what;
        // An entry whose provider keeps a CPU busy once its connection has
        // ended (libfabric 1.17's net: its queues' wait fds stay readable)
        // would cost every process that opens it a CPU for nothing.
        check.stage("idle after the connection");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const double run0 = runnable_ms();
        std::this_thread::sleep_for(std::chrono::milliseconds(kIdleMs));
        const double busy = runnable_ms() - run0;
        if (busy > kIdleMs / 2.0) {
            char text[160];
            std::snprintf(text, sizeof text,
                          "once its connection ended, the provider kept a thread running or ready to run: %.0f ms "
                          "in %d ms",
                          busy, kIdleMs);
            return text;
        }
        check.stage("close");
        dat_psp_free(psp);
        return "";
    };
    std::string result = run();
    client.close();
    server.close();
    return result;
}

double now_s() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

} // namespace

const char *ProbeResult::kind_name() const {
    switch (kind) {
    case Ok: return "ok";
    case Failed: return "failed";
    case Crashed: return "crashed";
    case TimedOut: return "timed out";
    }
    return "?";
}

std::string ProbeResult::first_log_line() const {
    std::string first;
    std::size_t pos = 0;
    while (pos < log.size()) {
        std::size_t nl = log.find('\n', pos);
        std::string line = log.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
        pos = nl == std::string::npos ? log.size() : nl + 1;
        if (line.compare(0, 5, "dat2:") == 0 || line.compare(0, 5, "dat2[") == 0)
            return line;
        if (first.empty())
            first = line;
    }
    return first;
}

std::string ProbeResult::text() const {
    if (kind == Ok)
        return "ok";
    std::string s = kind_name();
    if (!stage.empty())
        s += " at " + stage;
    if (!detail.empty())
        s += ": " + detail;
    const std::string line = first_log_line();
    if (kind == Failed && !line.empty())
        s += " (" + line + ")";
    return s;
}

ProbeResult probe_in_child(const std::string &ia_name, int timeout_s) {
    ProbeResult res;
    int fds[2], out[2];
    if (::pipe(fds) != 0) {
        res.detail = std::string("pipe: ") + std::strerror(errno);
        return res;
    }
    if (::pipe(out) != 0) {
        res.detail = std::string("pipe: ") + std::strerror(errno);
        ::close(fds[0]);
        ::close(fds[1]);
        return res;
    }
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) {
        res.detail = std::string("fork: ") + std::strerror(errno);
        for (int fd : {fds[0], fds[1], out[0], out[1]})
            ::close(fd);
        return res;
    }
    if (pid == 0) {
        ::close(fds[0]);
        ::close(out[0]);
        ::dup2(out[1], 1);
        ::dup2(out[1], 2);
        ::close(out[1]);
        Check check(fds[1]);
        std::string failure;
        try {
            failure = loopback(ia_name, check);
        } catch (const std::exception &e) {
            failure = std::string("exception: ") + e.what();
        }
        check.say(failure.empty() ? "ok" : "failed " + failure);
        std::fflush(nullptr);
        ::_exit(failure.empty() ? 0 : 1);
    }
    ::close(fds[1]);
    ::close(out[1]);
    std::string got, final_line;
    const double deadline = now_s() + timeout_s;
    bool timed_out = false;
    pollfd p[2] = {{fds[0], POLLIN, 0}, {out[0], POLLIN, 0}};
    while (p[0].fd >= 0 || p[1].fd >= 0) {
        double left = deadline - now_s();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        int n = ::poll(p, 2, static_cast<int>(left * 1000) + 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            continue;
        for (int i = 0; i < 2; ++i) {
            if (p[i].fd < 0 || !p[i].revents)
                continue;
            char buf[4096];
            ssize_t r = ::read(p[i].fd, buf, sizeof buf);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) { // the child exited or closed it
                ::close(p[i].fd);
                p[i].fd = -1;
                continue;
            }
            if (i == 0) {
                got.append(buf, static_cast<std::size_t>(r));
            } else {
                ssize_t ignored = ::write(2, buf, static_cast<std::size_t>(r));
                (void)ignored;
                if (res.log.size() < 65536)
                    res.log.append(buf, static_cast<std::size_t>(r));
            }
        }
    }
    for (const pollfd &q : p)
        if (q.fd >= 0)
            ::close(q.fd);
    // What the child said: "stage X" lines, then "ok" or "failed WHY".
    std::size_t pos = 0;
    while (pos < got.size()) {
        std::size_t nl = got.find('\n', pos);
        std::string line = got.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
        pos = nl == std::string::npos ? got.size() : nl + 1;
        if (line.compare(0, 6, "stage ") == 0)
            res.stage = line.substr(6);
        else
            final_line = line;
    }
    int status = 0;
    if (timed_out) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        res.kind = ProbeResult::TimedOut;
        res.detail = "no answer in " + std::to_string(timeout_s) + " s";
        return res;
    }
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status)) {
        res.kind = ProbeResult::Crashed;
        int sig = WTERMSIG(status);
        res.detail = "signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
    } else if (final_line == "ok" && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        res.kind = ProbeResult::Ok;
        res.stage.clear();
    } else if (final_line.compare(0, 7, "failed ") == 0) {
        res.kind = ProbeResult::Failed;
        res.detail = final_line.substr(7);
    } else {
        // Ended without a verdict: a provider's own fault handler (libfabric
        // installs one) caught a crash and exited, or something called exit.
        res.kind = ProbeResult::Crashed;
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        res.detail = "the process exited (status " + std::to_string(code) + ") in the middle of the check";
        const std::size_t at = res.log.find("terminated with signal ");
        if (at != std::string::npos) {
            const int sig = std::atoi(res.log.c_str() + at + 23);
            res.detail = "signal " + std::to_string(sig) + " (" + strsignal(sig) +
                         "), reported by the provider's fault handler, which exited with status " +
                         std::to_string(code);
        }
    }
    return res;
}

} // namespace datinfo
