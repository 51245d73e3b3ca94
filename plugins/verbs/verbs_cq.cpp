// SPDX-License-Identifier: BSD-3-Clause
// Completion queues behind DTO EVDs, and what their completions mean to
// the kit.
//
// Blocking: every CQ has its own completion channel, whose fd the kit
// polls in dat_evd_wait and dat_cno_wait (cq_fd). cq_arm() takes the
// pending notification, re-arms the CQ and then polls it once more, since
// a completion that arrived between the kit's last empty read and the
// re-arm raises no notification; what that poll finds is kept in a small
// stash that cq_read() hands out first.
#include "verbs.hpp"

#include "log.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/epoll.h>

namespace dat2::verbs {

namespace {
VerbsCq &cq_ref(kit::Evd &evd) { return *static_cast<VerbsCq *>(evd.cq); }
constexpr int kPollBatch = 32;
} // namespace

DAT_RETURN VerbsTransport::cq_open(kit::Evd &evd, void *&out) {
    auto *c = new VerbsCq;
    c->evd = &evd;
    c->channel = ibv_create_comp_channel(ctx_);
    int flags = c->channel ? ::fcntl(c->channel->fd, F_GETFL) : -1;
    if (flags < 0 || ::fcntl(c->channel->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        DAT2_ERR("%s: completion channel: %s\n", name(), std::strerror(errno));
        if (c->channel)
            ibv_destroy_comp_channel(c->channel);
        delete c;
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    }
    // Grows with the EPs that use it (cq_commit): a CQ that overruns breaks
    // every QP on it, so it is never smaller than what they can have posted.
    const int size = std::min(dev_attr_.max_cqe, std::max(256, static_cast<int>(evd.qlen)));
    ibv_cq *cq = ibv_create_cq(ctx_, size, c, c->channel, 0);
    if (!cq) {
        DAT2_ERR("%s: ibv_create_cq(%d): %s\n", name(), size, std::strerror(errno));
        ibv_destroy_comp_channel(c->channel);
        delete c;
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    }
    c->parts.push_back(CqPart{cq, 0});
    c->only = cq;
    out = c;
    return DAT_SUCCESS;
}

void VerbsTransport::cq_close(kit::Evd &evd) {
    VerbsCq *c = static_cast<VerbsCq *>(evd.cq);
    if (!c)
        return;
    {
        // An EP that dat_ep_modify moved to other EVDs still has its QP on
        // this CQ (the kit does not tell the transport); it is idle and
        // unconnected, so its QP goes, to be rebuilt when next used.
        std::lock_guard<std::mutex> lock(mu_);
        for (auto &[key, vep] : eps_)
            if (vep->qp && (vep->send_cq == c || vep->recv_cq == c))
                destroy_qp(*vep);
    }
    kit::EventLoop::Watch *watch;
    {
        std::lock_guard<std::mutex> lock(c->cno_mu);
        watch = c->cno_watch;
        c->cno_watch = nullptr;
    }
    loop().unwatch(watch); // without cno_mu, as in cq_cno_changed
    {
        std::lock_guard<kit::Lock> lock(c->mu);
        ibv_cq *ev_cq;
        void *ev_ctx;
        while (ibv_get_cq_event(c->channel, &ev_cq, &ev_ctx) == 0)
            ibv_ack_cq_events(ev_cq, 1);
    }
    for (CqPart &p : c->parts)
        if (int rc = ibv_destroy_cq(p.cq))
            DAT2_ERR("%s: ibv_destroy_cq: %s\n", name(), std::strerror(rc));
    ibv_destroy_comp_channel(c->channel);
    delete c;
}

CqPart *VerbsTransport::cq_commit(VerbsCq &c, int depth) {
    if (&c == null_cq_)
        return &c.parts.front();
    if (depth > dev_attr_.max_cqe) {
        // ia_.max_dtos keeps every work queue within one CQ.
        DAT2_ERR("%s: a work queue of %d does not fit a completion queue (the device allows %d)\n", name(), depth,
                 dev_attr_.max_cqe);
        return nullptr;
    }
    std::lock_guard<kit::Lock> lock(c.mu);
    for (CqPart &p : c.parts) {
        if (p.committed + depth <= p.cq->cqe) {
            p.committed += depth;
            return &p;
        }
    }
    for (CqPart &p : c.parts) {
        const int need = p.committed + depth;
        if (need > dev_attr_.max_cqe)
            continue;
        // Room for what is committed, and for the completions of QPs that
        // are gone but not yet read (a reset EP's flushes): twice as much.
        const int want = std::min(dev_attr_.max_cqe, std::max(need * 2, p.cq->cqe * 2));
        if (int rc = ibv_resize_cq(p.cq, want)) {
            // Some devices cannot resize: another CQ then.
            DAT2_LOG(log::kGeneric, "%s: ibv_resize_cq(%d): %s\n", name(), want, std::strerror(rc));
            break;
        }
        p.committed = need;
        return &p;
    }
    // The EVD's CQs are full: one more on its channel, armed like the others
    // (a waiter blocked on the channel must hear of its completions).
    const int size = std::min(dev_attr_.max_cqe, std::max(256, depth * 2));
    ibv_cq *cq = ibv_create_cq(ctx_, size, &c, c.channel, 0);
    if (!cq) {
        DAT2_ERR("%s: EVD %p: another completion queue (%d, for %d work requests beyond the %zu it has): %s\n", name(),
                 (void *)c.evd, size, depth, c.parts.size(), std::strerror(errno));
        return nullptr;
    }
    if (c.armed) {
        if (int rc = ibv_req_notify_cq(cq, 0)) {
            DAT2_ERR("%s: ibv_req_notify_cq: %s\n", name(), std::strerror(rc));
            ibv_destroy_cq(cq);
            return nullptr;
        }
    }
    c.parts.push_back(CqPart{cq, depth});
    c.only = nullptr;
    return &c.parts.back();
}

void VerbsTransport::cq_uncommit(VerbsCq &c, CqPart *part, int depth) {
    if (&c == null_cq_ || !part)
        return;
    std::lock_guard<kit::Lock> lock(c.mu);
    part->committed -= depth;
}

// One work completion as the kit wants it: 1, or 0 for the plugin's own
// work requests (the marker gives 1 when it stands for unsignalled requests).
// A plain successful DTO is filled inline (a call costs as much as that);
// everything else, tagged, failed, from an SRQ or with immediate data or an
// invalidation, goes to translate_rare, which keeps cq_read's frame small.
__attribute__((always_inline)) inline int VerbsTransport::translate(const ibv_wc &wc, kit::Completion &out) {
    auto *op = reinterpret_cast<kit::Op *>(static_cast<std::uintptr_t>(wc.wr_id));
    if (__builtin_expect((wc.wr_id & kWrTags) || wc.status != IBV_WC_SUCCESS ||
                             (wc.wc_flags & (IBV_WC_WITH_IMM | wc_with_inv_)) || op->srq,
                         0))
        return translate_rare(wc, out);
    out.set_plain_success(op, wc.byte_len);
    return 1;
}

int VerbsTransport::translate_rare(const ibv_wc &wc, kit::Completion &out) {
    if (wc.wr_id & kWrTags) {
        auto *vep = reinterpret_cast<VerbsEp *>(static_cast<std::uintptr_t>(wc.wr_id & ~kWrTags));
        if (wc.wr_id & kWrMarker) {
            // The graceful-disconnect marker: every request before it completed.
            const std::uint64_t id = vep->id_key;
            loop().post([this, id] { drained(id); });
            // Requests posted unsignalled after the last signalled one have
            // no completion of their own: the last of them before the marker
            // is reported here, and the kit reports the earlier ones before
            // it. Not when the marker was flushed: one of them may have
            // failed, and its own completion says so.
            kit::Op *u = wc.status == IBV_WC_SUCCESS ? vep->marker_last.exchange(nullptr) : nullptr;
            if (!u)
                return 0;
            kit::Op *expected = u;
            vep->last_unsignaled.compare_exchange_strong(expected, nullptr); // reported: no longer pending
            out.set_plain_success(u, 0);
            return 1;
        }
        if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR) {
            // A window bind or invalidation failed: the QP is in error now.
            DAT2_LOG(log::kGeneric, "%s: window operation on EP %p failed: %s (opcode %d, vendor error %#x)\n", name(),
                     (void *)vep->owner, ibv_wc_status_str(wc.status), wc.opcode, wc.vendor_err);
            if (!vep->broken.exchange(true)) {
                const std::uint64_t id = vep->id_key;
                loop().post([this, id] { dto_failed(id); });
            }
        }
        return 0;
    }
    out.op = reinterpret_cast<kit::Op *>(static_cast<std::uintptr_t>(wc.wr_id));
    out.ep = nullptr;
    if (out.op->srq) {
        // A receive from an SRQ: the QP that took it names the EP.
        kit::Ep *ep = nullptr;
        {
            std::lock_guard<std::mutex> lock(qp_eps_mu_);
            auto it = qp_eps_.find(wc.qp_num);
            if (it != qp_eps_.end())
                ep = it->second;
        }
        if (!ep) {
            DAT2_ERR("%s: SRQ receive completed on QP %u, which belongs to no EP\n", name(), wc.qp_num);
            kit::srq_drop(*out.op);
            return 0;
        }
        out.ep = ep;
    }
    out.status = wc.status == IBV_WC_SUCCESS ? DAT_DTO_SUCCESS : to_dto_status(wc.status);
    out.length = wc.byte_len;
    // The kit reuses its array of completions: every field is written.
    out.invalidate = wc.status == IBV_WC_SUCCESS && (wc.wc_flags & wc_with_inv_);
    out.rmr_context = out.invalidate ? wc.invalidated_rkey : 0;
    // A receive consumed by immediate data (dat_ib_extensions.h): a peer's
    // RDMA write with immediate (byte_len is the written length) or a send
    // with immediate. wc.opcode is valid only for a successful completion.
    out.immed = kit::Completion::Immed::kNone;
    out.immed_data = 0;
    if (wc.status == IBV_WC_SUCCESS && out.op->is_recv && (wc.wc_flags & IBV_WC_WITH_IMM)) {
        out.immed =
            wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM ? kit::Completion::Immed::kRdmaWrite : kit::Completion::Immed::kSend;
        out.immed_data = wc.imm_data; // as sent (post_ext)
    }
    // A message longer than the receive buffer: InfiniBand says local length
    // error, Soft-RoCE says local QP operation error (its copy into the
    // scatter list fails as malformed). The kit has checked the receive's
    // segments, so that is what it means on a receive.
    if (wc.status == IBV_WC_LOC_QP_OP_ERR && out.op->is_recv)
        out.status = DAT_DTO_ERR_LOCAL_LENGTH;
    if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR) {
        // The QP is in the error state now: the connection is over. The loop
        // ends it (it cannot be done here, under the EVD's lock).
        kit::Ep *owner = out.ep ? out.ep : out.op->ep;
        auto *vep = static_cast<VerbsEp *>(owner->tp);
        DAT2_LOG(log::kGeneric, "%s: DTO on EP %p failed: %s (vendor error %#x)\n", name(), (void *)owner,
                 ibv_wc_status_str(wc.status), wc.vendor_err);
        if (vep && !vep->broken.exchange(true)) {
            const std::uint64_t id = vep->id_key;
            loop().post([this, id] { dto_failed(id); });
        }
    }
    return 1;
}

