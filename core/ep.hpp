// SPDX-License-Identifier: BSD-3-Clause
// Endpoint internals shared by ep.cpp, cm.cpp and sp.cpp.
#pragma once

#include "dto.hpp"

namespace dat2::kit {

// DAT_INVALID_STATE with the subtype of an EP in state `s` (cm.cpp).
DAT_RETURN ep_state_error(DAT_EP_STATE s);
// Posts a connection event of `ep` on its connection EVD (cm.cpp).
void ep_post_connection_event(Ep &ep, DAT_EVENT_NUMBER number, const void *pdata, std::size_t len);
// An Endpoint the provider creates (no PZ, no EVDs), published in `state`;
// nullptr when out of resources.
Ep *ep_create_for_provider(Ia &ia, DAT_EP_STATE state);
// dat_ep_create, and dat_ep_create_with_srq with `srq` (named `call` in
// logs; `attr_arg` is the argument position of the attributes).
DAT_RETURN ep_create_common(const char *call, DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv_evd,
                            DAT_EVD_HANDLE request_evd, DAT_EVD_HANDLE connect_evd, Srq *srq, const DAT_EP_ATTR *attr,
                            int attr_arg, DAT_EP_HANDLE *ep_out);

} // namespace dat2::kit
