// SPDX-License-Identifier: BSD-3-Clause
// libfabric's shm names an endpoint's region /dev/shm/<pid>:<domain>:<ep>
// and refuses to enable an endpoint whose region exists (EBUSY). A process
// killed before it closed its endpoints leaves its regions; once its pid is
// reused, the new process finds them named after itself. Before a process
// opens its first shm endpoint, any region named after its pid is a dead
// process's: it goes. Header-only: the ofi plugin and datperf-fi-bw (which
// links nothing of ours) both call it.
#pragma once

#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace dat2 {

// Calls `removed` with the name of each region it unlinked.
template <class Removed> void remove_shm_regions_of_a_former_pid(Removed &&removed) {
    DIR *dir = ::opendir("/dev/shm");
    if (!dir)
        return;
    const std::string prefix = std::to_string(::getpid()) + ":";
    while (const dirent *e = ::readdir(dir)) {
        const char *n = e->d_name;
        if (std::strncmp(n, prefix.c_str(), prefix.size()) != 0)
            continue;
        int dom = -1, ep = -1, end = 0;
        if (std::sscanf(n + prefix.size(), "%d:%d%n", &dom, &ep, &end) != 2 || n[prefix.size() + end] != 0)
            continue;
        if (::shm_unlink(n) == 0)
            removed(n);
    }
    ::closedir(dir);
}

} // namespace dat2
