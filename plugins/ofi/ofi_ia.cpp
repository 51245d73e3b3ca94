// SPDX-License-Identifier: BSD-3-Clause
// IA: ia_params, fabric/domain/event queue, attributes, and the CM thread.
#include "ofi.hpp"
#include "params.hpp"
#include "sockaddr.hpp"

#include "log.hpp"
#include "resources.hpp"

#include <arpa/inet.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <netdb.h>
#include <poll.h>
#include <sstream>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace dat2::ofi {

namespace {

// How many EVDs the process's resources allow (dat_ia_query's max_evds must
// be reachable). Every EVD holds the kit's eventfd, a DTO EVD also its
// completion queue's wait object (tcp: an epoll fd and a signal pair,
// measured here on a probe queue): file descriptors run out long before the
// kit's 65536 (kit::objects_within: three quarters of what is left).
DAT_COUNT evds_within_process_limits(fid_domain *domain) {
    const kit::ProcessUsage before = kit::process_usage();
    kit::ProcessUsage per_evd{4, 0, 0}; // tcp's, if the probe cannot tell
    fi_cq_attr attr{};
    attr.size = 1024;
    attr.format = FI_CQ_FORMAT_DATA;
    attr.wait_obj = FI_WAIT_FD;
    fid_cq *probe = nullptr;
    if (fi_cq_open(domain, &attr, &probe, nullptr) == 0) {
        const kit::ProcessUsage each = kit::process_usage() - before;
        fi_close(&probe->fid);
        if (each.fds > 0) {
            per_evd = each;
            per_evd.fds += 1; // the kit's eventfd
        }
    }
    return kit::objects_within(kit::process_limits(), before, per_evd, kit::kMaxObjects);
}

} // namespace

const char *fi_text(int fi_err) { return fi_strerror(fi_err < 0 ? -fi_err : fi_err); }

DAT_RETURN to_dat(int fi_err, DAT_RETURN fallback) {
    switch (fi_err < 0 ? -fi_err : fi_err) {
    case FI_SUCCESS: return DAT_SUCCESS;
    case FI_ENOMEM: return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    case FI_EAGAIN: return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
    case FI_EADDRINUSE: return DAT_ERROR(DAT_CONN_QUAL_IN_USE, 0);
    case FI_ENOTCONN: return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
    case FI_EINVAL: return DAT_ERROR(DAT_INVALID_PARAMETER, 0);
    case FI_EACCES: case FI_EPERM: return DAT_ERROR(DAT_PRIVILEGES_VIOLATION, 0);
    case FI_ENODATA: case FI_ENOSYS: case FI_EOPNOTSUPP: return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
    case FI_EADDRNOTAVAIL: case FI_EHOSTUNREACH: case FI_ENETUNREACH:
        return DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
    default: return fallback;
    }
}

DAT_DTO_COMPLETION_STATUS to_dto_status(int fi_err) {
    switch (fi_err < 0 ? -fi_err : fi_err) {
    case FI_SUCCESS: return DAT_DTO_SUCCESS;
    case FI_ECANCELED: return DAT_DTO_ERR_FLUSHED;
    case FI_ETRUNC: case FI_EMSGSIZE: case FI_ETOOSMALL: return DAT_DTO_ERR_LOCAL_LENGTH;
    case FI_EACCES: case FI_EPERM: case FI_EKEYREJECTED: return DAT_DTO_ERR_REMOTE_ACCESS;
    case FI_EREMOTEIO: return DAT_DTO_ERR_REMOTE_RESPONDER;
    case FI_ENOTCONN: case FI_ECONNRESET: case FI_ECONNABORTED: case FI_ESHUTDOWN: return DAT_DTO_ERR_FLUSHED;
    default: return DAT_DTO_ERR_TRANSPORT;
    }
}

