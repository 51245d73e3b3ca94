// SPDX-License-Identifier: BSD-3-Clause
// The plugin's only exported symbols (core/plugin.hpp), and which transport
// an IA gets: connected endpoints (ofi_*.cpp) where the provider has them,
// reliable-datagram endpoints (rdm_*.cpp) where it has only those or
// ia_params say ep_type=rdm.
#include "ofi.hpp"
#include "plugin.hpp"
#include "rdm.hpp"

#include <pthread.h>

namespace dat2::ofi {

namespace {
std::mutex &getinfo_mu() {
    static auto *mu = new std::mutex; // never destroyed: IAs may open from static destructors
    return *mu;
}
// Registered at load, as the kit's arena lock.
[[maybe_unused]] const int fork_handlers =
    pthread_atfork([] { getinfo_mu().lock(); }, [] { getinfo_mu().unlock(); }, [] { getinfo_mu().unlock(); });
} // namespace

int getinfo(const char *node, std::uint64_t flags, const fi_info *hints, fi_info **info) {
    std::lock_guard<std::mutex> lock(getinfo_mu());
    return fi_getinfo(kApiVersion, node, nullptr, flags, hints, info);
}

} // namespace dat2::ofi

namespace {

using namespace dat2;

bool has_msg_endpoints(const ofi::Params &params) {
    fi_info *hints = fi_allocinfo();
    if (!hints)
        return true;
    hints->ep_attr->type = FI_EP_MSG;
    hints->caps = FI_MSG | FI_RMA;
    hints->fabric_attr->prov_name = strdup(params.provider.c_str());
    fi_info *info = nullptr;
    const int rc = ofi::getinfo(nullptr, 0, hints, &info);
    fi_freeinfo(hints);
    if (info)
        fi_freeinfo(info);
    return rc != -FI_ENODATA;
}

std::unique_ptr<kit::Transport> make_transport(kit::Ia &ia, const std::string &ia_params, DAT_RETURN &error) {
    ofi::Params params;
    std::string why;
    if (!ofi::parse_params(ia_params, params, why)) {
        DAT2_ERR("%s: ia_params \"%s\": %s\n", ia.name.c_str(), ia_params.c_str(), why.c_str());
        error = DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
        return nullptr;
    }
    if (params.ep_type == "rdm" || (params.ep_type.empty() && !has_msg_endpoints(params))) {
        if (params.write_transmit) {
            // An RDM target drops a write it refuses without a word (shm):
            // only the answer delivery completion waits for reveals it.
            DAT2_ERR("%s: ia_params \"%s\": write_completion=transmit needs a connected (FI_EP_MSG) provider; "
                     "'%s' opens reliable-datagram endpoints, whose writes complete on delivery\n",
                     ia.name.c_str(), ia_params.c_str(), params.provider.c_str());
            error = DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
            return nullptr;
        }
        return std::make_unique<ofi::RdmTransport>(ia, params);
    }
    return std::make_unique<ofi::OfiTransport>(ia, params);
}

} // namespace

extern "C" __attribute__((visibility("default"))) void dat_provider_init(const DAT_PROVIDER_INFO *info,
                                                                         const char *ia_params) {
    dat2::kit::provider_init(info, ia_params, &make_transport);
}

extern "C" __attribute__((visibility("default"))) void dat_provider_fini(const DAT_PROVIDER_INFO *info) {
    dat2::kit::provider_fini(info);
}
