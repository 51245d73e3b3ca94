// SPDX-License-Identifier: BSD-3-Clause
// Completion queues behind the RDM transport's DTO EVDs, and what their
// completions mean to the kit.
#include "rdm.hpp"

#include "log.hpp"

#include <algorithm>

#include <sys/epoll.h>
#include <unistd.h>

namespace dat2::ofi {

namespace {
RdmEvdQueues &queues(kit::Evd &evd) { return *static_cast<RdmEvdQueues *>(evd.cq); }
std::size_t cq_size(const kit::Evd &evd) { return std::max<std::size_t>(static_cast<std::size_t>(evd.qlen) * 2, 1024); }
} // namespace

fid_cq *RdmTransport::open_cq(RdmDomain &dom, std::size_t size, int &fd) {
    fi_cq_attr attr{};
    attr.size = size;
    attr.format = FI_CQ_FORMAT_TAGGED;
    // A wait fd where the provider has one (rxm, rxd): dat_evd_wait sleeps on
    // it. shm has none (its queues can only spin): the loop wakes the EVD.
    attr.wait_obj = FI_WAIT_FD;
    fid_cq *cq = nullptr;
    int rc = fi_cq_open(dom.domain, &attr, &cq, nullptr);
    if (rc) {
        attr.wait_obj = FI_WAIT_NONE;
        rc = fi_cq_open(dom.domain, &attr, &cq, nullptr);
    }
    if (rc) {
        DAT2_ERR("%s: fi_cq_open(size %zu): %s\n", name(), attr.size, fi_text(rc));
        return nullptr;
    }
    fd = -1;
    if (attr.wait_obj == FI_WAIT_FD && fi_control(&cq->fid, FI_GETWAIT, &fd) != 0)
        fd = -1;
    return cq;
}

// The EVD's first queue is in the IA's first domain (the first PZ's): the
// common case grows nothing later.
DAT_RETURN RdmTransport::cq_open(kit::Evd &evd, void *&out) {
    auto qs = std::make_unique<RdmEvdQueues>();
    auto q = std::make_unique<RdmCq>();
    RdmDomain *first;
    {
        std::lock_guard<std::mutex> lock(dom_mu_);
        first = domains_.front().get();
    }
    q->cq = open_cq(*first, cq_size(evd), q->fd);
    if (!q->cq)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    q->dom = first;
    q->evd = &evd;
    q->owner = qs.get();
    watch_queue(*q);
    qs->parts[0] = q.release();
    qs->wait_fd.store(qs->parts[0]->fd, std::memory_order_relaxed);
    qs->count.store(1, std::memory_order_release);
    out = qs.release();
    return DAT_SUCCESS;
}

RdmCq *RdmTransport::cq_part(kit::Evd *evd, RdmDomain &dom, bool &grown) {
    if (!evd || !evd->cq)
        return nullptr;
    std::lock_guard<std::mutex> lock(parts_mu_);
    RdmEvdQueues &qs = queues(*evd);
    const int n = qs.count.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i)
        if (qs.parts[i]->dom == &dom)
            return qs.parts[i];
    if (n == RdmEvdQueues::kMaxParts) {
        DAT2_ERR("%s: EVD %p serves EPs of %d protection zones already, the most it can\n", name(), (void *)evd, n);
        return nullptr;
    }
    auto q = std::make_unique<RdmCq>();
    q->cq = open_cq(dom, cq_size(*evd), q->fd);
    if (!q->cq)
        return nullptr;
    q->dom = &dom;
    q->evd = evd;
    q->owner = &qs;
    watch_queue(*q);
    // dat_evd_wait waits on one fd: with two queues, an epoll set of theirs
    // (none when a queue has no fd: the loop wakes the EVD then).
    bool all_fds = q->fd >= 0;
    for (int i = 0; i < n; ++i)
        all_fds = all_fds && qs.parts[i]->fd >= 0;
    int wait_fd = -1;
    if (all_fds) {
        if (qs.epoll_fd < 0) {
            qs.epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
            for (int i = 0; qs.epoll_fd >= 0 && i < n; ++i) {
                epoll_event ev{};
                ev.events = EPOLLIN;
                ::epoll_ctl(qs.epoll_fd, EPOLL_CTL_ADD, qs.parts[i]->fd, &ev);
            }
        }
        if (qs.epoll_fd >= 0) {
            epoll_event ev{};
            ev.events = EPOLLIN;
            ::epoll_ctl(qs.epoll_fd, EPOLL_CTL_ADD, q->fd, &ev);
        }
        wait_fd = qs.epoll_fd;
    }
    qs.parts[n] = q.release();
    qs.count.store(n + 1, std::memory_order_release);
    qs.wait_fd.store(wait_fd, std::memory_order_release);
    grown = true;
    return qs.parts[n];
}

