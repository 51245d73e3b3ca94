// SPDX-License-Identifier: BSD-3-Clause
// Connections over libfabric MSG endpoints: the event queue (read on the
// IA's event loop), connect, listen, accept, reject, disconnect, and the
// link timeout on a connection's TCP socket.
#include "ofi.hpp"

#include "log.hpp"
#include "sockaddr.hpp"
#include "wait.hpp"

#include <arpa/inet.h>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <pthread.h>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace dat2::ofi {

namespace {

OfiEp &oep_of(kit::Ep &ep) { return *static_cast<OfiEp *>(ep.tp); }

// How long a freed PSP's listener refuses requests before it closes
// (psp_close): a request follows its connection within microseconds.
constexpr auto kListenerLinger = std::chrono::milliseconds(200);

// An EVD got another queue: a consumer asleep in dat_evd_wait looks again
// (its fd is another now).
void wake_evds(kit::Ep &ep) {
    for (kit::Evd *evd : {ep.request_evd, ep.recv_evd})
        if (evd)
            kit::evd_wake(*evd);
}

} // namespace

// ---- the event queue ---------------------------------------------------------------

void OfiTransport::read_event_queue() {
    alignas(fi_eq_cm_entry) unsigned char buf[sizeof(fi_eq_cm_entry) + 512];
    for (;;) {
        std::uint32_t event = 0;
        ssize_t n = fi_eq_read(eq_, &event, buf, sizeof buf, 0);
        if (n == -FI_EAGAIN)
            return;
        if (n == -FI_EAVAIL) {
            handle_cm_error();
            continue;
        }
        if (n < 0) {
            DAT2_ERR("%s: fi_eq_read: %s\n", name(), fi_text(static_cast<int>(n)));
            return;
        }
        handle_cm_event(event, buf, n);
    }
}

OfiEp *OfiTransport::ep_by_fid(const fid *f) {
    auto it = eps_by_fid_.find(f);
    return it == eps_by_fid_.end() ? nullptr : it->second;
}

void OfiTransport::handle_cm_event(std::uint32_t event, void *buf, ssize_t len) {
    auto *entry = static_cast<fi_eq_cm_entry *>(buf);
    const unsigned char *pdata = nullptr;
    std::size_t pdata_len = 0;
    DAT_CONN_QUAL asked = 0; // what a connection request names
    const bool framed = cm_event_pdata(entry, len, 0, pdata, pdata_len, &asked);
    kit::ConnectionReport report;
    {
        std::unique_lock<std::mutex> lock(mu_);
        switch (event) {
        case FI_CONNREQ: {
            auto it = psps_.find(entry->fid);
            if (it == psps_.end()) {
                // Reported after its listener was closed: there is no
                // listener left to answer it with.
                DAT2_LOG(log::kGeneric, "%s: connection request for a listener already closed: not answered\n",
                         name());
                fi_freeinfo(entry->info);
                return;
            }
            OfiPsp &opsp = *it->second;
            if (opsp.closing) {
                refuse(opsp, entry->info, "its PSP is being freed");
                return;
            }
            if (framed && asked != opsp.conn_qual) {
                char why[128];
                std::snprintf(why, sizeof why,
                              "it names qualifier %llu; port %u serves qualifier %llu, which shares it",
                              static_cast<unsigned long long>(asked), unsigned(kit::port_of_qual(asked)),
                              static_cast<unsigned long long>(opsp.conn_qual));
                refuse(opsp, entry->info, why);
                return;
            }
            auto *req = new (std::nothrow) OfiRequest{entry->info, &opsp};
            if (!req) {
                refuse(opsp, entry->info, "out of memory");
                return;
            }
            ++opsp.requests;
            // psp_close() runs on the loop: not before this handler returns.
            lock.unlock();
            const sockaddr *remote = static_cast<const sockaddr *>(entry->info->dest_addr);
            kit::on_connection_request(*opsp.owner, req, remote, pdata, pdata_len);
            return;
        }
        case FI_CONNECTED: {
            OfiEp *oep = ep_by_fid(entry->fid);
            if (!oep)
                return;
            sockaddr_storage local{};
            std::size_t llen = sizeof local;
            DAT_PORT_QUAL port = 0;
            if (fi_getname(&oep->ep->fid, &local, &llen) == 0)
                port = kit::port_of(local);
            if (params_.link_timeout_ms && !bound_link_timeout(oep->ep, params_.link_timeout_ms))
                DAT2_ERR("%s: link_timeout_ms has no effect on EP %p: provider '%s' shows no TCP socket of "
                         "its connection\n",
                         name(), (void *)oep->owner, params_.provider.c_str());
            report.established(*oep->owner, pdata, pdata_len, port);
            break;
        }
        case FI_SHUTDOWN: {
            OfiEp *oep = ep_by_fid(entry->fid);
            if (!oep)
                return;
            loop().disarm(oep->disconnect_timer);
            report.disconnected(*oep->owner, false);
            break;
        }
        default: DAT2_LOG(log::kGeneric, "%s: ignoring event %u\n", name(), event); return;
        }
    }
    report.deliver();
}

