// SPDX-License-Identifier: BSD-3-Clause
// Endpoints over RC queue pairs and rdma_cm: connect, listen, accept,
// reject, disconnect, and the post paths.
#include "verbs.hpp"

#include "log.hpp"
#include "srq.hpp"

#include <algorithm>
#include "sockaddr.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <climits>
#include <cstring>

namespace dat2::verbs {

namespace {

VerbsEp &vep_of(kit::Ep &ep) { return *static_cast<VerbsEp *>(ep.tp); }

using kit::set_port;

// IB CM reject reason of a reject sent by the peer's consumer (rdma_reject).
constexpr int kRejectConsumerDefined = 28;
constexpr int kRetries = 7; // transport retries; 7 RNR retries means "forever", as OFED's dapl

// The kit's resolved segments as a scatter/gather list (the LMR's lkey is
// the segment's descriptor); returns their total length.
std::uint64_t to_sges(const kit::Segment *segs, int nsegs, ibv_sge *sge) {
    std::uint64_t total = 0;
    for (int i = 0; i < nsegs; ++i) {
        sge[i].addr = reinterpret_cast<std::uintptr_t>(segs[i].addr);
        sge[i].length = static_cast<std::uint32_t>(segs[i].length);
        sge[i].lkey = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(segs[i].desc));
        total += segs[i].length;
    }
    return total;
}

} // namespace

// ---- queue pairs ------------------------------------------------------------------------

bool VerbsTransport::qp_matches(const VerbsEp &vep) const {
    const kit::Ep &ep = *vep.owner;
    return vep.qp && vep.qp_request_evd == ep.request_evd && vep.qp_recv_evd == ep.recv_evd && vep.qp_pz == ep.pz &&
           vep.qp->srq == (ep.srq ? static_cast<ibv_srq *>(ep.srq->tp) : nullptr);
}

DAT_RETURN VerbsTransport::build_qp(VerbsEp &vep) {
    kit::Ep &ep = *vep.owner;
    if (vep.qp)
        destroy_qp(vep);
    VerbsCq *scq = cq_of(ep.request_evd), *rcq = cq_of(ep.recv_evd);
    // Send slots beyond the consumer's: the graceful-disconnect marker, and
    // window binds and invalidations (two per dat_rmr_bind).
    const int send_depth = std::max(1, ep.attr.max_request_dtos) + kReservedSendSlots;
    // With an SRQ the QP has no receive queue; its share of the SRQ's
    // completions lands in the recv EVD's CQ.
    const int recv_depth = ep.srq ? std::min(ep.srq->max_recv_dtos, 1024) : std::max(1, ep.attr.max_recv_dtos);
    CqPart *spart = cq_commit(*scq, send_depth);
    if (!spart)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    CqPart *rpart = cq_commit(*rcq, recv_depth);
    if (!rpart) {
        cq_uncommit(*scq, spart, send_depth);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    }
    ibv_pd *pd = pd_acquire(ep.pz);
    if (!pd) {
        cq_uncommit(*scq, spart, send_depth);
        cq_uncommit(*rcq, rpart, recv_depth);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
    }
    ibv_qp_init_attr a{};
    a.send_cq = spart->cq;
    a.recv_cq = rpart->cq;
    a.cap.max_send_wr = static_cast<std::uint32_t>(send_depth);
    a.cap.max_recv_wr = static_cast<std::uint32_t>(recv_depth);
    a.cap.max_send_sge = static_cast<std::uint32_t>(
        std::max({1, ep.attr.max_request_iov, ep.attr.max_rdma_read_iov, ep.attr.max_rdma_write_iov}));
    a.cap.max_recv_sge = static_cast<std::uint32_t>(std::max(1, ep.attr.max_recv_iov));
    a.cap.max_inline_data = max_inline_;
    a.qp_type = IBV_QPT_RC;
    if (ep.srq) {
        a.srq = static_cast<ibv_srq *>(ep.srq->tp);
        a.cap.max_recv_wr = a.cap.max_recv_sge = 0;
    }
    // Every DAT request is signalled (the kit recycles its record at the
    // completion); the plugin's window operations are not.
    ibv_qp *qp = ibv_create_qp(pd, &a);
    const char *step = "ibv_create_qp";
    int err = qp ? 0 : errno;
    if (qp) {
        // INIT now, so that receives can be posted before any connection;
        // rdma_init_qp_attr() refines it once the connection's path is known.
        ibv_qp_attr attr{};
        attr.qp_state = IBV_QPS_INIT;
        attr.pkey_index = 0;
        attr.port_num = port_;
        attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
                               (atomics_supported() ? IBV_ACCESS_REMOTE_ATOMIC : 0);
        step = "QP to INIT";
        err = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
        if (err) {
            ibv_destroy_qp(qp);
            qp = nullptr;
        }
    }
    if (!qp) {
        DAT2_ERR("%s: %s (send %d x %u, recv %d x %u): %s\n", ia_.name.c_str(), step, send_depth,
                 a.cap.max_send_sge, recv_depth, a.cap.max_recv_sge, std::strerror(err));
        pd_release(ep.pz);
        cq_uncommit(*scq, spart, send_depth);
        cq_uncommit(*rcq, rpart, recv_depth);
        return to_dat(err, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP));
    }
    vep.qp = qp;
    {
        std::lock_guard<std::mutex> lock(qp_eps_mu_);
        qp_eps_[qp->qp_num] = &ep;
        vep.qp_nums.push_back(qp->qp_num);
    }
    vep.qp_request_evd = ep.request_evd;
    vep.qp_recv_evd = ep.recv_evd;
    vep.qp_pz = ep.pz;
    vep.send_cq = scq;
    vep.recv_cq = rcq;
    vep.send_part = spart;
    vep.recv_part = rpart;
    vep.send_depth = send_depth;
    vep.recv_depth = recv_depth;
    vep.max_inline = a.cap.max_inline_data;
    vep.responder_resources = static_cast<std::uint8_t>(
        std::clamp(std::min(ep.attr.max_rdma_read_in, dev_attr_.max_qp_rd_atom), 0, UINT8_MAX));
    vep.initiator_depth = static_cast<std::uint8_t>(
        std::clamp(std::min(ep.attr.max_rdma_read_out, dev_attr_.max_qp_init_rd_atom), 0, UINT8_MAX));
    return DAT_SUCCESS;
}

