/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The DAT 1.2 registry interface of providers: registration and the entry
 * points the static registry looks up in a provider library.
 *
 * libdat.so.1 declares these for the ABI but serves consumers only: its
 * providers are DAT 2.0 providers (see <dat2/dat_registry.h>), loaded
 * through libdat2.so.2, which exports dat_registry_add_provider.
 */

#ifndef _DAT_REGISTRY_H_
#define _DAT_REGISTRY_H_

#ifndef _UDAT_H_
#include <dat/udat.h>
#endif

#include <dat/udat_redirection.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Linux's const-qualified provider tables (illumos: DAT_PROVIDER *). */
extern DAT_RETURN dat_registry_add_provider(
    IN  const DAT_PROVIDER *,
    IN  const DAT_PROVIDER_INFO *);

extern DAT_RETURN dat_registry_remove_provider(
    IN  const DAT_PROVIDER *,
    IN  const DAT_PROVIDER_INFO *);

/* Looked up by name in a provider library loaded by the static registry. */
#define DAT_PROVIDER_INIT_FUNC_NAME dat_provider_init
#define DAT_PROVIDER_FINI_FUNC_NAME dat_provider_fini
#define DAT_PROVIDER_INIT_FUNC_STR  "dat_provider_init"
#define DAT_PROVIDER_FINI_FUNC_STR  "dat_provider_fini"

typedef void (*DAT_PROVIDER_INIT_FUNC)(IN const DAT_PROVIDER_INFO *, IN const char *);
typedef void (*DAT_PROVIDER_FINI_FUNC)(IN const DAT_PROVIDER_INFO *);

#ifdef __cplusplus
}
#endif

#endif /* _DAT_REGISTRY_H_ */
