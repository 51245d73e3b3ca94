// SPDX-License-Identifier: BSD-3-Clause
// Endpoints over libfabric MSG endpoints: connect, listen, accept, reject,
// disconnect, and the post paths.
#include "ofi.hpp"

#include "log.hpp"
#include "srq.hpp"

#include <algorithm>
#include "sockaddr.hpp"

#include <arpa/inet.h>
#include <cstring>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

namespace dat2::ofi {

namespace {

OfiEp &oep_of(kit::Ep &ep) { return *static_cast<OfiEp *>(ep.tp); }

using kit::port_of;
using kit::set_port;

} // namespace

DAT_RETURN OfiTransport::ep_open(kit::Ep &ep) {
    fid_cq *srq_cq = nullptr;
    if (ep.srq) {
        if (static_cast<std::size_t>(ep.srq->users.load()) >= info_->domain_attr->max_ep_srx_ctx) {
            DAT2_ERR("%s: the SRQ already serves %zu endpoints, the most libfabric shares a receive context with\n",
                     ia_.name.c_str(), info_->domain_attr->max_ep_srx_ctx);
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
        }
        fi_cq_attr attr{};
        attr.size = 256; // grows past this by itself (libfabric's overflow list)
        attr.format = FI_CQ_FORMAT_DATA;
        attr.wait_obj = FI_WAIT_FD;
        if (int rc = fi_cq_open(domain_, &attr, &srq_cq, nullptr)) {
            DAT2_ERR("%s: receive queue of an EP with an SRQ: fi_cq_open: %s\n", ia_.name.c_str(), fi_text(rc));
            return to_dat(rc, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP));
        }
        if (DAT_RETURN r = watch_cq(srq_cq, ep.recv_evd)) {
            fi_close(&srq_cq->fid);
            return r;
        }
    }
    OfiEp *oep;
    try {
        oep = new OfiEp;
    } catch (...) {
        if (srq_cq) {
            unwatch_cq(srq_cq);
            fi_close(&srq_cq->fid);
        }
        throw;
    }
    oep->owner = &ep;
    oep->srq_cq = srq_cq;
    ep.tp = oep;
    {
        std::lock_guard<std::recursive_mutex> lock(cm_mu_);
        oep->id = next_id_++;
        eps_[oep->id] = oep;
    }
    if (srq_cq) {
        {
            std::lock_guard<std::mutex> lock(srq_queues_mu_);
            srq_queues_.push_back({srq_cq, &ep, ep.recv_evd});
        }
        srq_queue_count_.fetch_add(1, std::memory_order_release);
    }
    return DAT_SUCCESS;
}

void OfiTransport::close_srq_queue(OfiEp &oep) {
    fid_cq *cq = oep.srq_cq;
    if (!cq)
        return;
    unwatch_cq(cq);
    {
        std::lock_guard<std::mutex> lock(srq_queues_mu_);
        srq_queues_.erase(std::remove_if(srq_queues_.begin(), srq_queues_.end(),
                                         [&](const SrqQueue &q) { return q.cq == cq; }),
                          srq_queues_.end());
    }
    srq_queue_count_.fetch_sub(1, std::memory_order_release);
    // The EP is going away: what it took from the SRQ and completed cannot be
    // reported any more; the records go back to the SRQ.
    kit::Completion c[32];
    for (int n; (n = read_queue(cq, nullptr, c, 32)) > 0;)
        for (int i = 0; i < n; ++i)
            kit::srq_drop(*c[i].op);
    fi_close(&cq->fid);
    oep.srq_cq = nullptr;
}

void OfiTransport::close_endpoint(OfiEp &oep) {
    if (oep.ep) {
        fi_close(&oep.ep->fid);
        oep.ep = nullptr;
    }
    oep.deadline = kit::Deadline::never();
    oep.shutdown_sent = false;
    oep.break_requested = false;
    // A new id: events still queued for the old endpoint find nothing.
    eps_.erase(oep.id);
    oep.id = next_id_++;
    eps_[oep.id] = &oep;
}

