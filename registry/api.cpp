// SPDX-License-Identifier: BSD-3-Clause
// The DAT consumer API: every call validates what the registry can and
// dispatches through the DAT_PROVIDER table of the handle it is given.
#include "boundary.hpp"
#include "log.hpp"
#include "registry.hpp"

#include <dat2/udat.h>
#include "dat2_internal.h"
#include <dat2/dat_registry.h>

#include <cstdarg>
#include <cstdint>
#include <cstring>
#include <new>

#define DAT2_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using dat2::guarded;

// No address below this is mapped, so a handle below it is either a consumer
// IA handle (a small integer) or garbage; never a provider object.
constexpr std::uintptr_t kLowestObject = 4096;

// The first word of a handle. A consumer's handle need not be aligned (a
// stale or bogus pointer): read it bytewise, never as a misaligned pointer load.
inline const DAT_PROVIDER *provider_of(const void *handle) noexcept {
    const DAT_PROVIDER *p;
    std::memcpy(&p, handle, sizeof p);
    return p;
}

// Calls slot `Slot` of the provider owning `handle` (any non-IA handle).
template <auto Slot, class... Args>
inline DAT_RETURN call(const char *fn, const void *handle, DAT_RETURN_SUBTYPE invalid, Args... args) noexcept {
    if (reinterpret_cast<std::uintptr_t>(handle) < kLowestObject || !dat2::registry::word_readable(handle))
        return DAT_ERROR(DAT_INVALID_HANDLE, invalid);
    const DAT_PROVIDER *p = provider_of(handle);
    if (!dat2::registry::known_provider(p))
        return DAT_ERROR(DAT_INVALID_HANDLE, invalid);
    dat2::registry::remember_page(handle);
    auto f = p->*Slot;
    if (!f)
        return DAT_NOT_IMPLEMENTED;
    return guarded(fn, [&] { return f(args...); });
}

template <auto Slot, class... Args>
__attribute__((noinline)) DAT_RETURN call_out_of_line(const char *fn, const void *handle, DAT_RETURN_SUBTYPE invalid,
                                                      Args... args) noexcept {
    return call<Slot>(fn, handle, invalid, args...);
}

// call() for the DTO posts and dat_evd_dequeue: the slots of a table whose
// library guards them itself (g_guarded_first) are called as a tail call,
// with no guard here; any other table, and a handle on a page not known to
// be mapped (call() asks the kernel), goes through call(), out of line so
// that this path saves no registers. Not noexcept: that would put a frame
// around the tail call, and the slot it reaches lets no exception out.
template <auto Slot, class... Args>
inline DAT_RETURN call_dto(const char *fn, const void *handle, DAT_RETURN_SUBTYPE invalid, Args... args) {
    if (reinterpret_cast<std::uintptr_t>(handle) >= kLowestObject && dat2::registry::page_known(handle)) {
        const DAT_PROVIDER *guarded_table = dat2::registry::g_guarded_first.load(std::memory_order_acquire);
        const DAT_PROVIDER *p = provider_of(handle);
        if (guarded_table && p == guarded_table && p->*Slot)
            return (p->*Slot)(args...);
    }
    return call_out_of_line<Slot>(fn, handle, invalid, args...);
}

// Calls slot `Slot` with the provider's IA pointer in place of the consumer's
// small-integer IA handle.
template <auto Slot, class... Args> inline DAT_RETURN call_ia(const char *fn, DAT_IA_HANDLE ia, Args... args) noexcept {
    return guarded(fn, [&]() -> DAT_RETURN {
        DAT_IA_HANDLE provider_ia = nullptr;
        if (reinterpret_cast<std::uintptr_t>(ia) >= kLowestObject ||
            dat2::registry::translate_ia(ia, &provider_ia) != DAT_SUCCESS)
            return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
        auto f = provider_of(provider_ia)->*Slot;
        if (!f)
            return DAT_NOT_IMPLEMENTED;
        return f(provider_ia, args...);
    });
}

