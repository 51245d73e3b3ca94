// SPDX-License-Identifier: BSD-3-Clause
// The InfiniBand extensions' DTOs over libfabric (core/ext.cpp checks and
// reports them): RDMA write with immediate data as a write plus an empty
// message carrying remote CQ data, fetch and add and compare and swap as
// native 64-bit atomics (FI_SUM, FI_CSWAP) where the domain has them.
#include "ofi.hpp"

#include "log.hpp"

#include <algorithm>

namespace dat2::ofi {

namespace {

OfiEp &oep_of(kit::Ep &ep) { return *static_cast<OfiEp *>(ep.tp); }

std::uint64_t immed_cq_data(std::uint64_t length, std::uint32_t immed) { return kImmedTag | length << 32 | immed; }

bool atomic_supported(fid_domain *domain, fi_op op, std::uint64_t flags) {
    fi_atomic_attr attr{};
    return fi_query_atomic(domain, FI_UINT64, op, &attr, flags) == 0 && attr.count >= 1 && attr.size == 8;
}

} // namespace

kit::ExtCaps OfiTransport::find_ext_caps() {
    kit::ExtCaps caps;
    if (info_->caps & FI_ATOMIC) {
        caps.fetch_add = atomic_supported(domain_, FI_SUM, FI_FETCH_ATOMIC);
        caps.cmp_swap = atomic_supported(domain_, FI_CSWAP, FI_COMPARE_ATOMIC);
    }
    caps.rdma_write_immed =
        info_->domain_attr->cq_data_size >= sizeof(std::uint64_t) && (info_->tx_attr->msg_order & FI_ORDER_SAW);
    if (caps.rdma_write_immed) {
        immed_slots_ = std::make_unique<ImmedSlot[]>(kImmedSlots);
        for (std::size_t i = kImmedSlots; i-- > 0;) {
            immed_slots_[i].next_free = immed_free_;
            immed_free_ = &immed_slots_[i];
        }
        immed_lo_ = reinterpret_cast<std::uintptr_t>(immed_slots_.get());
        immed_hi_ = immed_lo_ + kImmedSlots * sizeof(ImmedSlot);
    }
    DAT2_LOG(log::kGeneric, "%s: extensions: write with immediate data %s, fetch and add %s, compare and swap %s\n",
             name(), caps.rdma_write_immed ? "yes" : "no", caps.fetch_add ? "yes" : "no", caps.cmp_swap ? "yes" : "no");
    return caps;
}

kit::Op *OfiTransport::immed_part_done(ImmedSlot &slot, DAT_DTO_COMPLETION_STATUS &status) {
    std::lock_guard<std::mutex> lock(immed_mu_);
    if (status != DAT_DTO_SUCCESS && slot.status == DAT_DTO_SUCCESS)
        slot.status = status;
    if (--slot.left > 0)
        return nullptr;
    status = slot.status;
    kit::Op *op = slot.op; // nullptr: the DTO was refused (post_write_immed)
    slot.op = nullptr;
    slot.next_free = immed_free_;
    immed_free_ = &slot;
    return op;
}

DAT_RETURN OfiTransport::post_ext(kit::Ep &ep, kit::Op &op, const kit::Segment *segs, int nsegs,
                                  const DAT_RMR_TRIPLET &remote, DAT_COMPLETION_FLAGS) {
    OfiEp &oep = oep_of(ep);
    std::lock_guard<kit::Lock> guard(oep.post_mu); // as post() (OfiEp::post_mu)
    if (!oep.ep)
        return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
    switch (op.ext) {
    case kit::ExtKind::kRdmaWriteImmed: return post_write_immed(oep, op, segs, nsegs, remote);
    case kit::ExtKind::kFetchAdd:
    case kit::ExtKind::kCmpSwap:
        if (nsegs != 1)
            return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
        return post_atomic(oep, op, segs[0], remote);
    case kit::ExtKind::kNone:
    case kit::ExtKind::kRmrBind: break;
    }
    return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
}

DAT_RETURN OfiTransport::post_write_immed(OfiEp &oep, kit::Op &op, const kit::Segment *segs, int nsegs,
                                          const DAT_RMR_TRIPLET &remote) {
    iovec iov[kit::kMaxIov];
    void *desc[kit::kMaxIov];
    const std::uint64_t total = to_iov(segs, nsegs, iov, desc);
    if (total > kMaxImmedLength)
        return DAT_ERROR(DAT_LENGTH_ERROR, 0);
    ImmedSlot *slot;
    {
        std::lock_guard<std::mutex> lock(immed_mu_);
        slot = immed_free_;
        if (!slot)
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
        immed_free_ = slot->next_free;
        slot->op = &op;
        slot->left = 2;
        slot->status = DAT_DTO_SUCCESS;
    }
    fi_rma_iov rma{remote.virtual_address, total, remote.rmr_context}; // as long as the data (post())
    fi_msg_rma wmsg{};
    wmsg.msg_iov = iov;
    wmsg.desc = desc;
    wmsg.iov_count = static_cast<std::size_t>(nsegs);
    wmsg.rma_iov = &rma;
    wmsg.rma_iov_count = 1;
    wmsg.context = &slot->write_ctx;
    // Completion as for any RDMA write (post()): on delivery, a write the
    // target refuses fails here.
    ssize_t rc = fi_writemsg(oep.ep, &wmsg, write_flags());
    if (rc) {
        {
            std::lock_guard<std::mutex> lock(immed_mu_);
            slot->op = nullptr;
            slot->next_free = immed_free_;
            immed_free_ = slot;
        }
        if (rc == -FI_EAGAIN)
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
        DAT2_ERR("%s: posting the write of a write with immediate data: %s\n", name(), fi_text(static_cast<int>(rc)));
        return to_dat(static_cast<int>(rc), DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    fi_msg smsg{};
    smsg.context = &slot->send_ctx;
    smsg.data = immed_cq_data(total, op.immed);
    // The write is on its way and cannot be taken back: a queue still full
    // after a while fails the DTO (its completion reports the error).
    for (int tries = 0;; ++tries) {
        rc = fi_sendmsg(oep.ep, &smsg, FI_COMPLETION | FI_REMOTE_CQ_DATA);
        if (rc != -FI_EAGAIN || tries == 1000)
            break;
        std::this_thread::yield();
    }
    if (rc == 0)
        return DAT_SUCCESS;
    DAT2_ERR("%s: posting the immediate data of a write with immediate data: %s\n", name(),
             fi_text(static_cast<int>(rc)));
    {
        // The DTO is refused; the write's completion, when it comes, only
        // returns the slot.
        std::lock_guard<std::mutex> lock(immed_mu_);
        slot->op = nullptr;
        if (--slot->left == 0) {
            slot->next_free = immed_free_;
            immed_free_ = slot;
        }
    }
    return rc == -FI_EAGAIN ? DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0)
                            : to_dat(static_cast<int>(rc), DAT_ERROR(DAT_INTERNAL_ERROR, 0));
}

DAT_RETURN OfiTransport::post_atomic(OfiEp &oep, kit::Op &op, const kit::Segment &result,
                                     const DAT_RMR_TRIPLET &remote) {
    const bool cswap = op.ext == kit::ExtKind::kCmpSwap;
    // The operands live in the DTO record until it completes.
    fi_ioc operand{&op.operand[cswap ? 1 : 0], 1};
    void *operand_desc = nullptr;
    fi_rma_ioc target{remote.virtual_address, 1, remote.rmr_context};
    fi_msg_atomic msg{};
    msg.msg_iov = &operand;
    msg.desc = &operand_desc;
    msg.iov_count = 1;
    msg.rma_iov = &target;
    msg.rma_iov_count = 1;
    msg.datatype = FI_UINT64;
    msg.op = cswap ? FI_CSWAP : FI_SUM;
    msg.context = &op;
    fi_ioc original{result.addr, 1};
    void *original_desc = result.desc;
    ssize_t rc;
    if (cswap) {
        fi_ioc compare{&op.operand[0], 1};
        void *compare_desc = nullptr;
        rc =
            fi_compare_atomicmsg(oep.ep, &msg, &compare, &compare_desc, 1, &original, &original_desc, 1, FI_COMPLETION);
    } else {
        rc = fi_fetch_atomicmsg(oep.ep, &msg, &original, &original_desc, 1, FI_COMPLETION);
    }
    if (rc == 0)
        return DAT_SUCCESS;
    return refused_post(name(), "an atomic operation", rc);
}

} // namespace dat2::ofi
