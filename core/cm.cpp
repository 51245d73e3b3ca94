// SPDX-License-Identifier: BSD-3-Clause
// Connection management: the EP state machine of connect, accept, reject
// and disconnect (dat_ep_disconnect's seed), PSPs and connection requests,
// and the events the transport reports from its CM thread.
#include "boundary.hpp"
#include "ep.hpp"
#include "slots.hpp"

#include <netinet/in.h>

namespace dat2::kit {

namespace {

DAT_RETURN state_error(DAT_EP_STATE s) {
    switch (s) {
    case DAT_EP_STATE_UNCONNECTED: return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONNECTED);
    case DAT_EP_STATE_RESERVED: return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_RESERVED);
    case DAT_EP_STATE_PASSIVE_CONNECTION_PENDING:
        return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_PASSCONNPENDING);
    case DAT_EP_STATE_ACTIVE_CONNECTION_PENDING:
        return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_ACTCONNPENDING);
    case DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING:
        return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_TENTCONNPENDING);
    case DAT_EP_STATE_CONNECTED: return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_CONNECTED);
    case DAT_EP_STATE_DISCONNECT_PENDING: return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_DISCPENDING);
    case DAT_EP_STATE_DISCONNECTED: return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_DISCONNECTED);
    case DAT_EP_STATE_COMPLETION_PENDING: return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_COMPLPENDING);
    default: return DAT_ERROR(DAT_INVALID_STATE, 0);
    }
}

DAT_RETURN check_private_data(const Ia &ia, DAT_COUNT size, const void *data, int size_arg) {
    if (size < 0 || size > ia.max_private_data)
        return invalid_arg(size_arg);
    if (size > 0 && !data)
        return invalid_arg(size_arg + 1);
    return DAT_SUCCESS;
}

DAT_PORT_QUAL port_of(const sockaddr *sa) {
    if (sa->sa_family == AF_INET)
        return ntohs(reinterpret_cast<const sockaddr_in *>(sa)->sin_port);
    if (sa->sa_family == AF_INET6)
        return ntohs(reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_port);
    return 0;
}

std::size_t sockaddr_size(const sockaddr *sa) {
    return sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

DAT_RETURN start_connect(Ep &ep, const sockaddr *addr, DAT_CONN_QUAL qual, DAT_TIMEOUT timeout, DAT_COUNT pd_size,
                         const void *pd) {
    {
        std::lock_guard<std::mutex> lock(ep.mu);
        DAT_EP_STATE s = ep.state.load();
        if (s != DAT_EP_STATE_UNCONNECTED)
            return state_error(s);
        std::memset(&ep.remote, 0, sizeof ep.remote);
        std::memcpy(&ep.remote, addr, sockaddr_size(addr));
        ep.remote_port = qual;
        ep.state.store(DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
    }
    DAT_RETURN r = ep.ia->transport->connect(ep, addr, qual, pd, static_cast<std::size_t>(pd_size), timeout);
    if (r != DAT_SUCCESS) {
        std::lock_guard<std::mutex> lock(ep.mu);
        if (ep.state.load() == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING)
            ep.state.store(DAT_EP_STATE_UNCONNECTED);
    }
    return r;
}

DAT_RETURN make_psp(Ia *ia, const DAT_CONN_QUAL *qual, DAT_CONN_QUAL *assigned, DAT_EVD_HANDLE evd_handle,
                    DAT_PSP_FLAGS flags, DAT_PSP_HANDLE *psp_out) {
    Evd *evd;
    if (DAT_RETURN r = handle_cast_in(ia, evd_handle, evd, DAT_INVALID_HANDLE_EVD_CR))
        return r;
    if (!(evd->flags & DAT_EVD_CR_FLAG))
        return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR);
    if (flags != DAT_PSP_CONSUMER_FLAG && flags != DAT_PSP_PROVIDER_FLAG)
        return invalid_arg(4);
    if (flags == DAT_PSP_PROVIDER_FLAG) {
        DAT2_LOG(log::kGeneric, "dat_psp_create: DAT_PSP_PROVIDER_FLAG is not supported (ep_creator is NEVER)\n");
        return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
    }
    if (!psp_out)
        return invalid_arg(5);
    Psp *psp = make_object<Psp>(ia->provider, ia);
    if (!psp)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    psp->evd = evd;
    psp->flags = flags;
    DAT_CONN_QUAL got = qual ? *qual : 0;
    if (DAT_RETURN r = ia->transport->psp_open(*psp, qual, &got)) {
        destroy_object(psp);
        return r;
    }
    psp->conn_qual = got;
    if (assigned)
        *assigned = got;
    evd->users.fetch_add(1);
    ia_track(*ia, psp);
    publish(psp);
    *psp_out = psp;
    return DAT_SUCCESS;
}

} // namespace