// For calls that take any handle: a consumer IA handle is translated.
inline DAT_RETURN any_handle(DAT_HANDLE h, DAT_HANDLE *out) noexcept {
    const auto v = reinterpret_cast<std::uintptr_t>(h);
    if (v == 0)
        return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    if (v < kLowestObject) {
        DAT_IA_HANDLE ia = nullptr;
        if (dat2::registry::translate_ia(static_cast<DAT_IA_HANDLE>(h), &ia) != DAT_SUCCESS)
            return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
        *out = ia;
        return DAT_SUCCESS;
    }
    if (!dat2::registry::word_readable(h) || !dat2::registry::known_provider(provider_of(h)))
        return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    dat2::registry::remember_page(h);
    *out = h;
    return DAT_SUCCESS;
}

using P = DAT_PROVIDER;

} // namespace

#define FN __func__

// ---- registry ---------------------------------------------------------------

DAT2_EXPORT DAT_RETURN dat_ia_openv(const DAT_NAME_PTR name, DAT_COUNT qlen, DAT_EVD_HANDLE *evd, DAT_IA_HANDLE *ia,
                                    DAT_UINT32 major, DAT_UINT32 minor, DAT_BOOLEAN thread_safety) {
    return guarded(FN, [&] { return dat2::registry::ia_open(name, qlen, evd, ia, major, minor, thread_safety); });
}

// libdat.so.1's way in (private version DAT2_PRIVATE_DAT12): dat_ia_openv
// for a DAT 1.x program, which may open u2.0 entries as well as u1.x ones.
// A DAT 2.0 program asking dat_ia_openv for API 1 is still refused.
DAT2_EXPORT DAT_RETURN dat12_ia_openv(const DAT_NAME_PTR name, DAT_COUNT qlen, DAT_EVD_HANDLE *evd, DAT_IA_HANDLE *ia,
                                      DAT_UINT32 major, DAT_UINT32 minor, DAT_BOOLEAN thread_safety) {
    return guarded(FN, [&] { return dat2::registry::ia_open(name, qlen, evd, ia, major, minor, thread_safety, true); });
}

DAT2_EXPORT DAT_RETURN dat_ia_close(DAT_IA_HANDLE ia, DAT_CLOSE_FLAGS flags) {
    return guarded(FN, [&] { return dat2::registry::ia_close(ia, flags); });
}

DAT2_EXPORT DAT_RETURN dat_registry_add_provider(const DAT_PROVIDER *provider, const DAT_PROVIDER_INFO *info) {
    return guarded(FN, [&] { return dat2::registry::add_provider(provider, info); });
}

DAT2_EXPORT DAT_RETURN dat_registry_remove_provider(const DAT_PROVIDER *provider, const DAT_PROVIDER_INFO *info) {
    return guarded(FN, [&] { return dat2::registry::remove_provider(provider, info); });
}

DAT2_EXPORT DAT_RETURN dat_registry_list_providers(DAT_COUNT max_to_return, DAT_COUNT *entries_returned,
                                                   DAT_PROVIDER_INFO *(dat_provider_list[])) {
    return guarded(FN,
                   [&] { return dat2::registry::list_providers(max_to_return, entries_returned, dat_provider_list); });
}

DAT2_EXPORT DAT_RETURN dat_registry_providers_related(const DAT_NAME_PTR name1, const DAT_NAME_PTR name2,
                                                      DAT_HA_RELATIONSHIP *answer) {
    return guarded(FN, [&] { return dat2::registry::providers_related(name1, name2, answer); });
}

// Bidirectional, as OFED's: a consumer IA handle gives the provider's IA
// pointer, a provider's IA pointer gives the consumer's handle.
DAT2_EXPORT DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE handle, DAT_IA_HANDLE *ia_handle_p) {
    if (!ia_handle_p)
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    return guarded(FN, [&] { return dat2::registry::translate_ia(handle, ia_handle_p); });
}

// ---- handles of any type ---------------------------------------------------

DAT2_EXPORT DAT_RETURN dat_set_consumer_context(DAT_HANDLE h, DAT_CONTEXT context) {
    DAT_HANDLE ph = nullptr;
    if (DAT_RETURN r = any_handle(h, &ph))
        return r;
    return call<&P::set_consumer_context_func>(FN, ph, DAT_INVALID_HANDLE1, ph, context);
}

