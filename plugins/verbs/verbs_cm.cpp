// SPDX-License-Identifier: BSD-3-Clause
// Connections over rdma_cm: the event channel and the device's async events
// (read on the IA's event loop), connect, listen, accept, reject and
// disconnect. The QP is the plugin's (verbs_ep.cpp): rdma_cm only carries
// its number, and the plugin moves it through INIT/RTR/RTS.
#include "verbs.hpp"

#include "log.hpp"
#include "sockaddr.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <climits>
#include <cstring>

namespace dat2::verbs {

namespace {

VerbsEp &vep_of(kit::Ep &ep) { return *static_cast<VerbsEp *>(ep.tp); }

// IB CM reject reason of a reject sent by the peer's consumer (rdma_reject).
constexpr int kRejectConsumerDefined = 28;
constexpr int kRetries = 7; // transport retries; 7 RNR retries means "forever", as OFED's dapl

void *key_context(std::uint64_t key) { return reinterpret_cast<void *>(static_cast<std::uintptr_t>(key)); }

} // namespace

// ---- the loop's handlers ------------------------------------------------------------

void VerbsTransport::release_id(rdma_cm_id *id) {
    if (!id)
        return;
    if (in_cm_event_ && loop().on_loop_thread())
        doomed_ids_.push_back(id);
    else
        rdma_destroy_id(id);
}

void VerbsTransport::read_cm_events() {
    for (;;) {
        rdma_cm_event *event = nullptr;
        if (rdma_get_cm_event(channel_, &event)) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                DAT2_ERR("%s: rdma_get_cm_event: %s\n", name(), std::strerror(errno));
            return;
        }
        in_cm_event_ = true;
        kit::ConnectionReport report;
        {
            std::lock_guard<std::mutex> lock(mu_);
            handle_cm_event(*event, report);
        }
        report.deliver();
        // Acknowledged without mu_: a consumer thread may be in
        // rdma_destroy_id() for this id, waiting for exactly this.
        rdma_ack_cm_event(event);
        in_cm_event_ = false;
        destroy_doomed_ids();
    }
}

void VerbsTransport::destroy_doomed_ids() {
    for (rdma_cm_id *id : doomed_ids_)
        if (id)
            rdma_destroy_id(id);
    doomed_ids_.clear();
}

VerbsEp *VerbsTransport::ep_by_key(std::uint64_t key) {
    auto it = eps_.find(key);
    return it == eps_.end() ? nullptr : it->second;
}

VerbsEp *VerbsTransport::ep_by_id(std::uint64_t id) {
    auto it = eps_by_id_.find(id);
    return it == eps_by_id_.end() ? nullptr : it->second;
}

std::uint64_t VerbsTransport::add_ep_key(VerbsEp &vep) {
    eps_.erase(vep.key);
    vep.key = next_key_++;
    eps_[vep.key] = &vep;
    return vep.key;
}

void VerbsTransport::handle_cm_event(rdma_cm_event &event, kit::ConnectionReport &report) {
    const auto key = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(event.id->context));
    DAT2_LOG(log::kGeneric, "%s: %s (status %d) for id %llu\n", name(), rdma_event_str(event.event), event.status,
             static_cast<unsigned long long>(key));
    if (event.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
        const auto lkey = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(event.listen_id->context));
        auto it = psps_.find(lkey);
        if (it == psps_.end()) {
            refuse(event.id); // the PSP is going away
            doomed_ids_.push_back(event.id);
            return;
        }
        on_connect_request(event, *it->second, report);
        return;
    }
    if (auto it = requests_.find(key); it != requests_.end()) {
        // The requester gave up (its REJ, or a CM error) before our accept.
        if (event.event == RDMA_CM_EVENT_REJECTED || event.event == RDMA_CM_EVENT_CONNECT_ERROR ||
            event.event == RDMA_CM_EVENT_UNREACHABLE || event.event == RDMA_CM_EVENT_DISCONNECTED ||
            event.event == RDMA_CM_EVENT_DEVICE_REMOVAL)
            it->second->gone = true;
        return;
    }
    VerbsEp *vep = ep_by_key(key);
    if (!vep)
        return; // an id the EP has left behind (reset, aborted connect)
    switch (event.event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: on_addr_resolved(*vep, report); return;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: on_route_resolved(*vep, report); return;
    case RDMA_CM_EVENT_CONNECT_RESPONSE: on_connect_response(*vep, event, report); return;
    case RDMA_CM_EVENT_ESTABLISHED:
        // The passive side (the active one completes on CONNECT_RESPONSE).
        report.established(*vep->owner, nullptr, 0, vep->local_port);
        return;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_CONNECT_ERROR: on_connection_error(*vep, event, report); return;
    case RDMA_CM_EVENT_DISCONNECTED: on_peer_disconnect(*vep, report); return;
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
        kit::post_async(ia_, DAT_ASYNC_ERROR_IA_CATASTROPHIC, &ia_, 0);
        break_connection(*vep, "device removed", report);
        return;
    default: return; // TIMEWAIT_EXIT, ADDR_CHANGE
    }
}