// Nothing of the QP completes after this: completions already queued stay
// in the CQs (the kit drains them while the EP still exists).
void VerbsTransport::destroy_qp(VerbsEp &vep) {
    if (!vep.qp)
        return;
    if (int rc = ibv_destroy_qp(vep.qp))
        DAT2_ERR("%s: ibv_destroy_qp: %s\n", ia_.name.c_str(), std::strerror(rc));
    vep.qp = nullptr;
    // Its unsignalled requests are gone with it (flushed by the kit).
    vep.unsignaled_run = 0;
    vep.last_unsignaled.store(nullptr);
    vep.marker_last.store(nullptr);
    cq_uncommit(*vep.send_cq, vep.send_part, vep.send_depth);
    cq_uncommit(*vep.recv_cq, vep.recv_part, vep.recv_depth);
    pd_release(vep.qp_pz);
    vep.send_cq = vep.recv_cq = nullptr;
    vep.send_part = vep.recv_part = nullptr;
}

// The QP to RTR or RTS with the connection's attributes (rdma_init_qp_attr
// on the id). `rd_atomic`: the negotiated RDMA read depth to use instead
// of the CM's (-1: the CM's).
int VerbsTransport::move_qp(VerbsEp &vep, rdma_cm_id *id, ibv_qp_state state, int rd_atomic) {
    ibv_qp_attr attr{};
    int mask = 0;
    if (state == IBV_QPS_RTR) {
        // Port and P_Key of the connection's path, then RTR.
        attr.qp_state = IBV_QPS_INIT;
        if (rdma_init_qp_attr(id, &attr, &mask))
            return errno;
        if (int rc = ibv_modify_qp(vep.qp, &attr, mask))
            return rc;
    }
    attr = ibv_qp_attr{};
    attr.qp_state = state;
    if (rdma_init_qp_attr(id, &attr, &mask))
        return errno;
    if (state == IBV_QPS_RTR) {
        // As librdmacm: old kernels set RoCE-only mask bits for InfiniBand.
        if (port_attr_.link_layer == IBV_LINK_LAYER_INFINIBAND)
            mask &= ~0xe00000;
        if (rd_atomic >= 0)
            attr.max_dest_rd_atomic = static_cast<std::uint8_t>(rd_atomic);
    } else if (rd_atomic >= 0) {
        attr.max_rd_atomic = static_cast<std::uint8_t>(rd_atomic);
    }
    return ibv_modify_qp(vep.qp, &attr, mask);
}

void VerbsTransport::qp_error(VerbsEp &vep) {
    if (!vep.qp)
        return;
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    if (int rc = ibv_modify_qp(vep.qp, &attr, IBV_QP_STATE))
        DAT2_ERR("%s: QP %u to ERROR: %s\n", ia_.name.c_str(), vep.qp->qp_num, std::strerror(rc));
}

rdma_cm_id *VerbsTransport::end_connection(VerbsEp &vep) {
    qp_error(vep);
    vep.deadline = kit::Deadline::never();
    vep.drain_pending = false;
    vep.disconnect_sent = false;
    rdma_cm_id *id = vep.id;
    vep.id = nullptr;
    add_ep_key(vep); // what is still queued for the old id finds nothing
    return id;
}