DAT2_EXPORT DAT_RETURN dat_get_consumer_context(DAT_HANDLE h, DAT_CONTEXT *context) {
    DAT_HANDLE ph = nullptr;
    if (DAT_RETURN r = any_handle(h, &ph))
        return r;
    return call<&P::get_consumer_context_func>(FN, ph, DAT_INVALID_HANDLE1, ph, context);
}

DAT2_EXPORT DAT_RETURN dat_get_handle_type(DAT_HANDLE h, DAT_HANDLE_TYPE *type) {
    DAT_HANDLE ph = nullptr;
    if (DAT_RETURN r = any_handle(h, &ph))
        return r;
    return call<&P::get_handle_type_func>(FN, ph, DAT_INVALID_HANDLE1, ph, type);
}

DAT2_EXPORT DAT_RETURN dat_extension_op(DAT_HANDLE h, DAT_EXTENDED_OP op, ...) {
    va_list args;
    va_start(args, op);
    DAT_RETURN r;
    if (!h && (op & DAT_OPEN_EXTENSION_BASE)) {
        // Opened by IA name (dat_ib_open_query): the name is the first argument.
        const char *name = va_arg(args, const char *);
        r = guarded(FN, [&] { return dat2::registry::extension_open(name, op, args); });
    } else {
        DAT_HANDLE ph = nullptr;
        r = any_handle(h, &ph);
        if (r == DAT_SUCCESS) {
            r = DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
            if (op > 0 && (op & DAT_CLOSE_EXTENSION_BASE)) {
                va_list close_args;
                va_copy(close_args, args);
                r = guarded(FN, [&] { return dat2::registry::extension_close(ph, op, close_args); });
                va_end(close_args);
            }
            // No close op at all, or one the extension does not define:
            // the provider answers (an operation it does not know is its
            // DAT_INVALID_PARAMETER). A close query on a handle no open op
            // gave stays refused: the provider would close an IA the
            // registry holds.
            if (r == DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1) && op != DAT_CLOSE_EXTENSION_BASE)
                r = call<&P::handle_extendedop_func>(FN, ph, DAT_INVALID_HANDLE1, ph, op, args);
        }
    }
    va_end(args);
    return r;
}

// ---- IA ----------------------------------------------------------------------

DAT2_EXPORT DAT_RETURN dat_ia_query(DAT_IA_HANDLE ia, DAT_EVD_HANDLE *async_evd, DAT_IA_ATTR_MASK ia_mask,
                                    DAT_IA_ATTR *ia_attr, DAT_PROVIDER_ATTR_MASK provider_mask,
                                    DAT_PROVIDER_ATTR *provider_attr) {
    return call_ia<&P::ia_query_func>(FN, ia, async_evd, ia_mask, ia_attr, provider_mask, provider_attr);
}

// ---- CR ----------------------------------------------------------------------

DAT2_EXPORT DAT_RETURN dat_cr_query(DAT_CR_HANDLE cr, DAT_CR_PARAM_MASK mask, DAT_CR_PARAM *param) {
    return call<&P::cr_query_func>(FN, cr, DAT_INVALID_HANDLE_CR, cr, mask, param);
}

DAT2_EXPORT DAT_RETURN dat_cr_accept(DAT_CR_HANDLE cr, DAT_EP_HANDLE ep, DAT_COUNT size, const DAT_PVOID data) {
    return call<&P::cr_accept_func>(FN, cr, DAT_INVALID_HANDLE_CR, cr, ep, size, data);
}

DAT2_EXPORT DAT_RETURN dat_cr_reject(DAT_CR_HANDLE cr, DAT_COUNT size, const DAT_PVOID data) {
    return call<&P::cr_reject_func>(FN, cr, DAT_INVALID_HANDLE_CR, cr, size, data);
}

DAT2_EXPORT DAT_RETURN dat_cr_handoff(DAT_CR_HANDLE cr, DAT_CONN_QUAL qual) {
    return call<&P::cr_handoff_func>(FN, cr, DAT_INVALID_HANDLE_CR, cr, qual);
}

// ---- EVD ---------------------------------------------------------------------

DAT2_EXPORT DAT_RETURN dat_evd_create(DAT_IA_HANDLE ia, DAT_COUNT qlen, DAT_CNO_HANDLE cno, DAT_EVD_FLAGS flags,
                                      DAT_EVD_HANDLE *evd) {
    return call_ia<&P::evd_create_func>(FN, ia, qlen, cno, flags, evd);
}

