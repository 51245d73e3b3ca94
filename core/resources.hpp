// SPDX-License-Identifier: BSD-3-Clause
// What a process has left for transport objects, which no device or
// libfabric provider reports: file descriptors (RLIMIT_NOFILE), memory
// mappings (vm.max_map_count) and pinned memory (RLIMIT_MEMLOCK, unless the
// process has CAP_IPC_LOCK). A plugin measures what one object costs on a
// probe (usage before and after) and reports as dat_ia_query's maximum what
// fits, so that the maximum is reachable (LimitsTest).
#pragma once

#include "dat2/udat.h"

#include <climits>
#include <string>

namespace dat2::kit {

inline constexpr long kUnlimited = LONG_MAX;

struct ProcessUsage {
    long fds = 0, maps = 0, pinned_kb = 0;
    // What an object cost: never negative (another thread may have freed
    // something meanwhile).
    ProcessUsage operator-(const ProcessUsage &o) const;
};

// What the process uses now (/proc/self).
ProcessUsage process_usage();
// What it may use (kUnlimited where nothing limits it).
ProcessUsage process_limits();
// How many objects costing `each` fit in three quarters of what `limit`
// leaves beyond `used` (a quarter stays for connections, listeners and the
// application); at most `cap`, at least 1.
DAT_COUNT objects_within(const ProcessUsage &limit, const ProcessUsage &used, const ProcessUsage &each, DAT_COUNT cap);
// "N fds, N maps, N kB pinned" ("-" for unlimited), for logs.
std::string usage_text(const ProcessUsage &u);

} // namespace dat2::kit
