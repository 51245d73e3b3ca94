// SPDX-License-Identifier: BSD-3-Clause
// Completion queues behind DTO EVDs, and memory registration.
#include "ofi.hpp"

#include "log.hpp"

#include <algorithm>
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
    attr.format = FI_CQ_FORMAT_MSG;
    attr.wait_obj = FI_WAIT_FD;
    fid_cq *cq = nullptr;
    int rc = fi_cq_open(domain_, &attr, &cq, nullptr);
    if (rc) {
        DAT2_ERR("%s: fi_cq_open(size %zu): %s\n", ia_.name.c_str(), attr.size, fi_text(rc));
        return to_dat(rc, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD));
    }
    evd.cq = cq;
    {
        std::lock_guard<std::mutex> lock(cm_mu_);
        cqs_.push_back({cq, &evd, false});
    }
    kit::signal_fd(wake_fd_); // the CM thread watches it from now on
    return DAT_SUCCESS;
}

void OfiTransport::cq_close(kit::Evd &evd) {
    if (evd.cq) {
        std::lock_guard<std::mutex> lock(cm_mu_);
        cqs_.erase(std::remove_if(cqs_.begin(), cqs_.end(), [&](const WatchedCq &w) { return w.cq == cq_ptr(evd); }),
                   cqs_.end());
        fi_close(&cq_ptr(evd)->fid);
    }
    evd.cq = nullptr;
}

int OfiTransport::cq_read(kit::Evd &evd, kit::Completion *out, int max) {
    fi_cq_msg_entry entries[32];
    max = std::min(max, 32);
    ssize_t n = fi_cq_read(cq_ptr(evd), entries, static_cast<std::size_t>(max));
    if (n > 0) {
        for (ssize_t i = 0; i < n; ++i) {
            out[i].op = static_cast<kit::Op *>(entries[i].op_context);
            out[i].status = DAT_DTO_SUCCESS;
            out[i].length = static_cast<std::uint32_t>(entries[i].len);
        }
        return static_cast<int>(n);
    }
    if (n == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        if (fi_cq_readerr(cq_ptr(evd), &err, 0) != 1)
            return 0;
        out[0].op = static_cast<kit::Op *>(err.op_context);
        out[0].status = to_dto_status(err.err);
        out[0].length = static_cast<std::uint32_t>(err.len);
        if (out[0].status != DAT_DTO_ERR_FLUSHED)
            DAT2_LOG(log::kGeneric, "%s: DTO failed: %s\n", ia_.name.c_str(), fi_text(err.err));
        return out[0].op ? 1 : 0;
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

DAT_RETURN OfiTransport::mr_register(kit::Lmr &lmr) {
    std::uint64_t access = FI_SEND | FI_RECV | FI_READ | FI_WRITE;
    if (lmr.privileges & DAT_MEM_PRIV_REMOTE_READ_FLAG)
        access |= FI_REMOTE_READ;
    if (lmr.privileges & DAT_MEM_PRIV_REMOTE_WRITE_FLAG)
        access |= FI_REMOTE_WRITE;
    fid_mr *mr = nullptr;
    int rc = fi_mr_reg(domain_, reinterpret_cast<void *>(lmr.address), lmr.length, access, 0, 0, 0, &mr, nullptr);
    if (rc) {
        DAT2_ERR("%s: registering %#lx+%lu: %s\n", ia_.name.c_str(), static_cast<unsigned long>(lmr.address),
                 static_cast<unsigned long>(lmr.length), fi_text(rc));
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
    lmr.mr = mr;
    lmr.desc = fi_mr_desc(mr);
    lmr.rmr_context = static_cast<DAT_RMR_CONTEXT>(key);
    return DAT_SUCCESS;
}

void OfiTransport::mr_deregister(kit::Lmr &lmr) {
    if (lmr.mr)
        fi_close(&static_cast<fid_mr *>(lmr.mr)->fid);
    lmr.mr = nullptr;
    lmr.desc = nullptr;
}

} // namespace dat2::ofi
