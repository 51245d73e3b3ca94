// SPDX-License-Identifier: BSD-3-Clause
// Completion queues behind DTO EVDs, what their completions mean to the
// kit, and the provider's progress, driven on the IA's event loop.
#include "ofi.hpp"

#include "log.hpp"
#include "wait.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <memory>
#include <sys/epoll.h>
#include <unistd.h>

namespace dat2::ofi {

namespace {
OfiCq &cq_ref(kit::Evd &evd) { return *static_cast<OfiCq *>(evd.cq); }
} // namespace

fid_cq *OfiTransport::open_cq(OfiDomain &dom, std::size_t size) {
    fi_cq_attr attr{};
    attr.size = size;
    attr.format = FI_CQ_FORMAT_DATA; // remote CQ data: a write with immediate data
    attr.wait_obj = FI_WAIT_FD;
    auto *hot = new (std::nothrow) PartHot(false);
    if (!hot) {
        DAT2_ERR("%s: no memory for a completion queue\n", name());
        return nullptr;
    }
    fid_cq *cq = nullptr;
    if (int rc = fi_cq_open(dom.domain, &attr, &cq, hot)) {
        DAT2_ERR("%s: fi_cq_open(size %zu): %s\n", name(), attr.size, fi_text(rc));
        delete hot;
        return nullptr;
    }
    return cq;
}

void OfiTransport::close_cq(fid_cq *cq) {
    PartHot *hot = part_hot(cq);
    // libfabric refuses to close a queue an endpoint is still bound to, and
    // that endpoint's receives still set the flag.
    if (fi_close(&cq->fid) == 0)
        delete hot;
}

namespace {
// The EVD's FIFO holds qlen events; a queue behind it must hold every
// completion the EPs feeding it can have outstanding.
std::size_t cq_size(const kit::Evd &evd) { return std::max<std::size_t>(static_cast<std::size_t>(evd.qlen) * 2, 1024); }
} // namespace

// The first queue is in the IA's own domain, which the first PZ takes: an
// IA with one PZ has one queue per EVD.
DAT_RETURN OfiTransport::cq_open(kit::Evd &evd, void *&out) {
    auto c = std::make_unique<OfiCq>();
    fid_cq *cq = open_cq(base_, cq_size(evd));
    if (!cq)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    if (DAT_RETURN r = watch_cq(cq, &evd)) {
        close_cq(cq);
        return r;
    }
    c->parts[0] = {&base_, cq};
    c->count.store(1, std::memory_order_release);
    {
        std::lock_guard<std::mutex> lock(dom_mu_);
        ++base_.cq_parts;
    }
    out = c.release();
    return DAT_SUCCESS;
}

fid_cq *OfiTransport::cq_part(kit::Evd *evd, OfiDomain &dom, int binds, bool &grown) {
    if (!evd || !evd->cq) {
        if (!dom.null_cq) {
            fi_cq_attr attr{};
            attr.size = 16;
            attr.format = FI_CQ_FORMAT_MSG;
            attr.wait_obj = FI_WAIT_NONE;
            if (int rc = fi_cq_open(dom.domain, &attr, &dom.null_cq, nullptr)) {
                DAT2_ERR("%s: fi_cq_open: %s\n", name(), fi_text(rc));
                return nullptr;
            }
        }
        return dom.null_cq;
    }
    OfiCq &c = cq_ref(*evd);
    const int n = c.count.load(std::memory_order_acquire);
    // A part of the domain with room; else the one with fewest bindings,
    // taken only once no part can be added. Every part is watched from its
    // opening (cqs_), which holds its count.
    WatchedCq *fewest = nullptr;
    int fewest_at = -1;
    for (int i = 0; i < n; ++i) {
        if (c.parts[i].dom != &dom)
            continue;
        WatchedCq &w = cqs_.find(c.parts[i].cq)->second;
        if (w.binds + binds <= OfiCq::kBindsPerPart) {
            w.binds += binds;
            return c.parts[i].cq;
        }
        if (!fewest || w.binds < fewest->binds) {
            fewest = &w;
            fewest_at = i;
        }
    }
    if (n == OfiCq::kMaxParts) {
        if (fewest) {
            fewest->binds += binds;
            return c.parts[fewest_at].cq;
        }
        DAT2_ERR("%s: EVD %p has %d completion queues already, the most it can, none in this EP's PZ\n", name(),
                 (void *)evd, n);
        return nullptr;
    }
    fid_cq *cq = open_cq(dom, cq_size(*evd));
    if (!cq)
        return nullptr;
    // dat_evd_wait waits on one fd: with two queues, an epoll set of theirs.
    const bool made = c.wait_fd < 0;
    if (made)
        c.wait_fd = ::epoll_create1(EPOLL_CLOEXEC);
    for (int i = made ? 0 : n; c.wait_fd >= 0 && i <= n; ++i) {
        int fd = -1;
        if (fi_control(&(i < n ? c.parts[i].cq : cq)->fid, FI_GETWAIT, &fd) == 0) {
            epoll_event ev{};
            ev.events = EPOLLIN;
            ev.data.ptr = i < n ? c.parts[i].cq : cq;
            ::epoll_ctl(c.wait_fd, EPOLL_CTL_ADD, fd, &ev);
        }
    }
    if (watch_cq_locked(cq, evd) != DAT_SUCCESS) {
        close_cq(cq);
        return nullptr;
    }
    cqs_.find(cq)->second.binds = binds;
    c.parts[n] = {&dom, cq};
    c.count.store(n + 1, std::memory_order_release);
    {
        std::lock_guard<std::mutex> lock(dom_mu_);
        ++dom.cq_parts;
    }
    grown = true;
    return cq;
}

void OfiTransport::cq_unbind(fid_cq *cq, int binds) {
    // Not found: the EVD was freed while a connection attempt it served was
    // left behind (dat_ep_modify between the attempt and the next one).
    auto found = cqs_.find(cq);
    if (found == cqs_.end())
        return;
    WatchedCq &w = found->second;
    w.binds -= binds;
    if (w.binds > 0 || cq_ref(*w.evd).parts[0].cq == cq)
        return;
    if (std::find(retiring_.begin(), retiring_.end(), w.evd) != retiring_.end())
        return;
    try {
        retiring_.push_back(w.evd);
    } catch (const std::bad_alloc &) {
        return; // the part stays open until the EVD is freed or a later unbinding asks again
    }
    loop().post([] {}); // a round now
}

bool OfiTransport::retire_parts_locked(std::vector<Retired> &out) {
    std::size_t kept = 0;
    for (kit::Evd *evd : retiring_) {
        // Every reader of the parts holds the EVD's lock (cq_read, cq_fd,
        // cq_arm) or mu_ (cq_part). Only tried: a consumer holding the lock
        // may be waiting for mu_, or in a long progress call.
        if (!evd->mu.try_lock()) {
            retiring_[kept++] = evd;
            continue;
        }
        OfiCq &c = cq_ref(*evd);
        int n = c.count.load(std::memory_order_relaxed);
        // From the last: the part moved into a freed slot has been looked at.
        for (int i = n - 1; i >= 1; --i) {
            fid_cq *cq = c.parts[i].cq;
            auto found = cqs_.find(cq);
            WatchedCq &w = found->second;
            if (w.binds > 0)
                continue;
            // Completions the consumer has not read yet (an endpoint's
            // flushed receives) keep the part until a later unbinding; the
            // progress of this look may have consumed their signal.
            fi_cq_msg_entry none;
            if (fi_cq_read(cq, &none, 0) != -FI_EAGAIN) {
                part_hot(cq)->store(true, std::memory_order_release);
                continue;
            }
            int fd = -1;
            if (c.wait_fd >= 0 && fi_control(&cq->fid, FI_GETWAIT, &fd) == 0)
                ::epoll_ctl(c.wait_fd, EPOLL_CTL_DEL, fd, nullptr);
            loop().unwatch(w.watch); // on the loop: its handler is not running
            if (w.pending)
                pending_.erase(std::find(pending_.begin(), pending_.end(), cq));
            if (w.resting)
                resting_.erase(std::find(resting_.begin(), resting_.end(), cq));
            cqs_.erase(found);
            out.push_back({cq, c.parts[i].dom}); // capacity: see progress_round
            c.parts[i] = c.parts[--n];
        }
        c.count.store(n, std::memory_order_release);
        // One part again: dat_evd_wait polls its own fd (cq_fd), and the set
        // goes, unless a thread may be asleep on it.
        if (n == 1 && c.wait_fd >= 0 && evd->inside.load(std::memory_order_relaxed) == 0) {
            ::close(c.wait_fd);
            c.wait_fd = -1;
        }
        evd->mu.unlock();
    }
    retiring_.resize(kept);
    return kept > 0;
}

void OfiTransport::cq_close(kit::Evd &evd) {
    auto *c = static_cast<OfiCq *>(evd.cq);
    if (!c)
        return;
    forget_cno_evd(evd);
    {
        std::lock_guard<std::mutex> lock(mu_);
        retiring_.erase(std::remove(retiring_.begin(), retiring_.end(), &evd), retiring_.end());
    }
    const int n = c->count.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i) {
        unwatch_cq(c->parts[i].cq);
        close_cq(c->parts[i].cq);
        std::lock_guard<std::mutex> lock(dom_mu_);
        --c->parts[i].dom->cq_parts;
        domain_close_if_unused(c->parts[i].dom);
    }
    if (c->wait_fd >= 0)
        ::close(c->wait_fd);
    {
        std::lock_guard<std::mutex> lock(srq_queues_mu_);
        forget_srq_sleeper_locked(evd);
    }
    delete c;
}

