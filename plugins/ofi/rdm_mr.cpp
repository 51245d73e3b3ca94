// SPDX-License-Identifier: BSD-3-Clause
// Memory of the RDM transport: LMRs as registrations whose remote address is
// the virtual address, and RMRs (windows), which libfabric lacks, as
// registrations of their own of the bound range.
#include "rdm.hpp"

#include "fi_attrs.hpp"
#include "log.hpp"

namespace dat2::ofi {

// ---- protection zones ------------------------------------------------------------------

RdmDomain *RdmTransport::open_domain() {
    auto dom = std::make_unique<RdmDomain>();
    const char *step = "fi_domain";
    int rc = fi_domain(fabric_, info_, &dom->domain, nullptr);
    if (rc == 0) {
        step = "fi_av_open";
        fi_av_attr av_attr{};
        av_attr.type = info_->domain_attr->av_type != FI_AV_UNSPEC ? info_->domain_attr->av_type : FI_AV_TABLE;
        rc = fi_av_open(dom->domain, &av_attr, &dom->av, nullptr);
    }
    if (rc == 0) {
        step = "fi_cq_open";
        fi_cq_attr cq_attr{};
        cq_attr.size = 64;
        cq_attr.format = FI_CQ_FORMAT_TAGGED;
        cq_attr.wait_obj = FI_WAIT_NONE;
        rc = fi_cq_open(dom->domain, &cq_attr, &dom->null_cq, nullptr);
    }
    if (rc) {
        DAT2_ERR("%s: a domain for a protection zone: %s: %s\n", name(), step, fi_text(rc));
        if (dom->av)
            fi_close(&dom->av->fid);
        if (dom->domain)
            fi_close(&dom->domain->fid);
        return nullptr;
    }
    dom->tag = static_cast<std::uint8_t>(1 + domains_.size() % rdmwire::kMaxPzTag);
    domains_.push_back(std::move(dom));
    return domains_.back().get();
}

// Domains are closed with the IA only: a domain whose PZ has no user left
// (no LMR, RMR binding or libfabric endpoint) is kept for the next new PZ,
// with no registration left in it. Its libfabric endpoints (shared by EPs of
// a pair of EVDs) live until those EVDs are freed, and keep it theirs.
RdmDomain *RdmTransport::domain_acquire(const kit::Pz *pz) {
    std::lock_guard<std::mutex> lock(dom_mu_);
    auto it = pz_domains_.find(pz);
    if (it != pz_domains_.end()) {
        ++it->second->users;
        return it->second;
    }
    RdmDomain *dom = nullptr;
    if (!spare_domains_.empty()) {
        dom = spare_domains_.back();
        spare_domains_.pop_back();
    } else if (!(dom = open_domain())) {
        return nullptr;
    }
    pz_domains_[pz] = dom;
    ++dom->users;
    return dom;
}

void RdmTransport::domain_release(RdmDomain *dom) {
    if (!dom)
        return;
    std::lock_guard<std::mutex> lock(dom_mu_);
    if (--dom->users > 0)
        return;
    for (auto it = pz_domains_.begin(); it != pz_domains_.end(); ++it)
        if (it->second == dom) {
            pz_domains_.erase(it); // its PZ may be freed now: a new one at its address is another PZ
            break;
        }
    spare_domains_.push_back(dom);
}

// ---- memory --------------------------------------------------------------------------

// Remote addresses are virtual addresses (open() requires FI_MR_VIRT_ADDR:
// DAT's rmr triplets carry no region base to compute an offset from).
// Without FI_MR_PROV_KEY the key is ours: a counter, never
// 0, so that every registration (an LMR, each binding of a window) has a
// key no earlier one had while the counter has not wrapped (2^32 registrations).
DAT_RETURN RdmTransport::register_range(RdmDomain &dom, std::uintptr_t addr, DAT_VLEN len, std::uint64_t access,
                                        fid_mr **out, DAT_RMR_CONTEXT *key_out) {
    fid_mr *mr = nullptr;
    std::uint64_t requested = 0;
    int rc;
    for (int tries = 0;; ++tries) {
        if (user_keys_) {
            requested = next_key_.fetch_add(1, std::memory_order_relaxed) & kKeyMask;
            if (requested == 0)
                requested = next_key_.fetch_add(1, std::memory_order_relaxed) & kKeyMask;
        }
        rc = fi_mr_reg(dom.domain, reinterpret_cast<void *>(addr), len, access, 0, requested, 0, &mr, nullptr);
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
    if (key > (pz_tags_ ? kKeyMask : 0xffffffffull)) {
        // DAT_RMR_CONTEXT is 32 bits wide, the PZ's tag in its top bits.
        DAT2_ERR("%s: libfabric key %#llx does not fit an rmr_context%s\n", name(),
                 static_cast<unsigned long long>(key), pz_tags_ ? " beside the PZ's tag" : "");
        fi_close(&mr->fid);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
    }
    *out = mr;
    *key_out = static_cast<DAT_RMR_CONTEXT>(pz_tags_ ? key | std::uint64_t(dom.tag) << kKeyBits : key);
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
    reg->dom = domain_acquire(lmr.pz);
    if (!reg->dom)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
    DAT_RMR_CONTEXT unused = 0;
    if (DAT_RETURN r = register_range(*reg->dom, lmr.address, lmr.length, FI_SEND | FI_RECV | FI_READ | FI_WRITE,
                                      &reg->local, &unused)) {
        domain_release(reg->dom);
        return r;
    }
    if (const std::uint64_t remote = remote_access(lmr.privileges)) {
        if (DAT_RETURN r = register_range(*reg->dom, lmr.address, lmr.length, remote, &reg->remote, &out.rmr_context)) {
            fi_close(&reg->local->fid);
            domain_release(reg->dom);
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
    domain_release(reg->dom);
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
    RdmDomain *dom = domain_acquire(rmr.pz);
    if (!dom)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
    fid_mr *mr = nullptr;
    if (DAT_RETURN r = register_range(*dom, addr, len, remote_access(privileges), &mr, &context)) {
        domain_release(dom);
        return r;
    }
    rmr_unbind(rmr, nullptr);
    auto *window = static_cast<RdmRmr *>(rmr.tp);
    window->mr = mr;
    window->dom = dom;
    return DAT_SUCCESS;
}

DAT_RETURN RdmTransport::rmr_unbind(kit::Rmr &rmr, kit::Ep *) {
    auto *window = static_cast<RdmRmr *>(rmr.tp);
    if (window && window->mr) {
        fi_close(&window->mr->fid);
        window->mr = nullptr;
        domain_release(window->dom);
        window->dom = nullptr;
    }
    return DAT_SUCCESS;
}

} // namespace dat2::ofi