DAT2_EXPORT DAT_RETURN dat_evd_resize(DAT_EVD_HANDLE evd, DAT_COUNT qlen) {
    return call<&P::evd_resize_func>(FN, evd, DAT_INVALID_HANDLE_EVD_REQUEST, evd, qlen);
}

DAT2_EXPORT DAT_RETURN dat_evd_post_se(DAT_EVD_HANDLE evd, const DAT_EVENT *event) {
    return call<&P::evd_post_se_func>(FN, evd, DAT_INVALID_HANDLE_EVD_REQUEST, evd, event);
}

DAT2_EXPORT DAT_RETURN dat_evd_dequeue(DAT_EVD_HANDLE evd, DAT_EVENT *event) {
    return call_dto<&P::evd_dequeue_func>(FN, evd, DAT_INVALID_HANDLE_EVD_REQUEST, evd, event);
}

DAT2_EXPORT DAT_RETURN dat_evd_query(DAT_EVD_HANDLE evd, DAT_EVD_PARAM_MASK mask, DAT_EVD_PARAM *param) {
    return call<&P::evd_query_func>(FN, evd, DAT_INVALID_HANDLE_EVD_REQUEST, evd, mask, param);
}

DAT2_EXPORT DAT_RETURN dat_evd_free(DAT_EVD_HANDLE evd) {
    return call<&P::evd_free_func>(FN, evd, DAT_INVALID_HANDLE_EVD_REQUEST, evd);
}

DAT2_EXPORT DAT_RETURN dat_evd_modify_cno(DAT_EVD_HANDLE evd, DAT_CNO_HANDLE cno) {
    return call<&P::evd_modify_cno_func>(FN, evd, DAT_INVALID_HANDLE_EVD_REQUEST, evd, cno);
}

DAT2_EXPORT DAT_RETURN dat_evd_enable(DAT_EVD_HANDLE evd) {
    return call<&P::evd_enable_func>(FN, evd, DAT_INVALID_HANDLE_EVD_REQUEST, evd);
}

DAT2_EXPORT DAT_RETURN dat_evd_disable(DAT_EVD_HANDLE evd) {
    return call<&P::evd_disable_func>(FN, evd, DAT_INVALID_HANDLE_EVD_REQUEST, evd);
}

DAT2_EXPORT DAT_RETURN dat_evd_wait(DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout, DAT_COUNT threshold, DAT_EVENT *event,
                                    DAT_COUNT *nmore) {
    return call<&P::evd_wait_func>(FN, evd, DAT_INVALID_HANDLE_EVD_REQUEST, evd, timeout, threshold, event, nmore);
}

DAT2_EXPORT DAT_RETURN dat_evd_set_unwaitable(DAT_EVD_HANDLE evd) {
    return call<&P::evd_set_unwaitable_func>(FN, evd, DAT_INVALID_HANDLE_EVD_REQUEST, evd);
}

DAT2_EXPORT DAT_RETURN dat_evd_clear_unwaitable(DAT_EVD_HANDLE evd) {
    return call<&P::evd_clear_unwaitable_func>(FN, evd, DAT_INVALID_HANDLE_EVD_REQUEST, evd);
}

// ---- CNO ---------------------------------------------------------------------

DAT2_EXPORT DAT_RETURN dat_cno_create(DAT_IA_HANDLE ia, DAT_OS_WAIT_PROXY_AGENT agent, DAT_CNO_HANDLE *cno) {
    return call_ia<&P::cno_create_func>(FN, ia, agent, cno);
}

DAT2_EXPORT DAT_RETURN dat_cno_fd_create(DAT_IA_HANDLE ia, DAT_FD *fd, DAT_CNO_HANDLE *cno) {
    return call_ia<&P::cno_fd_create_func>(FN, ia, fd, cno);
}

DAT2_EXPORT DAT_RETURN dat_cno_modify_agent(DAT_CNO_HANDLE cno, DAT_OS_WAIT_PROXY_AGENT agent) {
    return call<&P::cno_modify_agent_func>(FN, cno, DAT_INVALID_HANDLE_CNO, cno, agent);
}

