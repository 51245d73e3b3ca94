// SPDX-License-Identifier: BSD-3-Clause
// libdat2's registry against a real provider library: static and dynamic
// registry, loading, init/fini reference rules, IA handle translation and the
// dispatch of every consumer call to the right provider slot.
#include "test_provider.hpp"

#include <dat2/udat.h>
#include "dat2_internal.h"
#include <dat2/dat_registry.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <dlfcn.h>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

DAT_RETURN open_ia(const char *name, DAT_IA_HANDLE *ia, DAT_BOOLEAN thread_safe = DAT_FALSE, DAT_UINT32 major = 2,
                   DAT_UINT32 minor = 0) {
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    return dat_ia_openv(const_cast<char *>(name), 8, &evd, ia, major, minor, thread_safe);
}

const std::string kProviderPath = std::string(DAT2_TEST_LIB_DIR) + "/libdat2_test_provider.so";

// Looks a test-provider symbol up only while the registry has the library
// loaded. dlsym(RTLD_DEFAULT) from the executable would make glibc pin the
// library for good, and the tests check that it gets unloaded.
template <class Fn> auto call_provider(const char *symbol) -> decltype(Fn()()) {
    void *h = dlopen(kProviderPath.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return nullptr;
    auto fn = reinterpret_cast<Fn>(dlsym(h, symbol));
    auto result = fn ? fn() : nullptr;
    dlclose(h);
    return result;
}

const TestProviderCounters *counters() { return call_provider<TestProviderCountersFn>("dat2_test_provider_counters"); }

const TestProviderCall *last_call() { return call_provider<TestProviderLastCallFn>("dat2_test_provider_last_call"); }

// Registrations the test provider has made and not yet finalized: zero
// once every IA is closed means init/fini paired up, nothing leaked.
int live_registrations() {
    const TestProviderCounters *c = counters();
    return c ? c->live_registrations : 0;
}

DAT_UINT32 type_of(DAT_RETURN r) { return DAT_GET_TYPE(r); }
DAT_UINT32 subtype_of(DAT_RETURN r) { return DAT_GET_SUBTYPE(r); }

std::string captured_open_error(const char *name, DAT_RETURN *ret, DAT_BOOLEAN ts = DAT_FALSE, DAT_UINT32 major = 2) {
    testing::internal::CaptureStderr();
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    *ret = open_ia(name, &ia, ts, major);
    std::string err = testing::internal::GetCapturedStderr();
    if (*ret == DAT_SUCCESS)
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    return err;
}

// Opens and closes `name`, then checks that the provider was finalized.
void expect_open_close_finalizes(const char *name) {
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia(name, &ia), DAT_SUCCESS) << name;
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS) << name;
    EXPECT_EQ(live_registrations(), 0) << name;
}