// read_queue's body, inline in cq_read: every poll of an EVD, empty or
// not, reads its first queue, and the call cost as much as the rest.
__attribute__((always_inline)) inline int OfiTransport::read_queue_inline(fid_cq *cq, kit::Ep *taker,
                                                                          kit::Completion *out, int max, bool *took) {
    fi_cq_data_entry entries[32];
    max = std::min(max, 32);
    ssize_t n = fi_cq_read(cq, entries, static_cast<std::size_t>(max));
    if (took)
        *took = n > 0 || n == -FI_EAVAIL;
    if (n > 0) {
        // The first part of a write with immediate data reports nothing.
        int k = 0;
        for (ssize_t i = 0; i < n; ++i)
            if (translate(entries[i].op_context, entries[i].flags, entries[i].len, entries[i].data, DAT_DTO_SUCCESS,
                          taker, out[k]))
                ++k;
        return k;
    }
    if (n == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        if (fi_cq_readerr(cq, &err, 0) != 1)
            return 0;
        const DAT_DTO_COMPLETION_STATUS status = to_dto_status(err.err);
        if (status != DAT_DTO_ERR_FLUSHED)
            DAT2_LOG(log::kGeneric, "%s: DTO failed: %s\n", name(), fi_text(err.err));
        return translate(err.op_context, 0, err.len, 0, status, taker, out[0]) ? 1 : 0;
    }
    if (n != -FI_EAGAIN)
        DAT2_ERR("%s: fi_cq_read: %s\n", name(), fi_text(static_cast<int>(n)));
    return 0;
}