DAT2_EXPORT DAT_RETURN dat_cno_query(DAT_CNO_HANDLE cno, DAT_CNO_PARAM_MASK mask, DAT_CNO_PARAM *param) {
    return call<&P::cno_query_func>(FN, cno, DAT_INVALID_HANDLE_CNO, cno, mask, param);
}

DAT2_EXPORT DAT_RETURN dat_cno_free(DAT_CNO_HANDLE cno) {
    return call<&P::cno_free_func>(FN, cno, DAT_INVALID_HANDLE_CNO, cno);
}

DAT2_EXPORT DAT_RETURN dat_cno_wait(DAT_CNO_HANDLE cno, DAT_TIMEOUT timeout, DAT_EVD_HANDLE *evd) {
    return call<&P::cno_wait_func>(FN, cno, DAT_INVALID_HANDLE_CNO, cno, timeout, evd);
}

DAT2_EXPORT DAT_RETURN dat_cno_trigger(DAT_CNO_HANDLE cno, DAT_EVD_HANDLE *evd) {
    return call<&P::cno_trigger_func>(FN, cno, DAT_INVALID_HANDLE_CNO, cno, evd);
}

// ---- EP ----------------------------------------------------------------------

DAT2_EXPORT DAT_RETURN dat_ep_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv_evd,
                                     DAT_EVD_HANDLE req_evd, DAT_EVD_HANDLE conn_evd, const DAT_EP_ATTR *attr,
                                     DAT_EP_HANDLE *ep) {
    return call_ia<&P::ep_create_func>(FN, ia, pz, recv_evd, req_evd, conn_evd, attr, ep);
}

DAT2_EXPORT DAT_RETURN dat_ep_create_with_srq(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv_evd,
                                              DAT_EVD_HANDLE req_evd, DAT_EVD_HANDLE conn_evd, DAT_SRQ_HANDLE srq,
                                              const DAT_EP_ATTR *attr, DAT_EP_HANDLE *ep) {
    return call_ia<&P::ep_create_with_srq_func>(FN, ia, pz, recv_evd, req_evd, conn_evd, srq, attr, ep);
}

DAT2_EXPORT DAT_RETURN dat_ep_query(DAT_EP_HANDLE ep, DAT_EP_PARAM_MASK mask, DAT_EP_PARAM *param) {
    return call<&P::ep_query_func>(FN, ep, DAT_INVALID_HANDLE_EP, ep, mask, param);
}

DAT2_EXPORT DAT_RETURN dat_ep_modify(DAT_EP_HANDLE ep, DAT_EP_PARAM_MASK mask, const DAT_EP_PARAM *param) {
    return call<&P::ep_modify_func>(FN, ep, DAT_INVALID_HANDLE_EP, ep, mask, param);
}

DAT2_EXPORT DAT_RETURN dat_ep_connect(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual,
                                      DAT_TIMEOUT timeout, DAT_COUNT size, const DAT_PVOID data, DAT_QOS qos,
                                      DAT_CONNECT_FLAGS flags) {
    return call<&P::ep_connect_func>(FN, ep, DAT_INVALID_HANDLE_EP, ep, addr, qual, timeout, size, data, qos, flags);
}

DAT2_EXPORT DAT_RETURN dat_ep_dup_connect(DAT_EP_HANDLE ep, DAT_EP_HANDLE dup, DAT_TIMEOUT timeout, DAT_COUNT size,
                                          const DAT_PVOID data, DAT_QOS qos) {
    return call<&P::ep_dup_connect_func>(FN, ep, DAT_INVALID_HANDLE_EP, ep, dup, timeout, size, data, qos);
}

DAT2_EXPORT DAT_RETURN dat_ep_common_connect(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR addr, DAT_TIMEOUT timeout,
                                             DAT_COUNT size, const DAT_PVOID data) {
    return call<&P::ep_common_connect_func>(FN, ep, DAT_INVALID_HANDLE_EP, ep, addr, timeout, size, data);
}

DAT2_EXPORT DAT_RETURN dat_ep_disconnect(DAT_EP_HANDLE ep, DAT_CLOSE_FLAGS flags) {
    return call<&P::ep_disconnect_func>(FN, ep, DAT_INVALID_HANDLE_EP, ep, flags);
}

