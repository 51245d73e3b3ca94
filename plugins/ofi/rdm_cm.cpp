// SPDX-License-Identifier: BSD-3-Clause
// Connections of the RDM transport over a TCP side channel, as OFED's socket
// CM (dapl/openib_scm) does for verbs: a PSP listens on the TCP port of its
// qualifier at the IA's address; the active side connects, sends a request
// (qualifier, its fabric address and tag, private data); the passive side
// answers with an accept (its address and tag, private data), a reject, or
// "nobody listens on that qualifier"; the active side confirms with "ready".
// The socket stays open for the connection's life: a disconnect travels over
// it, and its end without one (the peer's process died, the host went away)
// is the connection breaking. Every socket is non-blocking and watched on the
// IA's event loop. Wire format: rdm_cm_wire.hpp.
#include "rdm.hpp"

#include "log.hpp"
#include "sockaddr.hpp"

#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace dat2::ofi {

namespace {

RdmEp &rep_of(kit::Ep &ep) { return *static_cast<RdmEp *>(ep.tp); }

// A request must arrive this soon after a connection reaches a listener, and
// at most this many may be awaited at once: a peer that connects and sends
// nothing (or garbage) holds a descriptor only that long.
constexpr auto kHandshakeTimeout = std::chrono::seconds(10);
constexpr int kMaxHandshakes = 256;
// How long a graceful disconnect waits for the EP's requests in flight.
constexpr auto kGracefulTimeout = std::chrono::seconds(2);

DAT_PORT_QUAL local_port(int fd) {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) != 0)
        return 0;
    return kit::port_of(a);
}

void no_delay(int fd) {
    const int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

DAT_EVENT_NUMBER reason_of(int err) {
    switch (err) {
    case ETIMEDOUT: return DAT_CONNECTION_EVENT_TIMED_OUT;
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EADDRNOTAVAIL: return DAT_CONNECTION_EVENT_UNREACHABLE;
    default: return DAT_CONNECTION_EVENT_NON_PEER_REJECTED; // refused, reset, closed: nobody serves it
    }
}

} // namespace

// ---- connection bookkeeping ------------------------------------------------------------

RdmConn *RdmTransport::new_conn(int fd, RdmConn::State state) {
    auto c = std::make_unique<RdmConn>();
    c->id = next_conn_id_++;
    c->fd = fd;
    c->state = state;
    RdmConn *out = c.get();
    conns_.emplace(out->id, std::move(c));
    return out;
}

RdmConn *RdmTransport::conn_by_id(std::uint64_t id) {
    auto it = conns_.find(id);
    return it == conns_.end() ? nullptr : it->second.get();
}

RdmConn *RdmTransport::detach_conn(std::uint64_t id) {
    auto it = conns_.find(id);
    if (it == conns_.end())
        return nullptr;
    RdmConn *c = it->second.release();
    conns_.erase(it);
    if (c->state == RdmConn::kAwaitRequest)
        --handshakes_;
    if (c->ep && c->ep->conn == id)
        c->ep->conn = 0;
    return c;
}

void RdmTransport::finish_retire(RdmConn *c) {
    if (!c)
        return;
    loop().unwatch(c->watch);
    loop().timer_free(c->timer);
    if (c->fd >= 0)
        ::close(c->fd);
    delete c;
}

bool RdmTransport::send_message(RdmConn &c, const rdmwire::Message &m) {
    unsigned char buf[rdmwire::kMaxMessage];
    const std::size_t len = rdmwire::encode(m, buf);
    if (!len || c.fd < 0)
        return false;
    // A few hundred bytes into a socket that has carried a few hundred: the
    // kernel's buffer takes them whole, or the peer is not reading at all.
    const ssize_t n = ::send(c.fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n != static_cast<ssize_t>(len)) {
        DAT2_LOG(log::kGeneric, "%s: side channel: sending a message of kind %u: %s\n", name(), unsigned(m.kind),
                 n < 0 ? std::strerror(errno) : "short write");
        return false;
    }
    if (m.kind == rdmwire::kDisconnect)
        c.disconnect_sent = true;
    return true;
}

