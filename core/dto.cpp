// SPDX-License-Identifier: BSD-3-Clause
// DTO records and the order of their completions: the post path of
// dat_ep_post_send/recv/rdma_read/rdma_write (checks, LMR triplets, records,
// the transport's post), receives held until the transport can take them,
// completions turned into events in the order DAT promises (requests in
// posting order, suppressed successes silent), and flushes.
#include "dto.hpp"

#include "boundary.hpp"
#include "consume.hpp"
#include "ep.hpp"
#include "lmr.hpp"
#include "slots.hpp"
#include "srq.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

namespace dat2::kit {

using detail::done_locked;
using detail::fill_event;
using detail::recycle;
using detail::recycle_locked;

// ---- records ------------------------------------------------------------------

// (Re)builds the DTO record pools; no DTO may be outstanding.
void ep_build_records(Ep &ep) {
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
    const auto requests = static_cast<std::size_t>(std::max<DAT_COUNT>(1, ep.attr.max_request_dtos));
    ep.req_held.assign(ring_length(requests), nullptr);
    ep.req_ops.assign(ep.req_held.size(), nullptr);
    ep.req_report_rseq = ep.req_next_rseq;
    ep.requests_failed = false;
    if (ep.ia->caps.recvs_out_of_order)
        ep.recv_held.assign(ring_length(static_cast<std::size_t>(std::max<DAT_COUNT>(1, ep.attr.max_recv_dtos))),
                            nullptr);
    ep.recv_report_rseq = ep.recv_next_rseq;
}

void op_recycle_locked(Op &op) { recycle_locked(op); }

void op_recycle(Op &op) { recycle(op); }

namespace {

// Inline in post_dto, for the same reason as recycle().
__attribute__((always_inline)) inline Op *op_take(Ep &ep, bool recv) {
    std::lock_guard<Lock> lock(ep.ops_mu);
    Op *&head = recv ? ep.free_recvs : ep.free_requests;
    Op *op = head;
    if (!op)
        return nullptr;
    head = op->next_free;
    (recv ? ep.recvs_posted : ep.requests_posted).fetch_add(1, std::memory_order_relaxed);
    if (!recv) {
        op->rseq = ep.req_next_rseq++;
        __atomic_store_n(&ep.req_ops[op->rseq & (ep.req_ops.size() - 1)], op, __ATOMIC_RELEASE);
    } else {
        op->rseq = ep.recv_next_rseq++;
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

// Takes back every record: nothing of this EP can complete any more.
void ep_reclaim_records(Ep &ep) {
    {
        // A receive posted as the connection ended may be held here.
        std::lock_guard<Lock> lock(ep.pending_mu);
        ep.pending_recvs.clear();
    }
    {
        std::lock_guard<Lock> lock(ep.flush_mu);
        ep.connection_flushed = false;
    }
    if (!ep.recv_held.empty() && ep.recv_evd) {
        // Under the lock its readers hold: a late completion of this EP may
        // still be read from a shared EVD.
        std::lock_guard<Lock> evd_lock(ep.recv_evd->mu);
        std::fill(ep.recv_held.begin(), ep.recv_held.end(), nullptr);
        ep.recv_report_rseq = ep.recv_next_rseq;
    }
    std::lock_guard<Lock> lock(ep.ops_mu);
    for (Op &op : ep.ops)
        if (op.state.load() == Op::kFlushed || op.state.load() == Op::kHeld)
            op_recycle_locked(op);
    std::fill(ep.req_held.begin(), ep.req_held.end(), nullptr);
    ep.req_report_rseq = ep.req_next_rseq;
    ep.requests_failed = false;
}

// ---- receives before the transport can take them ---------------------------------

namespace {

// Keeps a receive until ep_transport_ready(); false when the transport has
// become ready meanwhile (the caller posts it).
bool hold_receive(Ep &ep, Op &op, const Segment *segs, int nsegs) {
    std::lock_guard<Lock> lock(ep.pending_mu);
    if (ep.transport_ready.load(std::memory_order_relaxed))
        return false;
    ep.pending_recvs.push_back({&op, std::vector<Segment>(segs, segs + nsegs)});
    return true;
}

} // namespace

void ep_transport_ready(Ep &ep) {
    std::lock_guard<Lock> lock(ep.pending_mu);
    for (Ep::PendingRecv &p : ep.pending_recvs) {
        // Held after the connection's end cleared the list, and flushed.
        if (p.op->state.load(std::memory_order_acquire) != Op::kPosted)
            continue;
        // A receive the transport refuses now stays posted in the kit's
        // books and is flushed with the connection.
        if (DAT_RETURN r = ep.ia->transport->post_recv(ep, *p.op, p.segs.data(), static_cast<int>(p.segs.size()),
                                                       DAT_COMPLETION_DEFAULT_FLAG)) {
            DAT2_ERR("%s: EP %p: a receive posted before the connection was refused: 0x%x\n", ep.ia->name.c_str(),
                     (void *)&ep, r);
            if (!ep.recv_held.empty() && ep.recv_evd)
                recv_turn_passes(*ep.recv_evd, *p.op); // no message can come to it
        }
    }
    ep.pending_recvs.clear();
    ep.transport_ready.store(true, std::memory_order_release);
}

// ---- the post path ------------------------------------------------------------------

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

// A receive posted once its connection has ended is flushed after the
// EP's others: here if the connection's flush pass is over (it holds
// flush_mu, and marks the connection flushed), else by that pass, which
// finds it kPosted (the transport never sees it).
__attribute__((noinline, cold)) DAT_RETURN flush_after_the_rest(Ep &ep, Op &op) {
    std::lock_guard<Lock> lock(ep.flush_mu);
    std::uint8_t expected = Op::kPosted;
    if (ep.connection_flushed && op.state.compare_exchange_strong(expected, Op::kFlushed))
        flushed_now(ep, op);
    return DAT_SUCCESS;
}

// An RDMA Read's local segments cut to the `want` bytes it reads (no more
// than `total`, theirs): the front ones whole, one in part, none after.
__attribute__((cold)) void trim_segments(Segment *segs, int &nsegs, std::uint64_t &total, std::uint64_t want) {
    if (want == total)
        return;
    std::uint64_t left = want;
    int n = 0;
    while (n < nsegs && left > 0) {
        if (segs[n].length > left)
            segs[n].length = static_cast<std::size_t>(left);
        left -= segs[n].length;
        ++n;
    }
    nsegs = n;
    total = want;
}

// The connection ended between post_dto's first look at the state and its
// record turning kPosted. A receive, and a request once the EP is
// Disconnected, are flushed as if posted after (a request's flush takes
// its turn in the posting order); a request in Disconnect Pending is
// refused as it would be then.
__attribute__((noinline, cold)) DAT_RETURN post_overtaken(Ep &ep, Evd &evd, Op &op, DAT_EP_STATE now) {
    if (op.is_recv)
        return flush_after_the_rest(ep, op);
    std::uint8_t expected = Op::kPosted;
    if (!op.state.compare_exchange_strong(expected, Op::kHeld))
        return DAT_SUCCESS; // the pass has flushed it
    if (now == DAT_EP_STATE_DISCONNECTED) {
        evd_request_done(evd, op, DAT_DTO_ERR_FLUSHED, false, false);
        return DAT_SUCCESS;
    }
    evd_request_done(evd, op, DAT_DTO_SUCCESS, true, false);
    return DAT_ERROR(DAT_INVALID_STATE, now == DAT_EP_STATE_DISCONNECT_PENDING ? DAT_INVALID_STATE_EP_DISCPENDING
                                                                               : DAT_INVALID_STATE_EP_NOTREADY);
}

// One instance per kind of DTO: the checks that depend on the kind fold
// away at compile time.
template <PostKind kind>
__attribute__((always_inline)) inline DAT_RETURN post_dto(DAT_EP_HANDLE ep_handle, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                                          DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote,
                                                          DAT_COMPLETION_FLAGS flags, const ExtPost *ext = nullptr) {
    Ep *ep;
    if (DAT_RETURN r = handle_cast(ep_handle, ep))
        return r;
    const bool recv = kind == PostKind::kRecv;
    if (recv && ep->srq)
        return DAT_ERROR(DAT_INVALID_STATE, 0); // dat_ep_create_with_srq(3DAT): receives go to the SRQ
    DAT_COUNT max_iov = recv                          ? ep->attr.max_recv_iov
                        : kind == PostKind::kSend     ? ep->attr.max_request_iov
                        : kind == PostKind::kRdmaRead ? ep->attr.max_rdma_read_iov
                                                      : ep->attr.max_rdma_write_iov;
    if (n < 0 || n > max_iov)
        return invalid_arg(2);
    if (n > 0 && !iov)
        return invalid_arg(3);
    const int flags_arg = (kind == PostKind::kSend || recv) ? 5 : 6;
    if ((flags & ~kValidCompletionFlags) || (recv && (flags & kNotForReceives)))
        return invalid_arg(flags_arg);
    // dat_ep_post_send(3DAT) and the others: "The value of
    // DAT_COMPLETION_UNSIGNALLED_FLAG is only valid if the Endpoint Request
    // [Recv] Completion Flags DAT_COMPLETION_UNSIGNALLED_FLAG."
    if ((flags & DAT_COMPLETION_UNSIGNALLED_FLAG) &&
        !((recv ? ep->attr.recv_completion_flags : ep->attr.request_completion_flags) &
          DAT_COMPLETION_UNSIGNALLED_FLAG)) {
        DAT2_LOG(log::kGeneric,
                 "EP %p: DAT_COMPLETION_UNSIGNALLED_FLAG on a %s, but the EP's %s completion flags "
                 "do not allow it\n",
                 (void *)ep, recv ? "receive" : "request", recv ? "recv" : "request");
        return invalid_arg(flags_arg);
    }
    if (!recv && kind != PostKind::kSend && !remote)
        return invalid_arg(5);
    DAT_EP_STATE state = ep->state.load(std::memory_order_acquire);
    if (!recv && state != DAT_EP_STATE_CONNECTED && state != DAT_EP_STATE_DISCONNECTED)
        return DAT_ERROR(DAT_INVALID_STATE, state == DAT_EP_STATE_DISCONNECT_PENDING ? DAT_INVALID_STATE_EP_DISCPENDING
                                                                                     : DAT_INVALID_STATE_EP_NOTREADY);
    Evd *evd = recv ? ep->recv_evd : ep->request_evd;
    if (!evd)
        return DAT_ERROR(DAT_INVALID_STATE, recv ? DAT_INVALID_STATE_EP_EVD_RECV : DAT_INVALID_STATE_EP_EVD_REQUEST);
    const DAT_MEM_PRIV_FLAGS need =
        (recv || kind == PostKind::kRdmaRead) ? DAT_MEM_PRIV_LOCAL_WRITE_FLAG : DAT_MEM_PRIV_LOCAL_READ_FLAG;
    Segment segs[kMaxIov];
    int nsegs = 0;
    std::uint64_t total = 0;
    if (DAT_RETURN r = resolve_segments(*ep->ia, ep->pz, iov, n, need, segs, nsegs, total))
        return r;
    // A receive may offer more room than any message needs; a send may not
    // exceed what the EP was created for (0: no limit was given).
    if (kind == PostKind::kSend && ep->attr.max_message_size && total > ep->attr.max_message_size)
        return DAT_ERROR(DAT_LENGTH_ERROR, 0);
    // dat_ep_post_rdma_write(3DAT): all of the local data goes, so the remote
    // buffer must hold it. dat_ep_post_rdma_read(3DAT): all of the remote
    // data comes, into the local segments in order ("only one segment is
    // partially filled"), so they must hold it; those past it are not used.
    // An atomic (a read with `ext`) takes one word of its remote buffer.
    if ((kind == PostKind::kRdmaWrite || (kind == PostKind::kRdmaRead && ext)) && total > remote->segment_length)
        return DAT_ERROR(DAT_LENGTH_ERROR, 0);
    if (kind == PostKind::kRdmaRead && !ext) {
        if (remote->segment_length > total)
            return DAT_ERROR(DAT_LENGTH_ERROR, 0);
        trim_segments(segs, nsegs, total, remote->segment_length);
    }
    const Capabilities &caps = ep->ia->caps;
    if ((flags & DAT_COMPLETION_BARRIER_FENCE_FLAG) && !recv && !caps.fence && state == DAT_EP_STATE_CONNECTED)
        if (DAT_RETURN r = wait_for_reads(*ep))
            return r;
    // Requests of a transport that completes them in order keep the order
    // of their posting sequence in its queue (Capabilities::requests_in_order),
    // and receives whose completions the kit puts in order theirs
    // (Capabilities::recvs_out_of_order: the provider matches messages to
    // receives in the order it gets them).
    struct OrderLock {
        Lock *mu;
        ~OrderLock() {
            if (mu)
                mu->unlock();
        }
    } order_lock{(recv ? caps.recvs_out_of_order : caps.requests_in_order) ? &ep->post_mu : nullptr};
    if (order_lock.mu)
        order_lock.mu->lock();
    Op *op = op_take(*ep, recv);
    if (!op && !(op = ep_take_op(*ep, *evd, recv)))
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
    if (kind == PostKind::kRdmaRead)
        ep->reads_posted.fetch_add(1, std::memory_order_relaxed);
    op->suppress = (flags & DAT_COMPLETION_SUPPRESS_FLAG) != 0;
    op->operation = recv                          ? DAT_DTO_RECEIVE
                    : kind == PostKind::kSend     ? DAT_DTO_SEND
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
    if (state == DAT_EP_STATE_DISCONNECTED) {
        // dat_ep_post_send(3DAT) and the others: allowed, and flushed at once.
        op->state.store(recv ? Op::kPosted : Op::kFlushed, std::memory_order_release);
        if (recv)
            return flush_after_the_rest(*ep, *op);
        flushed_now(*ep, *op);
        return DAT_SUCCESS;
    }
    // Both sequentially consistent: the end of a connection stores the state
    // before ep_flush_outstanding reads the records, so either that pass
    // finds this record kPosted or this load finds the new state.
    op->state.store(Op::kPosted, std::memory_order_seq_cst);
    const DAT_EP_STATE now = ep->state.load(std::memory_order_seq_cst);
    if (__builtin_expect(recv ? now == DAT_EP_STATE_DISCONNECTED : now != DAT_EP_STATE_CONNECTED, 0))
        return post_overtaken(*ep, *evd, *op, now);
    DAT_RETURN r = DAT_SUCCESS;
    if (!recv || ep->transport_ready.load(std::memory_order_acquire) || !hold_receive(*ep, *op, segs, nsegs))
        r = recv  ? ep->ia->transport->post_recv(*ep, *op, segs, nsegs, flags)
            : ext ? ep->ia->transport->post_ext(*ep, *op, segs, nsegs, *remote, flags)
                  : ep->ia->transport->post(*ep, kind, *op, segs, nsegs, remote, flags);
    if (r != DAT_SUCCESS) {
        // The post failed: the record goes back (its turn in the posting
        // order passes without an event).
        const bool recv_in_order = recv && !ep->recv_held.empty();
        std::uint8_t expected = Op::kPosted;
        if (!op->state.compare_exchange_strong(expected, recv && !recv_in_order ? Op::kFree : Op::kHeld))
            return DAT_SUCCESS; // the connection ended meanwhile and flushed it: that is its completion
        if (recv_in_order)
            recv_turn_passes(*evd, *op);
        else if (recv)
            op_recycle(*op);
        else
            evd_request_done(*evd, *op, DAT_DTO_SUCCESS, true, false);
    } else if (recv && ep_watermarks_armed(*ep)) {
        ep_check_watermarks(*ep, false);
    }
    return r;
}

} // namespace

DAT_RETURN ep_post(DAT_EP_HANDLE ep, PostKind kind, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                   const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags, const ExtPost *ext) {
    switch (kind) {
    case PostKind::kSend: return post_dto<PostKind::kSend>(ep, n, iov, cookie, remote, flags, ext);
    case PostKind::kRecv: return post_dto<PostKind::kRecv>(ep, n, iov, cookie, remote, flags, ext);
    case PostKind::kRdmaRead: return post_dto<PostKind::kRdmaRead>(ep, n, iov, cookie, remote, flags, ext);
    case PostKind::kRdmaWrite: return post_dto<PostKind::kRdmaWrite>(ep, n, iov, cookie, remote, flags, ext);
    }
    return DAT_ERROR(DAT_INTERNAL_ERROR, 0);
}

DAT_RETURN ep_fence_reads(Ep &ep) { return wait_for_reads(ep); }

static void with_evds(Ep &ep, void (*fn)(Evd &)) {
    Evd *list[2] = {ep.request_evd, ep.recv_evd != ep.request_evd ? ep.recv_evd : nullptr};
    for (Evd *evd : list)
        if (evd)
            fn(*evd);
}

bool ep_may_have_completions(Ep &ep) {
    if (ep.srq)
        return true; // its receives are the SRQ's, counted there
    // A record stays counted from its post until its completion has been
    // taken from the transport's queue (or, flushed, until the transport's
    // late one has): none counted, none queued.
    std::lock_guard<Lock> lock(ep.ops_mu);
    return ep.recvs_posted.load(std::memory_order_relaxed) != 0 ||
           ep.requests_posted.load(std::memory_order_relaxed) != 0;
}

static void drain_evds(Ep &ep) {
    with_evds(ep, [](Evd &evd) {
        {
            std::lock_guard<Lock> lock(evd.mu);
            evd_drain_all_locked(evd);
        }
        // What moved out of the queue no longer wakes anyone by itself.
        evd_wake(evd);
    });
}

void ep_drain_completions(Ep &ep) {
    // Reading a queue that EVD shares with every other EP costs what the
    // transport's progress costs, which over libfabric tcp walks every
    // endpoint bound to the queue: an EP that has nothing outstanding skips
    // it, so that disconnecting or freeing an idle EP does not cost more
    // because others exist.
    if (ep_may_have_completions(ep) || ep.ia->transport->own_completions_queued(ep))
        drain_evds(ep);
}

void ep_await_writers(Ep &ep) {
    Transport &t = *ep.ia->transport;
    std::size_t left = t.ops_writing_memory(ep);
    if (left == 0)
        return;
    // A matched message or a read being served completes within the
    // peer's next progress round; a peer that stopped progressing (alive
    // but not reading its queues) must not hold a disconnect or a
    // dat_ep_free for longer than this.
    constexpr auto kWritersGrace = std::chrono::seconds(2);
    const auto deadline = std::chrono::steady_clock::now() + kWritersGrace;
    for (;;) {
        // Unconditional (not ep_drain_completions): a cancelled receive's
        // completion must be read even when no record counts as posted.
        drain_evds(ep);
        left = t.ops_writing_memory(ep);
        if (left == 0)
            return;
        if (std::chrono::steady_clock::now() >= deadline)
            break;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    DAT2_ERR("EP %p: %zu operation(s) may still write into the consumer's memory %lld ms after the connection "
             "ended or the EP was closed (the peer does not progress): reported flushed anyway\n",
             static_cast<void *>(&ep), left,
             static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(kWritersGrace).count()));
}

namespace {
bool is_remote_operation(const Op &op) {
    return op.operation == DAT_DTO_RDMA_READ || op.operation == DAT_DTO_RDMA_WRITE ||
           op.ext == ExtKind::kRdmaWriteImmed || op.ext == ExtKind::kFetchAdd || op.ext == ExtKind::kCmpSwap;
}
} // namespace

void ep_flush_outstanding(Ep &ep, bool remote_refused) {
    {
        // Receives the transport never had are flushed with the rest below.
        std::lock_guard<Lock> lock(ep.pending_mu);
        ep.pending_recvs.clear();
    }
    std::lock_guard<Lock> flush_lock(ep.flush_mu);
    std::vector<Op *> pending;
    for (Op &op : ep.ops) {
        std::uint8_t expected = Op::kPosted;
        // Sequentially consistent with post_dto's store of kPosted and its
        // second look at the state.
        if (op.state.compare_exchange_strong(expected, Op::kFlushed, std::memory_order_seq_cst))
            pending.push_back(&op);
        // A receive completed behind one that had not: flushed with it
        // (dat_ep_disconnect(3DAT): the follow-on DTOs of one that completes
        // unsuccessfully do too). Its record stays until the EP is reset.
        else if (op.is_recv && !op.srq && expected == Op::kHeld && !op.held_silent &&
                 op.state.compare_exchange_strong(expected, Op::kFlushed, std::memory_order_seq_cst))
            pending.push_back(&op);
        // One the transport refused, waiting for its turn to pass: back, silently.
        else if (op.is_recv && !op.srq && expected == Op::kHeld && op.held_silent &&
                 op.state.compare_exchange_strong(expected, Op::kFree, std::memory_order_seq_cst))
            op_recycle(op);
    }
    std::sort(pending.begin(), pending.end(), [](const Op *a, const Op *b) { return a->seq < b->seq; });
    for (Op *op : pending) {
        Evd *evd = op->is_recv ? ep.recv_evd : ep.request_evd;
        if (evd && !op->is_recv) {
            // dat_rmr_free(3DAT), dat_lmr_free(3DAT): a remote operation the
            // peer refused reports DAT_DTO_ERR_REMOTE_ACCESS, and the
            // connection is broken.
            DAT_DTO_COMPLETION_STATUS status = DAT_DTO_ERR_FLUSHED;
            if (remote_refused && is_remote_operation(*op)) {
                status = DAT_DTO_ERR_REMOTE_ACCESS;
                remote_refused = false;
            }
            // In posting order, releasing the requests completed behind it.
            evd_request_done(*evd, *op, status, false, true);
        } else if (evd) {
            DAT_EVENT e = dto_event(*op, DAT_DTO_ERR_FLUSHED, 0);
            evd_push(*evd, e);
        }
        // The record stays kFlushed until the transport's own completion for
        // it shows up (dropped then) or the EP is reset or freed.
    }
    ep.connection_flushed = true;
    if (ep.srq)
        srq_ep_flushed(ep);
}

// ---- completions in DAT's order ------------------------------------------------------

void request_done_locked(Evd &evd, Op &op, DAT_DTO_COMPLETION_STATUS status, std::uint32_t length, bool silent,
                         bool flushing) {
    done_locked(evd, op, status, length, silent, flushing);
}

namespace detail {

// `x`, a request of a transport that completes requests in order, has
// completed: the requests of its EP posted before it (Ep::post_mu made
// that the queue's order) and still posted went out without a completion
// of their own, and succeeded. Reported in order (silently: they were
// suppressed), up to the first that is something else. While nothing
// failed and none of them has a held request behind it, their records go
// back in one take of ops_mu: a consumer that suppresses its sends has one
// of these for nearly every completion it reads.
void hold_recv_locked(Op &op, const Completion &c) {
    std::uint8_t expected = Op::kPosted;
    if (!op.state.compare_exchange_strong(expected, Op::kHeld, std::memory_order_acq_rel)) {
        op_recycle(op); // flushed by a disconnect: drop the late one
        return;
    }
    op.held_silent = false;
    op.held_status = c.status;
    op.held_length = c.length;
    op.held_invalidate = c.invalidate;
    op.held_rmr_context = c.rmr_context;
    op.held_immed = static_cast<std::uint8_t>(c.immed);
    op.held_immed_data = c.immed_data;
    Ep &ep = *op.ep;
    ep.recv_held[op.rseq & (ep.recv_held.size() - 1)] = &op;
}

// Up to the first receive still outstanding, or flushed meanwhile (the
// flush reports it and those after it).
void release_held_recvs_locked(Evd &evd, Ep &ep) {
    const std::size_t n = ep.recv_held.size();
    for (;; ++ep.recv_report_rseq) {
        Op *&slot = ep.recv_held[ep.recv_report_rseq & (n - 1)];
        Op *h = slot;
        if (!h || h->rseq != ep.recv_report_rseq)
            break;
        slot = nullptr;
        std::uint8_t held = Op::kHeld;
        if (h->held_silent) {
            // A receive the transport refused (recv_turn_passes): no event.
            if (h->state.compare_exchange_strong(held, Op::kFree, std::memory_order_acq_rel))
                op_recycle(*h);
            continue;
        }
        if (!h->state.compare_exchange_strong(held, Op::kFree, std::memory_order_acq_rel))
            break;
        Completion hc{};
        hc.op = h;
        hc.status = h->held_status;
        hc.length = h->held_length;
        hc.invalidate = h->held_invalidate;
        hc.rmr_context = h->held_rmr_context;
        hc.immed = static_cast<Completion::Immed>(h->held_immed);
        hc.immed_data = h->held_immed_data;
        detail::report_recv_locked(evd, *h, hc);
    }
}

} // namespace detail

void recv_turn_passes(Evd &evd, Op &op) {
    std::lock_guard<Lock> lock(evd.mu);
    Ep &ep = *op.ep;
    op.held_silent = true;
    if (op.rseq != ep.recv_report_rseq) {
        ep.recv_held[op.rseq & (ep.recv_held.size() - 1)] = &op; // passes when its turn comes
        return;
    }
    std::uint8_t held = Op::kHeld;
    if (op.state.compare_exchange_strong(held, Op::kFree, std::memory_order_acq_rel))
        op_recycle(op);
    if (ep.recv_held[++ep.recv_report_rseq & (ep.recv_held.size() - 1)])
        detail::release_held_recvs_locked(evd, ep);
}

namespace detail {

void report_implied_locked(Evd &evd, const Op &x) {
    Ep &ep = *x.ep;
    const std::size_t n = ep.req_ops.size();
    Op *chain = nullptr;
    int chained = 0;
    while (ep.req_report_rseq != x.rseq) {
        Op *op = __atomic_load_n(&ep.req_ops[ep.req_report_rseq & (n - 1)], __ATOMIC_ACQUIRE);
        if (!op || op->rseq != ep.req_report_rseq || !completes_implicitly(*op))
            break;
        std::uint8_t expected = Op::kPosted;
        if (!op->state.compare_exchange_strong(expected, Op::kHeld, std::memory_order_acq_rel))
            break;
        const std::uint64_t next = ep.req_report_rseq + 1;
        const Op *behind = ep.req_held[next & (n - 1)];
        if (ep.requests_failed || (behind && behind->rseq == next)) {
            done_locked(evd, *op, DAT_DTO_SUCCESS, 0, false, false);
            continue;
        }
        // done_locked's work for a suppressed success with nothing held
        // behind it: no event, the next turn, the record back (below).
        ep.req_report_rseq = next;
        op->next_free = chain;
        chain = op;
        ++chained;
    }
    if (!chain)
        return;
    std::lock_guard<Lock> lock(ep.ops_mu);
    while (chain) {
        Op *op = chain;
        chain = op->next_free;
        op->state.store(Op::kFree, std::memory_order_relaxed);
        op->next_free = ep.free_requests;
        ep.free_requests = op;
    }
    ep.requests_posted.fetch_sub(chained, std::memory_order_relaxed);
}

} // namespace detail

void dto_consume_locked(Evd &evd, const Completion *c, int n) { detail::consume_locked(evd, c, n); }

DAT_EVENT dto_event(const Op &op, DAT_DTO_COMPLETION_STATUS status, std::uint32_t length) {
    DAT_EVENT e;
    fill_dto_event(e, op, status, length);
    return e;
}

void fill_dto_event(DAT_EVENT &e, const Op &op, DAT_DTO_COMPLETION_STATUS status, std::uint32_t length) {
    fill_event(e, op, status, length);
}

namespace slot {

DAT_RETURN ep_post_send(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                        DAT_COMPLETION_FLAGS flags) {
    return guarded("dat_ep_post_send", [&]() __attribute__((always_inline)) {
        return post_dto<PostKind::kSend>(ep, n, iov, cookie, nullptr, flags);
    });
}

DAT_RETURN ep_post_recv(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                        DAT_COMPLETION_FLAGS flags) {
    return guarded("dat_ep_post_recv", [&]() __attribute__((always_inline)) {
        return post_dto<PostKind::kRecv>(ep, n, iov, cookie, nullptr, flags);
    });
}

DAT_RETURN ep_post_rdma_read(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                             const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags) {
    return guarded("dat_ep_post_rdma_read",
                   [&]() __attribute__((always_inline)) {
                       return post_dto<PostKind::kRdmaRead>(ep, n, iov, cookie, remote, flags);
                   });
}

DAT_RETURN ep_post_rdma_write(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                              const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags) {
    return guarded("dat_ep_post_rdma_write",
                   [&]() __attribute__((always_inline)) {
                       return post_dto<PostKind::kRdmaWrite>(ep, n, iov, cookie, remote, flags);
                   });
}

} // namespace slot
} // namespace dat2::kit