void OfiTransport::ep_close(kit::Ep &ep) {
    OfiEp *oep = static_cast<OfiEp *>(ep.tp);
    if (!oep)
        return;
    {
        std::lock_guard<std::recursive_mutex> lock(cm_mu_);
        close_endpoint(*oep);
        eps_.erase(oep->id);
    }
    close_srq_queue(*oep);
    delete oep;
    ep.tp = nullptr;
}

void OfiTransport::ep_reset(kit::Ep &ep) {
    std::lock_guard<std::recursive_mutex> lock(cm_mu_);
    close_endpoint(oep_of(ep));
}

DAT_RETURN OfiTransport::make_endpoint(OfiEp &oep, fi_info *info) {
    kit::Ep &ep = *oep.owner;
    fid_ep *fep = nullptr;
    if (ep.srq)
        info->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT; // its receives come from the SRQ's context
    int rc = fi_endpoint(domain_, info, &fep, reinterpret_cast<void *>(static_cast<std::uintptr_t>(oep.id)));
    if (rc) {
        DAT2_ERR("%s: fi_endpoint: %s\n", ia_.name.c_str(), fi_text(rc));
        return to_dat(rc, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP));
    }
    const char *step = "bind event queue";
    if ((rc = fi_ep_bind(fep, &eq_->fid, 0)) == 0) {
        step = "bind send queue";
        if ((rc = fi_ep_bind(fep, &cq_of(ep.request_evd)->fid, FI_TRANSMIT)) == 0) {
            step = "bind shared receive context";
            if (!ep.srq || (rc = fi_ep_bind(fep, &static_cast<fid_ep *>(ep.srq->tp)->fid, 0)) == 0) {
                step = "bind receive queue";
                fid_cq *recv_cq = oep.srq_cq ? oep.srq_cq : cq_of(ep.recv_evd);
                if ((rc = fi_ep_bind(fep, &recv_cq->fid, FI_RECV)) == 0) {
                    step = "enable";
                    rc = fi_enable(fep);
                }
            }
        }
    }
    if (rc) {
        DAT2_ERR("%s: endpoint %s: %s\n", ia_.name.c_str(), step, fi_text(rc));
        fi_close(&fep->fid);
        return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    oep.ep = fep;
    oep.send_cq = cq_of(ep.request_evd);
    oep.recv_cq = oep.srq_cq ? oep.srq_cq : cq_of(ep.recv_evd);
    if (oep.srq_cq) {
        // Its receives complete on the recv EVD it has now (dat_ep_modify may
        // have changed it since the EP was created).
        watch_cq(oep.srq_cq, ep.recv_evd); // watched already: cannot fail
        std::lock_guard<std::mutex> lock(srq_queues_mu_);
        for (SrqQueue &q : srq_queues_)
            if (q.cq == oep.srq_cq)
                q.evd = ep.recv_evd;
    }
    // Receives posted while unconnected go in first, in posting order.
    std::lock_guard<std::mutex> lock(oep.pending_mu);
    for (auto &p : oep.pending) {
        fi_msg msg{};
        msg.msg_iov = p.iov.data();
        msg.desc = p.desc.data();
        msg.iov_count = p.iov.size();
        msg.context = p.op;
        ssize_t prc = fi_recvmsg(fep, &msg, FI_COMPLETION);
        if (prc)
            DAT2_ERR("%s: posting an early receive: %s\n", ia_.name.c_str(), fi_text(static_cast<int>(prc)));
    }
    oep.pending.clear();
    return DAT_SUCCESS;
}

