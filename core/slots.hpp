// SPDX-License-Identifier: BSD-3-Clause
// The kit's implementation of each DAT_PROVIDER slot, one per DAT call,
// defined in the file of its object family.
#pragma once

#include "internal.hpp"

#include <string>

namespace dat2::kit {

bool provider_entry(const std::string &name, TransportFactory &factory, std::string &ia_params,
                    const DAT_PROVIDER **resolved);
const DAT_PROVIDER_INFO *provider_info(const DAT_PROVIDER *table);

namespace slot {
// ext.cpp: dat_extension_op (dat_ib_extensions.h)
DAT_RETURN extended_op(DAT_HANDLE, DAT_EXTENDED_OP, va_list);
// ia.cpp
DAT_RETURN ia_open(const DAT_NAME_PTR, DAT_COUNT, DAT_EVD_HANDLE *, DAT_IA_HANDLE *);
DAT_RETURN ia_query(DAT_IA_HANDLE, DAT_EVD_HANDLE *, DAT_IA_ATTR_MASK, DAT_IA_ATTR *, DAT_PROVIDER_ATTR_MASK,
                    DAT_PROVIDER_ATTR *);
DAT_RETURN ia_close(DAT_IA_HANDLE, DAT_CLOSE_FLAGS);
DAT_RETURN set_consumer_context(DAT_HANDLE, DAT_CONTEXT);
DAT_RETURN get_consumer_context(DAT_HANDLE, DAT_CONTEXT *);
DAT_RETURN get_handle_type(DAT_HANDLE, DAT_HANDLE_TYPE *);
DAT_RETURN pz_create(DAT_IA_HANDLE, DAT_PZ_HANDLE *);
DAT_RETURN pz_query(DAT_PZ_HANDLE, DAT_PZ_PARAM_MASK, DAT_PZ_PARAM *);
DAT_RETURN pz_free(DAT_PZ_HANDLE);
// cno.cpp
DAT_RETURN cno_create(DAT_IA_HANDLE, DAT_OS_WAIT_PROXY_AGENT, DAT_CNO_HANDLE *);
DAT_RETURN cno_fd_create(DAT_IA_HANDLE, DAT_FD *, DAT_CNO_HANDLE *);
DAT_RETURN cno_modify_agent(DAT_CNO_HANDLE, DAT_OS_WAIT_PROXY_AGENT);
DAT_RETURN cno_query(DAT_CNO_HANDLE, DAT_CNO_PARAM_MASK, DAT_CNO_PARAM *);
DAT_RETURN cno_free(DAT_CNO_HANDLE);
DAT_RETURN cno_wait(DAT_CNO_HANDLE, DAT_TIMEOUT, DAT_EVD_HANDLE *);
DAT_RETURN cno_trigger(DAT_CNO_HANDLE, DAT_EVD_HANDLE *);
// evd.cpp
DAT_RETURN evd_create(DAT_IA_HANDLE, DAT_COUNT, DAT_CNO_HANDLE, DAT_EVD_FLAGS, DAT_EVD_HANDLE *);
DAT_RETURN evd_query(DAT_EVD_HANDLE, DAT_EVD_PARAM_MASK, DAT_EVD_PARAM *);
DAT_RETURN evd_modify_cno(DAT_EVD_HANDLE, DAT_CNO_HANDLE);
DAT_RETURN evd_enable(DAT_EVD_HANDLE);
DAT_RETURN evd_disable(DAT_EVD_HANDLE);
DAT_RETURN evd_wait(DAT_EVD_HANDLE, DAT_TIMEOUT, DAT_COUNT, DAT_EVENT *, DAT_COUNT *);
DAT_RETURN evd_resize(DAT_EVD_HANDLE, DAT_COUNT);
DAT_RETURN evd_post_se(DAT_EVD_HANDLE, const DAT_EVENT *);
DAT_RETURN evd_dequeue(DAT_EVD_HANDLE, DAT_EVENT *);
DAT_RETURN evd_free(DAT_EVD_HANDLE);
DAT_RETURN evd_set_unwaitable(DAT_EVD_HANDLE);
DAT_RETURN evd_clear_unwaitable(DAT_EVD_HANDLE);
// lmr.cpp
DAT_RETURN lmr_create(DAT_IA_HANDLE, DAT_MEM_TYPE, DAT_REGION_DESCRIPTION, DAT_VLEN, DAT_PZ_HANDLE, DAT_MEM_PRIV_FLAGS,
                      DAT_VA_TYPE, DAT_LMR_HANDLE *, DAT_LMR_CONTEXT *, DAT_RMR_CONTEXT *, DAT_VLEN *, DAT_VADDR *);
DAT_RETURN lmr_query(DAT_LMR_HANDLE, DAT_LMR_PARAM_MASK, DAT_LMR_PARAM *);
DAT_RETURN lmr_free(DAT_LMR_HANDLE);
DAT_RETURN lmr_sync_rdma_read(DAT_IA_HANDLE, const DAT_LMR_TRIPLET *, DAT_VLEN);
DAT_RETURN lmr_sync_rdma_write(DAT_IA_HANDLE, const DAT_LMR_TRIPLET *, DAT_VLEN);
// rmr.cpp
DAT_RETURN rmr_create(DAT_PZ_HANDLE, DAT_RMR_HANDLE *);
DAT_RETURN rmr_create_for_ep(DAT_PZ_HANDLE, DAT_RMR_HANDLE *);
DAT_RETURN rmr_query(DAT_RMR_HANDLE, DAT_RMR_PARAM_MASK, DAT_RMR_PARAM *);
DAT_RETURN rmr_bind(DAT_RMR_HANDLE, DAT_LMR_HANDLE, const DAT_LMR_TRIPLET *, DAT_MEM_PRIV_FLAGS, DAT_VA_TYPE,
                    DAT_EP_HANDLE, DAT_RMR_COOKIE, DAT_COMPLETION_FLAGS, DAT_RMR_CONTEXT *);
DAT_RETURN rmr_free(DAT_RMR_HANDLE);
DAT_RETURN ep_post_send_with_invalidate(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE,
                                        DAT_COMPLETION_FLAGS, DAT_BOOLEAN, DAT_RMR_CONTEXT);
DAT_RETURN ep_post_rdma_read_to_rmr(DAT_EP_HANDLE, const DAT_RMR_TRIPLET *, DAT_DTO_COOKIE, const DAT_RMR_TRIPLET *,
                                    DAT_COMPLETION_FLAGS);
// ep.cpp
DAT_RETURN ep_create(DAT_IA_HANDLE, DAT_PZ_HANDLE, DAT_EVD_HANDLE, DAT_EVD_HANDLE, DAT_EVD_HANDLE, const DAT_EP_ATTR *,
                     DAT_EP_HANDLE *);
DAT_RETURN ep_query(DAT_EP_HANDLE, DAT_EP_PARAM_MASK, DAT_EP_PARAM *);
DAT_RETURN ep_modify(DAT_EP_HANDLE, DAT_EP_PARAM_MASK, const DAT_EP_PARAM *);
DAT_RETURN ep_get_status(DAT_EP_HANDLE, DAT_EP_STATE *, DAT_BOOLEAN *, DAT_BOOLEAN *);
DAT_RETURN ep_free(DAT_EP_HANDLE);
DAT_RETURN ep_reset(DAT_EP_HANDLE);
DAT_RETURN ep_post_send(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE, DAT_COMPLETION_FLAGS);
DAT_RETURN ep_post_recv(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE, DAT_COMPLETION_FLAGS);
DAT_RETURN ep_post_rdma_read(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE, const DAT_RMR_TRIPLET *,
                             DAT_COMPLETION_FLAGS);
DAT_RETURN ep_post_rdma_write(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE, const DAT_RMR_TRIPLET *,
                              DAT_COMPLETION_FLAGS);
// srq.cpp (and the receive-side accounting of EPs)
DAT_RETURN srq_create(DAT_IA_HANDLE, DAT_PZ_HANDLE, DAT_SRQ_ATTR *, DAT_SRQ_HANDLE *);
DAT_RETURN srq_free(DAT_SRQ_HANDLE);
DAT_RETURN srq_post_recv(DAT_SRQ_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE);
DAT_RETURN srq_query(DAT_SRQ_HANDLE, DAT_SRQ_PARAM_MASK, DAT_SRQ_PARAM *);
DAT_RETURN srq_resize(DAT_SRQ_HANDLE, DAT_COUNT);
DAT_RETURN srq_set_lw(DAT_SRQ_HANDLE, DAT_COUNT);
DAT_RETURN ep_create_with_srq(DAT_IA_HANDLE, DAT_PZ_HANDLE, DAT_EVD_HANDLE, DAT_EVD_HANDLE, DAT_EVD_HANDLE,
                              DAT_SRQ_HANDLE, const DAT_EP_ATTR *, DAT_EP_HANDLE *);
DAT_RETURN ep_recv_query(DAT_EP_HANDLE, DAT_COUNT *, DAT_COUNT *);
DAT_RETURN ep_set_watermark(DAT_EP_HANDLE, DAT_COUNT, DAT_COUNT);
// cm.cpp
DAT_RETURN ep_connect(DAT_EP_HANDLE, DAT_IA_ADDRESS_PTR, DAT_CONN_QUAL, DAT_TIMEOUT, DAT_COUNT, const DAT_PVOID,
                      DAT_QOS, DAT_CONNECT_FLAGS);
DAT_RETURN ep_dup_connect(DAT_EP_HANDLE, DAT_EP_HANDLE, DAT_TIMEOUT, DAT_COUNT, const DAT_PVOID, DAT_QOS);
DAT_RETURN ep_disconnect(DAT_EP_HANDLE, DAT_CLOSE_FLAGS);
DAT_RETURN psp_create(DAT_IA_HANDLE, DAT_CONN_QUAL, DAT_EVD_HANDLE, DAT_PSP_FLAGS, DAT_PSP_HANDLE *);
DAT_RETURN psp_create_any(DAT_IA_HANDLE, DAT_CONN_QUAL *, DAT_EVD_HANDLE, DAT_PSP_FLAGS, DAT_PSP_HANDLE *);
DAT_RETURN psp_query(DAT_PSP_HANDLE, DAT_PSP_PARAM_MASK, DAT_PSP_PARAM *);
DAT_RETURN psp_free(DAT_PSP_HANDLE);
DAT_RETURN cr_query(DAT_CR_HANDLE, DAT_CR_PARAM_MASK, DAT_CR_PARAM *);
DAT_RETURN cr_accept(DAT_CR_HANDLE, DAT_EP_HANDLE, DAT_COUNT, const DAT_PVOID);
DAT_RETURN cr_reject(DAT_CR_HANDLE, DAT_COUNT, const DAT_PVOID);
DAT_RETURN cr_handoff(DAT_CR_HANDLE, DAT_CONN_QUAL);
DAT_RETURN rsp_create(DAT_IA_HANDLE, DAT_CONN_QUAL, DAT_EP_HANDLE, DAT_EVD_HANDLE, DAT_RSP_HANDLE *);
DAT_RETURN rsp_query(DAT_RSP_HANDLE, DAT_RSP_PARAM_MASK, DAT_RSP_PARAM *);
DAT_RETURN rsp_free(DAT_RSP_HANDLE);
DAT_RETURN csp_create(DAT_IA_HANDLE, DAT_COMM *, DAT_IA_ADDRESS_PTR, DAT_EVD_HANDLE, DAT_CSP_HANDLE *);
DAT_RETURN csp_query(DAT_CSP_HANDLE, DAT_CSP_PARAM_MASK, DAT_CSP_PARAM *);
DAT_RETURN csp_free(DAT_CSP_HANDLE);
DAT_RETURN ep_common_connect(DAT_EP_HANDLE, DAT_IA_ADDRESS_PTR, DAT_TIMEOUT, DAT_COUNT, const DAT_PVOID);
DAT_RETURN ia_ha_related(DAT_IA_HANDLE, const DAT_NAME_PTR, DAT_BOOLEAN *);
} // namespace slot

// Internal helpers shared between families.
// Frees the EP (any state); false when another thread is freeing it.
bool ep_release_all(Ep &ep);
// Takes the CR for its answer or its destruction; false when another thread has it.
inline bool cr_claim(Cr &cr) { return !cr.claimed.exchange(true, std::memory_order_acq_rel); }
void psp_release(Psp &psp);  // for ia_close
void cr_destroy(Cr &cr);
// Rejects a request whose CR nobody can answer any more (its arrival event
// went with a freed EVD) and destroys the CR; the CR is claimed.
void cr_refuse_unanswerable(Cr &cr);
void lmr_release(Lmr &lmr);
void rmr_release(Rmr &rmr); // unbinds and frees the RMR, for ia_close
// A receive of a send with invalidate completed on `ep`: unbinds the RMR
// of `context` in the EP's PZ, and when there was one, makes `event` a
// DAT_DTO_RECEIVE_WITH_INVALIDATE naming it.
void rmr_invalidate(Ep &ep, DAT_RMR_CONTEXT context, DAT_EVENT &event);
void evd_release(Evd &evd);
void cno_release(Cno &cno);
// An EVD linked to `cno` got an event; drops Cno::notifying, which the
// caller raised under the EVD's lock, once the agent (if any) returned.
void cno_notify(Cno &cno, Evd &evd);
} // namespace dat2::kit
