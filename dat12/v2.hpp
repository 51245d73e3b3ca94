// SPDX-License-Identifier: BSD-3-Clause
// The DAT 2.0 API as seen from libdat.so.1: the dat2 headers compiled into
// namespace v2, so that this library's translation units hold both
// versions' types (DAT_EVENT is v2::DAT_EVENT in 2.0, ::DAT_EVENT in 1.2).
// Include this before any <dat/...> header.
#pragma once

// What the dat2 headers include, pulled in at global scope first (their
// include guards then keep them out of the namespace).
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "v2_rename.h"
namespace v2 {
#include <dat2/udat.h>
#include <dat2/dat_registry.h>
} // namespace v2

// The dat2 macros this library needs, kept as constants before v2_unname.h
// takes every dat2 macro away.
namespace v2 {
inline constexpr DAT_RETURN kClassError = DAT_CLASS_ERROR;
inline constexpr DAT_RETURN kTypeMask = DAT_TYPE_MASK;
inline constexpr DAT_RETURN kSubtypeMask = DAT_SUBTYPE_MASK;
inline constexpr DAT_IA_ATTR_MASK kIaFieldAll = DAT_IA_FIELD_ALL;
inline constexpr DAT_PROVIDER_ATTR_MASK kProviderFieldAll = DAT_PROVIDER_FIELD_ALL;
inline constexpr DAT_EP_PARAM_MASK kEpFieldAll = DAT_EP_FIELD_ALL;
inline constexpr DAT_EP_PARAM_MASK kEpFieldEpAttrAll = DAT_EP_FIELD_EP_ATTR_ALL;
inline constexpr DAT_EP_PARAM_MASK kEpFieldComm = DAT_EP_FIELD_COMM;
} // namespace v2

#include "v2_unname.h"

// libdat2's own definitions of the registry calls. libdat.so.1 exports
// functions of the same names (version DAT_1.2); these references name
// version DAT_2.0, so they bind to libdat2.so.2 whatever the lookup order.
// The open is libdat2's private dat12_ia_openv, which lets a DAT 1.2 request
// take u2.0 entries (its public dat_ia_openv refuses API 1 to 2.0 programs).
extern "C" {
v2::DAT_RETURN libdat2_ia_openv(const v2::DAT_NAME_PTR, v2::DAT_COUNT, v2::DAT_EVD_HANDLE *, v2::DAT_IA_HANDLE *,
                                v2::DAT_UINT32, v2::DAT_UINT32, v2::DAT_BOOLEAN);
v2::DAT_RETURN libdat2_ia_close(v2::DAT_IA_HANDLE, v2::DAT_CLOSE_FLAGS);
v2::DAT_RETURN libdat2_registry_list_providers(v2::DAT_COUNT, v2::DAT_COUNT *, v2::DAT_PROVIDER_INFO *(list[]));
v2::DAT_RETURN libdat2_strerror(v2::DAT_RETURN, const char **, const char **);
v2::DAT_RETURN libdat2_get_ia_handle(v2::DAT_IA_HANDLE, v2::DAT_IA_HANDLE *);
}
__asm__(".symver libdat2_ia_openv,dat12_ia_openv@DAT2_PRIVATE_DAT12");
__asm__(".symver libdat2_ia_close,dat_ia_close@DAT_2.0");
__asm__(".symver libdat2_registry_list_providers,dat_registry_list_providers@DAT_2.0");
__asm__(".symver libdat2_strerror,dat_strerror@DAT_2.0");
__asm__(".symver libdat2_get_ia_handle,dats_get_ia_handle@DAT_2.0");