// ---- endpoints ----------------------------------------------------------------------------

DAT_RETURN VerbsTransport::ep_open(kit::Ep &ep) {
    auto *vep = new VerbsEp;
    vep->owner = &ep;
    ep.tp = vep;
    std::lock_guard<std::recursive_mutex> lock(cm_mu_);
    add_ep_key(*vep);
    if (DAT_RETURN r = build_qp(*vep)) {
        eps_.erase(vep->key);
        delete vep;
        ep.tp = nullptr;
        return r;
    }
    return DAT_SUCCESS;
}

void VerbsTransport::ep_close(kit::Ep &ep) {
    VerbsEp *vep = static_cast<VerbsEp *>(ep.tp);
    if (!vep)
        return;
    rdma_cm_id *id;
    {
        std::lock_guard<std::recursive_mutex> lock(cm_mu_);
        eps_.erase(vep->key);
        destroy_qp(*vep); // first: no completion of it appears after this
        id = vep->id;
        vep->id = nullptr;
    }
    release_id(id); // a connection still up ends here (the peer sees DISCONNECTED)
    // Completions of the QP still queued may name this VerbsEp (the marker):
    // take them in while it exists.
    for (kit::Evd *evd : {ep.request_evd, ep.recv_evd}) {
        if (evd && evd->cq) {
            std::lock_guard<kit::Lock> lock(evd->mu);
            kit::evd_drain_all_locked(*evd);
        }
    }
    {
        // Not a scan of every EP's entries: freeing stays O(log EPs).
        std::lock_guard<std::mutex> lock(qp_eps_mu_);
        for (std::uint32_t num : vep->qp_nums)
            if (auto it = qp_eps_.find(num); it != qp_eps_.end() && it->second == &ep)
                qp_eps_.erase(it);
    }
    delete vep;
    ep.tp = nullptr;
}

void VerbsTransport::ep_reset(kit::Ep &ep) {
    VerbsEp &vep = vep_of(ep);
    rdma_cm_id *id;
    {
        std::lock_guard<std::recursive_mutex> lock(cm_mu_);
        id = end_connection(vep);
        // A fresh QP: the old one's queues are gone with it, nothing it held
        // can complete into a record the kit hands out again.
        if (DAT_RETURN r = build_qp(vep))
            DAT2_ERR("%s: EP %p: no new QP after reset (0x%x); it is rebuilt when next used\n", ia_.name.c_str(),
                     (void *)&ep, r);
    }
    release_id(id);
}

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
        std::lock_guard<std::recursive_mutex> lock(cm_mu_);
        if (!qp_matches(vep))
            if ((r = build_qp(vep)))
                return r;
        vep.connect_len = frame_cm_data(kCmConnect, pdata, pdata_len, vep.connect_data);
        vep.resolve_ms = timeout == DAT_TIMEOUT_INFINITE
                             ? 2000
                             : static_cast<int>(std::clamp<DAT_TIMEOUT>(timeout / 1000, 1, 2000));
        const std::uint64_t key = add_ep_key(vep);
        if (rdma_create_id(channel_, &id, reinterpret_cast<void *>(static_cast<std::uintptr_t>(key)), RDMA_PS_TCP)) {
            DAT2_ERR("%s: rdma_create_id: %s\n", ia_.name.c_str(), std::strerror(errno));
            return to_dat(errno, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP));
        }
        if (rdma_resolve_addr(id, const_cast<sockaddr *>(src), reinterpret_cast<sockaddr *>(&dest), vep.resolve_ms)) {
            // dat_ep_connect(3DAT): an address the provider can tell is
            // unusable right away is DAT_INVALID_ADDRESS.
            DAT2_LOG(log::kGeneric, "%s: rdma_resolve_addr: %s\n", ia_.name.c_str(), std::strerror(errno));
            r = DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
        } else {
            vep.id = id;
            id = nullptr;
            vep.deadline = kit::Deadline::after_us(timeout);
        }
    }
    if (id)
        rdma_destroy_id(id);
    else
        kit::signal_fd(wake_fd_); // the CM thread recomputes its wake-up
    return r;
}

void VerbsTransport::on_addr_resolved(VerbsEp &vep) {
    if (vep.owner->state.load() != DAT_EP_STATE_ACTIVE_CONNECTION_PENDING || !vep.id)
        return;
    if (rdma_resolve_route(vep.id, vep.resolve_ms)) {
        DAT2_LOG(log::kGeneric, "%s: rdma_resolve_route: %s\n", ia_.name.c_str(), std::strerror(errno));
        rdma_cm_id *id = end_connection(vep);
        kit::on_connect_failed(*vep.owner, DAT_CONNECTION_EVENT_UNREACHABLE, nullptr, 0);
        release_id(id);
    }
}

