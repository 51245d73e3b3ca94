// SPDX-License-Identifier: BSD-3-Clause
// IA: ia_params, fabric/domain/event queue, attributes.
#include "ofi.hpp"
#include "fi_attrs.hpp"
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

// libfabric's own codes (FI_EOTHER and up) mean nothing to errno_to_dat.
DAT_RETURN to_dat(int fi_err, DAT_RETURN fallback) { return kit::errno_to_dat(fi_err, fallback); }

DAT_DTO_COMPLETION_STATUS to_dto_status(int fi_err) {
    switch (fi_err < 0 ? -fi_err : fi_err) {
    case FI_SUCCESS: return DAT_DTO_SUCCESS;
    case FI_ECANCELED: return DAT_DTO_ERR_FLUSHED;
    case FI_ETRUNC:
    case FI_EMSGSIZE:
    case FI_ETOOSMALL: return DAT_DTO_ERR_LOCAL_LENGTH;
    case FI_EACCES:
    case FI_EPERM:
    case FI_EKEYREJECTED: return DAT_DTO_ERR_REMOTE_ACCESS;
    case FI_EREMOTEIO: return DAT_DTO_ERR_REMOTE_RESPONDER;
    case FI_ENOTCONN:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ESHUTDOWN: return DAT_DTO_ERR_FLUSHED;
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
        else if (key == "ep_type") {
            if (value != "msg" && value != "rdm") {
                error = "ep_type=" + value + ": not msg or rdm";
                return false;
            }
            out.ep_type = value;
        } else if (key == "link_timeout_ms") {
            // TCP_USER_TIMEOUT takes an unsigned int of milliseconds; past an
            // hour the kernel's own retransmission limit comes first anyway.
            char *end = nullptr;
            errno = 0;
            unsigned long ms = std::strtoul(value.c_str(), &end, 10);
            if (value.empty() || !std::isdigit(static_cast<unsigned char>(value[0])) || *end || errno || ms < 1 ||
                ms > 3'600'000) {
                error = "link_timeout_ms=" + value + ": not a number of milliseconds from 1 to 3600000";
                return false;
            }
            out.link_timeout_ms = static_cast<unsigned>(ms);
        } else if (key == "write_completion") {
            if (value != "delivery" && value != "transmit") {
                error = "write_completion=" + value + ": not delivery or transmit";
                return false;
            }
            out.write_transmit = value == "transmit";
        } else {
            error = "unknown key '" + key +
                    "' (known: provider, address, domain, fabric, link_timeout_ms, ep_type, write_completion)";
            return false;
        }
    }
    if (out.provider.empty()) {
        error = "no provider=NAME";
        return false;
    }
    return true;
}

OfiTransport::OfiTransport(kit::Ia &ia, const Params &params) : Transport(ia), params_(params) {}

