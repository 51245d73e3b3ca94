/* SPDX-License-Identifier: BSD-3-Clause */
/* A minimal DAT consumer, compiled as C against the public headers:
 * dat2_open_probe [IA_NAME] opens the IA, queries it, closes it and prints
 * one line with the result. Without a name it lists the providers.
 * With PROBE_NO_FDS set, the first open is made with every file descriptor
 * taken (its line is prefixed "short: "), and the open is then made again
 * with them given back. */
#include <dat2/udat.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int list(void) {
    DAT_COUNT n = 0, got = 0, i;
    DAT_PROVIDER_INFO *infos, **ptrs;
    DAT_RETURN r = dat_registry_list_providers(0, &n, NULL);
    if (n <= 0) {
        /* The count query answers DAT_INVALID_PARAMETER by design; anything
         * else (no static registry) is said. */
        if (DAT_GET_TYPE(r) != DAT_INVALID_PARAMETER) {
            const char *major = "", *minor = "";
            dat_strerror(r, &major, &minor);
            printf("list: %s\n", major);
        }
        printf("providers: 0\n");
        return 0;
    }
    infos = calloc((size_t)n, sizeof *infos);
    ptrs = calloc((size_t)n, sizeof *ptrs);
    for (i = 0; i < n; i++)
        ptrs[i] = &infos[i];
    if (dat_registry_list_providers(n, &got, ptrs) != DAT_SUCCESS) {
        printf("list failed\n");
        return 1;
    }
    printf("providers: %d\n", (int)got);
    for (i = 0; i < got; i++)
        printf("  %s %u.%u %s\n", infos[i].ia_name, infos[i].dapl_version_major, infos[i].dapl_version_minor,
               infos[i].is_thread_safe ? "threadsafe" : "nonthreadsafe");
    free(infos);
    free(ptrs);
    return 0;
}

int main(int argc, char **argv) {
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    DAT_IA_ATTR attr;
    DAT_RETURN r;
    const char *major = "", *minor = "";

    if (argc < 2)
        return list();
    if (getenv("PROBE_NO_FDS")) {
        int fds[65536], n = 0, fd;
        while (n < 65536 && (fd = open("/dev/null", O_RDONLY)) >= 0)
            fds[n++] = fd;
        r = dat_ia_open(argv[1], 8, &evd, &ia);
        while (n > 0)
            close(fds[--n]);
        dat_strerror(r, &major, &minor);
        printf("short: open %s: %s\n", argv[1], r == DAT_SUCCESS ? "ok" : major);
        fflush(stdout);
        if (r == DAT_SUCCESS)
            dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
        evd = DAT_HANDLE_NULL;
    }
    r = dat_ia_open(argv[1], 8, &evd, &ia);
    if (r != DAT_SUCCESS) {
        dat_strerror(r, &major, &minor);
        printf("open %s: %s %s\n", argv[1], major, minor);
        return 1;
    }
    r = dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, &attr, 0, NULL);
    if (r != DAT_SUCCESS) {
        dat_strerror(r, &major, &minor);
        printf("query %s: %s %s\n", argv[1], major, minor);
        return 1;
    }
    r = dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    if (r != DAT_SUCCESS) {
        dat_strerror(r, &major, &minor);
        printf("close %s: %s %s\n", argv[1], major, minor);
        return 1;
    }
    printf("open %s: ok adapter=%s\n", argv[1], attr.adapter_name);
    return 0;
}
