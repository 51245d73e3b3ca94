// SPDX-License-Identifier: BSD-3-Clause
// A DAT provider for testing the registry: every slot of its table records
// the call and its arguments, and ia_params choose a failure to simulate:
//   ok | noregister (init registers nothing) | openfail (ia_open fails)
//   | noremove (fini does not remove itself) | threadreg (init registers
//   from another thread) | openthrow (ia_open throws) | initthrow (init
//   throws before registering) | print (init and ia_open print to stdout,
//   as OFED's providers do) | opencrash (ia_open aborts) | openhang
//   (ia_open never returns)
#include "test_provider.hpp"

#include <dat2/udat.h>
#include "dat2_internal.h"
#include <dat2/dat_registry.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

std::mutex g_mu;
TestProviderCall g_last{};
TestProviderCounters g_counters{};

struct Registration {
    DAT_PROVIDER table{};
    DAT_PROVIDER_INFO info{};
    std::string params;
    std::string name;
};
std::vector<Registration *> g_registrations;

struct Object {
    const DAT_PROVIDER *provider; // DAT: the first word is the provider table
    DAT_IA_HANDLE ia;             // the provider IA this object belongs to
    Registration *reg;
};

template <std::size_t Offset, class... A> DAT_RETURN stub(A... args) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_last.slot_offset = Offset;
    g_last.first = nullptr;
    if constexpr (sizeof...(A) > 0) {
        auto first = [](auto a, auto...) { return a; }(args...);
        if constexpr (std::is_pointer_v<decltype(first)>)
            g_last.first = reinterpret_cast<const void *>(first);
    }
    test_provider_pack(g_last, args...);
    return DAT_SUCCESS;
}

Registration *reg_of(DAT_IA_HANDLE ia) { return static_cast<Object *>(ia)->reg; }

DAT_RETURN ia_open(const DAT_NAME_PTR name, DAT_COUNT, DAT_EVD_HANDLE *, DAT_IA_HANDLE *ia) {
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_counters.open_calls;
    Registration *reg = nullptr;
    for (Registration *r : g_registrations)
        if (r->name == name)
            reg = r;
    if (!reg)
        return DAT_ERROR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    if (reg->params.find("openfail") != std::string::npos)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    if (reg->params.find("openthrow") != std::string::npos)
        throw std::runtime_error("test provider: ia_open throws");
    if (reg->params.find("print") != std::string::npos) {
        // Both ways a provider reaches stdout: the stdio stream and the fd.
        std::printf("vm:TEST: ia_open %s says hello on stdout {not JSON\n", name);
        std::fflush(stdout);
        static const char kRaw[] = "vm:TEST: and once more through write(1)\n";
        ssize_t ignored = ::write(1, kRaw, sizeof kRaw - 1);
        (void)ignored;
    }
    // abort(), not a SIGSEGV: the sanitizers turn a SIGSEGV into exit(1),
    // and the probe's verdict must read the same in every build.
    if (reg->params.find("opencrash") != std::string::npos)
        std::abort();
    if (reg->params.find("openhang") != std::string::npos)
        for (;;)
            ::pause();
    auto *o = new Object{&reg->table, nullptr, reg};
    o->ia = o;
    *ia = o;
    ++g_counters.open_ias;
    return DAT_SUCCESS;
}

DAT_RETURN ia_close(DAT_IA_HANDLE ia, DAT_CLOSE_FLAGS) {
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_counters.close_calls;
    --g_counters.open_ias;
    delete static_cast<Object *>(ia);
    return DAT_SUCCESS;
}

DAT_RETURN ia_query(DAT_IA_HANDLE ia, DAT_EVD_HANDLE *, DAT_IA_ATTR_MASK, DAT_IA_ATTR *ia_attr, DAT_PROVIDER_ATTR_MASK,
                    DAT_PROVIDER_ATTR *provider_attr) {
    Registration *reg = reg_of(ia);
    if (ia_attr) {
        std::memset(ia_attr, 0, sizeof *ia_attr);
        std::strncpy(ia_attr->adapter_name, reg->name.c_str(), DAT_NAME_MAX_LENGTH - 1);
        std::strncpy(ia_attr->vendor_name, "dat2 test provider", DAT_NAME_MAX_LENGTH - 1);
        ia_attr->max_eps = 7;
    }
    if (provider_attr) {
        // OFED's dat_ia_close finds the registration again from device_name
        // and these three attributes: they must echo the registered info.
        std::strncpy(provider_attr->provider_name, "test", DAT_NAME_MAX_LENGTH - 1);
        provider_attr->dapl_version_major = reg->info.dapl_version_major;
        provider_attr->dapl_version_minor = reg->info.dapl_version_minor;
        provider_attr->is_thread_safe = reg->info.is_thread_safe;
    }
    return DAT_SUCCESS;
}

DAT_RETURN pz_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE *pz) {
    *pz = new Object{&reg_of(ia)->table, ia, reg_of(ia)};
    return DAT_SUCCESS;
}

// Reports the consumer's IA handle the way OFED's providers do: through
// dats_get_ia_handle, resolved from the registry that loaded us.
DAT_RETURN pz_query(DAT_PZ_HANDLE pz, DAT_PZ_PARAM_MASK, DAT_PZ_PARAM *param) {
    DAT_IA_HANDLE consumer = nullptr;
    DAT_RETURN r = dats_get_ia_handle(static_cast<Object *>(pz)->ia, &consumer);
    if (r != DAT_SUCCESS)
        return r;
    param->ia_handle = consumer;
    return DAT_SUCCESS;
}

DAT_RETURN pz_free(DAT_PZ_HANDLE pz) {
    delete static_cast<Object *>(pz);
    return DAT_SUCCESS;
}

