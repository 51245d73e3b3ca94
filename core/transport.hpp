// SPDX-License-Identifier: BSD-3-Clause
// The interface between the kit and a transport, whole: what a transport
// implements (class Transport), what it may call of the kit (the functions
// at the end), which kit locks are held when the kit calls it, and what it
// can do (Capabilities, core/kit.hpp). docs/transport.md walks through it
// with the scripted transport of tests/core/ as the smallest example.
//
// Objects. The kit owns every DAT object (core/kit.hpp). A transport keeps
// its own state for an object in memory it allocates and hands back to the
// kit when the object is opened (the `tp`, `cq`, Registration out
// parameters below); the kit stores it and passes the object back on every
// later call. A transport reads, never writes, these fields:
//   Ia: name, caps; Ep: attr, pz, srq, recv_evd, request_evd, tp, ia (state
//   through ep_state()); Evd: qlen, flags, cq, dequeues, inside; Lmr:
//   address, length, privileges, pz, mr, desc, rmr_context; Rmr: pz, scope,
//   tp; Srq: pz, max_recv_iov, max_recv_dtos, tp; Psp: conn_qual, tp; Cr:
//   psp, tp; Op: every field (the record of a DTO it posts).
//
// Threads. Calls come from consumer threads, any number at once, and from
// the IA's event loop (core/event_loop.hpp), where the transport's own
// handlers run. The kit holds none of its locks when it calls a transport
// except where a function says so below. A transport's own lock is never
// held when it calls the kit (the kit may call straight back).
#pragma once

#include "kit.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <netinet/in.h>
#include <memory>
#include <string>
#include <type_traits>

namespace dat2::kit {

// A completion as the transport reads it from its queue. Trivial on
// purpose: every poll of an EVD declares an array of them, and default
// member initializers would cost stores on every poll. cq_read sets every
// field of each entry it returns.
struct Completion {
    Op *op;
    DAT_DTO_COMPLETION_STATUS status;
    std::uint32_t length;
    // A receive of a send with invalidate: the sender asked to unbind our
    // RMR of this rmr_context (dat_ep_post_send_with_invalidate).
    bool invalidate;
    DAT_RMR_CONTEXT rmr_context;
    // A receive consumed by the peer's RDMA write with immediate data
    // (`length` is the written length) or by a send carrying immediate data.
    enum class Immed : std::uint8_t { kNone, kRdmaWrite, kSend } immed;
    std::uint32_t immed_data;
    // A receive from an SRQ: the EP that took it (which the kit cannot
    // know); nullptr otherwise.
    Ep *ep;

    // A successful completion of `o` with nothing else to say: every field
    // written, as the kit reuses its arrays of completions.
    void set_plain_success(Op *o, std::uint32_t len) {
        op = o;
        status = DAT_DTO_SUCCESS;
        length = len;
        invalidate = false;
        rmr_context = 0;
        immed = Immed::kNone;
        immed_data = 0;
        ep = nullptr;
    }
};
static_assert(std::is_trivially_default_constructible<Completion>::value, "polls declare arrays of them");

// What mr_register made of an LMR.
struct Registration {
    void *mr = nullptr;              // the transport's registration (Lmr::mr)
    void *desc = nullptr;            // handed back in each Segment of a DTO that uses it
    DAT_RMR_CONTEXT rmr_context = 0; // when remote access was asked for
};

enum class PostKind { kSend, kRecv, kRdmaRead, kRdmaWrite };

// What dat_ia_query publishes among the provider-specific attributes: the
// DAT_IB_* names OFED's providers publish, which consumers read (dtestsrq
// sizes its messages by DAT_IB_TRANSPORT_MTU). Empty and 0 fields are left
// out.
struct TransportFacts {
    std::string provider;       // DAT_IB_PROVIDER_NAME
    std::string device;         // DAT_IB_DEVICE_NAME
    std::string node_guid;      // DAT_IB_NODE_GUID
    std::string gid;            // DAT_IB_GID
    unsigned transport_mtu = 0; // DAT_IB_TRANSPORT_MTU: the size messages are cut at
    std::string port_status;    // DAT_IB_PORT_STATUS
    int port = 0;               // DAT_IB_PORT_NUMBER
};

class Transport {
public:
    explicit Transport(Ia &ia) : ia_(ia) {}
    virtual ~Transport() = default;
    Transport(const Transport &) = delete;
    Transport &operator=(const Transport &) = delete;

