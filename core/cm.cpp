// SPDX-License-Identifier: BSD-3-Clause
// Connection management: the EP state machine of connect, accept, reject
// and disconnect (dat_ep_disconnect's seed), connect timeouts, connection
// requests, and the events a transport reports (core/transport.hpp).
#include "boundary.hpp"
#include "ep.hpp"
#include "slots.hpp"
#include "sockaddr.hpp"
#include "srq.hpp"

#include <netinet/in.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace dat2::kit {

DAT_RETURN ep_state_error(DAT_EP_STATE s) {
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

namespace {

DAT_RETURN check_private_data(const Ia &ia, DAT_COUNT size, const void *data, int size_arg) {
    if (size < 0 || size > ia.caps.max_private_data)
        return invalid_arg(size_arg);
    if (size > 0 && !data)
        return invalid_arg(size_arg + 1);
    return DAT_SUCCESS;
}

// The connection is over before it was established, or ended: what was
// posted completes (flushed, in posting order), then the event.
void report_connection_end(Ep &ep, DAT_EVENT_NUMBER number, const void *pdata, std::size_t pdata_len,
                           bool refused = false) {
    ep_drain_completions(ep);
    ep_await_writers(ep);
    ep_flush_outstanding(ep, refused);
    ep_post_connection_event(ep, number, pdata, pdata_len);
}

// Under ep.mu: the loop thread comes here for an Endpoint whose
// dat_ep_free may be taking its timer away at that moment (ep_release_all).
void disarm_connect_timer(Ep &ep) {
    std::lock_guard<std::mutex> lock(ep.mu);
    if (ep.connect_timer)
        ep.ia->loop->disarm(ep.connect_timer);
}

// A connection call inside the transport (Ep::cm_calls), entered under
// ep.mu together with the state check that allows it.
class CmCall {
public:
    CmCall() = default;
    CmCall(const CmCall &) = delete;
    CmCall &operator=(const CmCall &) = delete;
    ~CmCall() {
        if (ep_)
            ep_->cm_calls.fetch_sub(1, std::memory_order_release);
    }
    // Under ep.mu: false when the EP is being freed (its handle is going).
    bool enter(Ep &ep) {
        if (ep.releasing)
            return false;
        ep.cm_calls.fetch_add(1, std::memory_order_relaxed);
        ep_ = &ep;
        return true;
    }

private:
    Ep *ep_ = nullptr;
};

// A CR answered by this call (Cr::claimed): given back unless the answer
// consumed it (kept()).
class CrClaim {
public:
    CrClaim() = default;
    CrClaim(const CrClaim &) = delete;
    CrClaim &operator=(const CrClaim &) = delete;
    ~CrClaim() {
        if (cr_)
            cr_->claimed.store(false, std::memory_order_release);
    }
    bool take(Cr &cr) {
        if (!cr_claim(cr))
            return false;
        cr_ = &cr;
        return true;
    }
    void kept() { cr_ = nullptr; } // before the CR is destroyed

private:
    Cr *cr_ = nullptr;
};

// dat_ep_connect's timeout, on the IA's event loop. The state moves first,
// under ep.mu, so that an establishment the transport reports meanwhile is
// ignored; then the transport drops the attempt.
void connect_timed_out(Ep &ep) {
    {
        std::lock_guard<std::mutex> lock(ep.mu);
        if (ep.state.load() != DAT_EP_STATE_ACTIVE_CONNECTION_PENDING)
            return;
        ep.state.store(DAT_EP_STATE_DISCONNECTED);
    }
    DAT2_LOG(log::kGeneric, "%s: connect on EP %p timed out\n", ep.ia->name.c_str(), (void *)&ep);
    ep.ia->transport->connect_cancel(ep);
    report_connection_end(ep, DAT_CONNECTION_EVENT_TIMED_OUT, nullptr, 0);
}

DAT_RETURN start_connect(Ep &ep, const sockaddr *addr, DAT_CONN_QUAL qual, DAT_TIMEOUT timeout, DAT_COUNT pd_size,
                         const void *pd) {
    EventLoop &loop = *ep.ia->loop;
    CmCall call;
    {
        std::lock_guard<std::mutex> lock(ep.mu); // see disarm_connect_timer
        if (!call.enter(ep))
            return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        if (timeout != DAT_TIMEOUT_INFINITE && !ep.connect_timer)
            ep.connect_timer = loop.timer([&ep] { connect_timed_out(ep); });
    }
    {
        std::lock_guard<std::mutex> lock(ep.mu);
        DAT_EP_STATE s = ep.state.load();
        if (s != DAT_EP_STATE_UNCONNECTED)
            return ep_state_error(s);
        std::memset(&ep.remote, 0, sizeof ep.remote);
        std::memcpy(&ep.remote, addr, sockaddr_size(addr));
        ep.remote_port = qual;
        ep.local_port = 0; // this connection's is known once established, not the last one's
        ep.state.store(DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
    }
    if (timeout != DAT_TIMEOUT_INFINITE)
        loop.arm(ep.connect_timer, Deadline::after_us(timeout));
    DAT_RETURN r = ep.ia->transport->connect(ep, addr, qual, pd, static_cast<std::size_t>(pd_size), timeout);
    if (r != DAT_SUCCESS) {
        disarm_connect_timer(ep);
        std::lock_guard<std::mutex> lock(ep.mu);
        if (ep.state.load() == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING)
            ep.state.store(DAT_EP_STATE_UNCONNECTED);
    }
    return r;
}

// The Endpoint a request came with (RSP, DAT_PSP_PROVIDER_FLAG) goes back:
// an RSP's Consumer EP to Unconnected, a provider-created one away.
void release_request_ep(Cr &cr) {
    Ep *ep = cr.provider_ep;
    cr.provider_ep = nullptr;
    if (!ep)
        return;
    bool release = false;
    {
        std::lock_guard<std::mutex> lock(ep->mu);
        DAT_EP_STATE s = ep->state.load();
        if (s != DAT_EP_STATE_PASSIVE_CONNECTION_PENDING && s != DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING)
            return;
        release = cr.provider_ep_is_providers;
        // A released one: the CM thread ignores it from now on.
        ep->state.store(release ? DAT_EP_STATE_DISCONNECTED : DAT_EP_STATE_UNCONNECTED);
    }
    if (!release)
        return;
    if (cr.for_rsp) {
        // dat_rsp_query must not name the Endpoint once it is gone.
        std::lock_guard<std::mutex> lock(cr.ia->mu);
        if (cr.psp && static_cast<Rsp *>(cr.psp)->ep == ep)
            static_cast<Rsp *>(cr.psp)->ep = nullptr;
    }
    ep_release_all(*ep);
}

} // namespace

void cr_destroy(Cr &cr) {
    Ia &ia = *cr.ia;
    ia.transport->cr_release(cr);
    ia_untrack(ia, &cr);
    destroy_object(&cr);
}

void cr_refuse_unanswerable(Cr &cr) {
    DAT2_LOG(log::kGeneric,
             "%s: connection request on qualifier %llu rejected: its EVD was freed with its "
             "arrival event unread\n",
             cr.ia->name.c_str(), (unsigned long long)cr.conn_qual);
    cr.refused = true; // the Provider's: DAT_CONNECTION_EVENT_NON_PEER_REJECTED
    cr.ia->transport->reject(cr, nullptr, 0);
    cr.tp = nullptr;
    release_request_ep(cr);
    cr_destroy(cr);
}

// Private data from the peer, as long as the IA's max_private_data_size at
// most: a consumer sizes its buffer by it (dat_ia_query(3DAT)), and a
// hostile or foreign peer can send more than our transports' wire formats
// would from us. The excess is cut, and said in a log line.
static std::size_t peer_pdata_len(const Ia &ia, std::size_t len, const char *what) {
    const auto max = static_cast<std::size_t>(ia.caps.max_private_data);
    if (len <= max)
        return len;
    DAT2_ERR("%s: %s carried %zu bytes of private data, more than the %zu this IA takes: only the first %zu kept\n",
             ia.name.c_str(), what, len, max, max);
    return max;
}

void ep_post_connection_event(Ep &ep, DAT_EVENT_NUMBER number, const void *pdata, std::size_t len) {
    if (!ep.connect_evd)
        return;
    if (pdata && len)
        len = peer_pdata_len(*ep.ia, len, "the peer's answer to a connection");
    DAT_EVENT e;
    std::memset(&e, 0, sizeof e);
    e.event_number = number;
    e.event_data.connect_event_data.ep_handle = &ep;
    if (pdata && len) {
        len = std::min(len, sizeof ep.event_data);
        std::memcpy(ep.event_data, pdata, len);
        e.event_data.connect_event_data.private_data = ep.event_data;
        e.event_data.connect_event_data.private_data_size = static_cast<DAT_COUNT>(len);
    }
    post_connection_evd(ep, e);
    // dat_ep_set_watermark(3DAT): a hard watermark already exceeded breaks
    // the connection "as soon as the connection is established".
    if (number == DAT_CONNECTION_EVENT_ESTABLISHED && ep_watermarks_armed(ep))
        ep_check_watermarks(ep, true);
}

// ---- events from the transport ---------------------------------------------

namespace {

// Refuses a request no Connection Request object can carry, as the
// provider: the requester sees DAT_CONNECTION_EVENT_NON_PEER_REJECTED.
void refuse_request(Psp &psp, void *tp_request, const char *why) {
    DAT2_LOG(log::kGeneric, "connection request on qualifier %llu refused: %s\n", (unsigned long long)psp.conn_qual,
             why);
    Cr tmp; // never published: only carries the request to reject it
    tmp.tp = tp_request;
    tmp.ia = psp.ia;
    tmp.psp = &psp;
    tmp.refused = true;
    psp.ia->transport->reject(tmp, nullptr, 0);
}

// dat_psp_create(3DAT): "The size of the event queue for the Event
// Dispatcher controls the size of the backlog": a request its EVD has no
// room for is refused. Every event counts, whatever its kind, as in OFED's
// dapl; a push racing this check may still go past qlen (evd_push keeps it).
bool evd_has_room(Evd &evd) {
    std::lock_guard<Lock> lock(evd.mu);
    return evd.count + evd.spill.size() < static_cast<std::size_t>(evd.qlen);
}

// Gives `cr` (made, not yet published) to service point `sp`: the Endpoint
// the request comes with, the CR arrival event. Null, or why it is refused
// (the caller rejects the request).
const char *deliver_request(Psp &sp, Cr &cr) {
    Ia &ia = *sp.ia;
    cr.psp = &sp;
    cr.conn_qual = sp.conn_qual;
    if (!evd_has_room(*sp.evd))
        return "its service point's EVD holds qlen events (the backlog is the EVD's queue)";
    if (sp.type == DAT_HANDLE_TYPE_RSP) {
        // dat_rsp_create(3DAT): at most one request, for the RSP's Endpoint,
        // which moves from Reserved to Passive Connection Pending.
        auto &rsp = static_cast<Rsp &>(sp);
        if (rsp.used || !rsp.ep)
            return "its reserved service point was already used";
        std::lock_guard<std::mutex> lock(rsp.ep->mu);
        if (rsp.ep->state.load() != DAT_EP_STATE_RESERVED)
            return "the reserved service point's Endpoint is no longer Reserved";
        rsp.ep->state.store(DAT_EP_STATE_PASSIVE_CONNECTION_PENDING);
        // dat_ep_query(3DAT): the addresses and qualifiers are valid in the
        // pending states.
        rsp.ep->remote = cr.remote;
        rsp.ep->remote_port = cr.remote_port;
        rsp.ep->local_port = sp.conn_qual;
        rsp.used = true;
        cr.provider_ep = rsp.ep;
        cr.for_rsp = true;
        cr.provider_ep_is_providers = rsp.ep_is_providers;
    } else if (sp.flags == DAT_PSP_PROVIDER_FLAG) {
        cr.provider_ep = ep_create_for_provider(ia, DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING);
        if (!cr.provider_ep)
            return "no Endpoint could be created for it";
        {
            std::lock_guard<std::mutex> lock(cr.provider_ep->mu);
            cr.provider_ep->remote = cr.remote;
            cr.provider_ep->remote_port = cr.remote_port;
            cr.provider_ep->local_port = sp.conn_qual;
        }
        cr.provider_ep_is_providers = true;
    }
    ia_track(ia, &cr);
    publish(&cr);
    DAT_EVENT e;
    std::memset(&e, 0, sizeof e);
    e.event_number = DAT_CONNECTION_REQUEST_EVENT;
    auto &d = e.event_data.cr_arrival_event_data;
    // dat.h: an RSP's request carries no service point handle.
    if (sp.type == DAT_HANDLE_TYPE_PSP)
        d.sp_handle.psp_handle = &sp;
    else if (sp.type == DAT_HANDLE_TYPE_CSP)
        d.sp_handle.csp_handle = &sp;
    d.local_ia_address_ptr = const_cast<sockaddr *>(ia.transport->address());
    d.conn_qual = sp.conn_qual;
    d.cr_handle = &cr;
    d.truncate_flag = DAT_FALSE;
    evd_push(*sp.evd, e);
    return nullptr;
}

} // namespace

void on_connection_request(Psp &psp, void *tp_request, const sockaddr *remote, const void *pdata,
                           std::size_t pdata_len) {
    Ia &ia = *psp.ia;
    Cr *cr = nullptr;
    try {
        cr = make_object<Cr>(ia.provider, &ia);
    } catch (...) {
    }
    if (!cr) {
        refuse_request(psp, tp_request, "out of memory");
        return;
    }
    cr->tp = tp_request;
    if (remote) {
        std::memcpy(&cr->remote, remote, sockaddr_size(remote));
        cr->remote_port = port_of(remote);
    }
    pdata_len = std::min(peer_pdata_len(ia, pdata_len, "a connection request"), sizeof cr->private_data);
    if (pdata && pdata_len)
        std::memcpy(cr->private_data, pdata, pdata_len);
    cr->private_data_size = static_cast<DAT_COUNT>(pdata_len);
    if (const char *why = deliver_request(psp, *cr)) {
        destroy_object(cr);
        refuse_request(psp, tp_request, why);
    }
}

void on_established(Ep &ep, const void *pdata, std::size_t pdata_len, DAT_PORT_QUAL local_port) {
    disarm_connect_timer(ep);
    {
        std::lock_guard<std::mutex> lock(ep.mu);
        DAT_EP_STATE s = ep.state.load();
        if (s != DAT_EP_STATE_ACTIVE_CONNECTION_PENDING && s != DAT_EP_STATE_COMPLETION_PENDING)
            return;
        bool passive = s == DAT_EP_STATE_COMPLETION_PENDING;
        ep.local_port = local_port;
        ep.state.store(DAT_EP_STATE_CONNECTED);
        if (passive) // dat_evd_wait(3DAT): no private data on the passive side
            pdata_len = 0;
    }
    ep_post_connection_event(ep, DAT_CONNECTION_EVENT_ESTABLISHED, pdata, pdata_len);
}

void on_connect_failed(Ep &ep, DAT_EVENT_NUMBER reason, const void *pdata, std::size_t pdata_len) {
    disarm_connect_timer(ep);
    {
        std::lock_guard<std::mutex> lock(ep.mu);
        DAT_EP_STATE s = ep.state.load();
        if (s != DAT_EP_STATE_ACTIVE_CONNECTION_PENDING && s != DAT_EP_STATE_COMPLETION_PENDING)
            return;
        ep.state.store(DAT_EP_STATE_DISCONNECTED);
    }
    report_connection_end(ep, reason, pdata, pdata_len);
}

void on_disconnected(Ep &ep, bool broken, bool refused) {
    disarm_connect_timer(ep);
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
    report_connection_end(ep, broken ? DAT_CONNECTION_EVENT_BROKEN : DAT_CONNECTION_EVENT_DISCONNECTED, nullptr, 0,
                          refused);
}

void ConnectionReport::deliver() {
    switch (kind) {
    case kNone: break;
    case kRequest:
        on_connection_request(*psp, tp_request, has_remote ? reinterpret_cast<const sockaddr *>(&remote) : nullptr,
                              pdata, pdata_len);
        break;
    case kEstablished: on_established(*ep, pdata, pdata_len, local_port); break;
    case kConnectFailed: on_connect_failed(*ep, reason, pdata, pdata_len); break;
    case kDisconnected: on_disconnected(*ep, broken, refused); break;
    }
    kind = kNone;
}

// dat_ep_connect(3DAT), dat_ep_dup_connect(3DAT): a qos the provider does
// not offer (it offers DAT_QOS_BEST_EFFORT only) is DAT_MODEL_NOT_SUPPORTED;
// bits that are no DAT_QOS at all make argument `arg` invalid.
namespace {
DAT_RETURN check_qos(DAT_QOS qos, int arg) {
    if (qos == DAT_QOS_BEST_EFFORT)
        return DAT_SUCCESS;
    if (!qos_known(qos)) {
        DAT2_LOG(log::kGeneric, "qos %#x is not a DAT_QOS value\n", static_cast<unsigned>(qos));
        return invalid_arg(arg);
    }
    DAT2_LOG(log::kGeneric, "qos %#x is not supported: DAT_QOS_BEST_EFFORT only\n", static_cast<unsigned>(qos));
    return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
}
} // namespace

namespace slot {

DAT_RETURN ep_connect(DAT_EP_HANDLE ep_handle, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual, DAT_TIMEOUT timeout,
                      DAT_COUNT pd_size, const DAT_PVOID pd, DAT_QOS qos, DAT_CONNECT_FLAGS flags) {
    return guarded("dat_ep_connect", [&]() -> DAT_RETURN {
        Ep *ep;
        if (DAT_RETURN r = handle_cast(ep_handle, ep))
            return r;
        if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
            return DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
        if (timeout == 0) // dat_ep_connect(3DAT): timeout "Values must be positive."
            return invalid_arg(4);
        if (DAT_RETURN r = check_private_data(*ep->ia, pd_size, pd, 5))
            return r;
        if (DAT_RETURN r = check_qos(qos, 7))
            return r;
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
        if (timeout == 0) // dat_ep_dup_connect(3DAT): timeout "Values must be positive."
            return invalid_arg(3);
        if (DAT_RETURN r = check_private_data(*ep->ia, pd_size, pd, 4))
            return r;
        if (DAT_RETURN r = check_qos(qos, 6))
            return r;
        sockaddr_storage remote;
        DAT_CONN_QUAL qual;
        {
            std::lock_guard<std::mutex> lock(dup->mu);
            DAT_EP_STATE s = dup->state.load();
            if (s != DAT_EP_STATE_CONNECTED)
                return ep_state_error(s);
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
        CmCall call;
        {
            std::lock_guard<std::mutex> lock(ep->mu);
            if (!call.enter(*ep))
                return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
            DAT_EP_STATE s = ep->state.load();
            switch (s) {
            case DAT_EP_STATE_DISCONNECTED: return DAT_SUCCESS; // a no-op per the seed
            case DAT_EP_STATE_CONNECTED: ep->state.store(DAT_EP_STATE_DISCONNECT_PENDING); break;
            case DAT_EP_STATE_DISCONNECT_PENDING:
                if (graceful)
                    return DAT_SUCCESS; // "has no effect"
                break;
            case DAT_EP_STATE_ACTIVE_CONNECTION_PENDING:
            case DAT_EP_STATE_COMPLETION_PENDING:
                graceful = false; // aborts the establishment
                break;
            default: return ep_state_error(s);
            }
        }
        return ep->ia->transport->disconnect(*ep, graceful);
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
        CrClaim claim;
        if (!claim.take(*cr))
            return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR); // answered by another thread
        // dat_cr_accept(3DAT): "If the local Endpoint is specified by the
        // Connection Request, the ep_handle shall be DAT_HANDLE_NULL"; a
        // provider-created one may also be replaced by a Consumer EP.
        Ep *ep = cr->provider_ep;
        if (ep_handle != DAT_HANDLE_NULL) {
            if (DAT_RETURN r = handle_cast_in(cr->ia, ep_handle, ep))
                return r;
            if (cr->provider_ep && ep != cr->provider_ep && cr->for_rsp)
                return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        } else if (!ep) {
            return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        }
        if (DAT_RETURN r = check_private_data(*ep->ia, pd_size, pd, 3))
            return r;
        DAT_EP_STATE before;
        CmCall call;
        {
            std::lock_guard<std::mutex> lock(ep->mu);
            if (!call.enter(*ep))
                return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
            before = ep->state.load();
            const bool own = ep == cr->provider_ep && (before == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING ||
                                                       before == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING);
            if (before != DAT_EP_STATE_UNCONNECTED && !own)
                return ep_state_error(before);
            ep->remote = cr->remote;
            ep->remote_port = cr->remote_port;
            ep->state.store(DAT_EP_STATE_COMPLETION_PENDING);
        }
        DAT_RETURN r = ep->ia->transport->accept(*cr, *ep, pd, static_cast<std::size_t>(pd_size));
        if (r != DAT_SUCCESS) {
            std::lock_guard<std::mutex> lock(ep->mu);
            if (ep->state.load() == DAT_EP_STATE_COMPLETION_PENDING)
                ep->state.store(before);
            return r;
        }
        cr->tp = nullptr; // the transport has consumed the request
        if (ep == cr->provider_ep)
            cr->provider_ep = nullptr; // the Consumer's now
        release_request_ep(*cr);       // one the Consumer did not take
        claim.kept();
        cr_destroy(*cr); // dat_cr_accept(3DAT): the CR is gone after accept
        return DAT_SUCCESS;
    });
}

DAT_RETURN cr_reject(DAT_CR_HANDLE cr_handle, DAT_COUNT pd_size, const DAT_PVOID pd) {
    return guarded("dat_cr_reject", [&]() -> DAT_RETURN {
        Cr *cr;
        if (DAT_RETURN r = handle_cast(cr_handle, cr))
            return r;
        CrClaim claim;
        if (!claim.take(*cr))
            return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR); // answered by another thread
        if (DAT_RETURN r = check_private_data(*cr->ia, pd_size, pd, 2))
            return r;
        DAT_RETURN r = cr->ia->transport->reject(*cr, pd, static_cast<std::size_t>(pd_size));
        cr->tp = nullptr;
        // dat_rsp_create(3DAT): a rejected RSP Endpoint is Unconnected again;
        // dat_psp_create(3DAT): a provider-created one goes back to the Provider.
        release_request_ep(*cr);
        claim.kept();
        cr_destroy(*cr);
        return r;
    });
}

DAT_RETURN cr_handoff(DAT_CR_HANDLE cr_handle, DAT_CONN_QUAL handoff) {
    return guarded("dat_cr_handoff", [&]() -> DAT_RETURN {
        Cr *cr;
        if (DAT_RETURN r = handle_cast(cr_handle, cr))
            return r;
        CrClaim claim;
        if (!claim.take(*cr))
            return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR); // answered by another thread
        Ia &ia = *cr->ia;
        // The service point of this IA listening on `handoff` (requests do
        // not move between processes: the connection is already here).
        Psp *target = nullptr;
        {
            std::lock_guard<std::mutex> lock(ia.mu);
            for (DAT_HANDLE_TYPE t : {DAT_HANDLE_TYPE_PSP, DAT_HANDLE_TYPE_RSP, DAT_HANDLE_TYPE_CSP})
                for (ObjectHeader *o : ia.objects.of_type(t)) {
                    auto *sp = static_cast<Psp *>(o);
                    if (!target && sp->conn_qual == handoff && sp != cr->psp)
                        target = sp;
                }
        }
        if (!target) {
            DAT2_LOG(log::kGeneric, "dat_cr_handoff: no service point of this IA listens on qualifier %llu\n",
                     (unsigned long long)handoff);
            return invalid_arg(2);
        }
        Cr *moved = make_object<Cr>(ia.provider, &ia);
        if (!moved)
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        moved->tp = cr->tp;
        moved->remote = cr->remote;
        moved->remote_port = cr->remote_port;
        std::memcpy(moved->private_data, cr->private_data, sizeof cr->private_data);
        moved->private_data_size = cr->private_data_size;
        if (const char *why = deliver_request(*target, *moved)) {
            DAT2_LOG(log::kGeneric, "dat_cr_handoff to qualifier %llu: %s\n", (unsigned long long)handoff, why);
            destroy_object(moved);
            return DAT_ERROR(DAT_INVALID_STATE, 0); // e.g. an RSP whose request already came
        }
        // dat_cr_handoff(3DAT): the old instance is destroyed; the pending
        // request itself now belongs to the new one.
        release_request_ep(*cr);
        cr->tp = nullptr;
        ia.transport->cr_release(*cr);
        claim.kept();
        ia_untrack(ia, cr);
        destroy_object(cr);
        return DAT_SUCCESS;
    });
}

DAT_RETURN ep_common_connect(DAT_EP_HANDLE ep_handle, DAT_IA_ADDRESS_PTR address, DAT_TIMEOUT timeout,
                             DAT_COUNT pd_size, const DAT_PVOID pd) {
    return guarded("dat_ep_common_connect", [&]() -> DAT_RETURN {
        Ep *ep;
        if (DAT_RETURN r = handle_cast(ep_handle, ep))
            return r;
        if (!address || (address->sa_family != AF_INET && address->sa_family != AF_INET6))
            return DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
        if (timeout == 0) // as dat_ep_connect(3DAT)'s
            return invalid_arg(3);
        if (DAT_RETURN r = check_private_data(*ep->ia, pd_size, pd, 4))
            return r;
        // A Common Service Point is found by address and port alone.
        return start_connect(*ep, address, port_of(address), timeout, pd_size, pd);
    });
}

} // namespace slot
} // namespace dat2::kit
