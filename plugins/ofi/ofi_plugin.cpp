// SPDX-License-Identifier: BSD-3-Clause
// The plugin's only exported symbols (core/plugin.hpp).
#include "ofi.hpp"
#include "plugin.hpp"

DAT2_PLUGIN_ENTRY_POINTS(dat2::ofi::OfiTransport, dat2::ofi::Params, dat2::ofi::parse_params)