    // Everything that can fail when the IA opens: devices, fabrics, the
    // fds and timers it puts on loop() (not started yet: the kit starts it
    // once this returned DAT_SUCCESS). Fills `caps`, which starts at the
    // kit's own limits (lower them, never raise them):
    //  - max_*: how many of each object fit (resources: a transport lowers
    //    max_eps/max_evds where file descriptors run out first).
    //  - requests_in_order: an EP's requests complete in posting order (one
    //    RC send queue). The kit then lets the completion of a request
    //    stand for the earlier ones, and the transport may post a send or
    //    RDMA write with DAT_COMPLETION_SUPPRESS_FLAG without a completion
    //    of its own; it must post each request in the order the kit hands
    //    them over (the kit holds Ep::post_mu around post() for requests).
    //  - fence: post() honours DAT_COMPLETION_BARRIER_FENCE_FLAG (the
    //    operation starts after the EP's earlier RDMA reads completed);
    //    otherwise the kit waits for those reads before posting it.
    //  - recv_before_connect: post() takes receives on an EP that has no
    //    connection yet; otherwise the kit keeps them until the transport
    //    calls ep_transport_ready().
    //  - send_with_invalidate, ext: see post() and post_ext().
    virtual DAT_RETURN open(Capabilities &caps) = 0;

    // Attributes: the kit fills the generic ones first, the transport its own.
    virtual void query(DAT_IA_ATTR &ia_attr, DAT_PROVIDER_ATTR &provider_attr) = 0;
    // Asked once, after open().
    virtual void facts(TransportFacts &) const {}
    // The IA address (port 0).
    virtual const sockaddr *address() const = 0;

    // ---- completion queues (one per DTO EVD) ------------------------------
    virtual DAT_RETURN cq_open(Evd &evd, void *&cq) = 0;
    // Nothing is read from it any more; completions still in it are dropped.
    virtual void cq_close(Evd &evd) = 0;
    // Evd::mu held. Up to `max` completions, every field of each set; 0 when
    // empty. Must not block.
    virtual int cq_read(Evd &evd, Completion *out, int max) = 0;
    // The fd dat_evd_wait polls for completions (-1: the transport wakes the
    // EVD with evd_wake() itself), and whether blocking on it now is safe
    // (false: completions may be queued: the kit reads again first).
    virtual int cq_fd(Evd &evd) = 0;
    virtual bool cq_arm(Evd &evd) = 0;
    // Evd::feeds_cno may have changed (dat_evd_create with a CNO,
    // dat_evd_modify_cno); no lock held. Such an EVD's consumer may wait
    // outside DAT (the CNO's fd or agent): a transport whose queues nothing
    // else watches then (no helper thread of its own reads them) watches
    // them itself and wakes the EVD (evd_wake, which triggers the CNO).
    virtual void cq_cno_changed(Evd &) {}

    // ---- memory -----------------------------------------------------------
    // Registers [lmr.address, + lmr.length) for lmr.privileges.
    virtual DAT_RETURN mr_register(Lmr &lmr, Registration &out) = 0;
    virtual void mr_deregister(Lmr &lmr) = 0;
    // Memory windows: rmr_open/rmr_close make and free the window (`tp`).
    // rmr_bind exposes [addr, addr + len) of `lmr` for the remote
    // `privileges` under a new rmr_context, posted on `ep`, replacing any
    // binding (on failure the old one stays). rmr_unbind withdraws it (`ep`
    // null when the window is freed or a peer invalidated it). Once either
    // returns, the old context opens nothing. Without windows: the defaults.
    virtual DAT_RETURN rmr_open(Rmr &, void *&tp) {
        (void)tp;
        return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    }
    virtual void rmr_close(Rmr &) {}
    virtual DAT_RETURN rmr_bind(Rmr &, Ep &, const Lmr &, std::uintptr_t, DAT_VLEN, DAT_MEM_PRIV_FLAGS,
                                DAT_RMR_CONTEXT &) {
        return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    }
    virtual DAT_RETURN rmr_unbind(Rmr &, Ep *) { return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0); }

