// SPDX-License-Identifier: BSD-3-Clause
#include "tunables.hpp"

#include <cassert>
#include <cstdlib>
#include <cstring>

namespace dat2 {

namespace {
const Tunable kTunables[] = {
    {"DAT_OVERRIDE", nullptr,
     "Path of the dat.conf to use instead of the built-in search (beside libdat2, then "
     "<sysconfdir>/dat2/dat.conf, <sysconfdir>/dat.conf and /etc/dat.conf). When set, no other "
     "file is read."},
    {"DAT_DBG_TYPE", "0x1",
     "What is logged: a bit mask (0x1 errors, 0x2 generic, 0x4 static registry, 0x8 dynamic "
     "registry, 0x10 provider API, 0x20 consumer API, 0xff all) or names joined by ',': warn "
     "(errors), info (errors and the registries), debug (all), none, or the classes error, "
     "generic, static, dynamic, registry, provider, consumer."},
    {"DAT_DBG_DEST", "stderr", "Where log lines go: unset = stderr, 1 = stdout, 2 = syslog, 3 = stdout and syslog."},
    {"DAT_DBG_PREFIX", "none",
     "What each log line starts with besides 'dat2': names joined by ',' of pid, tid, time "
     "(microseconds), all; for telling apart the lines of several processes or threads."},
    {nullptr, nullptr, nullptr},
};
} // namespace

const Tunable *tunables() noexcept { return kTunables; }

const char *tunable_value(const char *name) noexcept {
    for (const Tunable *t = kTunables; t->name; ++t) {
        if (std::strcmp(t->name, name) == 0) {
            const char *v = std::getenv(name);
            return v ? v : t->default_value;
        }
    }
    assert(!"undeclared tunable");
    return nullptr;
}

} // namespace dat2