bool parse_params(const std::string &text, Params &out, std::string &error) {
    kit::ParamList words;
    if (!kit::split_params(text, words, error))
        return false;
    for (const auto &[key, value] : words) {
        if (key == "provider")
            out.provider = value;
        else if (key == "address")
            out.address = value;
        else if (key == "domain")
            out.domain = value;
        else if (key == "fabric")
            out.fabric = value;
        else if (key == "link_timeout_ms") {
            // TCP_USER_TIMEOUT takes an unsigned int of milliseconds; past an
            // hour the kernel's own retransmission limit comes first anyway.
            char *end = nullptr;
            errno = 0;
            unsigned long ms = std::strtoul(value.c_str(), &end, 10);
            if (value.empty() || !std::isdigit(static_cast<unsigned char>(value[0])) || *end || errno ||
                ms < 1 || ms > 3'600'000) {
                error = "link_timeout_ms=" + value + ": not a number of milliseconds from 1 to 3600000";
                return false;
            }
            out.link_timeout_ms = static_cast<unsigned>(ms);
        } else {
            error = "unknown key '" + key + "' (known: provider, address, domain, fabric, link_timeout_ms)";
            return false;
        }
    }
    if (out.provider.empty()) {
        error = "no provider=NAME";
        return false;
    }
    return true;
}

OfiTransport::OfiTransport(kit::Ia &ia, const Params &params) : ia_(ia), params_(params) {}

