// SPDX-License-Identifier: BSD-3-Clause
#include "names.hpp"

#include <algorithm>
#include <cctype>

namespace dat2 {

namespace {

std::string lower(std::string s) {
    for (char &c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// Optimal string alignment distance (Levenshtein plus adjacent swaps).
std::size_t distance(const std::string &a, const std::string &b) {
    const std::size_t n = a.size(), m = b.size();
    std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
    for (std::size_t i = 0; i <= n; ++i)
        d[i][0] = i;
    for (std::size_t j = 0; j <= m; ++j)
        d[0][j] = j;
    for (std::size_t i = 1; i <= n; ++i)
        for (std::size_t j = 1; j <= m; ++j) {
            std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[n][m];
}

} // namespace

std::string closest_name(const std::string &name, const std::vector<std::string> &known) {
    if (name.empty())
        return "";
    const std::string typed = lower(name);
    const std::size_t limit = std::max<std::size_t>(2, typed.size() / 4);
    std::string best;
    std::size_t best_distance = limit + 1;
    for (const std::string &k : known) {
        const std::string candidate = lower(k);
        if (candidate == typed)
            continue;
        std::size_t dist = distance(typed, candidate);
        // "tcp" for "ofi-tcp": a name that contains what was typed.
        if (dist > limit && typed.size() >= 3 && candidate.find(typed) != std::string::npos)
            dist = limit;
        if (dist < best_distance) {
            best_distance = dist;
            best = k;
        }
    }
    return best;
}

} // namespace dat2
