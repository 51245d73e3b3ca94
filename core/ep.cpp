// SPDX-License-Identifier: BSD-3-Clause
// Endpoints: creation and attributes, the DTO post paths (validated here,
// posted by the transport), flushes, reset and free in every state.
#include "ep.hpp"

#include "boundary.hpp"
#include "log.hpp"
#include "lmr.hpp"
#include "slots.hpp"
#include "srq.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <unordered_map>

namespace dat2::kit {

namespace {

// Connection EVDs of another IA. dat_ep_create(3DAT) asks only for "the
// Event Dispatcher where Connection events are reported", and dat_ia_open(3DAT)
// lets IAs of one Provider share an asynchronous EVD: connection events are
// the kit's own (no transport queue behind them), so an EVD of any IA of the
// same Provider may take them (dapltest -T L -w N gives every IA's EPs the
// connection EVD of the first). That IA may close first (abruptly):
// evd_release then takes the EVD from these EPs under foreign_mu, which
// also covers every event posted to a foreign EVD.
std::mutex foreign_mu;
std::unordered_multimap<Evd *, Ep *> &foreign_users() {
    static auto *users = new std::unordered_multimap<Evd *, Ep *>; // outlives every IA
    return *users;
}

// A connection EVD for an EP of `ia`: one of any IA of the same Provider.
DAT_RETURN connect_evd_cast(const Ia &ia, DAT_EVD_HANDLE h, Evd *&out) {
    if (DAT_RETURN r = handle_cast(h, out, DAT_INVALID_HANDLE_EVD_CONN))
        return r;
    if (out->provider != ia.provider)
        return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CONN);
    return DAT_SUCCESS;
}

// ep.connect_evd is set and counted in its users: remember it when foreign.
void register_connect_evd(Ep &ep) {
    ep.connect_evd_foreign = ep.connect_evd && ep.connect_evd->ia != ep.ia;
    if (ep.connect_evd_foreign) {
        std::lock_guard<std::mutex> lock(foreign_mu);
        foreign_users().emplace(ep.connect_evd, &ep);
    }
}

void release_connect_evd(Ep &ep) {
    if (!ep.connect_evd_foreign) {
        if (ep.connect_evd)
            ep.connect_evd->users.fetch_sub(1);
        return;
    }
    std::lock_guard<std::mutex> lock(foreign_mu);
    if (Evd *evd = ep.connect_evd) { // not taken by evd_release yet
        auto range = foreign_users().equal_range(evd);
        for (auto it = range.first; it != range.second; ++it)
            if (it->second == &ep) {
                foreign_users().erase(it);
                break;
            }
        evd->users.fetch_sub(1);
    }
    ep.connect_evd_foreign = false;
}

constexpr DAT_COMPLETION_FLAGS kValidCompletionFlags = static_cast<DAT_COMPLETION_FLAGS>(
    DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG |
    DAT_COMPLETION_BARRIER_FENCE_FLAG | DAT_COMPLETION_EVD_THRESHOLD_FLAG);

DAT_EP_ATTR default_attr(const Ia &ia) {
    DAT_EP_ATTR a;
    std::memset(&a, 0, sizeof a);
    a.service_type = DAT_SERVICE_TYPE_RC;
    a.max_message_size = 1u << 30;
    a.max_rdma_size = 1u << 30;
    a.qos = DAT_QOS_BEST_EFFORT;
    a.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.max_recv_dtos = std::min(kDefaultDtos, ia.max_dtos);
    a.max_request_dtos = std::min(kDefaultDtos, ia.max_dtos);
    a.max_recv_iov = a.max_request_iov = a.max_rdma_read_iov = a.max_rdma_write_iov = std::min(4, ia.max_iov);
    a.max_rdma_read_in = 8;
    a.max_rdma_read_out = 8;
    a.srq_soft_hw = DAT_HW_DEFAULT;
    return a;
}

// Attributes beyond what the IA reports (dat_ia_query) are invalid, not
// silently clamped: a DTO the transport cannot post must fail at creation.
DAT_RETURN check_attr(const Ia &ia, const DAT_EP_ATTR &a, int arg) {
    auto within = [](DAT_COUNT v, DAT_COUNT max) { return v >= 0 && v <= max; };
    if (a.service_type != DAT_SERVICE_TYPE_RC)
        return invalid_arg(arg);
    if (!within(a.max_recv_dtos, ia.max_dtos) || !within(a.max_request_dtos, ia.max_dtos))
        return invalid_arg(arg);
    if (!within(a.max_recv_iov, ia.max_iov) || !within(a.max_request_iov, ia.max_iov) ||
        !within(a.max_rdma_read_iov, ia.max_iov) || !within(a.max_rdma_write_iov, ia.max_iov))
        return invalid_arg(arg);
    if ((a.recv_completion_flags & ~kValidCompletionFlags) || (a.request_completion_flags & ~kValidCompletionFlags))
        return invalid_arg(arg);
    return DAT_SUCCESS;
}

void normalize_attr(DAT_EP_ATTR &a) {
    if (a.max_recv_iov == 0)
        a.max_recv_iov = 1;
    if (a.max_request_iov == 0)
        a.max_request_iov = 1;
    if (a.max_rdma_read_iov == 0)
        a.max_rdma_read_iov = a.max_request_iov;
    if (a.max_rdma_write_iov == 0)
        a.max_rdma_write_iov = a.max_request_iov;
}

// (Re)builds the DTO record pools; no DTO may be outstanding.
void build_pools(Ep &ep) {
    std::lock_guard<Lock> lock(ep.ops_mu);
    std::vector<Op> ops(static_cast<std::size_t>(ep.attr.max_request_dtos + ep.attr.max_recv_dtos));
    ep.ops.swap(ops);
    ep.free_requests = ep.free_recvs = nullptr;
    for (std::size_t i = ep.ops.size(); i-- > 0;) {
        Op &op = ep.ops[i];
        op.ep = &ep;
        op.is_recv = i >= static_cast<std::size_t>(ep.attr.max_request_dtos);
        Op *&head = op.is_recv ? ep.free_recvs : ep.free_requests;
        op.next_free = head;
        head = &op;
    }
    ep.recvs_posted = 0;
    ep.requests_posted = 0;
    ep.reads_posted = 0;
    ep.req_held.assign(static_cast<std::size_t>(std::max<DAT_COUNT>(1, ep.attr.max_request_dtos)), nullptr);
    ep.req_ops.assign(ep.req_held.size(), nullptr);
    ep.req_report_rseq = ep.req_next_rseq;
}

} // namespace

