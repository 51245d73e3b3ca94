// SPDX-License-Identifier: BSD-3-Clause
#include "conformance.hpp"

#include <cctype>
#include <cstdlib>
#include <sstream>

namespace conformance {

std::vector<std::string> ia_names() {
    std::vector<std::string> names;
    const char *env = std::getenv("DAT2_CONFORMANCE_IAS");
    std::string list = env && *env ? env : "ofi-tcp";
    std::stringstream ss(list);
    for (std::string item; std::getline(ss, item, ',');)
        if (!item.empty())
            names.push_back(item);
    return names;
}

std::string param_name(const ::testing::TestParamInfo<std::string> &info) {
    std::string out;
    for (char c : info.param)
        out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return out;
}

std::string ret_text(DAT_RETURN r) {
    const char *major = "?", *minor = "?";
    dat_strerror(r, &major, &minor);
    std::ostringstream os;
    os << major << " " << minor << " (0x" << std::hex << r << ")";
    return os.str();
}

DAT_RETURN OpenIa::open(const std::string &name) {
    async_evd = DAT_HANDLE_NULL;
    DAT_RETURN r = dat_ia_open(ia_name_ptr(name), 8, &async_evd, &ia);
    if (r != DAT_SUCCESS)
        return r;
    return dat_pz_create(ia, &pz);
}

void OpenIa::close() {
    if (pz != DAT_HANDLE_NULL)
        dat_pz_free(pz);
    pz = DAT_HANDLE_NULL;
    if (ia != DAT_HANDLE_NULL)
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    ia = DAT_HANDLE_NULL;
}

// ---- helpers of the local-object suites --------------------------------------

namespace {

bool subtype_names(DAT_UINT32 s, HandleKind kind) {
    switch (kind) {
    case HandleKind::Any: return true;
    case HandleKind::Ia: return s == DAT_INVALID_HANDLE_IA;
    case HandleKind::Evd:
        return s == DAT_INVALID_HANDLE_EVD_CR || s == DAT_INVALID_HANDLE_EVD_REQUEST ||
               s == DAT_INVALID_HANDLE_EVD_RECV || s == DAT_INVALID_HANDLE_EVD_CONN ||
               s == DAT_INVALID_HANDLE_EVD_ASYNC;
    case HandleKind::Ep: return s == DAT_INVALID_HANDLE_EP;
    case HandleKind::Lmr: return s == DAT_INVALID_HANDLE_LMR;
    case HandleKind::Rmr: return s == DAT_INVALID_HANDLE_RMR;
    case HandleKind::Pz: return s == DAT_INVALID_HANDLE_PZ;
    case HandleKind::Psp: return s == DAT_INVALID_HANDLE_PSP;
    case HandleKind::Rsp: return s == DAT_INVALID_HANDLE_RSP;
    case HandleKind::Cr: return s == DAT_INVALID_HANDLE_CR;
    case HandleKind::Cno: return s == DAT_INVALID_HANDLE_CNO;
    case HandleKind::Srq: return s == DAT_INVALID_HANDLE_SRQ;
    }
    return false;
}

} // namespace

::testing::AssertionResult IsInvalidHandle(const char *expr_text, const char *kind_text,
                                           DAT_RETURN r, HandleKind kind) {
    if (DAT_GET_TYPE(r) != DAT_INVALID_HANDLE)
        return ::testing::AssertionFailure()
               << expr_text << " -> " << ret_text(r) << ", expected DAT_INVALID_HANDLE";
    const DAT_UINT32 s = DAT_GET_SUBTYPE(r);
    if (s == DAT_NO_SUBTYPE || (s >= DAT_INVALID_HANDLE1 && s <= DAT_INVALID_HANDLE10) ||
        subtype_names(s, kind))
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << expr_text << " -> " << ret_text(r) << ": the subtype names another kind of object than "
           << kind_text;
}

DAT_EVENT software_event(void *pointer) {
    DAT_EVENT event{};
    event.event_number = DAT_SOFTWARE_EVENT;
    event.event_data.software_event_data.pointer = pointer;
    return event;
}

DAT_RETURN IaAttributes::query(DAT_IA_HANDLE ia_handle) {
    return dat_ia_query(ia_handle, &async_evd, DAT_IA_FIELD_ALL, &ia, DAT_PROVIDER_FIELD_ALL,
                        &provider());
}

} // namespace conformance
