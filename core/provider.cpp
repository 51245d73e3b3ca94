// SPDX-License-Identifier: BSD-3-Clause
// The DAT_PROVIDER table, built in one place: every slot starts as a
// default that answers DAT_NOT_IMPLEMENTED (so no caller meets a NULL
// slot), then the kit's implementations are filled in. One table per
// dat.conf entry a plugin is initialized for.
#include "kit.hpp"
#include "slots.hpp"
#include "log.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <string>

namespace dat2::kit {

namespace {

template <class... A> DAT_RETURN not_implemented(A...) { return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0); }

template <class... A> void fill_default(DAT_RETURN (*&slot)(A...)) { slot = &not_implemented<A...>; }

struct Entry {
    DAT_PROVIDER table{};
    DAT_PROVIDER_INFO info{};
    std::string name;
    std::string ia_params;
    TransportFactory factory = nullptr;
    bool registered = false;
};

std::mutex entries_mu;
// Entries are kept for the life of the library: a stale handle's first word
// still points at its table.
std::map<std::string, std::unique_ptr<Entry>> &entries() {
    static auto *m = new std::map<std::string, std::unique_ptr<Entry>>;
    return *m;
}
// Held across fork() (docs/fork.md): registered at load, as the arena's.
[[maybe_unused]] const int fork_handlers =
    pthread_atfork([] { entries_mu.lock(); }, [] { entries_mu.unlock(); }, [] { entries_mu.unlock(); });

} // namespace

