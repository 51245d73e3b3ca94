// SPDX-License-Identifier: BSD-3-Clause
// One logging facility for libdat2 and the tools, compatible with OFED's
// DAT_DBG_TYPE / DAT_DBG_DEST variables.
#pragma once

#include <cstdarg>

namespace dat2::log {

// Bits of DAT_DBG_TYPE, with the values OFED's registry gives them.
enum Type : unsigned {
    kError = 0x01, // always on unless DAT_DBG_TYPE clears it
    kGeneric = 0x02,
    kStaticRegistry = 0x04,
    kDynamicRegistry = 0x08,
    kProviderApi = 0x10,
    kConsumerApi = 0x20,
    kAll = 0xff,
};

// Where messages go. OFED wrote to stdout; we write to stderr unless the
// user asks for stdout (DAT_DBG_DEST=1) or syslog (2); 3 means both.
enum Dest : unsigned { kStdout = 0x1, kSyslog = 0x2 };

bool enabled(unsigned type) noexcept;
void write(unsigned type, const char *fmt, ...) noexcept __attribute__((format(printf, 2, 3)));
void vwrite(unsigned type, const char *fmt, va_list ap) noexcept;

// The mask and destination in force, for datinfo.
unsigned type_mask() noexcept;
unsigned dest_mask() noexcept;

} // namespace dat2::log

#define DAT2_LOG(type, ...)                                                                                            \
    do {                                                                                                               \
        if (::dat2::log::enabled(type))                                                                                \
            ::dat2::log::write((type), __VA_ARGS__);                                                                   \
    } while (0)
#define DAT2_ERR(...) DAT2_LOG(::dat2::log::kError, __VA_ARGS__)
