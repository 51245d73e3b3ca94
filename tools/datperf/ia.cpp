// SPDX-License-Identifier: BSD-3-Clause
// datperf's DAT basics: error text, the registry, the IA, registered
// memory, waiting for events.
#include "session.hpp"

#include "session.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace datperf {

// ---- errors -------------------------------------------------------------------

std::string dat_text(DAT_RETURN r) {
    const char *major = nullptr, *minor = nullptr;
    if (dat_strerror(r, &major, &minor) != DAT_SUCCESS || !major) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "DAT_RETURN 0x%x", static_cast<unsigned>(r));
        return buf;
    }
    std::string s = major;
    if (minor && *minor)
        s += std::string(" ") + minor;
    return s;
}

void dat_fail(DAT_RETURN r, const char *call, const std::string &context) {
    std::string msg = std::string(call) + ": " + dat_text(r);
    if (!context.empty())
        msg += " (" + context + ")";
    throw Error(msg);
}

std::string dto_status_text(DAT_DTO_COMPLETION_STATUS s) {
    static const char *const names[] = {"DAT_DTO_SUCCESS",
                                        "DAT_DTO_ERR_FLUSHED",
                                        "DAT_DTO_ERR_LOCAL_LENGTH",
                                        "DAT_DTO_ERR_LOCAL_EP",
                                        "DAT_DTO_ERR_LOCAL_PROTECTION",
                                        "DAT_DTO_ERR_BAD_RESPONSE",
                                        "DAT_DTO_ERR_REMOTE_ACCESS",
                                        "DAT_DTO_ERR_REMOTE_RESPONDER",
                                        "DAT_DTO_ERR_TRANSPORT",
                                        "DAT_DTO_ERR_RECEIVER_NOT_READY",
                                        "DAT_DTO_ERR_PARTIAL_PACKET",
                                        "DAT_RMR_OPERATION_FAILED",
                                        "DAT_DTO_ERR_LOCAL_MM_ERROR"};
    auto i = static_cast<unsigned>(s);
    return i < sizeof names / sizeof names[0] ? names[i] : "DTO status " + std::to_string(i);
}

std::string event_text(const DAT_EVENT &ev) {
    switch (ev.event_number) {
    case DAT_DTO_COMPLETION_EVENT: {
        const auto &d = ev.event_data.dto_completion_event_data;
        return "DTO completion " + dto_status_text(d.status) + " (cookie " + std::to_string(d.user_cookie.as_64) +
               ", length " + std::to_string(d.transfered_length) + ")";
    }
    case DAT_CONNECTION_REQUEST_EVENT: return "DAT_CONNECTION_REQUEST_EVENT";
    case DAT_CONNECTION_EVENT_ESTABLISHED: return "DAT_CONNECTION_EVENT_ESTABLISHED";
    case DAT_CONNECTION_EVENT_PEER_REJECTED: return "DAT_CONNECTION_EVENT_PEER_REJECTED";
    case DAT_CONNECTION_EVENT_NON_PEER_REJECTED:
        return "DAT_CONNECTION_EVENT_NON_PEER_REJECTED (nobody listens there?)";
    case DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR: return "DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR";
    case DAT_CONNECTION_EVENT_DISCONNECTED: return "DAT_CONNECTION_EVENT_DISCONNECTED";
    case DAT_CONNECTION_EVENT_BROKEN: return "DAT_CONNECTION_EVENT_BROKEN";
    case DAT_CONNECTION_EVENT_TIMED_OUT: return "DAT_CONNECTION_EVENT_TIMED_OUT";
    case DAT_CONNECTION_EVENT_UNREACHABLE: return "DAT_CONNECTION_EVENT_UNREACHABLE";
    case DAT_ASYNC_ERROR_EVD_OVERFLOW: return "DAT_ASYNC_ERROR_EVD_OVERFLOW";
    default: {
        char buf[48];
        std::snprintf(buf, sizeof buf, "event 0x%x", static_cast<unsigned>(ev.event_number));
        return buf;
    }
    }
}

// ---- registry ---------------------------------------------------------------------

std::vector<std::string> registry_names() {
    constexpr DAT_COUNT kMax = 256;
    std::vector<DAT_PROVIDER_INFO> infos(kMax);
    std::vector<DAT_PROVIDER_INFO *> ptrs(kMax);
    for (DAT_COUNT i = 0; i < kMax; ++i)
        ptrs[static_cast<std::size_t>(i)] = &infos[static_cast<std::size_t>(i)];
    DAT_COUNT n = 0;
    std::vector<std::string> names;
    if (dat_registry_list_providers(kMax, &n, ptrs.data()) != DAT_SUCCESS)
        return names;
    for (DAT_COUNT i = 0; i < n && i < kMax; ++i) {
        const char *name = infos[static_cast<std::size_t>(i)].ia_name;
        names.emplace_back(name, strnlen(name, DAT_NAME_MAX_LENGTH));
    }
    return names;
}

std::string names_text(const std::vector<std::string> &names) {
    constexpr std::size_t kShown = 8;
    std::string out;
    for (std::size_t i = 0; i < names.size() && i < kShown; ++i)
        out += (i ? ", " : "") + names[i];
    if (names.size() > kShown)
        out += " and " + std::to_string(names.size() - kShown) + " more (datinfo --no-open lists them)";
    return out;
}