void VerbsTransport::on_route_resolved(VerbsEp &vep) {
    if (vep.owner->state.load() != DAT_EP_STATE_ACTIVE_CONNECTION_PENDING || !vep.id)
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
        DAT2_LOG(log::kGeneric, "%s: rdma_connect: %s\n", ia_.name.c_str(), std::strerror(errno));
        rdma_cm_id *id = end_connection(vep);
        kit::on_connect_failed(*vep.owner, DAT_CONNECTION_EVENT_UNREACHABLE, nullptr, 0);
        release_id(id);
    }
}

void VerbsTransport::on_connect_response(VerbsEp &vep, rdma_cm_event &event) {
    kit::Ep &ep = *vep.owner;
    if (ep.state.load() != DAT_EP_STATE_ACTIVE_CONNECTION_PENDING || !vep.id)
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
        DAT2_ERR("%s: EP %p: %s: %s\n", ia_.name.c_str(), (void *)&ep, step, std::strerror(rc));
        rdma_reject(vep.id, nullptr, 0);
        rdma_cm_id *id = end_connection(vep);
        kit::on_connect_failed(ep, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, nullptr, 0);
        release_id(id);
        return;
    }
    vep.deadline = kit::Deadline::never();
    ep.local_port = ntohs(rdma_get_src_port(vep.id));
    const unsigned char *pdata = nullptr;
    std::size_t pdata_len = 0;
    unframe_cm_data(event.param.conn.private_data, event.param.conn.private_data_len, kCmAccept, pdata, pdata_len);
    kit::on_established(ep, pdata, pdata_len);
}

void VerbsTransport::on_connection_error(VerbsEp &vep, rdma_cm_event &event) {
    kit::Ep &ep = *vep.owner;
    const DAT_EP_STATE state = ep.state.load();
    DAT2_LOG(log::kGeneric, "%s: EP %p: %s, status %d\n", ia_.name.c_str(), (void *)&ep, rdma_event_str(event.event),
             event.status);
    const unsigned char *pdata = nullptr;
    std::size_t pdata_len = 0;
    rdma_cm_id *id = nullptr;
    if (state == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING) {
        DAT_EVENT_NUMBER reason = DAT_CONNECTION_EVENT_NON_PEER_REJECTED;
        switch (event.event) {
        case RDMA_CM_EVENT_REJECTED:
            // Our header with kind "reject" means the peer's consumer refused;
            // a refusal without it comes from the CM (nobody listens).
            if (unframe_cm_data(event.param.conn.private_data, event.param.conn.private_data_len, kCmReject, pdata,
                                pdata_len) ||
                event.status == kRejectConsumerDefined)
                reason = DAT_CONNECTION_EVENT_PEER_REJECTED;
            break;
        case RDMA_CM_EVENT_ADDR_ERROR:
        case RDMA_CM_EVENT_ROUTE_ERROR:
        case RDMA_CM_EVENT_UNREACHABLE:
            reason = event.status == -ETIMEDOUT ? DAT_CONNECTION_EVENT_TIMED_OUT : DAT_CONNECTION_EVENT_UNREACHABLE;
            break;
        default: break;
        }
        id = end_connection(vep);
        kit::on_connect_failed(ep, reason, pdata, pdata_len);
    } else if (state == DAT_EP_STATE_COMPLETION_PENDING) {
        id = end_connection(vep);
        kit::on_connect_failed(ep, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, nullptr, 0);
    } else if (state == DAT_EP_STATE_CONNECTED || state == DAT_EP_STATE_DISCONNECT_PENDING) {
        id = end_connection(vep);
        kit::on_disconnected(ep, true);
    }
    release_id(id);
}

void VerbsTransport::on_peer_disconnect(VerbsEp &vep) {
    kit::Ep &ep = *vep.owner;
    const DAT_EP_STATE state = ep.state.load();
    rdma_cm_id *id = end_connection(vep); // destroying the id answers the peer's DREQ
    if (state == DAT_EP_STATE_COMPLETION_PENDING)
        kit::on_connect_failed(ep, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, nullptr, 0);
    else if (state == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING)
        kit::on_connect_failed(ep, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, nullptr, 0);
    else
        kit::on_disconnected(ep, false);
    release_id(id);
}

