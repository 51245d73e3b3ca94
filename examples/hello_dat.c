/* SPDX-License-Identifier: BSD-3-Clause */
/* The smallest DAT program: opens an IA (the default, ofi-tcp, or the one
 * named on the command line), prints what dat_ia_query says about it, and
 * closes it. README.md, "Build an application", builds it two ways. */
#include <dat2/udat.h>

#include <stdio.h>

int main(int argc, char **argv) {
    char *name = argc > 1 ? argv[1] : "ofi-tcp";
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
    DAT_IA_ATTR ia_attr;
    DAT_PROVIDER_ATTR provider_attr;
    const char *major = "", *minor = "";

    DAT_RETURN r = dat_ia_open(name, 8, &async_evd, &ia);
    if (r != DAT_SUCCESS) {
        dat_strerror(r, &major, &minor);
        fprintf(stderr, "dat_ia_open(%s): %s %s\n", name, major, minor);
        return 1;
    }
    r = dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, &ia_attr, DAT_PROVIDER_FIELD_ALL, &provider_attr);
    if (r != DAT_SUCCESS) {
        dat_strerror(r, &major, &minor);
        fprintf(stderr, "dat_ia_query(%s): %s %s\n", name, major, minor);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
        return 1;
    }
    printf("%s: adapter %s, vendor %s, provider %s %u.%u, DAT API %u.%u\n", name, ia_attr.adapter_name,
           ia_attr.vendor_name, provider_attr.provider_name, provider_attr.provider_version_major,
           provider_attr.provider_version_minor, provider_attr.dapl_version_major, provider_attr.dapl_version_minor);
    dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    return 0;
}
