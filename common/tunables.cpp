// SPDX-License-Identifier: BSD-3-Clause
#include "tunables.hpp"

#include <cassert>
#include <cstdlib>
#include <cstring>

namespace dat2 {

namespace {
const Tunable kTunables[] = {
    {"DAT_OVERRIDE", nullptr,
     "Path of the dat.conf to use instead of the built-in search (build tree, then sysconfdir, "
     "then /etc/dat.conf). When set, no other file is read."},
    {"DAT_DBG_TYPE", "0x1",
     "Bit mask of log classes: 0x1 errors, 0x2 generic, 0x4 static registry, 0x8 dynamic "
     "registry, 0x10 provider API, 0x20 consumer API, 0xff all."},
    {"DAT_DBG_DEST", "stderr",
     "Where log lines go: unset = stderr, 1 = stdout, 2 = syslog, 3 = stdout and syslog."},
    {nullptr, nullptr, nullptr},
};
} // namespace

const Tunable *tunables() noexcept { return kTunables; }

const char *tunable_value(const char *name) noexcept
{
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