DAT_RETURN OfiTransport::open() {
    const char *name = ia_.name.c_str();
    fi_info *hints = fi_allocinfo();
    if (!hints)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    hints->ep_attr->type = FI_EP_MSG;
    hints->caps = FI_MSG | FI_RMA;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    // DAT names remote memory by virtual address with provider keys: the
    // FI_MR_BASIC model (tcp would otherwise use offsets and user keys).
    hints->domain_attr->mr_mode = FI_MR_BASIC;
    hints->domain_attr->threading = FI_THREAD_SAFE;
    hints->fabric_attr->prov_name = strdup(params_.provider.c_str());
    if (!params_.domain.empty())
        hints->domain_attr->name = strdup(params_.domain.c_str());
    if (!params_.fabric.empty())
        hints->fabric_attr->name = strdup(params_.fabric.c_str());
    const char *node = params_.address.empty() ? nullptr : params_.address.c_str();
    // Atomics (dat_ib_post_fetch_and_add, _cmp_and_swap) are a primary
    // capability: asked for first, and done without where the provider has
    // none (tcp).
    hints->caps |= FI_ATOMIC;
    int rc = fi_getinfo(kApiVersion, node, nullptr, node ? FI_SOURCE : 0, hints, &info_);
    if (rc == -FI_ENODATA) {
        hints->caps &= ~FI_ATOMIC;
        rc = fi_getinfo(kApiVersion, node, nullptr, node ? FI_SOURCE : 0, hints, &info_);
    }
    fi_freeinfo(hints);
    if (rc) {
        DAT2_ERR("%s: no libfabric provider '%s' with connected endpoints%s%s: %s\n", name,
                 params_.provider.c_str(), node ? " on " : "", node ? node : "", fi_text(rc));
        info_ = nullptr;
        return DAT_ERROR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    }
    if (!info_->src_addr || info_->src_addrlen > sizeof addr_ ||
        (info_->addr_format != FI_SOCKADDR_IN && info_->addr_format != FI_SOCKADDR_IN6 &&
         info_->addr_format != FI_SOCKADDR)) {
        DAT2_ERR("%s: provider '%s' gives no IP source address (format %u)\n", name, params_.provider.c_str(),
                 info_->addr_format);
        return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
    }
    std::memcpy(&addr_, info_->src_addr, info_->src_addrlen);
    kit::set_port(addr_, 0);
    if ((rc = fi_fabric(info_->fabric_attr, &fabric_, nullptr))) {
        DAT2_ERR("%s: fi_fabric: %s\n", name, fi_text(rc));
        return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    // The event queue before the domain: tcp then puts the domain's sockets
    // in the queue's wait set, so the CM thread wakes for data too.
    fi_eq_attr eq_attr{};
    eq_attr.size = 1024;
    eq_attr.wait_obj = FI_WAIT_FD;
    if ((rc = fi_eq_open(fabric_, &eq_attr, &eq_, nullptr))) {
        DAT2_ERR("%s: fi_eq_open: %s\n", name, fi_text(rc));
        return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    if ((rc = fi_control(&eq_->fid, FI_GETWAIT, &eq_fd_))) {
        DAT2_ERR("%s: event queue has no fd: %s\n", name, fi_text(rc));
        return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    if ((rc = fi_domain(fabric_, info_, &domain_, nullptr))) {
        DAT2_ERR("%s: fi_domain: %s\n", name, fi_text(rc));
        return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    find_ext_caps();
    fi_cq_attr cq_attr{};
    cq_attr.size = 16;
    cq_attr.format = FI_CQ_FORMAT_MSG;
    cq_attr.wait_obj = FI_WAIT_NONE;
    if ((rc = fi_cq_open(domain_, &cq_attr, &null_cq_, nullptr))) {
        DAT2_ERR("%s: fi_cq_open: %s\n", name, fi_text(rc));
        return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
    poll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (poll_fd_ < 0) {
        DAT2_ERR("%s: epoll_create1: %s\n", name, std::strerror(errno));
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
    }
    for (int fd : {eq_fd_, wake_fd_}) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.ptr = nullptr; // not a completion queue
        if (::epoll_ctl(poll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
            DAT2_ERR("%s: epoll_ctl(fd %d): %s\n", name, fd, std::strerror(errno));
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
        }
    }
    // How much CM data the provider carries (tcp 256 B, verbs far less):
    // libfabric reports it per endpoint, so ask a passive one.
    std::size_t cm_data_size = 0;
    {
        fid_pep *probe = nullptr;
        std::size_t optlen = sizeof cm_data_size;
        if (fi_passive_ep(fabric_, info_, &probe, nullptr) == 0) {
            if (fi_getopt(&probe->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &cm_data_size, &optlen))
                cm_data_size = 0;
            fi_close(&probe->fid);
        }
    }
    if (cm_data_size <= sizeof(CmHeader)) {
        DAT2_ERR("%s: provider '%s' carries no connection data (%zu bytes); private data and reject "
                 "reasons need it\n",
                 name, params_.provider.c_str(), cm_data_size);
        return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
    }
    ia_.max_iov = static_cast<DAT_COUNT>(
        std::min<std::size_t>({info_->tx_attr->iov_limit, info_->rx_attr->iov_limit, std::size_t(kit::kMaxIov)}));
    ia_.max_private_data =
        static_cast<DAT_COUNT>(std::min<std::size_t>(kit::kMaxPrivateData, cm_data_size - sizeof(CmHeader)));
    // SRQs are shared receive contexts; the largest one the provider makes is
    // the SRQ capacity. libfabric does not say where a receive of a shared
    // context completes: the kit needs it on the queue of the endpoint that
    // took the buffer (SrqQueue), which tcp and net do (tested). Others get
    // no SRQs until tested (sockets routes them so in a plain libfabric test,
    // but its progress thread crashes under the conformance suites, SRQ or not).
    const std::string prov = info_->fabric_attr->prov_name ? info_->fabric_attr->prov_name : "";
    const bool srx_completes_per_endpoint = prov == "tcp" || prov == "net";
    for (std::size_t size = kit::kMaxDtos; srx_completes_per_endpoint && size > 0; size /= 2) {
        fi_rx_attr rx = *info_->rx_attr;
        rx.size = size;
        fid_ep *probe = nullptr;
        rc = fi_srx_context(domain_, &rx, &probe, nullptr);
        if (rc == 0) {
            fi_close(&probe->fid);
            ia_.max_srq_recvs = static_cast<DAT_COUNT>(size);
            break;
        }
        if (rc != -FI_EINVAL)
            break;
    }
    ia_.max_evds = std::min(ia_.max_evds, evds_within_process_limits(domain_));
    cm_thread_ = std::thread([this] { cm_loop(); });
    char text[INET6_ADDRSTRLEN] = "?";
    const void *a = addr_.ss_family == AF_INET6 ? static_cast<const void *>(&reinterpret_cast<sockaddr_in6 *>(&addr_)->sin6_addr)
                                                : static_cast<const void *>(&reinterpret_cast<sockaddr_in *>(&addr_)->sin_addr);
    inet_ntop(addr_.ss_family, a, text, sizeof text);
    DAT2_LOG(log::kGeneric, "%s: libfabric %s, fabric %s, domain %s, address %s\n", name,
             info_->fabric_attr->prov_name, info_->fabric_attr->name, info_->domain_attr->name, text);
    return DAT_SUCCESS;
}

OfiTransport::~OfiTransport() {
    if (cm_thread_.joinable()) {
        stopping_ = true;
        kit::signal_fd(wake_fd_);
        cm_thread_.join();
    }
    if (null_cq_)
        fi_close(&null_cq_->fid);
    if (eq_)
        fi_close(&eq_->fid);
    if (domain_)
        fi_close(&domain_->fid);
    if (fabric_)
        fi_close(&fabric_->fid);
    if (info_)
        fi_freeinfo(info_);
    if (wake_fd_ >= 0)
        ::close(wake_fd_);
    if (poll_fd_ >= 0)
        ::close(poll_fd_);
}

void OfiTransport::query(DAT_IA_ATTR &a, DAT_PROVIDER_ATTR &p) {
    std::snprintf(a.adapter_name, sizeof a.adapter_name, "%s", ia_.name.c_str());
    std::snprintf(a.vendor_name, sizeof a.vendor_name, "libfabric %s", info_->fabric_attr->prov_name);
    a.hardware_version_major = FI_MAJOR(info_->fabric_attr->prov_version);
    a.hardware_version_minor = FI_MINOR(info_->fabric_attr->prov_version);
    const std::size_t iov = std::min<std::size_t>(info_->tx_attr->iov_limit, kit::kMaxIov);
    // RMA posts one remote segment and up to iov_limit local ones.
    const std::size_t rma_iov = iov;
    a.max_dto_per_ep = 16384;
    a.max_rdma_read_per_ep_in = 64;
    a.max_rdma_read_per_ep_out = 64;
    a.max_iov_segments_per_dto = static_cast<DAT_COUNT>(iov);
    a.max_iov_segments_per_rdma_read = static_cast<DAT_COUNT>(rma_iov);
    a.max_iov_segments_per_rdma_write = static_cast<DAT_COUNT>(rma_iov);
    a.max_lmr_block_size = 0xffffffffu;
    a.max_lmr_virtual_address = ~DAT_VADDR(0);
    a.max_message_size = static_cast<DAT_SEG_LENGTH>(std::min<std::uint64_t>(info_->ep_attr->max_msg_size, 1u << 30));
    a.max_rdma_size = a.max_message_size;
    a.max_rdma_read_in = 64;
    a.max_rdma_read_out = 64;
    // A bound window is one more registration of the domain (ofi_cq.cpp).
    const std::size_t mr_count = info_->domain_attr->mr_cnt;
    a.max_rmrs = mr_count ? static_cast<DAT_COUNT>(std::min<std::size_t>(mr_count, kit::kMaxRmrs)) : kit::kMaxRmrs;
    a.max_rmr_target_address = ~DAT_VADDR(0);
    if (ia_.max_srq_recvs) // SRQs: shared receive contexts (open())
        a.max_ep_per_srq = static_cast<DAT_COUNT>(
            std::min<std::size_t>(info_->domain_attr->max_ep_srx_ctx, static_cast<std::size_t>(a.max_eps)));
    a.max_rdma_read_per_ep_in_guaranteed = DAT_TRUE;
    a.max_rdma_read_per_ep_out_guaranteed = DAT_TRUE;
    a.zb_supported = DAT_FALSE;
    p.max_private_data_size = ia_.max_private_data;
}

// ---- the CM thread -----------------------------------------------------------

void OfiTransport::cm_loop() {
    alignas(fi_eq_cm_entry) unsigned char buf[sizeof(fi_eq_cm_entry) + 512];
    epoll_event ready[64];
    for (;;) {
        int timeout_ms = -1;
        bool busy = false;
        {
            std::lock_guard<std::recursive_mutex> lock(cm_mu_);
            for (auto &[id, oep] : eps_) {
                timeout_ms = kit::min_poll_ms(timeout_ms, oep->deadline.poll_ms());
                // tcp's wait objects do not report socket writability and it
                // has no progress thread: while an endpoint is connected,
                // drive progress at least every millisecond.
                busy = busy || oep->ep != nullptr;
            }
            // Queues seen with work: once empty (fi_trywait), their fd in
            // poll_fd_ tells when that changes; until then, keep driving them.
            for (std::size_t i = 0; i < pending_.size();) {
                fid_cq *cq = pending_[i];
                auto found = cqs_.find(cq);
                fid *f = &cq->fid;
                if (found == cqs_.end() ||
                    (found->second.fd >= 0 && fi_trywait(fabric_, &f, 1) == FI_SUCCESS)) {
                    if (found != cqs_.end())
                        found->second.pending = false;
                    pending_[i] = pending_.back();
                    pending_.pop_back();
                    continue;
                }
                // Completions are queued, and fi_trywait cleared the fd's
                // signal that a consumer in dat_evd_wait may sleep on: wake it.
                busy = true;
                kit::evd_wake(*found->second.evd);
                ++i;
            }
            busy = busy || !resting_.empty();
        }
        if (busy)
            timeout_ms = kit::min_poll_ms(timeout_ms, 1);
        fid *fids[1] = {&eq_->fid};
        int nready = 0;
        if (fi_trywait(fabric_, fids, 1) == FI_SUCCESS)
            nready = std::max(0, ::epoll_wait(poll_fd_, ready, 64, timeout_ms));
        {
            std::lock_guard<std::recursive_mutex> lock(cm_mu_);
            ++round_;
            for (int i = 0; i < nready; ++i) {
                auto *cq = static_cast<fid_cq *>(ready[i].data.ptr);
                if (!cq)
                    continue; // the event queue or wake_fd_: handled below
                auto found = cqs_.find(cq);
                if (found == cqs_.end())
                    continue; // closed since epoll_wait returned
                if (consumer_polls(found->second))
                    rest(cq, found->second); // the consumer's next poll finds it
                else if (WatchedCq *w = kick_progress(cq))
                    kit::evd_wake(*w->evd);
            }
            for (std::size_t i = 0; i < pending_.size(); ++i)
                kick_progress(pending_[i]);
            // Once a millisecond: who has started or stopped polling.
            const auto now = std::chrono::steady_clock::now();
            const bool tick = busy && now >= next_tick_;
            if (tick) {
                next_tick_ = now + std::chrono::milliseconds(1);
                // A resting queue whose consumer has gone quiet is driven
                // again (an RDMA write may be landing while it watches memory).
                for (std::size_t i = 0; i < resting_.size();) {
                    fid_cq *cq = resting_[i];
                    WatchedCq &w = cqs_.find(cq)->second;
                    if (consumer_polls(w)) {
                        ++i;
                        continue;
                    }
                    stop_resting(cq, w); // takes it out of resting_
                    kick_progress(cq);
                    kit::evd_wake(*w.evd);
                }
            }
            if (busy)
                for (auto &[id, oep] : eps_)
                    if (oep->ep)
                        for (fid_cq *cq : {oep->send_cq, oep->recv_cq}) {
                            auto found = cqs_.find(cq);
                            if (found == cqs_.end() || found->second.resting)
                                continue;
                            if (tick && consumer_polls(found->second))
                                rest(cq, found->second);
                            else
                                kick_progress(cq);
                        }
        }
        kit::drain_fd(wake_fd_);
        if (stopping_)
            return;
        for (;;) {
            std::uint32_t event = 0;
            ssize_t n = fi_eq_read(eq_, &event, buf, sizeof buf, 0);
            if (n == -FI_EAGAIN)
                break;
            if (n == -FI_EAVAIL) {
                handle_cm_error();
                continue;
            }
            if (n < 0) {
                DAT2_ERR("%s: fi_eq_read: %s\n", ia_.name.c_str(), fi_text(static_cast<int>(n)));
                break;
            }
            handle_cm_event(event, buf, n);
        }
        check_deadlines();
    }
}

OfiTransport::WatchedCq *OfiTransport::kick_progress(fid_cq *cq) {
    auto found = cqs_.find(cq);
    if (found == cqs_.end())
        return nullptr;
    WatchedCq &w = found->second;
    if (w.kicked != round_) {
        w.kicked = round_;
        // A zero-entry read runs the provider's progress without taking any
        // completion away from the consumer.
        fi_cq_msg_entry none;
        fi_cq_read(cq, &none, 0);
    }
    // Progress may have queued completions and consumed the fd's signal that
    // announced them (tcp resets it as it goes): the next round looks.
    if (!w.pending) {
        w.pending = true;
        pending_.push_back(cq); // capacity reserved by watch_cq
    }
    return &w;
}

void OfiTransport::check_deadlines() {
    std::vector<kit::Ep *> expired;
    std::vector<kit::Ep *> forced;
    std::vector<kit::Ep *> broken;
    {
        std::lock_guard<std::recursive_mutex> lock(cm_mu_);
        for (auto &[id, oep] : eps_) {
            // ep_break: shut down now, report the connection broken.
            if (oep->break_requested.exchange(false) && oep->ep) {
                DAT_EP_STATE s = oep->owner->state.load();
                if (s == DAT_EP_STATE_CONNECTED || s == DAT_EP_STATE_DISCONNECT_PENDING) {
                    fi_shutdown(oep->ep, 0);
                    oep->deadline = kit::Deadline::never();
                    broken.push_back(oep->owner);
                    continue;
                }
            }
            if (!oep->deadline.expired())
                continue;
            oep->deadline = kit::Deadline::never();
            if (oep->shutdown_sent)
                forced.push_back(oep->owner);
            else
                expired.push_back(oep->owner);
        }
        // The kit's callbacks run with cm_mu_ held so that the EP cannot be
        // freed under them (ep_close takes cm_mu_ too).
        for (kit::Ep *ep : expired) {
            DAT2_LOG(log::kGeneric, "%s: connect on EP %p timed out\n", ia_.name.c_str(), (void *)ep);
            close_endpoint(*static_cast<OfiEp *>(ep->tp));
            kit::on_connect_failed(*ep, DAT_CONNECTION_EVENT_TIMED_OUT, nullptr, 0);
        }
        for (kit::Ep *ep : forced)
            kit::on_disconnected(*ep, false);
        for (kit::Ep *ep : broken)
            kit::on_disconnected(*ep, true);
    }
}

// Events can outlive the endpoint they name (closed while its event was
// queued): find the owner by comparing fid pointers, never by reading the
// fid, whose memory may already be freed.
OfiEp *OfiTransport::ep_by_fid(const fid *f) {
    for (auto &[id, oep] : eps_)
        if (oep->ep && &oep->ep->fid == f)
            return oep;
    return nullptr;
}

void OfiTransport::handle_cm_event(std::uint32_t event, void *buf, ssize_t len) {
    auto *entry = static_cast<fi_eq_cm_entry *>(buf);
    const unsigned char *pdata = nullptr;
    std::size_t pdata_len = 0;
    DAT_CONN_QUAL asked = 0; // what a connection request names
    const bool framed = cm_event_pdata(entry, len, 0, pdata, pdata_len, &asked);
    std::lock_guard<std::recursive_mutex> lock(cm_mu_);
    switch (event) {
    case FI_CONNREQ: {
        OfiPsp *opsp = nullptr;
        for (auto &[id, p] : psps_)
            if (&p->pep->fid == entry->fid)
                opsp = p;
        if (!opsp) {
            fi_freeinfo(entry->info);
            return;
        }
        if (framed && asked != opsp->conn_qual) {
            refuse_other_qual(*opsp, entry->info, asked);
            return;
        }
        const sockaddr *remote = static_cast<const sockaddr *>(entry->info->dest_addr);
        kit::on_connection_request(*opsp->owner, entry->info, remote, pdata, pdata_len);
        return;
    }
    case FI_CONNECTED: {
        OfiEp *oep = ep_by_fid(entry->fid);
        if (oep) {
            oep->deadline = kit::Deadline::never();
            sockaddr_storage local{};
            std::size_t llen = sizeof local;
            if (oep->ep && fi_getname(&oep->ep->fid, &local, &llen) == 0)
                oep->owner->local_port = kit::port_of(local);
            if (params_.link_timeout_ms && oep->ep && !bound_link_timeout(oep->ep, params_.link_timeout_ms))
                DAT2_ERR("%s: link_timeout_ms has no effect on EP %p: provider '%s' shows no TCP socket of "
                         "its connection\n",
                         ia_.name.c_str(), (void *)oep->owner, params_.provider.c_str());
            kit::on_established(*oep->owner, pdata, pdata_len);
        }
        return;
    }
    case FI_SHUTDOWN: {
        OfiEp *oep = ep_by_fid(entry->fid);
        if (oep) {
            oep->deadline = kit::Deadline::never();
            kit::on_disconnected(*oep->owner, false);
        }
        return;
    }
    default:
        DAT2_LOG(log::kGeneric, "%s: ignoring event %u\n", ia_.name.c_str(), event);
    }
}

void OfiTransport::handle_cm_error() {
    fi_eq_err_entry err{};
    ssize_t n = fi_eq_readerr(eq_, &err, 0);
    if (n < 0)
        return;
    std::lock_guard<std::recursive_mutex> lock(cm_mu_);
    OfiEp *oep = err.fid ? ep_by_fid(err.fid) : nullptr;
    if (!oep) {
        DAT2_LOG(log::kGeneric, "%s: event queue error %s for a closed object\n", ia_.name.c_str(),
                 fi_text(err.err));
        return;
    }
    oep->deadline = kit::Deadline::never();
    kit::Ep &ep = *oep->owner;
    DAT_EP_STATE state = ep.state.load();
    const unsigned char *pdata = nullptr;
    std::size_t pdata_len = 0;
    // Our header with kind "reject" means the peer's consumer refused;
    // a refusal without it comes from the network (nobody listens).
    const bool peer = unframe_cm_data(err.err_data, err.err_data_size, kCmReject, pdata, pdata_len);
    if (state == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING) {
        DAT_EVENT_NUMBER reason = DAT_CONNECTION_EVENT_NON_PEER_REJECTED;
        if (peer)
            reason = DAT_CONNECTION_EVENT_PEER_REJECTED;
        else if (err.err == FI_ETIMEDOUT)
            reason = DAT_CONNECTION_EVENT_TIMED_OUT;
        else if (err.err == FI_EHOSTUNREACH || err.err == FI_ENETUNREACH || err.err == FI_EADDRNOTAVAIL)
            reason = DAT_CONNECTION_EVENT_UNREACHABLE;
        DAT2_LOG(log::kGeneric, "%s: connect on EP %p failed: %s\n", ia_.name.c_str(), (void *)&ep,
                 fi_text(err.err));
        close_endpoint(*oep);
        kit::on_connect_failed(ep, reason, pdata, pdata_len);
    } else if (state == DAT_EP_STATE_COMPLETION_PENDING) {
        close_endpoint(*oep);
        kit::on_connect_failed(ep, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, nullptr, 0);
    } else {
        DAT2_LOG(log::kGeneric, "%s: connection of EP %p broke: %s\n", ia_.name.c_str(), (void *)&ep,
                 fi_text(err.err));
        kit::on_disconnected(ep, true);
    }
}

} // namespace dat2::ofi
