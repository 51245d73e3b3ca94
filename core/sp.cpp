// SPDX-License-Identifier: BSD-3-Clause
// Service points: PSPs (dat_psp_create, _create_any), RSPs and CSPs, the
// ports they listen on in this process, and how they go away.
#include "boundary.hpp"
#include "ep.hpp"
#include "slots.hpp"
#include "sockaddr.hpp"

#include <netinet/in.h>
#include <pthread.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace dat2::kit {

namespace {

// The service points of this process (of this plugin: each has its own
// kit) with the address and port they listen on. Qualifiers that fold onto
// one port (port_of_qual) cannot both listen: the second create is
// DAT_CONN_QUAL_IN_USE whatever the transport would allow, and the log names
// the qualifier that holds the port.
struct Listener {
    const Psp *sp;
    sockaddr_storage at; // the IA's address with the port
    DAT_CONN_QUAL qual;
};
std::mutex &listeners_mu() {
    static auto *mu = new std::mutex; // never destroyed: plugins unload in any order
    return *mu;
}
// Held across fork(): a child may create service points of its own
// (docs/fork.md). Registered at load, as the arena's lock.
[[maybe_unused]] const int fork_handlers =
    pthread_atfork([] { listeners_mu().lock(); }, [] { listeners_mu().unlock(); }, [] { listeners_mu().unlock(); });
std::vector<Listener> &listeners() {
    static auto *v = new std::vector<Listener>;
    return *v;
}

// DAT_CONN_QUAL_IN_USE (logged) when a service point of this process listens
// on the port `qual` folds onto at the IA's address.
DAT_RETURN check_port_free(Ia &ia, DAT_CONN_QUAL qual) {
    const sockaddr_storage at = with_port(ia.transport->address(), port_of_qual(qual));
    DAT_CONN_QUAL holder = 0;
    bool held = false;
    {
        std::lock_guard<std::mutex> lock(listeners_mu());
        for (const Listener &l : listeners())
            if (same_address(l.at, at)) {
                holder = l.qual;
                held = true;
                break;
            }
    }
    if (!held)
        return DAT_SUCCESS;
    if (holder == qual)
        DAT2_LOG(log::kGeneric, "%s: connection qualifier %llu is in use by another service point\n", ia.name.c_str(),
                 static_cast<unsigned long long>(qual));
    else
        DAT2_ERR("%s: connection qualifier %llu is refused: it listens on port %u, which qualifier %llu of "
                 "this process already holds (qualifiers above 65535 fold onto ports 33534..65534)\n",
                 ia.name.c_str(), static_cast<unsigned long long>(qual), unsigned(port_of_qual(qual)),
                 static_cast<unsigned long long>(holder));
    return DAT_ERROR(DAT_CONN_QUAL_IN_USE, 0);
}

// Listens for `sp` (a PSP, RSP or CSP already made) on `qual` (nullptr: any)
// and publishes it; destroys it on failure.
template <class Sp>
DAT_RETURN open_service_point(Ia &ia, Sp &sp, Evd &evd, const DAT_CONN_QUAL *qual, DAT_CONN_QUAL *assigned) {
    sp.evd = &evd;
    DAT_CONN_QUAL got = qual ? *qual : 0;
    if (qual) {
        if (DAT_RETURN r = check_port_free(ia, *qual)) {
            destroy_object(&sp);
            return r;
        }
        sp.conn_qual = *qual; // requests may come before psp_open returns
    }
    if (DAT_RETURN r = ia.transport->psp_open(sp, qual, &got, sp.tp)) {
        if (qual && DAT_GET_TYPE(r) == DAT_CONN_QUAL_IN_USE)
            DAT2_LOG(log::kGeneric, "%s: port %u of connection qualifier %llu is in use by another process\n",
                     ia.name.c_str(), unsigned(port_of_qual(*qual)), static_cast<unsigned long long>(*qual));
        destroy_object(&sp);
        return r;
    }
    // A fixed qualifier was set before the listener went live (the CM thread
    // reads it from then on); "any": nobody can have asked for the port
    // before the consumer learns it from this call.
    if (!qual)
        sp.conn_qual = got;
    try {
        std::lock_guard<std::mutex> lock(listeners_mu());
        listeners().push_back({&sp, with_port(ia.transport->address(), port_of_qual(got)), got});
    } catch (...) {
        ia.transport->psp_close(sp);
        destroy_object(&sp);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    if (assigned)
        *assigned = got;
    evd.users.fetch_add(1);
    ia_track(ia, &sp);
    publish(&sp);
    return DAT_SUCCESS;
}

DAT_RETURN cr_evd_of(Ia *ia, DAT_EVD_HANDLE evd_handle, Evd *&evd) {
    if (DAT_RETURN r = handle_cast_in(ia, evd_handle, evd, DAT_INVALID_HANDLE_EVD_CR))
        return r;
    if (!(evd->flags & DAT_EVD_CR_FLAG))
        return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR);
    return DAT_SUCCESS;
}

DAT_RETURN make_psp(Ia *ia, const DAT_CONN_QUAL *qual, DAT_CONN_QUAL *assigned, DAT_EVD_HANDLE evd_handle,
                    DAT_PSP_FLAGS flags, DAT_PSP_HANDLE *psp_out) {
    Evd *evd;
    if (DAT_RETURN r = cr_evd_of(ia, evd_handle, evd))
        return r;
    if (flags != DAT_PSP_CONSUMER_FLAG && flags != DAT_PSP_PROVIDER_FLAG)
        return invalid_arg(4);
    if (!psp_out)
        return invalid_arg(5);
    Psp *psp = make_object<Psp>(ia->provider, ia);
    if (!psp)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    psp->flags = flags;
    if (DAT_RETURN r = open_service_point(*ia, *psp, *evd, qual, assigned))
        return r;
    *psp_out = psp;
    return DAT_SUCCESS;
}

} // namespace