int OfiTransport::read_queue(fid_cq *cq, kit::Ep *taker, kit::Completion *out, int max) {
    return read_queue_inline(cq, taker, out, max);
}

int OfiTransport::cq_read(kit::Evd &evd, kit::Completion *out, int max) {
    OfiCq &c = cq_ref(evd);
    int n = read_queue_inline(c.parts[0].cq, nullptr, out, max);
    const int parts = c.count.load(std::memory_order_acquire);
    if (parts > 1 && n < max)
        n += read_other_parts(c, parts, out + n, max - n);
    if (n < max && srq_queue_count_.load(std::memory_order_acquire) > 0)
        n += read_srq_queues(evd, out + n, max - n);
    return n;
}

// Each read of a libfabric tcp queue walks all its endpoints: reading every
// part would make a poll cost every connection on the EVD. The flag is
// cleared before the read, so that a flag set during it is kept, and set
// again after a read that took entries, as more may be queued with their
// signal consumed.
int OfiTransport::read_other_parts(OfiCq &c, int parts, kit::Completion *out, int max) {
    int n = 0;
    bool took = false;
    // Without the epoll set (it could not be made), every part.
    const bool all = c.wait_fd < 0;
    for (int i = 1; i < parts && n < max; ++i) {
        PartHot &hot = *part_hot(c.parts[i].cq);
        if (!all && (!hot.load(std::memory_order_relaxed) || !hot.exchange(false, std::memory_order_acq_rel)))
            continue;
        n += read_queue_inline(c.parts[i].cq, nullptr, out + n, max - n, &took);
        if (took)
            hot.store(true, std::memory_order_release);
    }
    if (n == max || all)
        return n;
    epoll_event ready[OfiCq::kMaxParts];
    const int nready = ::epoll_wait(c.wait_fd, ready, OfiCq::kMaxParts, 0);
    for (int r = 0; r < nready && n < max; ++r) {
        auto *cq = static_cast<fid_cq *>(ready[r].data.ptr);
        if (cq == c.parts[0].cq)
            continue; // read already
        n += read_queue_inline(cq, nullptr, out + n, max - n, &took);
        if (took)
            part_hot(cq)->store(true, std::memory_order_release);
    }
    return n;
}