void RdmTransport::cq_close(kit::Evd &evd) {
    if (!evd.cq)
        return;
    RdmEvdQueues *qs = &queues(evd);
    // No EP uses the EVD any more (the kit counts them): the libfabric
    // endpoints bound to its queues go first.
    close_fabric_eps_of(evd);
    loop().sync(); // a progress round that found them has ended
    const int n = qs->count.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i) {
        if (qs->parts[i]->watch)
            loop().unwatch(qs->parts[i]->watch);
        fi_close(&qs->parts[i]->cq->fid);
        delete qs->parts[i];
    }
    if (qs->epoll_fd >= 0)
        ::close(qs->epoll_fd);
    delete qs;
}

int RdmTransport::cq_read(kit::Evd &evd, kit::Completion *out, int max) {
    RdmEvdQueues &qs = queues(evd);
    const int parts = qs.count.load(std::memory_order_acquire);
    int n = read_queue_inline(*qs.parts[0], out, max);
    for (int i = 1; i < parts && n < max; ++i)
        n += read_queue(*qs.parts[i], out + n, max - n);
    if (n > 0) {
        qs.spinning = false;
        qs.reads.store(qs.reads.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); // under Evd::mu
    }
    return n;
}

int RdmTransport::read_queue(RdmCq &q, kit::Completion *out, int max) { return read_queue_inline(q, out, max); }

// read_queue's body, inline in cq_read: every poll of an EVD, empty or
// not, reads its first queue, and the call cost as much as an empty read.
__attribute__((always_inline)) inline int RdmTransport::read_queue_inline(RdmCq &q, kit::Completion *out, int max) {
    fi_cq_tagged_entry entries[32];
    int k = 0;
    while (k < max) {
        const std::size_t want = static_cast<std::size_t>(std::min(max - k, 32));
        ssize_t n = fi_cq_read(q.cq, entries, want);
        if (n > 0) {
            for (ssize_t i = 0; i < n; ++i)
                if (translate(entries[i].op_context, entries[i].flags, entries[i].len, entries[i].data, DAT_DTO_SUCCESS,
                              out[k]))
                    ++k;
            if (static_cast<std::size_t>(n) < want)
                break;
            continue;
        }
        if (n == -FI_EAVAIL) {
            fi_cq_err_entry err{};
            if (fi_cq_readerr(q.cq, &err, 0) != 1)
                break;
            const DAT_DTO_COMPLETION_STATUS status = to_dto_status(err.err);
            if (status != DAT_DTO_ERR_FLUSHED)
                DAT2_LOG(log::kGeneric, "%s: DTO failed: %s\n", name(), fi_text(err.err));
            if (translate(err.op_context, err.flags, err.len, err.data, status, out[k]))
                ++k;
            continue;
        }
        if (n != -FI_EAGAIN)
            DAT2_ERR("%s: fi_cq_read: %s\n", name(), fi_text(static_cast<int>(n)));
        break;
    }
    return k;
}

// Inline: every completion comes through here, and a call costs as much
// as the translation.
__attribute__((always_inline)) inline bool RdmTransport::translate(void *context, std::uint64_t flags, std::size_t len,
                                                                   std::uint64_t data, DAT_DTO_COMPLETION_STATUS status,
                                                                   kit::Completion &out) {
    if (!context)
        return false;
    auto *part = static_cast<RdmCtx::Part *>(context);
    RdmCtx &c = *part->owner;
    RdmCtxBlock *block = c.block;
    if (status != DAT_DTO_SUCCESS && c.status == DAT_DTO_SUCCESS)
        c.status = status;
    if (--c.left > 0) {
        // The other part of a write with immediate data is still out; each
        // part holds a reference to the block (post_write_immed).
        block->release();
        return false;
    }
    status = c.status;
    // Before writes_memory clears: the data is in place then.
    if (__builtin_expect(c.bounce != nullptr, 0))
        finish_bounce(c, len, status);
    if (c.budget) {
        c.budget->release();
        c.budget = nullptr;
    }
    c.recv_posted.store(false, std::memory_order_release); // after the status (a sweep's: sweep_step)
    c.writes_memory.store(false, std::memory_order_release);
    const std::size_t index = static_cast<std::size_t>(&c - block->ctx.get());
    if (index >= block->n) {
        block->release(); // the connection's hello: nothing for the kit
        return false;
    }
    kit::Op *op = block->base + index;
    const bool stale = block->retired.load(std::memory_order_acquire);
    if (!stale && op->is_recv) {
        auto *rep = static_cast<RdmEp *>(op->ep->tp);
        if (status == DAT_DTO_SUCCESS)
            rep->msgs_in.fetch_add(1, std::memory_order_relaxed);
        else if (status != DAT_DTO_ERR_FLUSHED)
            // A receive the provider failed (a message it truncated) ends
            // the connection too, as on InfiniBand: rxm's tcp drops its
            // connection with it, and later messages would be lost unseen.
            break_connection_later(rep->id);
    }
    if (!stale && !op->is_recv) {
        auto *rep = static_cast<RdmEp *>(op->ep->tp);
        if (status != DAT_DTO_SUCCESS)
            // A request that failed ends the connection, as on InfiniBand
            // (the QP goes to the error state): rxm reports a write the
            // target refused as cancelled (tcp dropped its connection and
            // rxm makes a new one); the kit flushes what follows.
            break_connection_later(rep->id);
        rep->requests_out.fetch_sub(1, std::memory_order_relaxed);
        if (op->operation == DAT_DTO_RDMA_WRITE || op->operation == DAT_DTO_RDMA_READ ||
            op->ext != kit::ExtKind::kNone) {
            rep->rma_stamp_ns.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                                    std::memory_order_relaxed);
            rep->rma_out.fetch_sub(1, std::memory_order_relaxed);
        }
    }
    block->release();
    if (stale)
        return false; // the EP was reset or freed: its record is no longer this operation's
    out.op = op;
    out.status = status;
    out.length = static_cast<std::uint32_t>(op->is_recv ? len : op->length);
    if (op->is_recv && len > op->length && status == DAT_DTO_SUCCESS)
        oversized(out); // its tail went to the scratch buffer
    out.invalidate = false;
    out.rmr_context = 0;
    out.immed = kit::Completion::Immed::kNone;
    out.immed_data = 0;
    out.ep = nullptr;
    // Remote CQ data without the tag (a peer of an older build sending with
    // invalidate) is a plain receive: this IA never offers the invalidation.
    if (status == DAT_DTO_SUCCESS && (flags & FI_REMOTE_CQ_DATA) && op->is_recv && (data & kImmedTag)) {
        // The end of a peer's write with immediate data (post_write_immed).
        out.immed = kit::Completion::Immed::kRdmaWrite;
        out.immed_data = static_cast<std::uint32_t>(data);
        out.length = static_cast<std::uint32_t>((data >> 32) & kMaxImmedLength);
    }
    return true;
}

