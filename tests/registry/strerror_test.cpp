// Conformance of dat_strerror against every code dat_error.h defines.
//
// The two lists below name every enumerator of DAT_RETURN_TYPE and
// DAT_RETURN_SUBTYPE. The string we expect for each is its own name (the
// preprocessor's #name), except DAT_NO_SUBTYPE, which reads as "" as in OFED.
// The second column is what OFED dapl 2.1.10's dat_strerror
// (/usr/lib/x86_64-linux-gnu/libdat2.so.2, Debian libdapl2
// 2.1.10.1.f1e05b7a-3+b1) returned for that code, measured by calling it for
// every enumerator (the subtype with type DAT_INVALID_STATE); nullptr where it
// returned DAT_INVALID_PARAMETER. Our strings must equal OFED's wherever OFED
// knows the code, except the deviations listed in kOfedDeviations.
//
// Completeness: parsing dat_error.h (comments stripped, enumerators of
// dat_return_type and dat_return_subtype) gives 26 types (25 plus
// DAT_EXTENSION_BASE, which the header declares only under DAT_EXTENSIONS) and
// 104 subtypes. The subtype enum is dense, so its coverage is checked at
// compile time; the type list is checked by scanning the whole type space.

#include <netinet/in.h> // dat_ib_extensions.h needs struct sockaddr_in6

#include <dat2/udat.h>
#if __has_include(<dat2/dat_ib_extensions.h>)
#include <dat2/dat_ib_extensions.h>
#define DAT2_TEST_IB_EXTENSIONS 1
#endif

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

// dat_error.h declares DAT_EXTENSION_BASE only under DAT_EXTENSIONS, which
// udat_config.h always defines.
static_assert(DAT_EXTENSION_BASE == 0x10000000, "DAT_EXTENSION_BASE is ABI");

// X(enumerator, OFED 2.1.10 major string or nullptr)
#define DAT2_TEST_TYPES(X)                                                                                             \
    X(DAT_SUCCESS, "DAT_SUCCESS")                                                                                      \
    X(DAT_ABORT, "DAT_ABORT")                                                                                          \
    X(DAT_CONN_QUAL_IN_USE, "DAT_CONN_QUAL_IN_USE")                                                                    \
    X(DAT_INSUFFICIENT_RESOURCES, "DAT_INSUFFICIENT_RESOURCES")                                                        \
    X(DAT_INTERNAL_ERROR, "DAT_INTERNAL_ERROR")                                                                        \
    X(DAT_INVALID_HANDLE, "DAT_INVALID_HANDLE")                                                                        \
    X(DAT_INVALID_PARAMETER, "DAT_INVALID_PARAMETER")                                                                  \
    X(DAT_INVALID_STATE, "DAT_INVALID_STATE")                                                                          \
    X(DAT_LENGTH_ERROR, "DAT_LENGTH_ERROR")                                                                            \
    X(DAT_MODEL_NOT_SUPPORTED, "DAT_MODEL_NOT_SUPPORTED")                                                              \
    X(DAT_PROVIDER_NOT_FOUND, "DAT_PROVIDER_NOT_FOUND")                                                                \
    X(DAT_PRIVILEGES_VIOLATION, "DAT_PRIVILEGES_VIOLATION")                                                            \
    X(DAT_PROTECTION_VIOLATION, "DAT_PROTECTION_VIOLATION")                                                            \
    X(DAT_QUEUE_EMPTY, "DAT_QUEUE_EMPTY")                                                                              \
    X(DAT_QUEUE_FULL, "DAT_QUEUE_FULL")                                                                                \
    X(DAT_TIMEOUT_EXPIRED, "DAT_TIMEOUT_EXPIRED")                                                                      \
    X(DAT_PROVIDER_ALREADY_REGISTERED, "DAT_PROVIDER_ALREADY_REGISTERED")                                              \
    X(DAT_PROVIDER_IN_USE, "DAT_PROVIDER_IN_USE")                                                                      \
    X(DAT_INVALID_ADDRESS, "DAT_INVALID_ADDRESS")                                                                      \
    X(DAT_INTERRUPTED_CALL, "DAT_INTERRUPTED_CALL")                                                                    \
    X(DAT_CONN_QUAL_UNAVAILABLE, nullptr)                                                                              \
    X(DAT_RESERVED_LMR, nullptr)                                                                                       \
    X(DAT_PORT_IN_USE, nullptr)                                                                                        \
    X(DAT_COMM_NOT_SUPPORTED, nullptr)                                                                                 \
    X(DAT_EXTENSION_BASE, nullptr)                                                                                     \
    X(DAT_NOT_IMPLEMENTED, "DAT_NOT_IMPLEMENTED")