void RdmTransport::send_disconnect(RdmEp &rep, RdmConn &c) {
    rdmwire::Message m;
    m.kind = rdmwire::kDisconnect;
    m.tag = rep.msgs_out.load(std::memory_order_relaxed);
    send_message(c, m);
}

DAT_RETURN RdmTransport::prepare_data_path(RdmEp &rep, std::unique_lock<std::mutex> &lock) {
    if (!rep.fep)
        rep.fep = fabric_ep_for(*rep.owner, lock);
    if (!rep.fep)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    // A tag no earlier connection of this IA had: what is still in flight
    // from an earlier connection of the EP matches nothing.
    rep.tag = tag_base_ | next_tag_.fetch_add(1, std::memory_order_relaxed);
    return DAT_SUCCESS;
}

// ---- the active side --------------------------------------------------------------------

DAT_RETURN RdmTransport::connect(kit::Ep &ep, const sockaddr *addr, DAT_CONN_QUAL qual, const void *pdata,
                                 std::size_t pdata_len, DAT_TIMEOUT) {
    RdmEp &rep = rep_of(ep);
    const sockaddr_storage dest = kit::with_port(addr, kit::port_of_qual(qual));
    int fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        DAT2_ERR("%s: side channel socket: %s\n", name(), std::strerror(errno));
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
    }
    no_delay(fd);
    // From the IA's address: the peer sees it as ours (dat_cr_query). The
    // port is left to connect, which needs only the four-tuple to be free:
    // a bind to port 0 searches every port's sockets for a conflict, and
    // the side channels that ended before this one linger in TIME_WAIT by
    // the thousand under connection churn.
    if (addr->sa_family == addr_.ss_family) {
        sockaddr_storage src = addr_;
        kit::set_port(src, 0);
        const int on = 1;
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &on, sizeof on);
        if (::bind(fd, reinterpret_cast<const sockaddr *>(&src), kit::sockaddr_size(address())) != 0)
            DAT2_LOG(log::kGeneric, "%s: side channel: binding to the IA address: %s\n", name(), std::strerror(errno));
    }
    if (::connect(fd, reinterpret_cast<const sockaddr *>(&dest), kit::sockaddr_size(addr)) != 0 &&
        errno != EINPROGRESS) {
        const int err = errno;
        ::close(fd);
        DAT2_ERR("%s: connect to the requested address: %s\n", name(), std::strerror(err));
        return DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (DAT_RETURN r = prepare_data_path(rep, lock)) {
        ::close(fd);
        return r;
    }
    RdmConn *c = new_conn(fd, RdmConn::kConnecting);
    rdmwire::Message m;
    m.kind = rdmwire::kRequest;
    m.conn_qual = qual;
    m.tag = rep.tag;
    m.pz_tag = pz_tags_ ? rep.fep->dom->tag : 0;
    m.addr = reinterpret_cast<const unsigned char *>(rep.fep->name.data());
    m.addr_len = rep.fep->name.size();
    m.pdata = static_cast<const unsigned char *>(pdata);
    m.pdata_len = pdata_len;
    c->request_len = rdmwire::encode(m, c->request);
    c->ep = &rep;
    rep.conn = c->id;
    const std::uint64_t id = c->id;
    c->watch = loop().watch(fd, EPOLLOUT, [this, id](std::uint32_t events) { conn_ready(id, events); });
    if (!c->watch || !c->request_len) {
        RdmConn *retire = detach_conn(id);
        lock.unlock(); // finish_retire waits for the handler, which takes mu_
        finish_retire(retire);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
    }
    return DAT_SUCCESS;
}

void RdmTransport::connect_cancel(kit::Ep &ep) {
    RdmEp &rep = rep_of(ep);
    RdmConn *retire = nullptr;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (rep.conn)
            retire = detach_conn(rep.conn);
        end_data_path(rep);
    }
    finish_retire(retire);
}

