// SPDX-License-Identifier: BSD-3-Clause
// Endpoints over libfabric MSG endpoints: the libfabric endpoint a
// connection gets, and the post paths.
#include "ofi.hpp"

#include "log.hpp"

namespace dat2::ofi {

namespace {

OfiEp &oep_of(kit::Ep &ep) { return *static_cast<OfiEp *>(ep.tp); }

} // namespace

DAT_RETURN OfiTransport::ep_open(kit::Ep &ep, void *&tp) {
    if (ep.srq && ep.srq->pz != ep.pz) {
        // A shared receive context belongs to one domain, and a domain is a PZ.
        DAT2_ERR("%s: an EP and its SRQ must be in one PZ here (each PZ is a libfabric domain)\n", name());
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    OfiDomain *dom = domain_acquire(ep.pz);
    if (!dom)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
    struct Release {
        OfiTransport *t;
        OfiDomain *dom;
        ~Release() { t->domain_release(dom); }
    } release{this, dom};
    fid_cq *srq_cq = nullptr;
    if (ep.srq) {
        if (static_cast<std::size_t>(ep.srq->users.load()) >= info_->domain_attr->max_ep_srx_ctx) {
            DAT2_ERR("%s: the SRQ already serves %zu endpoints, the most libfabric shares a receive context with\n",
                     name(), info_->domain_attr->max_ep_srx_ctx);
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
        }
        fi_cq_attr attr{};
        attr.size = 256; // grows past this by itself (libfabric's overflow list)
        attr.format = FI_CQ_FORMAT_DATA;
        attr.wait_obj = FI_WAIT_FD;
        if (int rc = fi_cq_open(dom->domain, &attr, &srq_cq, nullptr)) {
            DAT2_ERR("%s: receive queue of an EP with an SRQ: fi_cq_open: %s\n", name(), fi_text(rc));
            return to_dat(rc, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP));
        }
        if (DAT_RETURN r = watch_cq(srq_cq, ep.recv_evd)) {
            fi_close(&srq_cq->fid);
            return r;
        }
    }
    auto oep = std::make_unique<OfiEp>();
    oep->owner = &ep;
    oep->srq_cq = srq_cq;
    oep->dom = dom;
    oep->pz = ep.pz;
    release.dom = nullptr;
    {
        std::lock_guard<std::mutex> lock(mu_);
        oep->id = next_id_++;
        const std::uint64_t id = oep->id;
        oep->disconnect_timer = loop().timer([this, id] { disconnect_expired(id); });
        eps_by_id_[id] = oep.get();
    }
    if (srq_cq) {
        {
            std::lock_guard<std::mutex> lock(srq_queues_mu_);
            srq_queues_.push_back({srq_cq, &ep, ep.recv_evd});
        }
        srq_queue_count_.fetch_add(1, std::memory_order_release);
    }
    tp = oep.release();
    return DAT_SUCCESS;
}

void OfiTransport::close_endpoint(OfiEp &oep) {
    if (oep.ep) {
        eps_by_fid_.erase(&oep.ep->fid);
        {
            std::lock_guard<kit::Lock> guard(oep.post_mu);
            fi_close(&oep.ep->fid);
            oep.ep = nullptr;
        }
        unbind_queues(oep);
    }
    loop().disarm(oep.disconnect_timer);
    oep.shutdown_sent = false;
}

void OfiTransport::unbind_queues(OfiEp &oep) {
    if (oep.send_cq)
        cq_unbind(oep.send_cq, oep.send_binds);
    if (oep.recv_cq)
        cq_unbind(oep.recv_cq, 1);
    oep.send_cq = nullptr;
    oep.recv_cq = nullptr;
}

void OfiTransport::ep_close(kit::Ep &ep) {
    auto *oep = static_cast<OfiEp *>(ep.tp);
    if (!oep)
        return;
    {
        std::lock_guard<std::mutex> lock(mu_);
        close_endpoint(*oep);
        eps_by_id_.erase(oep->id);
    }
    loop().sync(); // a handler that found the EP has returned
    loop().timer_free(oep->disconnect_timer);
    oep->disconnect_timer = nullptr;
    close_srq_queue(*oep);
}

void OfiTransport::ep_free(kit::Ep &ep) {
    auto *oep = static_cast<OfiEp *>(ep.tp);
    if (!oep)
        return;
    domain_release(oep->dom);
    delete oep;
}

void OfiTransport::ep_reset(kit::Ep &ep) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        close_endpoint(oep_of(ep));
    }
    loop().sync();
}