void OfiTransport::handle_cm_error() {
    fi_eq_err_entry err{};
    if (fi_eq_readerr(eq_, &err, 0) < 0)
        return;
    kit::ConnectionReport report;
    {
        std::lock_guard<std::mutex> lock(mu_);
        OfiEp *oep = err.fid ? ep_by_fid(err.fid) : nullptr;
        if (!oep) {
            DAT2_LOG(log::kGeneric, "%s: event queue error %s for a closed object\n", name(), fi_text(err.err));
            return;
        }
        kit::Ep &ep = *oep->owner;
        const DAT_EP_STATE state = kit::ep_state(ep);
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
            DAT2_LOG(log::kGeneric, "%s: connect on EP %p failed: %s\n", name(), (void *)&ep, fi_text(err.err));
            close_endpoint(*oep);
            report.connect_failed(ep, reason, pdata, pdata_len);
        } else if (state == DAT_EP_STATE_COMPLETION_PENDING) {
            close_endpoint(*oep);
            report.connect_failed(ep, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR);
        } else {
            DAT2_LOG(log::kGeneric, "%s: connection of EP %p broke: %s\n", name(), (void *)&ep, fi_text(err.err));
            loop().disarm(oep->disconnect_timer);
            report.disconnected(ep, true);
        }
    }
    report.deliver();
}

// ---- the active side -----------------------------------------------------------------

DAT_RETURN OfiTransport::connect(kit::Ep &ep, const sockaddr *addr, DAT_CONN_QUAL qual, const void *pdata,
                                 std::size_t pdata_len, DAT_TIMEOUT) {
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
    int rc = getinfo(nullptr, 0, hints, &cinfo);
    fi_freeinfo(hints);
    if (rc) {
        DAT2_ERR("%s: no route to the requested address: %s\n", name(), fi_text(rc));
        return DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
    }
    unsigned char buf[512];
    std::size_t len = frame_cm_data(kCmConnect, pdata, pdata_len, buf, qual);
    OfiEp &oep = oep_of(ep);
    DAT_RETURN r;
    bool grown = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        r = make_endpoint(oep, cinfo, grown);
    }
    if (grown)
        wake_evds(ep);
    if (r == DAT_SUCCESS) {
        // Receives posted so far go in before the peer can send anything.
        kit::ep_transport_ready(ep);
        std::lock_guard<std::mutex> lock(mu_);
        connects_maybe_pending_ = true; // the loop's checks find out (progress_round)
        if (!oep.ep) {
            r = DAT_ERROR(DAT_INVALID_STATE, 0); // a concurrent reset or free
        } else if ((rc = fi_connect(oep.ep, cinfo->dest_addr, buf, len))) {
            // dat_ep_connect(3DAT): an address the provider can tell is
            // unusable right away is DAT_INVALID_ADDRESS.
            DAT2_ERR("%s: fi_connect: %s\n", name(), fi_text(rc));
            close_endpoint(oep);
            r = DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
        }
    }
    fi_freeinfo(cinfo);
    return r;
}