void fill_provider_table(DAT_PROVIDER &p) {
    fill_default(p.ia_open_func);
    fill_default(p.ia_query_func);
    fill_default(p.ia_close_func);
    fill_default(p.set_consumer_context_func);
    fill_default(p.get_consumer_context_func);
    fill_default(p.get_handle_type_func);
    fill_default(p.cno_create_func);
    fill_default(p.cno_modify_agent_func);
    fill_default(p.cno_query_func);
    fill_default(p.cno_free_func);
    fill_default(p.cno_wait_func);
    fill_default(p.cr_query_func);
    fill_default(p.cr_accept_func);
    fill_default(p.cr_reject_func);
    fill_default(p.cr_handoff_func);
    fill_default(p.evd_create_func);
    fill_default(p.evd_query_func);
    fill_default(p.evd_modify_cno_func);
    fill_default(p.evd_enable_func);
    fill_default(p.evd_disable_func);
    fill_default(p.evd_wait_func);
    fill_default(p.evd_resize_func);
    fill_default(p.evd_post_se_func);
    fill_default(p.evd_dequeue_func);
    fill_default(p.evd_free_func);
    fill_default(p.ep_create_func);
    fill_default(p.ep_query_func);
    fill_default(p.ep_modify_func);
    fill_default(p.ep_connect_func);
    fill_default(p.ep_dup_connect_func);
    fill_default(p.ep_disconnect_func);
    fill_default(p.ep_post_send_func);
    fill_default(p.ep_post_recv_func);
    fill_default(p.ep_post_rdma_read_func);
    fill_default(p.ep_post_rdma_write_func);
    fill_default(p.ep_get_status_func);
    fill_default(p.ep_free_func);
    fill_default(p.lmr_create_func);
    fill_default(p.lmr_query_func);
    fill_default(p.lmr_free_func);
    fill_default(p.rmr_create_func);
    fill_default(p.rmr_query_func);
    fill_default(p.rmr_bind_func);
    fill_default(p.rmr_free_func);
    fill_default(p.psp_create_func);
    fill_default(p.psp_query_func);
    fill_default(p.psp_free_func);
    fill_default(p.rsp_create_func);
    fill_default(p.rsp_query_func);
    fill_default(p.rsp_free_func);
    fill_default(p.pz_create_func);
    fill_default(p.pz_query_func);
    fill_default(p.pz_free_func);
    fill_default(p.psp_create_any_func);
    fill_default(p.ep_reset_func);
    fill_default(p.evd_set_unwaitable_func);
    fill_default(p.evd_clear_unwaitable_func);
    fill_default(p.lmr_sync_rdma_read_func);
    fill_default(p.lmr_sync_rdma_write_func);
    fill_default(p.ep_create_with_srq_func);
    fill_default(p.ep_recv_query_func);
    fill_default(p.ep_set_watermark_func);
    fill_default(p.srq_create_func);
    fill_default(p.srq_free_func);
    fill_default(p.srq_post_recv_func);
    fill_default(p.srq_query_func);
    fill_default(p.srq_resize_func);
    fill_default(p.srq_set_lw_func);
    fill_default(p.csp_create_func);
    fill_default(p.csp_query_func);
    fill_default(p.csp_free_func);
    fill_default(p.ep_common_connect_func);
    fill_default(p.rmr_create_for_ep_func);
    fill_default(p.ep_post_send_with_invalidate_func);
    fill_default(p.ep_post_rdma_read_to_rmr_func);
    fill_default(p.cno_fd_create_func);
    fill_default(p.cno_trigger_func);
    fill_default(p.ia_ha_related_func);
    fill_default(p.handle_extendedop_func);

    p.ia_open_func = slot::ia_open;
    p.ia_query_func = slot::ia_query;
    p.ia_close_func = slot::ia_close;
    p.set_consumer_context_func = slot::set_consumer_context;
    p.get_consumer_context_func = slot::get_consumer_context;
    p.get_handle_type_func = slot::get_handle_type;
    p.cno_create_func = slot::cno_create;
    p.cno_modify_agent_func = slot::cno_modify_agent;
    p.cno_query_func = slot::cno_query;
    p.cno_free_func = slot::cno_free;
    p.cno_wait_func = slot::cno_wait;
    p.cno_fd_create_func = slot::cno_fd_create;
    p.cno_trigger_func = slot::cno_trigger;
    p.cr_query_func = slot::cr_query;
    p.cr_accept_func = slot::cr_accept;
    p.cr_reject_func = slot::cr_reject;
    p.evd_create_func = slot::evd_create;
    p.evd_query_func = slot::evd_query;
    p.evd_modify_cno_func = slot::evd_modify_cno;
    p.evd_enable_func = slot::evd_enable;
    p.evd_disable_func = slot::evd_disable;
    p.evd_wait_func = slot::evd_wait;
    p.evd_resize_func = slot::evd_resize;
    p.evd_post_se_func = slot::evd_post_se;
    p.evd_dequeue_func = slot::evd_dequeue;
    p.evd_free_func = slot::evd_free;
    p.evd_set_unwaitable_func = slot::evd_set_unwaitable;
    p.evd_clear_unwaitable_func = slot::evd_clear_unwaitable;
    p.ep_create_func = slot::ep_create;
    p.ep_query_func = slot::ep_query;
    p.ep_modify_func = slot::ep_modify;
    p.ep_connect_func = slot::ep_connect;
    p.ep_dup_connect_func = slot::ep_dup_connect;
    p.ep_disconnect_func = slot::ep_disconnect;
    p.ep_post_send_func = slot::ep_post_send;
    p.ep_post_recv_func = slot::ep_post_recv;
    p.ep_post_rdma_read_func = slot::ep_post_rdma_read;
    p.ep_post_rdma_write_func = slot::ep_post_rdma_write;
    p.ep_get_status_func = slot::ep_get_status;
    p.ep_free_func = slot::ep_free;
    p.ep_reset_func = slot::ep_reset;
    p.ep_recv_query_func = slot::ep_recv_query;
    p.ep_set_watermark_func = slot::ep_set_watermark;
    p.ep_create_with_srq_func = slot::ep_create_with_srq;
    p.srq_create_func = slot::srq_create;
    p.srq_free_func = slot::srq_free;
    p.srq_post_recv_func = slot::srq_post_recv;
    p.srq_query_func = slot::srq_query;
    p.srq_resize_func = slot::srq_resize;
    p.srq_set_lw_func = slot::srq_set_lw;
    p.lmr_create_func = slot::lmr_create;
    p.lmr_query_func = slot::lmr_query;
    p.lmr_free_func = slot::lmr_free;
    p.lmr_sync_rdma_read_func = slot::lmr_sync_rdma_read;
    p.lmr_sync_rdma_write_func = slot::lmr_sync_rdma_write;
    p.rmr_create_func = slot::rmr_create;
    p.rmr_create_for_ep_func = slot::rmr_create_for_ep;
    p.rmr_query_func = slot::rmr_query;
    p.rmr_bind_func = slot::rmr_bind;
    p.rmr_free_func = slot::rmr_free;
    p.ep_post_send_with_invalidate_func = slot::ep_post_send_with_invalidate;
    p.ep_post_rdma_read_to_rmr_func = slot::ep_post_rdma_read_to_rmr;
    p.psp_create_func = slot::psp_create;
    p.psp_create_any_func = slot::psp_create_any;
    p.psp_query_func = slot::psp_query;
    p.psp_free_func = slot::psp_free;
    p.pz_create_func = slot::pz_create;
    p.pz_query_func = slot::pz_query;
    p.pz_free_func = slot::pz_free;
    p.cr_handoff_func = slot::cr_handoff;
    p.rsp_create_func = slot::rsp_create;
    p.rsp_query_func = slot::rsp_query;
    p.rsp_free_func = slot::rsp_free;
    p.csp_create_func = slot::csp_create;
    p.csp_query_func = slot::csp_query;
    p.csp_free_func = slot::csp_free;
    p.ep_common_connect_func = slot::ep_common_connect;
    p.ia_ha_related_func = slot::ia_ha_related;
    p.handle_extendedop_func = slot::extended_op;
}

