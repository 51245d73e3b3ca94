// SPDX-License-Identifier: BSD-3-Clause
// Shared pieces of the conformance suites. The suites talk to the DAT API
// only (our libdat2 + whichever plugin the IA name selects), so the same
// suites run over every plugin: each suite is parametrized over the IA
// names from DAT2_CONFORMANCE_IAS (comma-separated), default "ofi-tcp".
#pragma once

#include <dat2/udat.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

// Which sanitizer the tests were built with (some measurements mean nothing
// under one: resident memory under ASan and TSan, per-descriptor costs
// under TSan).
#if defined(__SANITIZE_ADDRESS__)
#define DAT2_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DAT2_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define DAT2_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DAT2_TEST_TSAN 1
#endif
#endif

namespace conformance {

#ifdef DAT2_TEST_ASAN
inline constexpr bool kAsanBuild = true;
#else
inline constexpr bool kAsanBuild = false;
#endif
#ifdef DAT2_TEST_TSAN
inline constexpr bool kTsanBuild = true;
#else
inline constexpr bool kTsanBuild = false;
#endif

using namespace std::chrono_literals;

// How soon a wake-up the code makes at once (a CNO's fd, an agent) must be
// seen. The bound tells "woken by the event" from "woken by a timeout
// (seconds away) or never"; on two cores shared with other tests, or under TSan
// with a spinning thread beside the two peers, a prompt wake-up can take a
// few hundred ms.
inline constexpr int kPromptWakeMs = kTsanBuild || kAsanBuild ? 1000 : 500;

std::vector<std::string> ia_names();
// DAT2_CONFORMANCE_WRITE_COMPLETION=transmit: the IAs under test complete an
// RDMA Write once sent (the ofi plugin's write_completion=transmit), so a
// write the target refuses may complete successfully before the connection
// breaks.
bool transmit_write_completion();

// gtest parameter names: "ofi-tcp" -> "ofi_tcp".
std::string param_name(const ::testing::TestParamInfo<std::string> &info);

// DAT_RETURN with its major code and subtype spelled out, for messages.
std::string ret_text(DAT_RETURN r);

// ---- known gaps ---------------------------------------------------------------
// What the implementation does not do yet, each with the issue that will do
// it. A test that runs into one skips with this text (and the return code),
// so the skip names what is missing; it is never a reason to pass.
inline constexpr const char *kGapRsp =
    "known gap, issue 4: Reserved Service Points (dat_rsp_create) are not implemented yet";
inline constexpr const char *kGapPspProvider =
    "known gap, issue 4: DAT_PSP_PROVIDER_FLAG (Endpoints created by the provider for a PSP) is not supported yet";

// The implementation says it lacks what was asked for: DAT_NOT_IMPLEMENTED or
// DAT_MODEL_NOT_SUPPORTED.
bool not_provided(DAT_RETURN r);

// ---- the watchdog ---------------------------------------------------------------
// A test that runs longer than this is stuck inside a DAT call.
constexpr int kWatchdogSeconds = 90;

// Ends the process, naming the test, if it runs longer than `seconds`: a DAT
// call that never returns (or a waiter thread that never ends) must not hang
// the suite until ctest's own timeout.
class Watchdog {
public:
    void start(const std::string &what, int seconds = kWatchdogSeconds);
    void stop();
    ~Watchdog() { stop(); }

private:
    struct State;
    State *st_ = nullptr;
};

// Base of every suite: parametrized over the IA name, under a watchdog. A
// suite that overrides SetUp/TearDown calls these first/last.
class ConformanceTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override;
    void TearDown() override;
    Watchdog watchdog;
};

// One opened IA with its async EVD and one PZ; closed (abrupt) on destruction.
struct OpenIa {
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    DAT_RETURN open(const std::string &name); // opens IA and creates the PZ
    void close();
    ~OpenIa() { close(); }
};

// ---- helpers of the local-object suites (ia, pz, evd, cno, lmr, handles) ----

// What kind of object a handle argument names, for EXPECT_DAT_INVALID_HANDLE.
enum class HandleKind { Any, Ia, Evd, Ep, Lmr, Rmr, Pz, Psp, Rsp, Cr, Cno, Srq };