TEST(Registry, OpenQueryCloseInitializesAndFinalizes) {
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    ASSERT_EQ(open_ia("test-ok", &ia), DAT_SUCCESS);
    // Consumers see small integers, as with OFED.
    EXPECT_GT(reinterpret_cast<std::uintptr_t>(ia), 0u);
    EXPECT_LT(reinterpret_cast<std::uintptr_t>(ia), 4096u);
    ASSERT_NE(counters(), nullptr);
    int inits = counters()->init_calls;
    EXPECT_EQ(live_registrations(), 1);

    DAT_IA_ATTR attr;
    DAT_PROVIDER_ATTR *pattr = static_cast<DAT_PROVIDER_ATTR *>(calloc(1, sizeof(DAT_PROVIDER_ATTR)));
    ASSERT_EQ(dat_ia_query(ia, nullptr, DAT_IA_FIELD_ALL, &attr, DAT_PROVIDER_FIELD_ALL, pattr), DAT_SUCCESS);
    EXPECT_STREQ(attr.adapter_name, "test-ok");
    EXPECT_EQ(attr.max_eps, 7);
    free(pattr);

    // A second open of the same name does not init again.
    DAT_IA_HANDLE ia2 = DAT_HANDLE_NULL;
    ASSERT_EQ(open_ia("test-ok", &ia2), DAT_SUCCESS);
    EXPECT_NE(ia, ia2);
    EXPECT_EQ(counters()->init_calls, inits);

    int finis = counters()->fini_calls;
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
    EXPECT_EQ(counters()->fini_calls, finis) << "fini before the last IA closed";
    ASSERT_EQ(dat_ia_close(ia2, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
    // The last close finalized the provider (the library stays mapped:
    // a thread woken by the close may still be returning through it).
    EXPECT_EQ(counters()->fini_calls, finis + 1);
    EXPECT_EQ(live_registrations(), 0);
    // The next open initializes it again.
    ASSERT_EQ(open_ia("test-ok", &ia), DAT_SUCCESS);
    EXPECT_EQ(counters()->init_calls, inits + 1);
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

TEST(Registry, ThreadSafeEntryServesNonThreadSafeConsumer) {
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("test-ok", &ia, DAT_FALSE), DAT_SUCCESS);
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
    ASSERT_EQ(open_ia("test-ok", &ia, DAT_TRUE), DAT_SUCCESS);
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

TEST(Registry, NonThreadSafeEntryRefusesThreadSafeConsumerAndSaysWhy) {
    DAT_RETURN r;
    std::string err = captured_open_error("test-nts", &r, DAT_TRUE);
    EXPECT_EQ(type_of(r), DAT_PROVIDER_NOT_FOUND);
    EXPECT_EQ(subtype_of(r), DAT_THREAD_SAFETY_NOT_FOUND);
    EXPECT_NE(err.find("nonthreadsafe"), std::string::npos) << err;
    EXPECT_NE(err.find("registry_test.conf:"), std::string::npos) << err;
}

TEST(Registry, UnknownNameSaysSoAndListsKnownNames) {
    DAT_RETURN r;
    std::string err = captured_open_error("no-such-ia", &r);
    EXPECT_EQ(type_of(r), DAT_PROVIDER_NOT_FOUND);
    EXPECT_EQ(subtype_of(r), DAT_NAME_NOT_REGISTERED);
    EXPECT_NE(err.find("no-such-ia"), std::string::npos) << err;
    EXPECT_NE(err.find("test-ok"), std::string::npos) << err;
}

TEST(Registry, MissingLibraryGivesTheLoaderError) {
    DAT_RETURN r;
    std::string err = captured_open_error("test-missing", &r);
    EXPECT_EQ(type_of(r), DAT_PROVIDER_NOT_FOUND);
    EXPECT_NE(err.find("libdoes_not_exist.so"), std::string::npos) << err;
    EXPECT_NE(err.find("No such file"), std::string::npos) << err;
}

TEST(Registry, LibraryWithoutEntryPointsIsNamed) {
    DAT_RETURN r;
    std::string err = captured_open_error("test-noinit", &r);
    EXPECT_EQ(type_of(r), DAT_PROVIDER_NOT_FOUND);
    EXPECT_NE(err.find("dat_provider_init"), std::string::npos) << err;
    err = captured_open_error("test-nofini", &r);
    EXPECT_EQ(type_of(r), DAT_PROVIDER_NOT_FOUND);
    EXPECT_NE(err.find("dat_provider_fini"), std::string::npos) << err;
}

TEST(Registry, VersionMismatchesGiveTheirSubtypes) {
    DAT_RETURN r;
    std::string err = captured_open_error("test-v1", &r);
    EXPECT_EQ(type_of(r), DAT_PROVIDER_NOT_FOUND);
    EXPECT_EQ(subtype_of(r), DAT_MAJOR_NOT_FOUND);
    EXPECT_NE(err.find("1.2"), std::string::npos) << err;

    DAT_IA_HANDLE ia;
    r = open_ia("test-ok", &ia, DAT_FALSE, 2, 1); // asks for 2.1, entry is 2.0
    EXPECT_EQ(type_of(r), DAT_PROVIDER_NOT_FOUND);
    EXPECT_EQ(subtype_of(r), DAT_MINOR_NOT_FOUND);
}

TEST(Registry, DisabledAndKernelEntriesAreNotLoaded) {
    DAT_RETURN r;
    std::string err = captured_open_error("test-disabled", &r);
    EXPECT_EQ(type_of(r), DAT_PROVIDER_NOT_FOUND);
    EXPECT_NE(err.find("nondefault"), std::string::npos) << err;
    err = captured_open_error("test-kernel", &r);
    EXPECT_EQ(type_of(r), DAT_PROVIDER_NOT_FOUND);
    EXPECT_NE(err.find("kernel"), std::string::npos) << err;
}

TEST(Registry, ProviderThatDoesNotRegisterIsReportedAndUnloaded) {
    DAT_RETURN r;
    std::string err = captured_open_error("test-noregister", &r);
    EXPECT_EQ(type_of(r), DAT_PROVIDER_NOT_FOUND);
    EXPECT_NE(err.find("did not register"), std::string::npos) << err;
    EXPECT_EQ(live_registrations(), 0);
}

TEST(Registry, FailedProviderOpenReturnsItsErrorAndLeaksNoReference) {
    DAT_RETURN r;
    std::string err = captured_open_error("test-openfail", &r);
    EXPECT_EQ(type_of(r), DAT_INSUFFICIENT_RESOURCES);
    EXPECT_NE(err.find("failed to open"), std::string::npos) << err;
    // No IA holds the provider, so it was finalized and the library closed.
    EXPECT_EQ(live_registrations(), 0);
    // And it can be tried again.
    err = captured_open_error("test-openfail", &r);
    EXPECT_EQ(type_of(r), DAT_INSUFFICIENT_RESOURCES);
}

TEST(Registry, ProviderThatStaysRegisteredAfterFiniIsDropped) {
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("test-noremove", &ia), DAT_SUCCESS);
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
    EXPECT_EQ(live_registrations(), 0);
    // The stale registration is gone: opening loads and registers again.
    ASSERT_EQ(open_ia("test-noremove", &ia), DAT_SUCCESS);
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

TEST(Registry, ProviderMayRegisterFromAnotherThreadDuringInit) { expect_open_close_finalizes("test-threadreg"); }

TEST(Registry, ProviderExceptionsBecomeErrorsAndLeaveNoState) {
    DAT_RETURN r;
    std::string err = captured_open_error("test-openthrow", &r);
    EXPECT_EQ(r, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    EXPECT_NE(err.find("ia_open for 'test-openthrow' threw: test provider: ia_open throws"), std::string::npos) << err;
    EXPECT_EQ(live_registrations(), 0) << "the provider was not finalized";
    err = captured_open_error("test-initthrow", &r);
    EXPECT_EQ(type_of(r), DAT_PROVIDER_NOT_FOUND);
    EXPECT_NE(err.find("dat_provider_init for 'test-initthrow' threw"), std::string::npos) << err;
    // The registry still works, and still owns what it loads.
    expect_open_close_finalizes("test-ok");
}

TEST(Registry, FailOverChainUsesTheNextEntry) {
    DAT_IA_HANDLE ia;
    testing::internal::CaptureStderr();
    DAT_RETURN r = open_ia("test-chain", &ia);
    testing::internal::GetCapturedStderr();
    ASSERT_EQ(r, DAT_SUCCESS);
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

TEST(Registry, RoAwarePrefixIsStripped) {
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("RO_AWARE_test-ok", &ia), DAT_SUCCESS);
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

TEST(Registry, OpenRejectsBadArguments) {
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    EXPECT_EQ(dat_ia_openv(nullptr, 8, &evd, &ia, 2, 0, DAT_FALSE), DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1));
    EXPECT_EQ(dat_ia_openv(const_cast<char *>("test-ok"), -1, &evd, &ia, 2, 0, DAT_FALSE),
              DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    EXPECT_EQ(dat_ia_openv(const_cast<char *>("test-ok"), 8, nullptr, &ia, 2, 0, DAT_FALSE),
              DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    EXPECT_EQ(dat_ia_openv(const_cast<char *>("test-ok"), 8, &evd, nullptr, 2, 0, DAT_FALSE),
              DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4));
    std::string longname(300, 'x');
    EXPECT_EQ(dat_ia_openv(&longname[0], 8, &evd, &ia, 2, 0, DAT_FALSE),
              DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1));
}

TEST(Registry, CloseRejectsBadHandlesAndFlags) {
    EXPECT_EQ(dat_ia_close(DAT_HANDLE_NULL, DAT_CLOSE_ABRUPT_FLAG),
              DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
    EXPECT_EQ(dat_ia_close(reinterpret_cast<DAT_IA_HANDLE>(4000), DAT_CLOSE_ABRUPT_FLAG),
              DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
    int local = 0;
    EXPECT_EQ(dat_ia_close(reinterpret_cast<DAT_IA_HANDLE>(&local), DAT_CLOSE_ABRUPT_FLAG),
              DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("test-ok", &ia), DAT_SUCCESS);
    EXPECT_EQ(dat_ia_close(ia, static_cast<DAT_CLOSE_FLAGS>(7)), DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
    // A closed handle is stale, not a crash.
    EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
    DAT_PZ_HANDLE pz;
    EXPECT_EQ(dat_pz_create(ia, &pz), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
}

TEST(Registry, IaHandleTranslationWorksBothWays) {
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("test-ok", &ia), DAT_SUCCESS);
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    ASSERT_EQ(dat_pz_create(ia, &pz), DAT_SUCCESS);
    // The provider asks dats_get_ia_handle for the consumer's handle of its IA.
    DAT_PZ_PARAM param;
    ASSERT_EQ(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &param), DAT_SUCCESS);
    EXPECT_EQ(param.ia_handle, ia);
    // And the consumer's handle translates to the provider's IA pointer.
    DAT_IA_HANDLE provider_ia = DAT_HANDLE_NULL;
    ASSERT_EQ(dats_get_ia_handle(ia, &provider_ia), DAT_SUCCESS);
    EXPECT_NE(provider_ia, ia);
    DAT_IA_HANDLE back = DAT_HANDLE_NULL;
    ASSERT_EQ(dats_get_ia_handle(provider_ia, &back), DAT_SUCCESS);
    EXPECT_EQ(back, ia);
    EXPECT_EQ(dats_get_ia_handle(ia, nullptr), DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    ASSERT_EQ(dat_pz_free(pz), DAT_SUCCESS);
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
    EXPECT_EQ(dats_get_ia_handle(ia, &back), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
}

TEST(Registry, ListProvidersCountsThenFills) {
    DAT_COUNT n = -1;
    // Count-only call: the count comes back with DAT_INVALID_PARAMETER.
    EXPECT_EQ(dat_registry_list_providers(0, &n, nullptr), DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1));
    // The loadable user-level default entries, a fail-over chain once.
    ASSERT_EQ(n, 13);
    std::vector<DAT_PROVIDER_INFO> infos(static_cast<size_t>(n));
    std::vector<DAT_PROVIDER_INFO *> ptrs;
    for (auto &i : infos)
        ptrs.push_back(&i);
    DAT_COUNT got = 0;
    // Room for fewer than there are: the first ones, as OFED's libdat2
    // answers (Open MPI 1.6.5 lists into room for 8 and needs DAT_SUCCESS).
    ASSERT_EQ(dat_registry_list_providers(2, &got, ptrs.data()), DAT_SUCCESS);
    EXPECT_EQ(got, 2);
    EXPECT_STREQ(infos[0].ia_name, "test-ok");
    EXPECT_STREQ(infos[1].ia_name, "test-nts");
    ASSERT_EQ(dat_registry_list_providers(n - 1, &got, ptrs.data()), DAT_SUCCESS);
    EXPECT_EQ(got, n - 1);
    // Room for more than there are: all of them.
    std::vector<DAT_PROVIDER_INFO> more(static_cast<size_t>(n) + 3);
    std::vector<DAT_PROVIDER_INFO *> more_ptrs;
    for (auto &i : more)
        more_ptrs.push_back(&i);
    ASSERT_EQ(dat_registry_list_providers(n + 3, &got, more_ptrs.data()), DAT_SUCCESS);
    EXPECT_EQ(got, n);
    // A NULL among the entries to fill is refused; one beyond them is not looked at.
    more_ptrs[1] = nullptr;
    EXPECT_EQ(dat_registry_list_providers(n + 3, &got, more_ptrs.data()),
              DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    EXPECT_EQ(dat_registry_list_providers(1, &got, more_ptrs.data()), DAT_SUCCESS);
    EXPECT_EQ(got, 1);
    EXPECT_EQ(dat_registry_list_providers(-1, &got, ptrs.data()), DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1));
    EXPECT_EQ(got, n);
    ASSERT_EQ(dat_registry_list_providers(n, &got, ptrs.data()), DAT_SUCCESS);
    EXPECT_EQ(got, n);
    EXPECT_STREQ(infos[0].ia_name, "test-ok");
    EXPECT_EQ(infos[0].dapl_version_major, 2u);
    EXPECT_EQ(infos[0].is_thread_safe, DAT_TRUE);
    EXPECT_STREQ(infos[1].ia_name, "test-nts");
    EXPECT_EQ(infos[1].is_thread_safe, DAT_FALSE);
    for (auto &i : infos) {
        EXPECT_STRNE(i.ia_name, "test-disabled");
        EXPECT_STRNE(i.ia_name, "test-kernel");
    }
    EXPECT_EQ(dat_registry_list_providers(n, nullptr, ptrs.data()), DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    EXPECT_EQ(dat_registry_list_providers(n, &got, nullptr), DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
}

// ---- dynamic registry --------------------------------------------------------

DAT_RETURN dyn_open(const DAT_NAME_PTR, DAT_COUNT, DAT_EVD_HANDLE *, DAT_IA_HANDLE *ia);
DAT_RETURN dyn_close(DAT_IA_HANDLE, DAT_CLOSE_FLAGS) { return DAT_SUCCESS; }

struct DynIa {
    const DAT_PROVIDER *provider;
};

DAT_PROVIDER make_dynamic_provider() {
    DAT_PROVIDER p;
    memset(&p, 0, sizeof p);
    p.device_name = "dynamic";
    p.ia_open_func = dyn_open;
    p.ia_close_func = dyn_close;
    return p;
}
DAT_PROVIDER g_dyn = make_dynamic_provider();
DynIa g_dyn_ia{&g_dyn};
DAT_RETURN dyn_open(const DAT_NAME_PTR, DAT_COUNT, DAT_EVD_HANDLE *, DAT_IA_HANDLE *ia) {
    *ia = &g_dyn_ia;
    return DAT_SUCCESS;
}

DAT_PROVIDER_INFO dyn_info(const char *name, DAT_BOOLEAN ts = DAT_TRUE) {
    DAT_PROVIDER_INFO info;
    memset(&info, 0, sizeof info);
    strncpy(info.ia_name, name, DAT_NAME_MAX_LENGTH - 1);
    info.dapl_version_major = 2;
    info.dapl_version_minor = 0;
    info.is_thread_safe = ts;
    return info;
}

TEST(DynamicRegistry, AddOpenRemoveFollowsTheManPages) {
    DAT_PROVIDER_INFO info = dyn_info("dyn-1");
    ASSERT_EQ(dat_registry_add_provider(&g_dyn, &info), DAT_SUCCESS);
    EXPECT_EQ(dat_registry_add_provider(&g_dyn, &info), DAT_PROVIDER_ALREADY_REGISTERED);

    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("dyn-1", &ia), DAT_SUCCESS);
    EXPECT_EQ(dat_registry_remove_provider(&g_dyn, &info), DAT_PROVIDER_IN_USE);
    // A provider opened dynamically is listed too.
    DAT_COUNT n = 0;
    dat_registry_list_providers(0, &n, nullptr);
    EXPECT_EQ(n, 14);
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
    EXPECT_EQ(dat_registry_remove_provider(&g_dyn, &info), DAT_SUCCESS);
    EXPECT_EQ(dat_registry_remove_provider(&g_dyn, &info), DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    EXPECT_NE(open_ia("dyn-1", &ia), DAT_SUCCESS);
}

TEST(DynamicRegistry, BadArgumentsAreRejected) {
    DAT_PROVIDER_INFO info = dyn_info("dyn-2");
    EXPECT_EQ(dat_registry_add_provider(nullptr, &info), DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1));
    EXPECT_EQ(dat_registry_add_provider(&g_dyn, nullptr), DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    DAT_PROVIDER empty;
    memset(&empty, 0, sizeof empty);
    EXPECT_EQ(dat_registry_add_provider(&empty, &info), DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1));
    DAT_PROVIDER_INFO unterminated;
    memset(&unterminated, 'x', sizeof unterminated);
    EXPECT_EQ(dat_registry_add_provider(&g_dyn, &unterminated), DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    EXPECT_EQ(dat_registry_remove_provider(nullptr, &info), DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1));
    EXPECT_EQ(dat_registry_remove_provider(&g_dyn, &info), DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
}

TEST(DynamicRegistry, ProvidersRelated) {
    DAT_HA_RELATIONSHIP rel;
    ASSERT_EQ(dat_registry_providers_related(const_cast<char *>("test-ok"), const_cast<char *>("test-ok"), &rel),
              DAT_SUCCESS);
    EXPECT_EQ(rel, DAT_HA_TRUE);
    ASSERT_EQ(dat_registry_providers_related(const_cast<char *>("test-ok"), const_cast<char *>("test-missing"), &rel),
              DAT_SUCCESS);
    EXPECT_EQ(rel, DAT_HA_FALSE);
    ASSERT_EQ(dat_registry_providers_related(const_cast<char *>("test-ok"), const_cast<char *>("test-nts"), &rel),
              DAT_SUCCESS);
    EXPECT_EQ(rel, DAT_HA_UNKNOWN);
    EXPECT_EQ(type_of(dat_registry_providers_related(const_cast<char *>("test-ok"), const_cast<char *>("nope"), &rel)),
              DAT_PROVIDER_NOT_FOUND);
    EXPECT_EQ(dat_registry_providers_related(nullptr, const_cast<char *>("test-ok"), &rel),
              DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1));
    EXPECT_EQ(dat_registry_providers_related(const_cast<char *>("test-ok"), const_cast<char *>("test-ok"), nullptr),
              DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
}

// ---- dispatch ------------------------------------------------------------------

class Dispatch : public testing::Test {
protected:
    void SetUp() override {
        ASSERT_EQ(open_ia("test-ok", &ia_), DAT_SUCCESS);
        ASSERT_EQ(dats_get_ia_handle(ia_, &provider_ia_), DAT_SUCCESS);
        object_.provider = *static_cast<const DAT_PROVIDER *const *>(provider_ia_);
        h_ = &object_;
    }
    void TearDown() override { ASSERT_EQ(dat_ia_close(ia_, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS); }

    // Checks that the last provider call went to `slot` with exactly `args`.
    template <class... A> void expect_call(std::size_t slot, DAT_RETURN r, const A &...args) {
        EXPECT_EQ(r, DAT_SUCCESS);
        const TestProviderCall *c = last_call();
        ASSERT_NE(c, nullptr);
        EXPECT_EQ(c->slot_offset, slot);
        TestProviderCall want{};
        test_provider_pack(want, args...);
        EXPECT_EQ(c->nargs, want.nargs);
        ASSERT_EQ(c->len, want.len);
        EXPECT_EQ(memcmp(c->bytes, want.bytes, want.len), 0) << "arguments were not passed through";
    }

    struct FakeObject {
        const DAT_PROVIDER *provider;
    } object_{};
    void *h_ = nullptr;
    DAT_IA_HANDLE ia_ = DAT_HANDLE_NULL;
    DAT_IA_HANDLE provider_ia_ = DAT_HANDLE_NULL;
};

#define OFF(slot) offsetof(DAT_PROVIDER, slot)

TEST_F(Dispatch, EveryCallReachesItsSlotWithItsArguments) {
    void *h = h_;
    DAT_IA_HANDLE pia = provider_ia_;
    int out_storage[64];
    void *out = out_storage;
    DAT_DTO_COOKIE cookie;
    cookie.as_64 = 0x1122334455667788ull;
    DAT_RMR_COOKIE rcookie;
    rcookie.as_64 = 0x99;
    DAT_LMR_TRIPLET *iov = reinterpret_cast<DAT_LMR_TRIPLET *>(out);
    DAT_RMR_TRIPLET *riov = reinterpret_cast<DAT_RMR_TRIPLET *>(out);
    DAT_IA_ADDRESS_PTR addr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(out);
    DAT_PVOID pd = out;
    DAT_COUNT pds = 17;

    expect_call(OFF(set_consumer_context_func), dat_set_consumer_context(h, cookie), h, cookie);
    expect_call(OFF(get_consumer_context_func), dat_get_consumer_context(h, (DAT_CONTEXT *)out), h, (DAT_CONTEXT *)out);
    expect_call(OFF(get_handle_type_func), dat_get_handle_type(h, (DAT_HANDLE_TYPE *)out), h, (DAT_HANDLE_TYPE *)out);
    // An IA handle given to a generic call is translated too.
    expect_call(OFF(get_handle_type_func), dat_get_handle_type(ia_, (DAT_HANDLE_TYPE *)out), (void *)pia,
                (DAT_HANDLE_TYPE *)out);

    expect_call(OFF(cr_query_func), dat_cr_query(h, DAT_CR_FIELD_ALL, (DAT_CR_PARAM *)out), h,
                (DAT_CR_PARAM_MASK)DAT_CR_FIELD_ALL, (DAT_CR_PARAM *)out);
    expect_call(OFF(cr_accept_func), dat_cr_accept(h, h, pds, pd), h, h, pds, pd);
    expect_call(OFF(cr_reject_func), dat_cr_reject(h, pds, pd), h, pds, pd);
    expect_call(OFF(cr_handoff_func), dat_cr_handoff(h, (DAT_CONN_QUAL)77), h, (DAT_CONN_QUAL)77);

    expect_call(OFF(evd_create_func), dat_evd_create(ia_, 9, h, DAT_EVD_DTO_FLAG, (DAT_EVD_HANDLE *)out), (void *)pia,
                (DAT_COUNT)9, h, (DAT_EVD_FLAGS)DAT_EVD_DTO_FLAG, (DAT_EVD_HANDLE *)out);
    expect_call(OFF(evd_resize_func), dat_evd_resize(h, 5), h, (DAT_COUNT)5);
    expect_call(OFF(evd_post_se_func), dat_evd_post_se(h, (DAT_EVENT *)out), h, (const DAT_EVENT *)out);
    expect_call(OFF(evd_dequeue_func), dat_evd_dequeue(h, (DAT_EVENT *)out), h, (DAT_EVENT *)out);
    expect_call(OFF(evd_query_func), dat_evd_query(h, DAT_EVD_FIELD_ALL, (DAT_EVD_PARAM *)out), h,
                (DAT_EVD_PARAM_MASK)DAT_EVD_FIELD_ALL, (DAT_EVD_PARAM *)out);
    expect_call(OFF(evd_free_func), dat_evd_free(h), h);
    expect_call(OFF(evd_modify_cno_func), dat_evd_modify_cno(h, h), h, h);
    expect_call(OFF(evd_enable_func), dat_evd_enable(h), h);
    expect_call(OFF(evd_disable_func), dat_evd_disable(h), h);
    expect_call(OFF(evd_wait_func), dat_evd_wait(h, 1234, 3, (DAT_EVENT *)out, &pds), h, (DAT_TIMEOUT)1234,
                (DAT_COUNT)3, (DAT_EVENT *)out, &pds);
    expect_call(OFF(evd_set_unwaitable_func), dat_evd_set_unwaitable(h), h);
    expect_call(OFF(evd_clear_unwaitable_func), dat_evd_clear_unwaitable(h), h);

    expect_call(OFF(cno_create_func), dat_cno_create(ia_, DAT_OS_WAIT_PROXY_AGENT_NULL, (DAT_CNO_HANDLE *)out),
                (void *)pia, DAT_OS_WAIT_PROXY_AGENT_NULL, (DAT_CNO_HANDLE *)out);
    expect_call(OFF(cno_fd_create_func), dat_cno_fd_create(ia_, (DAT_FD *)out, (DAT_CNO_HANDLE *)out), (void *)pia,
                (DAT_FD *)out, (DAT_CNO_HANDLE *)out);
    expect_call(OFF(cno_modify_agent_func), dat_cno_modify_agent(h, DAT_OS_WAIT_PROXY_AGENT_NULL), h,
                DAT_OS_WAIT_PROXY_AGENT_NULL);
    expect_call(OFF(cno_query_func), dat_cno_query(h, DAT_CNO_FIELD_ALL, (DAT_CNO_PARAM *)out), h,
                (DAT_CNO_PARAM_MASK)DAT_CNO_FIELD_ALL, (DAT_CNO_PARAM *)out);
    expect_call(OFF(cno_free_func), dat_cno_free(h), h);
    expect_call(OFF(cno_wait_func), dat_cno_wait(h, 55, (DAT_EVD_HANDLE *)out), h, (DAT_TIMEOUT)55,
                (DAT_EVD_HANDLE *)out);
    expect_call(OFF(cno_trigger_func), dat_cno_trigger(h, (DAT_EVD_HANDLE *)out), h, (DAT_EVD_HANDLE *)out);

    expect_call(OFF(ep_create_func), dat_ep_create(ia_, h, h, h, h, (DAT_EP_ATTR *)out, (DAT_EP_HANDLE *)out),
                (void *)pia, h, h, h, h, (const DAT_EP_ATTR *)out, (DAT_EP_HANDLE *)out);
    expect_call(OFF(ep_create_with_srq_func),
                dat_ep_create_with_srq(ia_, h, h, h, h, h, (DAT_EP_ATTR *)out, (DAT_EP_HANDLE *)out), (void *)pia, h, h,
                h, h, h, (const DAT_EP_ATTR *)out, (DAT_EP_HANDLE *)out);
    expect_call(OFF(ep_query_func), dat_ep_query(h, DAT_EP_FIELD_ALL, (DAT_EP_PARAM *)out), h,
                (DAT_EP_PARAM_MASK)DAT_EP_FIELD_ALL, (DAT_EP_PARAM *)out);
    expect_call(OFF(ep_modify_func), dat_ep_modify(h, DAT_EP_FIELD_ALL, (DAT_EP_PARAM *)out), h,
                (DAT_EP_PARAM_MASK)DAT_EP_FIELD_ALL, (const DAT_EP_PARAM *)out);
    expect_call(OFF(ep_connect_func),
                dat_ep_connect(h, addr, 45248, 999, pds, pd, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG), h, addr,
                (DAT_CONN_QUAL)45248, (DAT_TIMEOUT)999, pds, pd, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
    expect_call(OFF(ep_dup_connect_func), dat_ep_dup_connect(h, h, 999, pds, pd, DAT_QOS_BEST_EFFORT), h, h,
                (DAT_TIMEOUT)999, pds, pd, DAT_QOS_BEST_EFFORT);
    expect_call(OFF(ep_common_connect_func), dat_ep_common_connect(h, addr, 999, pds, pd), h, addr, (DAT_TIMEOUT)999,
                pds, pd);
    expect_call(OFF(ep_disconnect_func), dat_ep_disconnect(h, DAT_CLOSE_GRACEFUL_FLAG), h, DAT_CLOSE_GRACEFUL_FLAG);
    expect_call(OFF(ep_post_send_func), dat_ep_post_send(h, 2, iov, cookie, DAT_COMPLETION_SUPPRESS_FLAG), h,
                (DAT_COUNT)2, iov, cookie, (DAT_COMPLETION_FLAGS)DAT_COMPLETION_SUPPRESS_FLAG);
    expect_call(OFF(ep_post_send_with_invalidate_func),
                dat_ep_post_send_with_invalidate(h, 2, iov, cookie, DAT_COMPLETION_DEFAULT_FLAG, DAT_TRUE, 0xabcd), h,
                (DAT_COUNT)2, iov, cookie, (DAT_COMPLETION_FLAGS)DAT_COMPLETION_DEFAULT_FLAG, (DAT_BOOLEAN)DAT_TRUE,
                (DAT_RMR_CONTEXT)0xabcd);
    expect_call(OFF(ep_post_recv_func), dat_ep_post_recv(h, 3, iov, cookie, DAT_COMPLETION_DEFAULT_FLAG), h,
                (DAT_COUNT)3, iov, cookie, (DAT_COMPLETION_FLAGS)DAT_COMPLETION_DEFAULT_FLAG);
    expect_call(OFF(ep_post_rdma_read_func),
                dat_ep_post_rdma_read(h, 1, iov, cookie, riov, DAT_COMPLETION_DEFAULT_FLAG), h, (DAT_COUNT)1, iov,
                cookie, (const DAT_RMR_TRIPLET *)riov, (DAT_COMPLETION_FLAGS)DAT_COMPLETION_DEFAULT_FLAG);
    expect_call(OFF(ep_post_rdma_read_to_rmr_func),
                dat_ep_post_rdma_read_to_rmr(h, riov, cookie, riov, DAT_COMPLETION_DEFAULT_FLAG), h,
                (const DAT_RMR_TRIPLET *)riov, cookie, (const DAT_RMR_TRIPLET *)riov,
                (DAT_COMPLETION_FLAGS)DAT_COMPLETION_DEFAULT_FLAG);
    expect_call(OFF(ep_post_rdma_write_func),
                dat_ep_post_rdma_write(h, 1, iov, cookie, riov, DAT_COMPLETION_DEFAULT_FLAG), h, (DAT_COUNT)1, iov,
                cookie, (const DAT_RMR_TRIPLET *)riov, (DAT_COMPLETION_FLAGS)DAT_COMPLETION_DEFAULT_FLAG);
    expect_call(OFF(ep_get_status_func),
                dat_ep_get_status(h, (DAT_EP_STATE *)out, (DAT_BOOLEAN *)out, (DAT_BOOLEAN *)out), h,
                (DAT_EP_STATE *)out, (DAT_BOOLEAN *)out, (DAT_BOOLEAN *)out);
    expect_call(OFF(ep_free_func), dat_ep_free(h), h);
    expect_call(OFF(ep_reset_func), dat_ep_reset(h), h);
    expect_call(OFF(ep_recv_query_func), dat_ep_recv_query(h, &pds, &pds), h, &pds, &pds);
    expect_call(OFF(ep_set_watermark_func), dat_ep_set_watermark(h, 4, 8), h, (DAT_COUNT)4, (DAT_COUNT)8);

    DAT_REGION_DESCRIPTION region;
    region.for_va = out;
    expect_call(OFF(lmr_create_func),
                dat_lmr_create(ia_, DAT_MEM_TYPE_VIRTUAL, region, 4096, h, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
                               (DAT_LMR_HANDLE *)out, (DAT_LMR_CONTEXT *)out, (DAT_RMR_CONTEXT *)out, (DAT_VLEN *)out,
                               (DAT_VADDR *)out),
                (void *)pia, DAT_MEM_TYPE_VIRTUAL, region, (DAT_VLEN)4096, h, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
                (DAT_LMR_HANDLE *)out, (DAT_LMR_CONTEXT *)out, (DAT_RMR_CONTEXT *)out, (DAT_VLEN *)out,
                (DAT_VADDR *)out);
    expect_call(OFF(lmr_query_func), dat_lmr_query(h, DAT_LMR_FIELD_ALL, (DAT_LMR_PARAM *)out), h,
                (DAT_LMR_PARAM_MASK)DAT_LMR_FIELD_ALL, (DAT_LMR_PARAM *)out);
    expect_call(OFF(lmr_free_func), dat_lmr_free(h), h);
    expect_call(OFF(lmr_sync_rdma_read_func), dat_lmr_sync_rdma_read(ia_, iov, 2), (void *)pia,
                (const DAT_LMR_TRIPLET *)iov, (DAT_VLEN)2);
    expect_call(OFF(lmr_sync_rdma_write_func), dat_lmr_sync_rdma_write(ia_, iov, 2), (void *)pia,
                (const DAT_LMR_TRIPLET *)iov, (DAT_VLEN)2);
    expect_call(OFF(rmr_create_func), dat_rmr_create(h, (DAT_RMR_HANDLE *)out), h, (DAT_RMR_HANDLE *)out);
    expect_call(OFF(rmr_create_for_ep_func), dat_rmr_create_for_ep(h, (DAT_RMR_HANDLE *)out), h, (DAT_RMR_HANDLE *)out);
    expect_call(OFF(rmr_query_func), dat_rmr_query(h, DAT_RMR_FIELD_ALL, (DAT_RMR_PARAM *)out), h,
                (DAT_RMR_PARAM_MASK)DAT_RMR_FIELD_ALL, (DAT_RMR_PARAM *)out);
    expect_call(OFF(rmr_bind_func),
                dat_rmr_bind(h, h, iov, DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA, h, rcookie,
                             DAT_COMPLETION_DEFAULT_FLAG, (DAT_RMR_CONTEXT *)out),
                h, h, (const DAT_LMR_TRIPLET *)iov, DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA, h, rcookie,
                (DAT_COMPLETION_FLAGS)DAT_COMPLETION_DEFAULT_FLAG, (DAT_RMR_CONTEXT *)out);
    expect_call(OFF(rmr_free_func), dat_rmr_free(h), h);

    expect_call(OFF(psp_create_func), dat_psp_create(ia_, 45248, h, DAT_PSP_CONSUMER_FLAG, (DAT_PSP_HANDLE *)out),
                (void *)pia, (DAT_CONN_QUAL)45248, h, DAT_PSP_CONSUMER_FLAG, (DAT_PSP_HANDLE *)out);
    expect_call(OFF(psp_create_any_func),
                dat_psp_create_any(ia_, (DAT_CONN_QUAL *)out, h, DAT_PSP_PROVIDER_FLAG, (DAT_PSP_HANDLE *)out),
                (void *)pia, (DAT_CONN_QUAL *)out, h, DAT_PSP_PROVIDER_FLAG, (DAT_PSP_HANDLE *)out);
    expect_call(OFF(psp_query_func), dat_psp_query(h, DAT_PSP_FIELD_ALL, (DAT_PSP_PARAM *)out), h,
                (DAT_PSP_PARAM_MASK)DAT_PSP_FIELD_ALL, (DAT_PSP_PARAM *)out);
    expect_call(OFF(psp_free_func), dat_psp_free(h), h);
    expect_call(OFF(rsp_create_func), dat_rsp_create(ia_, 45249, h, h, (DAT_RSP_HANDLE *)out), (void *)pia,
                (DAT_CONN_QUAL)45249, h, h, (DAT_RSP_HANDLE *)out);
    expect_call(OFF(rsp_query_func), dat_rsp_query(h, DAT_RSP_FIELD_ALL, (DAT_RSP_PARAM *)out), h,
                (DAT_RSP_PARAM_MASK)DAT_RSP_FIELD_ALL, (DAT_RSP_PARAM *)out);
    expect_call(OFF(rsp_free_func), dat_rsp_free(h), h);
    expect_call(OFF(csp_create_func), dat_csp_create(ia_, (DAT_COMM *)out, addr, h, (DAT_CSP_HANDLE *)out), (void *)pia,
                (DAT_COMM *)out, addr, h, (DAT_CSP_HANDLE *)out);
    expect_call(OFF(csp_query_func), dat_csp_query(h, DAT_CSP_FIELD_ALL, (DAT_CSP_PARAM *)out), h,
                (DAT_CSP_PARAM_MASK)DAT_CSP_FIELD_ALL, (DAT_CSP_PARAM *)out);
    expect_call(OFF(csp_free_func), dat_csp_free(h), h);

    expect_call(OFF(srq_create_func), dat_srq_create(ia_, h, (DAT_SRQ_ATTR *)out, (DAT_SRQ_HANDLE *)out), (void *)pia,
                h, (DAT_SRQ_ATTR *)out, (DAT_SRQ_HANDLE *)out);
    expect_call(OFF(srq_free_func), dat_srq_free(h), h);
    expect_call(OFF(srq_post_recv_func), dat_srq_post_recv(h, 2, iov, cookie), h, (DAT_COUNT)2, iov, cookie);
    expect_call(OFF(srq_query_func), dat_srq_query(h, DAT_SRQ_FIELD_ALL, (DAT_SRQ_PARAM *)out), h,
                (DAT_SRQ_PARAM_MASK)DAT_SRQ_FIELD_ALL, (DAT_SRQ_PARAM *)out);
    expect_call(OFF(srq_resize_func), dat_srq_resize(h, 64), h, (DAT_COUNT)64);
    expect_call(OFF(srq_set_lw_func), dat_srq_set_lw(h, 4), h, (DAT_COUNT)4);
}

TEST_F(Dispatch, ExtensionOpForwardsItsVariableArguments) {
    ASSERT_EQ(dat_extension_op(h_, 42, 7, 8), DAT_SUCCESS);
    const TestProviderCall *c = last_call();
    EXPECT_EQ(c->slot_offset, OFF(handle_extendedop_func));
    EXPECT_EQ(c->first, h_);
    EXPECT_EQ(c->nargs, 3u);
}

// dat_ib_open_query / dat_ib_close_query: an extension opened by IA name
// holds the provider until its close op, as with OFED.
TEST_F(Dispatch, ExtensionOpenByNameHoldsTheProviderUntilClose) {
    const char *name = "test-ok";
    DAT_HANDLE query = nullptr;
    ASSERT_EQ(dat_extension_op(nullptr, DAT_OPEN_EXTENSION_BASE, name, &query), DAT_SUCCESS);
    const TestProviderCall *c = last_call();
    EXPECT_EQ(c->slot_offset, OFF(handle_extendedop_func));
    EXPECT_EQ(c->first, name) << "the provider gets the IA name in place of a handle";
    int finis = counters()->fini_calls;
    // Closing the only IA does not finalize: the extension still holds it.
    ASSERT_EQ(dat_ia_close(ia_, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
    EXPECT_EQ(counters()->fini_calls, finis);
    ASSERT_EQ(dat_extension_op(h_, DAT_CLOSE_EXTENSION_BASE), DAT_SUCCESS);
    EXPECT_EQ(counters()->fini_calls, finis + 1);
    // A second close has no open to answer: refused, nothing released.
    EXPECT_EQ(dat_extension_op(h_, DAT_CLOSE_EXTENSION_BASE), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1));
    EXPECT_EQ(dat_extension_op(nullptr, DAT_OPEN_EXTENSION_BASE, nullptr),
              DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    EXPECT_EQ(type_of(dat_extension_op(nullptr, DAT_OPEN_EXTENSION_BASE, "no-such-ia")), DAT_PROVIDER_NOT_FOUND);
    // TearDown closes ia_ again: reopen so it has something to close.
    ASSERT_EQ(open_ia("test-ok", &ia_), DAT_SUCCESS);
}

// A close op with no open op before it must not take the reference an open
// IA holds (else the provider would be finalized under the IA).
TEST_F(Dispatch, ExtensionCloseWithoutOpenIsRefused) {
    int finis = counters()->fini_calls;
    EXPECT_EQ(dat_extension_op(h_, DAT_CLOSE_EXTENSION_BASE), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1));
    EXPECT_EQ(counters()->fini_calls, finis);
    DAT_PZ_HANDLE pz;
    ASSERT_EQ(dat_pz_create(ia_, &pz), DAT_SUCCESS) << "the IA must still be usable";
    ASSERT_EQ(dat_pz_free(pz), DAT_SUCCESS);
}

// Every call that takes a handle refuses NULL and small garbage with the
// man page's DAT_INVALID_HANDLE, before touching memory.
TEST(HandleChecks, NullAndSmallHandlesAreRejected) {
    DAT_EVENT ev;
    DAT_COUNT n;
    DAT_DTO_COOKIE cookie;
    cookie.as_64 = 0;
    for (std::uintptr_t v : {std::uintptr_t(0), std::uintptr_t(3), std::uintptr_t(4095)}) {
        void *h = reinterpret_cast<void *>(v);
        EXPECT_EQ(dat_ep_post_send(h, 0, nullptr, cookie, DAT_COMPLETION_DEFAULT_FLAG),
                  DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
        EXPECT_EQ(dat_evd_dequeue(h, &ev), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST));
        EXPECT_EQ(dat_evd_wait(h, 0, 1, &ev, &n), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST));
        EXPECT_EQ(dat_lmr_free(h), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR));
        EXPECT_EQ(dat_rmr_free(h), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RMR));
        EXPECT_EQ(dat_pz_free(h), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ));
        EXPECT_EQ(dat_psp_free(h), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PSP));
        EXPECT_EQ(dat_rsp_free(h), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RSP));
        EXPECT_EQ(dat_csp_free(h), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CSP));
        EXPECT_EQ(dat_srq_free(h), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ));
        EXPECT_EQ(dat_cno_free(h), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO));
        EXPECT_EQ(dat_cr_reject(h, 0, nullptr), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR));
        EXPECT_EQ(dat_ep_free(h), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
        EXPECT_EQ(dat_ia_query(h, nullptr, 0, nullptr, 0, nullptr),
                  DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA));
        EXPECT_EQ(dat_get_handle_type(h, nullptr), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1));
        EXPECT_EQ(dat_extension_op(h, 1), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1));
    }
}

