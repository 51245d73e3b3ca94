// SPDX-License-Identifier: BSD-3-Clause
// The kit's implementation of each DAT_PROVIDER slot, one per DAT call,
// defined in the file of its object family.
#pragma once

#include "kit.hpp"

#include <string>

namespace dat2::kit {

bool provider_entry(const std::string &name, TransportFactory &factory, std::string &ia_params,
                    const DAT_PROVIDER **resolved);
const DAT_PROVIDER_INFO *provider_info(const DAT_PROVIDER *table);

namespace slot {
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
DAT_RETURN lmr_create(DAT_IA_HANDLE, DAT_MEM_TYPE, DAT_REGION_DESCRIPTION, DAT_VLEN, DAT_PZ_HANDLE,
                      DAT_MEM_PRIV_FLAGS, DAT_VA_TYPE, DAT_LMR_HANDLE *, DAT_LMR_CONTEXT *, DAT_RMR_CONTEXT *,
                      DAT_VLEN *, DAT_VADDR *);
DAT_RETURN lmr_query(DAT_LMR_HANDLE, DAT_LMR_PARAM_MASK, DAT_LMR_PARAM *);
DAT_RETURN lmr_free(DAT_LMR_HANDLE);
DAT_RETURN lmr_sync_rdma_read(DAT_IA_HANDLE, const DAT_LMR_TRIPLET *, DAT_VLEN);
DAT_RETURN lmr_sync_rdma_write(DAT_IA_HANDLE, const DAT_LMR_TRIPLET *, DAT_VLEN);
// ep.cpp
DAT_RETURN ep_create(DAT_IA_HANDLE, DAT_PZ_HANDLE, DAT_EVD_HANDLE, DAT_EVD_HANDLE, DAT_EVD_HANDLE,
                     const DAT_EP_ATTR *, DAT_EP_HANDLE *);
DAT_RETURN ep_query(DAT_EP_HANDLE, DAT_EP_PARAM_MASK, DAT_EP_PARAM *);
DAT_RETURN ep_modify(DAT_EP_HANDLE, DAT_EP_PARAM_MASK, const DAT_EP_PARAM *);
DAT_RETURN ep_get_status(DAT_EP_HANDLE, DAT_EP_STATE *, DAT_BOOLEAN *, DAT_BOOLEAN *);
DAT_RETURN ep_free(DAT_EP_HANDLE);
DAT_RETURN ep_reset(DAT_EP_HANDLE);
DAT_RETURN ep_recv_query(DAT_EP_HANDLE, DAT_COUNT *, DAT_COUNT *);
DAT_RETURN ep_set_watermark(DAT_EP_HANDLE, DAT_COUNT, DAT_COUNT);
DAT_RETURN ep_post_send(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE, DAT_COMPLETION_FLAGS);
DAT_RETURN ep_post_recv(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE, DAT_COMPLETION_FLAGS);
DAT_RETURN ep_post_rdma_read(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE, const DAT_RMR_TRIPLET *,
                             DAT_COMPLETION_FLAGS);
DAT_RETURN ep_post_rdma_write(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE, const DAT_RMR_TRIPLET *,
                              DAT_COMPLETION_FLAGS);
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
} // namespace slot

// Internal helpers shared between families.
void ep_release_all(Ep &ep);          // frees the EP (any state) for ia_close
void psp_release(Psp &psp);           // for ia_close
void cr_destroy(Cr &cr);
void lmr_release(Lmr &lmr);
void evd_release(Evd &evd);
void cno_release(Cno &cno);
void cno_notify(Cno &cno, Evd &evd);  // an EVD linked to `cno` got an event
} // namespace dat2::kit