// X(enumerator, OFED 2.1.10 minor string or nullptr)
#define DAT2_TEST_SUBTYPES(X)                                                                                          \
    X(DAT_NO_SUBTYPE, "")                                                                                              \
    X(DAT_SUB_INTERRUPTED, "DAT_SUB_INTERRUPTED")                                                                      \
    X(DAT_RESOURCE_MEMORY, "DAT_RESOURCE_MEMORY")                                                                      \
    X(DAT_RESOURCE_DEVICE, "DAT_RESOURCE_DEVICE")                                                                      \
    X(DAT_RESOURCE_TEP, "DAT_RESOURCE_TEP")                                                                            \
    X(DAT_RESOURCE_TEVD, "DAT_RESOURCE_TEVD")                                                                          \
    X(DAT_RESOURCE_PROTECTION_DOMAIN, "DAT_RESOURCE_PROTECTION_DOMAIN")                                                \
    X(DAT_RESOURCE_MEMORY_REGION, "DAT_RESOURCE_MEMORY_REGION")                                                        \
    X(DAT_RESOURCE_ERROR_HANDLER, "DAT_RESOURCE_ERROR_HANDLER")                                                        \
    X(DAT_RESOURCE_CREDITS, "DAT_RESOURCE_CREDITS")                                                                    \
    X(DAT_RESOURCE_SRQ, "DAT_RESOURCE_SRQ")                                                                            \
    X(DAT_INVALID_HANDLE_IA, "DAT_INVALID_HANDLE_IA")                                                                  \
    X(DAT_INVALID_HANDLE_EP, "DAT_INVALID_HANDLE_EP")                                                                  \
    X(DAT_INVALID_HANDLE_LMR, "DAT_INVALID_HANDLE_LMR")                                                                \
    X(DAT_INVALID_HANDLE_RMR, "DAT_INVALID_HANDLE_RMR")                                                                \
    X(DAT_INVALID_HANDLE_PZ, "DAT_INVALID_HANDLE_PZ")                                                                  \
    X(DAT_INVALID_HANDLE_PSP, "DAT_INVALID_HANDLE_PSP")                                                                \
    X(DAT_INVALID_HANDLE_RSP, "DAT_INVALID_HANDLE_RSP")                                                                \
    X(DAT_INVALID_HANDLE_CR, "DAT_INVALID_HANDLE_CR")                                                                  \
    X(DAT_INVALID_HANDLE_CNO, "DAT_INVALID_HANDLE_CNO")                                                                \
    X(DAT_INVALID_HANDLE_EVD_CR, "DAT_INVALID_HANDLE_EVD_CR")                                                          \
    X(DAT_INVALID_HANDLE_EVD_REQUEST, "DAT_INVALID_HANDLE_EVD_REQUEST")                                                \
    X(DAT_INVALID_HANDLE_EVD_RECV, "DAT_INVALID_HANDLE_EVD_RECV")                                                      \
    X(DAT_INVALID_HANDLE_EVD_CONN, "DAT_INVALID_HANDLE_EVD_CONN")                                                      \
    X(DAT_INVALID_HANDLE_EVD_ASYNC, "DAT_INVALID_HANDLE_EVD_ASYNC")                                                    \
    X(DAT_INVALID_HANDLE_SRQ, "DAT_INVALID_HANDLE_SRQ")                                                                \
    X(DAT_INVALID_HANDLE_CSP, "DAT_INVALID_HANDLE_CSP")                                                                \
    X(DAT_INVALID_HANDLE1, "DAT_INVALID_HANDLE1")                                                                      \
    X(DAT_INVALID_HANDLE2, "DAT_INVALID_HANDLE2")                                                                      \
    X(DAT_INVALID_HANDLE3, "DAT_INVALID_HANDLE3")                                                                      \
    X(DAT_INVALID_HANDLE4, "DAT_INVALID_HANDLE4")                                                                      \
    X(DAT_INVALID_HANDLE5, "DAT_INVALID_HANDLE5")                                                                      \
    X(DAT_INVALID_HANDLE6, "DAT_INVALID_HANDLE6")                                                                      \
    X(DAT_INVALID_HANDLE7, "DAT_INVALID_HANDLE7")                                                                      \
    X(DAT_INVALID_HANDLE8, "DAT_INVALID_HANDLE8")                                                                      \
    X(DAT_INVALID_HANDLE9, "DAT_INVALID_HANDLE9")                                                                      \
    X(DAT_INVALID_HANDLE10, "DAT_INVALID_HANDLE10")                                                                    \
    X(DAT_INVALID_ARG1, "DAT_INVALID_ARG1")                                                                            \
    X(DAT_INVALID_ARG2, "DAT_INVALID_ARG2")                                                                            \
    X(DAT_INVALID_ARG3, "DAT_INVALID_ARG3")                                                                            \
    X(DAT_INVALID_ARG4, "DAT_INVALID_ARG4")                                                                            \
    X(DAT_INVALID_ARG5, "DAT_INVALID_ARG5")                                                                            \
    X(DAT_INVALID_ARG6, "DAT_INVALID_ARG6")                                                                            \
    X(DAT_INVALID_ARG7, "DAT_INVALID_ARG7")                                                                            \
    X(DAT_INVALID_ARG8, "DAT_INVALID_ARG8")                                                                            \
    X(DAT_INVALID_ARG9, "DAT_INVALID_ARG9")                                                                            \
    X(DAT_INVALID_ARG10, "DAT_INVALID_ARG10")                                                                          \
    X(DAT_INVALID_STATE_EP_UNCONNECTED, "DAT_INVALID_STATE_EP_UNCONNECTED")                                            \
    X(DAT_INVALID_STATE_EP_ACTCONNPENDING, "DAT_INVALID_STATE_EP_ACTCONNPENDING")                                      \
    X(DAT_INVALID_STATE_EP_PASSCONNPENDING, "DAT_INVALID_STATE_EP_PASSCONNPENDING")                                    \
    X(DAT_INVALID_STATE_EP_TENTCONNPENDING, "DAT_INVALID_STATE_EP_TENTCONNPENDING")                                    \
    X(DAT_INVALID_STATE_EP_CONNECTED, "DAT_INVALID_STATE_EP_CONNECTED")                                                \
    X(DAT_INVALID_STATE_EP_DISCONNECTED, "DAT_INVALID_STATE_EP_DISCONNECTED")                                          \
    X(DAT_INVALID_STATE_EP_RESERVED, "DAT_INVALID_STATE_EP_RESERVED")                                                  \
    X(DAT_INVALID_STATE_EP_COMPLPENDING, "DAT_INVALID_STATE_EP_COMPLPENDING")                                          \
    X(DAT_INVALID_STATE_EP_DISCPENDING, "DAT_INVALID_STATE_EP_DISCPENDING")                                            \
    X(DAT_INVALID_STATE_EP_PROVIDERCONTROL, "DAT_INVALID_STATE_EP_PROVIDERCONTROL")                                    \
    X(DAT_INVALID_STATE_EP_NOTREADY, "DAT_INVALID_STATE_EP_NOTREADY")                                                  \
    X(DAT_INVALID_STATE_EP_RECV_WATERMARK, "DAT_INVALID_STATE_EP_RECV_WATERMARK")                                      \
    X(DAT_INVALID_STATE_EP_PZ, "DAT_INVALID_STATE_EP_PZ")                                                              \
    X(DAT_INVALID_STATE_EP_EVD_REQUEST, "DAT_INVALID_STATE_EP_EVD_REQUEST")                                            \
    X(DAT_INVALID_STATE_EP_EVD_RECV, "DAT_INVALID_STATE_EP_EVD_RCV")                                                   \
    X(DAT_INVALID_STATE_EP_EVD_CONNECT, "DAT_INVALID_STATE_EP_EVD_CONNECT")                                            \
    X(DAT_INVALID_STATE_EP_UNCONFIGURED, "DAT_INVALID_STATE_EP_UNCONFIGURED")                                          \
    X(DAT_INVALID_STATE_EP_UNCONFRESERVED, "DAT_INVALID_STATE_EP_UNCONFRESERVED")                                      \
    X(DAT_INVALID_STATE_EP_UNCONFPASSIVE, "DAT_INVALID_STATE_EP_UNCONFPASSIVE")                                        \
    X(DAT_INVALID_STATE_EP_UNCONFTENTATIVE, "DAT_INVALID_STATE_EP_UNCONFTENTATIVE")                                    \
    X(DAT_INVALID_STATE_CNO_IN_USE, "DAT_INVALID_STATE_CNO_IN_USE")                                                    \
    X(DAT_INVALID_STATE_CNO_DEAD, "DAT_INVALID_STATE_CNO_DEAD")                                                        \
    X(DAT_INVALID_STATE_EVD_OPEN, "DAT_INVALID_STATE_EVD_OPEN")                                                        \
    X(DAT_INVALID_STATE_EVD_ENABLED, "DAT_INVALID_STATE_EVD_ENABLED")                                                  \
    X(DAT_INVALID_STATE_EVD_DISABLED, "DAT_INVALID_STATE_EVD_DISABLED")                                                \
    X(DAT_INVALID_STATE_EVD_WAITABLE, "DAT_INVALID_STATE_EVD_WAITABLE")                                                \
    X(DAT_INVALID_STATE_EVD_UNWAITABLE, "DAT_INVALID_STATE_EVD_UNWAITABLE")                                            \
    X(DAT_INVALID_STATE_EVD_IN_USE, "DAT_INVALID_STATE_EVD_IN_USE")                                                    \
    X(DAT_INVALID_STATE_EVD_CONFIG_NOTIFY, "DAT_INVALID_STATE_EVD_CONFIG_NOTIFY")                                      \
    X(DAT_INVALID_STATE_EVD_CONFIG_SOLICITED, "DAT_INVALID_STATE_EVD_CONFIG_SOLICITED")                                \
    X(DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD, "DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD")                                \
    X(DAT_INVALID_STATE_EVD_WAITER, "DAT_INVALID_STATE_EVD_WAITER")                                                    \
    X(DAT_INVALID_STATE_EVD_ASYNC, "DAT_INVALID_STATE_EVD_ASYNC")                                                      \
    X(DAT_INVALID_STATE_IA_IN_USE, "DAT_INVALID_STATE_IA_IN_USE")                                                      \
    X(DAT_INVALID_STATE_LMR_IN_USE, "DAT_INVALID_STATE_LMR_IN_USE")                                                    \
    X(DAT_INVALID_STATE_LMR_FREE, "DAT_INVALID_STATE_LMR_FREE")                                                        \
    X(DAT_INVALID_STATE_PZ_IN_USE, "DAT_INVALID_STATE_PZ_IN_USE")                                                      \
    X(DAT_INVALID_STATE_PZ_FREE, "DAT_INVALID_STATE_PZ_FREE")                                                          \
    X(DAT_INVALID_STATE_SRQ_OPERATIONAL, nullptr)                                                                      \
    X(DAT_INVALID_STATE_SRQ_ERROR, nullptr)                                                                            \
    X(DAT_INVALID_STATE_SRQ_IN_USE, nullptr)                                                                           \
    X(DAT_INVALID_STATE_SRQ_SHUTDOWN, nullptr)                                                                         \
    X(DAT_PRIVILEGES_READ, "DAT_PRIVILEGES_READ")                                                                      \
    X(DAT_PRIVILEGES_WRITE, "DAT_PRIVILEGES_WRITE")                                                                    \
    X(DAT_PRIVILEGES_RDMA_READ, "DAT_PRIVILEGES_RDMA_READ")                                                            \
    X(DAT_PRIVILEGES_RDMA_WRITE, "DAT_PRIVILEGES_RDMA_WRITE")                                                          \
    X(DAT_PROTECTION_READ, "DAT_PROTECTION_READ")                                                                      \
    X(DAT_PROTECTION_WRITE, "DAT_PROTECTION_WRITE")                                                                    \
    X(DAT_PROTECTION_RDMA_READ, "DAT_PROTECTION_RDMA_READ")                                                            \
    X(DAT_PROTECTION_RDMA_WRITE, "DAT_PROTECTION_RDMA_WRITE")                                                          \
    X(DAT_INVALID_ADDRESS_UNSUPPORTED, "DAT_INVALID_ADDRESS_UNSUPPORTED")                                              \
    X(DAT_INVALID_ADDRESS_UNREACHABLE, "DAT_INVALID_ADDRESS_UNREACHABLE")                                              \
    X(DAT_INVALID_ADDRESS_MALFORMED, "DAT_INVALID_ADDRESS_MALFORMED")                                                  \
    X(DAT_NAME_NOT_REGISTERED, "DAT_NAME_NOT_REGISTERED")                                                              \
    X(DAT_MAJOR_NOT_FOUND, "DAT_MAJOR_NOT_FOUND")                                                                      \
    X(DAT_MINOR_NOT_FOUND, "DAT_MINOR_NOT_FOUND")                                                                      \
    X(DAT_THREAD_SAFETY_NOT_FOUND, "DAT_THREAD_SAFETY_NOT_FOUND")

