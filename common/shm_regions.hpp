// SPDX-License-Identifier: BSD-3-Clause
// libfabric's shm names an endpoint's region /dev/shm/<pid>:<domain>:<ep>
// and refuses to enable an endpoint whose region exists (EBUSY). A process
// killed before it closed its endpoints leaves its regions: each holds its
// memory until someone removes it, and once the pid is reused, the new
// process finds them named after itself. Before a process opens its first
// shm endpoint, a region named after its own pid or after a pid no process
// has (kill(2): ESRCH) is a dead process's: it goes. A live process's
// regions stay, whoever owns them; /dev/shm's sticky bit keeps other users'
// out of reach anyway.
// Header-only: the ofi plugin and datperf-fi-bw (which links nothing of
// ours) both call it.
#pragma once

#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <limits>
#include <string>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

namespace dat2 {

// Calls `removed` with the name of each region it unlinked.
template <class Removed> void remove_shm_regions_of_dead_processes(Removed &&removed) {
    DIR *dir = ::opendir("/dev/shm");
    if (!dir)
        return;
    const pid_t self = ::getpid();
    while (const dirent *e = ::readdir(dir)) {
        const char *n = e->d_name;
        // Only <digits>:<digits>:<digits>, and a pid a process could have:
        // kill() of 0 or of a negative number would ask about groups.
        long pid = 0;
        int dom = -1, ep = -1, end = 0;
        if (!std::isdigit(static_cast<unsigned char>(n[0])) ||
            std::sscanf(n, "%ld:%d:%d%n", &pid, &dom, &ep, &end) != 3 || n[end] != 0 || pid <= 0 ||
            pid > std::numeric_limits<pid_t>::max() || dom < 0 || ep < 0)
            continue;
        const bool dead = pid == self || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH);
        if (dead && ::shm_unlink(n) == 0)
            removed(n);
    }
    ::closedir(dir);
}

} // namespace dat2