DAT2_EXPORT DAT_RETURN dat_ep_post_send(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                                        DAT_COMPLETION_FLAGS flags) {
    return call_dto<&P::ep_post_send_func>(FN, ep, DAT_INVALID_HANDLE_EP, ep, n, iov, cookie, flags);
}

DAT2_EXPORT DAT_RETURN dat_ep_post_send_with_invalidate(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                                        DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags,
                                                        DAT_BOOLEAN invalidate, DAT_RMR_CONTEXT rmr_context) {
    return call<&P::ep_post_send_with_invalidate_func>(FN, ep, DAT_INVALID_HANDLE_EP, ep, n, iov, cookie, flags,
                                                       invalidate, rmr_context);
}

DAT2_EXPORT DAT_RETURN dat_ep_post_recv(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                                        DAT_COMPLETION_FLAGS flags) {
    return call_dto<&P::ep_post_recv_func>(FN, ep, DAT_INVALID_HANDLE_EP, ep, n, iov, cookie, flags);
}

DAT2_EXPORT DAT_RETURN dat_ep_post_rdma_read(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                                             const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags) {
    return call_dto<&P::ep_post_rdma_read_func>(FN, ep, DAT_INVALID_HANDLE_EP, ep, n, iov, cookie, remote, flags);
}

DAT2_EXPORT DAT_RETURN dat_ep_post_rdma_read_to_rmr(DAT_EP_HANDLE ep, const DAT_RMR_TRIPLET *local,
                                                    DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote,
                                                    DAT_COMPLETION_FLAGS flags) {
    return call<&P::ep_post_rdma_read_to_rmr_func>(FN, ep, DAT_INVALID_HANDLE_EP, ep, local, cookie, remote, flags);
}

DAT2_EXPORT DAT_RETURN dat_ep_post_rdma_write(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                              DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote,
                                              DAT_COMPLETION_FLAGS flags) {
    return call_dto<&P::ep_post_rdma_write_func>(FN, ep, DAT_INVALID_HANDLE_EP, ep, n, iov, cookie, remote, flags);
}

DAT2_EXPORT DAT_RETURN dat_ep_get_status(DAT_EP_HANDLE ep, DAT_EP_STATE *state, DAT_BOOLEAN *recv_idle,
                                         DAT_BOOLEAN *request_idle) {
    return call<&P::ep_get_status_func>(FN, ep, DAT_INVALID_HANDLE_EP, ep, state, recv_idle, request_idle);
}

DAT2_EXPORT DAT_RETURN dat_ep_free(DAT_EP_HANDLE ep) {
    return call<&P::ep_free_func>(FN, ep, DAT_INVALID_HANDLE_EP, ep);
}

DAT2_EXPORT DAT_RETURN dat_ep_reset(DAT_EP_HANDLE ep) {
    return call<&P::ep_reset_func>(FN, ep, DAT_INVALID_HANDLE_EP, ep);
}

DAT2_EXPORT DAT_RETURN dat_ep_recv_query(DAT_EP_HANDLE ep, DAT_COUNT *nbufs, DAT_COUNT *bufs_alloc) {
    return call<&P::ep_recv_query_func>(FN, ep, DAT_INVALID_HANDLE_EP, ep, nbufs, bufs_alloc);
}

DAT2_EXPORT DAT_RETURN dat_ep_set_watermark(DAT_EP_HANDLE ep, DAT_COUNT soft_hw, DAT_COUNT hard_hw) {
    return call<&P::ep_set_watermark_func>(FN, ep, DAT_INVALID_HANDLE_EP, ep, soft_hw, hard_hw);
}

// ---- LMR / RMR -----------------------------------------------------------------

DAT2_EXPORT DAT_RETURN dat_lmr_create(DAT_IA_HANDLE ia, DAT_MEM_TYPE type, DAT_REGION_DESCRIPTION region,
                                      DAT_VLEN length, DAT_PZ_HANDLE pz, DAT_MEM_PRIV_FLAGS privileges,
                                      DAT_VA_TYPE va_type, DAT_LMR_HANDLE *lmr, DAT_LMR_CONTEXT *lmr_context,
                                      DAT_RMR_CONTEXT *rmr_context, DAT_VLEN *registered_length,
                                      DAT_VADDR *registered_address) {
    return call_ia<&P::lmr_create_func>(FN, ia, type, region, length, pz, privileges, va_type, lmr, lmr_context,
                                        rmr_context, registered_length, registered_address);
}

