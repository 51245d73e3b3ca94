// dat_strerror: DAT_RETURN -> (major, minor) strings.
//
// The strings are the enumerator names of dat_error.h, produced by the
// preprocessor from the names themselves so a table entry cannot drift from
// its value. This matches OFED dapl 2.1.10 for every code OFED knows; we
// differ from it deliberately in three ways:
//   * OFED rejects the DAT 2.0 types DAT_CONN_QUAL_UNAVAILABLE,
//     DAT_RESERVED_LMR, DAT_PORT_IN_USE, DAT_COMM_NOT_SUPPORTED,
//     DAT_EXTENSION_BASE and the DAT_INVALID_STATE_SRQ_* subtypes; we name them.
//   * OFED spells DAT_INVALID_STATE_EP_EVD_RECV as "..._EVD_RCV"; we use the
//     header's name.
//   * OFED writes "unknown error" / "unknown minor error" and returns
//     DAT_INVALID_PARAMETER; we return DAT_INVALID_PARAMETER and write
//     nothing (outputs are written only on success, and the man page leaves
//     them undefined on failure).
//
// Decoding: the class bits (31-30) are ignored; type and subtype are decoded
// independently (a subtype is accepted with any type, as OFED does, because
// providers do not always pair them as the header's comments suggest).
//
// minor_message may be NULL: then only the major string is returned. OFED
// allows this and the public header's own inline dat_strerror_extension()
// (dat_ib_extensions.h) calls dat_strerror(value, &msg, NULL). The subtype is
// validated even then, so the result does not depend on which pointers the
// caller passes. major_message NULL is DAT_INVALID_PARAMETER.

#include <dat2/udat.h>

#include <cstddef>
#include <cstdint>

#ifndef DAT2_EXPORT
#define DAT2_EXPORT __attribute__((visibility("default")))
#endif