void provider_init(const DAT_PROVIDER_INFO *info, const char *ia_params, TransportFactory factory) noexcept {
    try {
        if (!info)
            return;
        std::lock_guard<std::mutex> lock(entries_mu);
        auto &slot = entries()[info->ia_name];
        if (!slot)
            slot = std::make_unique<Entry>();
        Entry &e = *slot;
        if (e.registered)
            return;
        e.info = *info;
        e.name = info->ia_name;
        e.ia_params = ia_params ? ia_params : "";
        e.factory = factory;
        fill_provider_table(e.table);
        e.table.device_name = e.name.c_str();
        e.table.extension = &e;
        DAT_RETURN r = dat_registry_add_provider(&e.table, &e.info);
        if (r != DAT_SUCCESS) {
            DAT2_ERR("%s: dat_registry_add_provider failed (0x%x)\n", e.name.c_str(), r);
            return;
        }
        e.registered = true;
    } catch (...) {
        DAT2_ERR("dat_provider_init: out of memory\n");
    }
}

void provider_fini(const DAT_PROVIDER_INFO *info) noexcept {
    if (!info)
        return;
    std::lock_guard<std::mutex> lock(entries_mu);
    auto it = entries().find(info->ia_name);
    if (it == entries().end() || !it->second->registered)
        return;
    dat_registry_remove_provider(&it->second->table, &it->second->info);
    it->second->registered = false;
}

// The factory and ia_params of the entry a table belongs to.
bool provider_entry(const std::string &name, TransportFactory &factory, std::string &ia_params,
                    const DAT_PROVIDER **resolved) {
    std::lock_guard<std::mutex> lock(entries_mu);
    auto it = entries().find(name);
    if (it == entries().end() || !it->second->registered)
        return false;
    factory = it->second->factory;
    ia_params = it->second->ia_params;
    *resolved = &it->second->table;
    return true;
}

const DAT_PROVIDER_INFO *provider_info(const DAT_PROVIDER *table) {
    return &static_cast<const Entry *>(table->extension)->info;
}

} // namespace dat2::kit

// Every plugin built on the kit exports this (its version script): the
// DTO post slots and dat_evd_dequeue above catch their own exceptions
// (guarded()), and our registry then dispatches to them without a guard of
// its own (registry/static_config.hpp, kGuardsDtoSlots). Other registries
// never look for it.
extern "C" __attribute__((visibility("default"))) const int dat2_provider_guards_dto_slots = 1;