// Completions from one CQ into out[n, max): the new n.
__attribute__((always_inline)) inline int VerbsTransport::poll_cq(ibv_cq *cq, kit::Completion *out, int n, int max) {
    while (n < max) {
        ibv_wc wc[kPollBatch];
        const int want = std::min(kPollBatch, max - n);
        const int got = ibv_poll_cq(cq, want, wc);
        if (got < 0)
            DAT2_ERR("%s: ibv_poll_cq: %d\n", name(), got);
        for (int j = 0; j < got; ++j)
            n += translate(wc[j], out[n]);
        if (got < want)
            break;
    }
    return n;
}

int VerbsTransport::cq_read(kit::Evd &evd, kit::Completion *out, int max) {
    VerbsCq &c = cq_ref(evd);
    std::lock_guard<kit::Lock> lock(c.mu);
    if (__builtin_expect(c.only && c.stash_count == 0, 1))
        return poll_cq(c.only, out, 0, max);
    return poll_parts(c, out, 0, max);
}

// The stash first, then every part, starting with a different one each
// time so that none starves; c.mu held.
int VerbsTransport::poll_parts(VerbsCq &c, kit::Completion *out, int n, int max) {
    while (n < max && c.stash_count > 0) {
        n += translate(c.stash[c.stash_head++], out[n]);
        --c.stash_count;
    }
    const std::size_t parts = c.parts.size();
    std::size_t k = c.next_part;
    for (std::size_t i = 0; i < parts && n < max; ++i) {
        ibv_cq *cq = c.parts[k].cq;
        if (++k == parts)
            k = 0;
        n = poll_cq(cq, out, n, max);
    }
    if (parts > 1)
        c.next_part = (c.next_part + 1) % parts;
    return n;
}

