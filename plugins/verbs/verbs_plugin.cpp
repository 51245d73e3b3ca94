// SPDX-License-Identifier: BSD-3-Clause
// The plugin's only exported symbols: the registry calls dat_provider_init
// once per dat.conf entry naming this library, with the entry's ia_params.
#include "verbs.hpp"

#include "log.hpp"

namespace dat2::verbs {
namespace {

std::unique_ptr<kit::Transport> make_transport(kit::Ia &ia, const std::string &ia_params, DAT_RETURN &error) {
    Params params;
    std::string why;
    if (!parse_params(ia_params, params, why)) {
        DAT2_ERR("%s: ia_params \"%s\": %s\n", ia.name.c_str(), ia_params.c_str(), why.c_str());
        error = DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
        return nullptr;
    }
    auto t = std::make_unique<VerbsTransport>(ia, params);
    error = t->open();
    if (error != DAT_SUCCESS)
        return nullptr;
    return t;
}

} // namespace
} // namespace dat2::verbs

extern "C" __attribute__((visibility("default"))) void dat_provider_init(const DAT_PROVIDER_INFO *info,
                                                                         const char *ia_params) {
    dat2::kit::provider_init(info, ia_params, dat2::verbs::make_transport);
}

extern "C" __attribute__((visibility("default"))) void dat_provider_fini(const DAT_PROVIDER_INFO *info) {
    dat2::kit::provider_fini(info);
}
