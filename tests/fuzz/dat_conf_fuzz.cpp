// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: any byte sequence given to the dat.conf parser yields
// entries and diagnostics, never a crash, hang or leak; and every entry it
// accepts satisfies the grammar's invariants.
#include "dat_conf.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::string_view text(reinterpret_cast<const char *>(data), size);
    dat2::ConfParseResult r = dat2::parse_dat_conf(text, "fuzz.conf");
    for (const auto &e : r.entries) {
        if (e.ia_name.empty() || e.ia_name.size() >= 256 || e.library.empty() ||
            (e.api_kind != 'u' && e.api_kind != 'k') || e.line == 0)
            std::abort();
    }
    for (const auto &d : r.diagnostics)
        if (d.line == 0 || d.message.empty())
            std::abort();
    return 0;
}