DAT_RETURN OfiTransport::connect(kit::Ep &ep, const sockaddr *addr, DAT_CONN_QUAL qual, const void *pdata,
                                 std::size_t pdata_len, DAT_TIMEOUT timeout) {
    sockaddr_storage dest = kit::with_port(addr, kit::port_of_qual(qual));
    fi_info *hints = fi_dupinfo(info_);
    if (!hints)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    std::free(hints->dest_addr);
    hints->dest_addr = std::malloc(kit::sockaddr_size(addr));
    if (!hints->dest_addr) {
        fi_freeinfo(hints);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    std::memcpy(hints->dest_addr, &dest, kit::sockaddr_size(addr));
    hints->dest_addrlen = kit::sockaddr_size(addr);
    hints->addr_format = addr->sa_family == AF_INET6 ? FI_SOCKADDR_IN6 : FI_SOCKADDR_IN;
    if (addr->sa_family != addr_.ss_family) {
        std::free(hints->src_addr);
        hints->src_addr = nullptr;
        hints->src_addrlen = 0;
    }
    fi_info *cinfo = nullptr;
    int rc = fi_getinfo(kApiVersion, nullptr, nullptr, 0, hints, &cinfo);
    fi_freeinfo(hints);
    if (rc) {
        DAT2_ERR("%s: no route to the requested address: %s\n", ia_.name.c_str(), fi_text(rc));
        return DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
    }
    unsigned char buf[512];
    std::size_t len = frame_cm_data(kCmConnect, pdata, pdata_len, buf, qual);
    std::lock_guard<std::recursive_mutex> lock(cm_mu_);
    OfiEp &oep = oep_of(ep);
    DAT_RETURN r = make_endpoint(oep, cinfo);
    if (r == DAT_SUCCESS) {
        rc = fi_connect(oep.ep, cinfo->dest_addr, buf, len);
        if (rc) {
            // dat_ep_connect(3DAT): an address the provider can tell is
            // unusable right away is DAT_INVALID_ADDRESS.
            DAT2_ERR("%s: fi_connect: %s\n", ia_.name.c_str(), fi_text(rc));
            close_endpoint(oep);
            r = DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
        } else if (timeout != DAT_TIMEOUT_INFINITE) {
            oep.deadline = kit::Deadline::after_us(timeout);
            kit::signal_fd(wake_fd_); // the CM thread recomputes its wake-up
        }
    }
    fi_freeinfo(cinfo);
    return r;
}

DAT_RETURN OfiTransport::disconnect(kit::Ep &ep, bool graceful) {
    (void)graceful; // tcp delivers what was queued before the FIN either way
    std::unique_lock<std::recursive_mutex> lock(cm_mu_);
    OfiEp &oep = oep_of(ep);
    DAT_EP_STATE s = ep.state.load();
    if (s == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING || s == DAT_EP_STATE_COMPLETION_PENDING || !oep.ep) {
        // Aborting establishment: nothing will report it, so report it here.
        close_endpoint(oep);
        kit::on_disconnected(ep, false);
        return DAT_SUCCESS;
    }
    int rc = fi_shutdown(oep.ep, 0);
    if (rc) {
        DAT2_LOG(log::kGeneric, "%s: fi_shutdown: %s\n", ia_.name.c_str(), fi_text(rc));
        kit::on_disconnected(ep, false);
        return DAT_SUCCESS;
    }
    // FI_SHUTDOWN comes back on the event queue; should it not, the CM
    // thread completes the disconnect after this long.
    oep.shutdown_sent = true;
    oep.deadline = kit::Deadline::after(std::chrono::seconds(2));
    return DAT_SUCCESS;
}

DAT_RETURN OfiTransport::psp_open(kit::Psp &psp, const DAT_CONN_QUAL *qual, DAT_CONN_QUAL *assigned) {
    const std::uint16_t port = qual ? kit::port_of_qual(*qual) : 0;
    fi_info *hints = fi_dupinfo(info_);
    if (!hints)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    auto *src = static_cast<sockaddr_storage *>(std::calloc(1, sizeof(sockaddr_storage)));
    if (!src) {
        fi_freeinfo(hints);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    std::memcpy(src, &addr_, kit::sockaddr_size(address()));
    set_port(*src, port);
    std::free(hints->src_addr);
    hints->src_addr = src;
    hints->src_addrlen = kit::sockaddr_size(address());
    fi_info *pinfo = nullptr;
    int rc = fi_getinfo(kApiVersion, nullptr, nullptr, 0, hints, &pinfo);
    fi_freeinfo(hints);
    if (rc) {
        DAT2_ERR("%s: fi_getinfo for a listener: %s\n", ia_.name.c_str(), fi_text(rc));
        return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    auto *opsp = new OfiPsp;
    opsp->owner = &psp;
    std::lock_guard<std::recursive_mutex> lock(cm_mu_);
    opsp->id = next_id_++;
    const char *step = "fi_passive_ep";
    rc = fi_passive_ep(fabric_, pinfo, &opsp->pep, reinterpret_cast<void *>(static_cast<std::uintptr_t>(opsp->id)));
    if (rc == 0) {
        step = "bind";
        if ((rc = fi_pep_bind(opsp->pep, &eq_->fid, 0)) == 0) {
            step = "listen";
            rc = fi_listen(opsp->pep);
        }
    }
    fi_freeinfo(pinfo);
    if (rc) {
        if (rc != -FI_EADDRINUSE)
            DAT2_ERR("%s: %s on qualifier %llu: %s\n", ia_.name.c_str(), step,
                     static_cast<unsigned long long>(qual ? *qual : 0), fi_text(rc));
        if (opsp->pep)
            fi_close(&opsp->pep->fid);
        delete opsp;
        return rc == -FI_EADDRINUSE ? DAT_ERROR(DAT_CONN_QUAL_IN_USE, 0) : to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    // The consumer's qualifier as given (not its port); the port the
    // provider chose for "any" (or for qualifier 0).
    if (qual && port) {
        *assigned = *qual;
    } else {
        sockaddr_storage bound{};
        std::size_t blen = sizeof bound;
        if (fi_getname(&opsp->pep->fid, &bound, &blen) == 0)
            *assigned = port_of(bound);
    }
    opsp->conn_qual = *assigned;
    psps_[opsp->id] = opsp;
    psp.tp = opsp;
    return DAT_SUCCESS;
}

void OfiTransport::refuse_other_qual(OfiPsp &opsp, fi_info *info, DAT_CONN_QUAL asked) {
    DAT2_LOG(log::kGeneric,
             "%s: connection request for qualifier %llu refused: port %u serves qualifier %llu, which shares it\n",
             ia_.name.c_str(), static_cast<unsigned long long>(asked), unsigned(kit::port_of_qual(asked)),
             static_cast<unsigned long long>(opsp.conn_qual));
    // No CM data: the client sees what a port nobody listens on gives
    // (NON_PEER_REJECTED, handle_cm_error); nobody listens on its qualifier.
    if (int rc = fi_reject(opsp.pep, info->handle, nullptr, 0))
        DAT2_LOG(log::kGeneric, "%s: fi_reject: %s\n", ia_.name.c_str(), fi_text(rc));
    fi_freeinfo(info);
}

void OfiTransport::psp_close(kit::Psp &psp) {
    auto *opsp = static_cast<OfiPsp *>(psp.tp);
    if (!opsp)
        return;
    std::lock_guard<std::recursive_mutex> lock(cm_mu_);
    psps_.erase(opsp->id);
    fi_close(&opsp->pep->fid);
    delete opsp;
    psp.tp = nullptr;
}

DAT_RETURN OfiTransport::accept(kit::Cr &cr, kit::Ep &ep, const void *pdata, std::size_t pdata_len) {
    auto *info = static_cast<fi_info *>(cr.tp);
    if (!info)
        return DAT_ERROR(DAT_INVALID_STATE, 0);
    unsigned char buf[512];
    std::size_t len = frame_cm_data(kCmAccept, pdata, pdata_len, buf);
    std::lock_guard<std::recursive_mutex> lock(cm_mu_);
    OfiEp &oep = oep_of(ep);
    DAT_RETURN r = make_endpoint(oep, info);
    if (r != DAT_SUCCESS)
        return r;
    int rc = fi_accept(oep.ep, buf, len);
    if (rc) {
        DAT2_ERR("%s: fi_accept: %s\n", ia_.name.c_str(), fi_text(rc));
        close_endpoint(oep);
        return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    fi_freeinfo(info);
    cr.tp = nullptr;
    return DAT_SUCCESS;
}

DAT_RETURN OfiTransport::reject(kit::Cr &cr, const void *pdata, std::size_t pdata_len) {
    auto *info = static_cast<fi_info *>(cr.tp);
    if (!info)
        return DAT_ERROR(DAT_INVALID_STATE, 0);
    unsigned char buf[512];
    std::size_t len = frame_cm_data(kCmReject, pdata, pdata_len, buf);
    DAT_RETURN r = DAT_SUCCESS;
    {
        std::lock_guard<std::recursive_mutex> lock(cm_mu_);
        auto *opsp = cr.psp ? static_cast<OfiPsp *>(cr.psp->tp) : nullptr;
        if (opsp) {
            int rc = fi_reject(opsp->pep, info->handle, buf, len);
            if (rc) {
                DAT2_ERR("%s: fi_reject: %s\n", ia_.name.c_str(), fi_text(rc));
                r = to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
            }
        }
    }
    fi_freeinfo(info);
    cr.tp = nullptr;
    return r;
}

void OfiTransport::cr_release(kit::Cr &cr) {
    if (cr.tp)
        reject(cr, nullptr, 0);
}

// Shared receive queues: libfabric shared receive contexts. Receives still
// queued when one closes are dropped without completions (no queue is bound
// to the context itself); the kit takes their records back.
DAT_RETURN OfiTransport::srq_open(kit::Srq &srq) {
    fi_rx_attr attr = *info_->rx_attr;
    attr.size = static_cast<std::size_t>(ia_.max_srq_recvs);
    fid_ep *srx = nullptr;
    if (int rc = fi_srx_context(domain_, &attr, &srx, nullptr)) {
        DAT2_ERR("%s: fi_srx_context(size %zu): %s\n", ia_.name.c_str(), attr.size, fi_text(rc));
        return to_dat(rc, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ));
    }
    srq.tp = srx;
    return DAT_SUCCESS;
}

void OfiTransport::srq_close(kit::Srq &srq) {
    if (srq.tp)
        fi_close(&static_cast<fid_ep *>(srq.tp)->fid);
    srq.tp = nullptr;
}

DAT_RETURN OfiTransport::srq_post(kit::Srq &srq, kit::Op &op, const kit::Segment *segs, int nsegs) {
    iovec iov[kit::kMaxIov];
    void *desc[kit::kMaxIov];
    to_iov(segs, nsegs, iov, desc);
    fi_msg msg{};
    msg.msg_iov = iov;
    msg.desc = desc;
    msg.iov_count = static_cast<std::size_t>(nsegs);
    msg.context = &op;
    ssize_t rc = fi_recvmsg(static_cast<fid_ep *>(srq.tp), &msg, FI_COMPLETION);
    if (rc == 0)
        return DAT_SUCCESS;
    if (rc == -FI_EAGAIN)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    DAT2_ERR("%s: posting a receive to an SRQ: %s\n", ia_.name.c_str(), fi_text(static_cast<int>(rc)));
    return to_dat(static_cast<int>(rc), DAT_ERROR(DAT_INTERNAL_ERROR, 0));
}

// The CM thread breaks the connection (check_deadlines): the kit may ask
// from inside on_established().
DAT_RETURN OfiTransport::ep_break(kit::Ep &ep) {
    oep_of(ep).break_requested = true;
    kit::signal_fd(wake_fd_);
    return DAT_SUCCESS;
}

bool OfiTransport::send_with_invalidate() const {
    return info_->domain_attr->cq_data_size >= sizeof(DAT_RMR_CONTEXT);
}

DAT_RETURN OfiTransport::post(kit::Ep &ep, kit::PostKind kind, kit::Op &op, const kit::Segment *segs, int nsegs,
                              const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags) {
    (void)flags;
    OfiEp &oep = oep_of(ep);
    iovec iov[kit::kMaxIov];
    void *desc[kit::kMaxIov];
    to_iov(segs, nsegs, iov, desc);
    fid_ep *fep = oep.ep;
    if (!fep) {
        if (kind != kit::PostKind::kRecv)
            return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
        std::lock_guard<std::mutex> lock(oep.pending_mu);
        if (!oep.ep) {
            oep.pending.push_back({&op, std::vector<iovec>(iov, iov + nsegs), std::vector<void *>(desc, desc + nsegs)});
            return DAT_SUCCESS;
        }
        fep = oep.ep;
    }
    ssize_t rc;
    switch (kind) {
    case kit::PostKind::kSend:
    case kit::PostKind::kRecv: {
        fi_msg msg{};
        msg.msg_iov = iov;
        msg.desc = desc;
        msg.iov_count = static_cast<std::size_t>(nsegs);
        msg.context = &op;
        if (kind == kit::PostKind::kRecv) {
            rc = fi_recvmsg(fep, &msg, FI_COMPLETION);
            break;
        }
        std::uint64_t op_flags = FI_COMPLETION;
        if (remote) {
            // Send with invalidate: the context travels as remote CQ data,
            // which nothing else we send carries (see cq_read).
            msg.data = remote->rmr_context;
            op_flags |= FI_REMOTE_CQ_DATA;
        }
        rc = fi_sendmsg(fep, &msg, op_flags);
        break;
    }
    default: {
        fi_rma_iov rma{remote->virtual_address, remote->segment_length, remote->rmr_context};
        fi_msg_rma msg{};
        msg.msg_iov = iov;
        msg.desc = desc;
        msg.iov_count = static_cast<std::size_t>(nsegs);
        msg.rma_iov = &rma;
        msg.rma_iov_count = 1;
        msg.context = &op;
        // A write completes only once the target has placed it: a write the
        // target refuses (bad key, range or privilege) then fails here instead
        // of being reported as a success before the connection drops.
        rc = kind == kit::PostKind::kRdmaWrite ? fi_writemsg(fep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE)
                                               : fi_readmsg(fep, &msg, FI_COMPLETION);
        break;
    }
    }
    if (rc == 0)
        return DAT_SUCCESS;
    if (rc == -FI_EAGAIN)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
    DAT2_ERR("%s: posting a DTO: %s\n", ia_.name.c_str(), fi_text(static_cast<int>(rc)));
    return to_dat(static_cast<int>(rc), DAT_ERROR(DAT_INTERNAL_ERROR, 0));
}

// ---- link loss ------------------------------------------------------------------

namespace {

// The descriptor of this process's TCP socket connected from `local` to
// `peer`, or -1. Within a network namespace no other TCP socket has that
// pair of addresses.
int tcp_socket_of(const sockaddr_storage &local, const sockaddr_storage &peer) {
    DIR *dir = opendir("/proc/self/fd");
    if (!dir)
        return -1;
    int found = -1;
    while (dirent *e = readdir(dir)) {
        char *end = nullptr;
        long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end || fd == dirfd(dir))
            continue;
        int type = 0;
        socklen_t tlen = sizeof type;
        if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 || type != SOCK_STREAM)
            continue;
        sockaddr_storage a{};
        socklen_t alen = sizeof a;
        if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr *>(&a), &alen) != 0 || !kit::same_address(a, local))
            continue;
        alen = sizeof a;
        if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr *>(&a), &alen) != 0 || !kit::same_address(a, peer))
            continue;
        found = static_cast<int>(fd);
        break;
    }
    closedir(dir);
    return found;
}

} // namespace

