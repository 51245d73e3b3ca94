// SPDX-License-Identifier: BSD-3-Clause
// Protection zones as libfabric domains, and memory: LMRs as FI_MR_BASIC
// registrations (virtual addresses, provider keys) in their PZ's domain,
// and RMRs, which libfabric lacks, as registrations of their own.
#include "ofi.hpp"

#include "fi_attrs.hpp"
#include "log.hpp"

#include <memory>

namespace dat2::ofi {

// ---- protection zones ----------------------------------------------------------
// One domain per PZ, made for its first LMR, EP, RMR or SRQ and closed with
// the last (the kit has no PZ call for transports). The first PZ takes the
// IA's own domain, so an IA with one PZ has one domain. EVDs serve EPs of
// any PZ: an EVD has a queue in each domain its EPs are in (OfiCq), which
// keeps a domain open after its PZ is gone; a PZ made later at the same
// address gets a domain of its own.

OfiDomain *OfiTransport::domain_acquire(const kit::Pz *pz) {
    std::lock_guard<std::mutex> lock(dom_mu_);
    if (!pz) {
        ++base_.users;
        return &base_;
    }
    auto it = pz_domains_.find(pz);
    if (it != pz_domains_.end()) {
        ++it->second->users;
        return it->second;
    }
    OfiDomain *dom = &base_;
    if (base_taken_) {
        auto made = std::make_unique<OfiDomain>();
        if (int rc = fi_domain(fabric_, info_, &made->domain, nullptr)) {
            DAT2_ERR("%s: fi_domain for a protection zone: %s\n", name(), fi_text(rc));
            return nullptr;
        }
        dom = made.release();
    }
    base_taken_ = true;
    try {
        pz_domains_[pz] = dom;
    } catch (...) {
        domain_close_if_unused(dom);
        throw;
    }
    ++dom->users;
    return dom;
}

void OfiTransport::domain_release(OfiDomain *dom) {
    if (!dom)
        return;
    std::lock_guard<std::mutex> lock(dom_mu_);
    if (--dom->users > 0)
        return;
    for (auto it = pz_domains_.begin(); it != pz_domains_.end(); ++it)
        if (it->second == dom) {
            pz_domains_.erase(it); // its PZ may be freed now: a new one gets a new domain
            break;
        }
    if (dom == &base_)
        base_taken_ = false;
    domain_close_if_unused(dom);
}

void OfiTransport::domain_close_if_unused(OfiDomain *dom) {
    if (dom == &base_ || dom->users > 0 || dom->cq_parts > 0)
        return;
    for (auto &[pz, d] : pz_domains_)
        if (d == dom)
            return;
    if (dom->null_cq)
        fi_close(&dom->null_cq->fid);
    fi_close(&dom->domain->fid);
    delete dom;
}

// ---- memory --------------------------------------------------------------------

DAT_RETURN OfiTransport::register_range(OfiDomain &dom, std::uintptr_t addr, DAT_VLEN len, std::uint64_t access,
                                        fid_mr **out, DAT_RMR_CONTEXT *key_out) {
    fid_mr *mr = nullptr;
    int rc = fi_mr_reg(dom.domain, reinterpret_cast<void *>(addr), len, access, 0, 0, 0, &mr, nullptr);
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
    OfiDomain *dom = domain_acquire(lmr.pz);
    if (!dom)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
    fid_mr *mr = nullptr;
    if (DAT_RETURN r = register_range(*dom, lmr.address, lmr.length, access, &mr, &out.rmr_context)) {
        domain_release(dom);
        return r;
    }
    out.mr = mr;
    out.desc = fi_mr_desc(mr);
    return DAT_SUCCESS;
}

void OfiTransport::mr_deregister(kit::Lmr &lmr) {
    if (!lmr.mr)
        return;
    fi_close(&static_cast<fid_mr *>(lmr.mr)->fid);
    OfiDomain *dom;
    {
        std::lock_guard<std::mutex> lock(dom_mu_);
        auto it = pz_domains_.find(lmr.pz);
        dom = it == pz_domains_.end() ? nullptr : it->second;
    }
    domain_release(dom);
}

// Memory windows. libfabric has none: a window is a registration of its
// own of the bound range, under a new provider key (tcp: 1, 2, 3..., never
// reused) and with only the window's remote access, so the key of an
// earlier binding, or of the LMR, opens nothing more. Unbinding closes it.
// The registration is in the window's PZ's domain: only endpoints of that
// PZ reach it. Not emulated: a window of DAT_RMR_SCOPE_EP is usable from
// any connection of its PZ (README.md).
DAT_RETURN OfiTransport::rmr_open(kit::Rmr &rmr, void *&tp) {
    auto window = std::make_unique<OfiRmr>();
    window->dom = domain_acquire(rmr.pz);
    if (!window->dom)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
    tp = window.release();
    return DAT_SUCCESS;
}

void OfiTransport::rmr_close(kit::Rmr &rmr) {
    rmr_unbind(rmr, nullptr);
    auto *window = static_cast<OfiRmr *>(rmr.tp);
    domain_release(window->dom);
    delete window;
}

DAT_RETURN OfiTransport::rmr_bind(kit::Rmr &rmr, kit::Ep &, const kit::Lmr &, std::uintptr_t addr, DAT_VLEN len,
                                  DAT_MEM_PRIV_FLAGS privileges, DAT_RMR_CONTEXT &context) {
    fid_mr *mr = nullptr;
    if (DAT_RETURN r =
            register_range(*static_cast<OfiRmr *>(rmr.tp)->dom, addr, len, remote_access(privileges), &mr, &context))
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
