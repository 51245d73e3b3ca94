// SPDX-License-Identifier: BSD-3-Clause
// A plugin's only exported symbols. The registry calls dat_provider_init once
// per dat.conf entry naming the library, with the entry's ia_params; each
// dat_ia_open then parses them and makes a transport, which the kit opens
// (Transport::open, core/transport.hpp):
//
//   DAT2_PLUGIN_ENTRY_POINTS(dat2::ofi::OfiTransport, dat2::ofi::Params, dat2::ofi::parse_params)
//
// The transport needs a constructor (kit::Ia &, const Params &) that cannot
// fail but by throwing.
#pragma once

#include "transport.hpp"
#include "log.hpp"

#include <memory>
#include <string>

namespace dat2::kit {

template <class TransportT, class ParamsT, bool (*Parse)(const std::string &, ParamsT &, std::string &)>
std::unique_ptr<Transport> make_transport(Ia &ia, const std::string &ia_params, DAT_RETURN &error) {
    ParamsT params;
    std::string why;
    if (!Parse(ia_params, params, why)) {
        DAT2_ERR("%s: ia_params \"%s\": %s\n", ia.name.c_str(), ia_params.c_str(), why.c_str());
        error = DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
        return nullptr;
    }
    return std::make_unique<TransportT>(ia, params);
}

} // namespace dat2::kit

#define DAT2_PLUGIN_ENTRY_POINTS(TransportT, ParamsT, parse)                                                           \
    extern "C" __attribute__((visibility("default"))) void dat_provider_init(const DAT_PROVIDER_INFO *info,            \
                                                                             const char *ia_params) {                  \
        dat2::kit::provider_init(info, ia_params, &dat2::kit::make_transport<TransportT, ParamsT, parse>);             \
    }                                                                                                                  \
    extern "C" __attribute__((visibility("default"))) void dat_provider_fini(const DAT_PROVIDER_INFO *info) {          \
        dat2::kit::provider_fini(info);                                                                                \
    }