// A dead link is noticed by TCP alone: with data in flight after
// net.ipv4.tcp_retries2 retransmissions (~15 min by default), with nothing
// in flight never (libfabric's tcp provider sets no SO_KEEPALIVE). libfabric
// 1.17 has neither a variable for either nor a way to reach the endpoint's
// socket, so the socket is found by its addresses. The caller holds cm_mu_,
// under which the endpoint (and so its socket) cannot be closed: the
// descriptor found cannot be reused for another socket meanwhile.
//
// TCP_USER_TIMEOUT ends the connection once sent data stayed unacknowledged
// for `ms`; keepalive probes (after ms/2 idle, then every max(1 s, ms/10))
// give a side with nothing in flight something to be unacknowledged, and the
// user timeout decides there too. So a side notices within about
// ms + max(1 s, ms/10) of the link's loss, and a shorter outage is ridden out
// by retransmission.
bool bound_link_timeout(fid_ep *ep, unsigned ms) {
    sockaddr_storage local{}, peer{};
    std::size_t llen = sizeof local, plen = sizeof peer;
    if (fi_getname(&ep->fid, &local, &llen) != 0 || fi_getpeer(ep, &peer, &plen) != 0)
        return false;
    int fd = tcp_socket_of(local, peer);
    if (fd < 0)
        return false;
    const int user_timeout = static_cast<int>(ms);
    const int on = 1;
    const int idle_s = std::max(1, user_timeout / 2000);
    const int interval_s = std::max(1, user_timeout / 10000);
    return setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout) == 0 &&
           setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s) == 0 &&
           setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s) == 0 &&
           setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) == 0;
}

} // namespace dat2::ofi
