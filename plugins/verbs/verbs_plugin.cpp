// SPDX-License-Identifier: BSD-3-Clause
// The plugin's only exported symbols (core/plugin.hpp).
#include "plugin.hpp"
#include "verbs.hpp"

DAT2_PLUGIN_ENTRY_POINTS(dat2::verbs::VerbsTransport, dat2::verbs::Params, dat2::verbs::parse_params)