    // ---- endpoints ----------------------------------------------------------
    // The EP's transport state (`tp`). ep.srq is set for an EP that takes
    // its receives from an SRQ.
    virtual DAT_RETURN ep_open(Ep &ep, void *&tp) = 0;
    // Afterwards no completion of this EP is added to any queue and none of
    // its buffers is touched but by the operations ops_writing_memory()
    // counts; completions already queued may still name its records (the
    // kit reads them in before ep_free()).
    virtual void ep_close(Ep &ep) = 0;
    // Frees ep.tp, after ep_close() and after the kit read every queued
    // completion of the EP.
    virtual void ep_free(Ep &) {}
    // Operations of the EP that the library under the transport may still
    // write into the consumer's memory (receives, RDMA reads, fetching
    // atomics) after the transport ended the connection or closed the EP
    // and cancelled what it could: a receive already matched to a message
    // that is being read into its buffer cannot be taken back. The kit
    // reads completions until none is left (bounded) before it reports the
    // EP's records flushed or lets dat_ep_free return, since the consumer
    // may reuse or free those buffers then. A transport whose library
    // completes every operation when the connection ends or the endpoint
    // closes (a queue pair, a connected endpoint) keeps the default.
    virtual std::size_t ops_writing_memory(Ep &) { return 0; }
    // Whether the transport posted work of its own on the EP whose
    // completions may still be queued after ep_close() and name its state
    // (ep.tp): the kit then reads the EP's queues before ep_free() (and
    // before a reset or the end of a connection is reported) even when no
    // record of the EP is outstanding.
    virtual bool own_completions_queued(Ep &) { return false; }
    // dat_ep_reset: drops the connection's resources so the EP can connect again.
    virtual void ep_reset(Ep &ep) = 0;

