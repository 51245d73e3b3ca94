// SPDX-License-Identifier: BSD-3-Clause
// Every environment variable libdat2 reads is declared once, here, so that
// datinfo can list them with their defaults and help.
#pragma once

#include <cstddef>

namespace dat2 {

struct Tunable {
    const char *name;
    const char *default_value; // shown by datinfo; nullptr when "unset"
    const char *help;
};

// The table of tunables, terminated by an entry whose name is nullptr.
const Tunable *tunables() noexcept;

// The value of a declared tunable from the environment, or its default.
// Asking for an undeclared name is a programming error and aborts in debug.
const char *tunable_value(const char *name) noexcept;

} // namespace dat2
