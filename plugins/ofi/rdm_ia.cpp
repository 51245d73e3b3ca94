// SPDX-License-Identifier: BSD-3-Clause
// The RDM transport's IA: which provider attributes it asks for and how it
// adapts to what it gets, its attributes, and the provider's progress on the
// IA's event loop.
#include "rdm.hpp"
#include "fi_attrs.hpp"

#include "log.hpp"
#include "resources.hpp"
#include "shm_regions.hpp"
#include "sockaddr.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <pthread.h>
#include <string>
#include <thread>

namespace dat2::ofi {

namespace {

// A zero-entry read: runs the provider's progress on `cq` without taking a
// completion from its consumer; true when completions (or an error entry)
// wait in it.
bool holds_completions(fid_cq *cq) {
    fi_cq_tagged_entry none;
    const ssize_t n = fi_cq_read(cq, &none, 0);
    return n == 0 || n == -FI_EAVAIL;
}

// Whether the provider's keys count up from a small number (libfabric's
// util key map: shm, rxm, rxd), judged by two registrations: such keys leave
// the top bits of an rmr_context free for the PZ's tag.
bool keys_count_up(fid_domain *domain) {
    static char probe[2][64];
    fid_mr *mr[2] = {};
    std::uint64_t key[2] = {};
    bool ok = true;
    for (int i = 0; i < 2 && ok; ++i) {
        ok = fi_mr_reg(domain, probe[i], sizeof probe[i], FI_REMOTE_WRITE, 0, 0, 0, &mr[i], nullptr) == 0;
        if (ok)
            key[i] = fi_mr_key(mr[i]);
    }
    for (fid_mr *m : mr)
        if (m)
            fi_close(&m->fid);
    return ok && key[0] < (1u << 16) && key[1] == key[0] + 1;
}

bool atomic_supported(fid_domain *domain, fi_op op, std::uint64_t flags) {
    fi_atomic_attr attr{};
    return fi_query_atomic(domain, FI_UINT64, op, &attr, flags) == 0 && attr.count >= 1 && attr.size == 8;
}

// How many EVDs the process's descriptors allow (dat_ia_query's max_evds
// must be reachable): each holds the kit's eventfd, and a DTO EVD its
// queue's wait object where the provider has one (measured on a probe).
DAT_COUNT evds_within_process_limits(fid_domain *domain) {
    const kit::ProcessUsage before = kit::process_usage();
    kit::ProcessUsage per_evd{1, 0, 0};
    fi_cq_attr attr{};
    attr.size = 1024;
    attr.format = FI_CQ_FORMAT_TAGGED;
    attr.wait_obj = FI_WAIT_FD;
    fid_cq *probe = nullptr;
    if (fi_cq_open(domain, &attr, &probe, nullptr) != 0) {
        attr.wait_obj = FI_WAIT_NONE;
        if (fi_cq_open(domain, &attr, &probe, nullptr) != 0)
            probe = nullptr;
    }
    if (probe) {
        const kit::ProcessUsage each = kit::process_usage() - before;
        fi_close(&probe->fid);
        if (each.fds > 0)
            per_evd.fds += each.fds;
    }
    return kit::objects_within(kit::process_limits(), before, per_evd, kit::kMaxObjects);
}

bool is_ip_format(std::uint32_t f) { return f == FI_SOCKADDR_IN || f == FI_SOCKADDR_IN6 || f == FI_SOCKADDR; }

// `text` (a numeric address or a host name) as an IP address, port 0.
bool resolve(const std::string &text, sockaddr_storage &out) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(text.c_str(), nullptr, &hints, &res) != 0 || !res)
        return false;
    std::memcpy(&out, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    kit::set_port(out, 0);
    return true;
}

bool unspecified_ip(const sockaddr_storage &a) {
    if (a.ss_family == AF_INET)
        return reinterpret_cast<const sockaddr_in &>(a).sin_addr.s_addr == htonl(INADDR_ANY);
    if (a.ss_family == AF_INET6)
        return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6 &>(a).sin6_addr);
    return true;
}

// Before the first endpoint of this process (common/shm_regions.hpp).
void remove_regions_of_dead_processes() {
    static std::once_flag once;
    std::call_once(once, [] {
        remove_shm_regions_of_dead_processes([](const char *n) {
            DAT2_LOG(log::kGeneric, "removed /dev/shm/%s, left by a process that is gone\n", n);
        });
    });
}

} // namespace