void psp_release(Psp &psp) {
    Ia &ia = *psp.ia;
    ia.transport->psp_close(psp);
    {
        std::lock_guard<std::mutex> lock(listeners_mu());
        auto &v = listeners();
        v.erase(std::remove_if(v.begin(), v.end(), [&](const Listener &l) { return l.sp == &psp; }), v.end());
    }
    if (psp.type == DAT_HANDLE_TYPE_RSP) {
        // dat_rsp_free(3DAT): the Endpoint reverts to Consumer control (one
        // the provider created for the RSP goes away) unless its request came.
        auto &rsp = static_cast<Rsp &>(psp);
        Ep *ep;
        {
            std::lock_guard<std::mutex> lock(ia.mu); // release_request_ep clears it too
            ep = rsp.ep;
            rsp.ep = nullptr;
        }
        bool reserved = false;
        if (ep) {
            std::lock_guard<std::mutex> lock(ep->mu);
            reserved = ep->state.load() == DAT_EP_STATE_RESERVED;
            if (reserved)
                ep->state.store(rsp.ep_is_providers ? DAT_EP_STATE_DISCONNECTED : DAT_EP_STATE_UNCONNECTED);
        }
        if (reserved && rsp.ep_is_providers)
            ep_release_all(*ep);
    }
    {
        std::lock_guard<std::mutex> lock(ia.mu);
        for (ObjectHeader *o : ia.objects.of_type(DAT_HANDLE_TYPE_CR))
            if (static_cast<Cr *>(o)->psp == &psp)
                static_cast<Cr *>(o)->psp = nullptr;
    }
    psp.evd->users.fetch_sub(1);
    ia_untrack(ia, &psp);
    destroy_object(&psp);
}