void OfiTransport::connect_cancel(kit::Ep &ep) {
    std::lock_guard<std::mutex> lock(mu_);
    close_endpoint(oep_of(ep));
}

DAT_RETURN OfiTransport::disconnect(kit::Ep &ep, bool) {
    // tcp delivers what was queued before the FIN, graceful or not.
    kit::ConnectionReport report;
    {
        std::lock_guard<std::mutex> lock(mu_);
        OfiEp &oep = oep_of(ep);
        const DAT_EP_STATE s = kit::ep_state(ep);
        if (s == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING || s == DAT_EP_STATE_COMPLETION_PENDING || !oep.ep) {
            // Aborting establishment: nothing will report it, so report it here.
            close_endpoint(oep);
            report.disconnected(ep, false);
        } else if (oep.shutdown_sent) {
            // The kit calls again only for an abrupt disconnect of an EP whose
            // disconnect is pending: dat_ep_disconnect(3DAT) makes it
            // DISCONNECTED at once, without waiting for FI_SHUTDOWN (which the
            // kit then ignores).
            loop().disarm(oep.disconnect_timer);
            report.disconnected(ep, false);
        } else if (int rc = fi_shutdown(oep.ep, 0)) {
            DAT2_LOG(log::kGeneric, "%s: fi_shutdown: %s\n", name(), fi_text(rc));
            report.disconnected(ep, false);
        } else {
            // FI_SHUTDOWN comes back on the event queue; should it not, the
            // disconnect completes after this long.
            oep.shutdown_sent = true;
            loop().arm(oep.disconnect_timer, kit::Deadline::after(std::chrono::seconds(2)));
        }
    }
    report.deliver();
    return DAT_SUCCESS;
}

void OfiTransport::disconnect_expired(std::uint64_t id) {
    kit::ConnectionReport report;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = eps_by_id_.find(id);
        if (it == eps_by_id_.end() || !it->second->shutdown_sent)
            return;
        report.disconnected(*it->second->owner, false);
    }
    report.deliver();
}

// dat_ep_set_watermark's hard watermark, asked from inside a kit callback:
// the loop breaks the connection.
DAT_RETURN OfiTransport::ep_break(kit::Ep &ep) {
    const std::uint64_t id = oep_of(ep).id;
    loop().post([this, id] { break_connection(id); });
    return DAT_SUCCESS;
}

void OfiTransport::break_connection(std::uint64_t id) {
    kit::ConnectionReport report;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = eps_by_id_.find(id);
        if (it == eps_by_id_.end() || !it->second->ep)
            return;
        OfiEp &oep = *it->second;
        const DAT_EP_STATE s = kit::ep_state(*oep.owner);
        if (s != DAT_EP_STATE_CONNECTED && s != DAT_EP_STATE_DISCONNECT_PENDING)
            return;
        fi_shutdown(oep.ep, 0);
        loop().disarm(oep.disconnect_timer);
        report.disconnected(*oep.owner, true);
    }
    report.deliver();
}

// ---- the passive side ----------------------------------------------------------------