struct Code {
    DAT_UINT32 value;
    const char *name;     // the enumerator's name
    const char *expected; // what our dat_strerror must return
    const char *ofed;     // what OFED 2.1.10 returned; nullptr: rejected it
};

#define DAT2_TYPE_ROW(n, ofed) Code{static_cast<DAT_UINT32>(n), #n, #n, ofed},
#define DAT2_SUBTYPE_ROW(n, ofed) Code{static_cast<DAT_UINT32>(n), #n, (n) == DAT_NO_SUBTYPE ? "" : #n, ofed},

// gtest prints a failing parameter with this instead of its bytes.
void PrintTo(const Code &c, std::ostream *os) { *os << c.name; }

const std::vector<Code> kTypes = {DAT2_TEST_TYPES(DAT2_TYPE_ROW)};
const std::vector<Code> kSubtypes = {DAT2_TEST_SUBTYPES(DAT2_SUBTYPE_ROW)};

#define DAT2_COUNT(n, ofed) +1
constexpr std::size_t kTypeCount = 0 DAT2_TEST_TYPES(DAT2_COUNT);
constexpr std::size_t kSubtypeCount = 0 DAT2_TEST_SUBTYPES(DAT2_COUNT);
#undef DAT2_COUNT

static_assert(kTypeCount == 26, "dat_error.h defines 26 DAT_RETURN_TYPE values");
// DAT_THREAD_SAFETY_NOT_FOUND is the last subtype; with the uniqueness check
// below (values are 0..last, all distinct) this means every one is listed.
static_assert(kSubtypeCount == DAT_THREAD_SAFETY_NOT_FOUND + 1, "every DAT_RETURN_SUBTYPE must be listed");