namespace {
// Every RDM IA of the process (drive_ias). Leaked: IAs may close
// from static destructors. A child of fork() starts with none: the IAs it
// inherited are its parent's (their locks possibly held by threads that do
// not exist in it), and it opens its own.
std::vector<RdmTransport *> &ias() {
    static auto *v = new std::vector<RdmTransport *>;
    return *v;
}
std::mutex &ias_mu() {
    static auto *mu = new std::mutex;
    return *mu;
}
// Registered at load, as the kit's locks.
[[maybe_unused]] const int fork_handlers = pthread_atfork([] { ias_mu().lock(); }, [] { ias_mu().unlock(); },
                                                          [] {
                                                              ias().clear();
                                                              ias_mu().unlock();
                                                          });
} // namespace

RdmTransport::RdmTransport(kit::Ia &ia, const Params &params) : Transport(ia), params_(params) {}

void RdmTransport::drive_ias() {
    // ias_mu() then an IA's mu_: never the other way (no caller holds a mu_).
    std::lock_guard<std::mutex> lock(ias_mu());
    for (RdmTransport *t : ias())
        t->drive_once();
}

void RdmTransport::drive_once() {
    std::unique_lock<std::mutex> lock(mu_);
    // Not skipped (what it is for is above): it waits for the window to
    // close, without mu_, which the window's opening takes.
    while (binding_.load(std::memory_order_seq_cst) > 0) {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        lock.lock();
    }
    for_each_fep([](RdmFabricEp &fep) {
        for (RdmCq *q : {fep.tx_q, fep.rx_q}) {
            fi_cq_tagged_entry none;
            if (q)
                fi_cq_read(q->cq, &none, 0); // progress only: no completion is taken
        }
    });
    std::lock_guard<std::mutex> dlock(dom_mu_);
    for (auto &dom : domains_) {
        fi_cq_tagged_entry none;
        if (dom->null_cq)
            fi_cq_read(dom->null_cq, &none, 0);
    }
}

