// SPDX-License-Identifier: BSD-3-Clause
// Completion queues behind DTO EVDs, and memory registration.
#include "ofi.hpp"

#include "log.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <sys/epoll.h>
#include <unistd.h>

namespace dat2::ofi {

namespace {
fid_cq *cq_ptr(kit::Evd &evd) { return static_cast<fid_cq *>(evd.cq); }
} // namespace

fid_cq *OfiTransport::cq_of(kit::Evd *evd) { return evd && evd->cq ? cq_ptr(*evd) : null_cq_; }

DAT_RETURN OfiTransport::cq_open(kit::Evd &evd) {
    fi_cq_attr attr{};
    // The EVD's FIFO holds qlen events; the queue behind it must hold every
    // completion the EPs feeding it can have outstanding.
    attr.size = std::max<std::size_t>(static_cast<std::size_t>(evd.qlen) * 2, 1024);
    attr.format = FI_CQ_FORMAT_DATA; // remote CQ data: a send with invalidate
    attr.wait_obj = FI_WAIT_FD;
    fid_cq *cq = nullptr;
    int rc = fi_cq_open(domain_, &attr, &cq, nullptr);
    if (rc) {
        DAT2_ERR("%s: fi_cq_open(size %zu): %s\n", ia_.name.c_str(), attr.size, fi_text(rc));
        return to_dat(rc, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD));
    }
    if (DAT_RETURN r = watch_cq(cq, &evd)) {
        fi_close(&cq->fid);
        return r;
    }
    evd.cq = cq;
    return DAT_SUCCESS;
}

void OfiTransport::cq_close(kit::Evd &evd) {
    if (evd.cq) {
        unwatch_cq(cq_ptr(evd));
        fi_close(&cq_ptr(evd)->fid);
    }
    evd.cq = nullptr;
}

DAT_RETURN OfiTransport::watch_cq(fid_cq *cq, kit::Evd *evd) {
    std::lock_guard<std::recursive_mutex> lock(cm_mu_);
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
        // pending_ never grows in the CM thread, where an allocation that
        // fails has no caller to report to.
        if (pending_.capacity() < cqs_.size() + 1) {
            pending_.reserve(2 * (cqs_.size() + 1));
            resting_.reserve(2 * (cqs_.size() + 1));
        }
        record = &cqs_.emplace(cq, WatchedCq{evd, fd}).first->second;
    } catch (const std::bad_alloc &) {
        DAT2_ERR("%s: no memory to watch a completion queue\n", ia_.name.c_str());
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    if (fd >= 0) {
        // A new queue is empty and its fd unsignaled: it can join the set
        // without a fi_trywait, and the thread need not be woken for it.
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.ptr = cq;
        if (::epoll_ctl(poll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
            const int err = errno;
            DAT2_ERR("%s: watching a completion queue (fd %d): epoll_ctl: %s\n", ia_.name.c_str(), fd,
                     std::strerror(err));
            cqs_.erase(cq);
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
        }
    } else {
        // No fd to wait on: the thread looks at the queue every round.
        record->pending = true;
        pending_.push_back(cq);
        kit::signal_fd(wake_fd_);
    }
    return DAT_SUCCESS;
}

void OfiTransport::unwatch_cq(fid_cq *cq) {
    std::lock_guard<std::recursive_mutex> lock(cm_mu_);
    auto found = cqs_.find(cq);
    if (found == cqs_.end())
        return;
    if (found->second.fd >= 0 && !found->second.resting)
        ::epoll_ctl(poll_fd_, EPOLL_CTL_DEL, found->second.fd, nullptr);
    if (found->second.pending)
        pending_.erase(std::find(pending_.begin(), pending_.end(), cq));
    if (found->second.resting)
        resting_.erase(std::find(resting_.begin(), resting_.end(), cq));
    cqs_.erase(found);
}

bool OfiTransport::consumer_polls(WatchedCq &w) {
    const std::uint32_t seen = w.evd->dequeues.load(std::memory_order_relaxed);
    const bool moved = seen != w.seen_dequeues;
    w.seen_dequeues = seen;
    return moved && w.evd->inside.load(std::memory_order_relaxed) == 0;
}

void OfiTransport::rest(fid_cq *cq, WatchedCq &w) {
    if (w.resting)
        return;
    if (w.fd >= 0)
        ::epoll_ctl(poll_fd_, EPOLL_CTL_DEL, w.fd, nullptr);
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
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.ptr = cq;
        if (::epoll_ctl(poll_fd_, EPOLL_CTL_ADD, w.fd, &ev) != 0) {
            // It was in the set before: only the memory for the entry can
            // lack. Looked at every round instead (pending, never leaves).
            const int err = errno;
            DAT2_ERR("%s: watching a completion queue again (fd %d): epoll_ctl: %s\n", ia_.name.c_str(), w.fd,
                     std::strerror(err));
            w.fd = -1;
        }
    }
}

int OfiTransport::cq_read(kit::Evd &evd, kit::Completion *out, int max) {
    int n = read_queue(cq_ptr(evd), nullptr, out, max);
    if (n < max && srq_queue_count_.load(std::memory_order_acquire) > 0)
        n += read_srq_queues(evd, out + n, max - n);
    return n;
}