void psp_release(Psp &psp) {
    Ia &ia = *psp.ia;
    ia.transport->psp_close(psp);
    {
        std::lock_guard<std::mutex> lock(ia.mu);
        for (ObjectHeader *o : ia.objects)
            if (o->type == DAT_HANDLE_TYPE_CR && static_cast<Cr *>(o)->psp == &psp)
                static_cast<Cr *>(o)->psp = nullptr;
    }
    psp.evd->users.fetch_sub(1);
    ia_untrack(ia, &psp);
    destroy_object(&psp);
}

void cr_destroy(Cr &cr) {
    Ia &ia = *cr.ia;
    ia.transport->cr_release(cr);
    ia_untrack(ia, &cr);
    destroy_object(&cr);
}

// ---- events from the transport ---------------------------------------------

void on_connection_request(Psp &psp, void *tp_request, const sockaddr *remote, const void *pdata,
                           std::size_t pdata_len) {
    Ia &ia = *psp.ia;
    Cr *cr = nullptr;
    try {
        cr = make_object<Cr>(ia.provider, &ia);
    } catch (...) {
    }
    if (!cr) {
        DAT2_ERR("connection request on qualifier %llu dropped: out of memory\n", (unsigned long long)psp.conn_qual);
        Cr tmp; // never published: only carries the request to reject it
        tmp.tp = tp_request;
        tmp.ia = &ia;
        tmp.psp = &psp;
        ia.transport->reject(tmp, nullptr, 0);
        ia.transport->cr_release(tmp);
        return;
    }
    cr->psp = &psp;
    cr->conn_qual = psp.conn_qual;
    cr->tp = tp_request;
    if (remote) {
        std::memcpy(&cr->remote, remote, sockaddr_size(remote));
        cr->remote_port = port_of(remote);
    }
    pdata_len = std::min(pdata_len, sizeof cr->private_data);
    if (pdata && pdata_len)
        std::memcpy(cr->private_data, pdata, pdata_len);
    cr->private_data_size = static_cast<DAT_COUNT>(pdata_len);
    ia_track(ia, cr);
    publish(cr);
    DAT_EVENT e;
    std::memset(&e, 0, sizeof e);
    e.event_number = DAT_CONNECTION_REQUEST_EVENT;
    auto &d = e.event_data.cr_arrival_event_data;
    d.sp_handle.psp_handle = &psp;
    d.local_ia_address_ptr = const_cast<sockaddr *>(ia.transport->address());
    d.conn_qual = psp.conn_qual;
    d.cr_handle = cr;
    d.truncate_flag = DAT_FALSE;
    evd_push(*psp.evd, e);
}

