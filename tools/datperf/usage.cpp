// SPDX-License-Identifier: BSD-3-Clause
// datperf: what this process uses, from /proc/self and the C library.
#include "usage.hpp"

#include <dirent.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

namespace datperf {

long open_fds() {
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    long n = 0;
    while (dirent *e = readdir(d))
        if (e->d_name[0] != '.')
            ++n;
    closedir(d);
    return n - 1; // the directory's own descriptor
}

double rss_kib() {
    std::ifstream f("/proc/self/statm");
    long size = 0, resident = 0;
    if (!(f >> size >> resident))
        return -1;
    return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / 1024.0;
}

HeapUse heap_use() {
    HeapUse h;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    const struct mallinfo2 m = mallinfo2();
    // uordblks: allocated from the arenas; hblkhd: mmapped blocks (each
    // returned whole when freed); fordblks: free chunks the arenas keep.
    h.in_use_kib = static_cast<double>(m.uordblks + m.hblkhd) / 1024.0;
    h.free_kept_kib = static_cast<double>(m.fordblks) / 1024.0;
#endif
    return h;
}

void trim_heap() {
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
}

std::string raise_fd_limit() {
    rlimit r{};
    if (getrlimit(RLIMIT_NOFILE, &r) != 0)
        return std::string("unknown (getrlimit: ") + std::strerror(errno) + ")";
    auto text = [](rlim_t v) { return v == RLIM_INFINITY ? std::string("unlimited") : std::to_string(v); };
    if (r.rlim_cur == r.rlim_max)
        return text(r.rlim_cur) + " (the hard limit already)";
    const rlim_t was = r.rlim_cur;
    r.rlim_cur = r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &r) != 0)
        return text(was) + " (raising it to the hard limit " + text(r.rlim_max) + " failed: " + std::strerror(errno) +
               ")";
    return "raised from " + text(was) + " to the hard limit " + text(r.rlim_max);
}

double thread_cpu_seconds(pid_t tid) {
    const std::string dir = "/proc/self/task/" + std::to_string(tid);
    {
        std::ifstream f(dir + "/schedstat");
        unsigned long long run_ns = 0;
        if (f >> run_ns)
            return static_cast<double>(run_ns) / 1e9;
    }
    std::ifstream f(dir + "/stat");
    std::string line;
    if (!std::getline(f, line))
        return -1;
    // The fields after the command name, which is in parentheses and may
    // hold anything: state is field 3, utime 14, stime 15.
    auto close = line.rfind(')');
    if (close == std::string::npos)
        return -1;
    std::istringstream rest(line.substr(close + 1));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
        if (i == 14)
            utime = std::strtoull(field.c_str(), nullptr, 10);
        if (i == 15)
            stime = std::strtoull(field.c_str(), nullptr, 10);
    }
    return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

namespace {

double clock_seconds(clockid_t id) {
    timespec ts{};
    clock_gettime(id, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

std::string thread_name(pid_t tid) {
    std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/comm");
    std::string name;
    std::getline(f, name);
    return name;
}

} // namespace

CpuSnapshot CpuSnapshot::take() {
    CpuSnapshot s;
    if (DIR *d = opendir("/proc/self/task")) {
        while (dirent *e = readdir(d)) {
            if (e->d_name[0] == '.')
                continue;
            const auto tid = static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10));
            const double cpu = thread_cpu_seconds(tid);
            if (tid > 0 && cpu >= 0)
                s.threads_.push_back(Thread{tid, thread_name(tid), cpu});
        }
        closedir(d);
    }
    // Read last, next to each other: the process figure leaves out the
    // reading of /proc above.
    s.cpu_s_ = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
    s.wall_s_ = clock_seconds(CLOCK_MONOTONIC);
    return s;
}

double CpuSnapshot::process_pct_since(const CpuSnapshot &earlier) const {
    const double wall = wall_s_ - earlier.wall_s_;
    return wall > 0 ? 100.0 * (cpu_s_ - earlier.cpu_s_) / wall : 0;
}

std::vector<ThreadCpu> CpuSnapshot::threads_since(const CpuSnapshot &earlier) const {
    std::vector<ThreadCpu> out;
    const double wall = wall_s_ - earlier.wall_s_;
    if (wall <= 0)
        return out;
    const pid_t main_tid = getpid();
    for (const auto &t : threads_) {
        auto was = std::find_if(earlier.threads_.begin(), earlier.threads_.end(),
                                [&](const Thread &e) { return e.tid == t.tid; });
        if (was == earlier.threads_.end())
            continue;
        out.push_back(ThreadCpu{t.tid, t.name, t.tid == main_tid, 100.0 * (t.cpu_s - was->cpu_s) / wall});
    }
    std::sort(out.begin(), out.end(), [](const ThreadCpu &a, const ThreadCpu &b) { return a.pct > b.pct; });
    return out;
}

void sleep_for_seconds(double seconds) {
    const double until = clock_seconds(CLOCK_MONOTONIC) + seconds;
    for (;;) {
        const double left = until - clock_seconds(CLOCK_MONOTONIC);
        if (left <= 0)
            return;
        timespec ts{};
        ts.tv_sec = static_cast<time_t>(left);
        ts.tv_nsec = static_cast<long>((left - static_cast<double>(ts.tv_sec)) * 1e9);
        nanosleep(&ts, nullptr);
    }
}

} // namespace datperf
