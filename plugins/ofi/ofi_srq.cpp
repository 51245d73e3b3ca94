// SPDX-License-Identifier: BSD-3-Clause
// Shared receive queues: libfabric shared receive contexts. An EP created
// with an SRQ binds FI_RECV to a queue of its own (OfiTransport::SrqQueue),
// which says which EP took a buffer. Receives still queued when an SRQ
// closes are dropped without completions (no queue is bound to the context
// itself); the kit takes their records back.
#include "ofi.hpp"

#include "log.hpp"
#include "wait.hpp"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

namespace dat2::ofi {

// The largest context the provider makes is the SRQ capacity. libfabric
// does not say where a receive of a shared context completes: the kit needs
// it on the queue of the endpoint that took the buffer, which tcp and net
// do (tested). Others get no SRQs until tested (sockets routes them so in a
// plain libfabric test, but its progress thread crashes under the
// conformance suites, SRQ or not).
DAT_COUNT OfiTransport::probe_srq_size() {
    const std::string prov = info_->fabric_attr->prov_name ? info_->fabric_attr->prov_name : "";
    if (prov != "tcp" && prov != "net")
        return 0;
    for (std::size_t size = kit::kMaxDtos; size > 0; size /= 2) {
        fi_rx_attr rx = *info_->rx_attr;
        rx.size = size;
        fid_ep *probe = nullptr;
        const int rc = fi_srx_context(domain_, &rx, &probe, nullptr);
        if (rc == 0) {
            fi_close(&probe->fid);
            return static_cast<DAT_COUNT>(size);
        }
        if (rc != -FI_EINVAL)
            break;
    }
    return 0;
}

DAT_RETURN OfiTransport::srq_open(kit::Srq &srq, void *&tp) {
    auto s = std::make_unique<OfiSrq>();
    s->dom = domain_acquire(srq.pz);
    if (!s->dom)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
    fi_rx_attr attr = *info_->rx_attr;
    attr.size = static_cast<std::size_t>(max_srq_recvs_);
    if (int rc = fi_srx_context(s->dom->domain, &attr, &s->srx, nullptr)) {
        DAT2_ERR("%s: fi_srx_context(size %zu): %s\n", name(), attr.size, fi_text(rc));
        domain_release(s->dom);
        return to_dat(rc, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ));
    }
    tp = s.release();
    return DAT_SUCCESS;
}

void OfiTransport::srq_close(kit::Srq &srq) {
    auto *s = static_cast<OfiSrq *>(srq.tp);
    if (!s)
        return;
    fi_close(&s->srx->fid);
    domain_release(s->dom);
    delete s;
}

DAT_RETURN OfiTransport::srq_post(kit::Srq &srq, kit::Op &op, const kit::Segment *segs, int nsegs) {
    ssize_t rc = post_msg(static_cast<OfiSrq *>(srq.tp)->srx, true, op, segs, nsegs);
    if (rc == 0) {
        // After the post, under the lock the waiters register under (see
        // srq_sleepers_): either a waiter's next look sees this post, or it
        // is registered and woken here.
        bool cnos;
        {
            std::lock_guard<std::mutex> lock(srq_queues_mu_);
            ++srq_posts_;
            for (kit::Evd *evd : srq_sleepers_)
                kit::evd_wake_waiters(*evd);
            cnos = !cno_evds_.empty();
        }
        if (__builtin_expect(cnos, 0))
            srq_look_for_cnos(srq);
        return DAT_SUCCESS;
    }
    if (rc == -FI_EAGAIN)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    DAT2_ERR("%s: posting a receive to an SRQ: %s\n", name(), fi_text(static_cast<int>(rc)));
    return to_dat(static_cast<int>(rc), DAT_ERROR(DAT_INTERNAL_ERROR, 0));
}

namespace {
thread_local bool t_in_srq_cno_look = false; // an agent the look invokes may free an EVD
} // namespace

// As a receive posted on an EP does for its EVD (post_recv, look_for_cno):
// the queues of this SRQ whose EVD feeds a CNO are driven now, and their
// EVDs woken if a receive completed (tcp may have held its message).
void OfiTransport::srq_look_for_cnos(const kit::Srq &srq) {
    std::vector<std::pair<fid_cq *, kit::Evd *>> look;
    {
        std::lock_guard<std::mutex> lock(srq_queues_mu_);
        for (const SrqQueue &q : srq_queues_)
            if (q.ep->srq == &srq && std::find(cno_evds_.begin(), cno_evds_.end(), q.evd) != cno_evds_.end())
                look.emplace_back(q.cq, q.evd);
        if (look.empty())
            return;
        srq_cno_looks_.fetch_add(1); // under the lock cq_close takes the EVD out under
    }
    const bool outer = !t_in_srq_cno_look;
    t_in_srq_cno_look = true;
    for (const auto &[cq, evd] : look)
        look_for_cno(cq, *evd);
    t_in_srq_cno_look = !outer;
    srq_cno_looks_.fetch_sub(1);
}

