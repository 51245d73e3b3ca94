// SPDX-License-Identifier: BSD-3-Clause
// A JSON string literal, for the tools' --json outputs (datinfo, datperf).
#pragma once

#include <cstdio>
#include <string>

namespace dat2::tools {

// Whether `s` is well-formed UTF-8 (JSON text must be).
inline bool valid_utf8(const std::string &s) {
    for (std::size_t i = 0; i < s.size();) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        std::size_t n = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xe ? 2 : (c >> 3) == 0x1e ? 3 : 9;
        if (n == 9 || i + n >= s.size() + (n ? 0 : 1))
            return false;
        for (std::size_t k = 1; k <= n; ++k)
            if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2)
                return false;
        i += n + 1;
    }
    return true;
}

// `s` quoted and escaped as RFC 8259 asks (quote, backslash, controls).
// Bytes of a string that is not UTF-8 (a provider's name field may hold
// anything) are escaped one by one as if Latin-1, so the output stays JSON.
inline std::string json_quote(const std::string &s) {
    const bool utf8 = valid_utf8(s);
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20 || (c >= 0x80 && !utf8)) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out += static_cast<char>(c);
            }
        }
    }
    return out + "\"";
}

} // namespace dat2::tools