void op_recycle_locked(Op &op) {
    Ep &ep = *op.ep;
    op.state.store(Op::kFree, std::memory_order_relaxed);
    Op *&head = op.is_recv ? ep.free_recvs : ep.free_requests;
    op.next_free = head;
    head = &op;
    (op.is_recv ? ep.recvs_posted : ep.requests_posted).fetch_sub(1, std::memory_order_relaxed);
    if (!op.is_recv && op.operation == DAT_DTO_RDMA_READ)
        ep.reads_posted.fetch_sub(1, std::memory_order_release);
}

void op_recycle(Op &op) {
    if (op.srq) {
        srq_op_done(op);
        return;
    }
    std::lock_guard<Lock> lock(op.ep->ops_mu);
    op_recycle_locked(op);
}

namespace {

Op *op_take(Ep &ep, bool recv) {
    std::lock_guard<Lock> lock(ep.ops_mu);
    Op *&head = recv ? ep.free_recvs : ep.free_requests;
    Op *op = head;
    if (!op)
        return nullptr;
    head = op->next_free;
    (recv ? ep.recvs_posted : ep.requests_posted).fetch_add(1, std::memory_order_relaxed);
    if (!recv) {
        op->rseq = ep.req_next_rseq++;
        __atomic_store_n(&ep.req_ops[op->rseq % ep.req_ops.size()], op, __ATOMIC_RELEASE);
    }
    op->seq = ep.next_seq++;
    return op;
}


} // namespace

Op *ep_take_op(Ep &ep, Evd &evd, bool recv) {
    if (Op *op = op_take(ep, recv))
        return op;
    // Completions of suppressed DTOs come back only when someone reads the
    // queue; a consumer that never dequeues its request EVD (every send
    // suppressed) still gets its records back.
    {
        std::lock_guard<Lock> lock(evd.mu);
        evd_drain_all_locked(evd);
    }
    evd_wake(evd); // what moved into the EVD wakes its waiter
    return op_take(ep, recv);
}

namespace {

// DAT_COMPLETION_BARRIER_FENCE_FLAG: the operation starts only after every
// earlier RDMA read of the EP has completed. Transports without a fence of
// their own (libfabric tcp) get it here: completions are moved into the
// request EVD (nothing is lost or reordered) until the reads are done.
DAT_RETURN wait_for_reads(Ep &ep) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (ep.reads_posted.load(std::memory_order_acquire) > 0) {
        if (ep.state.load() != DAT_EP_STATE_CONNECTED)
            return DAT_SUCCESS; // flushed: nothing left to wait for
        if (std::chrono::steady_clock::now() > deadline) {
            DAT2_ERR("EP %p: RDMA reads did not complete within 30 s; fenced DTO not posted\n", (void *)&ep);
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
        }
        {
            std::lock_guard<Lock> lock(ep.request_evd->mu);
            evd_drain_all_locked(*ep.request_evd);
        }
        std::this_thread::yield();
    }
    return DAT_SUCCESS;
}

