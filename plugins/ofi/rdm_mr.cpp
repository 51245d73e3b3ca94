// SPDX-License-Identifier: BSD-3-Clause
// Memory of the RDM transport: LMRs as registrations whose remote address is
// the virtual address, and RMRs (windows), which libfabric lacks, as
// registrations of their own of the bound range.
#include "rdm.hpp"

#include "log.hpp"

namespace dat2::ofi {

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

// Remote addresses are virtual addresses (open() requires FI_MR_VIRT_ADDR:
// DAT's rmr triplets carry no region base to compute an offset from).
// Without FI_MR_PROV_KEY the key is ours: a counter, never
// 0, so that every registration (an LMR, each binding of a window) has a
// key no earlier one had while the counter has not wrapped (2^32 registrations).
DAT_RETURN RdmTransport::register_range(std::uintptr_t addr, DAT_VLEN len, std::uint64_t access, fid_mr **out,
                                        DAT_RMR_CONTEXT *key_out) {
    fid_mr *mr = nullptr;
    std::uint64_t requested = 0;
    int rc;
    for (int tries = 0;; ++tries) {
        if (user_keys_) {
            requested = next_key_.fetch_add(1, std::memory_order_relaxed);
            if (requested == 0)
                requested = next_key_.fetch_add(1, std::memory_order_relaxed);
        }
        rc = fi_mr_reg(domain_, reinterpret_cast<void *>(addr), len, access, 0, requested, 0, &mr, nullptr);
        // A chosen key still in use (after the counter wrapped): the next one.
        if (rc != -FI_ENOKEY || !user_keys_ || tries > 16)
            break;
    }
    if (rc) {
        DAT2_ERR("%s: registering %#lx+%lu: %s\n", name(), static_cast<unsigned long>(addr),
                 static_cast<unsigned long>(len), fi_text(rc));
        return to_dat(rc, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION));
    }
    if (info_->domain_attr->mr_mode & FI_MR_ENDPOINT) {
        // Not asked for; a provider that imposes it anyway is refused here.
        fi_close(&mr->fid);
        DAT2_ERR("%s: provider binds registrations to endpoints (FI_MR_ENDPOINT): not supported\n", name());
        return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
    }
    const std::uint64_t key = fi_mr_key(mr);
    if (key > 0xffffffffull) {
        // DAT_RMR_CONTEXT is 32 bits wide.
        DAT2_ERR("%s: libfabric key %#llx does not fit an rmr_context\n", name(), static_cast<unsigned long long>(key));
        fi_close(&mr->fid);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
    }
    *out = mr;
    *key_out = static_cast<DAT_RMR_CONTEXT>(key);
    return DAT_SUCCESS;
}

// Two registrations: one for local use (the descriptor of our posts) and,
// when the LMR has remote privileges, one with only those, whose key is the
// rmr_context. A provider may widen what a registration for local use
// allows remotely (rxm adds FI_REMOTE_READ to any region registered for
// FI_SEND, which its rendezvous protocol reads): the key handed out never
// opens more than the LMR's remote privileges.
DAT_RETURN RdmTransport::mr_register(kit::Lmr &lmr, kit::Registration &out) {
    auto reg = std::make_unique<RdmMr>();
    DAT_RMR_CONTEXT unused = 0;
    if (DAT_RETURN r = register_range(lmr.address, lmr.length, FI_SEND | FI_RECV | FI_READ | FI_WRITE, &reg->local,
                                      &unused))
        return r;
    if (const std::uint64_t remote = remote_access(lmr.privileges)) {
        if (DAT_RETURN r = register_range(lmr.address, lmr.length, remote, &reg->remote, &out.rmr_context)) {
            fi_close(&reg->local->fid);
            return r;
        }
    }
    out.desc = fi_mr_desc(reg->local);
    out.mr = reg.release();
    return DAT_SUCCESS;
}

void RdmTransport::mr_deregister(kit::Lmr &lmr) {
    auto *reg = static_cast<RdmMr *>(lmr.mr);
    if (!reg)
        return;
    if (reg->remote)
        fi_close(&reg->remote->fid);
    fi_close(&reg->local->fid);
    delete reg;
}

// A window is a registration of its own of the bound range under a new key
// with only the window's remote access: the key of an earlier binding, or of
// the LMR, opens nothing more. Unbinding closes it.
DAT_RETURN RdmTransport::rmr_open(kit::Rmr &, void *&tp) {
    tp = new RdmRmr;
    return DAT_SUCCESS;
}

void RdmTransport::rmr_close(kit::Rmr &rmr) {
    rmr_unbind(rmr, nullptr);
    delete static_cast<RdmRmr *>(rmr.tp);
}

DAT_RETURN RdmTransport::rmr_bind(kit::Rmr &rmr, kit::Ep &, const kit::Lmr &, std::uintptr_t addr, DAT_VLEN len,
                                  DAT_MEM_PRIV_FLAGS privileges, DAT_RMR_CONTEXT &context) {
    fid_mr *mr = nullptr;
    if (DAT_RETURN r = register_range(addr, len, remote_access(privileges), &mr, &context))
        return r;
    rmr_unbind(rmr, nullptr);
    static_cast<RdmRmr *>(rmr.tp)->mr = mr;
    return DAT_SUCCESS;
}

DAT_RETURN RdmTransport::rmr_unbind(kit::Rmr &rmr, kit::Ep *) {
    auto *window = static_cast<RdmRmr *>(rmr.tp);
    if (window && window->mr) {
        fi_close(&window->mr->fid);
        window->mr = nullptr;
    }
    return DAT_SUCCESS;
}

} // namespace dat2::ofi
