/*
 * headers12_compile_cxx17: the DAT 1.2 headers compile as C++17 with
 * -Wall -Wextra -Werror and give the API C language linkage (checked in
 * full by abi12_conformance; spot-checked here).
 */
#include <dat/udat.h>
#include <dat/dat_registry.h>

// Redeclaring with C linkage is ill-formed if the headers gave C++ linkage.
extern "C" decltype(dat_ia_openv) dat_ia_openv;
extern "C" decltype(dat_lmr_create) dat_lmr_create;
extern "C" decltype(dat_registry_list_providers) dat_registry_list_providers;

int headers12_as_cxx_use(DAT_IA_HANDLE ia, DAT_EVD_HANDLE evd);

int headers12_as_cxx_use(DAT_IA_HANDLE ia, DAT_EVD_HANDLE evd) {
    DAT_EVENT event{};
    DAT_COUNT more = 0;
    DAT_RETURN (*close_fn)(DAT_IA_HANDLE, DAT_CLOSE_FLAGS) = dat_ia_close;

    DAT_RETURN ret = dat_evd_wait(evd, DAT_TIMEOUT_INFINITE, 1, &event, &more);
    if (DAT_GET_TYPE(ret) != DAT_SUCCESS)
        return -1;
    if (event.event_number == DAT_CONNECTION_EVENT_ESTABLISHED)
        return static_cast<int>(close_fn(ia, DAT_CLOSE_DEFAULT));
    return static_cast<int>(DAT_VERSION_MINOR);
}