// Where we knowingly differ from a string OFED does return.
// DAT_INVALID_STATE_EP_EVD_RECV: OFED prints "DAT_INVALID_STATE_EP_EVD_RCV",
// a misspelling of the header's name.
const std::set<std::string> kOfedDeviations = {"DAT_INVALID_STATE_EP_EVD_RECV"};

// Codes OFED rejects with DAT_INVALID_PARAMETER although dat_error.h defines them.
const std::set<std::string> kOfedUnknown = {
    "DAT_CONN_QUAL_UNAVAILABLE",
    "DAT_RESERVED_LMR",
    "DAT_PORT_IN_USE",
    "DAT_COMM_NOT_SUPPORTED",
    "DAT_EXTENSION_BASE",
    "DAT_INVALID_STATE_SRQ_OPERATIONAL",
    "DAT_INVALID_STATE_SRQ_ERROR",
    "DAT_INVALID_STATE_SRQ_IN_USE",
    "DAT_INVALID_STATE_SRQ_SHUTDOWN",
};

const char *const kUnset = "<unset>";

struct Result {
    DAT_RETURN ret;
    const char *major;
    const char *minor;
};

Result strerror_of(DAT_RETURN value) {
    Result r{0, kUnset, kUnset};
    r.ret = dat_strerror(value, &r.major, &r.minor);
    return r;
}

