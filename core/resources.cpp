// SPDX-License-Identifier: BSD-3-Clause
// Process resources for transport objects (resources.hpp).
#include "resources.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

namespace dat2::kit {

ProcessUsage ProcessUsage::operator-(const ProcessUsage &o) const {
    return {std::max(0L, fds - o.fds), std::max(0L, maps - o.maps), std::max(0L, pinned_kb - o.pinned_kb)};
}

namespace {

long count_fds() {
    long n = 0;
    if (DIR *d = ::opendir("/proc/self/fd")) {
        while (const dirent *e = ::readdir(d))
            n += e->d_name[0] != '.';
        ::closedir(d);
        --n; // the directory's own descriptor
    }
    return n;
}

long count_lines(const char *path) {
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    long n = 0;
    char buf[16384];
    for (ssize_t got; (got = ::read(fd, buf, sizeof buf)) > 0;)
        n += std::count(buf, buf + got, '\n');
    ::close(fd);
    return n;
}

// A field of /proc/self/status ("VmPin:", "CapEff:") as its text.
std::string status_field(const char *key) {
    FILE *f = std::fopen("/proc/self/status", "re");
    if (!f)
        return {};
    char line[256];
    std::string value;
    const std::size_t len = std::strlen(key);
    while (std::fgets(line, sizeof line, f))
        if (std::strncmp(line, key, len) == 0) {
            value = line + len;
            break;
        }
    std::fclose(f);
    return value;
}

} // namespace

ProcessUsage process_usage() {
    return {count_fds(), count_lines("/proc/self/maps"), std::strtol(status_field("VmPin:").c_str(), nullptr, 10)};
}

ProcessUsage process_limits() {
    ProcessUsage u{kUnlimited, kUnlimited, kUnlimited};
    rlimit r{};
    if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
        u.fds = static_cast<long>(std::min<rlim_t>(r.rlim_cur, kUnlimited));
    if (FILE *f = std::fopen("/proc/sys/vm/max_map_count", "re")) {
        long v = 0;
        if (std::fscanf(f, "%ld", &v) == 1 && v > 0)
            u.maps = v;
        std::fclose(f);
    }
    constexpr unsigned long long kCapIpcLock = 1ull << 14;
    const bool can_lock = std::strtoull(status_field("CapEff:").c_str(), nullptr, 16) & kCapIpcLock;
    if (!can_lock && ::getrlimit(RLIMIT_MEMLOCK, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
        u.pinned_kb = static_cast<long>(std::min<rlim_t>(r.rlim_cur / 1024, kUnlimited));
    return u;
}

// How many objects costing `each` fit in three quarters of what the process
// has free (a quarter stays for connections, listeners and the
// application), at most `cap`.
DAT_COUNT objects_within(const ProcessUsage &limit, const ProcessUsage &used, const ProcessUsage &each, DAT_COUNT cap) {
    long n = cap;
    auto fit = [&n](long lim, long in_use, long per) {
        if (per > 0 && lim != kUnlimited)
            n = std::min(n, (lim > in_use ? lim - in_use : 0) / 4 * 3 / per);
    };
    fit(limit.fds, used.fds, each.fds);
    fit(limit.maps, used.maps, each.maps);
    fit(limit.pinned_kb, used.pinned_kb, each.pinned_kb);
    return static_cast<DAT_COUNT>(std::max(1L, n));
}

std::string usage_text(const ProcessUsage &u) {
    auto one = [](long v) { return v == kUnlimited ? std::string("-") : std::to_string(v); };
    return one(u.fds) + " fds, " + one(u.maps) + " maps, " + one(u.pinned_kb) + " kB pinned";
}

} // namespace dat2::kit