DAT_RETURN OfiTransport::psp_open(kit::Psp &psp, const DAT_CONN_QUAL *qual, DAT_CONN_QUAL *assigned, void *&tp) {
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
    kit::set_port(*src, port);
    std::free(hints->src_addr);
    hints->src_addr = src;
    hints->src_addrlen = kit::sockaddr_size(address());
    fi_info *pinfo = nullptr;
    int rc = getinfo(nullptr, 0, hints, &pinfo);
    fi_freeinfo(hints);
    if (rc) {
        DAT2_ERR("%s: fi_getinfo for a listener: %s\n", name(), fi_text(rc));
        return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    if (port)
        ask_to_close_listeners_on(port);
    auto opsp = std::make_unique<OfiPsp>();
    opsp->owner = &psp;
    opsp->port = port;
    const char *step = "fi_passive_ep";
    rc = fi_passive_ep(fabric_, pinfo, &opsp->pep, nullptr);
    const auto out_of_fds = [] { return errno == EMFILE || errno == ENFILE; };
    if (rc && out_of_fds()) {
        // Perhaps held by freed PSPs' listeners that linger: those of this
        // IA go now, and the listener is made again.
        loop().call([this] { close_listener_on(0); });
        rc = fi_passive_ep(fabric_, pinfo, &opsp->pep, nullptr);
        if (rc && out_of_fds()) {
            DAT2_ERR("%s: fi_passive_ep on qualifier %llu: %s (no file descriptor left)\n", name(),
                     static_cast<unsigned long long>(qual ? *qual : 0), fi_text(rc));
            fi_freeinfo(pinfo);
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
        }
    }
    fi_freeinfo(pinfo);
    if (rc == 0) {
        step = "bind";
        rc = fi_pep_bind(opsp->pep, &eq_->fid, 0);
    }
    if (rc == 0) {
        // Known before it listens: a request may come at once.
        std::lock_guard<std::mutex> lock(mu_);
        opsp->conn_qual = qual ? *qual : 0;
        psps_[&opsp->pep->fid] = opsp.get();
        step = "listen";
        rc = fi_listen(opsp->pep);
        if (rc)
            psps_.erase(&opsp->pep->fid);
    }
    if (rc) {
        if (rc != -FI_EADDRINUSE)
            DAT2_ERR("%s: %s on qualifier %llu: %s\n", name(), step, static_cast<unsigned long long>(qual ? *qual : 0),
                     fi_text(rc));
        if (opsp->pep)
            fi_close(&opsp->pep->fid);
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
            *assigned = kit::port_of(bound);
        std::lock_guard<std::mutex> lock(mu_);
        opsp->conn_qual = *assigned;
        opsp->port = static_cast<std::uint16_t>(*assigned);
    }
    tp = opsp.release();
    return DAT_SUCCESS;
}

// No CM data: the client sees what a port nobody listens on gives
// (NON_PEER_REJECTED, handle_cm_error), as nobody listens for it.
void OfiTransport::refuse(OfiPsp &opsp, fi_info *info, const char *why) {
    DAT2_LOG(log::kGeneric, "%s: connection request refused: %s\n", name(), why);
    if (int rc = fi_reject(opsp.pep, info->handle, nullptr, 0))
        DAT2_LOG(log::kGeneric, "%s: fi_reject: %s\n", name(), fi_text(rc));
    fi_freeinfo(info);
}

namespace {

// Freed PSPs' listeners still open, of every IA of this process, by port: a
// new listener on the port asks their IAs to close them.
struct Lingering {
    std::mutex mu;
    std::multimap<std::uint16_t, OfiTransport *> by_port;
};

Lingering &lingering() {
    static auto *l = new Lingering; // used by IAs closed at exit
    return *l;
}

// Held across fork(): a child creates service points of its own
// (docs/fork.md), and the listeners it inherited are its parent's, whose
// IAs' threads do not exist in it. Registered at load, as the kit's locks.
[[maybe_unused]] const int fork_handlers =
    pthread_atfork([] { lingering().mu.lock(); }, [] { lingering().mu.unlock(); },
                   [] {
                       lingering().by_port.clear();
                       lingering().mu.unlock();
                   });

} // namespace

void OfiTransport::psp_close(kit::Psp &psp) {
    auto *opsp = static_cast<OfiPsp *>(psp.tp);
    if (!opsp)
        return;
    // On the loop: no request handler of this PSP is running, and none
    // that would hand a request to the kit's PSP starts after this.
    loop().call([this, opsp] {
        {
            std::lock_guard<std::mutex> lock(mu_);
            opsp->closing = true;
            opsp->owner = nullptr;
        }
        {
            std::lock_guard<std::mutex> lock(lingering().mu);
            lingering().by_port.emplace(opsp->port, this);
        }
        opsp->linger = loop().timer([this, opsp] {
            bool done;
            {
                std::lock_guard<std::mutex> lock(mu_);
                opsp->linger_over = true;
                done = listener_done_locked(*opsp);
                opsp->close_posted = done;
            }
            if (done)
                close_listener(opsp);
        });
        loop().arm(opsp->linger, kit::Deadline::after(kListenerLinger));
    });
}

bool OfiTransport::listener_done_locked(const OfiPsp &opsp) const {
    return opsp.closing && opsp.linger_over && opsp.requests == 0 && !opsp.close_posted;
}

// The consumer answered a request (accepted, rejected, or its CR went away).
void OfiTransport::request_answered(OfiRequest *req) {
    OfiPsp *opsp = req->listener;
    delete req;
    std::lock_guard<std::mutex> lock(mu_);
    --opsp->requests;
    if (listener_done_locked(*opsp)) {
        opsp->close_posted = true;
        loop().post([this, opsp] { close_listener(opsp); });
    }
}

// On the loop (or once it has stopped). Without reading the event queue
// first: a read lets the provider accept connections still queued for this
// listener, which would then outlive it unanswered; closed with them
// queued, the kernel refuses them.
void OfiTransport::close_listener(OfiPsp *opsp) {
    loop().timer_free(opsp->linger);
    {
        std::lock_guard<std::mutex> lock(lingering().mu);
        auto range = lingering().by_port.equal_range(opsp->port);
        for (auto it = range.first; it != range.second; ++it)
            if (it->second == this) {
                lingering().by_port.erase(it);
                break;
            }
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        psps_.erase(&opsp->pep->fid);
    }
    fi_close(&opsp->pep->fid);
    delete opsp;
}

// On the loop: a new listener wants `port` (0: descriptors). A freed PSP's
// listener on it goes now, unless requests it gave the consumer are still
// unanswered.
void OfiTransport::close_listener_on(std::uint16_t port) {
    std::vector<OfiPsp *> go;
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto &[f, opsp] : psps_) {
            if (!opsp->closing || (port && opsp->port != port) || opsp->close_posted)
                continue;
            if (opsp->requests) {
                DAT2_LOG(log::kGeneric, "%s: port %u still serves %d unanswered connection requests of a freed PSP\n",
                         name(), unsigned(opsp->port), opsp->requests);
                continue;
            }
            opsp->close_posted = true;
            go.push_back(opsp);
        }
    }
    for (OfiPsp *opsp : go)
        close_listener(opsp);
}

