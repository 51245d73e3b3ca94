// SPDX-License-Identifier: BSD-3-Clause
#include "dat_conf.hpp"

#include <dat2/dat.h>

#include <cctype>
#include <limits>

namespace dat2 {

const char *const kConfFieldNames[8] = {
    "ia_name",      "api_version",      "thread_safety", "default_section",
    "library_path", "provider_version", "ia_params",     "platform_params",
};

std::string ConfDiagnostic::to_string() const {
    std::string s = file + ":" + std::to_string(line) + ": ";
    if (!field.empty())
        s += "field '" + field + "': ";
    return s + message;
}

namespace {

struct Token {
    std::string text;
    bool quoted = false;
};

// Splits one line into tokens. Returns false with `error` set on an
// unterminated quote or a dangling escape.
bool tokenize(std::string_view line, std::vector<Token> &out, std::string &error) {
    std::size_t i = 0;
    const std::size_t n = line.size();
    auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; };
    while (i < n) {
        while (i < n && is_space(line[i]))
            ++i;
        if (i >= n || line[i] == '#')
            return true; // comment runs to the end of the line
        Token tok;
        // A token is a run of unquoted characters and quoted groups:
        // "a b"c is one token 'a bc', as a shell would read it.
        while (i < n && !is_space(line[i])) {
            char c = line[i];
            if (c == '"') {
                tok.quoted = true;
                ++i;
                bool closed = false;
                while (i < n) {
                    char q = line[i++];
                    if (q == '"') {
                        closed = true;
                        break;
                    }
                    if (q == '\\') {
                        if (i >= n) {
                            error = "backslash at the end of the line inside a quoted field";
                            return false;
                        }
                        tok.text += line[i++];
                        continue;
                    }
                    tok.text += q;
                }
                if (!closed) {
                    error = "unterminated double quote";
                    return false;
                }
            } else {
                tok.text += c;
                ++i;
            }
        }
        out.push_back(std::move(tok));
    }
    return true;
}

bool parse_uint(std::string_view s, std::uint32_t &value) {
    if (s.empty() || s.size() > 9)
        return false;
    std::uint32_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9')
            return false;
        v = v * 10 + static_cast<std::uint32_t>(c - '0');
    }
    value = v;
    return true;
}

// "MAJOR.MINOR" with both decimal.
bool parse_major_minor(std::string_view s, std::uint32_t &major, std::uint32_t &minor) {
    std::size_t dot = s.find('.');
    if (dot == std::string_view::npos)
        return false;
    return parse_uint(s.substr(0, dot), major) && parse_uint(s.substr(dot + 1), minor);
}

bool has_control_char(const std::string &s) {
    for (unsigned char c : s)
        if (c < 0x20 || c == 0x7f)
            return true;
    return false;
}

} // namespace

ConfParseResult parse_dat_conf(std::string_view text, const std::string &file_name) {
    ConfParseResult result;
    unsigned line_no = 0;
    std::size_t pos = 0;
    std::vector<Token> tokens;
    auto diag = [&](const char *field, std::string msg) {
        result.diagnostics.push_back({file_name, line_no, field ? field : "", std::move(msg)});
    };

    while (pos <= text.size()) {
        std::size_t eol = text.find('\n', pos);
        if (eol == std::string_view::npos)
            eol = text.size();
        std::string_view line = text.substr(pos, eol - pos);
        pos = eol + 1;
        ++line_no;
        if (line.empty()) {
            if (eol == text.size())
                break;
            continue;
        }

        tokens.clear();
        std::string error;
        if (line.find('\0') != std::string_view::npos) {
            diag(nullptr, "line contains a NUL byte; record skipped");
            continue;
        }
        if (!tokenize(line, tokens, error)) {
            diag(nullptr, error + "; record skipped");
            continue;
        }
        if (tokens.empty())
            continue;
        if (tokens.size() < 8) {
            diag(kConfFieldNames[tokens.size()],
                 "missing: a record has 8 fields (ia_name api_version thread_safety "
                 "default_section library_path provider_version ia_params platform_params), "
                 "this one has " +
                     std::to_string(tokens.size()) + "; record skipped");
            continue;
        }
        if (tokens.size() > 8) {
            diag(nullptr, "unexpected text after the 8th field: '" + tokens[8].text +
                              "' (quote a field that contains spaces); record skipped");
            continue;
        }

        ConfEntry e;
        e.file = file_name;
        e.line = line_no;

        // 1. ia_name
        e.ia_name = tokens[0].text;
        if (e.ia_name.empty() || has_control_char(e.ia_name)) {
            diag(kConfFieldNames[0], "expected a non-empty name without control characters");
            continue;
        }
        if (e.ia_name.size() >= DAT_NAME_MAX_LENGTH) {
            diag(kConfFieldNames[0], "name is " + std::to_string(e.ia_name.size()) + " bytes, expected fewer than " +
                                         std::to_string(DAT_NAME_MAX_LENGTH));
            continue;
        }
        // 2. api version: [u|k]MAJOR.MINOR
        const std::string &api = tokens[1].text;
        if (api.size() < 4 || (api[0] != 'u' && api[0] != 'k') ||
            !parse_major_minor(std::string_view(api).substr(1), e.api_major, e.api_minor)) {
            diag(kConfFieldNames[1], "expected [u|k]MAJOR.MINOR (for example u2.0), got '" + api + "'");
            continue;
        }
        e.api_kind = api[0];
        // 3. thread safety
        if (tokens[2].text == "threadsafe")
            e.thread_safe = true;
        else if (tokens[2].text == "nonthreadsafe")
            e.thread_safe = false;
        else {
            diag(kConfFieldNames[2], "expected 'threadsafe' or 'nonthreadsafe', got '" + tokens[2].text + "'");
            continue;
        }
        // 4. default section
        if (tokens[3].text == "default")
            e.is_default = true;
        else if (tokens[3].text == "nondefault")
            e.is_default = false;
        else {
            diag(kConfFieldNames[3], "expected 'default' or 'nondefault', got '" + tokens[3].text + "'");
            continue;
        }
        // 5. library
        e.library = tokens[4].text;
        if (e.library.empty() || has_control_char(e.library)) {
            diag(kConfFieldNames[4], "expected a library file name or path");
            continue;
        }
        // 6. provider version: id.MAJOR.MINOR; the id may itself contain dots.
        {
            const std::string &pv = tokens[5].text;
            std::size_t last = pv.rfind('.');
            std::size_t mid = last == std::string::npos || last == 0 ? std::string::npos : pv.rfind('.', last - 1);
            if (mid == std::string::npos || mid == 0 ||
                !parse_uint(std::string_view(pv).substr(mid + 1, last - mid - 1), e.provider_major) ||
                !parse_uint(std::string_view(pv).substr(last + 1), e.provider_minor)) {
                diag(kConfFieldNames[5], "expected ID.MAJOR.MINOR (for example dapl.2.0), got '" + pv + "'");
                continue;
            }
            e.provider_id = pv.substr(0, mid);
        }
        // 7, 8. parameters: free text, passed to the provider as is.
        e.ia_params = tokens[6].text;
        e.platform_params = tokens[7].text;
        result.entries.push_back(std::move(e));
    }
    return result;
}

} // namespace dat2