namespace slot {

DAT_RETURN psp_create(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL qual, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS flags,
                      DAT_PSP_HANDLE *psp_out) {
    return guarded("dat_psp_create", [&]() -> DAT_RETURN {
        Ia *ia;
        if (DAT_RETURN r = handle_cast(ia_handle, ia))
            return r;
        return make_psp(ia, &qual, nullptr, evd, flags, psp_out);
    });
}

DAT_RETURN psp_create_any(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL *qual, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS flags,
                          DAT_PSP_HANDLE *psp_out) {
    return guarded("dat_psp_create_any", [&]() -> DAT_RETURN {
        Ia *ia;
        if (DAT_RETURN r = handle_cast(ia_handle, ia))
            return r;
        if (!qual)
            return invalid_arg(2);
        return make_psp(ia, nullptr, qual, evd, flags, psp_out);
    });
}

DAT_RETURN psp_query(DAT_PSP_HANDLE psp_handle, DAT_PSP_PARAM_MASK mask, DAT_PSP_PARAM *param) {
    return guarded("dat_psp_query", [&]() -> DAT_RETURN {
        Psp *psp;
        if (DAT_RETURN r = handle_cast(psp_handle, psp))
            return r;
        if (!param)
            return invalid_arg(3);
        if (mask & ~DAT_PSP_FIELD_ALL)
            return invalid_arg(2);
        if (mask & DAT_PSP_FIELD_IA_HANDLE)
            ia_handle_for_consumer(psp->ia, &param->ia_handle);
        if (mask & DAT_PSP_FIELD_CONN_QUAL)
            param->conn_qual = psp->conn_qual;
        if (mask & DAT_PSP_FIELD_EVD_HANDLE)
            param->evd_handle = psp->evd;
        if (mask & DAT_PSP_FIELD_PSP_FLAGS)
            param->psp_flags = psp->flags;
        return DAT_SUCCESS;
    });
}

DAT_RETURN psp_free(DAT_PSP_HANDLE psp_handle) {
    return guarded("dat_psp_free", [&]() -> DAT_RETURN {
        Psp *psp;
        if (DAT_RETURN r = handle_cast(psp_handle, psp))
            return r;
        psp_release(*psp);
        return DAT_SUCCESS;
    });
}

DAT_RETURN rsp_create(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL qual, DAT_EP_HANDLE ep_handle, DAT_EVD_HANDLE evd_handle,
                      DAT_RSP_HANDLE *rsp_out) {
    return guarded("dat_rsp_create", [&]() -> DAT_RETURN {
        Ia *ia;
        if (DAT_RETURN r = handle_cast(ia_handle, ia))
            return r;
        Ep *ep = nullptr;
        if (ep_handle != DAT_HANDLE_NULL)
            if (DAT_RETURN r = handle_cast_in(ia, ep_handle, ep))
                return r;
        Evd *evd;
        if (DAT_RETURN r = cr_evd_of(ia, evd_handle, evd))
            return r;
        if (!rsp_out)
            return invalid_arg(5);
        Rsp *rsp = make_object<Rsp>(ia->provider, ia);
        if (!rsp)
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        if (ep) {
            // dat_rsp_create(3DAT): DAT_INVALID_STATE "an Endpoint was not in the Idle state".
            std::lock_guard<std::mutex> lock(ep->mu);
            DAT_EP_STATE s = ep->state.load();
            if (s != DAT_EP_STATE_UNCONNECTED) {
                destroy_object(rsp);
                return ep_state_error(s);
            }
            ep->state.store(DAT_EP_STATE_RESERVED);
        } else {
            ep = ep_create_for_provider(*ia, DAT_EP_STATE_RESERVED);
            if (!ep) {
                destroy_object(rsp);
                return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
            }
            rsp->ep_is_providers = true;
        }
        rsp->ep = ep;
        const bool providers = rsp->ep_is_providers;
        if (DAT_RETURN r = open_service_point(*ia, *rsp, *evd, &qual, nullptr)) {
            {
                std::lock_guard<std::mutex> lock(ep->mu);
                ep->state.store(providers ? DAT_EP_STATE_DISCONNECTED : DAT_EP_STATE_UNCONNECTED);
            }
            if (providers)
                ep_release_all(*ep);
            return r;
        }
        *rsp_out = rsp;
        return DAT_SUCCESS;
    });
}

DAT_RETURN rsp_query(DAT_RSP_HANDLE rsp_handle, DAT_RSP_PARAM_MASK mask, DAT_RSP_PARAM *param) {
    return guarded("dat_rsp_query", [&]() -> DAT_RETURN {
        Rsp *rsp;
        if (DAT_RETURN r = handle_cast(rsp_handle, rsp))
            return r;
        if (!param)
            return invalid_arg(3);
        if (mask & ~DAT_RSP_FIELD_ALL)
            return invalid_arg(2);
        if (mask & DAT_RSP_FIELD_IA_HANDLE)
            ia_handle_for_consumer(rsp->ia, &param->ia_handle);
        if (mask & DAT_RSP_FIELD_CONN_QUAL)
            param->conn_qual = rsp->conn_qual;
        if (mask & DAT_RSP_FIELD_EVD_HANDLE)
            param->evd_handle = rsp->evd;
        if (mask & DAT_RSP_FIELD_EP_HANDLE) {
            std::lock_guard<std::mutex> lock(rsp->ia->mu);
            param->ep_handle = rsp->ep;
        }
        return DAT_SUCCESS;
    });
}

DAT_RETURN rsp_free(DAT_RSP_HANDLE rsp_handle) {
    return guarded("dat_rsp_free", [&]() -> DAT_RETURN {
        Rsp *rsp;
        if (DAT_RETURN r = handle_cast(rsp_handle, rsp))
            return r;
        psp_release(*rsp);
        return DAT_SUCCESS;
    });
}

DAT_RETURN csp_create(DAT_IA_HANDLE ia_handle, DAT_COMM *comm, DAT_IA_ADDRESS_PTR address, DAT_EVD_HANDLE evd_handle,
                      DAT_CSP_HANDLE *csp_out) {
    return guarded("dat_csp_create", [&]() -> DAT_RETURN {
        Ia *ia;
        if (DAT_RETURN r = handle_cast(ia_handle, ia))
            return r;
        if (!address || (address->sa_family != AF_INET && address->sa_family != AF_INET6))
            return DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
        // The point listens on this IA: the address must be the IA's own
        // (or the wildcard of its family); its port is the service.
        const sockaddr *own = ia->transport->address();
        if (address->sa_family != own->sa_family)
            return DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
        if (address->sa_family == AF_INET) {
            auto a = reinterpret_cast<const sockaddr_in *>(address)->sin_addr.s_addr;
            if (a != INADDR_ANY && a != reinterpret_cast<const sockaddr_in *>(own)->sin_addr.s_addr)
                return DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
        } else {
            const auto &a = reinterpret_cast<const sockaddr_in6 *>(address)->sin6_addr;
            if (!IN6_IS_ADDR_UNSPECIFIED(&a) &&
                std::memcmp(&a, &reinterpret_cast<const sockaddr_in6 *>(own)->sin6_addr, sizeof a) != 0)
                return DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
        }
        Evd *evd;
        if (DAT_RETURN r = cr_evd_of(ia, evd_handle, evd))
            return r;
        if (!csp_out)
            return invalid_arg(5);
        Csp *csp = make_object<Csp>(ia->provider, ia);
        if (!csp)
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        if (comm)
            csp->comm = *comm;
        std::memcpy(&csp->address, address, sockaddr_size(address));
        const DAT_CONN_QUAL port = port_of(address);
        if (DAT_RETURN r = open_service_point(*ia, *csp, *evd, port ? &port : nullptr, nullptr))
            return r;
        if (!port) // the provider chose the port: the query shows it
            set_port(csp->address, static_cast<std::uint16_t>(csp->conn_qual));
        *csp_out = csp;
        return DAT_SUCCESS;
    });
}

DAT_RETURN csp_query(DAT_CSP_HANDLE csp_handle, DAT_CSP_PARAM_MASK mask, DAT_CSP_PARAM *param) {
    return guarded("dat_csp_query", [&]() -> DAT_RETURN {
        Csp *csp;
        if (DAT_RETURN r = handle_cast(csp_handle, csp))
            return r;
        if (!param)
            return invalid_arg(3);
        if (mask & ~DAT_CSP_FIELD_ALL)
            return invalid_arg(2);
        if (mask & DAT_CSP_FIELD_IA_HANDLE)
            ia_handle_for_consumer(csp->ia, &param->ia_handle);
        if (mask & DAT_CSP_FIELD_COMM)
            param->comm = &csp->comm;
        if (mask & DAT_CSP_FIELD_IA_ADDRESS)
            param->address_ptr = reinterpret_cast<sockaddr *>(&csp->address);
        if (mask & DAT_CSP_FIELD_EVD_HANDLE)
            param->evd_handle = csp->evd;
        return DAT_SUCCESS;
    });
}

DAT_RETURN csp_free(DAT_CSP_HANDLE csp_handle) {
    return guarded("dat_csp_free", [&]() -> DAT_RETURN {
        Csp *csp;
        if (DAT_RETURN r = handle_cast(csp_handle, csp))
            return r;
        psp_release(*csp);
        return DAT_SUCCESS;
    });
}

} // namespace slot
} // namespace dat2::kit