TEST(HandleChecks, ObjectWithoutProviderIsRejected) {
    void *zero[4] = {nullptr, nullptr, nullptr, nullptr};
    EXPECT_EQ(dat_ep_free(zero), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
    EXPECT_EQ(dat_get_handle_type(zero, nullptr), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1));
}

TEST(HandleChecks, EmptyProviderSlotIsNotImplementedNotACrash) {
    static DAT_PROVIDER table = make_dynamic_provider(); // only ia_open/ia_close
    DAT_PROVIDER_INFO info = dyn_info("dyn-empty-slots");
    ASSERT_EQ(dat_registry_add_provider(&table, &info), DAT_SUCCESS);
    struct {
        const DAT_PROVIDER *p;
    } obj{&table};
    EXPECT_EQ(dat_ep_free(&obj), DAT_NOT_IMPLEMENTED);
    EXPECT_EQ(dat_extension_op(&obj, 1), DAT_NOT_IMPLEMENTED);
    EXPECT_EQ(dat_registry_remove_provider(&table, &info), DAT_SUCCESS);
}

// The DTO posts and dat_evd_dequeue skip the registry's guard only for a
// table whose library exports the kit's promise (dat2_provider_guards_dto_slots):
// a table registered without it keeps the guard, and an exception from its
// slot comes back as an error.
TEST(HandleChecks, AnExceptionFromAPostOfAProviderWithoutThePromiseBecomesAnError) {
    static DAT_PROVIDER table = make_dynamic_provider();
    table.ep_post_send_func = [](DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE,
                                 DAT_COMPLETION_FLAGS) -> DAT_RETURN { throw std::runtime_error("the post throws"); };
    table.evd_dequeue_func = [](DAT_EVD_HANDLE, DAT_EVENT *) -> DAT_RETURN {
        throw std::runtime_error("the dequeue throws");
    };
    DAT_PROVIDER_INFO info = dyn_info("dyn-throwing-dto");
    ASSERT_EQ(dat_registry_add_provider(&table, &info), DAT_SUCCESS);
    struct {
        const DAT_PROVIDER *p;
    } obj{&table};
    EXPECT_EQ(dat_ep_post_send(&obj, 0, nullptr, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG),
              DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    DAT_EVENT event;
    EXPECT_EQ(dat_evd_dequeue(&obj, &event), DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    EXPECT_EQ(dat_registry_remove_provider(&table, &info), DAT_SUCCESS);
}

// A handle that points at readable memory which is not a DAT object (its
// first word is no registered provider table) is refused, not called through.
TEST(HandleChecks, MappedGarbageIsRejected) {
    std::uintptr_t garbage[8];
    for (auto &g : garbage)
        g = reinterpret_cast<std::uintptr_t>(&garbage[1]);
    EXPECT_EQ(dat_evd_free(garbage), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST));
    EXPECT_EQ(dat_ep_post_recv(garbage, 0, nullptr, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG),
              DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
    EXPECT_EQ(dat_set_consumer_context(garbage, DAT_CONTEXT{}), DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1));
}

// Opens and closes from several threads at once: no lost or doubled
// references (run under TSan in CI).
TEST(Concurrency, ParallelOpenCloseKeepsReferencesRight) {
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < 200; ++i) {
                DAT_IA_HANDLE ia;
                if (open_ia("test-ok", &ia) != DAT_SUCCESS) {
                    ++failures;
                    continue;
                }
                DAT_PZ_HANDLE pz;
                if (dat_pz_create(ia, &pz) != DAT_SUCCESS || dat_pz_free(pz) != DAT_SUCCESS)
                    ++failures;
                if (dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG) != DAT_SUCCESS)
                    ++failures;
            }
        });
    }
    for (auto &t : threads)
        t.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(live_registrations(), 0);
}

} // namespace

int main(int argc, char **argv) {
    // Before the first DAT call: libdat2 reads its dat.conf once.
    setenv("DAT_OVERRIDE", DAT2_TEST_CONF, 1);
    testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