void flushed_now(Ep &ep, Op &op) {
    Evd *evd = op.is_recv ? ep.recv_evd : ep.request_evd;
    if (!op.is_recv && evd) {
        op.state.store(Op::kHeld, std::memory_order_release);
        evd_request_done(*evd, op, DAT_DTO_ERR_FLUSHED, false, false);
        return;
    }
    DAT_EVENT e = dto_event(op, DAT_DTO_ERR_FLUSHED, 0);
    op_recycle(op);
    if (evd)
        evd_push(*evd, e);
}

void with_evds(Ep &ep, void (*fn)(Evd &)) {
    Evd *list[2] = {ep.request_evd, ep.recv_evd != ep.request_evd ? ep.recv_evd : nullptr};
    for (Evd *evd : list)
        if (evd)
            fn(*evd);
}

bool consumer_notified(DAT_COMPLETION_FLAGS f) {
    return (f & (DAT_COMPLETION_UNSIGNALLED_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG)) != 0;
}

void count_notify_streams(Ep &ep, int delta) {
    // Receives taken from an SRQ always complete with a signal.
    if (ep.recv_evd && !ep.srq && consumer_notified(ep.attr.recv_completion_flags))
        ep.recv_evd->notify_streams.fetch_add(delta);
    if (ep.request_evd && (ep.attr.request_completion_flags & DAT_COMPLETION_UNSIGNALLED_FLAG))
        ep.request_evd->notify_streams.fetch_add(delta);
}

void detach(Ep &ep) {
    count_notify_streams(ep, -1);
    release_connect_evd(ep);
    for (Evd *evd : {ep.recv_evd, ep.request_evd})
        if (evd)
            evd->users.fetch_sub(1);
    if (ep.pz)
        ep.pz->users.fetch_sub(1);
}

// One instance per kind of DTO: the checks that depend on the kind fold
// away at compile time (measured only together with ea021fe's other
// changes: 1657 -> 1541 instructions a tcp ping-pong iteration).
template <PostKind kind>
DAT_RETURN post_dto(DAT_EP_HANDLE ep_handle, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                    const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags, const ExtPost *ext = nullptr) {
    Ep *ep;
    if (DAT_RETURN r = handle_cast(ep_handle, ep))
        return r;
    const bool recv = kind == PostKind::kRecv;
    if (recv && ep->srq)
        return DAT_ERROR(DAT_INVALID_STATE, 0); // dat_ep_create_with_srq(3DAT): receives go to the SRQ
    DAT_COUNT max_iov = recv ? ep->attr.max_recv_iov
                        : kind == PostKind::kSend ? ep->attr.max_request_iov
                        : kind == PostKind::kRdmaRead ? ep->attr.max_rdma_read_iov
                                                      : ep->attr.max_rdma_write_iov;
    if (n < 0 || n > max_iov)
        return invalid_arg(2);
    if (n > 0 && !iov)
        return invalid_arg(3);
    const int flags_arg = (kind == PostKind::kSend || recv) ? 5 : 6;
    if (flags & ~kValidCompletionFlags)
        return invalid_arg(flags_arg);
    if (!recv && kind != PostKind::kSend && !remote)
        return invalid_arg(5);
    DAT_EP_STATE state = ep->state.load(std::memory_order_acquire);
    if (!recv && state != DAT_EP_STATE_CONNECTED && state != DAT_EP_STATE_DISCONNECTED)
        return DAT_ERROR(DAT_INVALID_STATE, state == DAT_EP_STATE_DISCONNECT_PENDING
                                                ? DAT_INVALID_STATE_EP_DISCPENDING
                                                : DAT_INVALID_STATE_EP_NOTREADY);
    Evd *evd = recv ? ep->recv_evd : ep->request_evd;
    if (!evd)
        return DAT_ERROR(DAT_INVALID_STATE, recv ? DAT_INVALID_STATE_EP_EVD_RECV : DAT_INVALID_STATE_EP_EVD_REQUEST);
    const DAT_MEM_PRIV_FLAGS need =
        (recv || kind == PostKind::kRdmaRead) ? DAT_MEM_PRIV_LOCAL_WRITE_FLAG : DAT_MEM_PRIV_LOCAL_READ_FLAG;
    Segment segs[kMaxIov];
    int nsegs = 0;
    std::uint64_t total = 0;
    for (DAT_COUNT i = 0; i < n; ++i) {
        if (iov[i].segment_length == 0)
            continue; // DAT: a zero-length segment's other members are irrelevant
        if (DAT_RETURN r = resolve_segment(*ep->ia, ep->pz, iov[i], need, segs[nsegs]))
            return r;
        total += segs[nsegs].length;
        ++nsegs;
    }
    // A receive may offer more room than any message needs; a send may not
    // exceed what the EP was created for (0: no limit was given).
    if (kind == PostKind::kSend && ep->attr.max_message_size && total > ep->attr.max_message_size)
        return DAT_ERROR(DAT_LENGTH_ERROR, 0);
    if ((flags & DAT_COMPLETION_BARRIER_FENCE_FLAG) && !recv && state == DAT_EP_STATE_CONNECTED)
        if (DAT_RETURN r = wait_for_reads(*ep))
            return r;
    // Requests of a transport that completes them in order keep the order
    // of their posting sequence in its queue (Ia::requests_in_order).
    struct OrderLock {
        Lock *mu;
        ~OrderLock() {
            if (mu)
                mu->unlock();
        }
    } order_lock{!recv && ep->ia->requests_in_order ? &ep->post_mu : nullptr};
    if (order_lock.mu)
        order_lock.mu->lock();
    Op *op = ep_take_op(*ep, *evd, recv);
    if (!op)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
    if (kind == PostKind::kRdmaRead)
        ep->reads_posted.fetch_add(1, std::memory_order_relaxed);
    op->suppress = (flags & DAT_COMPLETION_SUPPRESS_FLAG) != 0;
    op->operation = recv ? DAT_DTO_RECEIVE
                    : kind == PostKind::kSend ? DAT_DTO_SEND
                    : kind == PostKind::kRdmaRead ? DAT_DTO_RDMA_READ
                                                  : DAT_DTO_RDMA_WRITE;
    op->cookie = cookie;
    op->length = static_cast<std::uint32_t>(total);
    op->ext = ext ? ext->kind : ExtKind::kNone;
    if (ext) {
        op->operation = ext_operation(ext->kind);
        op->immed = ext->immed;
        op->operand[0] = ext->operand[0];
        op->operand[1] = ext->operand[1];
    }
    op->state.store(Op::kPosted, std::memory_order_release);
    if (state == DAT_EP_STATE_DISCONNECTED) {
        // dat_ep_post_recv(3DAT): allowed, and flushed at once.
        op->state.store(Op::kFlushed, std::memory_order_relaxed);
        flushed_now(*ep, *op);
        return DAT_SUCCESS;
    }
    DAT_RETURN r = ext ? ep->ia->transport->post_ext(*ep, *op, segs, nsegs, *remote, flags)
                       : ep->ia->transport->post(*ep, kind, *op, segs, nsegs, remote, flags);
    if (r != DAT_SUCCESS) {
        // The post failed: the record goes back (a request's turn in the
        // posting order passes without an event).
        std::uint8_t expected = Op::kPosted;
        if (recv) {
            if (op->state.compare_exchange_strong(expected, Op::kFree))
                op_recycle(*op);
        } else if (op->state.compare_exchange_strong(expected, Op::kHeld)) {
            evd_request_done(*evd, *op, DAT_DTO_SUCCESS, true, false);
        }
    } else if (recv && ep_watermarks_armed(*ep)) {
        ep_check_watermarks(*ep, false);
    }
    return r;
}

} // namespace