    // ---- connections (reported with on_*() below) ----------------------------
    // Ep state ACTIVE_CONNECTION_PENDING. The kit arms the connect timeout.
    virtual DAT_RETURN connect(Ep &ep, const sockaddr *addr, DAT_CONN_QUAL qual, const void *pdata,
                               std::size_t pdata_len, DAT_TIMEOUT timeout) = 0;
    // The kit's connect timeout expired and it has ended the EP's
    // connection attempt (the EP is DISCONNECTED): drop what the attempt
    // holds; report nothing more about it.
    virtual void connect_cancel(Ep &ep) = 0;
    // Starts a disconnect; on_disconnected() reports its end. Graceful: the
    // requests in flight complete first (dat_ep_disconnect(3DAT)).
    virtual DAT_RETURN disconnect(Ep &ep, bool graceful) = 0;
    // Breaks the connection of a connected EP (dat_ep_set_watermark's hard
    // watermark), reported with on_disconnected(ep, true). The kit may call
    // it from inside on_established(): it must not block; the break may
    // happen later, on the loop.
    virtual DAT_RETURN ep_break(Ep &) { return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0); }

    // Service points. qual == nullptr: any free qualifier, reported through
    // *assigned. Requests are reported with on_connection_request().
    virtual DAT_RETURN psp_open(Psp &psp, const DAT_CONN_QUAL *qual, DAT_CONN_QUAL *assigned, void *&tp) = 0;
    virtual void psp_close(Psp &psp) = 0;
    // The request (cr.tp) is consumed when accept() succeeds and always by
    // reject(); cr_release() drops one neither consumed (the kit calls it
    // when the CR goes away).
    virtual DAT_RETURN accept(Cr &cr, Ep &ep, const void *pdata, std::size_t pdata_len) = 0;
    virtual DAT_RETURN reject(Cr &cr, const void *pdata, std::size_t pdata_len) = 0;
    virtual void cr_release(Cr &cr) = 0;

    // ---- data transfer ---------------------------------------------------------
    // Posts a request (never a kRecv: post_recv) the kit has checked (segments
    // resolved, lengths within the remote triplet). Ep::post_mu is held when
    // requests_in_order. A kSend with `remote` is a send with invalidate of
    // remote->rmr_context (only with send_with_invalidate); the peer's
    // transport reports it in the receive's Completion. Must not block.
    virtual DAT_RETURN post(Ep &ep, PostKind kind, Op &op, const Segment *segs, int nsegs,
                            const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags) = 0;
    // A receive, checked like a request. A call of its own: half of all
    // posts are receives, and a receive needs neither a request's arguments
    // nor its code.
    virtual DAT_RETURN post_recv(Ep &ep, Op &op, const Segment *segs, int nsegs, DAT_COMPLETION_FLAGS flags) = 0;
    // Extended DTOs (dat_ib_extensions.h, core/ext.cpp) that caps.ext names,
    // checked like an RDMA write (kRdmaWriteImmed: `segs` the source, the
    // immediate data in op.immed) or an RDMA read (atomics: one 8-byte
    // segment that receives the original value, op.operand the operands,
    // `remote` 8-byte aligned). The target reports a write with immediate
    // data in the Completion of the receive it consumed.
    virtual DAT_RETURN post_ext(Ep &, Op &, const Segment *, int, const DAT_RMR_TRIPLET &, DAT_COMPLETION_FLAGS) {
        return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    }

    // ---- shared receive queues (caps.max_srq_recvs > 0) -------------------
    // srq_close drops the receives still queued, without completions (the
    // kit takes their records back). srq_post queues a receive any EP of the
    // SRQ may take; its completion names that EP (Completion::ep). A receive
    // an EP took whose completion can no longer be reported (ep_close) goes
    // back through srq_drop().
    virtual DAT_RETURN srq_open(Srq &, void *&tp) {
        (void)tp;
        return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    }
    virtual void srq_close(Srq &) {}
    virtual DAT_RETURN srq_post(Srq &, Op &, const Segment *, int) { return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0); }

protected:
    EventLoop &loop() const { return *ia_.loop; }
    const char *name() const { return ia_.name.c_str(); }

    Ia &ia_;
};

// Creates the transport of a new IA from the dat.conf entry's ia_params
// (core/plugin.hpp makes one from a constructor and a parser).
using TransportFactory = std::unique_ptr<Transport> (*)(Ia &ia, const std::string &ia_params, DAT_RETURN &error);

// ---- what a transport may call of the kit ------------------------------------

// Connection events, from the loop or from inside a transport call (a
// disconnect that ends at once); never with the transport's lock held.
void on_connection_request(Psp &psp, void *tp_request, const sockaddr *remote, const void *pdata,
                           std::size_t pdata_len);
// `local_port`: the EP's port of the connection (dat_ep_query).
void on_established(Ep &ep, const void *pdata, std::size_t pdata_len, DAT_PORT_QUAL local_port);
void on_connect_failed(Ep &ep, DAT_EVENT_NUMBER reason, const void *pdata, std::size_t pdata_len);
// The connection is gone (local or remote disconnect, peer death): every
// outstanding DTO completes (flushed) before the DISCONNECTED/BROKEN event.
void on_disconnected(Ep &ep, bool broken, bool refused = false);

// A connection event found under the transport's lock, delivered once the
// lock is released: copies the private data and address, which may not
// outlive the transport's own event.
struct ConnectionReport {
    enum Kind : std::uint8_t { kNone, kRequest, kEstablished, kConnectFailed, kDisconnected } kind = kNone;
    Ep *ep = nullptr;
    Psp *psp = nullptr;         // kRequest
    void *tp_request = nullptr; // kRequest
    sockaddr_storage remote{};  // kRequest
    bool has_remote = false;
    DAT_EVENT_NUMBER reason = DAT_CONNECTION_EVENT_NON_PEER_REJECTED; // kConnectFailed
    bool broken = false;                                              // kDisconnected
    // kDisconnected: broken because the peer refused a remote operation, or
    // never answered one (the oldest outstanding one reports it).
    bool refused = false;
    DAT_PORT_QUAL local_port = 0;                                     // kEstablished
    unsigned char pdata[256];
    std::size_t pdata_len = 0;