DAT2_EXPORT DAT_RETURN dat_lmr_query(DAT_LMR_HANDLE lmr, DAT_LMR_PARAM_MASK mask, DAT_LMR_PARAM *param) {
    return call<&P::lmr_query_func>(FN, lmr, DAT_INVALID_HANDLE_LMR, lmr, mask, param);
}

DAT2_EXPORT DAT_RETURN dat_lmr_free(DAT_LMR_HANDLE lmr) {
    return call<&P::lmr_free_func>(FN, lmr, DAT_INVALID_HANDLE_LMR, lmr);
}

DAT2_EXPORT DAT_RETURN dat_lmr_sync_rdma_read(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET *iov, DAT_VLEN n) {
    return call_ia<&P::lmr_sync_rdma_read_func>(FN, ia, iov, n);
}

DAT2_EXPORT DAT_RETURN dat_lmr_sync_rdma_write(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET *iov, DAT_VLEN n) {
    return call_ia<&P::lmr_sync_rdma_write_func>(FN, ia, iov, n);
}

DAT2_EXPORT DAT_RETURN dat_rmr_create(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE *rmr) {
    return call<&P::rmr_create_func>(FN, pz, DAT_INVALID_HANDLE_PZ, pz, rmr);
}

DAT2_EXPORT DAT_RETURN dat_rmr_create_for_ep(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE *rmr) {
    return call<&P::rmr_create_for_ep_func>(FN, pz, DAT_INVALID_HANDLE_PZ, pz, rmr);
}

DAT2_EXPORT DAT_RETURN dat_rmr_query(DAT_RMR_HANDLE rmr, DAT_RMR_PARAM_MASK mask, DAT_RMR_PARAM *param) {
    return call<&P::rmr_query_func>(FN, rmr, DAT_INVALID_HANDLE_RMR, rmr, mask, param);
}

DAT2_EXPORT DAT_RETURN dat_rmr_bind(DAT_RMR_HANDLE rmr, DAT_LMR_HANDLE lmr, const DAT_LMR_TRIPLET *iov,
                                    DAT_MEM_PRIV_FLAGS privileges, DAT_VA_TYPE va_type, DAT_EP_HANDLE ep,
                                    DAT_RMR_COOKIE cookie, DAT_COMPLETION_FLAGS flags, DAT_RMR_CONTEXT *context) {
    return call<&P::rmr_bind_func>(FN, rmr, DAT_INVALID_HANDLE_RMR, rmr, lmr, iov, privileges, va_type, ep, cookie,
                                   flags, context);
}

DAT2_EXPORT DAT_RETURN dat_rmr_free(DAT_RMR_HANDLE rmr) {
    return call<&P::rmr_free_func>(FN, rmr, DAT_INVALID_HANDLE_RMR, rmr);
}

// ---- service points --------------------------------------------------------

DAT2_EXPORT DAT_RETURN dat_psp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL qual, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS flags,
                                      DAT_PSP_HANDLE *psp) {
    return call_ia<&P::psp_create_func>(FN, ia, qual, evd, flags, psp);
}

DAT2_EXPORT DAT_RETURN dat_psp_create_any(DAT_IA_HANDLE ia, DAT_CONN_QUAL *qual, DAT_EVD_HANDLE evd,
                                          DAT_PSP_FLAGS flags, DAT_PSP_HANDLE *psp) {
    return call_ia<&P::psp_create_any_func>(FN, ia, qual, evd, flags, psp);
}

DAT2_EXPORT DAT_RETURN dat_psp_query(DAT_PSP_HANDLE psp, DAT_PSP_PARAM_MASK mask, DAT_PSP_PARAM *param) {
    return call<&P::psp_query_func>(FN, psp, DAT_INVALID_HANDLE_PSP, psp, mask, param);
}

DAT2_EXPORT DAT_RETURN dat_psp_free(DAT_PSP_HANDLE psp) {
    return call<&P::psp_free_func>(FN, psp, DAT_INVALID_HANDLE_PSP, psp);
}