DAT_RETURN ep_post(DAT_EP_HANDLE ep, PostKind kind, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                   const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags, const ExtPost *ext) {
    switch (kind) {
    case PostKind::kSend:
        return post_dto<PostKind::kSend>(ep, n, iov, cookie, remote, flags, ext);
    case PostKind::kRecv:
        return post_dto<PostKind::kRecv>(ep, n, iov, cookie, remote, flags, ext);
    case PostKind::kRdmaRead:
        return post_dto<PostKind::kRdmaRead>(ep, n, iov, cookie, remote, flags, ext);
    case PostKind::kRdmaWrite:
        return post_dto<PostKind::kRdmaWrite>(ep, n, iov, cookie, remote, flags, ext);
    }
    return DAT_ERROR(DAT_INTERNAL_ERROR, 0);
}

DAT_RETURN ep_fence_reads(Ep &ep) { return wait_for_reads(ep); }

void ep_drain_completions(Ep &ep) {
    with_evds(ep, [](Evd &evd) {
        {
            std::lock_guard<Lock> lock(evd.mu);
            evd_drain_all_locked(evd);
        }
        // What moved out of the queue no longer wakes anyone by itself.
        evd_wake(evd);
    });
}

void ep_flush_outstanding(Ep &ep) {
    std::vector<Op *> pending;
    for (Op &op : ep.ops) {
        std::uint8_t expected = Op::kPosted;
        if (op.state.compare_exchange_strong(expected, Op::kFlushed, std::memory_order_acq_rel))
            pending.push_back(&op);
    }
    std::sort(pending.begin(), pending.end(), [](const Op *a, const Op *b) { return a->seq < b->seq; });
    for (Op *op : pending) {
        Evd *evd = op->is_recv ? ep.recv_evd : ep.request_evd;
        if (evd && !op->is_recv) {
            // In posting order, releasing the requests completed behind it.
            evd_request_done(*evd, *op, DAT_DTO_ERR_FLUSHED, false, true);
        } else if (evd) {
            DAT_EVENT e = dto_event(*op, DAT_DTO_ERR_FLUSHED, 0);
            evd_push(*evd, e);
        }
        // The record stays kFlushed until the transport's own completion for
        // it shows up (dropped then) or the EP is reset or freed.
    }
    if (ep.srq)
        srq_ep_flushed(ep);
}

