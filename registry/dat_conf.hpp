// SPDX-License-Identifier: BSD-3-Clause
// The dat.conf(5) grammar: eight whitespace-separated fields per record,
// double quotes group, backslash escapes inside quotes, '#' at the start of a
// token comments out the rest of the line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dat2 {

struct ConfEntry {
    std::string ia_name;
    char api_kind = 'u'; // 'u' user, 'k' kernel
    std::uint32_t api_major = 0;
    std::uint32_t api_minor = 0;
    bool thread_safe = false;
    bool is_default = false;
    std::string library;
    std::string provider_id;
    std::uint32_t provider_major = 0;
    std::uint32_t provider_minor = 0;
    std::string ia_params;
    std::string platform_params;
    // Where the record came from, for diagnostics and datinfo.
    std::string file;
    unsigned line = 0;

    // Whether the registry may load it: user-level and marked default.
    bool loadable() const { return api_kind == 'u' && is_default; }
};

struct ConfDiagnostic {
    std::string file;
    unsigned line = 0;
    std::string field; // "ia_name", "api_version", ... or "line"
    std::string message;

    std::string to_string() const;
};

struct ConfParseResult {
    std::vector<ConfEntry> entries;
    std::vector<ConfDiagnostic> diagnostics;
};

// Parses the text of one dat.conf. Never throws on any byte sequence except
// std::bad_alloc; a malformed record is skipped with one diagnostic.
ConfParseResult parse_dat_conf(std::string_view text, const std::string &file_name);

// The names of the eight fields, in order.
extern const char *const kConfFieldNames[8];

} // namespace dat2
