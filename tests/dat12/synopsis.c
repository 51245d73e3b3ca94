/*
 * Written from the SYNOPSIS sections of the seed pages (reference/seeds:
 * dat_lmr_create, dat_lmr_free, dat_rmr_free, dat_ep_free,
 * dat_ep_disconnect), built the way they say:
 *
 *     cc [ flag... ] file... -ldat [ library... ]
 *     #include <dat/udat.h>
 *
 * and run: synopsis [ia_name]. Each call's return value is the one its
 * page gives for the situation; prints "synopsis: all N calls as the pages
 * say" or the calls that were not.
 */
#include <dat/udat.h>

#include <stdio.h>
#include <stdlib.h>

static int calls, wrong;

static void expect(const char *call, DAT_RETURN got, DAT_RETURN type) {
    const char *major = "", *minor = "";
    ++calls;
    if (DAT_GET_TYPE(got) == type)
        return;
    ++wrong;
    dat_strerror(got, &major, &minor);
    printf("synopsis: %s returned %s %s\n", call, major, minor);
}

int main(int argc, char **argv) {
    char *name = argc > 1 ? argv[1] : "ofi-tcp";
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL, evd;
    DAT_PZ_HANDLE pz;
    DAT_EP_HANDLE ep;
    DAT_RMR_HANDLE rmr;
    DAT_LMR_HANDLE lmr_handle;
    DAT_LMR_CONTEXT lmr_context;
    DAT_RMR_CONTEXT rmr_context = 0;
    DAT_VLEN registered_size;
    DAT_VADDR registered_address;
    DAT_REGION_DESCRIPTION region_description;
    static char buffer[8192];

    if (dat_ia_open(name, 8, &async_evd, &ia) != DAT_SUCCESS || dat_pz_create(ia, &pz) != DAT_SUCCESS ||
        dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG, &evd) != DAT_SUCCESS ||
        dat_ep_create(ia, pz, evd, evd, evd, NULL, &ep) != DAT_SUCCESS || dat_rmr_create(pz, &rmr) != DAT_SUCCESS) {
        printf("synopsis: cannot set up on %s\n", name);
        return 1;
    }

    /* dat_lmr_create(ia_handle, mem_type, region_description, length,
     * pz_handle, mem_privileges, lmr_handle, lmr_context, rmr_context,
     * registered_size, registered_address) */
    region_description.for_va = buffer;
    expect("dat_lmr_create",
           dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region_description, sizeof buffer, pz, DAT_MEM_PRIV_ALL_FLAG,
                          &lmr_handle, &lmr_context, &rmr_context, &registered_size, &registered_address),
           DAT_SUCCESS);
    if (rmr_context == 0) {
        ++wrong;
        printf("synopsis: DAT_MEM_PRIV_ALL_FLAG asked for remote access and no rmr_context came back\n");
    }

    /* dat_rmr_free(rmr_handle): "allowed on either bound or unbound RMR" */
    expect("dat_rmr_free", dat_rmr_free(rmr), DAT_SUCCESS);
    expect("dat_rmr_free (destroyed RMR)", dat_rmr_free(rmr), DAT_INVALID_HANDLE);

    /* dat_lmr_free(lmr_handle) */
    expect("dat_lmr_free", dat_lmr_free(lmr_handle), DAT_SUCCESS);
    expect("dat_lmr_free (destroyed LMR)", dat_lmr_free(lmr_handle), DAT_INVALID_HANDLE);

    /* dat_ep_disconnect(ep_handle, disconnect_flags): "Disconnecting an
     * Endpoint in DAT_EP_STATE_UNCONNECTED ... is disallowed." */
    expect("dat_ep_disconnect (unconnected)", dat_ep_disconnect(ep, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_STATE);

    /* dat_ep_free(ep_handle) */
    expect("dat_ep_free", dat_ep_free(ep), DAT_SUCCESS);
    expect("dat_ep_disconnect (destroyed EP)", dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_HANDLE);

    dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    if (wrong) {
        printf("synopsis: %d of %d calls not as the pages say\n", wrong, calls);
        return 1;
    }
    printf("synopsis: all %d calls as the pages say\n", calls);
    return 0;
}
