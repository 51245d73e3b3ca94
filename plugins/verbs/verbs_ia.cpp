// SPDX-License-Identifier: BSD-3-Clause
// IA: ia_params, the device and address an IA serves on, attributes.
#include "verbs.hpp"
#include "params.hpp"
#include "resources.hpp"
#include "sockaddr.hpp"

#include "descriptors.hpp"
#include "log.hpp"

#include <algorithm>
#include <endian.h>
#include <arpa/inet.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <sstream>
#include <sys/epoll.h>
#include <unistd.h>

namespace dat2::verbs {

namespace {

bool set_nonblocking(int fd) {
    int flags = ::fcntl(fd, F_GETFL);
    return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

std::string addr_text(const sockaddr *sa) {
    char text[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in *>(sa)->sin_addr, text, sizeof text);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr, text, sizeof text);
    return text;
}

// Candidate IA addresses in the order they are tried: IPv4 before IPv6,
// loopback last (rxe may sit on lo, but an address of a real netdev is
// what peers can reach).
std::vector<sockaddr_storage> local_addresses(const std::string &netdev) {
    std::vector<sockaddr_storage> v4, v6, loop;
    ifaddrs *list = nullptr;
    if (::getifaddrs(&list) != 0)
        return {};
    for (ifaddrs *i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || !(i->ifa_flags & IFF_UP))
            continue;
        if (!netdev.empty() && netdev != i->ifa_name)
            continue;
        sockaddr_storage s{};
        if (i->ifa_addr->sa_family == AF_INET) {
            std::memcpy(&s, i->ifa_addr, sizeof(sockaddr_in));
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            auto *a6 = reinterpret_cast<const sockaddr_in6 *>(i->ifa_addr);
            if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr))
                continue; // needs a scope the peer cannot give
            std::memcpy(&s, i->ifa_addr, sizeof(sockaddr_in6));
        } else {
            continue;
        }
        if (i->ifa_flags & IFF_LOOPBACK)
            loop.push_back(s);
        else
            (s.ss_family == AF_INET ? v4 : v6).push_back(s);
    }
    ::freeifaddrs(list);
    v4.insert(v4.end(), v6.begin(), v6.end());
    v4.insert(v4.end(), loop.begin(), loop.end());
    return v4;
}

} // namespace

DAT_DTO_COMPLETION_STATUS to_dto_status(ibv_wc_status status) {
    switch (status) {
    case IBV_WC_SUCCESS: return DAT_DTO_SUCCESS;
    case IBV_WC_WR_FLUSH_ERR: return DAT_DTO_ERR_FLUSHED;
    case IBV_WC_LOC_LEN_ERR: return DAT_DTO_ERR_LOCAL_LENGTH;
    case IBV_WC_LOC_QP_OP_ERR:
    case IBV_WC_LOC_EEC_OP_ERR: return DAT_DTO_ERR_LOCAL_EP;
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR: return DAT_DTO_ERR_LOCAL_PROTECTION;
    case IBV_WC_MW_BIND_ERR: return DAT_RMR_OPERATION_FAILED;
    case IBV_WC_BAD_RESP_ERR: return DAT_DTO_ERR_BAD_RESPONSE;
    case IBV_WC_REM_ACCESS_ERR: return DAT_DTO_ERR_REMOTE_ACCESS;
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_INV_RD_REQ_ERR:
    case IBV_WC_REM_ABORT_ERR:
    case IBV_WC_LOC_RDD_VIOL_ERR: return DAT_DTO_ERR_REMOTE_RESPONDER;
    case IBV_WC_RNR_RETRY_EXC_ERR: return DAT_DTO_ERR_RECEIVER_NOT_READY;
    default: return DAT_DTO_ERR_TRANSPORT; // retries exceeded, fatal, timeouts
    }
}