// Asks every IA of this process whose freed PSP still listens on `port` to
// close that listener, and waits until each has (or its IA went away).
void OfiTransport::ask_to_close_listeners_on(std::uint16_t port) {
    std::vector<std::future<void>> asked;
    {
        std::lock_guard<std::mutex> lock(lingering().mu);
        auto range = lingering().by_port.equal_range(port);
        // A loop that has stopped never runs the handler; the wait below
        // ends when its destruction drops it.
        for (auto it = range.first; it != range.second; ++it)
            asked.push_back(it->second->loop().submit([t = it->second, port] { t->close_listener_on(port); }));
    }
    for (auto &f : asked)
        f.wait_for(std::chrono::seconds(5));
}

DAT_RETURN OfiTransport::accept(kit::Cr &cr, kit::Ep &ep, const void *pdata, std::size_t pdata_len) {
    auto *req = static_cast<OfiRequest *>(cr.tp);
    if (!req)
        return DAT_ERROR(DAT_INVALID_STATE, 0);
    fi_info *info = req->info;
    unsigned char buf[512];
    std::size_t len = frame_cm_data(kCmAccept, pdata, pdata_len, buf);
    OfiEp &oep = oep_of(ep);
    DAT_RETURN r;
    bool grown = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        r = make_endpoint(oep, info, grown);
    }
    if (grown)
        wake_evds(ep);
    if (r != DAT_SUCCESS)
        return r;
    kit::ep_transport_ready(ep);
    {
        std::lock_guard<std::mutex> lock(mu_);
        int rc = oep.ep ? fi_accept(oep.ep, buf, len) : -FI_ENOTCONN;
        if (rc) {
            DAT2_ERR("%s: fi_accept: %s\n", name(), fi_text(rc));
            close_endpoint(oep);
            return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
        }
    }
    fi_freeinfo(info);
    request_answered(req);
    return DAT_SUCCESS;
}