#define SLOT(name) t.name = stub<offsetof(DAT_PROVIDER, name)>

[[maybe_unused]] void fill(DAT_PROVIDER &t, const char *device_name) {
    t.device_name = device_name;
    t.extension = nullptr;
    SLOT(ia_open_func);
    SLOT(ia_query_func);
    SLOT(ia_close_func);
    SLOT(set_consumer_context_func);
    SLOT(get_consumer_context_func);
    SLOT(get_handle_type_func);
    SLOT(cno_create_func);
    SLOT(cno_modify_agent_func);
    SLOT(cno_query_func);
    SLOT(cno_free_func);
    SLOT(cno_wait_func);
    SLOT(cr_query_func);
    SLOT(cr_accept_func);
    SLOT(cr_reject_func);
    SLOT(cr_handoff_func);
    SLOT(evd_create_func);
    SLOT(evd_query_func);
    SLOT(evd_modify_cno_func);
    SLOT(evd_enable_func);
    SLOT(evd_disable_func);
    SLOT(evd_wait_func);
    SLOT(evd_resize_func);
    SLOT(evd_post_se_func);
    SLOT(evd_dequeue_func);
    SLOT(evd_free_func);
    SLOT(ep_create_func);
    SLOT(ep_query_func);
    SLOT(ep_modify_func);
    SLOT(ep_connect_func);
    SLOT(ep_dup_connect_func);
    SLOT(ep_disconnect_func);
    SLOT(ep_post_send_func);
    SLOT(ep_post_recv_func);
    SLOT(ep_post_rdma_read_func);
    SLOT(ep_post_rdma_write_func);
    SLOT(ep_get_status_func);
    SLOT(ep_free_func);
    SLOT(lmr_create_func);
    SLOT(lmr_query_func);
    SLOT(lmr_free_func);
    SLOT(rmr_create_func);
    SLOT(rmr_query_func);
    SLOT(rmr_bind_func);
    SLOT(rmr_free_func);
    SLOT(psp_create_func);
    SLOT(psp_query_func);
    SLOT(psp_free_func);
    SLOT(rsp_create_func);
    SLOT(rsp_query_func);
    SLOT(rsp_free_func);
    SLOT(pz_create_func);
    SLOT(pz_query_func);
    SLOT(pz_free_func);
    SLOT(psp_create_any_func);
    SLOT(ep_reset_func);
    SLOT(evd_set_unwaitable_func);
    SLOT(evd_clear_unwaitable_func);
    SLOT(lmr_sync_rdma_read_func);
    SLOT(lmr_sync_rdma_write_func);
    SLOT(ep_create_with_srq_func);
    SLOT(ep_recv_query_func);
    SLOT(ep_set_watermark_func);
    SLOT(srq_create_func);
    SLOT(srq_free_func);
    SLOT(srq_post_recv_func);
    SLOT(srq_query_func);
    SLOT(srq_resize_func);
    SLOT(srq_set_lw_func);
    SLOT(csp_create_func);
    SLOT(csp_query_func);
    SLOT(csp_free_func);
    SLOT(ep_common_connect_func);
    SLOT(rmr_create_for_ep_func);
    SLOT(ep_post_send_with_invalidate_func);
    SLOT(ep_post_rdma_read_to_rmr_func);
    SLOT(cno_fd_create_func);
    SLOT(cno_trigger_func);
    SLOT(ia_ha_related_func);
    SLOT(handle_extendedop_func);
    // The few the registry tests need to behave like a provider.
    t.ia_open_func = ia_open;
    t.ia_close_func = ia_close;
    t.ia_query_func = ia_query;
    t.pz_create_func = pz_create;
    t.pz_query_func = pz_query;
    t.pz_free_func = pz_free;
}

} // namespace

#ifndef TEST_PROVIDER_OMIT_INIT
EXPORT void dat_provider_init(const DAT_PROVIDER_INFO *info, const char *ia_params) {
    {
        std::lock_guard<std::mutex> lock(g_mu);
        ++g_counters.init_calls;
    }
    std::string params = ia_params ? ia_params : "";
    if (params.find("print") != std::string::npos)
        std::printf("vm:TEST: dat_provider_init for %s\n", info->ia_name);
    if (params.find("noregister") != std::string::npos)
        return;
    if (params.find("initthrow") != std::string::npos)
        throw std::runtime_error("test provider: init throws");
    auto *reg = new Registration;
    reg->params = params;
    reg->name = info->ia_name;
    reg->info = *info;
    fill(reg->table, reg->name.c_str());
    {
        std::lock_guard<std::mutex> lock(g_mu);
        g_registrations.push_back(reg);
        ++g_counters.live_registrations;
    }
    if (params.find("threadreg") != std::string::npos)
        std::thread([reg] { dat_registry_add_provider(&reg->table, &reg->info); }).join();
    else
        dat_registry_add_provider(&reg->table, &reg->info);
}
#endif

#ifndef TEST_PROVIDER_OMIT_FINI
EXPORT void dat_provider_fini(const DAT_PROVIDER_INFO *info) {
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_counters.fini_calls;
    for (auto it = g_registrations.begin(); it != g_registrations.end(); ++it) {
        Registration *reg = *it;
        if (reg->name != info->ia_name)
            continue;
        if (reg->params.find("noremove") == std::string::npos)
            dat_registry_remove_provider(&reg->table, &reg->info);
        g_registrations.erase(it);
        --g_counters.live_registrations;
        delete reg;
        return;
    }
}
#endif

EXPORT const TestProviderCall *dat2_test_provider_last_call(void) { return &g_last; }
EXPORT const TestProviderCounters *dat2_test_provider_counters(void) { return &g_counters; }