std::string param_name(const testing::TestParamInfo<Code> &info) { return info.param.name; }

// ---------------------------------------------------------------- lists

TEST(StrerrorLists, ValuesAreDistinctAndInTheirFields) {
    std::set<DAT_UINT32> types, subtypes;
    for (const Code &c : kTypes) {
        EXPECT_EQ(c.value & ~static_cast<DAT_UINT32>(DAT_TYPE_MASK), 0u) << c.name;
        EXPECT_TRUE(types.insert(c.value).second) << c.name << " listed twice";
    }
    for (const Code &c : kSubtypes) {
        EXPECT_EQ(c.value & ~static_cast<DAT_UINT32>(DAT_SUBTYPE_MASK), 0u) << c.name;
        EXPECT_TRUE(subtypes.insert(c.value).second) << c.name << " listed twice";
    }
    EXPECT_EQ(types.size(), kTypeCount);
    EXPECT_EQ(subtypes.size(), kSubtypeCount);
}

// ---------------------------------------------------------------- each type

class StrerrorType : public testing::TestWithParam<Code> {};

TEST_P(StrerrorType, MajorIsTheTypeName) {
    const Code &c = GetParam();
    Result r = strerror_of(c.value);
    ASSERT_EQ(r.ret, DAT_SUCCESS);
    EXPECT_STREQ(r.major, c.expected);
    EXPECT_STREQ(r.minor, "");
}