void VerbsTransport::read_async_events() {
    for (;;) {
        ibv_async_event ev;
        if (ibv_get_async_event(ctx_, &ev))
            return;
        // Copy what identifies the object, then acknowledge at once: a
        // consumer thread destroying that QP or CQ waits for the ack.
        const ibv_event_type type = ev.event_type;
        std::uint32_t qp_num = 0;
        VerbsCq *cq = nullptr;
        switch (type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
        case IBV_EVENT_COMM_EST:
        case IBV_EVENT_SQ_DRAINED:
        case IBV_EVENT_PATH_MIG:
        case IBV_EVENT_PATH_MIG_ERR:
        case IBV_EVENT_QP_LAST_WQE_REACHED: qp_num = ev.element.qp->qp_num; break;
        case IBV_EVENT_CQ_ERR: cq = static_cast<VerbsCq *>(ev.element.cq->cq_context); break;
        default: break;
        }
        ibv_ack_async_event(&ev);
        DAT2_LOG(log::kGeneric, "%s: device event %s (QP %u)\n", name(), ibv_event_type_str(type), qp_num);
        switch (type) {
        case IBV_EVENT_CQ_ERR:
            DAT2_ERR("%s: completion queue overrun (EVD %p)\n", name(), cq ? (void *)cq->evd : nullptr);
            if (cq && cq->evd)
                kit::post_async(ia_, DAT_ASYNC_ERROR_EVD_OVERFLOW, cq->evd, DAT_EVD_OVERFLOW_ERROR);
            continue;
        case IBV_EVENT_DEVICE_FATAL:
            DAT2_ERR("%s: device fatal error\n", name());
            kit::post_async(ia_, DAT_ASYNC_ERROR_IA_CATASTROPHIC, &ia_, 0);
            continue;
        default: break;
        }
        if (!qp_num)
            continue;
        kit::ConnectionReport report;
        {
            std::lock_guard<std::mutex> lock(mu_);
            kit::Ep *ep = nullptr;
            {
                std::lock_guard<std::mutex> qlock(qp_eps_mu_);
                auto it = qp_eps_.find(qp_num);
                if (it != qp_eps_.end())
                    ep = it->second;
            }
            auto *vep = ep ? static_cast<VerbsEp *>(ep->tp) : nullptr;
            if (!vep || !vep->qp || vep->qp->qp_num != qp_num)
                continue; // an old QP of the EP
            switch (type) {
            case IBV_EVENT_COMM_EST:
                // Data arrived before the RTU: tell rdma_cm the connection is up.
                if (vep->id)
                    rdma_notify(vep->id, IBV_EVENT_COMM_EST);
                break;
            case IBV_EVENT_QP_FATAL:
            case IBV_EVENT_QP_REQ_ERR:
            case IBV_EVENT_QP_ACCESS_ERR: break_connection(*vep, ibv_event_type_str(type), report); break;
            default: break;
            }
        }
        report.deliver();
        destroy_doomed_ids();
    }
}

// A DTO failed (translate(), under an EVD's lock): the QP is in error, the
// connection is over.
void VerbsTransport::dto_failed(std::uint64_t id) {
    kit::ConnectionReport report;
    {
        std::lock_guard<std::mutex> lock(mu_);
        VerbsEp *vep = ep_by_id(id);
        if (!vep || !vep->broken.exchange(false))
            return;
        break_connection(*vep, "a DTO failed", report);
    }
    report.deliver();
    destroy_doomed_ids();
}