void on_established(Ep &ep, const void *pdata, std::size_t pdata_len) {
    {
        std::lock_guard<std::mutex> lock(ep.mu);
        DAT_EP_STATE s = ep.state.load();
        if (s != DAT_EP_STATE_ACTIVE_CONNECTION_PENDING && s != DAT_EP_STATE_COMPLETION_PENDING)
            return;
        bool passive = s == DAT_EP_STATE_COMPLETION_PENDING;
        ep.state.store(DAT_EP_STATE_CONNECTED);
        if (passive) // dat_evd_wait(3DAT): no private data on the passive side
            pdata_len = 0;
    }
    ep_post_connection_event(ep, DAT_CONNECTION_EVENT_ESTABLISHED, pdata, pdata_len);
}

void on_connect_failed(Ep &ep, DAT_EVENT_NUMBER reason, const void *pdata, std::size_t pdata_len) {
    {
        std::lock_guard<std::mutex> lock(ep.mu);
        DAT_EP_STATE s = ep.state.load();
        if (s != DAT_EP_STATE_ACTIVE_CONNECTION_PENDING && s != DAT_EP_STATE_COMPLETION_PENDING)
            return;
        ep.state.store(DAT_EP_STATE_DISCONNECTED);
    }
    ep_drain_completions(ep);
    ep_flush_outstanding(ep);
    ep_post_connection_event(ep, reason, pdata, pdata_len);
}

void on_disconnected(Ep &ep, bool broken) {
    {
        std::lock_guard<std::mutex> lock(ep.mu);
        DAT_EP_STATE s = ep.state.load();
        if (s != DAT_EP_STATE_CONNECTED && s != DAT_EP_STATE_DISCONNECT_PENDING &&
            s != DAT_EP_STATE_ACTIVE_CONNECTION_PENDING && s != DAT_EP_STATE_COMPLETION_PENDING)
            return;
        ep.state.store(DAT_EP_STATE_DISCONNECTED);
    }
    // dat_ep_disconnect(3DAT): completions of in-progress DTOs precede the
    // disconnect event; what is still outstanding is flushed, in order.
    ep_drain_completions(ep);
    ep_flush_outstanding(ep);
    ep_post_connection_event(ep, broken ? DAT_CONNECTION_EVENT_BROKEN : DAT_CONNECTION_EVENT_DISCONNECTED, nullptr,
                             0);
}