int OfiTransport::read_srq_queues(kit::Evd &evd, kit::Completion *out, int max) {
    std::lock_guard<std::mutex> lock(srq_queues_mu_);
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

int OfiTransport::read_queue(fid_cq *cq, kit::Ep *taker, kit::Completion *out, int max) {
    fi_cq_data_entry entries[32];
    max = std::min(max, 32);
    ssize_t n = fi_cq_read(cq, entries, static_cast<std::size_t>(max));
    if (n > 0) {
        // Remote CQ data: a send with invalidate or the end of a write with
        // immediate data (translate()); the first part of a write with
        // immediate data reports nothing.
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
            DAT2_LOG(log::kGeneric, "%s: DTO failed: %s\n", ia_.name.c_str(), fi_text(err.err));
        return translate(err.op_context, 0, err.len, 0, status, taker, out[0]) ? 1 : 0;
    }
    if (n != -FI_EAGAIN)
        DAT2_ERR("%s: fi_cq_read: %s\n", ia_.name.c_str(), fi_text(static_cast<int>(n)));
    return 0;
}

// dat_evd_wait sleeps on the queue's own wait fd (libfabric tcp puts the
// sockets of the queue's endpoints in it), so the kernel wakes the consumer
// directly. The CM thread may still run progress on the queue and, doing so,
// clear the fd's signal after a completion arrived; it then finds the queue
// not empty (fi_trywait fails) and wakes the EVD itself.
int OfiTransport::cq_fd(kit::Evd &evd) {
    int fd = -1;
    if (fi_control(&cq_ptr(evd)->fid, FI_GETWAIT, &fd) != 0)
        return -1; // the CM thread wakes the EVD instead
    return fd;
}

bool OfiTransport::cq_arm(kit::Evd &evd) {
    fid *f = &cq_ptr(evd)->fid;
    return fi_trywait(fabric_, &f, 1) == FI_SUCCESS;
}

namespace {
std::uint64_t remote_access(DAT_MEM_PRIV_FLAGS privileges) {
    std::uint64_t access = 0;
    if (privileges & DAT_MEM_PRIV_REMOTE_READ_FLAG)
        access |= FI_REMOTE_READ;
    if (privileges & DAT_MEM_PRIV_REMOTE_WRITE_FLAG)
        access |= FI_REMOTE_WRITE;
    // DAT_IB_MEM_PRIV_REMOTE_ATOMIC: a fetching atomic reads and writes.
    if (privileges & DAT_MEM_PRIV_EXTENSION_BASE)
        access |= FI_REMOTE_READ | FI_REMOTE_WRITE;
    return access;
}
} // namespace

DAT_RETURN OfiTransport::register_range(std::uintptr_t addr, DAT_VLEN len, std::uint64_t access, fid_mr **out,
                                        DAT_RMR_CONTEXT *key_out) {
    fid_mr *mr = nullptr;
    int rc = fi_mr_reg(domain_, reinterpret_cast<void *>(addr), len, access, 0, 0, 0, &mr, nullptr);
    if (rc) {
        DAT2_ERR("%s: registering %#lx+%lu: %s\n", ia_.name.c_str(), static_cast<unsigned long>(addr),
                 static_cast<unsigned long>(len), fi_text(rc));
        return to_dat(rc, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION));
    }
    std::uint64_t key = fi_mr_key(mr);
    if (key > 0xffffffffull) {
        // DAT_RMR_CONTEXT is 32 bits wide.
        DAT2_ERR("%s: libfabric key %#llx does not fit an rmr_context\n", ia_.name.c_str(),
                 static_cast<unsigned long long>(key));
        fi_close(&mr->fid);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
    }
    *out = mr;
    *key_out = static_cast<DAT_RMR_CONTEXT>(key);
    return DAT_SUCCESS;
}

DAT_RETURN OfiTransport::mr_register(kit::Lmr &lmr) {
    const std::uint64_t access = FI_SEND | FI_RECV | FI_READ | FI_WRITE | remote_access(lmr.privileges);
    fid_mr *mr = nullptr;
    if (DAT_RETURN r = register_range(lmr.address, lmr.length, access, &mr, &lmr.rmr_context))
        return r;
    lmr.mr = mr;
    lmr.desc = fi_mr_desc(mr);
    return DAT_SUCCESS;
}

void OfiTransport::mr_deregister(kit::Lmr &lmr) {
    if (lmr.mr)
        fi_close(&static_cast<fid_mr *>(lmr.mr)->fid);
    lmr.mr = nullptr;
    lmr.desc = nullptr;
}

// Memory windows. libfabric has none: a window is a registration of its
// own of the bound range, under a new provider key (tcp: 1, 2, 3..., never
// reused) and with only the window's remote access, so the key of an
// earlier binding, or of the LMR, opens nothing more. Unbinding closes it.
// Not emulated: a window of DAT_RMR_SCOPE_EP is usable from any connection
// to this IA, as a PZ is not checked remotely (see README.md).
DAT_RETURN OfiTransport::rmr_open(kit::Rmr &) { return DAT_SUCCESS; }

void OfiTransport::rmr_close(kit::Rmr &rmr) { rmr_unbind(rmr, nullptr); }

DAT_RETURN OfiTransport::rmr_bind(kit::Rmr &rmr, kit::Ep &, const kit::Lmr &, std::uintptr_t addr, DAT_VLEN len,
                                  DAT_MEM_PRIV_FLAGS privileges) {
    fid_mr *mr = nullptr;
    DAT_RMR_CONTEXT key = 0;
    if (DAT_RETURN r = register_range(addr, len, remote_access(privileges), &mr, &key))
        return r;
    rmr_unbind(rmr, nullptr);
    rmr.tp = mr;
    rmr.rmr_context = key;
    return DAT_SUCCESS;
}

DAT_RETURN OfiTransport::rmr_unbind(kit::Rmr &rmr, kit::Ep *) {
    if (rmr.tp)
        fi_close(&static_cast<fid_mr *>(rmr.tp)->fid);
    rmr.tp = nullptr;
    return DAT_SUCCESS;
}

} // namespace dat2::ofi