// Inline: every completion comes through here, and a call costs as much
// as the translation.
__attribute__((always_inline)) inline bool OfiTransport::translate(void *context, std::uint64_t flags, std::size_t len,
                                                                   std::uint64_t data, DAT_DTO_COMPLETION_STATUS status,
                                                                   kit::Ep *taker, kit::Completion &out) {
    out.status = status;
    out.invalidate = false;
    out.rmr_context = 0;
    out.immed = kit::Completion::Immed::kNone;
    out.immed_data = 0;
    out.ep = taker;
    if (ImmedSlot *slot = immed_slot_of(context)) {
        kit::Op *op = immed_part_done(*slot, out.status);
        if (!op)
            return false;
        out.op = op;
        out.length = op->length;
        return true;
    }
    out.op = static_cast<kit::Op *>(context);
    if (!out.op)
        return false;
    out.length = static_cast<std::uint32_t>(len);
    // Remote CQ data without the tag (a peer of an older build sending with
    // invalidate) is a plain receive: this IA never offers the invalidation.
    if (status == DAT_DTO_SUCCESS && (flags & FI_REMOTE_CQ_DATA) && (data & kImmedTag)) {
        // The end of a peer's write with immediate data (post_write_immed).
        out.immed = kit::Completion::Immed::kRdmaWrite;
        out.immed_data = static_cast<std::uint32_t>(data);
        out.length = static_cast<std::uint32_t>((data >> 32) & kMaxImmedLength);
    }
    return true;
}

// dat_evd_wait sleeps on the queue's own wait fd (libfabric tcp puts the
// sockets of the queue's endpoints in it), so the kernel wakes the consumer
// directly; with several queues, on an epoll set of theirs. The loop may
// still run progress on a queue and, doing so, clear the fd's signal after a
// completion arrived; it then finds the queue not empty (fi_trywait fails)
// and wakes the EVD itself.
int OfiTransport::cq_fd(kit::Evd &evd) {
    OfiCq &c = cq_ref(evd);
    if (c.count.load(std::memory_order_acquire) > 1)
        return c.wait_fd;
    int fd = -1;
    if (fi_control(&c.parts[0].cq->fid, FI_GETWAIT, &fd) != 0)
        return -1; // the loop wakes the EVD instead
    return fd;
}

// One part at a time: fi_trywait consumes a queue's signal even when it
// fails because completions are queued there, and that part must then be
// read without its fd (PartHot).
bool OfiTransport::cq_arm(kit::Evd &evd) {
    OfiCq &c = cq_ref(evd);
    const int n = c.count.load(std::memory_order_acquire);
    // A flagged part has work its fd does not show: read it first. (The
    // first part's flag means nothing: every read reads that part.)
    for (int i = 1; i < n; ++i)
        if (part_hot(c.parts[i].cq)->load(std::memory_order_acquire))
            return false;
    for (int i = 0; i < n; ++i) {
        fid *f = &c.parts[i].cq->fid;
        if (fi_trywait(fabric_, &f, 1) != FI_SUCCESS) {
            part_hot(c.parts[i].cq)->store(true, std::memory_order_release);
            return false;
        }
    }
    return srq_queue_count_.load(std::memory_order_acquire) == 0 || arm_srq(evd);
}

