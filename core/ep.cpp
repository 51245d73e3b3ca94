// SPDX-License-Identifier: BSD-3-Clause
// Endpoints: creation and attributes, reset and free in every state (the
// post paths are core/dto.cpp's).
#include "ep.hpp"

#include "boundary.hpp"
#include "log.hpp"
#include "lmr.hpp"
#include "slots.hpp"
#include "srq.hpp"
#include "wait.hpp"

#include <algorithm>

namespace dat2::kit {

namespace {

DAT_EP_ATTR default_attr(const Ia &ia) {
    DAT_EP_ATTR a;
    std::memset(&a, 0, sizeof a);
    a.service_type = DAT_SERVICE_TYPE_RC;
    a.max_message_size = 1u << 30;
    a.max_rdma_size = 1u << 30;
    a.qos = DAT_QOS_BEST_EFFORT;
    a.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.max_recv_dtos = std::min(kDefaultDtos, ia.caps.max_dtos);
    a.max_request_dtos = std::min(kDefaultDtos, ia.caps.max_dtos);
    a.max_recv_iov = a.max_request_iov = a.max_rdma_read_iov = a.max_rdma_write_iov = std::min(4, ia.caps.max_iov);
    a.max_rdma_read_in = 8;
    a.max_rdma_read_out = 8;
    a.srq_soft_hw = DAT_HW_DEFAULT;
    return a;
}

// Attributes beyond what the IA reports (dat_ia_query) are invalid, not
// silently clamped: a DTO the transport cannot post must fail at creation.
DAT_RETURN check_attr(const Ia &ia, const DAT_EP_ATTR &a, int arg) {
    auto within = [](DAT_COUNT v, DAT_COUNT max) { return v >= 0 && v <= max; };
    if (a.service_type != DAT_SERVICE_TYPE_RC)
        return invalid_arg(arg);
    if (!within(a.max_recv_dtos, ia.caps.max_dtos) || !within(a.max_request_dtos, ia.caps.max_dtos))
        return invalid_arg(arg);
    if (!within(a.max_recv_iov, ia.caps.max_iov) || !within(a.max_request_iov, ia.caps.max_iov) ||
        !within(a.max_rdma_read_iov, ia.caps.max_iov) || !within(a.max_rdma_write_iov, ia.caps.max_iov))
        return invalid_arg(arg);
    if ((a.recv_completion_flags & ~kValidCompletionFlags) || (a.request_completion_flags & ~kValidCompletionFlags))
        return invalid_arg(arg);
    // dat_ep_modify(3DAT): "Recv posting does not support
    // DAT_COMPLETION_SUPPRESS_FLAG or DAT_COMPLETION_BARRIER_FENCE_FLAG".
    if (a.recv_completion_flags & kNotForReceives)
        return invalid_arg(arg);
    if (a.max_rdma_read_in < 0 || a.max_rdma_read_out < 0)
        return invalid_arg(arg);
    // Not a DAT_QOS value; a value the IA does not offer is left to the
    // connect, which names it (DAT_MODEL_NOT_SUPPORTED).
    if (!qos_known(a.qos))
        return invalid_arg(arg);
    return DAT_SUCCESS;
}

void normalize_attr(DAT_EP_ATTR &a) {
    if (a.max_recv_iov == 0)
        a.max_recv_iov = 1;
    if (a.max_request_iov == 0)
        a.max_request_iov = 1;
    if (a.max_rdma_read_iov == 0)
        a.max_rdma_read_iov = a.max_request_iov;
    if (a.max_rdma_write_iov == 0)
        a.max_rdma_write_iov = a.max_request_iov;
}

bool consumer_notified(DAT_COMPLETION_FLAGS f) {
    return (f & (DAT_COMPLETION_UNSIGNALLED_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG)) != 0;
}

void count_notify_streams(Ep &ep, int delta) {
    // Receives taken from an SRQ always complete with a signal.
    if (ep.recv_evd && !ep.srq && consumer_notified(ep.attr.recv_completion_flags))
        ep.recv_evd->notify_streams.fetch_add(delta);
    if (ep.request_evd && (ep.attr.request_completion_flags & DAT_COMPLETION_UNSIGNALLED_FLAG))
        ep.request_evd->notify_streams.fetch_add(delta);
}

void detach(Ep &ep) {
    count_notify_streams(ep, -1);
    release_connect_evd(ep);
    for (Evd *evd : {ep.recv_evd, ep.request_evd})
        if (evd)
            evd->users.fetch_sub(1);
    if (ep.pz)
        ep.pz->users.fetch_sub(1);
}

} // namespace

bool ep_release_all(Ep &ep) {
    Ia &ia = *ep.ia;
    {
        std::lock_guard<std::mutex> lock(ep.mu);
        if (ep.releasing)
            return false; // another thread frees it (dat_ep_free beside dat_ia_close)
        ep.releasing = true;
    }
    wait_count_at_most(ep.cm_calls, 0);
    EventLoop::Timer *timer;
    {
        // Taken away under ep.mu, freed outside it: timer_free waits for a
        // running connect_timed_out, which takes ep.mu.
        std::lock_guard<std::mutex> lock(ep.mu);
        timer = ep.connect_timer;
        ep.connect_timer = nullptr;
    }
    ia.loop->timer_free(timer);
    ia.transport->ep_close(ep);
    ep_await_writers(ep);
    ep_drain_completions(ep);
    ia.transport->ep_free(ep);
    if (ep.cr) {
        ep.cr->provider_ep = nullptr;
        ep.cr = nullptr;
    }
    detach(ep);
    if (ep.srq)
        srq_detach(*ep.srq, ep);
    ia_untrack(ia, &ep);
    destroy_object(&ep);
    return true;
}

// dat_psp_create(3DAT) with DAT_PSP_PROVIDER_FLAG, dat_rsp_create(3DAT)
// with no EP: an Endpoint with no PZ and no EVDs and default attributes,
// which the Consumer completes with dat_ep_modify before accepting.
Ep *ep_create_for_provider(Ia &ia, DAT_EP_STATE state) {
    if (!ia_has_room(ia, DAT_HANDLE_TYPE_EP, ia.caps.max_eps))
        return nullptr;
    Ep *ep = make_object<Ep>(ia.provider, &ia);
    if (!ep)
        return nullptr;
    ep->attr = default_attr(ia);
    normalize_attr(ep->attr);
    try {
        ep_build_records(*ep);
    } catch (...) {
        destroy_object(ep);
        return nullptr;
    }
    ep->transport_ready.store(ia.caps.recv_before_connect);
    if (ia.transport->ep_open(*ep, ep->tp) != DAT_SUCCESS) {
        destroy_object(ep);
        return nullptr;
    }
    ep->state.store(state);
    ia_track(ia, ep);
    publish(ep);
    return ep;
}

DAT_RETURN ep_create_common(const char *call, DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz_handle,
                            DAT_EVD_HANDLE recv_evd_handle, DAT_EVD_HANDLE request_evd_handle,
                            DAT_EVD_HANDLE connect_evd_handle, Srq *srq, const DAT_EP_ATTR *attr, int attr_arg,
                            DAT_EP_HANDLE *ep_out) {
    return guarded(call, [&]() -> DAT_RETURN {
        Ia *ia;
        if (DAT_RETURN r = handle_cast(ia_handle, ia))
            return r;
        Pz *pz;
        if (DAT_RETURN r = handle_cast_in(ia, pz_handle, pz))
            return r;
        Evd *recv_evd = nullptr, *request_evd = nullptr, *connect_evd = nullptr;
        if (recv_evd_handle != DAT_HANDLE_NULL) {
            if (DAT_RETURN r = handle_cast_in(ia, recv_evd_handle, recv_evd, DAT_INVALID_HANDLE_EVD_RECV))
                return r;
            if (!(recv_evd->flags & DAT_EVD_DTO_FLAG))
                return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_RECV);
        }
        if (request_evd_handle != DAT_HANDLE_NULL) {
            if (DAT_RETURN r = handle_cast_in(ia, request_evd_handle, request_evd, DAT_INVALID_HANDLE_EVD_REQUEST))
                return r;
            if (!(request_evd->flags & DAT_EVD_DTO_FLAG))
                return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
        }
        if (connect_evd_handle != DAT_HANDLE_NULL) {
            if (DAT_RETURN r = connect_evd_cast(*ia, connect_evd_handle, connect_evd))
                return r;
            if (!(connect_evd->flags & DAT_EVD_CONNECTION_FLAG))
                return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CONN);
        }
        if (!ep_out)
            return invalid_arg(attr_arg + 1);
        DAT_EP_ATTR a = attr ? *attr : default_attr(*ia);
        if (srq) // dat_ep_create_with_srq(3DAT): max_recv_iov "is ignored"
            a.max_recv_iov = srq->max_recv_iov;
        if (DAT_RETURN r = check_attr(*ia, a, attr_arg))
            return r;
        normalize_attr(a);
        if (!ia_has_room(*ia, DAT_HANDLE_TYPE_EP, ia->caps.max_eps))
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
        Ep *ep = make_object<Ep>(ia->provider, ia);
        if (!ep)
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
        ep->pz = pz;
        ep->recv_evd = recv_evd;
        ep->request_evd = request_evd;
        ep->connect_evd = connect_evd;
        ep->attr = a;
        ep->srq = srq;
        try {
            ep_build_records(*ep);
        } catch (...) {
            destroy_object(ep);
            throw;
        }
        ep->transport_ready.store(ia->caps.recv_before_connect);
        if (DAT_RETURN r = ia->transport->ep_open(*ep, ep->tp)) {
            destroy_object(ep);
            return r;
        }
        for (Evd *evd : {recv_evd, request_evd, connect_evd})
            if (evd)
                evd->users.fetch_add(1);
        register_connect_evd(*ep);
        count_notify_streams(*ep, +1);
        pz->users.fetch_add(1);
        if (srq)
            srq_attach(*srq, *ep);
        ia_track(*ia, ep);
        publish(ep);
        *ep_out = ep;
        return DAT_SUCCESS;
    });
}