DAT_RETURN OfiTransport::make_endpoint(OfiEp &oep, fi_info *info, bool &grown) {
    kit::Ep &ep = *oep.owner;
    if (oep.ep)
        close_endpoint(oep); // a connection attempt the consumer gave up
    if (oep.pz != ep.pz) {
        // dat_ep_modify gave the EP another PZ: its endpoint goes in that domain.
        if (oep.srq_cq) {
            DAT2_ERR("%s: EP %p with an SRQ moved to another PZ\n", name(), (void *)&ep);
            return DAT_ERROR(DAT_INVALID_STATE, 0);
        }
        OfiDomain *dom = domain_acquire(ep.pz);
        if (!dom)
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
        domain_release(oep.dom);
        oep.dom = dom;
        oep.pz = ep.pz;
    }
    OfiDomain &dom = *oep.dom;
    const bool shared = !oep.srq_cq && ep.request_evd && ep.request_evd == ep.recv_evd;
    oep.send_binds = shared ? 2 : 1;
    oep.send_cq = cq_part(ep.request_evd, dom, oep.send_binds, grown);
    oep.recv_cq = oep.srq_cq || shared || !oep.send_cq ? nullptr : cq_part(ep.recv_evd, dom, 1, grown);
    fid_cq *send_cq = oep.send_cq;
    fid_cq *recv_cq = oep.srq_cq ? oep.srq_cq : shared ? send_cq : oep.recv_cq;
    if (!send_cq || !recv_cq) {
        unbind_queues(oep);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    }
    fid_ep *fep = nullptr;
    if (ep.srq)
        info->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT; // its receives come from the SRQ's context
    // Queues as deep as the EP's attributes: the provider's default depth
    // would refuse the receives and requests beyond it. Twice the
    // requests where the provider allows: a write with immediate data takes
    // two entries (ofi_ext.cpp).
    const auto requests = static_cast<std::size_t>(ep.attr.max_request_dtos);
    info->tx_attr->size = std::max(info->tx_attr->size, std::min(2 * requests, std::max(max_tx_size_, requests)));
    info->rx_attr->size = std::max(info->rx_attr->size, static_cast<std::size_t>(ep.attr.max_recv_dtos));
    int rc = fi_endpoint(dom.domain, info, &fep, nullptr);
    if (rc) {
        DAT2_ERR("%s: fi_endpoint: %s\n", name(), fi_text(rc));
        unbind_queues(oep);
        return to_dat(rc, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP));
    }
    const char *step = "bind event queue";
    if ((rc = fi_ep_bind(fep, &eq_->fid, 0)) == 0) {
        step = "bind send queue";
        if ((rc = fi_ep_bind(fep, &send_cq->fid, FI_TRANSMIT)) == 0) {
            step = "bind shared receive context";
            if (!ep.srq || (rc = fi_ep_bind(fep, &static_cast<OfiSrq *>(ep.srq->tp)->srx->fid, 0)) == 0) {
                step = "bind receive queue";
                if ((rc = fi_ep_bind(fep, &recv_cq->fid, FI_RECV)) == 0) {
                    step = "enable";
                    rc = fi_enable(fep);
                }
            }
        }
    }
    if (rc) {
        DAT2_ERR("%s: endpoint %s: %s\n", name(), step, fi_text(rc));
        fi_close(&fep->fid);
        unbind_queues(oep);
        return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    {
        std::lock_guard<kit::Lock> guard(oep.post_mu);
        oep.ep = fep;
        PartHot *hot = part_hot(recv_cq); // none: an SRQ's queue, or no recv EVD
        oep.recv_hot = hot ? hot : &oep.no_part_hot;
        oep.recv_queue = hot ? recv_cq : nullptr;
    }
    eps_by_fid_[&fep->fid] = &oep;
    if (oep.srq_cq) {
        // Its receives complete on the recv EVD it has now (dat_ep_modify may
        // have changed it since the EP was created).
        std::lock_guard<std::mutex> lock(srq_queues_mu_);
        for (SrqQueue &q : srq_queues_)
            if (q.cq == oep.srq_cq)
                q.evd = ep.recv_evd;
        auto found = cqs_.find(oep.srq_cq);
        if (found != cqs_.end())
            found->second.evd = ep.recv_evd;
    }
    return DAT_SUCCESS;
}