// The graceful-disconnect marker completed: every request before it has.
void VerbsTransport::drained(std::uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    VerbsEp *vep = ep_by_id(id);
    if (!vep || !vep->drain_pending || vep->disconnect_sent || !vep->id ||
        kit::ep_state(*vep->owner) != DAT_EP_STATE_DISCONNECT_PENDING)
        return;
    vep->drain_pending = false;
    vep->disconnect_sent = true;
    rdma_disconnect(vep->id);
    loop().arm(vep->disconnect_timer, kit::Deadline::after(std::chrono::seconds(2)));
}

void VerbsTransport::disconnect_expired(std::uint64_t id) {
    kit::ConnectionReport report;
    rdma_cm_id *doomed = nullptr;
    {
        std::lock_guard<std::mutex> lock(mu_);
        VerbsEp *vep = ep_by_id(id);
        if (!vep || kit::ep_state(*vep->owner) != DAT_EP_STATE_DISCONNECT_PENDING)
            return;
        if (vep->id && !vep->disconnect_sent) {
            // The send queue did not drain in time: disconnect anyway.
            vep->disconnect_sent = true;
            rdma_disconnect(vep->id);
            loop().arm(vep->disconnect_timer, kit::Deadline::after(std::chrono::seconds(2)));
            return;
        }
        // No DISCONNECTED from the peer's side: complete it here.
        doomed = end_connection(*vep);
        report.disconnected(*vep->owner, false);
    }
    report.deliver();
    release_id(doomed);
}

rdma_cm_id *VerbsTransport::end_connection(VerbsEp &vep) {
    qp_error(vep);
    loop().disarm(vep.disconnect_timer);
    vep.drain_pending = false;
    vep.disconnect_sent = false;
    rdma_cm_id *id = vep.id;
    vep.id = nullptr;
    add_ep_key(vep); // what is still queued for the old id finds nothing
    return id;
}

// ---- the active side -----------------------------------------------------------------

DAT_RETURN VerbsTransport::connect(kit::Ep &ep, const sockaddr *addr, DAT_CONN_QUAL qual, const void *pdata,
                                   std::size_t pdata_len, DAT_TIMEOUT timeout) {
    // rdma_cm's private data has no room for the qualifier: a connect to
    // one reaches whatever listens on its port (kit::port_of_qual), as OFED's.
    sockaddr_storage dest = kit::with_port(addr, kit::port_of_qual(qual));
    const sockaddr *src = addr->sa_family == addr_.ss_family ? address() : nullptr;
    VerbsEp &vep = vep_of(ep);
    rdma_cm_id *id = nullptr;
    DAT_RETURN r = DAT_SUCCESS;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!qp_matches(vep))
            if ((r = build_qp(vep)))
                return r;
        vep.connect_len = frame_cm_data(kCmConnect, pdata, pdata_len, vep.connect_data);
        vep.resolve_ms =
            timeout == DAT_TIMEOUT_INFINITE ? 2000 : static_cast<int>(std::clamp<DAT_TIMEOUT>(timeout / 1000, 1, 2000));
        const std::uint64_t key = add_ep_key(vep);
        if (rdma_create_id(channel_, &id, key_context(key), RDMA_PS_TCP)) {
            DAT2_ERR("%s: rdma_create_id: %s\n", name(), std::strerror(errno));
            return to_dat(errno, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP));
        }
        if (rdma_resolve_addr(id, const_cast<sockaddr *>(src), reinterpret_cast<sockaddr *>(&dest), vep.resolve_ms)) {
            // dat_ep_connect(3DAT): an address the provider can tell is
            // unusable right away is DAT_INVALID_ADDRESS.
            DAT2_LOG(log::kGeneric, "%s: rdma_resolve_addr: %s\n", name(), std::strerror(errno));
            r = DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
        } else {
            vep.id = id;
            id = nullptr;
        }
    }
    release_id(id);
    return r;
}

void VerbsTransport::connect_cancel(kit::Ep &ep) {
    rdma_cm_id *id;
    {
        std::lock_guard<std::mutex> lock(mu_);
        id = end_connection(vep_of(ep));
    }
    release_id(id);
}