namespace slot {

DAT_RETURN ep_create(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz_handle, DAT_EVD_HANDLE recv_evd_handle,
                     DAT_EVD_HANDLE request_evd_handle, DAT_EVD_HANDLE connect_evd_handle, const DAT_EP_ATTR *attr,
                     DAT_EP_HANDLE *ep_out) {
    return ep_create_common("dat_ep_create", ia_handle, pz_handle, recv_evd_handle, request_evd_handle,
                            connect_evd_handle, nullptr, attr, 6, ep_out);
}

DAT_RETURN ep_query(DAT_EP_HANDLE ep_handle, DAT_EP_PARAM_MASK mask, DAT_EP_PARAM *param) {
    return guarded("dat_ep_query", [&]() -> DAT_RETURN {
        Ep *ep;
        if (DAT_RETURN r = handle_cast(ep_handle, ep))
            return r;
        if (!param)
            return invalid_arg(3);
        if (mask & ~DAT_EP_FIELD_ALL)
            return invalid_arg(2);
        std::lock_guard<std::mutex> lock(ep->mu);
        if (mask & DAT_EP_FIELD_IA_HANDLE)
            ia_handle_for_consumer(ep->ia, &param->ia_handle);
        if (mask & DAT_EP_FIELD_EP_STATE)
            param->ep_state = ep->state.load();
        if (mask & DAT_EP_FIELD_LOCAL_IA_ADDRESS_PTR)
            param->local_ia_address_ptr = const_cast<sockaddr *>(ep->ia->transport->address());
        if (mask & DAT_EP_FIELD_LOCAL_PORT_QUAL)
            param->local_port_qual = ep->local_port;
        if (mask & DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR)
            param->remote_ia_address_ptr = reinterpret_cast<sockaddr *>(&ep->remote);
        if (mask & DAT_EP_FIELD_REMOTE_PORT_QUAL)
            param->remote_port_qual = ep->remote_port;
        if (mask & DAT_EP_FIELD_PZ_HANDLE)
            param->pz_handle = ep->pz;
        if (mask & DAT_EP_FIELD_RECV_EVD_HANDLE)
            param->recv_evd_handle = ep->recv_evd;
        if (mask & DAT_EP_FIELD_REQUEST_EVD_HANDLE)
            param->request_evd_handle = ep->request_evd;
        if (mask & DAT_EP_FIELD_CONNECT_EVD_HANDLE)
            param->connect_evd_handle = ep->connect_evd;
        if (mask & DAT_EP_FIELD_SRQ_HANDLE)
            param->srq_handle = ep->srq;
        if (mask & DAT_EP_FIELD_EP_ATTR_ALL)
            param->ep_attr = ep->attr;
        return DAT_SUCCESS;
    });
}

DAT_RETURN ep_modify(DAT_EP_HANDLE ep_handle, DAT_EP_PARAM_MASK mask, const DAT_EP_PARAM *param) {
    return guarded("dat_ep_modify", [&]() -> DAT_RETURN {
        Ep *ep;
        if (DAT_RETURN r = handle_cast(ep_handle, ep))
            return r;
        if (!param)
            return invalid_arg(3);
        constexpr DAT_EP_PARAM_MASK kModifiable = DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_RECV_EVD_HANDLE |
                                                  DAT_EP_FIELD_REQUEST_EVD_HANDLE | DAT_EP_FIELD_CONNECT_EVD_HANDLE |
                                                  DAT_EP_FIELD_EP_ATTR_ALL;
        if (mask == 0 || (mask & ~kModifiable))
            return invalid_arg(2);
        std::lock_guard<std::mutex> lock(ep->mu);
        // dat_ep_modify(3DAT): EVDs and attributes before a connection is
        // requested or accepted (Unconnected, Reserved, Passive and Tentative
        // Connection Pending); the PZ only when quiescent (Unconnected,
        // Tentative Connection Pending).
        DAT_EP_STATE s = ep->state.load();
        const bool quiescent = s == DAT_EP_STATE_UNCONNECTED || s == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING;
        if (!quiescent && s != DAT_EP_STATE_RESERVED && s != DAT_EP_STATE_PASSIVE_CONNECTION_PENDING)
            return DAT_ERROR(DAT_INVALID_STATE, 0);
        if ((mask & DAT_EP_FIELD_PZ_HANDLE) && !quiescent)
            return DAT_ERROR(DAT_INVALID_STATE, 0);
        Pz *pz = ep->pz;
        Evd *evds[3] = {ep->recv_evd, ep->request_evd, ep->connect_evd};
        if (mask & DAT_EP_FIELD_PZ_HANDLE)
            if (DAT_RETURN r = handle_cast_in(ep->ia, param->pz_handle, pz))
                return r;
        const DAT_EP_PARAM_MASK fields[3] = {DAT_EP_FIELD_RECV_EVD_HANDLE, DAT_EP_FIELD_REQUEST_EVD_HANDLE,
                                             DAT_EP_FIELD_CONNECT_EVD_HANDLE};
        const DAT_EVD_HANDLE given[3] = {param->recv_evd_handle, param->request_evd_handle, param->connect_evd_handle};
        const DAT_EVD_FLAGS need[3] = {DAT_EVD_DTO_FLAG, DAT_EVD_DTO_FLAG, DAT_EVD_CONNECTION_FLAG};
        for (int i = 0; i < 3; ++i) {
            if (!(mask & fields[i]))
                continue;
            evds[i] = nullptr;
            if (given[i] == DAT_HANDLE_NULL)
                continue;
            if (i == 2) {
                if (DAT_RETURN r = connect_evd_cast(*ep->ia, given[i], evds[i]))
                    return r;
            } else if (DAT_RETURN r = handle_cast_in(ep->ia, given[i], evds[i])) {
                return r;
            }
            if (!(evds[i]->flags & need[i]))
                return invalid_arg(3);
        }
        if (ep->srq && !evds[0])
            return invalid_arg(3); // the SRQ's receives complete on the recv EVD (see ep_create_with_srq)
        DAT_EP_ATTR a = ep->attr;
        if (mask & DAT_EP_FIELD_EP_ATTR_ALL) {
            const DAT_EP_ATTR &p = param->ep_attr;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE)
                a.max_message_size = p.max_message_size;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_SIZE)
                a.max_rdma_size = p.max_rdma_size;
            if (mask & DAT_EP_FIELD_EP_ATTR_QOS)
                a.qos = p.qos;
            if (mask & DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS)
                a.recv_completion_flags = p.recv_completion_flags;
            if (mask & DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS)
                a.request_completion_flags = p.request_completion_flags;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS)
                a.max_recv_dtos = p.max_recv_dtos;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS)
                a.max_request_dtos = p.max_request_dtos;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV)
                a.max_recv_iov = p.max_recv_iov;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV)
                a.max_request_iov = p.max_request_iov;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN)
                a.max_rdma_read_in = p.max_rdma_read_in;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT)
                a.max_rdma_read_out = p.max_rdma_read_out;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IOV)
                a.max_rdma_read_iov = p.max_rdma_read_iov;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_WRITE_IOV)
                a.max_rdma_write_iov = p.max_rdma_write_iov;
            if ((mask & DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE) && p.service_type != DAT_SERVICE_TYPE_RC)
                return invalid_arg(3);
            if (DAT_RETURN r = check_attr(*ep->ia, a, 3))
                return r;
            normalize_attr(a);
        }
        const bool rebind = pz != ep->pz || evds[0] != ep->recv_evd || evds[1] != ep->request_evd;
        const bool resize =
            a.max_recv_dtos != ep->attr.max_recv_dtos || a.max_request_dtos != ep->attr.max_request_dtos;
        const DAT_EP_ATTR &was = ep->attr;
        const bool remake = rebind || resize || a.max_recv_iov != was.max_recv_iov ||
                            a.max_request_iov != was.max_request_iov || a.max_rdma_read_iov != was.max_rdma_read_iov ||
                            a.max_rdma_write_iov != was.max_rdma_write_iov ||
                            a.max_rdma_read_in != was.max_rdma_read_in || a.max_rdma_read_out != was.max_rdma_read_out;
        // Receives posted before the connection stay with the EP: what would
        // remake its records or its transport endpoint (the PZ, the EVDs, the
        // queue sizes) waits until none is posted; dat_ep_modify(3DAT) lets
        // the recv completion flags change only "before posting of any Recvs".
        if ((ep->recvs_posted.load() || ep->requests_posted.load()) &&
            (remake || a.recv_completion_flags != was.recv_completion_flags))
            return DAT_ERROR(DAT_INVALID_STATE, 0);
        // The new references before the old ones go: dat_evd_free and
        // dat_pz_free look only at the count, and an EVD or PZ the EP keeps
        // must not read as unused in between.
        for (Evd *evd : evds)
            if (evd)
                evd->users.fetch_add(1);
        if (pz)
            pz->users.fetch_add(1);
        detach(*ep);
        ep->pz = pz;
        ep->recv_evd = evds[0];
        ep->request_evd = evds[1];
        ep->connect_evd = evds[2];
        register_connect_evd(*ep);
        if (remake)
            ++ep->rebinds;
        ep->attr = a;
        count_notify_streams(*ep, +1);
        if (resize)
            ep_build_records(*ep);
        return DAT_SUCCESS;
    });
}