// DAT_INVALID_HANDLE whose subtype does not contradict the argument: no
// subtype, a positional DAT_INVALID_HANDLE1..10, or a subtype naming `kind`
// (any DAT_INVALID_HANDLE_EVD_* for an EVD). The man pages name only the major
// code, so a subtype naming another kind of object is the one thing refused.
::testing::AssertionResult IsInvalidHandle(const char *expr_text, const char *kind_text, DAT_RETURN r, HandleKind kind);

// The DAT_HANDLE_TYPE of objects of `kind` (HandleKind::Any has none: DAT_HANDLE_TYPE_IA).
DAT_HANDLE_TYPE handle_type(HandleKind kind);

// The query of `kind` (dat_evd_query, dat_ep_query, ...; dat_ia_query with no
// fields, dat_get_handle_type for HandleKind::Any) on `h`, into scratch
// structures; `*ia` gets the IA handle the object reports (where it does).
DAT_RETURN query_as(HandleKind kind, DAT_HANDLE h, DAT_IA_HANDLE *ia = nullptr);

// The free (destroy) call of `kind` on `h`: dat_evd_free, dat_ep_free, ...,
// dat_ia_close (abrupt) for HandleKind::Ia. Not for Any or Cr.
DAT_RETURN free_as(HandleKind kind, DAT_HANDLE h);

// A software event carrying `pointer`, as dat_evd_post_se(3DAT) takes it.
DAT_EVENT software_event(void *pointer);

// dat_lmr_create of DAT_MEM_TYPE_VIRTUAL memory [address, address + length);
// what it returns besides the handle is dropped.
DAT_RETURN create_lmr(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, void *address, DAT_VLEN length, DAT_MEM_PRIV_FLAGS privileges,
                      DAT_LMR_HANDLE *lmr);

// One live object of every kind a Consumer can make without a connection, all
// on one IA: a CNO, a software EVD feeding it, a DTO, a connection and a CR EVD,
// a PZ, an LMR over `buffer`, an RMR when the IA has any (max_rmrs), two
// Endpoints, a PSP, and an RSP for `rsp_ep` when dat_rsp_create works
// (`rsp_create` keeps its answer; `rsp` stays DAT_HANDLE_NULL otherwise).
struct LocalObjects {
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE sw_evd = DAT_HANDLE_NULL, dto_evd = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE conn_evd = DAT_HANDLE_NULL, cr_evd = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL, rsp_ep = DAT_HANDLE_NULL;
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
    DAT_CONN_QUAL psp_qual = 0;
    bool has_rmr = false;
    DAT_RETURN rsp_create = DAT_INTERNAL_ERROR;
    std::vector<char> buffer = std::vector<char>(8192);

    struct Object {
        DAT_HANDLE handle;
        HandleKind kind;
        const char *what;
    };
    // Every object that exists (no RMR without RMRs, no RSP without dat_rsp_create).
    std::vector<Object> all() const;

    // Both use ASSERTs: call them with ASSERT_NO_FATAL_FAILURE.
    void create(DAT_IA_HANDLE ia);
    // Frees every object (each free must succeed); the handles keep their
    // values, for tests of destroyed handles.
    void destroy();
};

// ---- waiters in other threads ------------------------------------------------------
// Every wait passes a finite timeout, so a waiter thread always ends (and the
// std::future destructor, which joins it, cannot hang).
constexpr DAT_TIMEOUT kLongWaitUs = 5'000'000; // a wait the test expects to be released early
constexpr auto kLetWaiterBlock = 150ms;        // only to give a waiter time to block
constexpr auto kWakeBound = 3s;                // how long a released waiter may take to return

struct EvdWait {
    DAT_RETURN r = DAT_INTERNAL_ERROR;
    DAT_EVENT ev{};
    DAT_COUNT nmore = -1;
};
// A thread blocked in dat_evd_wait(evd, timeout_us, threshold).
std::future<EvdWait> start_evd_wait(DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout_us = kLongWaitUs, DAT_COUNT threshold = 1);

struct CnoWait {
    DAT_RETURN r = DAT_INTERNAL_ERROR;
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL; // starts as a junk value, to see that it is written
};
// A thread blocked in dat_cno_wait(cno, timeout_us).
std::future<CnoWait> start_cno_wait(DAT_CNO_HANDLE cno, DAT_TIMEOUT timeout_us = kLongWaitUs);