DAT_RETURN OfiTransport::reject(kit::Cr &cr, const void *pdata, std::size_t pdata_len) {
    auto *req = static_cast<OfiRequest *>(cr.tp);
    if (!req)
        return DAT_ERROR(DAT_INVALID_STATE, 0);
    unsigned char buf[512];
    // Unframed, a refusal by the provider reads as one from the network.
    std::size_t len = cr.refused ? 0 : frame_cm_data(kCmReject, pdata, pdata_len, buf);
    DAT_RETURN r = DAT_SUCCESS;
    // Through the listener it came to, which stays open until this answer
    // even if its PSP was freed or the CR handed to another one.
    if (int rc = fi_reject(req->listener->pep, req->info->handle, len ? buf : nullptr, len)) {
        DAT2_ERR("%s: fi_reject: %s\n", name(), fi_text(rc));
        r = to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    fi_freeinfo(req->info);
    request_answered(req);
    return r;
}

// A request nobody answered is refused: the requester must not wait for ever.
void OfiTransport::cr_release(kit::Cr &cr) {
    if (cr.tp)
        reject(cr, nullptr, 0);
}

// ---- link loss ------------------------------------------------------------------

namespace {

// Calls f(fd, local, peer) for each TCP socket of this process whose poll
// reports all of `events` (0: every one) until f returns true.
template <class F>
void for_each_tcp_socket(short events, F &&f) {
    DIR *dir = opendir("/proc/self/fd");
    if (!dir)
        return;
    while (dirent *e = readdir(dir)) {
        char *end = nullptr;
        long n = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end || n == dirfd(dir))
            continue;
        const int fd = static_cast<int>(n);
        int type = 0;
        socklen_t tlen = sizeof type;
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 || type != SOCK_STREAM)
            continue;
        if (events && !kit::fd_ready_now(fd, events))
            continue;
        sockaddr_storage local{}, peer{};
        socklen_t llen = sizeof local, plen = sizeof peer;
        if (getsockname(fd, reinterpret_cast<sockaddr *>(&local), &llen) != 0 ||
            getpeername(fd, reinterpret_cast<sockaddr *>(&peer), &plen) != 0)
            continue;
        if (f(fd, local, peer))
            break;
    }
    closedir(dir);
}

// The descriptor of this process's TCP socket connected from `local` to
// `peer`, or -1. Within a network namespace no other TCP socket has that
// pair of addresses.
int tcp_socket_of(const sockaddr_storage &local, const sockaddr_storage &peer) {
    int found = -1;
    for_each_tcp_socket(0, [&](int fd, const sockaddr_storage &l, const sockaddr_storage &p) {
        if (!kit::same_address(l, local) || !kit::same_address(p, peer))
            return false;
        found = fd;
        return true;
    });
    return found;
}

} // namespace

// A dead link is noticed by TCP alone: with data in flight after
// net.ipv4.tcp_retries2 retransmissions (~15 min by default), with nothing
// in flight never (libfabric's tcp provider sets no SO_KEEPALIVE). libfabric
// 1.17 has neither a variable for either nor a way to reach the endpoint's
// socket, so the socket is found by its addresses. The caller holds mu_,
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

