// SPDX-License-Identifier: BSD-3-Clause
// "Did you mean": the known name closest to a misspelled one, for the
// registry's log and datinfo.
#pragma once

#include <string>
#include <vector>

namespace dat2 {

// The name in `known` closest to `name` (edit distance, a swap of two
// neighbours counting once; or a name that contains it), or "" when none is
// close enough to be a likely typo.
std::string closest_name(const std::string &name, const std::vector<std::string> &known);

} // namespace dat2