namespace {

// OFED's positional ia_params, so that an OFED dat.conf line works with
// only its library name changed: "<device> <port>" (scm, ucm: "mlx5_0 1",
// "rxe0 1") or "<netdev or address> 0" (cma: "ib0 0"). True when `text`
// has that form (then `out` or `error` is set).
bool parse_ofed_params(const std::string &text, Params &out, std::string &error, bool &ok) {
    std::istringstream in(text);
    std::string first, second, extra;
    if (!(in >> first >> second) || (in >> extra) || first.find('=') != std::string::npos ||
        second.find('=') != std::string::npos)
        return false;
    char *end = nullptr;
    const long port = std::strtol(second.c_str(), &end, 10);
    if (second.empty() || *end || port < 0 || port > 255) {
        error = "\"" + text + "\": OFED's form is \"<device> <port 1..255>\" or \"<netdev> 0\"";
        ok = false;
        return true;
    }
    if (port == 0) {
        in6_addr a6;
        in_addr a4;
        if (inet_pton(AF_INET, first.c_str(), &a4) == 1 || inet_pton(AF_INET6, first.c_str(), &a6) == 1)
            out.address = first;
        else
            out.netdev = first;
    } else {
        out.device = first;
        out.port = static_cast<int>(port);
    }
    ok = true;
    return true;
}

} // namespace

bool parse_params(const std::string &text, Params &out, std::string &error) {
    bool ok = false;
    if (parse_ofed_params(text, out, error, ok))
        return ok;
    kit::ParamList words;
    if (!kit::split_params(text, words, error))
        return false;
    for (const auto &[key, value] : words) {
        if (key == "device") {
            out.device = value == "any" ? "" : value;
        } else if (key == "port") {
            char *end = nullptr;
            long p = std::strtol(value.c_str(), &end, 10);
            if (value.empty() || *end || p < 1 || p > 255) {
                error = "port=" + value + " is not a port number (1..255)";
                return false;
            }
            out.port = static_cast<int>(p);
        } else if (key == "netdev") {
            out.netdev = value;
        } else if (key == "address") {
            out.address = value;
        } else {
            error = "unknown key '" + key + "' (known: device, port, netdev, address)";
            return false;
        }
    }
    if (!out.address.empty() && !out.netdev.empty()) {
        error = "address= and netdev= both name the IA address; give one";
        return false;
    }
    return true;
}

VerbsTransport::VerbsTransport(kit::Ia &ia, const Params &params) : Transport(ia), params_(params) {}