DAT_RETURN ep_get_status(DAT_EP_HANDLE ep_handle, DAT_EP_STATE *state, DAT_BOOLEAN *recv_idle,
                         DAT_BOOLEAN *request_idle) {
    Ep *ep;
    if (DAT_RETURN r = handle_cast(ep_handle, ep))
        return r;
    if (state)
        *state = ep->state.load();
    // A flushed record stays counted until the transport's late completion
    // for it comes (or never, for a connection it dropped), but the
    // consumer has had its completion: only posted and held ones are
    // outstanding (dat_ep_get_status(3DAT)).
    auto idle = [ep](const std::atomic<int> &counted, bool recv) {
        if (counted.load() == 0)
            return DAT_TRUE;
        if (recv && ep->srq)
            return DAT_FALSE; // its receives are the SRQ's records, counted here as the EP takes them
        std::lock_guard<Lock> lock(ep->ops_mu);
        for (const Op &op : ep->ops) {
            const auto st = op.state.load(std::memory_order_relaxed);
            if (op.is_recv == recv && (st == Op::kPosted || st == Op::kHeld))
                return DAT_FALSE;
        }
        return DAT_TRUE;
    };
    if (recv_idle)
        *recv_idle = idle(ep->recvs_posted, true);
    if (request_idle)
        *request_idle = idle(ep->requests_posted, false);
    return DAT_SUCCESS;
}