void VerbsTransport::break_connection(VerbsEp &vep, const char *why) {
    kit::Ep &ep = *vep.owner;
    const DAT_EP_STATE state = ep.state.load();
    if (state != DAT_EP_STATE_CONNECTED && state != DAT_EP_STATE_DISCONNECT_PENDING)
        return;
    DAT2_LOG(log::kGeneric, "%s: connection of EP %p broke: %s\n", ia_.name.c_str(), (void *)&ep, why);
    rdma_cm_id *id = end_connection(vep);
    kit::on_disconnected(ep, true);
    release_id(id); // the DREQ tells the peer
}

// dat_ep_set_watermark's hard watermark; may come from inside a kit callback
// on the CM thread: only flags the EP, the CM thread breaks the connection.
DAT_RETURN VerbsTransport::ep_break(kit::Ep &ep) {
    auto *vep = static_cast<VerbsEp *>(ep.tp);
    if (!vep)
        return DAT_ERROR(DAT_INVALID_STATE, 0);
    vep->broken.store(true);
    any_flagged_.store(true);
    kit::signal_fd(wake_fd_);
    return DAT_SUCCESS;
}

DAT_RETURN VerbsTransport::disconnect(kit::Ep &ep, bool graceful) {
    VerbsEp &vep = vep_of(ep);
    rdma_cm_id *id = nullptr;
    {
        std::lock_guard<std::recursive_mutex> lock(cm_mu_);
        const DAT_EP_STATE s = ep.state.load();
        if (s == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING || s == DAT_EP_STATE_COMPLETION_PENDING || !vep.id ||
            !graceful || vep.disconnect_sent) {
            // Aborting establishment, abrupt, or already asked: done now.
            // Destroying the id sends the DREQ (or the REJ) to the peer.
            id = end_connection(vep);
            kit::on_disconnected(ep, false);
        } else if (ep.requests_posted.load() == 0) {
            vep.disconnect_sent = true;
            if (rdma_disconnect(vep.id))
                DAT2_LOG(log::kGeneric, "%s: rdma_disconnect: %s\n", ia_.name.c_str(), std::strerror(errno));
            vep.deadline = kit::Deadline::after(std::chrono::seconds(2));
        } else {
            // Requests in flight complete first (dat_ep_disconnect(3DAT):
            // graceful "must try to be completed successfully first"). The
            // marker's completion tells when; the consumer reaps it with its
            // own completions, and the deadline covers a consumer that does not.
            ibv_send_wr wr{}, *bad = nullptr;
            wr.wr_id = reinterpret_cast<std::uintptr_t>(&vep) | kWrMarker;
            wr.opcode = IBV_WR_RDMA_WRITE;
            wr.send_flags = IBV_SEND_SIGNALED;
            {
                // The unsignalled request the marker will stand for: the
                // last one before it in the send queue.
                std::lock_guard<kit::Lock> lock(ep.post_mu);
                vep.marker_last.store(vep.last_unsignaled.load());
                vep.drain_pending = ibv_post_send(vep.qp, &wr, &bad) == 0;
            }
            if (!vep.drain_pending) {
                vep.disconnect_sent = true;
                rdma_disconnect(vep.id);
            }
            vep.deadline = kit::Deadline::after(std::chrono::seconds(2));
        }
    }
    if (id)
        release_id(id);
    else
        kit::signal_fd(wake_fd_);
    return DAT_SUCCESS;
}

// ---- passive side -------------------------------------------------------------------------

