/* SPDX-License-Identifier: BSD-3-Clause */
/* Interface between the DAT registry and the providers it loads. */

#ifndef _DAT_REGISTRY_H_
#define _DAT_REGISTRY_H_

/*
 * Meant for provider implementations (and tools that inspect the registry);
 * ordinary applications only need udat.h.
 */
#ifndef _UDAT_H_
#include <dat2/udat.h>
#endif
#include <dat2/udat_redirection.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A provider announces each IA it serves at load time and withdraws it on
 * unload.  The registry then routes dat_ia_open() to the provider's
 * ia_open_func, and sees dat_ia_close() so it knows when a provider is idle.
 */
extern DAT_RETURN DAT_API dat_registry_add_provider(
    IN const DAT_PROVIDER *, IN const DAT_PROVIDER_INFO *);

extern DAT_RETURN DAT_API dat_registry_remove_provider(
    IN const DAT_PROVIDER *, IN const DAT_PROVIDER_INFO *);

/*
 * Symbols a dynamically loaded provider library must export.  The registry
 * calls the init hook once per configured IA with that IA's instance data
 * (from the configuration file) and the fini hook before unloading.
 */
#define DAT_PROVIDER_INIT_FUNC_NAME     dat_provider_init
#define DAT_PROVIDER_FINI_FUNC_NAME     dat_provider_fini

#define DAT_PROVIDER_INIT_FUNC_STR      "dat_provider_init"
#define DAT_PROVIDER_FINI_FUNC_STR      "dat_provider_fini"

typedef void (DAT_API *DAT_PROVIDER_INIT_FUNC)(
    IN const DAT_PROVIDER_INFO *, IN const char *);

typedef void (DAT_API *DAT_PROVIDER_FINI_FUNC)(IN const DAT_PROVIDER_INFO *);

/* High-availability relationship between two IAs. */
typedef enum dat_ha_relationship {
    DAT_HA_FALSE,
    DAT_HA_TRUE,
    DAT_HA_UNKNOWN,
    DAT_HA_CONFLICTING,         /* the two IAs disagree */
    DAT_HA_EXTENSION_BASE
} DAT_HA_RELATIONSHIP;

extern DAT_RETURN DAT_API dat_registry_providers_related(
    IN const DAT_NAME_PTR, IN const DAT_NAME_PTR, OUT DAT_HA_RELATIONSHIP *);

#ifdef __cplusplus
}
#endif

#endif /* _DAT_REGISTRY_H_ */
