// SPDX-License-Identifier: BSD-3-Clause
#include "log.hpp"

#include "tunables.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <syslog.h>

namespace dat2::log {

namespace {

struct Config {
    unsigned types = kError;
    unsigned dests = 0; // 0: stderr
};

unsigned parse_mask(const char *s, unsigned fallback) noexcept
{
    if (!s || !*s)
        return fallback;
    char *end = nullptr;
    unsigned long v = std::strtoul(s, &end, 0);
    if (*end != '\0')
        return fallback;
    return static_cast<unsigned>(v);
}

const Config &config() noexcept
{
    static const Config cfg = [] {
        Config c;
        c.types = parse_mask(tunable_value("DAT_DBG_TYPE"), kError);
        // The default, "stderr", is no number: it parses to 0.
        c.dests = parse_mask(tunable_value("DAT_DBG_DEST"), 0) & (kStdout | kSyslog);
        return c;
    }();
    return cfg;
}

} // namespace

bool enabled(unsigned type) noexcept { return (config().types & type) != 0; }
unsigned type_mask() noexcept { return config().types; }
unsigned dest_mask() noexcept { return config().dests; }

void vwrite(unsigned type, const char *fmt, va_list ap) noexcept
{
    const Config &c = config();
    if (!(c.types & type))
        return;
    char line[1024];
    std::vsnprintf(line, sizeof line, fmt, ap);
    // One fputs per line keeps lines from different threads whole.
    char out[1100];
    std::snprintf(out, sizeof out, "dat2: %s%s", line,
                  (line[0] && line[std::strlen(line) - 1] == '\n') ? "" : "\n");
    if (c.dests == 0)
        std::fputs(out, stderr);
    if (c.dests & kStdout) {
        std::fputs(out, stdout);
        std::fflush(stdout);
    }
    if (c.dests & kSyslog)
        ::syslog((type & kError) ? LOG_ERR : LOG_DEBUG, "%s", out + 6);
}

void write(unsigned type, const char *fmt, ...) noexcept
{
    va_list ap;
    va_start(ap, fmt);
    vwrite(type, fmt, ap);
    va_end(ap);
}

} // namespace dat2::log