// Gives the waiter kLetWaiterBlock to block; it must not have returned.
template <class T>::testing::AssertionResult still_blocked(const std::future<T> &waiter) {
    std::this_thread::sleep_for(kLetWaiterBlock);
    if (waiter.wait_for(0s) == std::future_status::ready)
        return ::testing::AssertionFailure() << "the waiter returned early";
    return ::testing::AssertionSuccess();
}

// The waiter returns within `bound`.
template <class T>
::testing::AssertionResult returns_within(const std::future<T> &waiter, std::chrono::milliseconds bound = kWakeBound) {
    if (waiter.wait_for(bound) != std::future_status::ready)
        return ::testing::AssertionFailure() << "the waiter did not return within " << bound.count() << " ms";
    return ::testing::AssertionSuccess();
}

// dat_ia_query with every field of both attribute structures.
// DAT_PROVIDER_ATTR has a const member, so it lives in raw storage here.
struct IaAttributes {
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
    DAT_IA_ATTR ia{};
    DAT_RETURN query(DAT_IA_HANDLE ia_handle);
    DAT_PROVIDER_ATTR &provider() { return *reinterpret_cast<DAT_PROVIDER_ATTR *>(provider_raw_); }

private:
    alignas(DAT_PROVIDER_ATTR) unsigned char provider_raw_[sizeof(DAT_PROVIDER_ATTR)] = {};
};

// dat_ia_open takes `const DAT_NAME_PTR`, i.e. `char *const`: the name is not written.
inline DAT_NAME_PTR ia_name_ptr(const std::string &name) { return const_cast<DAT_NAME_PTR>(name.c_str()); }

// No OS Wait Proxy Agent (DAT_OS_WAIT_PROXY_AGENT_NULL is a C99 compound literal).
inline DAT_OS_WAIT_PROXY_AGENT no_agent() { return DAT_OS_WAIT_PROXY_AGENT{nullptr, nullptr}; }

} // namespace conformance

#define EXPECT_DAT_OK(expr)                                                                                            \
    do {                                                                                                               \
        DAT_RETURN dat_ret_ = (expr);                                                                                  \
        EXPECT_EQ(dat_ret_, DAT_SUCCESS) << #expr << " -> " << conformance::ret_text(dat_ret_);                        \
    } while (0)
#define ASSERT_DAT_OK(expr)                                                                                            \
    do {                                                                                                               \
        DAT_RETURN dat_ret_ = (expr);                                                                                  \
        ASSERT_EQ(dat_ret_, DAT_SUCCESS) << #expr << " -> " << conformance::ret_text(dat_ret_);                        \
    } while (0)
// Compares the major code (DAT_GET_TYPE) and, when `subtype` is not 0, the subtype.
#define EXPECT_DAT_ERR(expr, type, subtype)                                                                            \
    do {                                                                                                               \
        DAT_RETURN dat_ret_ = (expr);                                                                                  \
        EXPECT_EQ(DAT_GET_TYPE(dat_ret_), DAT_RETURN(type)) << #expr << " -> " << conformance::ret_text(dat_ret_);     \
        if ((subtype) != 0) {                                                                                          \
            EXPECT_EQ(DAT_GET_SUBTYPE(dat_ret_), DAT_RETURN(subtype))                                                  \
                << #expr << " -> " << conformance::ret_text(dat_ret_);                                                 \
        }                                                                                                              \
    } while (0)

// In a TEST body only (GTEST_SKIP leaves just the current function): skips
// when `r` says the feature is not provided, printing the gap (kGap*) and `r`.
#define SKIP_IF_NOT_PROVIDED(r, gap)                                                                                   \
    do {                                                                                                               \
        DAT_RETURN dat_gap_ret_ = (r);                                                                                 \
        if (conformance::not_provided(dat_gap_ret_))                                                                   \
            GTEST_SKIP() << (gap) << " (" << conformance::ret_text(dat_gap_ret_) << ")";                               \
    } while (0)

#define INSTANTIATE_OVER_IAS(suite)                                                                                    \
    INSTANTIATE_TEST_SUITE_P(Ia, suite, ::testing::ValuesIn(conformance::ia_names()), conformance::param_name)

// Expects DAT_INVALID_HANDLE with a subtype consistent with `kind`
// (conformance::HandleKind::Evd etc.); see conformance::IsInvalidHandle.
#define EXPECT_DAT_INVALID_HANDLE(expr, kind) EXPECT_PRED_FORMAT2(conformance::IsInvalidHandle, (expr), (kind))