DAT_RETURN refused_post(const char *ia, const char *what, ssize_t rc) {
    if (rc == -FI_EAGAIN) {
        DAT2_ERR("%s: posting %s: the provider's queue is full (of the EP, or of every EP on its pair of EVDs)\n",
                 ia, what);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
    }
    DAT2_ERR("%s: posting %s: %s\n", ia, what, fi_text(static_cast<int>(rc)));
    return to_dat(static_cast<int>(rc), DAT_ERROR(DAT_INTERNAL_ERROR, 0));
}

DAT_RETURN OfiTransport::post_recv(kit::Ep &ep, kit::Op &op, const kit::Segment *segs, int nsegs,
                                   DAT_COMPLETION_FLAGS) {
    OfiEp &oep = oep_of(ep);
    fid_cq *queue;
    {
        std::lock_guard<kit::Lock> guard(oep.post_mu);
        fid_ep *fep = oep.ep;
        if (!fep)
            return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
        if (const ssize_t rc = post_msg(fep, true, op, segs, nsegs))
            return refused_post(name(), "a DTO", rc);
        // Sequentially consistent, as is the count of the EVD's waiters that
        // a wait raises before it reads: either its read sees the flag, or
        // this post sees the waiter (below).
        oep.recv_hot->store(true, std::memory_order_seq_cst);
        queue = oep.recv_queue;
    }
    // A waiter already asleep on the EVD's fds would not see this receive
    // complete a message tcp already holds (it read all of a message of no
    // bytes): its socket has nothing new. Woken, it reads the queues again.
    // A CNO's consumer waits outside DAT: the queue is read for it now.
    if (ep.recv_evd) {
        kit::evd_wake_waiters(*ep.recv_evd);
        if (__builtin_expect(ep.recv_evd->feeds_cno.load(std::memory_order_relaxed), 0) && queue)
            look_for_cno(queue, *ep.recv_evd); // the EP holds its EVD
    }
    return DAT_SUCCESS;
}

DAT_RETURN OfiTransport::post(kit::Ep &ep, kit::PostKind kind, kit::Op &op, const kit::Segment *segs, int nsegs,
                              const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS) {
    OfiEp &oep = oep_of(ep);
    std::lock_guard<kit::Lock> guard(oep.post_mu);
    fid_ep *fep = oep.ep;
    if (!fep)
        return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
    ssize_t rc;
    if (kind == kit::PostKind::kSend) {
        rc = post_msg(fep, false, op, segs, nsegs); // never with invalidate (caps)
    } else {
        iovec iov[kit::kMaxIov];
        void *desc[kit::kMaxIov];
        // The remote range as long as the data: a longer one makes tcp's
        // target wait for bytes that never come (the kit made a read's
        // local segments as long as its remote buffer).
        const std::uint64_t total = to_iov(segs, nsegs, iov, desc);
        fi_rma_iov rma{remote->virtual_address, total, remote->rmr_context};
        fi_msg_rma msg{};
        msg.msg_iov = iov;
        msg.desc = desc;
        msg.iov_count = static_cast<std::size_t>(nsegs);
        msg.rma_iov = &rma;
        msg.rma_iov_count = 1;
        msg.context = &op;
        // A write completes only once the target has placed it: a write the
        // target refuses (bad key, range or privilege) then fails here instead
        // of being reported as a success before the connection drops. Unless
        // the IA says write_completion=transmit (write_flags()).
        rc = kind == kit::PostKind::kRdmaWrite ? fi_writemsg(fep, &msg, write_flags())
                                               : fi_readmsg(fep, &msg, FI_COMPLETION);
    }
    if (rc == 0)
        return DAT_SUCCESS;
    return refused_post(name(), "a DTO", rc);
}

} // namespace dat2::ofi