// ---- progress -------------------------------------------------------------------

DAT_RETURN OfiTransport::watch_cq(fid_cq *cq, kit::Evd *evd) {
    std::lock_guard<std::mutex> lock(mu_);
    return watch_cq_locked(cq, evd);
}

DAT_RETURN OfiTransport::watch_cq_locked(fid_cq *cq, kit::Evd *evd) {
    auto found = cqs_.find(cq);
    if (found != cqs_.end()) {
        found->second.evd = evd;
        return DAT_SUCCESS;
    }
    int fd = -1;
    if (fi_control(&cq->fid, FI_GETWAIT, &fd) != 0)
        fd = -1;
    WatchedCq *record;
    try {
        // pending_ never grows on the loop, where an allocation that fails
        // has no caller to report to.
        if (pending_.capacity() < cqs_.size() + 1) {
            pending_.reserve(2 * (cqs_.size() + 1));
            resting_.reserve(2 * (cqs_.size() + 1));
        }
        record = &cqs_.emplace(cq, WatchedCq{evd, fd}).first->second;
    } catch (const std::bad_alloc &) {
        DAT2_ERR("%s: no memory to watch a completion queue\n", name());
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    if (fd >= 0) {
        // A new queue is empty and its fd unsignaled: it is watched without
        // a fi_trywait.
        record->watch = loop().watch(fd, EPOLLIN, [this, cq](std::uint32_t) { cq_ready(cq); });
        if (!record->watch) {
            cqs_.erase(cq);
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
        }
    } else {
        // No fd to wait on: the loop looks at the queue every round.
        record->pending = true;
        pending_.push_back(cq);
        loop().post([] {}); // a round now
    }
    return DAT_SUCCESS;
}

void OfiTransport::unwatch_cq(fid_cq *cq) {
    kit::EventLoop::Watch *watch;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto found = cqs_.find(cq);
        if (found == cqs_.end())
            return;
        watch = found->second.watch;
        if (found->second.pending)
            pending_.erase(std::find(pending_.begin(), pending_.end(), cq));
        if (found->second.resting)
            resting_.erase(std::find(resting_.begin(), resting_.end(), cq));
        cqs_.erase(found);
    }
    // Without mu_: the handler it may be waiting for takes mu_.
    loop().unwatch(watch);
    loop().sync(); // a round that may wake its EVD has ended
}

bool OfiTransport::consumer_polls(WatchedCq &w, std::chrono::steady_clock::time_point now) {
    const std::uint32_t seen = w.evd->dequeues.load(std::memory_order_relaxed);
    const bool moved = seen != w.seen_dequeues;
    w.seen_dequeues = seen;
    w.looked = now;
    return moved && w.evd->inside.load(std::memory_order_relaxed) == 0;
}

void OfiTransport::rest(fid_cq *cq, WatchedCq &w) {
    if (w.resting)
        return;
    loop().unwatch(w.watch);
    w.watch = nullptr;
    w.muted = false;
    if (w.pending) {
        w.pending = false;
        pending_.erase(std::find(pending_.begin(), pending_.end(), cq));
    }
    w.resting = true;
    resting_.push_back(cq); // capacity reserved by watch_cq
}

void OfiTransport::stop_resting(fid_cq *cq, WatchedCq &w) {
    if (!w.resting)
        return;
    w.resting = false;
    resting_.erase(std::find(resting_.begin(), resting_.end(), cq));
    if (w.fd >= 0) {
        w.watch = loop().watch(w.fd, EPOLLIN, [this, cq](std::uint32_t) { cq_ready(cq); });
        if (!w.watch)
            w.fd = -1; // looked at every round instead (pending, never leaves)
    }
}