    void request(Psp &p, void *tp, const sockaddr *from, const void *data, std::size_t len) {
        kind = kRequest;
        psp = &p;
        tp_request = tp;
        has_remote = from != nullptr;
        if (from)
            std::memcpy(&remote, from, from->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
        copy(data, len);
    }
    void established(Ep &e, const void *data, std::size_t len, DAT_PORT_QUAL port) {
        set(kEstablished, e, data, len);
        local_port = port;
    }
    void connect_failed(Ep &e, DAT_EVENT_NUMBER why, const void *data = nullptr, std::size_t len = 0) {
        set(kConnectFailed, e, data, len);
        reason = why;
    }
    void disconnected(Ep &e, bool is_broken, bool was_refused = false) {
        set(kDisconnected, e, nullptr, 0);
        broken = is_broken;
        refused = was_refused;
    }
    void deliver();

private:
    void set(Kind k, Ep &e, const void *data, std::size_t len) {
        kind = k;
        ep = &e;
        copy(data, len);
    }
    void copy(const void *data, std::size_t len) {
        pdata_len = data ? std::min(len, sizeof pdata) : 0;
        if (pdata_len)
            std::memcpy(pdata, data, pdata_len);
    }
};

// The EP's state now (it may change as soon as it is read).
inline DAT_EP_STATE ep_state(const Ep &ep) { return ep.state.load(std::memory_order_acquire); }
// Without recv_before_connect: the transport can take the EP's receives now
// (its endpoint exists); the ones posted meanwhile are posted, in order.
// Call before the connection can deliver a message (before sending the
// connect or accept). The kit forgets it when the EP is reset.
void ep_transport_ready(Ep &ep);
// Runs `fn` where the EP's requests keep posting order (under Ep::post_mu
// with requests_in_order): for a work request of the transport's own that
// must take its place among them (a graceful disconnect's marker).
template <class F> void ep_in_request_order(Ep &ep, F &&fn) {
    std::lock_guard<Lock> lock(ep.post_mu);
    fn();
}
// Completions may have arrived in the EVD's queue (cq_fd() is -1, or the
// transport consumed the fd's signal): wakes its waiters and CNO.
void evd_wake(Evd &evd);
// Wakes the threads asleep in dat_evd_wait or dat_cno_wait on the EVD, if
// any, so that they read its queue again; takes no lock. For work that a
// post made readable without the queue's fd firing. Call after the post,
// ordered after it (a sequentially consistent store or fence): the waiters
// are counted before they read.
void evd_wake_waiters(Evd &evd);
// Reads everything in the EVD's queue into its ring: for a transport that
// needs a completion of its own read (cq_read drops it) whether or not the
// Consumer reads the EVD. True when the ring grew: the caller then calls
// evd_wake, outside its own locks (a CNO's proxy agent may run there).
bool evd_collect(Evd &evd);
// An IA-level error for the async EVD.
void post_async(Ia &ia, DAT_EVENT_NUMBER number, DAT_HANDLE object, DAT_COUNT reason);
// A receive record of an SRQ whose completion will never be reported goes
// back to its SRQ (see srq_post).
void srq_drop(Op &op);
// errno (or libfabric's FI_E*, the same numbers) as a DAT_RETURN; `fallback`
// for codes without a DAT meaning.
DAT_RETURN errno_to_dat(int err, DAT_RETURN fallback);

// Provider registration, for a plugin's dat_provider_init/fini (core/plugin.hpp).
void provider_init(const DAT_PROVIDER_INFO *info, const char *ia_params, TransportFactory factory) noexcept;
void provider_fini(const DAT_PROVIDER_INFO *info) noexcept;

} // namespace dat2::kit