// ---- the IA -------------------------------------------------------------------------

std::string sockaddr_text(const sockaddr *sa) {
    char buf[INET6_ADDRSTRLEN] = "";
    if (!sa)
        return "(none)";
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in *>(sa)->sin_addr, buf, sizeof buf);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr, buf, sizeof buf);
    else
        return "(address family " + std::to_string(sa->sa_family) + ")";
    return buf;
}

Ia::~Ia() {
    pz_.reset();
    if (ia_ != DAT_HANDLE_NULL && dat_ia_close(ia_, DAT_CLOSE_GRACEFUL_FLAG) != DAT_SUCCESS)
        dat_ia_close(ia_, DAT_CLOSE_ABRUPT_FLAG);
}

void Ia::open(const std::string &name) {
    name_ = name;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    async_evd_ = DAT_HANDLE_NULL;
    DAT_RETURN r = dat_ia_open(const_cast<char *>(name.c_str()), 16, &async_evd_, &ia);
    if (r != DAT_SUCCESS) {
        const std::string known = names_text(registry_names());
        throw Error("cannot open IA '" + name + "': " + dat_text(r) +
                    (known.empty() ? std::string(" (the registry lists no dat.conf entry)")
                                   : " (dat.conf entries: " + known + ")"));
    }
    ia_ = ia;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    dat_check(dat_ia_query(ia_, &async, DAT_IA_FIELD_ALL, &attr_, 0, nullptr), "dat_ia_query");
    const sockaddr *sa = attr_.ia_address_ptr;
    if (sa && sa->sa_family == AF_INET)
        std::memcpy(&address_, sa, sizeof(sockaddr_in));
    else if (sa && sa->sa_family == AF_INET6)
        std::memcpy(&address_, sa, sizeof(sockaddr_in6));
    attr_.ia_address_ptr = nullptr; // points into the provider; we keep our copy
    dat_check(dat_pz_create(ia_, pz_.out()), "dat_pz_create");
}

std::string Ia::vendor() const {
    return std::string(attr_.vendor_name, strnlen(attr_.vendor_name, sizeof attr_.vendor_name));
}

std::string Ia::address_text() const { return sockaddr_text(reinterpret_cast<const sockaddr *>(&address_)); }

// ---- registered memory ----------------------------------------------------------------

Memory::~Memory() {
    lmr_.reset();
    std::free(data_);
}

void Memory::create(Ia &ia, std::size_t len, const char *what) {
    void *p = nullptr;
    if (posix_memalign(&p, 4096, len) != 0)
        throw Error(std::string("out of memory for ") + what + " (" + std::to_string(len) + " bytes)");
    data_ = static_cast<unsigned char *>(p);
    len_ = len;
    std::memset(data_, 0, len_); // touch every page before measuring
    DAT_REGION_DESCRIPTION region;
    region.for_va = data_;
    DAT_VLEN registered_size = 0;
    DAT_VADDR registered_address = 0;
    DAT_RETURN r =
        dat_lmr_create(ia.get(), DAT_MEM_TYPE_VIRTUAL, region, len_, ia.pz(), DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
                       lmr_.out(), &lmr_context_, &rmr_context_, &registered_size, &registered_address);
    if (r != DAT_SUCCESS)
        dat_fail(r, "dat_lmr_create", std::string(what) + ", " + std::to_string(len_) + " bytes");
}

// ---- events ---------------------------------------------------------------------------

void Events::check_deadline(Spin &s, const char *waiting_for) {
    const auto now = Clock::now();
    if (s.since == Clock::time_point{}) {
        s.since = now; // the first check starts the clock
        return;
    }
    if (now - s.since > std::chrono::duration<double>(timeout_s_)) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "nothing for %.0f s", timeout_s_);
        throw Error(std::string(buf) + " while waiting for " + waiting_for + " (--timeout)");
    }
}

void Events::next_slow(DAT_EVD_HANDLE evd, DAT_EVENT *ev, const char *waiting_for, DAT_RETURN r) {
    Spin spin_state;
    for (;;) {
        if (DAT_GET_TYPE(r) != DAT_QUEUE_EMPTY)
            dat_fail(r, "dat_evd_dequeue", std::string("waiting for ") + waiting_for);
        spin(spin_state, waiting_for);
        r = dat_evd_dequeue(evd, ev);
        if (r == DAT_SUCCESS)
            return;
    }
}

void Events::next_waiting(DAT_EVD_HANDLE evd, DAT_EVENT *ev, const char *waiting_for, double timeout_s) {
    const auto since = Clock::now();
    for (;;) {
        DAT_COUNT nmore = 0;
        DAT_RETURN r = dat_evd_wait(evd, 100000, 1, ev, &nmore); // 100 ms slices: the deadline
        if (r == DAT_SUCCESS)
            return;
        if (DAT_GET_TYPE(r) != DAT_TIMEOUT_EXPIRED)
            dat_fail(r, "dat_evd_wait", std::string("waiting for ") + waiting_for);
        if (timeout_s > 0 && Clock::now() - since > std::chrono::duration<double>(timeout_s)) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "nothing for %.0f s", timeout_s);
            throw Error(std::string(buf) + " while waiting for " + waiting_for + " (--timeout)");
        }
    }
}

} // namespace datperf