// dat_ep_post_recv(3DAT): a message longer than the receive is the
// receive's DAT_DTO_LENGTH_ERROR.
void RdmTransport::oversized(kit::Completion &out) {
    out.status = DAT_DTO_ERR_LOCAL_LENGTH;
    out.length = out.op->length;
    scratch_written_.store(true, std::memory_order_relaxed);
}

int RdmTransport::cq_fd(kit::Evd &evd) { return queues(evd).wait_fd.load(std::memory_order_acquire); }

void RdmTransport::close_fep(RdmFabricEp &fep, bool enable_called) {
    note_departed(fep);
    if (!enable_called) {
        fep.close(); // rxm adds itself to the queues' wait sets at fi_enable
        return;
    }
    RdmEvdQueues *owners[2] = {fep.tx_q ? fep.tx_q->owner : nullptr, fep.rx_q ? fep.rx_q->owner : nullptr};
    if (owners[1] == owners[0])
        owners[1] = nullptr;
    std::lock_guard<std::mutex> parts_lock(parts_mu_);
    // cq_arm holds one at a time, never with another lock of ours.
    std::unique_lock<std::mutex> locks[2];
    for (int i = 0; i < 2; ++i)
        if (owners[i])
            locks[i] = std::unique_lock<std::mutex>(owners[i]->wait_mu);
    bool dropped = false;
    for (RdmCq *q : {fep.tx_q, fep.rx_q}) {
        if (!q || q->fd < 0)
            continue;
        q->fd = -1;
        q->owner->wait_fd.store(-1, std::memory_order_release);
        dropped = true;
    }
    fep.close();
    // A consumer asleep on the fd that no longer tells it everything: a
    // round now sees it waiting, and looks every millisecond from then on.
    if (dropped)
        loop().post([] {});
}

bool RdmTransport::cq_arm(kit::Evd &evd) {
    RdmEvdQueues &qs = queues(evd);
    const int parts = qs.count.load(std::memory_order_acquire);
    {
        std::lock_guard<std::mutex> lock(qs.wait_mu);
        if (qs.wait_fd.load(std::memory_order_acquire) >= 0) {
            fid *f[RdmEvdQueues::kMaxParts];
            for (int i = 0; i < parts; ++i)
                f[i] = &qs.parts[i]->cq->fid;
            return fi_trywait(fabric_, f, parts) == FI_SUCCESS;
        }
    }
    // No wait fd: poll for a while, then sleep until the loop's round finds
    // completions (it looks every millisecond while someone waits).
    for (int i = 0; i < parts; ++i) {
        fi_cq_tagged_entry none;
        if (fi_cq_read(qs.parts[i]->cq, &none, 0) != -FI_EAGAIN)
            return false;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!qs.spinning) {
        qs.spinning = true;
        qs.spin_until = now + std::chrono::microseconds(100);
        return false;
    }
    if (now < qs.spin_until)
        return false;
    qs.spinning = false;
    loop().post([] {}); // a round now: it sees the waiter and looks every millisecond
    return true;
}

// An EVD now feeds a CNO: a round now, which sees it, rather than after the
// wait of a quiet loop (up to kMaxRoundMs).
void RdmTransport::cq_cno_changed(kit::Evd &evd) {
    if (evd.feeds_cno.load(std::memory_order_relaxed))
        loop().post([] {});
}

} // namespace dat2::ofi
