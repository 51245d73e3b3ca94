/* SPDX-License-Identifier: BSD-3-Clause */
/* Declarations libdat2 and its providers share that DAT's public headers do
 * not carry: the error-composition macro and the registry's IA handle
 * translation entry point (exported by libdat2 and by OFED's libdat2). */
#ifndef DAT2_INTERNAL_H
#define DAT2_INTERNAL_H

#include <dat2/udat.h>

#ifndef DAT_ERROR
#define DAT_ERROR(type, subtype) ((DAT_RETURN)(DAT_CLASS_ERROR | (type) | (subtype)))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* A consumer IA handle gives the provider's IA pointer; a provider's IA
 * pointer gives the consumer's handle. */
DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE handle, DAT_IA_HANDLE *ia_handle_p);

#ifdef __cplusplus
}
#endif

#endif