// Finds the IA address: the one given, or the first address (of the named
// netdev, or of any) that rdma_cm binds to a device matching device= and
// port=. Binding an address is how rdma_cm itself maps IP to device, so
// this works alike for RoCE, iWARP and IPoIB.
DAT_RETURN VerbsTransport::select_device(std::string &device_name) {
    const char *name = this->name();
    std::vector<sockaddr_storage> candidates;
    if (!params_.address.empty()) {
        addrinfo hints{}, *res = nullptr;
        hints.ai_flags = AI_PASSIVE;
        hints.ai_socktype = SOCK_STREAM;
        int rc = ::getaddrinfo(params_.address.c_str(), nullptr, &hints, &res);
        if (rc != 0) {
            DAT2_ERR("%s: address=%s: %s\n", name, params_.address.c_str(), gai_strerror(rc));
            return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
        }
        for (addrinfo *i = res; i; i = i->ai_next) {
            if (i->ai_family != AF_INET && i->ai_family != AF_INET6)
                continue;
            sockaddr_storage s{};
            std::memcpy(&s, i->ai_addr, std::min<std::size_t>(i->ai_addrlen, sizeof s));
            candidates.push_back(s);
        }
        ::freeaddrinfo(res);
    } else {
        candidates = local_addresses(params_.netdev);
        if (candidates.empty() && !params_.netdev.empty()) {
            DAT2_ERR("%s: netdev %s has no usable IP address (or does not exist, or is down)\n", name,
                     params_.netdev.c_str());
            return DAT_ERROR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
        }
    }
    std::string tried;
    for (sockaddr_storage &cand : candidates) {
        rdma_cm_id *probe = nullptr;
        if (rdma_create_id(channel_, &probe, nullptr, RDMA_PS_TCP)) {
            DAT2_ERR("%s: rdma_create_id: %s\n", name, std::strerror(errno));
            return to_dat(errno, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0));
        }
        bool found = false;
        if (rdma_bind_addr(probe, reinterpret_cast<sockaddr *>(&cand)) == 0 && probe->verbs) {
            const char *dev = ibv_get_device_name(probe->verbs->device);
            found = (params_.device.empty() || params_.device == dev) &&
                    (params_.port == 0 || params_.port == probe->port_num);
            if (found) {
                device_name = dev;
                port_ = probe->port_num;
                addr_ = cand;
                kit::set_port(addr_, 0);
            } else {
                tried += " " + addr_text(reinterpret_cast<sockaddr *>(&cand)) + " (" + dev + " port " +
                         std::to_string(probe->port_num) + ")";
            }
        }
        rdma_destroy_id(probe);
        if (found)
            return DAT_SUCCESS;
    }
    std::string want = params_.device.empty() ? std::string("any RDMA device") : "device " + params_.device;
    if (params_.port)
        want += " port " + std::to_string(params_.port);
    DAT2_ERR("%s: no IP address%s%s%s belongs to %s%s%s\n", name, params_.netdev.empty() ? "" : " of ",
             params_.netdev.c_str(), params_.address.empty() ? "" : (" " + params_.address).c_str(), want.c_str(),
             tried.empty() ? "" : "; addresses on other devices:", tried.c_str());
    return DAT_ERROR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
}

namespace {

// fork() (docs/fork.md): a kernel before 5.13 does not copy pinned pages
// into a child, and a parent's first write to registered memory after a
// fork would move it away from the device. There libibverbs must keep
// registered memory out of children (ibv_fork_init, before the process
// registers anything: our first IA is the earliest we can). Newer kernels
// answer IBV_FORK_UNNEEDED and nothing is done.
void fork_safety(const char *name) {
    static std::once_flag once;
    std::call_once(once, [name] {
        const ibv_fork_status st = ibv_is_fork_initialized();
        if (st != IBV_FORK_DISABLED)
            return;
        if (int rc = ibv_fork_init())
            DAT2_ERR("%s: this kernel does not copy registered memory into a child after fork(), and "
                     "ibv_fork_init failed (%s): memory registered before it is not fork-safe; set "
                     "RDMAV_FORK_SAFE=1 in the environment\n",
                     name, std::strerror(rc));
        else
            DAT2_LOG(log::kGeneric, "%s: ibv_fork_init: registered memory is kept out of children\n", name);
    });
}

} // namespace