void ep_post_connection_event(Ep &ep, DAT_EVENT_NUMBER number, const void *pdata, std::size_t len) {
    if (!ep.connect_evd)
        return;
    DAT_EVENT e;
    std::memset(&e, 0, sizeof e);
    e.event_number = number;
    e.event_data.connect_event_data.ep_handle = &ep;
    if (pdata && len) {
        len = std::min(len, sizeof ep.event_data);
        std::memcpy(ep.event_data, pdata, len);
        e.event_data.connect_event_data.private_data = ep.event_data;
        e.event_data.connect_event_data.private_data_size = static_cast<DAT_COUNT>(len);
    }
    if (ep.connect_evd_foreign) {
        std::lock_guard<std::mutex> lock(foreign_mu);
        if (ep.connect_evd)
            evd_push(*ep.connect_evd, e);
    } else {
        evd_push(*ep.connect_evd, e);
    }
    // dat_ep_set_watermark(3DAT): a hard watermark already exceeded breaks
    // the connection "as soon as the connection is established".
    if (number == DAT_CONNECTION_EVENT_ESTABLISHED && ep_watermarks_armed(ep))
        ep_check_watermarks(ep, true);
}

// Takes back every record: nothing of this EP can complete any more.
static void reclaim_records(Ep &ep) {
    std::lock_guard<Lock> lock(ep.ops_mu);
    for (Op &op : ep.ops)
        if (op.state.load() == Op::kFlushed || op.state.load() == Op::kHeld)
            op_recycle_locked(op);
    std::fill(ep.req_held.begin(), ep.req_held.end(), nullptr);
    ep.req_report_rseq = ep.req_next_rseq;
}

void ep_forget_connect_evd(Evd &evd) {
    std::lock_guard<std::mutex> lock(foreign_mu);
    auto range = foreign_users().equal_range(&evd);
    for (auto it = range.first; it != range.second; ++it) {
        it->second->connect_evd = nullptr; // its connection events go nowhere now
        evd.users.fetch_sub(1);
    }
    foreign_users().erase(range.first, range.second);
}

void ep_release_all(Ep &ep) {
    Ia &ia = *ep.ia;
    ia.transport->ep_close(ep);
    ep_drain_completions(ep);
    if (ep.cr) {
        ep.cr->provider_ep = nullptr;
        ep.cr = nullptr;
    }
    detach(ep);
    if (ep.srq)
        srq_detach(*ep.srq, ep);
    ia_untrack(ia, &ep);
    destroy_object(&ep);
}

// dat_psp_create(3DAT) with DAT_PSP_PROVIDER_FLAG, dat_rsp_create(3DAT)
// with no EP: an Endpoint with no PZ and no EVDs and default attributes,
// which the Consumer completes with dat_ep_modify before accepting.
Ep *ep_create_for_provider(Ia &ia, DAT_EP_STATE state) {
    if (!ia_has_room(ia, DAT_HANDLE_TYPE_EP, ia.max_eps))
        return nullptr;
    Ep *ep = make_object<Ep>(ia.provider, &ia);
    if (!ep)
        return nullptr;
    ep->attr = default_attr(ia);
    normalize_attr(ep->attr);
    try {
        build_pools(*ep);
    } catch (...) {
        destroy_object(ep);
        return nullptr;
    }
    if (ia.transport->ep_open(*ep) != DAT_SUCCESS) {
        destroy_object(ep);
        return nullptr;
    }
    ep->state.store(state);
    ia_track(ia, ep);
    publish(ep);
    return ep;
}