void OfiTransport::cq_cno_changed(kit::Evd &evd) {
    std::lock_guard<std::mutex> lock(srq_queues_mu_);
    const bool feeds = evd.feeds_cno.load(std::memory_order_relaxed);
    auto at = std::find(cno_evds_.begin(), cno_evds_.end(), &evd);
    if (feeds && at == cno_evds_.end())
        cno_evds_.push_back(&evd);
    else if (!feeds && at != cno_evds_.end())
        cno_evds_.erase(at);
}

void OfiTransport::forget_cno_evd(kit::Evd &evd) {
    {
        std::lock_guard<std::mutex> lock(srq_queues_mu_);
        auto at = std::find(cno_evds_.begin(), cno_evds_.end(), &evd);
        if (at != cno_evds_.end())
            cno_evds_.erase(at);
    }
    // A look that found the EVD before it left the list (here, or in
    // cq_cno_changed) may still use it; not one of this thread's (its
    // agent freeing the EVD): that one leaves the EVD once the agent returns.
    if (!t_in_srq_cno_look)
        kit::wait_count_at_most(srq_cno_looks_, 0);
}

int OfiTransport::read_srq_queues(kit::Evd &evd, kit::Completion *out, int max) {
    std::lock_guard<std::mutex> lock(srq_queues_mu_);
    static_cast<OfiCq *>(evd.cq)->srq_seen = srq_posts_;
    forget_srq_sleeper_locked(evd);
    const std::size_t count = srq_queues_.size();
    const std::size_t first = count ? srq_next_++ % count : 0;
    int n = 0;
    for (std::size_t i = 0; i < count && n < max; ++i) {
        SrqQueue &q = srq_queues_[(first + i) % count];
        if (q.evd == &evd)
            n += read_queue(q.cq, q.ep, out + n, max - n);
    }
    return n;
}

void OfiTransport::forget_srq_sleeper_locked(kit::Evd &evd) {
    auto at = std::find(srq_sleepers_.begin(), srq_sleepers_.end(), &evd);
    if (at != srq_sleepers_.end()) { // at most once: arm_srq registers an EVD once
        *at = srq_sleepers_.back();
        srq_sleepers_.pop_back();
    }
}

bool OfiTransport::arm_srq(kit::Evd &evd) {
    std::lock_guard<std::mutex> lock(srq_queues_mu_);
    if (std::none_of(srq_queues_.begin(), srq_queues_.end(), [&](const SrqQueue &q) { return q.evd == &evd; }))
        return true;
    if (static_cast<OfiCq *>(evd.cq)->srq_seen != srq_posts_)
        return false;
    if (std::find(srq_sleepers_.begin(), srq_sleepers_.end(), &evd) == srq_sleepers_.end()) {
        try {
            srq_sleepers_.push_back(&evd);
        } catch (const std::bad_alloc &) {
            return false; // not registered: the waiter looks again instead of sleeping
        }
    }
    return true;
}

void OfiTransport::close_srq_queue(OfiEp &oep) {
    fid_cq *cq = oep.srq_cq;
    if (!cq)
        return;
    unwatch_cq(cq);
    {
        std::lock_guard<std::mutex> lock(srq_queues_mu_);
        srq_queues_.erase(
            std::remove_if(srq_queues_.begin(), srq_queues_.end(), [&](const SrqQueue &q) { return q.cq == cq; }),
            srq_queues_.end());
    }
    srq_queue_count_.fetch_sub(1, std::memory_order_release);
    // The EP is going away: what it took from the SRQ and completed cannot be
    // reported any more; the records go back to the SRQ.
    kit::Completion c[32];
    for (int n; (n = read_queue(cq, nullptr, c, 32)) > 0;)
        for (int i = 0; i < n; ++i)
            kit::srq_drop(*c[i].op);
    fi_close(&cq->fid);
    oep.srq_cq = nullptr;
}

} // namespace dat2::ofi