DAT_RETURN VerbsTransport::open(kit::Capabilities &caps) {
    const char *name = this->name();
    fork_safety(name);
    channel_ = rdma_create_event_channel();
    if (!channel_) {
        DAT2_ERR("%s: no RDMA connection manager (rdma_create_event_channel: %s; is rdma_ucm loaded, "
                 "/dev/infiniband/rdma_cm present?)\n",
                 name, std::strerror(errno));
        return out_of_descriptors() ? DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0)
                                    : DAT_ERROR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    }
    std::string device;
    if (DAT_RETURN r = select_device(device))
        return out_of_descriptors() ? DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0) : r;
    // A device context of our own: its async events (QP errors) are this
    // IA's alone, whatever else the process opens.
    int ndev = 0;
    ibv_device **list = ibv_get_device_list(&ndev);
    for (int i = 0; list && i < ndev && !ctx_; ++i)
        if (device == ibv_get_device_name(list[i]))
            ctx_ = ibv_open_device(list[i]);
    if (list)
        ibv_free_device_list(list);
    if (!ctx_) {
        DAT2_ERR("%s: cannot open RDMA device %s: %s\n", name, device.c_str(), std::strerror(errno));
        return out_of_descriptors() ? DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0)
                                    : DAT_ERROR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    }
    if (ibv_query_device(ctx_, &dev_attr_) || ibv_query_port(ctx_, port_, &port_attr_)) {
        DAT2_ERR("%s: querying %s port %u: %s\n", name, device.c_str(), port_, std::strerror(errno));
        return DAT_ERROR(DAT_INTERNAL_ERROR, 0);
    }
    if (ctx_->device->transport_type != IBV_TRANSPORT_IB) {
        // iWARP connects QPs inside the kernel's iw_cm; not done yet.
        DAT2_ERR("%s: %s is not an InfiniBand/RoCE device (transport %d); iWARP is not supported yet\n", name,
                 device.c_str(), ctx_->device->transport_type);
        return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
    }
    if (!set_nonblocking(channel_->fd) || !set_nonblocking(ctx_->async_fd)) {
        DAT2_ERR("%s: fcntl: %s\n", name, std::strerror(errno));
        return DAT_ERROR(DAT_INTERNAL_ERROR, 0);
    }
    channel_watch_ = loop().watch(channel_->fd, EPOLLIN, [this](std::uint32_t) { read_cm_events(); });
    async_watch_ = loop().watch(ctx_->async_fd, EPOLLIN, [this](std::uint32_t) { read_async_events(); });
    if (!channel_watch_ || !async_watch_)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
    null_cq_ = new VerbsCq;
    null_cq_->parts.push_back(CqPart{ibv_create_cq(ctx_, 16, nullptr, nullptr, 0), 0});
    if (!null_cq_->parts.front().cq) {
        DAT2_ERR("%s: ibv_create_cq: %s\n", name, std::strerror(errno));
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    }
    // What a DTO EVD costs the process: a probe of one (cq_open), plus the
    // kit's eventfd every EVD has.
    kit::ProcessUsage per_evd{2, 0, 0};
    {
        const kit::ProcessUsage before = kit::process_usage();
        if (ibv_comp_channel *ch = ibv_create_comp_channel(ctx_)) {
            if (ibv_cq *cq = ibv_create_cq(ctx_, 256, nullptr, ch, 0)) {
                per_evd = kit::process_usage() - before;
                per_evd.fds += 1;
                ibv_destroy_cq(cq);
            }
            ibv_destroy_comp_channel(ch);
        }
    }
    // Inline sends skip a DMA read of small payloads; ask for what the
    // device can do with a probe QP, since devices report no limit for it.
    // The probe also tells what an EP's QP costs the process.
    kit::ProcessUsage per_ep;
    {
        ibv_pd *pd = ibv_alloc_pd(ctx_);
        for (std::uint32_t want : {256u, 128u, 64u}) {
            ibv_qp_init_attr a{};
            a.send_cq = a.recv_cq = null_cq_->parts.front().cq;
            a.cap.max_send_wr = 1 + kReservedSendSlots; // the smallest EP's
            a.cap.max_recv_wr = 1;
            a.cap.max_send_sge = a.cap.max_recv_sge = 1;
            a.cap.max_inline_data = want;
            a.qp_type = IBV_QPT_RC;
            const kit::ProcessUsage before = kit::process_usage();
            ibv_qp *qp = pd ? ibv_create_qp(pd, &a) : nullptr;
            if (qp) {
                per_ep = kit::process_usage() - before;
                max_inline_ = a.cap.max_inline_data;
                ibv_destroy_qp(qp);
                break;
            }
        }
        if (pd)
            ibv_dealloc_pd(pd);
    }
    // dat_ia_query's max_evds and max_eps are what this process can make
    // (LimitsTest): the device's maxima, unless file descriptors, mappings
    // or pinned memory run out first (Soft-RoCE says 1048576 CQs and QPs,
    // far more than RLIMIT_NOFILE or vm.max_map_count allow). EVDs and EPs
    // draw on the same budget: each maximum holds for its own kind.
    const kit::ProcessUsage limit = kit::process_limits(), used = kit::process_usage();
    caps.max_evds = kit::objects_within(limit, used, per_evd, std::min(caps.max_evds, dev_attr_.max_cq - 1));
    caps.max_eps = kit::objects_within(limit, used, per_ep, std::min(caps.max_eps, dev_attr_.max_qp - 1));
    caps.max_pzs = std::min(caps.max_pzs, dev_attr_.max_pd);
    // Each work queue of an EP fits one CQ (with the plugin's own send
    // slots), however many EPs share the EVD (VerbsCq).
    caps.max_dtos = std::max(
        1, std::min({kit::kMaxDtos, dev_attr_.max_qp_wr - kReservedSendSlots, dev_attr_.max_cqe - kReservedSendSlots}));
    DAT2_LOG(log::kGeneric, "%s: %d EVDs (%s each), %d EPs (%s each), %d DTOs per EP; the process has %s of %s\n", name,
             caps.max_evds, kit::usage_text(per_evd).c_str(), caps.max_eps, kit::usage_text(per_ep).c_str(),
             caps.max_dtos, kit::usage_text(used).c_str(), kit::usage_text(limit).c_str());
    // Soft-RoCE hands out the kernel's completion flags as they are, and the
    // kernel's "with invalidate" is bit 2 (libibverbs': bit 3; bit 2 is the
    // IP checksum flag, which a reliable connection never reports).
    if (dev_attr_.vendor_id == 0xffffff)
        wc_with_inv_ = IBV_WC_WITH_INV | (1u << 2);
    mw_supported_ = (dev_attr_.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) && dev_attr_.max_mw > 0;
    caps.send_with_invalidate = mw_supported_;
    caps.rmr_scope_ep = mw_supported_; // type 2 windows are bound to one QP
    caps.max_iov = std::min<DAT_COUNT>(kit::kMaxIov, std::max(1, dev_attr_.max_sge));
    if (dev_attr_.max_srq > 0 && dev_attr_.max_srq_wr > 0 && dev_attr_.max_srq_sge > 0)
        max_srq_recvs_ = caps.max_srq_recvs = std::min(kit::kMaxDtos, dev_attr_.max_srq_wr);
    // One RC send queue per EP completes in order: suppressed sends and RDMA
    // writes go out unsignalled. IBV_SEND_FENCE is the barrier fence, and a
    // QP exists (receives can be posted) from dat_ep_create on.
    caps.requests_in_order = true;
    caps.fence = true;
    caps.recv_before_connect = true;
    caps.ext = {true, atomics_supported(), atomics_supported()};
    caps.max_private_data =
        static_cast<DAT_COUNT>(std::min<std::size_t>(kit::kMaxPrivateData, kIbReqPrivateData - kCmHeader));
    DAT2_LOG(log::kGeneric, "%s: verbs device %s port %u (%s), address %s, max inline %u, memory windows %s\n", name,
             device.c_str(), port_, port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
             addr_text(address()).c_str(), max_inline_, mw_supported_ ? "type 2B" : "none");
    return DAT_SUCCESS;
}