DAT2_EXPORT DAT_RETURN dat_rsp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL qual, DAT_EP_HANDLE ep, DAT_EVD_HANDLE evd,
                                      DAT_RSP_HANDLE *rsp) {
    return call_ia<&P::rsp_create_func>(FN, ia, qual, ep, evd, rsp);
}

DAT2_EXPORT DAT_RETURN dat_rsp_query(DAT_RSP_HANDLE rsp, DAT_RSP_PARAM_MASK mask, DAT_RSP_PARAM *param) {
    return call<&P::rsp_query_func>(FN, rsp, DAT_INVALID_HANDLE_RSP, rsp, mask, param);
}

DAT2_EXPORT DAT_RETURN dat_rsp_free(DAT_RSP_HANDLE rsp) {
    return call<&P::rsp_free_func>(FN, rsp, DAT_INVALID_HANDLE_RSP, rsp);
}

DAT2_EXPORT DAT_RETURN dat_csp_create(DAT_IA_HANDLE ia, DAT_COMM *comm, DAT_IA_ADDRESS_PTR addr, DAT_EVD_HANDLE evd,
                                      DAT_CSP_HANDLE *csp) {
    return call_ia<&P::csp_create_func>(FN, ia, comm, addr, evd, csp);
}

DAT2_EXPORT DAT_RETURN dat_csp_query(DAT_CSP_HANDLE csp, DAT_CSP_PARAM_MASK mask, DAT_CSP_PARAM *param) {
    return call<&P::csp_query_func>(FN, csp, DAT_INVALID_HANDLE_CSP, csp, mask, param);
}

DAT2_EXPORT DAT_RETURN dat_csp_free(DAT_CSP_HANDLE csp) {
    return call<&P::csp_free_func>(FN, csp, DAT_INVALID_HANDLE_CSP, csp);
}

// ---- PZ ----------------------------------------------------------------------

DAT2_EXPORT DAT_RETURN dat_pz_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE *pz) {
    return call_ia<&P::pz_create_func>(FN, ia, pz);
}

DAT2_EXPORT DAT_RETURN dat_pz_query(DAT_PZ_HANDLE pz, DAT_PZ_PARAM_MASK mask, DAT_PZ_PARAM *param) {
    return call<&P::pz_query_func>(FN, pz, DAT_INVALID_HANDLE_PZ, pz, mask, param);
}

DAT2_EXPORT DAT_RETURN dat_pz_free(DAT_PZ_HANDLE pz) {
    return call<&P::pz_free_func>(FN, pz, DAT_INVALID_HANDLE_PZ, pz);
}

// ---- SRQ ---------------------------------------------------------------------

DAT2_EXPORT DAT_RETURN dat_srq_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_SRQ_ATTR *attr, DAT_SRQ_HANDLE *srq) {
    return call_ia<&P::srq_create_func>(FN, ia, pz, attr, srq);
}

DAT2_EXPORT DAT_RETURN dat_srq_free(DAT_SRQ_HANDLE srq) {
    return call<&P::srq_free_func>(FN, srq, DAT_INVALID_HANDLE_SRQ, srq);
}

DAT2_EXPORT DAT_RETURN dat_srq_post_recv(DAT_SRQ_HANDLE srq, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie) {
    return call<&P::srq_post_recv_func>(FN, srq, DAT_INVALID_HANDLE_SRQ, srq, n, iov, cookie);
}

DAT2_EXPORT DAT_RETURN dat_srq_query(DAT_SRQ_HANDLE srq, DAT_SRQ_PARAM_MASK mask, DAT_SRQ_PARAM *param) {
    return call<&P::srq_query_func>(FN, srq, DAT_INVALID_HANDLE_SRQ, srq, mask, param);
}

DAT2_EXPORT DAT_RETURN dat_srq_resize(DAT_SRQ_HANDLE srq, DAT_COUNT qlen) {
    return call<&P::srq_resize_func>(FN, srq, DAT_INVALID_HANDLE_SRQ, srq, qlen);
}

DAT2_EXPORT DAT_RETURN dat_srq_set_lw(DAT_SRQ_HANDLE srq, DAT_COUNT low_watermark) {
    return call<&P::srq_set_lw_func>(FN, srq, DAT_INVALID_HANDLE_SRQ, srq, low_watermark);
}