namespace {

struct CodeName {
    DAT_UINT32 value;
    const char *name;
};

#define DAT2_NAME(n)                                                                                                   \
    { static_cast<DAT_UINT32>(n), #n }

// Every enumerator of DAT_RETURN_TYPE (26 with DAT_EXTENSION_BASE).
// Sparse values (up to 0x3FFF0000), so searched linearly; 26 compares.
constexpr CodeName kTypeNames[] = {
    DAT2_NAME(DAT_SUCCESS),
    DAT2_NAME(DAT_ABORT),
    DAT2_NAME(DAT_CONN_QUAL_IN_USE),
    DAT2_NAME(DAT_INSUFFICIENT_RESOURCES),
    DAT2_NAME(DAT_INTERNAL_ERROR),
    DAT2_NAME(DAT_INVALID_HANDLE),
    DAT2_NAME(DAT_INVALID_PARAMETER),
    DAT2_NAME(DAT_INVALID_STATE),
    DAT2_NAME(DAT_LENGTH_ERROR),
    DAT2_NAME(DAT_MODEL_NOT_SUPPORTED),
    DAT2_NAME(DAT_PROVIDER_NOT_FOUND),
    DAT2_NAME(DAT_PRIVILEGES_VIOLATION),
    DAT2_NAME(DAT_PROTECTION_VIOLATION),
    DAT2_NAME(DAT_QUEUE_EMPTY),
    DAT2_NAME(DAT_QUEUE_FULL),
    DAT2_NAME(DAT_TIMEOUT_EXPIRED),
    DAT2_NAME(DAT_PROVIDER_ALREADY_REGISTERED),
    DAT2_NAME(DAT_PROVIDER_IN_USE),
    DAT2_NAME(DAT_INVALID_ADDRESS),
    DAT2_NAME(DAT_INTERRUPTED_CALL),
    DAT2_NAME(DAT_CONN_QUAL_UNAVAILABLE),
    DAT2_NAME(DAT_RESERVED_LMR),
    DAT2_NAME(DAT_PORT_IN_USE),
    DAT2_NAME(DAT_COMM_NOT_SUPPORTED),
    DAT2_NAME(DAT_EXTENSION_BASE), // declared under DAT_EXTENSIONS, which udat_config.h sets
    DAT2_NAME(DAT_NOT_IMPLEMENTED),
};

// Every enumerator of DAT_RETURN_SUBTYPE, in enum order: the enum is dense
// from 0, so the subtype is the index (checked below at compile time).
// DAT_NO_SUBTYPE reads as "" (as in OFED) so "major minor" prints cleanly.
constexpr CodeName kSubtypeNames[] = {
    {DAT_NO_SUBTYPE, ""},
    DAT2_NAME(DAT_SUB_INTERRUPTED),
    DAT2_NAME(DAT_RESOURCE_MEMORY),
    DAT2_NAME(DAT_RESOURCE_DEVICE),
    DAT2_NAME(DAT_RESOURCE_TEP),
    DAT2_NAME(DAT_RESOURCE_TEVD),
    DAT2_NAME(DAT_RESOURCE_PROTECTION_DOMAIN),
    DAT2_NAME(DAT_RESOURCE_MEMORY_REGION),
    DAT2_NAME(DAT_RESOURCE_ERROR_HANDLER),
    DAT2_NAME(DAT_RESOURCE_CREDITS),
    DAT2_NAME(DAT_RESOURCE_SRQ),
    DAT2_NAME(DAT_INVALID_HANDLE_IA),
    DAT2_NAME(DAT_INVALID_HANDLE_EP),
    DAT2_NAME(DAT_INVALID_HANDLE_LMR),
    DAT2_NAME(DAT_INVALID_HANDLE_RMR),
    DAT2_NAME(DAT_INVALID_HANDLE_PZ),
    DAT2_NAME(DAT_INVALID_HANDLE_PSP),
    DAT2_NAME(DAT_INVALID_HANDLE_RSP),
    DAT2_NAME(DAT_INVALID_HANDLE_CR),
    DAT2_NAME(DAT_INVALID_HANDLE_CNO),
    DAT2_NAME(DAT_INVALID_HANDLE_EVD_CR),
    DAT2_NAME(DAT_INVALID_HANDLE_EVD_REQUEST),
    DAT2_NAME(DAT_INVALID_HANDLE_EVD_RECV),
    DAT2_NAME(DAT_INVALID_HANDLE_EVD_CONN),
    DAT2_NAME(DAT_INVALID_HANDLE_EVD_ASYNC),
    DAT2_NAME(DAT_INVALID_HANDLE_SRQ),
    DAT2_NAME(DAT_INVALID_HANDLE_CSP),
    DAT2_NAME(DAT_INVALID_HANDLE1),
    DAT2_NAME(DAT_INVALID_HANDLE2),
    DAT2_NAME(DAT_INVALID_HANDLE3),
    DAT2_NAME(DAT_INVALID_HANDLE4),
    DAT2_NAME(DAT_INVALID_HANDLE5),
    DAT2_NAME(DAT_INVALID_HANDLE6),
    DAT2_NAME(DAT_INVALID_HANDLE7),
    DAT2_NAME(DAT_INVALID_HANDLE8),
    DAT2_NAME(DAT_INVALID_HANDLE9),
    DAT2_NAME(DAT_INVALID_HANDLE10),
    DAT2_NAME(DAT_INVALID_ARG1),
    DAT2_NAME(DAT_INVALID_ARG2),
    DAT2_NAME(DAT_INVALID_ARG3),
    DAT2_NAME(DAT_INVALID_ARG4),
    DAT2_NAME(DAT_INVALID_ARG5),
    DAT2_NAME(DAT_INVALID_ARG6),
    DAT2_NAME(DAT_INVALID_ARG7),
    DAT2_NAME(DAT_INVALID_ARG8),
    DAT2_NAME(DAT_INVALID_ARG9),
    DAT2_NAME(DAT_INVALID_ARG10),
    DAT2_NAME(DAT_INVALID_STATE_EP_UNCONNECTED),
    DAT2_NAME(DAT_INVALID_STATE_EP_ACTCONNPENDING),
    DAT2_NAME(DAT_INVALID_STATE_EP_PASSCONNPENDING),
    DAT2_NAME(DAT_INVALID_STATE_EP_TENTCONNPENDING),
    DAT2_NAME(DAT_INVALID_STATE_EP_CONNECTED),
    DAT2_NAME(DAT_INVALID_STATE_EP_DISCONNECTED),
    DAT2_NAME(DAT_INVALID_STATE_EP_RESERVED),
    DAT2_NAME(DAT_INVALID_STATE_EP_COMPLPENDING),
    DAT2_NAME(DAT_INVALID_STATE_EP_DISCPENDING),
    DAT2_NAME(DAT_INVALID_STATE_EP_PROVIDERCONTROL),
    DAT2_NAME(DAT_INVALID_STATE_EP_NOTREADY),
    DAT2_NAME(DAT_INVALID_STATE_EP_RECV_WATERMARK),
    DAT2_NAME(DAT_INVALID_STATE_EP_PZ),
    DAT2_NAME(DAT_INVALID_STATE_EP_EVD_REQUEST),
    DAT2_NAME(DAT_INVALID_STATE_EP_EVD_RECV),
    DAT2_NAME(DAT_INVALID_STATE_EP_EVD_CONNECT),
    DAT2_NAME(DAT_INVALID_STATE_EP_UNCONFIGURED),
    DAT2_NAME(DAT_INVALID_STATE_EP_UNCONFRESERVED),
    DAT2_NAME(DAT_INVALID_STATE_EP_UNCONFPASSIVE),
    DAT2_NAME(DAT_INVALID_STATE_EP_UNCONFTENTATIVE),
    DAT2_NAME(DAT_INVALID_STATE_CNO_IN_USE),
    DAT2_NAME(DAT_INVALID_STATE_CNO_DEAD),
    DAT2_NAME(DAT_INVALID_STATE_EVD_OPEN),
    DAT2_NAME(DAT_INVALID_STATE_EVD_ENABLED),
    DAT2_NAME(DAT_INVALID_STATE_EVD_DISABLED),
    DAT2_NAME(DAT_INVALID_STATE_EVD_WAITABLE),
    DAT2_NAME(DAT_INVALID_STATE_EVD_UNWAITABLE),
    DAT2_NAME(DAT_INVALID_STATE_EVD_IN_USE),
    DAT2_NAME(DAT_INVALID_STATE_EVD_CONFIG_NOTIFY),
    DAT2_NAME(DAT_INVALID_STATE_EVD_CONFIG_SOLICITED),
    DAT2_NAME(DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD),
    DAT2_NAME(DAT_INVALID_STATE_EVD_WAITER),
    DAT2_NAME(DAT_INVALID_STATE_EVD_ASYNC),
    DAT2_NAME(DAT_INVALID_STATE_IA_IN_USE),
    DAT2_NAME(DAT_INVALID_STATE_LMR_IN_USE),
    DAT2_NAME(DAT_INVALID_STATE_LMR_FREE),
    DAT2_NAME(DAT_INVALID_STATE_PZ_IN_USE),
    DAT2_NAME(DAT_INVALID_STATE_PZ_FREE),
    DAT2_NAME(DAT_INVALID_STATE_SRQ_OPERATIONAL),
    DAT2_NAME(DAT_INVALID_STATE_SRQ_ERROR),
    DAT2_NAME(DAT_INVALID_STATE_SRQ_IN_USE),
    DAT2_NAME(DAT_INVALID_STATE_SRQ_SHUTDOWN),
    DAT2_NAME(DAT_PRIVILEGES_READ),
    DAT2_NAME(DAT_PRIVILEGES_WRITE),
    DAT2_NAME(DAT_PRIVILEGES_RDMA_READ),
    DAT2_NAME(DAT_PRIVILEGES_RDMA_WRITE),
    DAT2_NAME(DAT_PROTECTION_READ),
    DAT2_NAME(DAT_PROTECTION_WRITE),
    DAT2_NAME(DAT_PROTECTION_RDMA_READ),
    DAT2_NAME(DAT_PROTECTION_RDMA_WRITE),
    DAT2_NAME(DAT_INVALID_ADDRESS_UNSUPPORTED),
    DAT2_NAME(DAT_INVALID_ADDRESS_UNREACHABLE),
    DAT2_NAME(DAT_INVALID_ADDRESS_MALFORMED),
    DAT2_NAME(DAT_NAME_NOT_REGISTERED),
    DAT2_NAME(DAT_MAJOR_NOT_FOUND),
    DAT2_NAME(DAT_MINOR_NOT_FOUND),
    DAT2_NAME(DAT_THREAD_SAFETY_NOT_FOUND),
};

#undef DAT2_NAME

constexpr std::size_t kSubtypeCount = sizeof(kSubtypeNames) / sizeof(kSubtypeNames[0]);

// DAT_THREAD_SAFETY_NOT_FOUND is the last enumerator; a subtype added to the
// header after it, or one missing from the table, breaks the build here.
static_assert(kSubtypeCount == DAT_THREAD_SAFETY_NOT_FOUND + 1, "kSubtypeNames must list every DAT_RETURN_SUBTYPE");

constexpr bool subtypes_are_indexed_by_value() {
    for (std::size_t i = 0; i < kSubtypeCount; ++i)
        if (kSubtypeNames[i].value != i)
            return false;
    return true;
}
static_assert(subtypes_are_indexed_by_value(), "kSubtypeNames must be in DAT_RETURN_SUBTYPE order");

constexpr bool types_are_unique_and_in_mask() {
    for (const CodeName &a : kTypeNames) {
        if ((a.value & ~static_cast<DAT_UINT32>(DAT_TYPE_MASK)) != 0)
            return false;
        std::size_t seen = 0;
        for (const CodeName &b : kTypeNames)
            seen += (a.value == b.value);
        if (seen != 1)
            return false;
    }
    return true;
}
static_assert(types_are_unique_and_in_mask(), "kTypeNames values must be distinct types");

const char *type_name(DAT_UINT32 type) noexcept {
    for (const CodeName &entry : kTypeNames)
        if (entry.value == type)
            return entry.name;
    return nullptr;
}

const char *subtype_name(DAT_UINT32 subtype) noexcept {
    return subtype < kSubtypeCount ? kSubtypeNames[subtype].name : nullptr;
}

DAT_RETURN decode(DAT_RETURN value, const char **major_message, const char **minor_message) noexcept {
    if (major_message == nullptr)
        return DAT_INVALID_PARAMETER;

    const char *major = type_name(DAT_GET_TYPE(value));
    const char *minor = subtype_name(DAT_GET_SUBTYPE(value));
    if (major == nullptr || minor == nullptr)
        return DAT_INVALID_PARAMETER;

    *major_message = major;
    if (minor_message != nullptr)
        *minor_message = minor;
    return DAT_SUCCESS;
}

} // namespace

// The declaration in dat.h has no exception specification, so the definition
// cannot add one; the work is done in the noexcept decode().
extern "C" DAT2_EXPORT DAT_RETURN DAT_API dat_strerror(DAT_RETURN value, const char **major_message,
                                                       const char **minor_message) {
    return decode(value, major_message, minor_message);
}