void VerbsTransport::on_addr_resolved(VerbsEp &vep, kit::ConnectionReport &report) {
    if (kit::ep_state(*vep.owner) != DAT_EP_STATE_ACTIVE_CONNECTION_PENDING || !vep.id)
        return;
    if (rdma_resolve_route(vep.id, vep.resolve_ms)) {
        DAT2_LOG(log::kGeneric, "%s: rdma_resolve_route: %s\n", name(), std::strerror(errno));
        doomed_ids_.push_back(end_connection(vep));
        report.connect_failed(*vep.owner, DAT_CONNECTION_EVENT_UNREACHABLE);
    }
}

void VerbsTransport::on_route_resolved(VerbsEp &vep, kit::ConnectionReport &report) {
    if (kit::ep_state(*vep.owner) != DAT_EP_STATE_ACTIVE_CONNECTION_PENDING || !vep.id)
        return;
    rdma_conn_param param{};
    param.private_data = vep.connect_data;
    param.private_data_len = static_cast<std::uint8_t>(vep.connect_len);
    param.responder_resources = vep.responder_resources;
    param.initiator_depth = vep.initiator_depth;
    param.flow_control = 1;
    param.retry_count = kRetries;
    param.rnr_retry_count = kRetries;
    param.qp_num = vep.qp->qp_num;
    if (rdma_connect(vep.id, &param)) {
        DAT2_LOG(log::kGeneric, "%s: rdma_connect: %s\n", name(), std::strerror(errno));
        doomed_ids_.push_back(end_connection(vep));
        report.connect_failed(*vep.owner, DAT_CONNECTION_EVENT_UNREACHABLE);
    }
}