// Connected EPs whose peer closed its side while a message of the peer
// waits here for a receive: tcp reads a socket in order and reports
// FI_SHUTDOWN only once it has read the end, so such a connection never ends
// by itself (and the end keeps its queue's fd readable). libfabric does not
// show an endpoint's socket: the process's sockets that saw the peer's close
// are matched to connections by their addresses. The message is lost, as one
// that finds no receive is on a reliable connection of verbs.
namespace {
// For each EP of `eps` that `wanted` picks (mu_ held) whose TCP socket saw
// the peer's close: seen(oep, fd). libfabric does not show an endpoint's
// socket; it is found by the endpoint's two addresses.
template <class Map, class Pick, class Seen>
void visit_eps_whose_peer_closed(const Map &eps, Pick &&wanted, Seen &&seen) {
    struct Named {
        OfiEp *oep;
        sockaddr_storage local, peer;
    };
    std::vector<Named> named;
    for (const auto &[id, oep] : eps) {
        if (!oep->ep || !wanted(*oep))
            continue;
        Named n{oep, {}, {}};
        std::size_t llen = sizeof n.local, plen = sizeof n.peer;
        if (fi_getname(&oep->ep->fid, &n.local, &llen) == 0 && fi_getpeer(oep->ep, &n.peer, &plen) == 0)
            named.push_back(n);
    }
    if (named.empty())
        return;
    for_each_tcp_socket(POLLRDHUP, [&](int fd, const sockaddr_storage &local, const sockaddr_storage &peer) {
        for (const Named &n : named)
            if (n.oep->ep && kit::same_address(n.local, local) && kit::same_address(n.peer, peer))
                seen(*n.oep, fd);
        return false;
    });
}
} // namespace

void OfiTransport::end_connections_of_departed_peers() {
    std::vector<kit::ConnectionReport> reports;
    {
        std::lock_guard<std::mutex> lock(mu_);
        visit_eps_whose_peer_closed(
            eps_by_id_,
            [](const OfiEp &oep) { return !oep.shutdown_sent && kit::ep_state(*oep.owner) == DAT_EP_STATE_CONNECTED; },
            [&](OfiEp &oep, int) {
                DAT2_LOG(log::kGeneric,
                         "%s: EP %p: the peer closed the connection before a receive was posted "
                         "for its last message; the connection ends\n",
                         name(), (void *)oep.owner);
                fi_shutdown(oep.ep, 0);
                loop().disarm(oep.disconnect_timer);
                reports.emplace_back().disconnected(*oep.owner, false);
            });
    }
    for (kit::ConnectionReport &r : reports)
        r.deliver();
}

bool OfiTransport::connects_pending_locked() const {
    for (const auto &[id, oep] : eps_by_id_)
        if (oep->ep && kit::ep_state(*oep->owner) == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING)
            return true;
    return false;
}

// A server that dies holding our request unanswered: libfabric 1.17's tcp
// may read the end of the connection while it waits for the answer and
// report nothing, and the connect would last until its timeout. Its socket
// shows the peer's close, and the connect fails as one nobody answers
// (dat_ep_connect(3DAT): NON_PEER_REJECTED for transport errors). Only once
// the socket has nothing left to read and a check 100 ms before saw the
// same: a server that rejects closes right after its answer, which tcp
// reads and reports (PEER_REJECTED, private data) by then.
void OfiTransport::fail_connects_to_departed_peers() {
    std::vector<kit::ConnectionReport> reports;
    {
        std::lock_guard<std::mutex> lock(mu_);
        visit_eps_whose_peer_closed(
            eps_by_id_,
            [](const OfiEp &oep) { return kit::ep_state(*oep.owner) == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING; },
            [&](OfiEp &oep, int fd) {
                int unread = 0;
                if (::ioctl(fd, FIONREAD, &unread) != 0 || unread > 0 || ++oep.server_gone_seen < 2)
                    return;
                DAT2_ERR("%s: EP %p: the server closed the connection before it answered the request; the "
                         "connect fails\n",
                         name(), (void *)oep.owner);
                kit::Ep &ep = *oep.owner;
                close_endpoint(oep);
                reports.emplace_back().connect_failed(ep, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
            });
    }
    for (kit::ConnectionReport &r : reports)
        r.deliver();
}

} // namespace dat2::ofi