int VerbsTransport::cq_fd(kit::Evd &evd) { return cq_ref(evd).channel->fd; }

bool VerbsTransport::cq_arm(kit::Evd &evd) {
    VerbsCq &c = cq_ref(evd);
    std::lock_guard<kit::Lock> lock(c.mu);
    // Only an armed CQ can have raised a notification (reading the channel
    // is a system call: not when nothing can be there).
    if (c.may_notify) {
        ibv_cq *ev_cq;
        void *ev_ctx;
        while (ibv_get_cq_event(c.channel, &ev_cq, &ev_ctx) == 0) {
            ibv_ack_cq_events(ev_cq, 1);
            c.armed = false; // a notification disarms its CQ: all are armed again below
        }
    }
    // Armed even with completions stashed: the loop's CNO handler
    // (cno_cq_ready) must leave the CQ armed, whatever its EVD has room for.
    if (!c.armed) {
        c.may_notify = true;
        for (CqPart &p : c.parts) {
            if (int rc = ibv_req_notify_cq(p.cq, 0)) {
                DAT2_ERR("%s: ibv_req_notify_cq: %s\n", name(), std::strerror(rc));
                return false; // the kit then polls instead of blocking
            }
        }
        c.armed = true;
    }
    if (c.stash_count > 0)
        return false;
    int got = 0;
    for (CqPart &p : c.parts) {
        const int r = ibv_poll_cq(p.cq, VerbsCq::kStash - got, c.stash + got);
        if (r > 0)
            got += r;
        if (got == VerbsCq::kStash)
            break;
    }
    if (got > 0) {
        c.stash_head = 0;
        c.stash_count = got;
        return false;
    }
    return true;
}