// ---- the loop's handlers ------------------------------------------------------------------

void RdmTransport::conn_ready(std::uint64_t id, std::uint32_t events) {
    // One message at a time: each may produce a report, delivered with mu_
    // released before the next is read.
    for (;;) {
        kit::ConnectionReport report;
        RdmConn *retire = nullptr;
        kit::Ep *ready = nullptr;
        bool more = false;
        {
            std::lock_guard<std::mutex> lock(mu_);
            RdmConn *c = conn_by_id(id);
            if (!c)
                return;
            bool drop = false;
            if (c->state == RdmConn::kConnecting) {
                int err = 0;
                socklen_t len = sizeof err;
                if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
                    err = errno;
                if (!err && !(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
                    return;
                if (err) {
                    drop = on_conn_lost(*c, report, err);
                } else {
                    const ssize_t n = ::send(c->fd, c->request, c->request_len, MSG_NOSIGNAL | MSG_DONTWAIT);
                    if (n != static_cast<ssize_t>(c->request_len)) {
                        drop = on_conn_lost(*c, report, n < 0 ? errno : EPIPE);
                    } else {
                        c->state = RdmConn::kAwaitAccept;
                        loop().modify(c->watch, EPOLLIN);
                    }
                }
            } else {
                rdmwire::Message m;
                std::size_t used = 0;
                rdmwire::Parse p = rdmwire::decode(c->in, c->in_len, m, &used);
                if (p == rdmwire::Parse::kNeedMore) {
                    const ssize_t n = ::recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len, MSG_DONTWAIT);
                    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                        return;
                    if (n <= 0) {
                        drop = on_conn_lost(*c, report, n == 0 ? 0 : errno);
                    } else {
                        c->in_len += static_cast<std::size_t>(n);
                        p = rdmwire::decode(c->in, c->in_len, m, &used);
                        more = true;
                    }
                }
                if (!drop && p == rdmwire::Parse::kBad) {
                    DAT2_LOG(log::kGeneric, "%s: side channel: not a message of ours; connection dropped\n", name());
                    drop = on_conn_lost(*c, report, EPROTO);
                } else if (!drop && p == rdmwire::Parse::kOk) {
                    on_message(*c, m, report, drop, ready);
                    std::memmove(c->in, c->in + used, c->in_len - used);
                    c->in_len -= used;
                    more = true;
                }
            }
            if (drop) {
                retire = detach_conn(id);
                more = false;
            }
        }
        finish_retire(retire);
        if (ready) {
            kit::ep_transport_ready(*ready);
            hello(rep_of(*ready));
            if (rep_of(*ready).recv_refused.exchange(false, std::memory_order_acq_rel))
                break_connection_later(rep_of(*ready).id); // after the ESTABLISHED reported below
        }
        report.deliver();
        if (!more)
            return;
    }
}

void RdmTransport::on_message(RdmConn &c, const rdmwire::Message &m, kit::ConnectionReport &report, bool &retire,
                              kit::Ep *&ready) {
    using namespace rdmwire;
    RdmEp *rep = c.ep;
    switch (c.state) {
    case RdmConn::kAwaitAccept:
        if (m.kind == kAccept) {
            if (attach_peer(*rep, std::string(reinterpret_cast<const char *>(m.addr), m.addr_len), m.tag, m.pz_tag) !=
                DAT_SUCCESS) {
                report.connect_failed(*rep->owner, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
                retire = true;
                return;
            }
            Message ok;
            ok.kind = kReady;
            if (!send_message(c, ok)) {
                end_data_path(*rep);
                report.connect_failed(*rep->owner, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
                retire = true;
                return;
            }
            c.state = RdmConn::kConnected;
            ready = rep->owner;
            report.established(*rep->owner, m.pdata, m.pdata_len, local_port(c.fd));
        } else if (m.kind == kReject || m.kind == kNoListener) {
            report.connect_failed(*rep->owner,
                                  m.kind == kReject ? DAT_CONNECTION_EVENT_PEER_REJECTED
                                                    : DAT_CONNECTION_EVENT_NON_PEER_REJECTED,
                                  m.pdata, m.pdata_len);
            end_data_path(*rep);
            retire = true;
        } else {
            retire = on_conn_lost(c, report, EPROTO);
        }
        return;
    case RdmConn::kAwaitRequest: {
        if (m.kind != kRequest) {
            retire = true;
            return;
        }
        if (m.conn_qual != c.psp_qual) {
            // Another qualifier folded onto this port: as if nobody listened.
            DAT2_LOG(log::kGeneric,
                     "%s: connection request for qualifier %llu refused: this port serves qualifier %llu\n", name(),
                     static_cast<unsigned long long>(m.conn_qual), static_cast<unsigned long long>(c.psp_qual));
            Message no;
            no.kind = kNoListener;
            send_message(c, no);
            retire = true;
            return;
        }
        --handshakes_;
        c.state = RdmConn::kRequested;
        loop().disarm(c.timer);
        c.peer_name.assign(reinterpret_cast<const char *>(m.addr), m.addr_len);
        c.peer_tag = m.tag;
        c.peer_pz_tag = m.pz_tag;
        socklen_t len = sizeof c.peer_addr;
        getpeername(c.fd, reinterpret_cast<sockaddr *>(&c.peer_addr), &len);
        report.request(*c.psp, reinterpret_cast<void *>(static_cast<std::uintptr_t>(c.id)),
                       reinterpret_cast<const sockaddr *>(&c.peer_addr), m.pdata, m.pdata_len);
        return;
    }
    case RdmConn::kAwaitReady:
        if (m.kind == kReady) {
            c.state = RdmConn::kConnected;
            report.established(*rep->owner, nullptr, 0, local_port(c.fd));
            if (rep->recv_refused.exchange(false, std::memory_order_acq_rel))
                break_connection_later(rep->id); // see RdmEp::recv_refused
        } else if (m.kind == kDisconnect) {
            // The requester gave up before our accept was established: the
            // accept failed to complete (dat_cr_accept(3DAT)).
            end_data_path(*rep);
            report.connect_failed(*rep->owner, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR);
            retire = true;
        } else {
            retire = on_conn_lost(c, report, EPROTO);
        }
        return;
    case RdmConn::kConnected:
        if (m.kind == kDisconnect) {
            // The disconnect names the messages sent before it (tag field):
            // those still in the fabric arrive first (kDrainTimeout at most).
            // ... and our own requests the peer already took (a write's
            // delivery ack may still be in the fabric behind the side
            // channel): they complete before the receives are flushed.
            if (m.tag > rep->msgs_in.load(std::memory_order_relaxed) ||
                rep->requests_out.load(std::memory_order_relaxed) > 0) {
                c.state = RdmConn::kDraining;
                rep->draining = true;
                rep->drain_until_msgs = m.tag;
                rep->drain_deadline = std::chrono::steady_clock::now() + kDrainTimeout;
                loop().arm(rep->disconnect_timer, kit::Deadline::after(std::chrono::milliseconds(1)));
                return;
            }
            end_data_path(*rep);
            report.disconnected(*rep->owner, false);
            retire = true;
        } else if (m.kind == kNudge) {
            spin_until_ns_ = (std::chrono::steady_clock::now() + kNudgedSpin).time_since_epoch().count();
        } else {
            retire = on_conn_lost(c, report, EPROTO);
        }
        return;
    case RdmConn::kRequested:
        // The requester gave up before our consumer answered: the CR stays
        // until accepted (which then fails) or rejected.
        if (m.kind == kDisconnect) {
            c.state = RdmConn::kDead;
            loop().modify(c.watch, 0);
        }
        return;
    case RdmConn::kConnecting:
    case RdmConn::kDead:
    case RdmConn::kDraining: return;
    }
}

bool RdmTransport::on_conn_lost(RdmConn &c, kit::ConnectionReport &report, int err) {
    RdmEp *rep = c.ep;
    switch (c.state) {
    case RdmConn::kConnecting:
    case RdmConn::kAwaitAccept:
        DAT2_LOG(log::kGeneric, "%s: connect on EP %p failed: %s\n", name(), (void *)rep->owner,
                 err ? std::strerror(err) : "the peer closed the connection");
        end_data_path(*rep);
        report.connect_failed(*rep->owner, reason_of(err));
        return true;
    case RdmConn::kAwaitRequest: return true;
    case RdmConn::kRequested:
    case RdmConn::kDead:
        // A CR still holds it.
        c.state = RdmConn::kDead;
        loop().modify(c.watch, 0);
        return false;
    case RdmConn::kAwaitReady:
        end_data_path(*rep);
        report.connect_failed(*rep->owner, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR);
        return true;
    case RdmConn::kDraining:
        // The peer closed after its disconnect: the drain's timer ends it.
        loop().modify(c.watch, 0);
        return false;
    case RdmConn::kConnected:
        DAT2_LOG(log::kGeneric, "%s: connection of EP %p broke: %s\n", name(), (void *)rep->owner,
                 err ? std::strerror(err) : "the peer closed the side channel without a disconnect");
        end_data_path(*rep);
        report.disconnected(*rep->owner, true);
        return true;
    }
    return true;
}

void RdmTransport::handshake_expired(std::uint64_t id) {
    RdmConn *retire = nullptr;
    {
        std::lock_guard<std::mutex> lock(mu_);
        RdmConn *c = conn_by_id(id);
        if (!c || c->state != RdmConn::kAwaitRequest)
            return;
        DAT2_LOG(log::kGeneric, "%s: side channel: no connection request within %lld s; dropped\n", name(),
                 static_cast<long long>(kHandshakeTimeout.count()));
        retire = detach_conn(id);
    }
    finish_retire(retire);
}

// ---- disconnect --------------------------------------------------------------------------

RdmConn *RdmTransport::finish_disconnect(RdmEp &rep, kit::ConnectionReport &report) {
    RdmConn *c = rep.conn ? conn_by_id(rep.conn) : nullptr;
    if (c && !c->disconnect_sent && c->state != RdmConn::kDraining)
        send_disconnect(rep, *c);
    end_data_path(rep);
    report.disconnected(*rep.owner, false);
    return c ? detach_conn(c->id) : nullptr;
}

DAT_RETURN RdmTransport::disconnect(kit::Ep &ep, bool graceful) {
    RdmEp &rep = rep_of(ep);
    kit::ConnectionReport report;
    RdmConn *retire = nullptr;
    {
        std::lock_guard<std::mutex> lock(mu_);
        RdmConn *c = rep.conn ? conn_by_id(rep.conn) : nullptr;
        if (graceful && c && c->state == RdmConn::kConnected && rep.requests_out.load(std::memory_order_relaxed) > 0) {
            // dat_ep_disconnect(3DAT): the requests in flight complete first
            // (bounded: a peer that stopped progressing does not hold us).
            if (!rep.graceful_pending) {
                rep.graceful_pending = true;
                rep.graceful_deadline = std::chrono::steady_clock::now() + kGracefulTimeout;
                loop().arm(rep.disconnect_timer, kit::Deadline::after(std::chrono::milliseconds(1)));
            }
            return DAT_SUCCESS;
        }
        retire = finish_disconnect(rep, report);
    }
    finish_retire(retire);
    report.deliver();
    return DAT_SUCCESS;
}

namespace {
// What a disconnect waits for: the messages the peer sent before its
// disconnect (while draining), and our requests the provider still holds.
bool waits_for_dtos(const RdmEp &rep) {
    return (rep.draining && rep.msgs_in.load(std::memory_order_relaxed) < rep.drain_until_msgs) ||
           rep.requests_out.load(std::memory_order_relaxed) > 0;
}
} // namespace

// The counts a disconnect waits for move as completions are read: those
// the consumer has not read yet are read into its EVDs now, or the
// disconnect would wait its whole timeout for a consumer that reads only
// once it learns of it. On the loop, without mu_ (an EVD's lock comes
// first): an EVD's free waits for this handler (cq_close), and the EP is
// looked up again after.
void RdmTransport::collect_for_disconnect(std::uint64_t ep_id) {
    kit::Evd *evds[2] = {};
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = eps_.find(ep_id);
        if (it == eps_.end())
            return;
        const RdmEp &rep = *it->second;
        if (!(rep.draining || rep.graceful_pending) || !waits_for_dtos(rep))
            return;
        evds[0] = rep.owner->request_evd;
        evds[1] = rep.owner->recv_evd != evds[0] ? rep.owner->recv_evd : nullptr;
    }
    for (kit::Evd *evd : evds)
        if (evd && evd->cq && kit::evd_collect(*evd))
            kit::evd_wake(*evd);
}

void RdmTransport::graceful_check(std::uint64_t ep_id) {
    collect_for_disconnect(ep_id);
    kit::ConnectionReport report;
    RdmConn *retire = nullptr;
    {
        std::unique_lock<std::mutex> lock(mu_);
        auto it = eps_.find(ep_id);
        if (it == eps_.end())
            return;
        RdmEp &rep = *it->second;
        if (rep.draining) {
            // The peer's disconnect waits for the messages it followed.
            if (waits_for_dtos(rep) && std::chrono::steady_clock::now() < rep.drain_deadline) {
                loop().arm(rep.disconnect_timer, kit::Deadline::after(std::chrono::milliseconds(1)));
                return;
            }
            RdmConn *c = rep.conn ? detach_conn(rep.conn) : nullptr;
            end_data_path(rep);
            report.disconnected(*rep.owner, false);
            retire = c;
        }
        if (!rep.graceful_pending) {
            lock.unlock();
            finish_retire(retire);
            report.deliver();
            return;
        }
        if (rep.requests_out.load(std::memory_order_relaxed) > 0 &&
            std::chrono::steady_clock::now() < rep.graceful_deadline) {
            loop().arm(rep.disconnect_timer, kit::Deadline::after(std::chrono::milliseconds(1)));
            return;
        }
        rep.graceful_pending = false;
        retire = finish_disconnect(rep, report);
    }
    finish_retire(retire);
    report.deliver();
}

// dat_ep_set_watermark's hard watermark, asked from inside a kit callback:
// the loop breaks the connection (the peer sees the side channel close).
DAT_RETURN RdmTransport::ep_break(kit::Ep &ep) {
    break_connection_later(rep_of(ep).id);
    return DAT_SUCCESS;
}

void RdmTransport::break_connection_later(std::uint64_t ep_id) {
    loop().post([this, ep_id] { break_connection(ep_id); });
}

void RdmTransport::break_connection(std::uint64_t ep_id) {
    kit::ConnectionReport report;
    RdmConn *retire = nullptr;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = eps_.find(ep_id);
        if (it == eps_.end() || !it->second->conn)
            return;
        RdmEp &rep = *it->second;
        const DAT_EP_STATE s = kit::ep_state(*rep.owner);
        if (s != DAT_EP_STATE_CONNECTED && s != DAT_EP_STATE_DISCONNECT_PENDING)
            return;
        retire = detach_conn(rep.conn);
        end_data_path(rep);
        report.disconnected(*rep.owner, true);
    }
    finish_retire(retire);
    report.deliver();
}

// ---- the passive side ------------------------------------------------------------------

DAT_RETURN RdmTransport::psp_open(kit::Psp &psp, const DAT_CONN_QUAL *qual, DAT_CONN_QUAL *assigned, void *&tp) {
    const std::uint16_t port = qual ? kit::port_of_qual(*qual) : 0;
    int fd = ::socket(addr_.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        DAT2_ERR("%s: listening socket: %s\n", name(), std::strerror(errno));
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
    }
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    sockaddr_storage at = addr_;
    kit::set_port(at, port);
    if (::bind(fd, reinterpret_cast<const sockaddr *>(&at), kit::sockaddr_size(address())) != 0 ||
        ::listen(fd, 1024) != 0) {
        const int err = errno;
        ::close(fd);
        if (err == EADDRINUSE)
            return DAT_ERROR(DAT_CONN_QUAL_IN_USE, 0);
        DAT2_ERR("%s: listening on qualifier %llu: %s\n", name(), static_cast<unsigned long long>(qual ? *qual : 0),
                 std::strerror(err));
        return kit::errno_to_dat(err, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    auto rpsp = std::make_unique<RdmPsp>();
    rpsp->owner = &psp;
    rpsp->fd = fd;
    if (qual && port) {
        rpsp->conn_qual = *qual;
    } else {
        rpsp->conn_qual = local_port(fd);
    }
    RdmPsp *raw = rpsp.get();
    rpsp->watch = loop().watch(fd, EPOLLIN, [this, raw](std::uint32_t) { listener_ready(raw); });
    if (!rpsp->watch) {
        ::close(fd);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
    }
    *assigned = rpsp->conn_qual;
    tp = rpsp.release();
    return DAT_SUCCESS;
}

void RdmTransport::psp_close(kit::Psp &psp) {
    auto *rpsp = static_cast<RdmPsp *>(psp.tp);
    if (!rpsp)
        return;
    loop().unwatch(rpsp->watch); // no request arrives from here on
    std::vector<RdmConn *> retire;
    {
        std::lock_guard<std::mutex> lock(mu_);
        // Requests not read yet would name a PSP that is gone.
        std::vector<std::uint64_t> ids;
        for (auto &[id, c] : conns_)
            if (c->psp == &psp && c->state == RdmConn::kAwaitRequest)
                ids.push_back(id);
        for (std::uint64_t id : ids)
            retire.push_back(detach_conn(id));
    }
    for (RdmConn *c : retire)
        finish_retire(c);
    ::close(rpsp->fd);
    delete rpsp;
}

void RdmTransport::listener_ready(RdmPsp *rpsp) {
    for (int i = 0; i < 64; ++i) {
        int fd = ::accept4(rpsp->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
                DAT2_LOG(log::kGeneric, "%s: accepting on qualifier %llu: %s\n", name(),
                         static_cast<unsigned long long>(rpsp->conn_qual), std::strerror(errno));
            return;
        }
        std::lock_guard<std::mutex> lock(mu_);
        if (handshakes_ >= kMaxHandshakes) {
            DAT2_LOG(log::kGeneric, "%s: %d side channels already await a request; one more refused\n", name(),
                     handshakes_);
            ::close(fd);
            continue;
        }
        no_delay(fd);
        RdmConn *c = new_conn(fd, RdmConn::kAwaitRequest);
        ++handshakes_;
        c->psp = rpsp->owner;
        c->psp_qual = rpsp->conn_qual;
        const std::uint64_t id = c->id;
        c->timer = loop().timer([this, id] { handshake_expired(id); });
        loop().arm(c->timer, kit::Deadline::after(kHandshakeTimeout));
        c->watch = loop().watch(fd, EPOLLIN, [this, id](std::uint32_t events) { conn_ready(id, events); });
        if (!c->watch) {
            // Retired without mu_ by the timer's handler.
            loop().arm(c->timer, kit::Deadline::after(std::chrono::milliseconds(0)));
        }
    }
}

void RdmTransport::fail_accept_later(RdmEp &rep) {
    const std::uint64_t ep_id = rep.id;
    loop().post([this, ep_id] {
        kit::ConnectionReport late;
        {
            std::lock_guard<std::mutex> lock(mu_);
            auto it = eps_.find(ep_id);
            if (it == eps_.end())
                return;
            late.connect_failed(*it->second->owner, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR);
        }
        late.deliver();
    });
}

DAT_RETURN RdmTransport::accept(kit::Cr &cr, kit::Ep &ep, const void *pdata, std::size_t pdata_len) {
    const auto id = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(cr.tp));
    RdmEp &rep = rep_of(ep);
    {
        RdmConn *retire = nullptr;
        std::unique_lock<std::mutex> lock(mu_);
        // First: it may release mu_, and the request may go meanwhile.
        if (DAT_RETURN r = prepare_data_path(rep, lock))
            return r;
        RdmConn *c = conn_by_id(id);
        if (!c || c->state != RdmConn::kRequested) {
            // The requester went away before the accept: dat_cr_accept(3DAT)'s
            // ACCEPT_COMPLETION_ERROR, reported once the kit has taken the accept.
            if (c)
                retire = detach_conn(id);
            fail_accept_later(rep);
            lock.unlock();
            finish_retire(retire);
            return DAT_SUCCESS;
        }
        if (attach_peer(rep, c->peer_name, c->peer_tag, c->peer_pz_tag) != DAT_SUCCESS) {
            // The requester's address cannot be put in the address vector
            // (logged): no connection to it can exist, as if it went away.
            retire = detach_conn(id);
            fail_accept_later(rep);
            lock.unlock();
            finish_retire(retire);
            return DAT_SUCCESS;
        }
        c->ep = &rep;
        rep.conn = id;
        c->state = RdmConn::kAwaitReady;
    }
    // Receives posted so far go in before the accept can bring anything.
    kit::ep_transport_ready(ep);
    kit::ConnectionReport report;
    RdmConn *retire = nullptr;
    {
        std::lock_guard<std::mutex> lock(mu_);
        RdmConn *c = conn_by_id(id);
        rdmwire::Message m;
        m.kind = rdmwire::kAccept;
        m.tag = rep.tag;
        m.pz_tag = pz_tags_ ? rep.fep->dom->tag : 0;
        m.addr = reinterpret_cast<const unsigned char *>(rep.fep->name.data());
        m.addr_len = rep.fep->name.size();
        m.pdata = static_cast<const unsigned char *>(pdata);
        m.pdata_len = pdata_len;
        if (!c || c->state != RdmConn::kAwaitReady || !send_message(*c, m)) {
            // The requester went away meanwhile: the accept fails as a
            // connection (reported once the kit has taken the accept).
            if (c)
                retire = detach_conn(id);
            end_data_path(rep);
            fail_accept_later(rep);
        }
    }
    if (retire)
        finish_retire(retire);
    else
        hello(rep); // after the accept: the requester drives its progress once it has it
    return DAT_SUCCESS;
}

DAT_RETURN RdmTransport::reject(kit::Cr &cr, const void *pdata, std::size_t pdata_len) {
    const auto id = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(cr.tp));
    RdmConn *retire = nullptr;
    {
        std::lock_guard<std::mutex> lock(mu_);
        RdmConn *c = conn_by_id(id);
        if (!c || (c->state != RdmConn::kRequested && c->state != RdmConn::kDead))
            return DAT_SUCCESS;
        if (c->state == RdmConn::kRequested) {
            rdmwire::Message m;
            if (cr.refused) {
                m.kind = rdmwire::kNoListener; // what a refusal by the provider looks like
            } else {
                m.kind = rdmwire::kReject;
                m.pdata = static_cast<const unsigned char *>(pdata);
                m.pdata_len = pdata_len;
            }
            send_message(*c, m);
        }
        retire = detach_conn(id);
    }
    finish_retire(retire);
    return DAT_SUCCESS;
}

// A request nobody answered is refused: the requester must not wait for ever.
void RdmTransport::cr_release(kit::Cr &cr) {
    if (cr.tp)
        reject(cr, nullptr, 0);
}

} // namespace dat2::ofi