DAT_RETURN ep_create_common(const char *call, DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz_handle,
                            DAT_EVD_HANDLE recv_evd_handle, DAT_EVD_HANDLE request_evd_handle,
                            DAT_EVD_HANDLE connect_evd_handle, Srq *srq, const DAT_EP_ATTR *attr, int attr_arg,
                            DAT_EP_HANDLE *ep_out) {
    return guarded(call, [&]() -> DAT_RETURN {
        Ia *ia;
        if (DAT_RETURN r = handle_cast(ia_handle, ia))
            return r;
        Pz *pz;
        if (DAT_RETURN r = handle_cast_in(ia, pz_handle, pz))
            return r;
        Evd *recv_evd = nullptr, *request_evd = nullptr, *connect_evd = nullptr;
        if (recv_evd_handle != DAT_HANDLE_NULL) {
            if (DAT_RETURN r = handle_cast_in(ia, recv_evd_handle, recv_evd, DAT_INVALID_HANDLE_EVD_RECV))
                return r;
            if (!(recv_evd->flags & DAT_EVD_DTO_FLAG))
                return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_RECV);
        }
        if (request_evd_handle != DAT_HANDLE_NULL) {
            if (DAT_RETURN r = handle_cast_in(ia, request_evd_handle, request_evd, DAT_INVALID_HANDLE_EVD_REQUEST))
                return r;
            if (!(request_evd->flags & DAT_EVD_DTO_FLAG))
                return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
        }
        if (connect_evd_handle != DAT_HANDLE_NULL) {
            if (DAT_RETURN r = connect_evd_cast(*ia, connect_evd_handle, connect_evd))
                return r;
            if (!(connect_evd->flags & DAT_EVD_CONNECTION_FLAG))
                return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CONN);
        }
        if (!ep_out)
            return invalid_arg(attr_arg + 1);
        DAT_EP_ATTR a = attr ? *attr : default_attr(*ia);
        if (srq) // dat_ep_create_with_srq(3DAT): max_recv_iov "is ignored"
            a.max_recv_iov = srq->max_recv_iov;
        if (DAT_RETURN r = check_attr(*ia, a, attr_arg))
            return r;
        normalize_attr(a);
        if (!ia_has_room(*ia, DAT_HANDLE_TYPE_EP, ia->max_eps))
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
        Ep *ep = make_object<Ep>(ia->provider, ia);
        if (!ep)
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
        ep->pz = pz;
        ep->recv_evd = recv_evd;
        ep->request_evd = request_evd;
        ep->connect_evd = connect_evd;
        ep->attr = a;
        ep->srq = srq;
        try {
            build_pools(*ep);
        } catch (...) {
            destroy_object(ep);
            throw;
        }
        if (DAT_RETURN r = ia->transport->ep_open(*ep)) {
            destroy_object(ep);
            return r;
        }
        for (Evd *evd : {recv_evd, request_evd, connect_evd})
            if (evd)
                evd->users.fetch_add(1);
        register_connect_evd(*ep);
        count_notify_streams(*ep, +1);
        pz->users.fetch_add(1);
        if (srq)
            srq_attach(*srq, *ep);
        ia_track(*ia, ep);
        publish(ep);
        *ep_out = ep;
        return DAT_SUCCESS;
    });
}

