/* A DAT 1.2 consumer in a few lines, built against include/dat and linked
 * with -ldat: open12 IA_NAME opens the IA, asks which DAT API the provider
 * attributes report, closes it and prints one line. */
#include <dat/udat.h>

#include <stdio.h>

int main(int argc, char **argv) {
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    DAT_PROVIDER_ATTR pa;
    DAT_RETURN r;
    const char *major = "", *minor = "";

    if (argc < 2)
        return 2;
    r = dat_ia_open(argv[1], 8, &evd, &ia);
    if (r == DAT_SUCCESS)
        r = dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, &pa);
    if (r == DAT_SUCCESS)
        r = dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    if (r != DAT_SUCCESS) {
        dat_strerror(r, &major, &minor);
        printf("open12 %s: %s %s\n", argv[1], major, minor);
        return 1;
    }
    printf("open12 %s: ok, DAT API %u.%u\n", argv[1], pa.dapl_version_major, pa.dapl_version_minor);
    return 0;
}