DAT_RETURN OfiTransport::open(kit::Capabilities &caps) {
    const char *name = this->name();
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
    int rc = getinfo(node, node ? FI_SOURCE : 0, hints, &info_);
    if (rc == -FI_ENODATA) {
        hints->caps &= ~FI_ATOMIC;
        rc = getinfo(node, node ? FI_SOURCE : 0, hints, &info_);
    }
    fi_freeinfo(hints);
    if (rc) {
        DAT2_ERR("%s: no libfabric provider '%s' with connected endpoints%s%s: %s\n", name, params_.provider.c_str(),
                 node ? " on " : "", node ? node : "", fi_text(rc));
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
    int eq_fd = -1;
    if ((rc = fi_control(&eq_->fid, FI_GETWAIT, &eq_fd))) {
        DAT2_ERR("%s: event queue has no fd: %s\n", name, fi_text(rc));
        return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    if ((rc = fi_domain(fabric_, info_, &domain_, nullptr))) {
        DAT2_ERR("%s: fi_domain: %s\n", name, fi_text(rc));
        return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    base_.domain = domain_;
    base_.ia_own = true;
    caps.ext = find_ext_caps();
    eq_watch_ = loop().watch(eq_fd, EPOLLIN, [this](std::uint32_t) { read_event_queue(); });
    if (!eq_watch_)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
    loop().set_idle_hook([this] { return progress_round(); });
    // How much CM data the provider carries (tcp 256 B, verbs far less):
    // libfabric reports it per endpoint, so ask a passive one.
    std::size_t cm_data_size = 0;
    {
        fid_pep *probe = nullptr;
        std::size_t optlen = sizeof cm_data_size;
        if ((rc = fi_passive_ep(fabric_, info_, &probe, nullptr))) {
            DAT2_ERR("%s: a passive endpoint (to learn the connection data size): %s\n", name, fi_text(rc));
            return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
        }
        if (fi_getopt(&probe->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &cm_data_size, &optlen))
            cm_data_size = 0;
        fi_close(&probe->fid);
    }
    if (cm_data_size <= sizeof(CmHeader)) {
        DAT2_ERR("%s: provider '%s' carries no connection data (%zu bytes); private data and reject "
                 "reasons need it\n",
                 name, params_.provider.c_str(), cm_data_size);
        return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
    }
    caps.max_iov = static_cast<DAT_COUNT>(
        std::min<std::size_t>({info_->tx_attr->iov_limit, info_->rx_attr->iov_limit, std::size_t(kit::kMaxIov)}));
    caps.max_private_data =
        static_cast<DAT_COUNT>(std::min<std::size_t>(kit::kMaxPrivateData, cm_data_size - sizeof(CmHeader)));
    max_srq_recvs_ = caps.max_srq_recvs = probe_srq_size();
    // An EP's queues are made as deep as it asks (make_endpoint), up to this.
    max_tx_size_ = deepest_queue(true);
    caps.max_dtos = static_cast<DAT_COUNT>(
        std::min({static_cast<std::size_t>(caps.max_dtos), max_tx_size_, deepest_queue(false)}));
    // No send with invalidate and no Endpoint-scoped windows: the provider
    // places a message and carries out later RDMA at the target in its own
    // progress, checking only the key's domain, before any code of ours
    // sees the message; and a key cannot be limited to one endpoint (no
    // FI_MR_ENDPOINT). Both are refused (DAT_MODEL_NOT_SUPPORTED), as in
    // OFED's dapl, rather than given with a window left open (README).
    caps.send_with_invalidate = false;
    caps.rmr_scope_ep = false;
    caps.max_evds = std::min(caps.max_evds, evds_within_process_limits(domain_));
    char text[INET6_ADDRSTRLEN] = "?";
    const void *a = addr_.ss_family == AF_INET6
                        ? static_cast<const void *>(&reinterpret_cast<sockaddr_in6 *>(&addr_)->sin6_addr)
                        : static_cast<const void *>(&reinterpret_cast<sockaddr_in *>(&addr_)->sin_addr);
    inet_ntop(addr_.ss_family, a, text, sizeof text);
    DAT2_LOG(log::kGeneric, "%s: libfabric %s, fabric %s, domain %s, address %s\n", name, info_->fabric_attr->prov_name,
             info_->fabric_attr->name, info_->domain_attr->name, text);
    return DAT_SUCCESS;
}

// Doubles from the provider's default (what fi_getinfo reports) while
// fi_getinfo still offers an endpoint that deep: a provider's default may be
// far below its maximum, and no attribute reports the maximum.
std::size_t OfiTransport::deepest_queue(bool tx) const {
    std::size_t ok = std::max<std::size_t>(1, tx ? info_->tx_attr->size : info_->rx_attr->size);
    while (ok < static_cast<std::size_t>(kit::kMaxDtos)) {
        fi_info *hints = fi_dupinfo(info_);
        if (!hints)
            break;
        (tx ? hints->tx_attr->size : hints->rx_attr->size) = ok * 2;
        fi_info *got = nullptr;
        const int rc = getinfo(nullptr, 0, hints, &got);
        fi_freeinfo(hints);
        if (got)
            fi_freeinfo(got);
        if (rc)
            break;
        ok *= 2;
    }
    return std::min<std::size_t>(ok, static_cast<std::size_t>(kit::kMaxDtos));
}

// The loop has stopped (kit::Ia's destructor): no handler runs.
OfiTransport::~OfiTransport() {
    loop().unwatch(eq_watch_);
    // The loop has stopped: freed PSPs' listeners still open go now, and
    // nobody is left to be told of a request.
    std::vector<OfiPsp *> lingering;
    for (auto &[f, opsp] : psps_)
        lingering.push_back(opsp);
    for (OfiPsp *opsp : lingering)
        close_listener(opsp);
    if (base_.null_cq)
        fi_close(&base_.null_cq->fid);
    if (eq_)
        fi_close(&eq_->fid);
    if (domain_)
        fi_close(&domain_->fid);
    if (fabric_)
        fi_close(&fabric_->fid);
    if (info_)
        fi_freeinfo(info_);
}

void OfiTransport::query(DAT_IA_ATTR &a, DAT_PROVIDER_ATTR &p) {
    std::snprintf(a.adapter_name, sizeof a.adapter_name, "%s", name());
    std::snprintf(a.vendor_name, sizeof a.vendor_name, "libfabric %s", info_->fabric_attr->prov_name);
    a.hardware_version_major = FI_MAJOR(info_->fabric_attr->prov_version);
    a.hardware_version_minor = FI_MINOR(info_->fabric_attr->prov_version);
    const std::size_t iov = std::min<std::size_t>(info_->tx_attr->iov_limit, kit::kMaxIov);
    // RMA posts one remote segment and up to iov_limit local ones.
    const std::size_t rma_iov = iov;
    fill_ia_limits(a, *info_, iov, rma_iov);
    if (max_srq_recvs_) // SRQs: shared receive contexts (open())
        a.max_ep_per_srq = static_cast<DAT_COUNT>(
            std::min<std::size_t>(info_->domain_attr->max_ep_srx_ctx, static_cast<std::size_t>(a.max_eps)));
    // A shared receive context belongs to one domain, and a domain is a PZ.
    p.srq_ep_pz_difference_supported = DAT_FALSE;
}

// An IP fabric cuts no messages at an MTU; consumers that size their
// messages by one (dtestsrq) get 4096, the largest an IB port has, which
// every DAT consumer handles.
void OfiTransport::facts(kit::TransportFacts &f) const {
    f.provider = std::string("libfabric ") + info_->fabric_attr->prov_name;
    f.device = info_->domain_attr->name ? info_->domain_attr->name : "";
    f.transport_mtu = 4096;
    f.port_status = "ACTIVE";
}

} // namespace dat2::ofi