DAT_RETURN ep_free(DAT_EP_HANDLE ep_handle) {
    return guarded("dat_ep_free", [&]() -> DAT_RETURN {
        Ep *ep;
        if (DAT_RETURN r = handle_cast(ep_handle, ep))
            return r;
        {
            std::lock_guard<std::mutex> lock(ep->mu);
            switch (ep->state.load()) {
            case DAT_EP_STATE_RESERVED: return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_RESERVED);
            case DAT_EP_STATE_PASSIVE_CONNECTION_PENDING:
                return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_PASSCONNPENDING);
            case DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING:
                return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_TENTCONNPENDING);
            default: break;
            }
            // From here on the CM thread ignores this EP's events.
            ep->state.store(DAT_EP_STATE_DISCONNECTED);
        }
        ep_release_all(*ep);
        return DAT_SUCCESS;
    });
}

DAT_RETURN ep_reset(DAT_EP_HANDLE ep_handle) {
    return guarded("dat_ep_reset", [&]() -> DAT_RETURN {
        Ep *ep;
        if (DAT_RETURN r = handle_cast(ep_handle, ep))
            return r;
        {
            std::lock_guard<std::mutex> lock(ep->mu);
            DAT_EP_STATE s = ep->state.load();
            if (s == DAT_EP_STATE_UNCONNECTED)
                return DAT_SUCCESS;
            if (s != DAT_EP_STATE_DISCONNECTED)
                return DAT_ERROR(DAT_INVALID_STATE, 0);
        }
        // The transport is never called with ep.mu held (transport.hpp).
        ep->ia->transport->ep_reset(*ep);
        ep_drain_completions(*ep);
        ep_reclaim_records(*ep);
        // The next connection's endpoint takes receives once it exists.
        ep->transport_ready.store(ep->ia->caps.recv_before_connect, std::memory_order_release);
        std::lock_guard<std::mutex> lock(ep->mu);
        std::memset(&ep->remote, 0, sizeof ep->remote);
        ep->remote_port = 0;
        ep->local_port = 0;
        ep->state.store(DAT_EP_STATE_UNCONNECTED);
        return DAT_SUCCESS;
    });
}

// dat_ep_recv_query and dat_ep_set_watermark: core/srq.cpp (receive-side accounting).

} // namespace slot
} // namespace dat2::kit