void VerbsTransport::on_connect_response(VerbsEp &vep, rdma_cm_event &event, kit::ConnectionReport &report) {
    kit::Ep &ep = *vep.owner;
    if (kit::ep_state(ep) != DAT_EP_STATE_ACTIVE_CONNECTION_PENDING || !vep.id)
        return;
    int rc = move_qp(vep, vep.id, IBV_QPS_RTR, -1);
    const char *step = "QP to RTR";
    if (!rc) {
        step = "QP to RTS";
        rc = move_qp(vep, vep.id, IBV_QPS_RTS, -1);
    }
    if (!rc) {
        step = "rdma_establish";
        rc = rdma_establish(vep.id) ? errno : 0;
    }
    if (rc) {
        DAT2_ERR("%s: EP %p: %s: %s\n", name(), (void *)&ep, step, std::strerror(rc));
        rdma_reject(vep.id, nullptr, 0);
        doomed_ids_.push_back(end_connection(vep));
        report.connect_failed(ep, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
        return;
    }
    const unsigned char *pdata = nullptr;
    std::size_t pdata_len = 0;
    unframe_cm_data(event.param.conn.private_data, event.param.conn.private_data_len, kCmAccept, pdata, pdata_len);
    report.established(ep, pdata, pdata_len, ntohs(rdma_get_src_port(vep.id)));
}

void VerbsTransport::on_connection_error(VerbsEp &vep, rdma_cm_event &event, kit::ConnectionReport &report) {
    kit::Ep &ep = *vep.owner;
    const DAT_EP_STATE state = kit::ep_state(ep);
    DAT2_LOG(log::kGeneric, "%s: EP %p: %s, status %d\n", name(), (void *)&ep, rdma_event_str(event.event),
             event.status);
    const unsigned char *pdata = nullptr;
    std::size_t pdata_len = 0;
    if (state == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING) {
        DAT_EVENT_NUMBER reason = DAT_CONNECTION_EVENT_NON_PEER_REJECTED;
        switch (event.event) {
        case RDMA_CM_EVENT_REJECTED: {
            // Our header with kind "reject" means the peer's consumer refused,
            // "refuse" its provider; a refusal without either comes from the CM
            // (nobody listens), or from a peer of another library's consumer.
            const unsigned char *none;
            std::size_t none_len;
            if (unframe_cm_data(event.param.conn.private_data, event.param.conn.private_data_len, kCmRefuse, none,
                                none_len))
                break;
            if (unframe_cm_data(event.param.conn.private_data, event.param.conn.private_data_len, kCmReject, pdata,
                                pdata_len) ||
                event.status == kRejectConsumerDefined)
                reason = DAT_CONNECTION_EVENT_PEER_REJECTED;
            break;
        }
        case RDMA_CM_EVENT_ADDR_ERROR:
        case RDMA_CM_EVENT_ROUTE_ERROR:
        case RDMA_CM_EVENT_UNREACHABLE:
            reason = event.status == -ETIMEDOUT ? DAT_CONNECTION_EVENT_TIMED_OUT : DAT_CONNECTION_EVENT_UNREACHABLE;
            break;
        default: break;
        }
        doomed_ids_.push_back(end_connection(vep));
        report.connect_failed(ep, reason, pdata, pdata_len);
    } else if (state == DAT_EP_STATE_COMPLETION_PENDING) {
        doomed_ids_.push_back(end_connection(vep));
        report.connect_failed(ep, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR);
    } else if (state == DAT_EP_STATE_CONNECTED || state == DAT_EP_STATE_DISCONNECT_PENDING) {
        doomed_ids_.push_back(end_connection(vep));
        report.disconnected(ep, true);
    }
}

void VerbsTransport::on_peer_disconnect(VerbsEp &vep, kit::ConnectionReport &report) {
    kit::Ep &ep = *vep.owner;
    const DAT_EP_STATE state = kit::ep_state(ep);
    doomed_ids_.push_back(end_connection(vep)); // destroying the id answers the peer's DREQ
    if (state == DAT_EP_STATE_COMPLETION_PENDING)
        report.connect_failed(ep, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR);
    else if (state == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING)
        report.connect_failed(ep, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
    else
        report.disconnected(ep, false);
}

// On the loop only: its id is destroyed by the handler, after mu_ (and,
// in an rdma_cm event, the event) is released.
void VerbsTransport::break_connection(VerbsEp &vep, const char *why, kit::ConnectionReport &report) {
    kit::Ep &ep = *vep.owner;
    const DAT_EP_STATE state = kit::ep_state(ep);
    if (state != DAT_EP_STATE_CONNECTED && state != DAT_EP_STATE_DISCONNECT_PENDING)
        return;
    DAT2_LOG(log::kGeneric, "%s: connection of EP %p broke: %s\n", name(), (void *)&ep, why);
    doomed_ids_.push_back(end_connection(vep)); // destroying the id tells the peer (DREQ)
    report.disconnected(ep, true);
}

// dat_ep_set_watermark's hard watermark; may come from inside a kit
// callback on the loop: the loop breaks the connection after it.
DAT_RETURN VerbsTransport::ep_break(kit::Ep &ep) {
    auto *vep = static_cast<VerbsEp *>(ep.tp);
    if (!vep)
        return DAT_ERROR(DAT_INVALID_STATE, 0);
    vep->broken.store(true);
    const std::uint64_t id = vep->id_key;
    loop().post([this, id] { dto_failed(id); });
    return DAT_SUCCESS;
}

DAT_RETURN VerbsTransport::disconnect(kit::Ep &ep, bool graceful) {
    VerbsEp &vep = vep_of(ep);
    rdma_cm_id *id = nullptr;
    kit::ConnectionReport report;
    {
        std::lock_guard<std::mutex> lock(mu_);
        const DAT_EP_STATE s = kit::ep_state(ep);
        if (s == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING || s == DAT_EP_STATE_COMPLETION_PENDING || !vep.id ||
            !graceful || vep.disconnect_sent) {
            // Aborting establishment, abrupt, or already asked: done now.
            // Destroying the id sends the DREQ (or the REJ) to the peer.
            id = end_connection(vep);
            report.disconnected(ep, false);
        } else if (ep.requests_posted.load() == 0) {
            vep.disconnect_sent = true;
            if (rdma_disconnect(vep.id))
                DAT2_LOG(log::kGeneric, "%s: rdma_disconnect: %s\n", name(), std::strerror(errno));
            loop().arm(vep.disconnect_timer, kit::Deadline::after(std::chrono::seconds(2)));
        } else {
            // Requests in flight complete first (dat_ep_disconnect(3DAT):
            // graceful "must try to be completed successfully first"). The
            // marker's completion tells when; the consumer reaps it with its
            // own completions, and the timer covers a consumer that does not.
            ibv_send_wr wr{}, *bad = nullptr;
            wr.wr_id = reinterpret_cast<std::uintptr_t>(&vep) | kWrMarker;
            wr.opcode = IBV_WR_RDMA_WRITE;
            wr.send_flags = IBV_SEND_SIGNALED;
            vep.own_wrs.store(true, std::memory_order_relaxed);
            // The unsignalled request the marker stands for: the last one
            // before it in the send queue.
            kit::ep_in_request_order(ep, [&] {
                vep.marker_last.store(vep.last_unsignaled.load());
                vep.drain_pending = ibv_post_send(vep.qp, &wr, &bad) == 0;
            });
            if (!vep.drain_pending) {
                vep.disconnect_sent = true;
                rdma_disconnect(vep.id);
            }
            loop().arm(vep.disconnect_timer, kit::Deadline::after(std::chrono::seconds(2)));
        }
    }
    report.deliver();
    release_id(id);
    return DAT_SUCCESS;
}

// ---- the passive side -------------------------------------------------------------------

DAT_RETURN VerbsTransport::psp_open(kit::Psp &psp, const DAT_CONN_QUAL *qual, DAT_CONN_QUAL *assigned, void *&tp) {
    const std::uint16_t port = qual ? kit::port_of_qual(*qual) : 0;
    sockaddr_storage local = addr_;
    kit::set_port(local, port);
    auto *vpsp = new VerbsPsp;
    vpsp->owner = &psp;
    rdma_cm_id *id = nullptr;
    int err = 0;
    const char *step = "rdma_create_id";
    {
        // Registered before it listens: a request may come at once.
        std::lock_guard<std::mutex> lock(mu_);
        vpsp->key = next_key_++;
        if (rdma_create_id(channel_, &id, key_context(vpsp->key), RDMA_PS_TCP) == 0) {
            step = "rdma_bind_addr";
            if (rdma_bind_addr(id, reinterpret_cast<sockaddr *>(&local)) == 0) {
                step = "rdma_listen";
                if (rdma_listen(id, 128) == 0) {
                    vpsp->id = id;
                    psps_[vpsp->key] = vpsp;
                    tp = vpsp;
                    // The consumer's qualifier as given; the port chosen for "any".
                    *assigned = qual && port ? *qual : ntohs(rdma_get_src_port(id));
                    return DAT_SUCCESS;
                }
            }
        }
        err = errno;
    }
    if (id)
        rdma_destroy_id(id);
    delete vpsp;
    if (err == EADDRINUSE)
        return DAT_ERROR(DAT_CONN_QUAL_IN_USE, 0);
    DAT2_ERR("%s: %s on qualifier %llu: %s\n", name(), step, static_cast<unsigned long long>(qual ? *qual : 0),
             std::strerror(err));
    return to_dat(err, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
}

void VerbsTransport::psp_close(kit::Psp &psp) {
    auto *vpsp = static_cast<VerbsPsp *>(psp.tp);
    if (!vpsp)
        return;
    {
        std::lock_guard<std::mutex> lock(mu_);
        psps_.erase(vpsp->key);
    }
    loop().sync();        // a request handler that found it has returned
    release_id(vpsp->id); // requests already reported have ids of their own
    delete vpsp;
}

void VerbsTransport::on_connect_request(rdma_cm_event &event, VerbsPsp &psp, kit::ConnectionReport &report) {
    Request *req = nullptr;
    try {
        req = new Request;
    } catch (...) {
    }
    if (!req) {
        refuse(event.id);
        doomed_ids_.push_back(event.id);
        return;
    }
    req->key = next_key_++;
    req->id = event.id;
    req->initiator_depth = event.param.conn.initiator_depth;
    req->responder_resources = event.param.conn.responder_resources;
    event.id->context = key_context(req->key);
    requests_[req->key] = req;
    const unsigned char *pdata = nullptr;
    std::size_t pdata_len = 0;
    if (!unframe_cm_data(event.param.conn.private_data, event.param.conn.private_data_len, kCmConnect, pdata,
                         pdata_len)) {
        // Not one of ours: hand over what came (zero padded to the CM's size).
        pdata = static_cast<const unsigned char *>(event.param.conn.private_data);
        pdata_len = event.param.conn.private_data_len;
    }
    report.request(*psp.owner, req, rdma_get_peer_addr(event.id), pdata, pdata_len);
}

DAT_RETURN VerbsTransport::accept(kit::Cr &cr, kit::Ep &ep, const void *pdata, std::size_t pdata_len) {
    auto *req = static_cast<Request *>(cr.tp);
    if (!req)
        return DAT_ERROR(DAT_INVALID_STATE, 0);
    VerbsEp &vep = vep_of(ep);
    unsigned char buf[kCmHeader + 256];
    const std::size_t len = frame_cm_data(kCmAccept, pdata, pdata_len, buf);
    rdma_cm_id *doomed = nullptr;
    kit::ConnectionReport report;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (req->gone) {
            // dat_cr_accept(3DAT): failing without effect on the Endpoint is
            // allowed when the Provider knows the requester is gone.
            DAT2_LOG(log::kGeneric, "%s: accept: the requester gave up\n", name());
            return DAT_ERROR(DAT_INVALID_STATE, 0);
        }
        if (!qp_matches(vep))
            if (DAT_RETURN r = build_qp(vep))
                return r;
        // What both sides can do: our limits against what the requester offered.
        const int resp = std::min(vep.responder_resources, req->initiator_depth);
        const int init = std::min(vep.initiator_depth, req->responder_resources);
        // The QP is ready to receive before the reply leaves: the requester
        // may send as soon as it has it.
        int rc = move_qp(vep, req->id, IBV_QPS_RTR, resp);
        const char *step = "QP to RTR";
        if (!rc) {
            step = "QP to RTS";
            rc = move_qp(vep, req->id, IBV_QPS_RTS, init);
        }
        if (!rc) {
            rdma_conn_param param{};
            param.private_data = buf;
            param.private_data_len = static_cast<std::uint8_t>(len);
            param.responder_resources = static_cast<std::uint8_t>(resp);
            param.initiator_depth = static_cast<std::uint8_t>(init);
            param.flow_control = 1;
            param.retry_count = kRetries;
            param.rnr_retry_count = kRetries;
            param.qp_num = vep.qp->qp_num;
            step = "rdma_accept";
            rc = rdma_accept(req->id, &param) ? errno : 0;
        }
        requests_.erase(req->key);
        if (rc) {
            // The QP may be half way: the accept completes with an error.
            DAT2_ERR("%s: accept: %s: %s\n", name(), step, std::strerror(rc));
            refuse(req->id);
            doomed = req->id;
            vep.id = nullptr;
            end_connection(vep);
            report.connect_failed(ep, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR);
        } else {
            vep.id = req->id;
            req->id->context = key_context(add_ep_key(vep));
            vep.local_port = ntohs(rdma_get_src_port(req->id));
        }
    }
    delete req;
    report.deliver();
    release_id(doomed);
    return DAT_SUCCESS;
}

// A request refused by this provider, not its Consumer: the requester sees
// NON_PEER_REJECTED (kCmRefuse).
void VerbsTransport::refuse(rdma_cm_id *id) {
    unsigned char buf[kCmHeader];
    rdma_reject(id, buf, static_cast<std::uint8_t>(frame_cm_data(kCmRefuse, nullptr, 0, buf)));
}

DAT_RETURN VerbsTransport::reject(kit::Cr &cr, const void *pdata, std::size_t pdata_len) {
    auto *req = static_cast<Request *>(cr.tp);
    if (!req)
        return DAT_ERROR(DAT_INVALID_STATE, 0);
    unsigned char buf[kCmHeader + 256];
    const std::size_t len = frame_cm_data(cr.refused ? kCmRefuse : kCmReject, pdata, cr.refused ? 0 : pdata_len, buf);
    DAT_RETURN r = DAT_SUCCESS;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!req->gone && rdma_reject(req->id, buf, static_cast<std::uint8_t>(len))) {
            DAT2_ERR("%s: rdma_reject: %s\n", name(), std::strerror(errno));
            r = to_dat(errno, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
        }
        requests_.erase(req->key);
    }
    release_id(req->id);
    delete req;
    return r;
}

void VerbsTransport::cr_release(kit::Cr &cr) {
    if (cr.tp)
        reject(cr, nullptr, 0);
}

} // namespace dat2::verbs
