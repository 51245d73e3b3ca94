/*
 * headers_compile_c99: the public uDAPL headers, included exactly as a
 * consumer does, must compile as ISO C99 with -Wall -Wextra -Werror.
 *
 * No system header is included first on purpose: the headers have to be
 * self-contained.  (Debian's libdapl-dev headers are not: its
 * dat_ib_extensions.h needs <netinet/in.h> for struct sockaddr_in6.)
 */
#include <dat2/udat.h>
#include <dat2/dat_registry.h>
#include <dat2/dat_ib_extensions.h>

/* Use a few declarations so that the types are complete and the
 * function/macro declarations are usable from C. */
int headers_as_c_use(DAT_IA_HANDLE ia, DAT_EVD_HANDLE evd);

int headers_as_c_use(DAT_IA_HANDLE ia, DAT_EVD_HANDLE evd) {
    DAT_EVENT event;
    DAT_COUNT more = 0;
    DAT_PROVIDER_INFO info;
    DAT_IB_EXTENSION_EVENT_DATA ext;
    DAT_RETURN (*close_fn)(DAT_IA_HANDLE, DAT_CLOSE_FLAGS) = dat_ia_close;
    DAT_RETURN ret;

    (void)sizeof(info);
    (void)sizeof(ext);
    ret = dat_evd_wait(evd, DAT_TIMEOUT_INFINITE, 1, &event, &more);
    if (DAT_GET_TYPE(ret) != DAT_SUCCESS)
        return -1;
    if (event.event_number == DAT_CONNECTION_EVENT_ESTABLISHED)
        return (int)close_fn(ia, DAT_CLOSE_DEFAULT);
    return (int)DAT_IB_EXTENSION_VERSION;
}