namespace slot {

DAT_RETURN ep_create(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz_handle, DAT_EVD_HANDLE recv_evd_handle,
                     DAT_EVD_HANDLE request_evd_handle, DAT_EVD_HANDLE connect_evd_handle, const DAT_EP_ATTR *attr,
                     DAT_EP_HANDLE *ep_out) {
    return ep_create_common("dat_ep_create", ia_handle, pz_handle, recv_evd_handle, request_evd_handle,
                            connect_evd_handle, nullptr, attr, 6, ep_out);
}

DAT_RETURN ep_query(DAT_EP_HANDLE ep_handle, DAT_EP_PARAM_MASK mask, DAT_EP_PARAM *param) {
    return guarded("dat_ep_query", [&]() -> DAT_RETURN {
        Ep *ep;
        if (DAT_RETURN r = handle_cast(ep_handle, ep))
            return r;
        if (!param)
            return invalid_arg(3);
        if (mask & ~DAT_EP_FIELD_ALL)
            return invalid_arg(2);
        std::lock_guard<std::mutex> lock(ep->mu);
        if (mask & DAT_EP_FIELD_IA_HANDLE)
            ia_handle_for_consumer(ep->ia, &param->ia_handle);
        if (mask & DAT_EP_FIELD_EP_STATE)
            param->ep_state = ep->state.load();
        if (mask & DAT_EP_FIELD_LOCAL_IA_ADDRESS_PTR)
            param->local_ia_address_ptr = const_cast<sockaddr *>(ep->ia->transport->address());
        if (mask & DAT_EP_FIELD_LOCAL_PORT_QUAL)
            param->local_port_qual = ep->local_port;
        if (mask & DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR)
            param->remote_ia_address_ptr = reinterpret_cast<sockaddr *>(&ep->remote);
        if (mask & DAT_EP_FIELD_REMOTE_PORT_QUAL)
            param->remote_port_qual = ep->remote_port;
        if (mask & DAT_EP_FIELD_PZ_HANDLE)
            param->pz_handle = ep->pz;
        if (mask & DAT_EP_FIELD_RECV_EVD_HANDLE)
            param->recv_evd_handle = ep->recv_evd;
        if (mask & DAT_EP_FIELD_REQUEST_EVD_HANDLE)
            param->request_evd_handle = ep->request_evd;
        if (mask & DAT_EP_FIELD_CONNECT_EVD_HANDLE)
            param->connect_evd_handle = ep->connect_evd;
        if (mask & DAT_EP_FIELD_SRQ_HANDLE)
            param->srq_handle = ep->srq;
        if (mask & DAT_EP_FIELD_EP_ATTR_ALL)
            param->ep_attr = ep->attr;
        return DAT_SUCCESS;
    });
}

DAT_RETURN ep_modify(DAT_EP_HANDLE ep_handle, DAT_EP_PARAM_MASK mask, const DAT_EP_PARAM *param) {
    return guarded("dat_ep_modify", [&]() -> DAT_RETURN {
        Ep *ep;
        if (DAT_RETURN r = handle_cast(ep_handle, ep))
            return r;
        if (!param)
            return invalid_arg(3);
        constexpr DAT_EP_PARAM_MASK kModifiable =
            DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_RECV_EVD_HANDLE | DAT_EP_FIELD_REQUEST_EVD_HANDLE |
            DAT_EP_FIELD_CONNECT_EVD_HANDLE | DAT_EP_FIELD_EP_ATTR_ALL;
        if (mask == 0 || (mask & ~kModifiable))
            return invalid_arg(2);
        std::lock_guard<std::mutex> lock(ep->mu);
        // dat_ep_modify(3DAT): EVDs and attributes before a connection is
        // requested or accepted (Unconnected, Reserved, Passive and Tentative
        // Connection Pending); the PZ only when quiescent (Unconnected,
        // Tentative Connection Pending).
        DAT_EP_STATE s = ep->state.load();
        const bool quiescent = s == DAT_EP_STATE_UNCONNECTED || s == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING;
        if (!quiescent && s != DAT_EP_STATE_RESERVED && s != DAT_EP_STATE_PASSIVE_CONNECTION_PENDING)
            return DAT_ERROR(DAT_INVALID_STATE, 0);
        if ((mask & DAT_EP_FIELD_PZ_HANDLE) && !quiescent)
            return DAT_ERROR(DAT_INVALID_STATE, 0);
        if (ep->recvs_posted.load() || ep->requests_posted.load())
            return DAT_ERROR(DAT_INVALID_STATE, 0);
        Pz *pz = ep->pz;
        Evd *evds[3] = {ep->recv_evd, ep->request_evd, ep->connect_evd};
        if (mask & DAT_EP_FIELD_PZ_HANDLE)
            if (DAT_RETURN r = handle_cast_in(ep->ia, param->pz_handle, pz))
                return r;
        const DAT_EP_PARAM_MASK fields[3] = {DAT_EP_FIELD_RECV_EVD_HANDLE, DAT_EP_FIELD_REQUEST_EVD_HANDLE,
                                             DAT_EP_FIELD_CONNECT_EVD_HANDLE};
        const DAT_EVD_HANDLE given[3] = {param->recv_evd_handle, param->request_evd_handle,
                                         param->connect_evd_handle};
        const DAT_EVD_FLAGS need[3] = {DAT_EVD_DTO_FLAG, DAT_EVD_DTO_FLAG, DAT_EVD_CONNECTION_FLAG};
        for (int i = 0; i < 3; ++i) {
            if (!(mask & fields[i]))
                continue;
            evds[i] = nullptr;
            if (given[i] == DAT_HANDLE_NULL)
                continue;
            if (i == 2) {
                if (DAT_RETURN r = connect_evd_cast(*ep->ia, given[i], evds[i]))
                    return r;
            } else if (DAT_RETURN r = handle_cast_in(ep->ia, given[i], evds[i])) {
                return r;
            }
            if (!(evds[i]->flags & need[i]))
                return invalid_arg(3);
        }
        if (ep->srq && !evds[0])
            return invalid_arg(3); // the SRQ's receives complete on the recv EVD (see ep_create_with_srq)
        DAT_EP_ATTR a = ep->attr;
        if (mask & DAT_EP_FIELD_EP_ATTR_ALL) {
            const DAT_EP_ATTR &p = param->ep_attr;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE) a.max_message_size = p.max_message_size;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_SIZE) a.max_rdma_size = p.max_rdma_size;
            if (mask & DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS) a.recv_completion_flags = p.recv_completion_flags;
            if (mask & DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS) a.request_completion_flags = p.request_completion_flags;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS) a.max_recv_dtos = p.max_recv_dtos;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS) a.max_request_dtos = p.max_request_dtos;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV) a.max_recv_iov = p.max_recv_iov;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV) a.max_request_iov = p.max_request_iov;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN) a.max_rdma_read_in = p.max_rdma_read_in;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT) a.max_rdma_read_out = p.max_rdma_read_out;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IOV) a.max_rdma_read_iov = p.max_rdma_read_iov;
            if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_WRITE_IOV) a.max_rdma_write_iov = p.max_rdma_write_iov;
            if ((mask & DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE) && p.service_type != DAT_SERVICE_TYPE_RC)
                return invalid_arg(3);
            if (DAT_RETURN r = check_attr(*ep->ia, a, 3))
                return r;
            normalize_attr(a);
        }
        detach(*ep);
        ep->pz = pz;
        ep->recv_evd = evds[0];
        ep->request_evd = evds[1];
        ep->connect_evd = evds[2];
        for (Evd *evd : evds)
            if (evd)
                evd->users.fetch_add(1);
        register_connect_evd(*ep);
        if (pz)
            pz->users.fetch_add(1);
        bool resize = a.max_recv_dtos != ep->attr.max_recv_dtos || a.max_request_dtos != ep->attr.max_request_dtos;
        ep->attr = a;
        count_notify_streams(*ep, +1);
        if (resize)
            build_pools(*ep);
        return DAT_SUCCESS;
    });
}

