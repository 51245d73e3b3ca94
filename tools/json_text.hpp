// SPDX-License-Identifier: BSD-3-Clause
// A JSON string literal, for the tools' --json outputs (datinfo, datperf).
#pragma once

#include <cstdio>
#include <string>

namespace dat2::tools {

// `s` quoted and escaped as RFC 8259 asks (quote, backslash, controls).
inline std::string json_quote(const std::string &s)
{
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20) {
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
