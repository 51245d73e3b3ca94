// SPDX-License-Identifier: BSD-3-Clause
// datperf: what this process uses, read from /proc/self and the C library:
// CPU time (the whole process, and each thread), open descriptors,
// resident memory, the malloc heap. The scale workload takes these figures
// with N connections held, and while the process sleeps.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace datperf {

// Open descriptors (/proc/self/fd, the directory's own not counted); -1
// when it cannot be read.
long open_fds();
// Resident set size in KiB (/proc/self/statm); -1 when it cannot be read.
double rss_kib();

// The malloc heap (glibc's mallinfo2): bytes handed out and not freed, and
// bytes free but kept by malloc (not returned to the kernel). -1 each
// where the C library does not say.
struct HeapUse {
    double in_use_kib = -1;
    double free_kept_kib = -1;
};
HeapUse heap_use();
// Asks malloc to give back what it keeps free (glibc malloc_trim(0)):
// whether the resident memory that remains was only malloc's to return.
void trim_heap();

// Limits on descriptors: RLIMIT_NOFILE raised to its hard limit. Returns
// what was done, for the reports: "raised from 1024 to 524288" or "524288
// (already the hard limit)".
std::string raise_fd_limit();

// One thread's CPU over an interval.
struct ThreadCpu {
    pid_t tid = 0;
    std::string name;  // /proc/self/task/TID/comm
    bool main = false; // the process's first thread
    double pct = 0;    // of one CPU, over the interval
};

// CPU time of the whole process (every thread, those that ended included)
// and of each thread, taken at one moment.
class CpuSnapshot {
public:
    static CpuSnapshot take();
    // The process's CPU between `earlier` and this, in % of one CPU over
    // the wall time between them.
    double process_pct_since(const CpuSnapshot &earlier) const;
    // Each thread's, busiest first (threads alive at both moments).
    std::vector<ThreadCpu> threads_since(const CpuSnapshot &earlier) const;

private:
    struct Thread {
        pid_t tid;
        std::string name;
        double cpu_s;
    };
    double wall_s_ = 0, cpu_s_ = 0;
    std::vector<Thread> threads_;
};

// A thread's CPU seconds from /proc/self/task/TID: schedstat's run time in
// nanoseconds where the kernel keeps it, else stat's utime + stime in
// clock ticks. -1 when neither can be read. (Exposed for the tests.)
double thread_cpu_seconds(pid_t tid);

// Sleeps `seconds` of wall time (nanosleep, resumed after signals).
void sleep_for_seconds(double seconds);

} // namespace datperf
