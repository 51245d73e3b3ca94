// SPDX-License-Identifier: BSD-3-Clause
// dat.conf ia_params as our plugins write them: blank-separated key=value
// words (each plugin's README names its keys).
#pragma once

#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace dat2::kit {

using ParamList = std::vector<std::pair<std::string, std::string>>;

// The key=value words of `text`, in order; false (and `error`) for a word
// that is not key=value.
inline bool split_params(const std::string &text, ParamList &out, std::string &error) {
    std::istringstream in(text);
    for (std::string word; in >> word;) {
        auto eq = word.find('=');
        if (eq == std::string::npos || eq == 0) {
            error = "'" + word + "' is not key=value";
            return false;
        }
        out.emplace_back(word.substr(0, eq), word.substr(eq + 1));
    }
    return true;
}

} // namespace dat2::kit
