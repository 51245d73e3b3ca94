// SPDX-License-Identifier: BSD-3-Clause
// Shared pieces of the conformance suites. The suites talk to the DAT API
// only (our libdat2 + whichever plugin the IA name selects), so the same
// suites run over every plugin: each suite is parametrized over the IA
// names from DAT2_CONFORMANCE_IAS (comma-separated), default "ofi-tcp".
#pragma once

#include <dat2/udat.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace conformance {

std::vector<std::string> ia_names();

// gtest parameter names: "ofi-tcp" -> "ofi_tcp".
std::string param_name(const ::testing::TestParamInfo<std::string> &info);

// DAT_RETURN with its major code and subtype spelled out, for messages.
std::string ret_text(DAT_RETURN r);

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
::testing::AssertionResult IsInvalidHandle(const char *expr_text, const char *kind_text,
                                           DAT_RETURN r, HandleKind kind);

// A software event carrying `pointer`, as dat_evd_post_se(3DAT) takes it.
DAT_EVENT software_event(void *pointer);

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

#define EXPECT_DAT_OK(expr)                                                                    \
    do {                                                                                       \
        DAT_RETURN dat_ret_ = (expr);                                                          \
        EXPECT_EQ(dat_ret_, DAT_SUCCESS) << #expr << " -> " << conformance::ret_text(dat_ret_); \
    } while (0)
#define ASSERT_DAT_OK(expr)                                                                    \
    do {                                                                                       \
        DAT_RETURN dat_ret_ = (expr);                                                          \
        ASSERT_EQ(dat_ret_, DAT_SUCCESS) << #expr << " -> " << conformance::ret_text(dat_ret_); \
    } while (0)
// Compares the major code (DAT_GET_TYPE) and, when `subtype` is not 0, the subtype.
#define EXPECT_DAT_ERR(expr, type, subtype)                                                    \
    do {                                                                                       \
        DAT_RETURN dat_ret_ = (expr);                                                          \
        EXPECT_EQ(DAT_GET_TYPE(dat_ret_), DAT_RETURN(type)) << #expr << " -> " << conformance::ret_text(dat_ret_); \
        if ((subtype) != 0) {                                                                  \
            EXPECT_EQ(DAT_GET_SUBTYPE(dat_ret_), DAT_RETURN(subtype)) << #expr << " -> " << conformance::ret_text(dat_ret_); \
        }                                                                                      \
    } while (0)

#define INSTANTIATE_OVER_IAS(suite)                                                            \
    INSTANTIATE_TEST_SUITE_P(Ia, suite, ::testing::ValuesIn(conformance::ia_names()),          \
                             conformance::param_name)

// Expects DAT_INVALID_HANDLE with a subtype consistent with `kind`
// (conformance::HandleKind::Evd etc.); see conformance::IsInvalidHandle.
#define EXPECT_DAT_INVALID_HANDLE(expr, kind) \
    EXPECT_PRED_FORMAT2(conformance::IsInvalidHandle, (expr), (kind))