TEST_P(StrerrorType, MatchesOfed) {
    const Code &c = GetParam();
    if (c.ofed == nullptr) {
        EXPECT_EQ(kOfedUnknown.count(c.name), 1u) << "OFED rejected an unlisted code";
        return;
    }
    EXPECT_EQ(kOfedUnknown.count(c.name), 0u);
    if (kOfedDeviations.count(c.name))
        EXPECT_STRNE(strerror_of(c.value).major, c.ofed);
    else
        EXPECT_STREQ(strerror_of(c.value).major, c.ofed);
}

TEST_P(StrerrorType, ClassBitsAreIgnored) {
    const Code &c = GetParam();
    const DAT_UINT32 classes[] = {DAT_CLASS_SUCCESS, DAT_CLASS_WARNING, DAT_CLASS_ERROR,
                                  DAT_CLASS_ERROR | DAT_CLASS_WARNING};
    for (DAT_UINT32 cls : classes) {
        Result r = strerror_of(cls | c.value);
        ASSERT_EQ(r.ret, DAT_SUCCESS) << std::hex << cls;
        EXPECT_STREQ(r.major, c.expected) << std::hex << cls;
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, StrerrorType, testing::ValuesIn(kTypes), param_name);

// ---------------------------------------------------------------- each subtype

class StrerrorSubtype : public testing::TestWithParam<Code> {};

TEST_P(StrerrorSubtype, MinorIsTheSubtypeNameUnderEveryType) {
    const Code &sub = GetParam();
    for (const Code &type : kTypes) {
        Result r = strerror_of(DAT_CLASS_ERROR | type.value | sub.value);
        ASSERT_EQ(r.ret, DAT_SUCCESS) << type.name;
        EXPECT_STREQ(r.major, type.expected);
        EXPECT_STREQ(r.minor, sub.expected) << type.name;
    }
}

TEST_P(StrerrorSubtype, MatchesOfed) {
    const Code &c = GetParam();
    if (c.ofed == nullptr) {
        EXPECT_EQ(kOfedUnknown.count(c.name), 1u) << "OFED rejected an unlisted code";
        return;
    }
    EXPECT_EQ(kOfedUnknown.count(c.name), 0u);
    // OFED was measured with type DAT_INVALID_STATE.
    if (kOfedDeviations.count(c.name))
        EXPECT_STRNE(strerror_of(DAT_INVALID_STATE | c.value).minor, c.ofed);
    else
        EXPECT_STREQ(strerror_of(DAT_INVALID_STATE | c.value).minor, c.ofed);
}

INSTANTIATE_TEST_SUITE_P(AllSubtypes, StrerrorSubtype, testing::ValuesIn(kSubtypes), param_name);

// ---------------------------------------------------------------- whole space

// Every one of the 2^14 type values: exactly the listed ones are known. A type
// the implementation knows but this file does not list fails here too.
TEST(StrerrorSpace, ExactlyTheListedTypesAreKnown) {
    std::set<DAT_UINT32> listed;
    for (const Code &c : kTypes)
        listed.insert(c.value);
    std::size_t known = 0;
    for (DAT_UINT32 t = 0; t <= DAT_TYPE_MASK; t += 0x10000) {
        Result r = strerror_of(t);
        if (listed.count(t)) {
            EXPECT_EQ(r.ret, DAT_SUCCESS) << std::hex << t;
            ++known;
        } else {
            ASSERT_EQ(r.ret, DAT_INVALID_PARAMETER) << std::hex << t;
            // Outputs are written only on success.
            ASSERT_EQ(r.major, kUnset);
            ASSERT_EQ(r.minor, kUnset);
        }
    }
    EXPECT_EQ(known, kTypeCount);
}

// Every one of the 2^16 subtype values, under a known type.
TEST(StrerrorSpace, ExactlyTheListedSubtypesAreKnown) {
    std::size_t known = 0;
    for (DAT_UINT32 s = 0; s <= DAT_SUBTYPE_MASK; ++s) {
        Result r = strerror_of(DAT_CLASS_ERROR | DAT_INVALID_HANDLE | s);
        if (s < kSubtypeCount) {
            EXPECT_EQ(r.ret, DAT_SUCCESS) << s;
            ++known;
        } else {
            ASSERT_EQ(r.ret, DAT_INVALID_PARAMETER) << s;
            ASSERT_EQ(r.major, kUnset);
            ASSERT_EQ(r.minor, kUnset);
        }
    }
    EXPECT_EQ(known, kSubtypeCount);
}

// ---------------------------------------------------------------- edges

TEST(Strerror, SuccessIsDatSuccessWithEmptyMinor) {
    Result r = strerror_of(DAT_SUCCESS);
    ASSERT_EQ(r.ret, DAT_SUCCESS);
    EXPECT_STREQ(r.major, "DAT_SUCCESS");
    EXPECT_STREQ(r.minor, "");
}

TEST(Strerror, TypicalProviderError) {
    Result r = strerror_of(DAT_CLASS_ERROR | DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP);
    ASSERT_EQ(r.ret, DAT_SUCCESS);
    EXPECT_STREQ(r.major, "DAT_INVALID_HANDLE");
    EXPECT_STREQ(r.minor, "DAT_INVALID_HANDLE_EP");
}

TEST(Strerror, Dat10NameNotFoundIsProviderNotFound) {
    Result r = strerror_of(DAT_CLASS_ERROR | DAT_NAME_NOT_FOUND | DAT_NAME_NOT_REGISTERED);
    ASSERT_EQ(r.ret, DAT_SUCCESS);
    EXPECT_STREQ(r.major, "DAT_PROVIDER_NOT_FOUND");
    EXPECT_STREQ(r.minor, "DAT_NAME_NOT_REGISTERED");
}

TEST(Strerror, UnknownTypeOrSubtypeIsInvalidParameterAndWritesNothing) {
    const DAT_UINT32 bad[] = {
        0x00180000,                   // first type after DAT_COMM_NOT_SUPPORTED
        DAT_CLASS_ERROR | 0x3FFE0000, // just below DAT_NOT_IMPLEMENTED
        DAT_EXTENSION_BASE + 0x10000, // extension range, not defined here
        DAT_INVALID_STATE | (DAT_THREAD_SAFETY_NOT_FOUND + 1),
        DAT_CLASS_ERROR | DAT_INVALID_HANDLE | 0xFFFF,
        0xFFFFFFFF,
    };
    for (DAT_UINT32 v : bad) {
        Result r = strerror_of(v);
        EXPECT_EQ(r.ret, DAT_INVALID_PARAMETER) << std::hex << v;
        EXPECT_EQ(r.major, kUnset) << std::hex << v;
        EXPECT_EQ(r.minor, kUnset) << std::hex << v;
    }
}

TEST(Strerror, NullMajorIsInvalidParameter) {
    const char *minor = kUnset;
    EXPECT_EQ(dat_strerror(DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP, nullptr, &minor), DAT_INVALID_PARAMETER);
    EXPECT_EQ(minor, kUnset);
    EXPECT_EQ(dat_strerror(DAT_SUCCESS, nullptr, nullptr), DAT_INVALID_PARAMETER);
    EXPECT_EQ(dat_strerror(0xFFFFFFFF, nullptr, nullptr), DAT_INVALID_PARAMETER);
}

// A NULL minor pointer asks for the major string only: OFED allows it, and
// dat_ib_extensions.h's inline dat_strerror_extension() relies on it.
TEST(Strerror, NullMinorReturnsMajorOnly) {
    const char *major = kUnset;
    EXPECT_EQ(dat_strerror(DAT_CLASS_ERROR | DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP, &major, nullptr), DAT_SUCCESS);
    EXPECT_STREQ(major, "DAT_INVALID_HANDLE");
}

// Unlike OFED, the subtype is validated even when its string is not asked for,
// so the answer does not depend on which pointers the caller passes.
TEST(Strerror, NullMinorStillValidatesTheSubtype) {
    const char *major = kUnset;
    EXPECT_EQ(dat_strerror(DAT_INVALID_HANDLE | 0x7777, &major, nullptr), DAT_INVALID_PARAMETER);
    EXPECT_EQ(major, kUnset);
}

#ifdef DAT2_TEST_IB_EXTENSIONS
TEST(Strerror, IbExtensionHelperFallsBackToDatStrerror) {
    const char *message = kUnset;
    EXPECT_EQ(dat_strerror_extension(static_cast<DAT_IB_RETURN>(DAT_CLASS_ERROR | DAT_QUEUE_FULL), &message),
              DAT_SUCCESS);
    EXPECT_STREQ(message, "DAT_QUEUE_FULL");
    message = kUnset;
    EXPECT_EQ(dat_strerror_extension(DAT_IB_ERR, &message), DAT_SUCCESS);
    EXPECT_STREQ(message, "DAT_IB_ERR");
}
#endif

TEST(Strerror, StringsAreStaticAndStable) {
    Result a = strerror_of(DAT_INVALID_STATE | DAT_INVALID_STATE_EP_CONNECTED);
    Result b = strerror_of(DAT_CLASS_ERROR | DAT_INVALID_STATE | DAT_INVALID_STATE_EP_CONNECTED);
    EXPECT_EQ(a.major, b.major);
    EXPECT_EQ(a.minor, b.minor);
}

TEST(Strerror, ConcurrentCallersAgree) {
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&mismatches] {
            for (int round = 0; round < 200; ++round)
                for (const Code &sub : kSubtypes) {
                    Result r = strerror_of(DAT_CLASS_ERROR | DAT_INVALID_STATE | sub.value);
                    if (r.ret != DAT_SUCCESS || std::strcmp(r.major, "DAT_INVALID_STATE") != 0 ||
                        std::strcmp(r.minor, sub.expected) != 0)
                        mismatches.fetch_add(1, std::memory_order_relaxed);
                }
        });
    }
    for (std::thread &t : threads)
        t.join();
    EXPECT_EQ(mismatches.load(), 0);
}

} // namespace
