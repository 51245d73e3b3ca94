// SPDX-License-Identifier: BSD-3-Clause
// IA open/query/close, consumer contexts, handle types and PZs.
#include "boundary.hpp"
#include "descriptors.hpp"
#include "dat2_version.h"
#include "event_loop.hpp"
#include "slots.hpp"
#include "srq.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

namespace dat2::kit {

Ia::Ia() : lmr_table(kMaxLmrs) {}

// The loop stops first: no handler of the transport's runs while it goes.
Ia::~Ia() {
    if (loop)
        loop->stop();
    transport.reset();
}

void ia_track(Ia &ia, ObjectHeader *obj) {
    std::lock_guard<std::mutex> lock(ia.mu);
    ia.objects.push_back(obj);
}

bool ia_has_room(Ia &ia, DAT_HANDLE_TYPE type, DAT_COUNT max) {
    std::lock_guard<std::mutex> lock(ia.mu);
    return ia.objects.count(type) < static_cast<std::size_t>(std::max<DAT_COUNT>(max, 0));
}

void ia_untrack(Ia &ia, ObjectHeader *obj) {
    std::lock_guard<std::mutex> lock(ia.mu);
    ia.objects.erase(obj);
}

DAT_RETURN ia_handle_for_consumer(Ia *ia, DAT_IA_HANDLE *out) {
    DAT_IA_HANDLE consumer = ia;
    // The registry owns the mapping to the consumer's handle (OFED and ours).
    if (dats_get_ia_handle(ia, &consumer) != DAT_SUCCESS)
        consumer = ia;
    *out = consumer;
    return DAT_SUCCESS;
}

namespace {

// What a transport reported, within what the kit itself can hold.
Capabilities limited(Capabilities c) {
    c.max_private_data = std::clamp<DAT_COUNT>(c.max_private_data, 0, kMaxPrivateData);
    c.max_iov = std::clamp<DAT_COUNT>(c.max_iov, 1, kMaxIov);
    c.max_dtos = std::clamp<DAT_COUNT>(c.max_dtos, 1, kMaxDtos);
    c.max_eps = std::clamp<DAT_COUNT>(c.max_eps, 0, kMaxObjects);
    c.max_evds = std::clamp<DAT_COUNT>(c.max_evds, 0, kMaxObjects);
    c.max_pzs = std::clamp<DAT_COUNT>(c.max_pzs, 0, kMaxObjects);
    c.max_srq_recvs = std::clamp<DAT_COUNT>(c.max_srq_recvs, 0, kMaxDtos);
    return c;
}

std::size_t count_children(Ia &ia) {
    std::lock_guard<std::mutex> lock(ia.mu);
    std::size_t n = ia.objects.size();
    if (ia.async_evd && ia.async_evd_owned && ia.async_evd->listed && ia.async_evd->ia == &ia)
        --n;
    return n;
}

// Frees every child of the IA, dependents before what they depend on.
void release_children(Ia &ia) {
    // CRs twice: a request can reach a service point that is still open
    // while the first ones go, and becomes a CR that must be answered too.
    static const DAT_HANDLE_TYPE order[] = {DAT_HANDLE_TYPE_CR,  DAT_HANDLE_TYPE_RSP, DAT_HANDLE_TYPE_PSP,
                                            DAT_HANDLE_TYPE_CSP, DAT_HANDLE_TYPE_CR,  DAT_HANDLE_TYPE_EP,
                                            DAT_HANDLE_TYPE_SRQ, DAT_HANDLE_TYPE_RMR, DAT_HANDLE_TYPE_LMR,
                                            DAT_HANDLE_TYPE_EVD, DAT_HANDLE_TYPE_CNO, DAT_HANDLE_TYPE_PZ};
    for (DAT_HANDLE_TYPE type : order) {
        for (;;) {
            ObjectHeader *victim = nullptr;
            {
                std::lock_guard<std::mutex> lock(ia.mu);
                // The most recent first: LMRs made from other LMRs go before
                // their parents.
                victim = ia.objects.last(type);
            }
            if (!victim)
                break;
            switch (type) {
            // One that another thread is freeing stays listed until that
            // thread is done with it: take turns until then.
            case DAT_HANDLE_TYPE_EP:
                if (!ep_release_all(*static_cast<Ep *>(victim)))
                    std::this_thread::yield();
                break;
            case DAT_HANDLE_TYPE_CR:
                if (!cr_claim(*static_cast<Cr *>(victim)))
                    std::this_thread::yield();
                else
                    cr_destroy(*static_cast<Cr *>(victim));
                break;
            case DAT_HANDLE_TYPE_PSP:
            case DAT_HANDLE_TYPE_RSP:
            case DAT_HANDLE_TYPE_CSP: psp_release(*static_cast<Psp *>(victim)); break;
            case DAT_HANDLE_TYPE_SRQ: srq_release(*static_cast<Srq *>(victim)); break;
            case DAT_HANDLE_TYPE_RMR: rmr_release(*static_cast<Rmr *>(victim)); break;
            case DAT_HANDLE_TYPE_LMR: lmr_release(*static_cast<Lmr *>(victim)); break;
            case DAT_HANDLE_TYPE_EVD: evd_release(*static_cast<Evd *>(victim)); break;
            case DAT_HANDLE_TYPE_CNO: cno_release(*static_cast<Cno *>(victim)); break;
            case DAT_HANDLE_TYPE_PZ:
                ia_untrack(ia, victim);
                destroy_object(static_cast<Pz *>(victim));
                break;
            default: ia_untrack(ia, victim); break;
            }
        }
    }
}

} // namespace

namespace slot {

DAT_RETURN ia_open(const DAT_NAME_PTR name, DAT_COUNT async_qlen, DAT_EVD_HANDLE *async_evd, DAT_IA_HANDLE *ia_out) {
    return guarded("dat_ia_open", [&]() -> DAT_RETURN {
        if (!name)
            return invalid_arg(1);
        if (!async_evd)
            return invalid_arg(3);
        if (!ia_out)
            return invalid_arg(4);
        TransportFactory factory = nullptr;
        std::string params;
        const DAT_PROVIDER *table = nullptr;
        if (!provider_entry(name, factory, params, &table))
            return DAT_ERROR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
        // dat_ia_open(3DAT): a Consumer's EVD must be an asynchronous EVD
        // "created for the same Provider" (an IA of this dat.conf entry).
        // Each open is its own IA here, so DAT_EVD_ASYNC_EXISTS gets a fresh one.
        Evd *borrowed = nullptr;
        if (*async_evd != DAT_HANDLE_NULL && *async_evd != DAT_EVD_ASYNC_EXISTS) {
            if (DAT_RETURN r = handle_cast(*async_evd, borrowed, DAT_INVALID_HANDLE_EVD_ASYNC))
                return r;
            if (!(borrowed->flags & DAT_EVD_ASYNC_FLAG) || borrowed->provider != table) {
                DAT2_LOG(log::kGeneric, "dat_ia_open(%s): the EVD passed is not an async EVD of this provider\n",
                         static_cast<const char *>(name));
                return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC);
            }
        }
        // dat_ia_open(3DAT): the queue is "at least equal to
        // async_evd_min_qlen", so one longer than any EVD can be is refused
        // (as dat_evd_create refuses it); the value is ignored unless
        // async_evd_handle is DAT_HANDLE_NULL.
        if (*async_evd == DAT_HANDLE_NULL && (async_qlen < 0 || async_qlen > kMaxEvdQlen)) {
            DAT2_LOG(log::kGeneric, "dat_ia_open(%s): async_evd_min_qlen %d is outside 0..%d\n",
                     static_cast<const char *>(name), static_cast<int>(async_qlen), static_cast<int>(kMaxEvdQlen));
            return invalid_arg(2);
        }
        if (async_qlen == 0)
            async_qlen = 16;
        Ia *ia = make_object<Ia>(table, nullptr);
        if (!ia)
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        ia->ia = ia;
        ia->name = name;
        for (std::uint32_t i = kMaxLmrs; i-- > 1;)
            ia->lmr_free.push_back(i); // index 0 is never used: context 0 means none
        DAT_RETURN err = DAT_SUCCESS;
        try {
            ia->loop = std::make_unique<EventLoop>(ia->name);
            ia->transport = factory(*ia, params, err);
            if (ia->transport) {
                Capabilities caps;
                err = ia->transport->open(caps);
                if (err == DAT_SUCCESS) {
                    ia->caps = limited(caps);
                    make_provider_attrs(*ia);
                }
            }
            if (err == DAT_SUCCESS && ia->transport)
                err = ia->loop->start();
        } catch (...) {
            destroy_object(ia);
            throw;
        }
        if (!ia->transport || err != DAT_SUCCESS) {
            if (err == DAT_SUCCESS)
                err = DAT_ERROR(DAT_INTERNAL_ERROR, 0);
            // Asked before the IA's own descriptors are given back
            // (descriptors.hpp).
            if (DAT_GET_TYPE(err) != DAT_INSUFFICIENT_RESOURCES && out_of_descriptors()) {
                DAT2_ERR("%s: the process has no file descriptor left (RLIMIT_NOFILE)\n", name);
                err = DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
            }
            destroy_object(ia);
            return err;
        }
        publish(ia);
        if (borrowed) {
            async_evd_borrow(*ia, *borrowed);
            *ia_out = ia;
            return DAT_SUCCESS;
        }
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_RETURN r = evd_create(ia, async_qlen, DAT_HANDLE_NULL, DAT_EVD_ASYNC_FLAG, &evd);
        if (r != DAT_SUCCESS) {
            destroy_object(ia);
            return r;
        }
        ia->async_evd = static_cast<Evd *>(evd);
        ia->async_evd_owned = true;
        *async_evd = evd;
        *ia_out = ia;
        return DAT_SUCCESS;
    });
}

DAT_RETURN ia_query(DAT_IA_HANDLE ia_handle, DAT_EVD_HANDLE *async_evd, DAT_IA_ATTR_MASK ia_mask, DAT_IA_ATTR *ia_attr,
                    DAT_PROVIDER_ATTR_MASK provider_mask, DAT_PROVIDER_ATTR *provider_attr) {
    return guarded("dat_ia_query", [&]() -> DAT_RETURN {
        Ia *ia;
        if (DAT_RETURN r = handle_cast(ia_handle, ia))
            return r;
        if (ia_mask && !ia_attr)
            return invalid_arg(4);
        if (provider_mask && !provider_attr)
            return invalid_arg(6);
        DAT_IA_ATTR ia_out;
        std::memset(&ia_out, 0, sizeof ia_out);
        alignas(DAT_PROVIDER_ATTR) unsigned char pa_storage[sizeof(DAT_PROVIDER_ATTR)] = {};
        auto *pa = reinterpret_cast<DAT_PROVIDER_ATTR *>(pa_storage);
        const DAT_PROVIDER_INFO *info = provider_info(ia->provider);
        std::snprintf(ia_out.adapter_name, sizeof ia_out.adapter_name, "%s", ia->name.c_str());
        std::snprintf(ia_out.vendor_name, sizeof ia_out.vendor_name, "dat2");
        ia_out.ia_address_ptr = const_cast<sockaddr *>(ia->transport->address());
        ia_out.max_evds = ia->caps.max_evds;
        ia_out.max_evd_qlen = kMaxEvdQlen;
        ia_out.max_lmrs = kMaxLmrs - 1;
        ia_out.max_pzs = ia->caps.max_pzs;
        ia_out.max_eps = ia->caps.max_eps;
        ia_out.max_dto_per_ep = ia->caps.max_dtos;
        ia_out.max_rmrs = 0;
        // SRQs (core/srq.cpp) where the transport shares receive contexts; it
        // may lower max_srqs in query().
        ia_out.max_srqs = ia->caps.max_srq_recvs ? 1 << 16 : 0;
        ia_out.max_ep_per_srq = ia->caps.max_srq_recvs ? ia_out.max_eps : 0;
        ia_out.max_recv_per_srq = ia->caps.max_srq_recvs;
        ia_out.extension_supported = DAT_EXTENSION_NONE;
        std::snprintf(pa->provider_name, sizeof pa->provider_name, "%s", ia->name.c_str());
        pa->provider_version_major = DAT2_VERSION_MAJOR;
        pa->provider_version_minor = DAT2_VERSION_MINOR;
        // OFED's registry finds the entry again from these three at dat_ia_close.
        pa->dapl_version_major = info->dapl_version_major;
        pa->dapl_version_minor = info->dapl_version_minor;
        pa->is_thread_safe = info->is_thread_safe;
        pa->lmr_mem_types_supported =
            static_cast<DAT_MEM_TYPE>(DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR | DAT_MEM_TYPE_SHARED_VIRTUAL);
        pa->iov_ownership_on_return = DAT_IOV_CONSUMER;
        pa->dat_qos_supported = DAT_QOS_BEST_EFFORT;
        pa->completion_flags_supported = static_cast<DAT_COMPLETION_FLAGS>(
            DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG |
            DAT_COMPLETION_BARRIER_FENCE_FLAG | DAT_COMPLETION_EVD_THRESHOLD_FLAG);
        pa->max_private_data_size = ia->caps.max_private_data;
        pa->supports_multipath = DAT_FALSE;
        pa->ep_creator = DAT_PSP_CREATES_EP_IFASKED;
        pa->pz_support = DAT_PZ_UNIQUE;
        pa->optimal_buffer_alignment = 64;
        {
            auto *merge = const_cast<DAT_BOOLEAN(*)[6]>(pa->evd_stream_merging_supported);
            for (int i = 0; i < 6; ++i)
                for (int j = 0; j < 6; ++j)
                    merge[i][j] = DAT_TRUE;
        }
        pa->srq_supported = ia->caps.max_srq_recvs ? DAT_TRUE : DAT_FALSE;
        // DAT 2.0 defines no values for these counts: 1 = supported. The SRQ
        // low watermark; SRQ and EP PZs may differ (each DTO is checked
        // against the PZ it is posted under); dat_srq_query's counts;
        // dat_ep_recv_query's (DAT_VALUE_UNKNOWN for EPs with an SRQ).
        pa->srq_watermarks_supported = ia->caps.max_srq_recvs ? 1 : 0;
        pa->srq_ep_pz_difference_supported = pa->srq_supported;
        pa->srq_info_supported = ia->caps.max_srq_recvs ? 1 : 0;
        pa->ep_recv_info_supported = 1;
        pa->lmr_sync_req = DAT_FALSE;
        pa->dto_async_return_guaranteed = DAT_FALSE;
        pa->rdma_write_for_rdma_read_req = DAT_FALSE;
        pa->rdma_read_lmr_rmr_context_exposure = DAT_FALSE;
        pa->rmr_scope_supported = ia->caps.rmr_scope_ep ? DAT_RMR_SCOPE_ANY : DAT_RMR_SCOPE_PZ;
        ia->transport->query(ia_out, *pa);
        ext_query(*ia, ia_out, *pa);
        if (async_evd)
            *async_evd = ia->async_evd;
        if (ia_mask && ia_attr)
            *ia_attr = ia_out;
        if (provider_mask && provider_attr)
            std::memcpy(static_cast<void *>(provider_attr), pa, sizeof *pa);
        return DAT_SUCCESS;
    });
}

DAT_RETURN ia_close(DAT_IA_HANDLE ia_handle, DAT_CLOSE_FLAGS flags) {
    return guarded("dat_ia_close", [&]() -> DAT_RETURN {
        Ia *ia;
        if (DAT_RETURN r = handle_cast(ia_handle, ia))
            return r;
        if (flags != DAT_CLOSE_ABRUPT_FLAG && flags != DAT_CLOSE_GRACEFUL_FLAG)
            return invalid_arg(2);
        if (flags == DAT_CLOSE_GRACEFUL_FLAG && count_children(*ia) != 0) {
            DAT2_LOG(log::kGeneric, "dat_ia_close(%s, graceful): objects still exist\n", ia->name.c_str());
            return DAT_ERROR(DAT_INVALID_STATE, 0);
        }
        async_evd_return(*ia); // a Consumer's EVD stays (dat_ia_close(3DAT))
        release_children(*ia);
        destroy_object(ia);
        return DAT_SUCCESS;
    });
}

// dat.conf entries that share an ia_name form a fail-over chain (the
// registry tries them in order): those are the HA-related providers.
DAT_RETURN ia_ha_related(DAT_IA_HANDLE ia_handle, const DAT_NAME_PTR name, DAT_BOOLEAN *answer) {
    return guarded("dat_ia_ha_related", [&]() -> DAT_RETURN {
        Ia *ia;
        if (DAT_RETURN r = handle_cast(ia_handle, ia))
            return r;
        if (!name)
            return invalid_arg(2);
        if (!answer)
            return invalid_arg(3);
        *answer = ia->name == name ? DAT_TRUE : DAT_FALSE;
        return DAT_SUCCESS;
    });
}

DAT_RETURN set_consumer_context(DAT_HANDLE h, DAT_CONTEXT context) {
    ObjectHeader *o = any_object(h);
    if (!o)
        return DAT_ERROR(DAT_INVALID_HANDLE, 0);
    o->context = context;
    return DAT_SUCCESS;
}

DAT_RETURN get_consumer_context(DAT_HANDLE h, DAT_CONTEXT *context) {
    ObjectHeader *o = any_object(h);
    if (!o)
        return DAT_ERROR(DAT_INVALID_HANDLE, 0);
    if (!context)
        return invalid_arg(2);
    *context = o->context;
    return DAT_SUCCESS;
}

DAT_RETURN get_handle_type(DAT_HANDLE h, DAT_HANDLE_TYPE *type) {
    ObjectHeader *o = any_object(h);
    if (!o)
        return DAT_ERROR(DAT_INVALID_HANDLE, 0);
    if (!type)
        return invalid_arg(2);
    *type = o->type;
    return DAT_SUCCESS;
}

DAT_RETURN pz_create(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE *pz_out) {
    return guarded("dat_pz_create", [&]() -> DAT_RETURN {
        Ia *ia;
        if (DAT_RETURN r = handle_cast(ia_handle, ia))
            return r;
        if (!pz_out)
            return invalid_arg(2);
        // dat_pz_create(3DAT): DAT_INSUFFICIENT_RESOURCES past max_pzs.
        if (!ia_has_room(*ia, DAT_HANDLE_TYPE_PZ, ia->caps.max_pzs))
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
        Pz *pz = make_object<Pz>(ia->provider, ia);
        if (!pz)
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
        ia_track(*ia, pz);
        publish(pz);
        *pz_out = pz;
        return DAT_SUCCESS;
    });
}

DAT_RETURN pz_query(DAT_PZ_HANDLE pz_handle, DAT_PZ_PARAM_MASK mask, DAT_PZ_PARAM *param) {
    return guarded("dat_pz_query", [&]() -> DAT_RETURN {
        Pz *pz;
        if (DAT_RETURN r = handle_cast(pz_handle, pz))
            return r;
        if (!param)
            return invalid_arg(3);
        if (mask & ~DAT_PZ_FIELD_ALL)
            return invalid_arg(2);
        if (mask & DAT_PZ_FIELD_IA_HANDLE)
            ia_handle_for_consumer(pz->ia, &param->ia_handle);
        return DAT_SUCCESS;
    });
}

DAT_RETURN pz_free(DAT_PZ_HANDLE pz_handle) {
    return guarded("dat_pz_free", [&]() -> DAT_RETURN {
        Pz *pz;
        if (DAT_RETURN r = handle_cast(pz_handle, pz))
            return r;
        if (pz->users.load() != 0)
            return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE);
        ia_untrack(*pz->ia, pz);
        destroy_object(pz);
        return DAT_SUCCESS;
    });
}

} // namespace slot
} // namespace dat2::kit
