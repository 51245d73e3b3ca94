/*
 * headers12_compile_c99: the DAT 1.2 headers, included as a consumer does,
 * compile as ISO C99 with -Wall -Wextra -Werror, on their own.
 */
#include <dat/udat.h>
#include <dat/dat_registry.h>

int headers12_as_c_use(DAT_IA_HANDLE ia, DAT_EVD_HANDLE evd);

int headers12_as_c_use(DAT_IA_HANDLE ia, DAT_EVD_HANDLE evd) {
    DAT_EVENT event;
    DAT_COUNT more = 0;
    DAT_PROVIDER_INFO info;
    DAT_RMR_TRIPLET remote;
    DAT_RETURN (*close_fn)(DAT_IA_HANDLE, DAT_CLOSE_FLAGS) = dat_ia_close;
    DAT_RETURN ret;

    (void)sizeof(info);
    remote.target_address = 0;
    (void)remote;
    ret = dat_evd_wait(evd, DAT_TIMEOUT_INFINITE, 1, &event, &more);
    if (DAT_GET_TYPE(ret) != DAT_SUCCESS)
        return -1;
    if (event.event_number == DAT_CONNECTION_EVENT_ESTABLISHED)
        return (int)close_fn(ia, DAT_CLOSE_DEFAULT);
    return (int)DAT_VERSION_MINOR;
}
