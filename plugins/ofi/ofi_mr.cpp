// SPDX-License-Identifier: BSD-3-Clause
// Memory: LMRs as FI_MR_BASIC registrations (virtual addresses, provider
// keys), and RMRs, which libfabric lacks, as registrations of their own.
#include "ofi.hpp"

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

DAT_RETURN OfiTransport::register_range(std::uintptr_t addr, DAT_VLEN len, std::uint64_t access, fid_mr **out,
                                        DAT_RMR_CONTEXT *key_out) {
    fid_mr *mr = nullptr;
    int rc = fi_mr_reg(domain_, reinterpret_cast<void *>(addr), len, access, 0, 0, 0, &mr, nullptr);
    if (rc) {
        DAT2_ERR("%s: registering %#lx+%lu: %s\n", name(), static_cast<unsigned long>(addr),
                 static_cast<unsigned long>(len), fi_text(rc));
        return to_dat(rc, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION));
    }
    std::uint64_t key = fi_mr_key(mr);
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

DAT_RETURN OfiTransport::mr_register(kit::Lmr &lmr, kit::Registration &out) {
    const std::uint64_t access = FI_SEND | FI_RECV | FI_READ | FI_WRITE | remote_access(lmr.privileges);
    fid_mr *mr = nullptr;
    if (DAT_RETURN r = register_range(lmr.address, lmr.length, access, &mr, &out.rmr_context))
        return r;
    out.mr = mr;
    out.desc = fi_mr_desc(mr);
    return DAT_SUCCESS;
}

void OfiTransport::mr_deregister(kit::Lmr &lmr) {
    if (lmr.mr)
        fi_close(&static_cast<fid_mr *>(lmr.mr)->fid);
}

// Memory windows. libfabric has none: a window is a registration of its
// own of the bound range, under a new provider key (tcp: 1, 2, 3..., never
// reused) and with only the window's remote access, so the key of an
// earlier binding, or of the LMR, opens nothing more. Unbinding closes it.
// Not emulated: a window of DAT_RMR_SCOPE_EP is usable from any connection
// to this IA, as a PZ is not checked remotely (see README.md).
DAT_RETURN OfiTransport::rmr_open(kit::Rmr &, void *&tp) {
    tp = new OfiRmr;
    return DAT_SUCCESS;
}

void OfiTransport::rmr_close(kit::Rmr &rmr) {
    rmr_unbind(rmr, nullptr);
    delete static_cast<OfiRmr *>(rmr.tp);
}

DAT_RETURN OfiTransport::rmr_bind(kit::Rmr &rmr, kit::Ep &, const kit::Lmr &, std::uintptr_t addr, DAT_VLEN len,
                                  DAT_MEM_PRIV_FLAGS privileges, DAT_RMR_CONTEXT &context) {
    fid_mr *mr = nullptr;
    if (DAT_RETURN r = register_range(addr, len, remote_access(privileges), &mr, &context))
        return r;
    rmr_unbind(rmr, nullptr);
    static_cast<OfiRmr *>(rmr.tp)->mr = mr;
    return DAT_SUCCESS;
}

DAT_RETURN OfiTransport::rmr_unbind(kit::Rmr &rmr, kit::Ep *) {
    auto *window = static_cast<OfiRmr *>(rmr.tp);
    if (window && window->mr) {
        fi_close(&window->mr->fid);
        window->mr = nullptr;
    }
    return DAT_SUCCESS;
}

} // namespace dat2::ofi