DAT_RETURN VerbsTransport::psp_open(kit::Psp &psp, const DAT_CONN_QUAL *qual, DAT_CONN_QUAL *assigned) {
    const std::uint16_t port = qual ? kit::port_of_qual(*qual) : 0;
    sockaddr_storage local = addr_;
    set_port(local, port);
    auto *vpsp = new VerbsPsp;
    vpsp->owner = &psp;
    rdma_cm_id *id = nullptr;
    int err = 0;
    const char *step = "rdma_create_id";
    {
        // Registered before it listens: a request may come at once.
        std::lock_guard<std::recursive_mutex> lock(cm_mu_);
        vpsp->key = next_key_++;
        if (rdma_create_id(channel_, &id, reinterpret_cast<void *>(static_cast<std::uintptr_t>(vpsp->key)),
                           RDMA_PS_TCP) == 0) {
            step = "rdma_bind_addr";
            if (rdma_bind_addr(id, reinterpret_cast<sockaddr *>(&local)) == 0) {
                step = "rdma_listen";
                if (rdma_listen(id, 128) == 0) {
                    vpsp->id = id;
                    psps_[vpsp->key] = vpsp;
                    psp.tp = vpsp;
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
    DAT2_ERR("%s: %s on qualifier %llu: %s\n", ia_.name.c_str(), step,
             static_cast<unsigned long long>(qual ? *qual : 0), std::strerror(err));
    return to_dat(err, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
}

void VerbsTransport::psp_close(kit::Psp &psp) {
    auto *vpsp = static_cast<VerbsPsp *>(psp.tp);
    if (!vpsp)
        return;
    {
        std::lock_guard<std::recursive_mutex> lock(cm_mu_);
        psps_.erase(vpsp->key);
    }
    release_id(vpsp->id); // requests already reported have ids of their own
    delete vpsp;
    psp.tp = nullptr;
}

void VerbsTransport::on_connect_request(rdma_cm_event &event, VerbsPsp &psp) {
    Request *req = nullptr;
    try {
        req = new Request;
    } catch (...) {
    }
    if (!req) {
        rdma_reject(event.id, nullptr, 0);
        release_id(event.id);
        return;
    }
    req->key = next_key_++;
    req->id = event.id;
    req->initiator_depth = event.param.conn.initiator_depth;
    req->responder_resources = event.param.conn.responder_resources;
    event.id->context = reinterpret_cast<void *>(static_cast<std::uintptr_t>(req->key));
    requests_[req->key] = req;
    const unsigned char *pdata = nullptr;
    std::size_t pdata_len = 0;
    if (!unframe_cm_data(event.param.conn.private_data, event.param.conn.private_data_len, kCmConnect, pdata,
                         pdata_len)) {
        // Not one of ours: hand over what came (zero padded to the CM's size).
        pdata = static_cast<const unsigned char *>(event.param.conn.private_data);
        pdata_len = event.param.conn.private_data_len;
    }
    kit::on_connection_request(*psp.owner, req, rdma_get_peer_addr(event.id), pdata, pdata_len);
}

DAT_RETURN VerbsTransport::accept(kit::Cr &cr, kit::Ep &ep, const void *pdata, std::size_t pdata_len) {
    auto *req = static_cast<Request *>(cr.tp);
    if (!req)
        return DAT_ERROR(DAT_INVALID_STATE, 0);
    VerbsEp &vep = vep_of(ep);
    unsigned char buf[kCmHeader + 256];
    const std::size_t len = frame_cm_data(kCmAccept, pdata, pdata_len, buf);
    rdma_cm_id *doomed = nullptr;
    {
        std::lock_guard<std::recursive_mutex> lock(cm_mu_);
        if (req->gone) {
            // dat_cr_accept(3DAT): failing without effect on the Endpoint is
            // allowed when the Provider knows the requester is gone.
            DAT2_LOG(log::kGeneric, "%s: accept: the requester gave up\n", ia_.name.c_str());
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
        cr.tp = nullptr;
        if (rc) {
            // The QP may be half way: the accept completes with an error.
            DAT2_ERR("%s: accept: %s: %s\n", ia_.name.c_str(), step, std::strerror(rc));
            rdma_reject(req->id, nullptr, 0);
            doomed = req->id;
            vep.id = nullptr;
            end_connection(vep);
            kit::on_connect_failed(ep, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, nullptr, 0);
        } else {
            vep.id = req->id;
            req->id->context = reinterpret_cast<void *>(static_cast<std::uintptr_t>(add_ep_key(vep)));
            ep.local_port = ntohs(rdma_get_src_port(req->id));
        }
    }
    delete req;
    release_id(doomed);
    return DAT_SUCCESS;
}

DAT_RETURN VerbsTransport::reject(kit::Cr &cr, const void *pdata, std::size_t pdata_len) {
    auto *req = static_cast<Request *>(cr.tp);
    if (!req)
        return DAT_ERROR(DAT_INVALID_STATE, 0);
    unsigned char buf[kCmHeader + 256];
    const std::size_t len = frame_cm_data(kCmReject, pdata, pdata_len, buf);
    DAT_RETURN r = DAT_SUCCESS;
    {
        std::lock_guard<std::recursive_mutex> lock(cm_mu_);
        if (!req->gone && rdma_reject(req->id, buf, static_cast<std::uint8_t>(len))) {
            DAT2_ERR("%s: rdma_reject: %s\n", ia_.name.c_str(), std::strerror(errno));
            r = to_dat(errno, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
        }
        requests_.erase(req->key);
        cr.tp = nullptr;
    }
    release_id(req->id);
    delete req;
    return r;
}

void VerbsTransport::cr_release(kit::Cr &cr) {
    if (cr.tp)
        reject(cr, nullptr, 0);
}

// ---- posting ----------------------------------------------------------------------------------

// Posts a request of the consumer's, under the kit's Ep::post_mu (kit::Ia::
// requests_in_order): its place in the send queue is its posting sequence.
// A suppressed send or RDMA write goes unsignalled unless max_request_dtos
// / 2 went so in a row; a signalled request clears VerbsEp::last_unsignaled
// (its completion will stand for it: the marker must not report it again).
// On failure nothing changed. Inline: a call of its own cost ~25
// instructions a post (callgrind).
static inline __attribute__((always_inline)) int post_request(VerbsEp &vep, bool suppressed, int max_request_dtos,
                                                              kit::Op &op, ibv_send_wr &wr) {
    kit::Op *const last = vep.last_unsignaled.load(std::memory_order_relaxed);
    const int run = vep.unsignaled_run;
    if (suppressed && run + 1 < std::max(1, max_request_dtos / 2)) {
        wr.send_flags &= ~IBV_SEND_SIGNALED;
        vep.unsignaled_run = run + 1;
        vep.last_unsignaled.store(&op, std::memory_order_relaxed);
    } else if (last || run) {
        vep.unsignaled_run = 0;
        vep.last_unsignaled.store(nullptr, std::memory_order_relaxed);
    }
    ibv_send_wr *bad = nullptr;
    const int rc = ibv_post_send(vep.qp, &wr, &bad);
    if (rc != 0) {
        vep.unsignaled_run = run;
        vep.last_unsignaled.store(last, std::memory_order_relaxed);
    }
    return rc;
}

DAT_RETURN VerbsTransport::post(kit::Ep &ep, kit::PostKind kind, kit::Op &op, const kit::Segment *segs, int nsegs,
                                const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags) {
    VerbsEp &vep = vep_of(ep);
    if (kind == kit::PostKind::kRecv && !qp_matches(vep)) {
        // First post after dat_ep_modify changed the EP's EVDs or PZ.
        std::lock_guard<std::recursive_mutex> lock(cm_mu_);
        if (!qp_matches(vep))
            if (DAT_RETURN r = build_qp(vep))
                return r;
    }
    ibv_qp *qp = vep.qp;
    if (!qp)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    ibv_sge sge[kit::kMaxIov];
    const std::uint64_t total = to_sges(segs, nsegs, sge);
    int rc;
    if (kind == kit::PostKind::kRecv) {
        ibv_recv_wr wr{}, *bad = nullptr;
        wr.wr_id = reinterpret_cast<std::uintptr_t>(&op);
        wr.sg_list = sge;
        wr.num_sge = nsegs;
        rc = ibv_post_recv(qp, &wr, &bad);
    } else {
        ibv_send_wr wr{};
        wr.wr_id = reinterpret_cast<std::uintptr_t>(&op);
        wr.sg_list = sge;
        wr.num_sge = nsegs;
        wr.send_flags = IBV_SEND_SIGNALED;
        switch (kind) {
        case kit::PostKind::kSend:
            wr.opcode = IBV_WR_SEND;
            if (remote) {
                // dat_ep_post_send_with_invalidate: the peer's device unbinds the window.
                wr.opcode = IBV_WR_SEND_WITH_INV;
                wr.invalidate_rkey = remote->rmr_context;
            }
            if (flags & DAT_COMPLETION_SOLICITED_WAIT_FLAG)
                wr.send_flags |= IBV_SEND_SOLICITED;
            break;
        case kit::PostKind::kRdmaWrite: wr.opcode = IBV_WR_RDMA_WRITE; break;
        default: wr.opcode = IBV_WR_RDMA_READ; break;
        }
        if (kind != kit::PostKind::kSend && remote) {
            // dat_ep_post_rdma_*(3DAT): the remote buffer must hold it all.
            if (total > remote->segment_length)
                return DAT_ERROR(DAT_LENGTH_ERROR, 0);
            wr.wr.rdma.remote_addr = remote->virtual_address;
            wr.wr.rdma.rkey = remote->rmr_context;
        }
        if (wr.opcode != IBV_WR_RDMA_READ && total && total <= vep.max_inline)
            wr.send_flags |= IBV_SEND_INLINE;
        if (flags & DAT_COMPLETION_BARRIER_FENCE_FLAG)
            wr.send_flags |= IBV_SEND_FENCE;
        rc = post_request(vep, (flags & DAT_COMPLETION_SUPPRESS_FLAG) && wr.opcode != IBV_WR_RDMA_READ,
                          ep.attr.max_request_dtos, op, wr);
    }
    if (rc == 0)
        return DAT_SUCCESS;
    if (rc == ENOMEM)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0); // queue full
    DAT2_ERR("%s: posting a DTO on QP %u: %s\n", ia_.name.c_str(), qp->qp_num, std::strerror(rc));
    return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
}

// dat_ib_post_rdma_write_immed, dat_ib_post_fetch_and_add and
// dat_ib_post_cmp_and_swap (core/ext.cpp checked them): the device's own
// operations. The immediate data travels as given, unswapped, as OFED's
// providers send it (ibv_send_wr.imm_data), so both ends read the value
// the consumer wrote.
DAT_RETURN VerbsTransport::post_ext(kit::Ep &ep, kit::Op &op, const kit::Segment *segs, int nsegs,
                                    const DAT_RMR_TRIPLET &remote, DAT_COMPLETION_FLAGS flags) {
    VerbsEp &vep = vep_of(ep);
    ibv_qp *qp = vep.qp;
    if (!qp)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    ibv_sge sge[kit::kMaxIov];
    const std::uint64_t total = to_sges(segs, nsegs, sge);
    ibv_send_wr wr{};
    wr.wr_id = reinterpret_cast<std::uintptr_t>(&op);
    wr.sg_list = sge;
    wr.num_sge = nsegs;
    wr.send_flags = IBV_SEND_SIGNALED;
    switch (op.ext) {
    case kit::ExtKind::kRdmaWriteImmed:
        if (total > remote.segment_length)
            return DAT_ERROR(DAT_LENGTH_ERROR, 0);
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.imm_data = op.immed;
        wr.wr.rdma.remote_addr = remote.virtual_address;
        wr.wr.rdma.rkey = remote.rmr_context;
        if (total && total <= vep.max_inline)
            wr.send_flags |= IBV_SEND_INLINE;
        break;
    case kit::ExtKind::kFetchAdd:
    case kit::ExtKind::kCmpSwap:
        if (!atomics_supported())
            return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
        wr.opcode = op.ext == kit::ExtKind::kFetchAdd ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
        wr.wr.atomic.remote_addr = remote.virtual_address;
        wr.wr.atomic.rkey = remote.rmr_context;
        wr.wr.atomic.compare_add = op.operand[0];
        wr.wr.atomic.swap = op.ext == kit::ExtKind::kCmpSwap ? op.operand[1] : 0;
        break;
    case kit::ExtKind::kNone:
    case kit::ExtKind::kRmrBind:
        return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    }
    if (flags & DAT_COMPLETION_BARRIER_FENCE_FLAG)
        wr.send_flags |= IBV_SEND_FENCE;
    int rc = post_request(vep, false, ep.attr.max_request_dtos, op, wr); // signalled: clears last_unsignaled
    if (rc == 0)
        return DAT_SUCCESS;
    if (rc == ENOMEM)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0); // queue full
    DAT2_ERR("%s: posting an extended DTO on QP %u: %s\n", ia_.name.c_str(), qp->qp_num, std::strerror(rc));
    return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
}

// ---- shared receive queues -----------------------------------------------------------
// One ibv_srq per DAT SRQ, as deep as the IA allows (dat_srq_resize then
// only changes the kit's count). EPs created with it get QPs on it.

DAT_RETURN VerbsTransport::srq_open(kit::Srq &srq) {
    if (!ia_.max_srq_recvs)
        return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    if (srq.max_recv_iov > dev_attr_.max_srq_sge)
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ibv_pd *pd = pd_acquire(srq.pz);
    if (!pd)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
    ibv_srq_init_attr attr{};
    attr.attr.max_wr = static_cast<std::uint32_t>(ia_.max_srq_recvs);
    attr.attr.max_sge = static_cast<std::uint32_t>(std::max(1, srq.max_recv_iov));
    ibv_srq *s = ibv_create_srq(pd, &attr);
    if (!s) {
        const int err = errno;
        DAT2_ERR("%s: ibv_create_srq(%u x %u): %s\n", ia_.name.c_str(), attr.attr.max_wr, attr.attr.max_sge,
                 std::strerror(err));
        pd_release(srq.pz);
        return to_dat(err, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ));
    }
    srq.tp = s;
    return DAT_SUCCESS;
}

void VerbsTransport::srq_close(kit::Srq &srq) {
    if (!srq.tp)
        return;
    if (int rc = ibv_destroy_srq(static_cast<ibv_srq *>(srq.tp)))
        DAT2_ERR("%s: ibv_destroy_srq: %s\n", ia_.name.c_str(), std::strerror(rc));
    srq.tp = nullptr;
    pd_release(srq.pz);
}

DAT_RETURN VerbsTransport::srq_post(kit::Srq &srq, kit::Op &op, const kit::Segment *segs, int nsegs) {
    ibv_sge sge[kit::kMaxIov];
    to_sges(segs, nsegs, sge);
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = reinterpret_cast<std::uintptr_t>(&op);
    wr.sg_list = sge;
    wr.num_sge = nsegs;
    int rc = ibv_post_srq_recv(static_cast<ibv_srq *>(srq.tp), &wr, &bad);
    if (rc == 0)
        return DAT_SUCCESS;
    if (rc == ENOMEM)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    DAT2_ERR("%s: ibv_post_srq_recv: %s\n", ia_.name.c_str(), std::strerror(rc));
    return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
}

} // namespace dat2::verbs