bool OfiTransport::drive(fid_cq *cq) {
    // A zero-entry read runs the provider's progress without taking any
    // completion away from the consumer; 0 means completions are queued,
    // their signal perhaps consumed by that progress.
    fi_cq_msg_entry none;
    if (fi_cq_read(cq, &none, 0) != 0)
        return false;
    if (PartHot *hot = part_hot(cq)) // an SRQ's queue has none: read every poll
        hot->store(true, std::memory_order_release);
    return true;
}

OfiTransport::WatchedCq *OfiTransport::kick_progress(fid_cq *cq) {
    auto found = cqs_.find(cq);
    if (found == cqs_.end())
        return nullptr;
    WatchedCq &w = found->second;
    w.found_queued = drive(cq);
    // Progress may have queued completions and consumed the fd's signal that
    // announced them (tcp resets it as it goes): the next round looks at
    // once, and until fi_trywait trusts the fd again.
    w.due = {};
    w.backoff = std::chrono::milliseconds(0);
    if (!w.pending) {
        w.pending = true;
        pending_.push_back(cq); // capacity reserved by watch_cq
    }
    return &w;
}

bool OfiTransport::woke_for_nothing(WatchedCq &w, std::chrono::steady_clock::time_point now) {
    constexpr int kWakes = 64;
    constexpr std::chrono::milliseconds kFor(20);
    if (w.found_queued) {
        w.empty_wakes = 0;
        return false;
    }
    if (w.empty_wakes++ == 0)
        w.empty_since = now;
    if (w.empty_wakes < kWakes || now - w.empty_since < kFor)
        return false;
    w.empty_wakes = 0;
    return true;
}

bool OfiTransport::fd_stays_readable(WatchedCq &w) {
    if (!w.suspect && !w.muted)
        return false;
    w.suspect = false;
    const bool readable = kit::fd_ready_now(w.fd, POLLIN);
    if (readable != w.muted) {
        if (readable)
            DAT2_LOG(log::kGeneric,
                     "%s: a completion queue's fd stays readable once fi_trywait trusts it: "
                     "driven on a timer until they agree\n",
                     name());
        loop().modify(w.watch, readable ? 0u : std::uint32_t{EPOLLIN});
        w.muted = readable;
    }
    return readable;
}

void OfiTransport::cq_ready(fid_cq *cq) {
    kit::Evd *wake = nullptr;
    bool look_for_departed = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto found = cqs_.find(cq);
        if (found == cqs_.end())
            return;
        const auto now = std::chrono::steady_clock::now();
        if (consumer_polls(found->second, now)) {
            rest(cq, found->second); // the consumer's next poll finds it
        } else if (WatchedCq *w = kick_progress(cq)) {
            wake = w->evd;
            look_for_departed = woke_for_nothing(*w, now);
            w->suspect = w->suspect || look_for_departed;
        }
    }
    if (look_for_departed)
        end_connections_of_departed_peers();
    if (wake)
        kit::evd_wake(*wake); // unwatch_cq waits for this handler
}

void OfiTransport::look_for_cno(fid_cq *cq, kit::Evd &evd) {
    bool queued = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto found = cqs_.find(cq); // by address: closed since, perhaps, or another's now
        if (found != cqs_.end() && found->second.evd == &evd)
            queued = kick_progress(cq)->found_queued;
    }
    if (queued)
        kit::evd_wake(evd);
}