// No thread of ours reads a CQ but the consumer's: while its EVD feeds a
// CNO, whose consumer may wait outside DAT, the loop watches the channel.
void VerbsTransport::cq_cno_changed(kit::Evd &evd) {
    VerbsCq &c = cq_ref(evd);
    kit::EventLoop::Watch *gone = nullptr;
    bool look = false;
    {
        std::lock_guard<std::mutex> lock(c.cno_mu);
        const bool want = evd.feeds_cno.load(std::memory_order_relaxed);
        if (want && !c.cno_watch) {
            c.cno_watch = loop().watch(c.channel->fd, EPOLLIN, [this, &evd](std::uint32_t) { cno_cq_ready(evd); });
            if (!c.cno_watch)
                DAT2_ERR("%s: EVD %p: its CNO will be triggered only through dat_cno_wait\n", name(), (void *)&evd);
            look = true;
        } else if (!want && c.cno_watch) {
            gone = c.cno_watch;
            c.cno_watch = nullptr;
        }
    }
    // Without cno_mu: an agent the look invokes, or the handler unwatch
    // waits for, may call dat_evd_modify_cno on this EVD.
    loop().unwatch(gone);
    if (look)
        cno_cq_ready(evd); // armed, and what came before is seen
}

void VerbsTransport::cno_cq_ready(kit::Evd &evd) {
    cq_arm(evd);        // takes the notification (the fd quiets) and arms the CQ again
    kit::evd_wake(evd); // what the CQ holds goes into the EVD, which triggers its CNO
}

} // namespace dat2::verbs
