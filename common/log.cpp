// SPDX-License-Identifier: BSD-3-Clause
#include "log.hpp"

#include "tunables.hpp"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <sys/syscall.h>
#include <sys/time.h>
#include <syslog.h>
#include <unistd.h>

namespace dat2::log {

namespace {

enum Prefix : unsigned { kPid = 0x1, kTid = 0x2, kTime = 0x4 };

struct Config {
    unsigned types = kError;
    unsigned dests = 0;  // 0: stderr
    unsigned prefix = 0; // Prefix bits
};

struct Name {
    const char *name;
    unsigned bits;
};

// Level names (as libfabric's FI_LOG_LEVEL) and class names, for
// DAT_DBG_TYPE beside OFED's number. Errors are the only warnings we have.
constexpr Name kTypeNames[] = {
    {"none", 0},
    {"off", 0},
    {"warn", kError},
    {"error", kError},
    {"info", kError | kGeneric | kStaticRegistry | kDynamicRegistry},
    {"debug", kAll},
    {"all", kAll},
    {"generic", kGeneric},
    {"static", kStaticRegistry},
    {"dynamic", kDynamicRegistry},
    {"registry", kStaticRegistry | kDynamicRegistry},
    {"provider", kProviderApi},
    {"consumer", kConsumerApi},
};

constexpr Name kPrefixNames[] = {
    {"none", 0}, {"pid", kPid}, {"tid", kTid}, {"time", kTime}, {"all", kPid | kTid | kTime},
};

bool lookup(const Name *table, std::size_t n, const std::string &word, unsigned *bits) {
    for (std::size_t i = 0; i < n; ++i)
        if (word == table[i].name) {
            *bits = table[i].bits;
            return true;
        }
    return false;
}

// "0x3", "debug", "error,static", "warn|registry": a number or names joined
// by ',', '|' or '+'. Anything else keeps the fallback, and says so.
template <std::size_t N>
unsigned parse_words(const char *variable, const char *s, const Name (&table)[N], unsigned fallback,
                     bool numbers) noexcept {
    if (!s || !*s)
        return fallback;
    if (numbers && std::isdigit(static_cast<unsigned char>(*s))) {
        char *end = nullptr;
        unsigned long v = std::strtoul(s, &end, 0);
        if (*end == '\0')
            return static_cast<unsigned>(v);
    } else {
        try {
            unsigned bits = 0;
            std::string word;
            bool ok = true;
            for (const char *p = s;; ++p) {
                if (*p == ',' || *p == '|' || *p == '+' || *p == '\0') {
                    unsigned one = 0;
                    if (word.empty() || !lookup(table, N, word, &one))
                        ok = false;
                    bits |= one;
                    word.clear();
                    if (*p == '\0')
                        break;
                } else {
                    word += static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
                }
            }
            if (ok)
                return bits;
        } catch (...) {
        }
    }
    std::string names;
    for (const Name &n : table)
        names += std::string(names.empty() ? "" : ", ") + n.name;
    std::fprintf(stderr, "dat2: %s='%s' is not understood (%s%s); using the default\n", variable, s,
                 numbers ? "a number or names: " : "names: ", names.c_str());
    return fallback;
}

const Config &config() noexcept {
    static const Config cfg = [] {
        Config c;
        c.types = parse_words("DAT_DBG_TYPE", tunable_value("DAT_DBG_TYPE"), kTypeNames, kError, true);
        // The default, "stderr", is no number: it parses to 0.
        const char *dest = tunable_value("DAT_DBG_DEST");
        char *end = nullptr;
        unsigned long d = dest ? std::strtoul(dest, &end, 0) : 0;
        c.dests = (end && *end == '\0') ? static_cast<unsigned>(d) & (kStdout | kSyslog) : 0;
        c.prefix = parse_words("DAT_DBG_PREFIX", tunable_value("DAT_DBG_PREFIX"), kPrefixNames, 0, false);
        return c;
    }();
    return cfg;
}

// "dat2: ", or with DAT_DBG_PREFIX "dat2[2024-05-01 12:00:00.123456 pid 42 tid 43]: ".
std::string prefix_text(unsigned prefix) {
    std::string p = "dat2";
    if (prefix == 0)
        return p + ": ";
    p += '[';
    char buf[64];
    if (prefix & kTime) {
        timeval tv;
        ::gettimeofday(&tv, nullptr);
        tm local;
        ::localtime_r(&tv.tv_sec, &local);
        std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &local);
        std::snprintf(buf + n, sizeof buf - n, ".%06ld", static_cast<long>(tv.tv_usec));
        p += buf;
    }
    if (prefix & kPid) {
        std::snprintf(buf, sizeof buf, "%spid %ld", p.size() > 5 ? " " : "", static_cast<long>(::getpid()));
        p += buf;
    }
    if (prefix & kTid) {
        std::snprintf(buf, sizeof buf, "%stid %ld", p.size() > 5 ? " " : "", static_cast<long>(::syscall(SYS_gettid)));
        p += buf;
    }
    return p + "]: ";
}

} // namespace

bool enabled(unsigned type) noexcept { return (config().types & type) != 0; }
unsigned type_mask() noexcept { return config().types; }
unsigned dest_mask() noexcept { return config().dests; }

void vwrite(unsigned type, const char *fmt, va_list ap) noexcept {
    const Config &c = config();
    if (!(c.types & type))
        return;
    // Any length: formatted once into a small buffer, again into one that
    // fits when it did not.
    va_list again;
    va_copy(again, ap);
    try {
        char small[512];
        int n = std::vsnprintf(small, sizeof small, fmt, ap);
        std::string message;
        if (n < 0) {
            message = "(unprintable log message)";
        } else if (static_cast<std::size_t>(n) < sizeof small) {
            message.assign(small, static_cast<std::size_t>(n));
        } else {
            message.resize(static_cast<std::size_t>(n) + 1);
            std::vsnprintf(&message[0], message.size(), fmt, again);
            message.resize(static_cast<std::size_t>(n));
        }
        if (message.empty() || message.back() != '\n')
            message += '\n';
        const std::string head = prefix_text(c.prefix);
        // One write per line keeps lines from different threads and
        // processes whole.
        const std::string line = head + message;
        if (c.dests == 0)
            std::fwrite(line.data(), 1, line.size(), stderr);
        if (c.dests & kStdout) {
            std::fwrite(line.data(), 1, line.size(), stdout);
            std::fflush(stdout);
        }
        if (c.dests & kSyslog)
            ::syslog((type & kError) ? LOG_ERR : LOG_DEBUG, "%s", line.c_str() + head.size());
    } catch (...) {
        // Out of memory: the message is lost, the caller is not.
    }
    va_end(again);
}

void write(unsigned type, const char *fmt, ...) noexcept {
    va_list ap;
    va_start(ap, fmt);
    vwrite(type, fmt, ap);
    va_end(ap);
}

} // namespace dat2::log