DAT_RETURN ep_get_status(DAT_EP_HANDLE ep_handle, DAT_EP_STATE *state, DAT_BOOLEAN *recv_idle,
                         DAT_BOOLEAN *request_idle) {
    Ep *ep;
    if (DAT_RETURN r = handle_cast(ep_handle, ep))
        return r;
    if (state)
        *state = ep->state.load();
    if (recv_idle)
        *recv_idle = ep->recvs_posted.load() == 0 ? DAT_TRUE : DAT_FALSE;
    if (request_idle)
        *request_idle = ep->requests_posted.load() == 0 ? DAT_TRUE : DAT_FALSE;
    return DAT_SUCCESS;
}

DAT_RETURN ep_free(DAT_EP_HANDLE ep_handle) {
    return guarded("dat_ep_free", [&]() -> DAT_RETURN {
        Ep *ep;
        if (DAT_RETURN r = handle_cast(ep_handle, ep))
            return r;
        {
            std::lock_guard<std::mutex> lock(ep->mu);
            switch (ep->state.load()) {
            case DAT_EP_STATE_RESERVED:
                return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_RESERVED);
            case DAT_EP_STATE_PASSIVE_CONNECTION_PENDING:
                return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_PASSCONNPENDING);
            case DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING:
                return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_TENTCONNPENDING);
            default:
                break;
            }
            // From here on the CM thread ignores this EP's events.
            ep->state.store(DAT_EP_STATE_DISCONNECTED);
        }
        ep_release_all(*ep);
        return DAT_SUCCESS;
    });
}

DAT_RETURN ep_reset(DAT_EP_HANDLE ep_handle) {
    return guarded("dat_ep_reset", [&]() -> DAT_RETURN {
        Ep *ep;
        if (DAT_RETURN r = handle_cast(ep_handle, ep))
            return r;
        {
            std::lock_guard<std::mutex> lock(ep->mu);
            DAT_EP_STATE s = ep->state.load();
            if (s == DAT_EP_STATE_UNCONNECTED)
                return DAT_SUCCESS;
            if (s != DAT_EP_STATE_DISCONNECTED)
                return DAT_ERROR(DAT_INVALID_STATE, 0);
        }
        // Never call the transport with ep.mu held: its CM thread takes its
        // own lock first, then ep.mu.
        ep->ia->transport->ep_reset(*ep);
        ep_drain_completions(*ep);
        reclaim_records(*ep);
        std::lock_guard<std::mutex> lock(ep->mu);
        std::memset(&ep->remote, 0, sizeof ep->remote);
        ep->remote_port = 0;
        ep->state.store(DAT_EP_STATE_UNCONNECTED);
        return DAT_SUCCESS;
    });
}

// dat_ep_recv_query and dat_ep_set_watermark: core/srq.cpp (receive-side accounting).

DAT_RETURN ep_post_send(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                        DAT_COMPLETION_FLAGS flags) {
    return guarded("dat_ep_post_send", [&] { return post_dto<PostKind::kSend>(ep, n, iov, cookie, nullptr, flags); });
}

DAT_RETURN ep_post_recv(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                        DAT_COMPLETION_FLAGS flags) {
    return guarded("dat_ep_post_recv", [&] { return post_dto<PostKind::kRecv>(ep, n, iov, cookie, nullptr, flags); });
}

DAT_RETURN ep_post_rdma_read(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                             const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags) {
    return guarded("dat_ep_post_rdma_read",
                   [&] { return post_dto<PostKind::kRdmaRead>(ep, n, iov, cookie, remote, flags); });
}

DAT_RETURN ep_post_rdma_write(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                              const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags) {
    return guarded("dat_ep_post_rdma_write",
                   [&] { return post_dto<PostKind::kRdmaWrite>(ep, n, iov, cookie, remote, flags); });
}

} // namespace slot
} // namespace dat2::kit