DAT_RETURN RdmTransport::open(kit::Capabilities &caps) {
    const char *name = this->name();
    remove_regions_of_dead_processes();
    // What DAT needs of the provider, in the order it is given up when the
    // provider lacks it: atomics (the IB extensions go without), directed
    // receives (the connection's tag alone tells its messages apart), send
    // after write ordering (a send after a write is fenced instead).
    fi_info *hints = fi_allocinfo();
    if (!hints)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    hints->ep_attr->type = FI_EP_RDM;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    // Every registration model we can serve: remote memory named by virtual
    // address (DAT's rmr triplets), provider or chosen keys, local
    // descriptors always passed.
    hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_LOCAL;
    hints->domain_attr->threading = FI_THREAD_SAFE;
    hints->fabric_attr->prov_name = strdup(params_.provider.c_str());
    if (!params_.domain.empty())
        hints->domain_attr->name = strdup(params_.domain.c_str());
    if (!params_.fabric.empty())
        hints->fabric_attr->name = strdup(params_.fabric.c_str());
    const std::uint64_t base_caps =
        FI_MSG | FI_TAGGED | FI_RMA | FI_READ | FI_WRITE | FI_SEND | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE;
    // Remote memory must be named by virtual address (DAT's rmr triplets carry
    // no region base). The registration model bits first; a provider that
    // answers them with offset addressing (shm once RMA ordering is asked
    // for, rxm, rxd) is asked for FI_MR_BASIC (virtual addresses, provider
    // keys), which every util-based provider serves.
    const auto virtual_addressing = [](const fi_info *i) {
        return (i->domain_attr->mr_mode & FI_MR_VIRT_ADDR) || i->domain_attr->mr_mode == FI_MR_BASIC;
    };
    int rc = -FI_ENODATA;
    for (int basic = 0; basic <= 1 && rc; ++basic)
        for (int saw = 1; saw >= 0 && rc; --saw)
            for (int directed = 1; directed >= 0 && rc; --directed)
                for (int atomic = 1; atomic >= 0 && rc; --atomic) {
                    hints->domain_attr->mr_mode =
                        basic ? FI_MR_BASIC : FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_LOCAL;
                    hints->caps =
                        base_caps | (directed ? FI_DIRECTED_RECV : 0) | (atomic ? FI_ATOMIC : 0) | (saw ? 0 : FI_FENCE);
                    // Asking for send-after-write order also keeps shm's RMA on
                    // the path where the target checks key, range and access
                    // (its "fast" path checks nothing).
                    hints->tx_attr->msg_order = FI_ORDER_SAS | (saw ? FI_ORDER_SAW : 0);
                    hints->rx_attr->msg_order = hints->tx_attr->msg_order;
                    rc = getinfo(nullptr, 0, hints, &info_);
                    if (rc == 0 && !params_.address.empty() && is_ip_format(info_->addr_format)) {
                        // An IP fabric serves on the IA's address.
                        fi_freeinfo(info_);
                        info_ = nullptr;
                        rc = getinfo(params_.address.c_str(), FI_SOURCE, hints, &info_);
                    }
                    if (rc == 0 && !virtual_addressing(info_)) {
                        fi_freeinfo(info_);
                        info_ = nullptr;
                        rc = -FI_ENODATA;
                    }
                }
    if (rc == 0 && !(info_->caps & FI_RMA_EVENT)) {
        // Counted remote operations (RdmFabricEp::rma_cntr), where the
        // provider has them: the same answer with FI_RMA_EVENT, else without.
        hints->caps |= FI_RMA_EVENT;
        fi_info *counted = nullptr;
        const bool at_address = !params_.address.empty() && is_ip_format(info_->addr_format);
        if (getinfo(at_address ? params_.address.c_str() : nullptr, at_address ? FI_SOURCE : 0, hints, &counted) == 0 &&
            virtual_addressing(counted)) {
            fi_freeinfo(info_);
            info_ = counted;
        } else if (counted) {
            fi_freeinfo(counted);
        }
    }
    fi_freeinfo(hints);
    if (rc) {
        DAT2_ERR("%s: no libfabric provider '%s' with reliable-datagram endpoints (FI_EP_RDM, FI_MSG, FI_TAGGED, "
                 "FI_RMA, remote memory by virtual address): %s\n",
                 name, params_.provider.c_str(), fi_text(rc));
        info_ = nullptr;
        return DAT_ERROR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    }
    open_scratch();
    directed_recv_ = (info_->caps & FI_DIRECTED_RECV) != 0;
    maps_local_peers_ = std::strcmp(info_->fabric_attr->prov_name, "shm") == 0;
    fence_after_write_ = !(info_->tx_attr->msg_order & FI_ORDER_SAW);
    user_keys_ = info_->domain_attr->mr_mode != FI_MR_BASIC && !(info_->domain_attr->mr_mode & FI_MR_PROV_KEY);

    // The side channel's address.
    if (!params_.address.empty()) {
        if (!resolve(params_.address, addr_)) {
            DAT2_ERR("%s: address=%s: not an IP address or host name\n", name, params_.address.c_str());
            return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
        }
    } else if (is_ip_format(info_->addr_format) && info_->src_addr && info_->src_addrlen <= sizeof addr_) {
        std::memcpy(&addr_, info_->src_addr, info_->src_addrlen);
        kit::set_port(addr_, 0);
    }
    if (addr_.ss_family != AF_INET && addr_.ss_family != AF_INET6 ? true : unspecified_ip(addr_)) {
        // shm and other host-local or non-IP fabrics: peers on this host.
        addr_ = {};
        auto &in = reinterpret_cast<sockaddr_in &>(addr_);
        in.sin_family = AF_INET;
        in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }

    if ((rc = fi_fabric(info_->fabric_attr, &fabric_, nullptr))) {
        DAT2_ERR("%s: fi_fabric: %s\n", name, fi_text(rc));
        return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    // The first domain, which the first PZ takes (rdm_mr.cpp).
    RdmDomain *first = open_domain();
    if (!first)
        return DAT_ERROR(DAT_INTERNAL_ERROR, 0);
    domain_ = first->domain;
    spare_domains_.push_back(first);
    pz_tags_ = user_keys_ || keys_count_up(domain_);

    std::uint32_t random = 0;
    if (getrandom(&random, sizeof random, 0) != sizeof random)
        random = static_cast<std::uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    // Below bit 60: providers may reserve the top bits of a tag.
    tag_base_ = static_cast<std::uint64_t>(random & 0x0fffffffu) << 32;

    caps.max_iov = static_cast<DAT_COUNT>(
        std::min<std::size_t>({info_->tx_attr->iov_limit, info_->rx_attr->iov_limit, std::size_t(kit::kMaxIov)}));
    if (caps.max_iov < 1)
        caps.max_iov = 1;
    caps.max_private_data = static_cast<DAT_COUNT>(std::min<std::size_t>(kit::kMaxPrivateData, rdmwire::kMaxPdata));
    caps.max_srq_recvs = 0; // see README: no shared receive contexts on RDM endpoints here
    // A libfabric endpoint takes as many receives, and requests, as its
    // queues hold, for all the EPs of its pair of EVDs together, less what
    // the transport posts itself (a connection's hello, the sweep of an
    // ended one): one EP alone gets no more than that.
    constexpr std::size_t kOwnPosts = 64;
    auto usable = [](std::size_t queue) {
        return queue > 2 * kOwnPosts ? queue - kOwnPosts : std::max<std::size_t>(1, queue / 2);
    };
    const std::size_t queue = std::min(info_->tx_attr->size, info_->rx_attr->size);
    caps.max_dtos = static_cast<DAT_COUNT>(std::min(static_cast<std::size_t>(caps.max_dtos), usable(queue)));
    // And all the EPs of one libfabric endpoint together (RdmRecvBudget).
    recv_budget_ = static_cast<long>(usable(info_->rx_attr->size));
    // No send with invalidate and no Endpoint-scoped windows, as on the MSG
    // transport: shm and rxm carry out RDMA at the target in their own
    // progress, checking only the key's domain, before any code of ours sees
    // the message that should have closed the window; and a key cannot be
    // limited to one endpoint (no FI_MR_ENDPOINT).
    caps.send_with_invalidate = false;
    // rxm completes a long message's receive (rendezvous) after a short one
    // sent behind it; nothing in fi_info says which providers do.
    caps.recvs_out_of_order = true;
    caps.rmr_scope_ep = false;
    const bool local_mr = info_->domain_attr->mr_mode != FI_MR_BASIC && (info_->domain_attr->mr_mode & FI_MR_LOCAL);
    if ((info_->caps & FI_ATOMIC) && !local_mr) {
        // The operands live in the DTO record, which no registration covers:
        // a provider that needs local descriptors (FI_MR_LOCAL) goes without.
        caps.ext.fetch_add = atomic_supported(domain_, FI_SUM, FI_FETCH_ATOMIC);
        caps.ext.cmp_swap = atomic_supported(domain_, FI_CSWAP, FI_COMPARE_ATOMIC);
    }
    caps.ext.rdma_write_immed =
        info_->domain_attr->cq_data_size >= sizeof(std::uint64_t) && (!fence_after_write_ || (info_->caps & FI_FENCE));
    caps.max_evds = std::min(caps.max_evds, evds_within_process_limits(domain_));
    loop().set_idle_hook([this] { return progress_round(); });

    char text[INET6_ADDRSTRLEN] = "?";
    const void *a = addr_.ss_family == AF_INET6
                        ? static_cast<const void *>(&reinterpret_cast<sockaddr_in6 *>(&addr_)->sin6_addr)
                        : static_cast<const void *>(&reinterpret_cast<sockaddr_in *>(&addr_)->sin_addr);
    inet_ntop(addr_.ss_family, a, text, sizeof text);
    DAT2_LOG(log::kGeneric,
             "%s: libfabric %s (RDM), fabric %s, domain %s, side channel on %s; mr_mode %#x, directed receives %s, "
             "send after write %s, keys %s%s, atomics %s\n",
             name, info_->fabric_attr->prov_name, info_->fabric_attr->name, info_->domain_attr->name, text,
             info_->domain_attr->mr_mode, directed_recv_ ? "yes" : "no (tags only)",
             fence_after_write_ ? "fenced" : "ordered", user_keys_ ? "ours" : "the provider's",
             pz_tags_ ? " with the PZ's tag" : "",
             caps.ext.fetch_add ? "yes" : "no");
    try {
        std::lock_guard<std::mutex> lock(ias_mu());
        ias().push_back(this);
    } catch (const std::bad_alloc &) {
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    return DAT_SUCCESS;
}

// The loop has stopped (kit::Ia's destructor): no handler runs.
RdmTransport::~RdmTransport() {
    {
        std::lock_guard<std::mutex> lock(ias_mu());
        auto self = std::find(ias().begin(), ias().end(), this);
        if (self != ias().end()) // not when open() failed
            ias().erase(self);
    }
    if (!fabric_eps_.empty() || !stalled_feps_.empty())
        drive_ias(); // this IA is no longer among them
    std::vector<RdmConn *> conns;
    for (auto &[id, c] : conns_) {
        if (c->fd >= 0)
            ::close(c->fd);
        c->fd = -1;
    }
    conns_.clear();
    for_each_fep([this](RdmFabricEp &fep) {
        note_departed(fep);
        fep.close();
    });
    fabric_eps_.clear();
    stalled_feps_.clear();
    // EVDs were closed before the IA (their queues with them).
    for (auto &dom : domains_) {
        if (dom->null_cq)
            fi_close(&dom->null_cq->fid);
        if (dom->av)
            fi_close(&dom->av->fid);
        fi_close(&dom->domain->fid);
    }
    domains_.clear();
    for (RdmCtxBlock *b : retired_blocks_)
        delete b;
    retired_blocks_.clear();
    for (RdmSweep &sw : sweeps_)
        delete sw.block;
    sweeps_.clear();
    if (scratch_)
        ::munmap(scratch_, scratch_len_);
    if (fabric_)
        fi_close(&fabric_->fid);
    if (info_)
        fi_freeinfo(info_);
}

// As the MSG transport: an MTU of 4096 (dtestsrq cuts its messages at it;
// libfabric's RDM providers segment larger messages themselves).
void RdmTransport::facts(kit::TransportFacts &f) const {
    f.provider = std::string("libfabric ") + info_->fabric_attr->prov_name;
    f.device = info_->domain_attr->name ? info_->domain_attr->name : "";
    f.transport_mtu = 4096;
    f.port_status = "ACTIVE";
}

void RdmTransport::query(DAT_IA_ATTR &a, DAT_PROVIDER_ATTR &) {
    std::snprintf(a.adapter_name, sizeof a.adapter_name, "%s", name());
    std::snprintf(a.vendor_name, sizeof a.vendor_name, "libfabric %s rdm", info_->fabric_attr->prov_name);
    a.hardware_version_major = FI_MAJOR(info_->fabric_attr->prov_version);
    a.hardware_version_minor = FI_MINOR(info_->fabric_attr->prov_version);
    const std::size_t iov = std::max<std::size_t>(1, std::min<std::size_t>(info_->tx_attr->iov_limit, kit::kMaxIov));
    const std::size_t rma_iov =
        std::max<std::size_t>(1, std::min<std::size_t>(info_->tx_attr->rma_iov_limit ? iov : 1, iov));
    fill_ia_limits(a, *info_, iov, rma_iov);
}

// ---- progress ----------------------------------------------------------------------

void RdmTransport::watch_queue(RdmCq &q) {
    if (q.fd < 0)
        return; // shm: the rounds look at it
    RdmCq *raw = &q;
    q.watch = loop().watch(q.fd, 0, [this, raw](std::uint32_t) { queue_ready(*raw); });
}

// Armed only once fi_trywait trusts the fd: until then the provider may
// hold work its fd does not show (completions queued, a signal consumed).
// Returns whether fi_trywait failed: it may have consumed the signal a
// consumer that has just entered dat_evd_wait on a queue of the same
// endpoint sleeps on (rxm's queues share their tcp queue's signal), and the
// caller wakes such a consumer to look for itself (once mu_ is released).
// The loop's own fi_trywait is kept apart from close_fep by mu_.
bool RdmTransport::arm_queue(RdmCq &q, bool may) {
    if (!may) {
        if (q.armed) {
            loop().modify(q.watch, 0);
            q.armed = false;
        }
        return false;
    }
    if (q.armed)
        return false;
    fid *f = &q.cq->fid;
    const bool failed = fi_trywait(fabric_, &f, 1) != FI_SUCCESS;
    // Failed with completions its consumer has not read yet (an EVD it
    // rarely dequeues: the target of writes): the failed fi_trywait reset
    // the fd's signal, so the fd shows what comes next, and it is armed.
    // Failed otherwise: the provider has work its fd may not show, and the
    // next round, within a millisecond, asks again.
    if (failed && (q.evd->inside.load(std::memory_order_relaxed) > 0 || !holds_completions(q.cq)))
        return true;
    loop().modify(q.watch, EPOLLIN);
    q.armed = true;
    return failed;
}

// Disarmed until the round that follows this handler (the loop's idle
// hook runs before every wait) has driven the queue and asks again.
void RdmTransport::queue_ready(RdmCq &q) {
    if (!q.armed)
        return;
    loop().modify(q.watch, 0);
    q.armed = false;
    ++fd_wakes_;
    fd_woke_ = true;
}

// The null queue takes the completions of EPs without an EVD for one
// direction, where no DTO can be posted: only the connection's hellos,
// each of which holds a reference to its block. Errors (a hello receive
// cancelled when the connection ended) are read too: one left unread
// would stop the queue.
void RdmTransport::drop_null_queue(RdmDomain &dom) {
    auto drop = [](void *context, DAT_DTO_COMPLETION_STATUS status) {
        if (!context)
            return;
        RdmCtx &c = *static_cast<RdmCtx::Part *>(context)->owner;
        c.status = status; // a sweep's (sweep_step)
        c.recv_posted.store(false, std::memory_order_release);
        c.block->release();
    };
    for (;;) {
        fi_cq_tagged_entry entries[8];
        const ssize_t n = fi_cq_read(dom.null_cq, entries, 8);
        if (n == -FI_EAVAIL) {
            fi_cq_err_entry err{};
            if (fi_cq_readerr(dom.null_cq, &err, 0) != 1)
                return;
            drop(err.op_context, to_dto_status(err.err));
            continue;
        }
        if (n <= 0)
            return;
        for (ssize_t i = 0; i < n; ++i)
            drop(entries[i].op_context, DAT_DTO_SUCCESS);
    }
}

// The loop's idle hook. Providers without a progress thread of their own
// (shm executes RMA in the target's progress, rxm moves tcp's bytes only when
// asked) need someone to read their queues while the consumer does not: a
// write must land while its target only watches memory, and a consumer
// asleep in dat_evd_wait on a queue without a wait fd must be woken. Each
// round reads every queue once (zero entries: progress, and whether
// something is queued), which costs the number of EVDs, never the number of
// connections (those share the EVDs' libfabric endpoints). A round every
// millisecond while a connection has work: an RDMA write to a target that
// only watches its memory lands within about a millisecond (dtest -W); on
// connections that stay quiet, at most kMaxRoundMs later.
int RdmTransport::progress_round() {
    thread_local std::vector<kit::Evd *> wake;
    thread_local std::vector<std::uint64_t> watch;
    thread_local std::vector<kit::ConnectionReport> broken;
    thread_local std::vector<std::uint64_t> waiting; // EPs with deferred requests
    bool busy = false, waiters = false, active = false, polled = false, landed = false, rearm_soon = false;
    bool fdless_waiters = false; // a consumer waits on a queue its fd cannot tell it of
    bool fdless_cno = false;     // an EVD whose queue has no fd feeds a CNO
    // A round after a queue's fd woke the loop: work goes on (a write
    // stream to a target that only watches its memory completes nothing
    // there, and its rounds must not slow down).
    active = fd_woke_;
    fd_woke_ = false;
    std::int64_t now_ns;
    {
        std::lock_guard<std::mutex> lock(rma_watch_mu_);
        watch.swap(rma_watch_);
        waiting.swap(deferred_eps_);
    }
    {
        std::unique_lock<std::mutex> lock(mu_);
        if (binding_.load(std::memory_order_seq_cst) > 0) {
            // An endpoint is being bound to queues this round would read:
            // the round comes again in a millisecond, with what it was to
            // look at.
            lock.unlock();
            std::lock_guard<std::mutex> wlock(rma_watch_mu_);
            rma_watch_.insert(rma_watch_.end(), watch.begin(), watch.end());
            deferred_eps_.insert(deferred_eps_.end(), waiting.begin(), waiting.end());
            watch.clear();
            waiting.clear();
            return 1;
        }
        // RDMA and atomic operations nobody answers: a target that refused
        // one may send no answer at all (shm 1.17 drops a refused RMA
        // without a response), and one that stopped progressing never will.
        // After kRmaAnswerTimeout the connection breaks: the kit flushes
        // what is outstanding, and memory stays as it was.
        now_ns = std::chrono::steady_clock::now().time_since_epoch().count();
        std::size_t keep = 0;
        for (std::uint64_t id : watch) {
            auto it = eps_.find(id);
            if (it == eps_.end() || it->second->rma_out.load(std::memory_order_relaxed) <= 0)
                continue;
            RdmEp &rep = *it->second;
            const std::int64_t stamp = rep.rma_stamp_ns.load(std::memory_order_relaxed);
            const std::int64_t waited = now_ns - stamp;
            if (waited < std::chrono::nanoseconds(kRmaAnswerTimeout).count()) {
                // Taken by the provider, but the target's progress carries it
                // out (shm places a write, and serves a read, in the target's
                // progress): a target that only watches its memory is asked.
                // Not at once: a target whose consumer polls its queues
                // carries it out by itself, and a nudge would only wake its
                // loop beside it. A target that refused it (shm answers
                // nothing) spins for each nudge: they come at 10, 20, 40, ... ms.
                if (stamp != rep.nudge_stamp_ns) {
                    rep.nudge_stamp_ns = stamp;
                    rep.loop_nudges = 0;
                }
                if (rep.loop_nudges < 16 &&
                    waited > (std::chrono::nanoseconds(kLoopNudgeAfter).count() << rep.loop_nudges)) {
                    ++rep.loop_nudges;
                    nudge_locked(rep);
                }
                watch[keep++] = id;
                continue;
            }
            const DAT_EP_STATE s = kit::ep_state(*rep.owner);
            if (!rep.conn || (s != DAT_EP_STATE_CONNECTED && s != DAT_EP_STATE_DISCONNECT_PENDING))
                continue;
            // An answer is counted when the consumer reads its completion:
            // completions waiting unread in the EP's request queue (its
            // consumer waits elsewhere, as an MPI library's finalize waits
            // on its connection EVD only) may be the answers. The bound
            // starts again rather than break an answered connection.
            if (rep.fep && rep.fep->tx_q && holds_completions(rep.fep->tx_q->cq)) {
                rep.rma_stamp_ns.store(now_ns, std::memory_order_relaxed);
                watch[keep++] = id;
                continue;
            }
            DAT2_ERR("%s: EP %p: an RDMA or atomic operation was not answered within %lld ms (refused by the "
                     "target, or the target stopped); the connection is broken\n",
                     name(), (void *)rep.owner, static_cast<long long>(kRmaAnswerTimeout.count()));
            RdmFabricEp *fep = rep.fep;
            break_stalled(rep, broken, true);
            retire_stalled(fep, broken);
        }
        watch.resize(keep);
        // Requests the provider refused for longer than a post waits: each
        // round offers them again, and asks the peer for its progress.
        keep = 0;
        for (std::uint64_t id : waiting) {
            auto it = eps_.find(id);
            if (it == eps_.end() || !it->second->fep)
                continue;
            RdmEp &rep = *it->second;
            std::lock_guard<std::mutex> g(rep.defer_mu);
            if (!drain_deferred(rep)) {
                nudge_locked(rep);
                waiting[keep++] = id;
            }
        }
        waiting.resize(keep);
        busy = connected_ > 0 || now_ns < linger_until_ns_;
        ++round_;
        // Only the queues a libfabric endpoint is bound to can have work:
        // EVDs no Endpoint connected through cost nothing.
        auto observe = [&](RdmCq *q) {
            if (!q || q->polled_round == round_)
                return;
            q->polled_round = round_;
            q->looked = false;
            const std::uint32_t dequeues = q->evd->dequeues.load(std::memory_order_relaxed);
            q->consumer_polls = dequeues != q->seen_dequeues;
            q->seen_dequeues = dequeues;
            polled = polled || q->consumer_polls;
            q->waiter = q->evd->inside.load(std::memory_order_relaxed) > 0;
            q->cno_only = !q->waiter && q->evd->feeds_cno.load(std::memory_order_relaxed);
            waiters = waiters || q->waiter;
            const bool fdless = q->owner->wait_fd.load(std::memory_order_acquire) < 0;
            fdless_waiters = fdless_waiters || (q->waiter && fdless);
            fdless_cno = fdless_cno || (q->cno_only && fdless);
            q->keep_quiet = q->consumer_polls || q->waiter;
        };
        // Looking drives the endpoints' progress (fi_cq_read), under the
        // provider's locks: not where a consumer's dequeues drive it already
        // (a queue of the endpoint was polled this round). The loop would
        // take those locks beside the consumer, on its CPU; shm's are spin
        // locks, and a loop that wakes while the consumer holds one spins
        // until the consumer runs again.
        auto look = [&](RdmCq *q, bool driven) {
            if (!q || q->looked)
                return;
            q->looked = true;
            if (!busy && !q->waiter && !q->cno_only)
                return;
            const std::uint64_t reads = q->owner->reads.load(std::memory_order_relaxed);
            if (driven && !q->waiter && !q->cno_only) {
                // Its consumer's reads tell whether work goes on.
                active = active || reads != q->seen_reads;
                q->seen_reads = reads;
                return;
            }
            const bool nonempty = holds_completions(q->cq);
            if ((nonempty && !q->was_nonempty) || reads != q->seen_reads)
                active = true;
            q->was_nonempty = nonempty;
            q->seen_reads = reads;
            if (nonempty && (q->waiter || q->cno_only))
                wake.push_back(q->evd);
        };
        for_each_fep([&](RdmFabricEp &fep) {
            observe(fep.tx_q);
            observe(fep.rx_q);
        });
        // A queue of the endpoint was dequeued since the last round.
        auto driven_of = [](const RdmFabricEp &fep) {
            return (fep.tx_q && fep.tx_q->consumer_polls) || (fep.rx_q && fep.rx_q->consumer_polls);
        };
        for_each_fep([&](RdmFabricEp &fep) {
            if (driven_of(fep) || (fep.tx_q && fep.tx_q->waiter) || (fep.rx_q && fep.rx_q->waiter)) {
                // Both queues' fds report the endpoint's sockets: neither
                // wakes the loop beside a consumer that drives or waits.
                if (fep.tx_q)
                    fep.tx_q->keep_quiet = true;
                if (fep.rx_q)
                    fep.rx_q->keep_quiet = true;
            }
        });
        if (now_ns - fd_window_ns_ > std::chrono::nanoseconds(std::chrono::milliseconds(1)).count()) {
            fd_window_ns_ = now_ns;
            fd_wakes_ = 0;
        }
        for_each_fep([&](RdmFabricEp &fep) {
            const bool driven = driven_of(fep);
            look(fep.tx_q, driven);
            look(fep.rx_q, driven);
            bool trywait_failed = false;
            for (RdmCq *q : {fep.tx_q, fep.rx_q}) {
                if (!q || !q->watch)
                    continue;
                const bool want = busy && q->fd >= 0 && !q->keep_quiet;
                trywait_failed = arm_queue(*q, want && fd_wakes_ < kMaxFdWakes) || trywait_failed;
                // Left unarmed (wakes spent, or the provider busy): the
                // next round comes within a millisecond, not a quiet one's.
                rearm_soon = rearm_soon || (want && !q->armed);
            }
            if (trywait_failed)
                for (RdmCq *q : {fep.tx_q, fep.rx_q == fep.tx_q ? nullptr : fep.rx_q})
                    if (q && q->evd->inside.load(std::memory_order_relaxed) > 0)
                        wake.push_back(q->evd);
            // Landing counts only for a consumer asleep (below).
            if (busy && waiters && !driven && fep.rma_cntr) {
                const std::uint64_t n = fi_cntr_read(fep.rma_cntr);
                landed = landed || n != fep.rma_seen;
                fep.rma_seen = n;
            }
        });
        if (busy) {
            std::lock_guard<std::mutex> dlock(dom_mu_);
            for (auto &dom : domains_)
                drop_null_queue(*dom);
        }
    }
    const bool rma_pending = !watch.empty() || !waiting.empty();
    if (rma_pending) {
        std::lock_guard<std::mutex> lock(rma_watch_mu_);
        rma_watch_.insert(rma_watch_.end(), watch.begin(), watch.end());
        deferred_eps_.insert(deferred_eps_.end(), waiting.begin(), waiting.end());
        busy = true;
    }
    watch.clear();
    waiting.clear();
    for (RdmConn *c : dead_conns_)
        finish_retire(c);
    dead_conns_.clear();
    for (kit::ConnectionReport &r : broken)
        r.deliver();
    broken.clear();
    if (run_sweeps(wake)) {
        busy = true;
        active = true;
    }
    for (kit::Evd *evd : wake)
        kit::evd_wake(*evd);
    wake.clear();
    // A peer's operation waits for our progress (its nudge): rounds back to
    // back, unless our consumer polls its queues, which drives the same
    // progress (an MPI library does): spinning beside it would only take
    // its CPU and the provider's locks. Whether it polls is judged over a
    // round's length: rounds back to back come microseconds apart, less
    // than a polling consumer may spend between two dequeues.
    // Peers' RDMA operations landing while our consumer sleeps in
    // dat_evd_wait (its CPU is free) and does not poll: rounds back to back
    // too, so that a stream of writes or reads lands at the provider's pace
    // rather than a round's. Not while it runs: a consumer that watches its
    // memory (MPI's eager path, dequeuing now and then) would lose its CPU.
    if (polled)
        polled_ns_ = now_ns;
    const bool consumer_polls = now_ns - polled_ns_ < std::chrono::nanoseconds(std::chrono::milliseconds(1)).count();
    if (landed && waiters && !consumer_polls)
        spin_until_ns_ = std::max(spin_until_ns_, now_ns + std::chrono::nanoseconds(kLandingSpin).count());
    if (now_ns < spin_until_ns_) {
        if (!consumer_polls)
            return 0;
        spin_until_ns_ = 0;
    }
    // A consumer asleep on its queues' fd is woken by it: only one without
    // an fd needs the rounds that look for it.
    if (fdless_waiters)
        return 1;
    if (!busy)
        return -1;
    // Quiet connections: the rounds slow down to kMaxRoundMs once nothing was
    // queued for 100 ms, so that an idle process sleeps; work seen brings
    // back a round a millisecond.
    const auto now = std::chrono::steady_clock::now();
    if (active || rma_pending || rearm_soon) {
        quiet_since_ = now;
        round_ms_ = 1;
    } else if (now - quiet_since_ > std::chrono::milliseconds(100)) {
        round_ms_ = std::min(round_ms_ * 2, kMaxRoundMs);
    }
    return fdless_cno ? std::min(round_ms_, kCnoRoundMs) : round_ms_;
}

} // namespace dat2::ofi