// Progress is driven by events: a queue's wait fd (its endpoints' sockets,
// and POLLOUT for data still to send once fi_trywait has asked for it)
// wakes the loop, which drives that queue until fi_trywait says its fd can
// be trusted again. An idle process sleeps, whatever number of endpoints it
// has. A queue whose fd cannot be trusted yet because its consumer leaves
// completions unread is driven again at growing intervals (up to
// kMaxBackoff): data may still be waiting to be sent there.
int OfiTransport::progress_round() {
    using std::chrono::milliseconds;
    constexpr milliseconds kMaxBackoff(64);
    std::vector<kit::Evd *> wake; // woken once mu_ is released
    std::vector<Retired> retired; // closed once mu_ is released
    int timeout_ms = -1;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!retiring_.empty()) {
            try {
                retired.reserve(static_cast<std::size_t>(OfiCq::kMaxParts) * retiring_.size());
                if (retire_parts_locked(retired))
                    timeout_ms = 1; // an EVD's lock was held: again soon
            } catch (const std::bad_alloc &) {
                timeout_ms = 1;
            }
        }
        const auto now = std::chrono::steady_clock::now();
        // While a consumer busy-polls (a queue rests), look once a
        // millisecond whether it has stopped: an RDMA write may be landing
        // while it only watches memory.
        if (!resting_.empty()) {
            if (now >= next_tick_) {
                next_tick_ = now + milliseconds(1);
                for (std::size_t i = 0; i < resting_.size();) {
                    fid_cq *cq = resting_[i];
                    WatchedCq &w = cqs_.find(cq)->second;
                    // Judged over a whole millisecond: a queue put to rest
                    // just before this tick has had no time to be polled,
                    // and taking it back would make this thread drive the
                    // progress the poller is driving, against it.
                    if (now - w.looked < milliseconds(1)) {
                        ++i;
                        continue;
                    }
                    if (consumer_polls(w, now)) {
                        ++i;
                        continue;
                    }
                    stop_resting(cq, w); // takes it out of resting_
                    kick_progress(cq);
                    wake.push_back(w.evd);
                }
            }
            timeout_ms = 1;
        }
        for (std::size_t i = 0; i < pending_.size();) {
            fid_cq *cq = pending_[i];
            auto found = cqs_.find(cq);
            if (found == cqs_.end()) {
                pending_[i] = pending_.back();
                pending_.pop_back();
                continue;
            }
            WatchedCq &w = found->second;
            if (w.due > now) {
                const auto left = std::chrono::duration_cast<milliseconds>(w.due - now).count() + 1;
                timeout_ms = kit::min_poll_ms(timeout_ms, static_cast<int>(left));
                ++i;
                continue;
            }
            const bool queued = w.backoff.count() ? drive(cq) : true; // kicked just now: look
            fid *f = &cq->fid;
            if (w.fd >= 0 && fi_trywait(fabric_, &f, 1) == FI_SUCCESS && !fd_stays_readable(w)) {
                w.pending = false;
                pending_[i] = pending_.back();
                pending_.pop_back();
                continue;
            }
            // Completions may be queued, and fi_trywait cleared the fd's
            // signal that a consumer in dat_evd_wait may sleep on: wake it,
            // and the next read of the EVD reads this part.
            if (PartHot *hot = part_hot(cq))
                hot->store(true, std::memory_order_release);
            if (queued)
                wake.push_back(w.evd);
            w.backoff = std::min(kMaxBackoff, std::max(milliseconds(1), w.backoff * 2));
            w.due = now + w.backoff;
            timeout_ms = kit::min_poll_ms(timeout_ms, static_cast<int>(w.backoff.count()));
            ++i;
        }
    }
    for (kit::Evd *evd : wake)
        kit::evd_wake(*evd);
    for (const Retired &r : retired) {
        close_cq(r.cq);
        std::lock_guard<std::mutex> lock(dom_mu_);
        --r.dom->cq_parts;
        domain_close_if_unused(r.dom);
    }
    // Connects in flight: every 100 ms, whether a server went away without
    // an answer (fail_connects_to_departed_peers). The endpoints are walked
    // only then, not at every round.
    bool check_connects = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (connects_maybe_pending_) {
            const auto now = std::chrono::steady_clock::now();
            if (now >= next_connect_check_) {
                next_connect_check_ = now + std::chrono::milliseconds(100);
                connects_maybe_pending_ = connects_pending_locked();
                check_connects = connects_maybe_pending_;
            }
            if (connects_maybe_pending_)
                timeout_ms = kit::min_poll_ms(timeout_ms, 100);
        }
    }
    if (check_connects)
        fail_connects_to_departed_peers();
    // The event queue's fd is to be trusted only once fi_trywait said so.
    fid *eq = &eq_->fid;
    if (fi_trywait(fabric_, &eq, 1) != FI_SUCCESS) {
        read_event_queue();
        return 0;
    }
    return timeout_ms;
}

} // namespace dat2::ofi