namespace slot {

DAT_RETURN ep_connect(DAT_EP_HANDLE ep_handle, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual, DAT_TIMEOUT timeout,
                      DAT_COUNT pd_size, const DAT_PVOID pd, DAT_QOS qos, DAT_CONNECT_FLAGS flags) {
    return guarded("dat_ep_connect", [&]() -> DAT_RETURN {
        Ep *ep;
        if (DAT_RETURN r = handle_cast(ep_handle, ep))
            return r;
        if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
            return DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
        if (DAT_RETURN r = check_private_data(*ep->ia, pd_size, pd, 5))
            return r;
        if (qos != DAT_QOS_BEST_EFFORT && (qos & ~DAT_QOS_BEST_EFFORT))
            return invalid_arg(7);
        if (flags != DAT_CONNECT_DEFAULT_FLAG) {
            if (flags == DAT_CONNECT_MULTIPATH_FLAG)
                return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
            return invalid_arg(8);
        }
        return start_connect(*ep, addr, qual, timeout, pd_size, pd);
    });
}

DAT_RETURN ep_dup_connect(DAT_EP_HANDLE ep_handle, DAT_EP_HANDLE dup_handle, DAT_TIMEOUT timeout, DAT_COUNT pd_size,
                          const DAT_PVOID pd, DAT_QOS qos) {
    return guarded("dat_ep_dup_connect", [&]() -> DAT_RETURN {
        Ep *ep, *dup;
        if (DAT_RETURN r = handle_cast(ep_handle, ep))
            return r;
        if (DAT_RETURN r = handle_cast_in(ep->ia, dup_handle, dup, DAT_INVALID_HANDLE2))
            return r;
        if (DAT_RETURN r = check_private_data(*ep->ia, pd_size, pd, 4))
            return r;
        if (qos & ~DAT_QOS_BEST_EFFORT)
            return invalid_arg(6);
        sockaddr_storage remote;
        DAT_CONN_QUAL qual;
        {
            std::lock_guard<std::mutex> lock(dup->mu);
            DAT_EP_STATE s = dup->state.load();
            if (s != DAT_EP_STATE_CONNECTED)
                return state_error(s);
            remote = dup->remote;
            qual = dup->remote_port;
        }
        return start_connect(*ep, reinterpret_cast<sockaddr *>(&remote), qual, timeout, pd_size, pd);
    });
}

DAT_RETURN ep_disconnect(DAT_EP_HANDLE ep_handle, DAT_CLOSE_FLAGS flags) {
    return guarded("dat_ep_disconnect", [&]() -> DAT_RETURN {
        Ep *ep;
        if (DAT_RETURN r = handle_cast(ep_handle, ep))
            return r;
        if (flags != DAT_CLOSE_ABRUPT_FLAG && flags != DAT_CLOSE_GRACEFUL_FLAG)
            return invalid_arg(2);
        bool graceful = flags == DAT_CLOSE_GRACEFUL_FLAG;
        {
            std::lock_guard<std::mutex> lock(ep->mu);
            DAT_EP_STATE s = ep->state.load();
            switch (s) {
            case DAT_EP_STATE_DISCONNECTED:
                return DAT_SUCCESS; // a no-op per the seed
            case DAT_EP_STATE_CONNECTED:
                ep->state.store(DAT_EP_STATE_DISCONNECT_PENDING);
                break;
            case DAT_EP_STATE_DISCONNECT_PENDING:
                if (graceful)
                    return DAT_SUCCESS; // "has no effect"
                break;
            case DAT_EP_STATE_ACTIVE_CONNECTION_PENDING:
            case DAT_EP_STATE_COMPLETION_PENDING:
                graceful = false; // aborts the establishment
                break;
            default:
                return state_error(s);
            }
        }
        return ep->ia->transport->disconnect(*ep, graceful);
    });
}

DAT_RETURN psp_create(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL qual, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS flags,
                      DAT_PSP_HANDLE *psp_out) {
    return guarded("dat_psp_create", [&]() -> DAT_RETURN {
        Ia *ia;
        if (DAT_RETURN r = handle_cast(ia_handle, ia))
            return r;
        return make_psp(ia, &qual, nullptr, evd, flags, psp_out);
    });
}

DAT_RETURN psp_create_any(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL *qual, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS flags,
                          DAT_PSP_HANDLE *psp_out) {
    return guarded("dat_psp_create_any", [&]() -> DAT_RETURN {
        Ia *ia;
        if (DAT_RETURN r = handle_cast(ia_handle, ia))
            return r;
        if (!qual)
            return invalid_arg(2);
        return make_psp(ia, nullptr, qual, evd, flags, psp_out);
    });
}

DAT_RETURN psp_query(DAT_PSP_HANDLE psp_handle, DAT_PSP_PARAM_MASK mask, DAT_PSP_PARAM *param) {
    return guarded("dat_psp_query", [&]() -> DAT_RETURN {
        Psp *psp;
        if (DAT_RETURN r = handle_cast(psp_handle, psp))
            return r;
        if (!param)
            return invalid_arg(3);
        if (mask & ~DAT_PSP_FIELD_ALL)
            return invalid_arg(2);
        if (mask & DAT_PSP_FIELD_IA_HANDLE)
            ia_handle_for_consumer(psp->ia, &param->ia_handle);
        if (mask & DAT_PSP_FIELD_CONN_QUAL)
            param->conn_qual = psp->conn_qual;
        if (mask & DAT_PSP_FIELD_EVD_HANDLE)
            param->evd_handle = psp->evd;
        if (mask & DAT_PSP_FIELD_PSP_FLAGS)
            param->psp_flags = psp->flags;
        return DAT_SUCCESS;
    });
}

DAT_RETURN psp_free(DAT_PSP_HANDLE psp_handle) {
    return guarded("dat_psp_free", [&]() -> DAT_RETURN {
        Psp *psp;
        if (DAT_RETURN r = handle_cast(psp_handle, psp))
            return r;
        psp_release(*psp);
        return DAT_SUCCESS;
    });
}

DAT_RETURN cr_query(DAT_CR_HANDLE cr_handle, DAT_CR_PARAM_MASK mask, DAT_CR_PARAM *param) {
    return guarded("dat_cr_query", [&]() -> DAT_RETURN {
        Cr *cr;
        if (DAT_RETURN r = handle_cast(cr_handle, cr))
            return r;
        if (!param)
            return invalid_arg(3);
        if (mask & ~DAT_CR_FIELD_ALL)
            return invalid_arg(2);
        if (mask & DAT_CR_FIELD_REMOTE_IA_ADDRESS_PTR)
            param->remote_ia_address_ptr = reinterpret_cast<sockaddr *>(&cr->remote);
        if (mask & DAT_CR_FIELD_REMOTE_PORT_QUAL)
            param->remote_port_qual = cr->remote_port;
        if (mask & DAT_CR_FIELD_PRIVATE_DATA_SIZE)
            param->private_data_size = cr->private_data_size;
        if (mask & DAT_CR_FIELD_PRIVATE_DATA)
            param->private_data = cr->private_data_size ? cr->private_data : nullptr;
        if (mask & DAT_CR_FIELD_LOCAL_EP_HANDLE)
            param->local_ep_handle = cr->provider_ep;
        return DAT_SUCCESS;
    });
}

DAT_RETURN cr_accept(DAT_CR_HANDLE cr_handle, DAT_EP_HANDLE ep_handle, DAT_COUNT pd_size, const DAT_PVOID pd) {
    return guarded("dat_cr_accept", [&]() -> DAT_RETURN {
        Cr *cr;
        if (DAT_RETURN r = handle_cast(cr_handle, cr))
            return r;
        Ep *ep;
        if (DAT_RETURN r = handle_cast_in(cr->ia, ep_handle, ep))
            return r;
        if (DAT_RETURN r = check_private_data(*ep->ia, pd_size, pd, 3))
            return r;
        {
            std::lock_guard<std::mutex> lock(ep->mu);
            DAT_EP_STATE s = ep->state.load();
            if (s != DAT_EP_STATE_UNCONNECTED)
                return state_error(s);
            ep->remote = cr->remote;
            ep->remote_port = cr->remote_port;
            ep->state.store(DAT_EP_STATE_COMPLETION_PENDING);
        }
        DAT_RETURN r = ep->ia->transport->accept(*cr, *ep, pd, static_cast<std::size_t>(pd_size));
        if (r != DAT_SUCCESS) {
            std::lock_guard<std::mutex> lock(ep->mu);
            if (ep->state.load() == DAT_EP_STATE_COMPLETION_PENDING)
                ep->state.store(DAT_EP_STATE_UNCONNECTED);
            return r;
        }
        cr_destroy(*cr); // dat_cr_accept(3DAT): the CR is gone after accept
        return DAT_SUCCESS;
    });
}

DAT_RETURN cr_reject(DAT_CR_HANDLE cr_handle, DAT_COUNT pd_size, const DAT_PVOID pd) {
    return guarded("dat_cr_reject", [&]() -> DAT_RETURN {
        Cr *cr;
        if (DAT_RETURN r = handle_cast(cr_handle, cr))
            return r;
        if (DAT_RETURN r = check_private_data(*cr->ia, pd_size, pd, 2))
            return r;
        DAT_RETURN r = cr->ia->transport->reject(*cr, pd, static_cast<std::size_t>(pd_size));
        cr_destroy(*cr);
        return r;
    });
}

} // namespace slot
} // namespace dat2::kit