// The loop has stopped (kit::Ia's destructor): no handler runs.
VerbsTransport::~VerbsTransport() {
    loop().unwatch(channel_watch_);
    loop().unwatch(async_watch_);
    // The kit has freed every EP, PSP and CR before the IA: what is left
    // here is only what a failed open made.
    if (null_cq_) {
        for (CqPart &p : null_cq_->parts)
            if (p.cq)
                ibv_destroy_cq(p.cq);
        delete null_cq_;
    }
    for (auto &[pz, use] : pds_)
        ibv_dealloc_pd(use.pd);
    if (ctx_)
        ibv_close_device(ctx_);
    if (channel_)
        rdma_destroy_event_channel(channel_);
}

void VerbsTransport::query(DAT_IA_ATTR &a, DAT_PROVIDER_ATTR &p) {
    std::snprintf(a.vendor_name, sizeof a.vendor_name, "rdma-core %s port %u", ibv_get_device_name(ctx_->device),
                  port_);
    a.hardware_version_major = dev_attr_.hw_ver;
    a.hardware_version_minor = dev_attr_.vendor_part_id;
    a.max_rdma_read_per_ep_in = dev_attr_.max_qp_rd_atom;
    a.max_rdma_read_per_ep_out = dev_attr_.max_qp_init_rd_atom;
    a.max_iov_segments_per_dto = ia_.caps.max_iov;
    a.max_iov_segments_per_rdma_read = ia_.caps.max_iov;
    a.max_iov_segments_per_rdma_write = ia_.caps.max_iov;
    a.max_lmrs = std::min(a.max_lmrs, dev_attr_.max_mr);
    a.max_lmr_block_size =
        static_cast<DAT_SEG_LENGTH>(std::min<std::uint64_t>(dev_attr_.max_mr_size, ~DAT_SEG_LENGTH(0)));
    a.max_lmr_virtual_address = ~DAT_VADDR(0);
    a.max_message_size = port_attr_.max_msg_sz;
    a.max_rdma_size = port_attr_.max_msg_sz;
    a.max_rmr_target_address = ~DAT_VADDR(0);
    a.max_rmrs = mw_supported_ ? std::min(kit::kMaxRmrs, dev_attr_.max_mw) : 0;
    if (max_srq_recvs_)
        a.max_srqs = std::min(a.max_srqs, dev_attr_.max_srq);
    a.max_rdma_read_in = dev_attr_.max_qp_rd_atom;
    a.max_rdma_read_out = dev_attr_.max_qp_init_rd_atom;
    a.max_rdma_read_per_ep_in_guaranteed = DAT_TRUE;
    a.max_rdma_read_per_ep_out_guaranteed = DAT_TRUE;
    a.zb_supported = DAT_FALSE;
    (void)p;
}

// As OFED's providers publish them: the port's active MTU, the node GUID and
// the port's first GID in the usual colon-separated hex.
void VerbsTransport::facts(kit::TransportFacts &f) const {
    f.provider = "verbs";
    f.device = ibv_get_device_name(ctx_->device);
    const std::uint64_t guid = be64toh(ibv_get_device_guid(ctx_->device));
    char text[64];
    std::snprintf(text, sizeof text, "%04x:%04x:%04x:%04x", unsigned(guid >> 48) & 0xffff,
                  unsigned(guid >> 32) & 0xffff, unsigned(guid >> 16) & 0xffff, unsigned(guid) & 0xffff);
    f.node_guid = text;
    ibv_gid gid{};
    if (ibv_query_gid(ctx_, port_, 0, &gid) == 0) {
        std::string g;
        for (int i = 0; i < 16; i += 2) {
            std::snprintf(text, sizeof text, "%s%02x%02x", i ? ":" : "", gid.raw[i], gid.raw[i + 1]);
            g += text;
        }
        f.gid = g;
    }
    switch (port_attr_.active_mtu) {
    case IBV_MTU_256: f.transport_mtu = 256; break;
    case IBV_MTU_512: f.transport_mtu = 512; break;
    case IBV_MTU_1024: f.transport_mtu = 1024; break;
    case IBV_MTU_2048: f.transport_mtu = 2048; break;
    case IBV_MTU_4096: f.transport_mtu = 4096; break;
    }
    f.port_status = port_attr_.state == IBV_PORT_ACTIVE ? "ACTIVE" : "DOWN";
    f.port = port_;
}

} // namespace dat2::verbs
