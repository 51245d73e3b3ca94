// SPDX-License-Identifier: BSD-3-Clause
// Every DAT 1.2 call: checks the handle it is called on, converts what
// differs from DAT 2.0 and calls the DAT 2.0 provider's table slot for the
// wrapped object (the registry calls go to libdat2). The same functions
// fill the DAT 1.2 provider table at the first word of every handle.
#include "dat12.hpp"

#include "log.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

#define DAT12_EXPORT extern "C" __attribute__((visibility("default")))
#define FN __func__

using namespace dat12;

namespace {

v2::DAT_CONTEXT cookie20(DAT_CONTEXT c) {
    v2::DAT_CONTEXT out;
    out.as_64 = c.as_64;
    return out;
}

// A DAT 1.2 local IOV as DAT 2.0 triplets: 24-byte entries with 64-bit
// lengths become 16-byte ones with 32-bit lengths. On the stack for the
// segment counts posts use.
class Iov20 {
public:
    // 0, or DAT_INVALID_PARAMETER for argument `position` (logged). A
    // negative count or a NULL array is passed on for the provider to judge.
    DAT_RETURN convert(const char *call, DAT_COUNT n, const DAT_LMR_TRIPLET *iov, int position) {
        if (n <= 0 || !iov)
            return DAT_SUCCESS;
        v2::DAT_LMR_TRIPLET *out = stack_;
        if (n > kStack) {
            heap_.resize(static_cast<std::size_t>(n));
            out = heap_.data();
        }
        for (DAT_COUNT i = 0; i < n; ++i)
            if (!lmr_triplet20(iov[i], &out[i])) {
                DAT2_ERR("%s: segment %d is %llu bytes; the DAT 2.0 providers take at most 4 GiB - 1", call, i,
                         static_cast<unsigned long long>(iov[i].segment_length));
                return invalid_arg(position);
            }
        data_ = out;
        return DAT_SUCCESS;
    }
    v2::DAT_LMR_TRIPLET *data() const { return data_; }

private:
    static constexpr DAT_COUNT kStack = 32;
    v2::DAT_LMR_TRIPLET stack_[kStack];
    std::vector<v2::DAT_LMR_TRIPLET> heap_;
    v2::DAT_LMR_TRIPLET *data_ = nullptr;
};

// The remote triplet of an RDMA request or NULL.
DAT_RETURN remote20(const char *call, const DAT_RMR_TRIPLET *in, v2::DAT_RMR_TRIPLET &buf,
                    const v2::DAT_RMR_TRIPLET *&out, int position) {
    out = nullptr;
    if (!in)
        return DAT_SUCCESS;
    if (!rmr_triplet20(*in, &buf)) {
        DAT2_ERR("%s: the remote segment is %llu bytes; the DAT 2.0 providers take at most 4 GiB - 1", call,
                 static_cast<unsigned long long>(in->segment_length));
        return invalid_arg(position);
    }
    out = &buf;
    return DAT_SUCCESS;
}

// After a provider call that created `h20` for `ia`: its 1.2 handle, or the
// 2.0 object freed again (slot FreeSlot) when no handle can be had.
template <auto FreeSlot> DAT_RETURN created(Obj *ia, DAT_HANDLE_TYPE t, v2::DAT_HANDLE h20, DAT_HANDLE *out) {
    Obj *o = wrap(t, ia, h20);
    if (!o) {
        (ia->p20->*FreeSlot)(h20);
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    *out = o;
    return DAT_SUCCESS;
}

// dat_cno_create(3DAT): the provider calls our agent with its DAT 2.0 EVD;
// the consumer's gets the 1.2 handle.
void agent_trampoline(v2::DAT_PVOID instance, v2::DAT_EVD_HANDLE evd20) {
    Obj *cno = as(instance, DAT_HANDLE_TYPE_CNO);
    if (!cno || !cno->agent.proxy_agent_func)
        return;
    DAT_AGENT_FUNC f = cno->agent.proxy_agent_func;
    f(cno->agent.instance_data, to12(cno->ia, evd20, DAT_HANDLE_TYPE_EVD));
}

v2::DAT_OS_WAIT_PROXY_AGENT agent20(Obj *cno, const DAT_OS_WAIT_PROXY_AGENT &agent) {
    v2::DAT_OS_WAIT_PROXY_AGENT out{};
    if (agent.proxy_agent_func) {
        out.instance_data = cno;
        out.proxy_agent_func = agent_trampoline;
    }
    return out;
}

// 1.2's LMR mask bits above DAT_LMR_FIELD_MEM_PRIV are one higher in 2.0
// (DAT_LMR_FIELD_VA_TYPE was inserted); bits 1.2 does not define stay bits
// 2.0 does not define.
v2::DAT_LMR_PARAM_MASK lmr_mask20(DAT_LMR_PARAM_MASK m) {
    const unsigned bits = static_cast<unsigned>(m);
    return static_cast<v2::DAT_LMR_PARAM_MASK>((bits & 0x3Fu) | ((bits & ~0x3Fu) << 1));
}

DAT_RETURN ia_open_func12(const DAT_NAME_PTR name, DAT_COUNT qlen, DAT_EVD_HANDLE *evd, DAT_IA_HANDLE *ia);

} // namespace

// ---- registry -------------------------------------------------------------------

DAT12_EXPORT DAT_RETURN dat_ia_openv(const DAT_NAME_PTR name, DAT_COUNT qlen, DAT_EVD_HANDLE *async_evd,
                                     DAT_IA_HANDLE *ia_out, DAT_UINT32 major, DAT_UINT32 minor,
                                     DAT_BOOLEAN thread_safety) {
    return guarded(FN, [&]() -> DAT_RETURN {
        if (!async_evd)
            return invalid_arg(3);
        if (!ia_out)
            return invalid_arg(4);
        // This library serves DAT API 1.2 whatever the provider implements:
        // dat_registry_list_providers(3DAT) opens an IA only for the major
        // version it names and a minor version up to its own.
        if (major != DAT_VERSION_MAJOR || minor > DAT_VERSION_MINOR) {
            DAT2_ERR("dat_ia_open('%s'): libdat.so.1 serves DAT API %d.%d; the application asks for %u.%u",
                     name ? name : "(null)", DAT_VERSION_MAJOR, DAT_VERSION_MINOR, major, minor);
            return error(DAT_PROVIDER_NOT_FOUND,
                         major != DAT_VERSION_MAJOR ? DAT_MAJOR_NOT_FOUND : DAT_MINOR_NOT_FOUND);
        }
        // dat_ia_open(3DAT): NULL asks for a new async EVD, DAT_EVD_ASYNC_EXISTS
        // says one exists elsewhere, anything else is an async EVD to share.
        Obj *shared = nullptr;
        v2::DAT_EVD_HANDLE evd20 = *async_evd;
        if (*async_evd && *async_evd != DAT_EVD_ASYNC_EXISTS) {
            shared = as(*async_evd, DAT_HANDLE_TYPE_EVD);
            if (!shared)
                return invalid_handle(DAT_INVALID_HANDLE_EVD_ASYNC);
            evd20 = shared->h20;
        }
        v2::DAT_IA_HANDLE registry_ia = nullptr;
        if (v2::DAT_RETURN r = libdat2_ia_openv(name, qlen, &evd20, &registry_ia, major, minor,
                                                static_cast<v2::DAT_BOOLEAN>(thread_safety)))
            return ret12(r);
        v2::DAT_IA_HANDLE provider_ia = nullptr;
        Obj *ia = nullptr;
        if (libdat2_get_ia_handle(registry_ia, &provider_ia) == v2::DAT_SUCCESS && provider_ia)
            ia = new_ia(registry_ia, provider_ia);
        Obj *evd = nullptr;
        if (ia)
            evd = shared && shared->h20 == evd20 ? shared : static_cast<Obj *>(to12(ia, evd20, DAT_HANDLE_TYPE_EVD));
        if (!evd) {
            libdat2_ia_close(registry_ia, v2::DAT_CLOSE_ABRUPT_FLAG);
            if (ia)
                unwrap_all(ia);
            DAT2_ERR("dat_ia_open('%s'): out of memory for the DAT 1.2 handles", name);
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        }
        ia->async_evd = evd;
        *async_evd = evd;
        *ia_out = ia;
        return DAT_SUCCESS;
    });
}

DAT12_EXPORT DAT_RETURN dat_ia_close(DAT_IA_HANDLE h, DAT_CLOSE_FLAGS flags) {
    Obj *ia = as(h, DAT_HANDLE_TYPE_IA);
    if (!ia)
        return invalid_handle(DAT_INVALID_HANDLE_IA);
    return guarded(FN, [&]() -> DAT_RETURN {
        if (v2::DAT_RETURN r = libdat2_ia_close(ia->registry_ia, static_cast<v2::DAT_CLOSE_FLAGS>(flags)))
            return ret12(r);
        unwrap_all(ia);
        return DAT_SUCCESS;
    });
}

// Both versions' DAT_PROVIDER_INFO are the same 268 bytes.
static_assert(sizeof(DAT_PROVIDER_INFO) == sizeof(v2::DAT_PROVIDER_INFO));
static_assert(offsetof(DAT_PROVIDER_INFO, is_thread_safe) == offsetof(v2::DAT_PROVIDER_INFO, is_thread_safe));

// Every entry is reported as DAT API 1.2: that is what this library opens it
// as (dat_ia_openv above), and dat_registry_list_providers(3DAT) tells
// programs to pick entries by the version they were built for.
DAT12_EXPORT DAT_RETURN dat_registry_list_providers(DAT_COUNT max, DAT_COUNT *entries, DAT_PROVIDER_INFO *(list[])) {
    return guarded(FN, [&]() -> DAT_RETURN {
        const v2::DAT_RETURN r =
            libdat2_registry_list_providers(max, entries, reinterpret_cast<v2::DAT_PROVIDER_INFO **>(list));
        if (r == v2::DAT_SUCCESS && entries && list)
            for (DAT_COUNT i = 0; i < std::min(*entries, max); ++i)
                if (list[i]) {
                    list[i]->dapl_version_major = DAT_VERSION_MAJOR;
                    list[i]->dapl_version_minor = DAT_VERSION_MINOR;
                }
        return ret12(r);
    });
}

DAT12_EXPORT DAT_RETURN dat_strerror(DAT_RETURN value, const char **major, const char **minor) {
    return guarded(FN, [&]() -> DAT_RETURN {
        if (!major)
            return invalid_arg(2);
        const DAT_RETURN type = value & DAT_TYPE_MASK;
        const bool not_implemented = (value & ~DAT_SUBTYPE_MASK) == DAT_NOT_IMPLEMENTED;
        // Types DAT 2.0 added are no DAT 1.2 values.
        if (type > DAT_CONN_QUAL_UNAVAILABLE && !not_implemented)
            return invalid_arg(1);
        const char *mj = nullptr, *mn = nullptr;
        if ((value & DAT_SUBTYPE_MASK) == DAT_INVALID_RO_COOKIE) {
            // The one 1.2 subtype DAT 2.0 does not have.
            if (v2::DAT_RETURN r = libdat2_strerror(ret20(value & ~DAT_SUBTYPE_MASK), &mj, nullptr))
                return ret12(r);
            mn = "DAT_INVALID_RO_COOKIE";
        } else if (v2::DAT_RETURN r = libdat2_strerror(ret20(value), &mj, minor ? &mn : nullptr)) {
            return ret12(r);
        }
        *major = mj;
        if (minor)
            *minor = mn;
        return DAT_SUCCESS;
    });
}

// ---- IA and any handle --------------------------------------------------------------

DAT12_EXPORT DAT_RETURN dat_ia_query(DAT_IA_HANDLE h, DAT_EVD_HANDLE *async_evd, DAT_IA_ATTR_MASK ia_mask,
                                     DAT_IA_ATTR *ia_attr, DAT_PROVIDER_ATTR_MASK provider_mask,
                                     DAT_PROVIDER_ATTR *provider_attr) {
    Obj *ia = as(h, DAT_HANDLE_TYPE_IA);
    if (!ia)
        return invalid_handle(DAT_INVALID_HANDLE_IA);
    return guarded(FN, [&]() -> DAT_RETURN {
        // The masks differ from bit 31 on; the whole structures are asked
        // for and converted (a provider may fill more than asked).
        v2::DAT_IA_ATTR a{};
        alignas(v2::DAT_PROVIDER_ATTR) unsigned char pa_raw[sizeof(v2::DAT_PROVIDER_ATTR)] = {};
        auto *pa = reinterpret_cast<v2::DAT_PROVIDER_ATTR *>(pa_raw);
        v2::DAT_EVD_HANDLE evd20 = nullptr;
        if (v2::DAT_RETURN r = ia->p20->ia_query_func(
                ia->h20, async_evd ? &evd20 : nullptr, ia_mask ? v2::kIaFieldAll : 0, ia_attr ? &a : nullptr,
                provider_mask ? v2::kProviderFieldAll : 0, provider_attr ? pa : nullptr))
            return ret12(r);
        if (async_evd)
            *async_evd = evd20 == DAT_EVD_OUT_OF_SCOPE ? DAT_EVD_OUT_OF_SCOPE : to12(ia, evd20, DAT_HANDLE_TYPE_EVD);
        if (ia_attr && ia_mask)
            ia_attr12(a, ia_attr);
        if (provider_attr && provider_mask)
            provider_attr12(*pa, provider_attr);
        return DAT_SUCCESS;
    });
}

DAT12_EXPORT DAT_RETURN dat_set_consumer_context(DAT_HANDLE h, DAT_CONTEXT context) {
    Obj *o = as_any(h);
    if (!o)
        return invalid_handle(DAT_INVALID_HANDLE1);
    o->context = context;
    return DAT_SUCCESS;
}

DAT12_EXPORT DAT_RETURN dat_get_consumer_context(DAT_HANDLE h, DAT_CONTEXT *context) {
    Obj *o = as_any(h);
    if (!o)
        return invalid_handle(DAT_INVALID_HANDLE1);
    if (!context)
        return invalid_arg(2);
    *context = o->context;
    return DAT_SUCCESS;
}

DAT12_EXPORT DAT_RETURN dat_get_handle_type(DAT_HANDLE h, DAT_HANDLE_TYPE *type) {
    Obj *o = as_any(h);
    if (!o)
        return invalid_handle(DAT_INVALID_HANDLE1);
    if (!type)
        return invalid_arg(2);
    *type = o->type;
    return DAT_SUCCESS;
}

// ---- CR -------------------------------------------------------------------------------

DAT12_EXPORT DAT_RETURN dat_cr_query(DAT_CR_HANDLE h, DAT_CR_PARAM_MASK mask, DAT_CR_PARAM *param) {
    Obj *cr = as(h, DAT_HANDLE_TYPE_CR);
    if (!cr)
        return invalid_handle(DAT_INVALID_HANDLE_CR);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_CR_PARAM p{};
        if (v2::DAT_RETURN r =
                cr->p20->cr_query_func(cr->h20, static_cast<v2::DAT_CR_PARAM_MASK>(mask), param ? &p : nullptr))
            return ret12(r);
        DAT_CR_PARAM out{};
        out.remote_ia_address_ptr = p.remote_ia_address_ptr;
        out.remote_port_qual = p.remote_port_qual;
        out.private_data_size = p.private_data_size;
        out.private_data = p.private_data;
        out.local_ep_handle = to12(cr->ia, p.local_ep_handle, DAT_HANDLE_TYPE_EP);
        *param = out;
        return DAT_SUCCESS;
    });
}

DAT12_EXPORT DAT_RETURN dat_cr_accept(DAT_CR_HANDLE h, DAT_EP_HANDLE ep, DAT_COUNT size, const DAT_PVOID data) {
    Obj *cr = as(h, DAT_HANDLE_TYPE_CR);
    if (!cr)
        return invalid_handle(DAT_INVALID_HANDLE_CR);
    return guarded(FN, [&]() -> DAT_RETURN {
        if (v2::DAT_RETURN r = cr->p20->cr_accept_func(cr->h20, to20(ep, DAT_HANDLE_TYPE_EP), size, data))
            return ret12(r);
        unwrap(cr); // dat_cr_accept(3DAT) destroys the Connection Request
        return DAT_SUCCESS;
    });
}

// DAT 1.2 rejects without private data.
DAT12_EXPORT DAT_RETURN dat_cr_reject(DAT_CR_HANDLE h) {
    Obj *cr = as(h, DAT_HANDLE_TYPE_CR);
    if (!cr)
        return invalid_handle(DAT_INVALID_HANDLE_CR);
    return guarded(FN, [&]() -> DAT_RETURN {
        if (v2::DAT_RETURN r = cr->p20->cr_reject_func(cr->h20, 0, nullptr))
            return ret12(r, {1, 0, 0});
        unwrap(cr);
        return DAT_SUCCESS;
    });
}

DAT12_EXPORT DAT_RETURN dat_cr_handoff(DAT_CR_HANDLE h, DAT_CONN_QUAL qual) {
    Obj *cr = as(h, DAT_HANDLE_TYPE_CR);
    if (!cr)
        return invalid_handle(DAT_INVALID_HANDLE_CR);
    return guarded(FN, [&]() -> DAT_RETURN {
        if (v2::DAT_RETURN r = cr->p20->cr_handoff_func(cr->h20, qual))
            return ret12(r);
        unwrap(cr); // handed off: a new request arrives at the other service point
        return DAT_SUCCESS;
    });
}

// ---- EVD ------------------------------------------------------------------------------

#define EVD_OR_INVALID(h)                                                                                              \
    Obj *evd = as(h, DAT_HANDLE_TYPE_EVD);                                                                             \
    if (!evd)                                                                                                          \
    return invalid_handle(DAT_INVALID_HANDLE_EVD_REQUEST)

DAT12_EXPORT DAT_RETURN dat_evd_create(DAT_IA_HANDLE h, DAT_COUNT qlen, DAT_CNO_HANDLE cno, DAT_EVD_FLAGS flags,
                                       DAT_EVD_HANDLE *out) {
    Obj *ia = as(h, DAT_HANDLE_TYPE_IA);
    if (!ia)
        return invalid_handle(DAT_INVALID_HANDLE_IA);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_EVD_HANDLE evd20 = nullptr;
        if (v2::DAT_RETURN r = ia->p20->evd_create_func(ia->h20, qlen, to20(cno, DAT_HANDLE_TYPE_CNO),
                                                        static_cast<v2::DAT_EVD_FLAGS>(flags), out ? &evd20 : nullptr))
            return ret12(r);
        return created<&v2::DAT_PROVIDER::evd_free_func>(ia, DAT_HANDLE_TYPE_EVD, evd20, out);
    });
}

DAT12_EXPORT DAT_RETURN dat_evd_query(DAT_EVD_HANDLE h, DAT_EVD_PARAM_MASK mask, DAT_EVD_PARAM *param) {
    EVD_OR_INVALID(h);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_EVD_PARAM p{};
        if (v2::DAT_RETURN r =
                evd->p20->evd_query_func(evd->h20, static_cast<v2::DAT_EVD_PARAM_MASK>(mask), param ? &p : nullptr))
            return ret12(r);
        DAT_EVD_PARAM out{};
        out.ia_handle = evd->ia;
        out.evd_qlen = p.evd_qlen;
        out.evd_state = static_cast<DAT_EVD_STATE>(p.evd_state);
        out.cno_handle = to12(evd->ia, p.cno_handle, DAT_HANDLE_TYPE_CNO);
        out.evd_flags = static_cast<DAT_EVD_FLAGS>(p.evd_flags);
        *param = out;
        return DAT_SUCCESS;
    });
}

DAT12_EXPORT DAT_RETURN dat_evd_modify_cno(DAT_EVD_HANDLE h, DAT_CNO_HANDLE cno) {
    EVD_OR_INVALID(h);
    return guarded(FN, [&] { return ret12(evd->p20->evd_modify_cno_func(evd->h20, to20(cno, DAT_HANDLE_TYPE_CNO))); });
}

DAT12_EXPORT DAT_RETURN dat_evd_enable(DAT_EVD_HANDLE h) {
    EVD_OR_INVALID(h);
    return guarded(FN, [&] { return ret12(evd->p20->evd_enable_func(evd->h20)); });
}

DAT12_EXPORT DAT_RETURN dat_evd_disable(DAT_EVD_HANDLE h) {
    EVD_OR_INVALID(h);
    return guarded(FN, [&] { return ret12(evd->p20->evd_disable_func(evd->h20)); });
}

DAT12_EXPORT DAT_RETURN dat_evd_set_unwaitable(DAT_EVD_HANDLE h) {
    EVD_OR_INVALID(h);
    return guarded(FN, [&] { return ret12(evd->p20->evd_set_unwaitable_func(evd->h20)); });
}

DAT12_EXPORT DAT_RETURN dat_evd_clear_unwaitable(DAT_EVD_HANDLE h) {
    EVD_OR_INVALID(h);
    return guarded(FN, [&] { return ret12(evd->p20->evd_clear_unwaitable_func(evd->h20)); });
}

DAT12_EXPORT DAT_RETURN dat_evd_resize(DAT_EVD_HANDLE h, DAT_COUNT qlen) {
    EVD_OR_INVALID(h);
    return guarded(FN, [&] { return ret12(evd->p20->evd_resize_func(evd->h20, qlen)); });
}

DAT12_EXPORT DAT_RETURN dat_evd_post_se(DAT_EVD_HANDLE h, const DAT_EVENT *event) {
    EVD_OR_INVALID(h);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_EVENT e;
        if (event && !event20(*event, &e))
            return invalid_arg(2);
        return ret12(evd->p20->evd_post_se_func(evd->h20, event ? &e : nullptr));
    });
}

DAT12_EXPORT DAT_RETURN dat_evd_dequeue(DAT_EVD_HANDLE h, DAT_EVENT *event) {
    EVD_OR_INVALID(h);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_EVENT e;
        for (;;) {
            if (v2::DAT_RETURN r = evd->p20->evd_dequeue_func(evd->h20, event ? &e : nullptr))
                return ret12(r);
            if (event12(evd, e, event))
                return DAT_SUCCESS;
            // An event DAT 1.2 cannot express was dropped (logged): the next one.
        }
    });
}

DAT12_EXPORT DAT_RETURN dat_evd_wait(DAT_EVD_HANDLE h, DAT_TIMEOUT timeout, DAT_COUNT threshold, DAT_EVENT *event,
                                     DAT_COUNT *nmore) {
    EVD_OR_INVALID(h);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_EVENT e;
        v2::DAT_RETURN r = evd->p20->evd_wait_func(evd->h20, timeout, threshold, event ? &e : nullptr, nmore);
        if (r != v2::DAT_SUCCESS)
            return ret12(r);
        return event12(evd, e, event) ? DAT_SUCCESS : error(DAT_INTERNAL_ERROR, 0);
    });
}

DAT12_EXPORT DAT_RETURN dat_evd_free(DAT_EVD_HANDLE h) {
    EVD_OR_INVALID(h);
    return guarded(FN, [&]() -> DAT_RETURN {
        if (v2::DAT_RETURN r = evd->p20->evd_free_func(evd->h20))
            return ret12(r);
        if (evd->ia->async_evd == evd)
            evd->ia->async_evd = nullptr;
        unwrap(evd);
        return DAT_SUCCESS;
    });
}

// ---- CNO ------------------------------------------------------------------------------

DAT12_EXPORT DAT_RETURN dat_cno_create(DAT_IA_HANDLE h, DAT_OS_WAIT_PROXY_AGENT agent, DAT_CNO_HANDLE *out) {
    Obj *ia = as(h, DAT_HANDLE_TYPE_IA);
    if (!ia)
        return invalid_handle(DAT_INVALID_HANDLE_IA);
    return guarded(FN, [&]() -> DAT_RETURN {
        if (!out)
            return invalid_arg(3);
        Obj *cno = reserve(DAT_HANDLE_TYPE_CNO, ia);
        if (!cno)
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        cno->agent = agent;
        v2::DAT_CNO_HANDLE cno20 = nullptr;
        if (v2::DAT_RETURN r = ia->p20->cno_create_func(ia->h20, agent20(cno, agent), &cno20)) {
            discard(cno);
            return ret12(r);
        }
        if (!publish(cno, cno20)) {
            ia->p20->cno_free_func(cno20);
            discard(cno);
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        }
        *out = cno;
        return DAT_SUCCESS;
    });
}

#define CNO_OR_INVALID(h)                                                                                              \
    Obj *cno = as(h, DAT_HANDLE_TYPE_CNO);                                                                             \
    if (!cno)                                                                                                          \
    return invalid_handle(DAT_INVALID_HANDLE_CNO)

DAT12_EXPORT DAT_RETURN dat_cno_modify_agent(DAT_CNO_HANDLE h, DAT_OS_WAIT_PROXY_AGENT agent) {
    CNO_OR_INVALID(h);
    return guarded(FN, [&]() -> DAT_RETURN {
        if (v2::DAT_RETURN r = cno->p20->cno_modify_agent_func(cno->h20, agent20(cno, agent)))
            return ret12(r);
        cno->agent = agent;
        return DAT_SUCCESS;
    });
}

// The agent the consumer gave is the wrapper's (the provider holds ours).
DAT12_EXPORT DAT_RETURN dat_cno_query(DAT_CNO_HANDLE h, DAT_CNO_PARAM_MASK mask, DAT_CNO_PARAM *param) {
    CNO_OR_INVALID(h);
    if (mask & ~DAT_CNO_FIELD_ALL)
        return invalid_arg(2);
    if (!param)
        return invalid_arg(3);
    param->ia_handle = cno->ia;
    param->agent = cno->agent;
    return DAT_SUCCESS;
}

DAT12_EXPORT DAT_RETURN dat_cno_free(DAT_CNO_HANDLE h) {
    CNO_OR_INVALID(h);
    return guarded(FN, [&]() -> DAT_RETURN {
        if (v2::DAT_RETURN r = cno->p20->cno_free_func(cno->h20))
            return ret12(r);
        unwrap(cno);
        return DAT_SUCCESS;
    });
}

DAT12_EXPORT DAT_RETURN dat_cno_wait(DAT_CNO_HANDLE h, DAT_TIMEOUT timeout, DAT_EVD_HANDLE *evd) {
    CNO_OR_INVALID(h);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_EVD_HANDLE evd20 = nullptr;
        if (v2::DAT_RETURN r = cno->p20->cno_wait_func(cno->h20, timeout, evd ? &evd20 : nullptr))
            return ret12(r);
        *evd = to12(cno->ia, evd20, DAT_HANDLE_TYPE_EVD);
        return DAT_SUCCESS;
    });
}

// ---- EP -------------------------------------------------------------------------------

namespace {

// dat_ep_create and dat_ep_create_with_srq: the argument positions are the
// same in both versions.
DAT_RETURN ep_create(const char *call, DAT_IA_HANDLE h, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv_evd,
                     DAT_EVD_HANDLE request_evd, DAT_EVD_HANDLE connect_evd, bool with_srq, DAT_SRQ_HANDLE srq,
                     const DAT_EP_ATTR *attr, DAT_EP_HANDLE *out) {
    Obj *ia = as(h, DAT_HANDLE_TYPE_IA);
    if (!ia)
        return invalid_handle(DAT_INVALID_HANDLE_IA);
    return guarded(call, [&]() -> DAT_RETURN {
        v2::DAT_EP_ATTR a;
        if (attr)
            ep_attr20(*attr, &a);
        const auto pz20 = to20(pz, DAT_HANDLE_TYPE_PZ);
        const auto recv20 = to20(recv_evd, DAT_HANDLE_TYPE_EVD);
        const auto request20 = to20(request_evd, DAT_HANDLE_TYPE_EVD);
        const auto connect20 = to20(connect_evd, DAT_HANDLE_TYPE_EVD);
        v2::DAT_EP_HANDLE ep20 = nullptr;
        v2::DAT_RETURN r = with_srq ? ia->p20->ep_create_with_srq_func(ia->h20, pz20, recv20, request20, connect20,
                                                                       to20(srq, DAT_HANDLE_TYPE_SRQ),
                                                                       attr ? &a : nullptr, out ? &ep20 : nullptr)
                                    : ia->p20->ep_create_func(ia->h20, pz20, recv20, request20, connect20,
                                                              attr ? &a : nullptr, out ? &ep20 : nullptr);
        if (r)
            return ret12(r);
        return created<&v2::DAT_PROVIDER::ep_free_func>(ia, DAT_HANDLE_TYPE_EP, ep20, out);
    });
}

} // namespace

DAT12_EXPORT DAT_RETURN dat_ep_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv_evd,
                                      DAT_EVD_HANDLE request_evd, DAT_EVD_HANDLE connect_evd, const DAT_EP_ATTR *attr,
                                      DAT_EP_HANDLE *out) {
    return ep_create(FN, ia, pz, recv_evd, request_evd, connect_evd, false, DAT_HANDLE_NULL, attr, out);
}

DAT12_EXPORT DAT_RETURN dat_ep_create_with_srq(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv_evd,
                                               DAT_EVD_HANDLE request_evd, DAT_EVD_HANDLE connect_evd,
                                               DAT_SRQ_HANDLE srq, const DAT_EP_ATTR *attr, DAT_EP_HANDLE *out) {
    return ep_create(FN, ia, pz, recv_evd, request_evd, connect_evd, true, srq, attr, out);
}

#define EP_OR_INVALID(h)                                                                                               \
    Obj *ep = as(h, DAT_HANDLE_TYPE_EP);                                                                               \
    if (!ep)                                                                                                           \
    return invalid_handle(DAT_INVALID_HANDLE_EP)

DAT12_EXPORT DAT_RETURN dat_ep_query(DAT_EP_HANDLE h, DAT_EP_PARAM_MASK mask, DAT_EP_PARAM *param) {
    EP_OR_INVALID(h);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_EP_PARAM p{};
        if (v2::DAT_RETURN r = ep->p20->ep_query_func(ep->h20, ep_mask20(mask), param ? &p : nullptr))
            return ret12(r);
        ep_param12(ep, p, param);
        return DAT_SUCCESS;
    });
}

DAT12_EXPORT DAT_RETURN dat_ep_modify(DAT_EP_HANDLE h, DAT_EP_PARAM_MASK mask, const DAT_EP_PARAM *param) {
    EP_OR_INVALID(h);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_EP_PARAM p{};
        if (param) {
            p.ia_handle = ep->ia->registry_ia;
            p.ep_state = static_cast<v2::DAT_EP_STATE>(param->ep_state);
            p.local_ia_address_ptr = param->local_ia_address_ptr;
            p.local_port_qual = param->local_port_qual;
            p.remote_ia_address_ptr = param->remote_ia_address_ptr;
            p.remote_port_qual = param->remote_port_qual;
            p.pz_handle = to20(param->pz_handle, DAT_HANDLE_TYPE_PZ);
            p.recv_evd_handle = to20(param->recv_evd_handle, DAT_HANDLE_TYPE_EVD);
            p.request_evd_handle = to20(param->request_evd_handle, DAT_HANDLE_TYPE_EVD);
            p.connect_evd_handle = to20(param->connect_evd_handle, DAT_HANDLE_TYPE_EVD);
            p.srq_handle = to20(param->srq_handle, DAT_HANDLE_TYPE_SRQ);
            ep_attr20(param->ep_attr, &p.ep_attr);
        }
        return ret12(ep->p20->ep_modify_func(ep->h20, ep_mask20(mask), param ? &p : nullptr));
    });
}

DAT12_EXPORT DAT_RETURN dat_ep_connect(DAT_EP_HANDLE h, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual,
                                       DAT_TIMEOUT timeout, DAT_COUNT size, const DAT_PVOID data, DAT_QOS qos,
                                       DAT_CONNECT_FLAGS flags) {
    EP_OR_INVALID(h);
    return guarded(FN, [&] {
        return ret12(ep->p20->ep_connect_func(ep->h20, addr, qual, timeout, size, data, static_cast<v2::DAT_QOS>(qos),
                                              static_cast<v2::DAT_CONNECT_FLAGS>(flags)));
    });
}

DAT12_EXPORT DAT_RETURN dat_ep_dup_connect(DAT_EP_HANDLE h, DAT_EP_HANDLE dup, DAT_TIMEOUT timeout, DAT_COUNT size,
                                           const DAT_PVOID data, DAT_QOS qos) {
    EP_OR_INVALID(h);
    return guarded(FN, [&] {
        return ret12(ep->p20->ep_dup_connect_func(ep->h20, to20(dup, DAT_HANDLE_TYPE_EP), timeout, size, data,
                                                  static_cast<v2::DAT_QOS>(qos)));
    });
}

DAT12_EXPORT DAT_RETURN dat_ep_disconnect(DAT_EP_HANDLE h, DAT_CLOSE_FLAGS flags) {
    EP_OR_INVALID(h);
    return guarded(
        FN, [&] { return ret12(ep->p20->ep_disconnect_func(ep->h20, static_cast<v2::DAT_CLOSE_FLAGS>(flags))); });
}

DAT12_EXPORT DAT_RETURN dat_ep_post_send(DAT_EP_HANDLE h, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                                         DAT_COMPLETION_FLAGS flags) {
    EP_OR_INVALID(h);
    const char *call = FN; // __func__ inside the lambda would be its operator()
    return guarded(call, [&]() -> DAT_RETURN {
        Iov20 v;
        if (DAT_RETURN r = v.convert(call, n, iov, 3))
            return r;
        return ret12(ep->p20->ep_post_send_func(ep->h20, n, v.data(), cookie20(cookie),
                                                static_cast<v2::DAT_COMPLETION_FLAGS>(flags)));
    });
}

DAT12_EXPORT DAT_RETURN dat_ep_post_recv(DAT_EP_HANDLE h, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                                         DAT_COMPLETION_FLAGS flags) {
    EP_OR_INVALID(h);
    const char *call = FN;
    return guarded(call, [&]() -> DAT_RETURN {
        Iov20 v;
        if (DAT_RETURN r = v.convert(call, n, iov, 3))
            return r;
        return ret12(ep->p20->ep_post_recv_func(ep->h20, n, v.data(), cookie20(cookie),
                                                static_cast<v2::DAT_COMPLETION_FLAGS>(flags)));
    });
}

DAT12_EXPORT DAT_RETURN dat_ep_post_rdma_read(DAT_EP_HANDLE h, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                                              const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags) {
    EP_OR_INVALID(h);
    const char *call = FN;
    return guarded(call, [&]() -> DAT_RETURN {
        Iov20 v;
        if (DAT_RETURN r = v.convert(call, n, iov, 3))
            return r;
        v2::DAT_RMR_TRIPLET buf;
        const v2::DAT_RMR_TRIPLET *rem;
        if (DAT_RETURN r = remote20(call, remote, buf, rem, 5))
            return r;
        return ret12(ep->p20->ep_post_rdma_read_func(ep->h20, n, v.data(), cookie20(cookie), rem,
                                                     static_cast<v2::DAT_COMPLETION_FLAGS>(flags)));
    });
}

DAT12_EXPORT DAT_RETURN dat_ep_post_rdma_write(DAT_EP_HANDLE h, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                               DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote,
                                               DAT_COMPLETION_FLAGS flags) {
    EP_OR_INVALID(h);
    const char *call = FN;
    return guarded(call, [&]() -> DAT_RETURN {
        Iov20 v;
        if (DAT_RETURN r = v.convert(call, n, iov, 3))
            return r;
        v2::DAT_RMR_TRIPLET buf;
        const v2::DAT_RMR_TRIPLET *rem;
        if (DAT_RETURN r = remote20(call, remote, buf, rem, 5))
            return r;
        return ret12(ep->p20->ep_post_rdma_write_func(ep->h20, n, v.data(), cookie20(cookie), rem,
                                                      static_cast<v2::DAT_COMPLETION_FLAGS>(flags)));
    });
}

DAT12_EXPORT DAT_RETURN dat_ep_get_status(DAT_EP_HANDLE h, DAT_EP_STATE *state, DAT_BOOLEAN *recv_idle,
                                          DAT_BOOLEAN *request_idle) {
    EP_OR_INVALID(h);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_EP_STATE s{};
        v2::DAT_BOOLEAN ri{}, qi{};
        if (v2::DAT_RETURN r = ep->p20->ep_get_status_func(ep->h20, state ? &s : nullptr, recv_idle ? &ri : nullptr,
                                                           request_idle ? &qi : nullptr))
            return ret12(r);
        if (state)
            *state = ep_state12(s);
        if (recv_idle)
            *recv_idle = static_cast<DAT_BOOLEAN>(ri);
        if (request_idle)
            *request_idle = static_cast<DAT_BOOLEAN>(qi);
        return DAT_SUCCESS;
    });
}

DAT12_EXPORT DAT_RETURN dat_ep_free(DAT_EP_HANDLE h) {
    EP_OR_INVALID(h);
    return guarded(FN, [&]() -> DAT_RETURN {
        if (v2::DAT_RETURN r = ep->p20->ep_free_func(ep->h20))
            return ret12(r);
        unwrap(ep);
        return DAT_SUCCESS;
    });
}

DAT12_EXPORT DAT_RETURN dat_ep_reset(DAT_EP_HANDLE h) {
    EP_OR_INVALID(h);
    return guarded(FN, [&] { return ret12(ep->p20->ep_reset_func(ep->h20)); });
}

DAT12_EXPORT DAT_RETURN dat_ep_recv_query(DAT_EP_HANDLE h, DAT_COUNT *nbufs, DAT_COUNT *span) {
    EP_OR_INVALID(h);
    return guarded(FN, [&] { return ret12(ep->p20->ep_recv_query_func(ep->h20, nbufs, span)); });
}

DAT12_EXPORT DAT_RETURN dat_ep_set_watermark(DAT_EP_HANDLE h, DAT_COUNT soft, DAT_COUNT hard) {
    EP_OR_INVALID(h);
    return guarded(FN, [&] { return ret12(ep->p20->ep_set_watermark_func(ep->h20, soft, hard)); });
}

// ---- LMR / RMR --------------------------------------------------------------------

// DAT 1.2's eleven arguments: the addresses are virtual (DAT_VA_TYPE_VA).
DAT12_EXPORT DAT_RETURN dat_lmr_create(DAT_IA_HANDLE h, DAT_MEM_TYPE type, DAT_REGION_DESCRIPTION region,
                                       DAT_VLEN length, DAT_PZ_HANDLE pz, DAT_MEM_PRIV_FLAGS privileges,
                                       DAT_LMR_HANDLE *lmr, DAT_LMR_CONTEXT *lmr_context, DAT_RMR_CONTEXT *rmr_context,
                                       DAT_VLEN *registered_length, DAT_VADDR *registered_address) {
    Obj *ia = as(h, DAT_HANDLE_TYPE_IA);
    if (!ia)
        return invalid_handle(DAT_INVALID_HANDLE_IA);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_REGION_DESCRIPTION r20;
        std::memset(&r20, 0, sizeof r20);
        // Strong ordering is what every registration has here (illumos's
        // relaxed-ordering types and flag only matter on its hosts).
        v2::DAT_MEM_TYPE t20 = static_cast<v2::DAT_MEM_TYPE>(type);
        if (type == DAT_MEM_TYPE_SO_VIRTUAL)
            t20 = v2::DAT_MEM_TYPE_VIRTUAL;
        if (type == DAT_MEM_TYPE_LMR) {
            r20.for_lmr_handle = to20(region.for_lmr_handle, DAT_HANDLE_TYPE_LMR);
        } else {
            static_assert(sizeof r20 == sizeof region);
            std::memcpy(&r20, &region, sizeof r20);
        }
        privileges = static_cast<DAT_MEM_PRIV_FLAGS>(privileges & ~DAT_MEM_PRIV_RO_DISABLE_FLAG);
        v2::DAT_LMR_HANDLE lmr20 = nullptr;
        if (v2::DAT_RETURN r = ia->p20->lmr_create_func(ia->h20, t20, r20, length, to20(pz, DAT_HANDLE_TYPE_PZ),
                                                        static_cast<v2::DAT_MEM_PRIV_FLAGS>(privileges),
                                                        v2::DAT_VA_TYPE_VA, lmr ? &lmr20 : nullptr, lmr_context,
                                                        rmr_context, registered_length, registered_address))
            return ret12(r, {1, 2, 3, 4, 5, 6, 0, 7, 8, 9, 10, 11});
        return created<&v2::DAT_PROVIDER::lmr_free_func>(ia, DAT_HANDLE_TYPE_LMR, lmr20, lmr);
    });
}

DAT12_EXPORT DAT_RETURN dat_lmr_query(DAT_LMR_HANDLE h, DAT_LMR_PARAM_MASK mask, DAT_LMR_PARAM *param) {
    Obj *lmr = as(h, DAT_HANDLE_TYPE_LMR);
    if (!lmr)
        return invalid_handle(DAT_INVALID_HANDLE_LMR);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_LMR_PARAM p{};
        if (v2::DAT_RETURN r = lmr->p20->lmr_query_func(lmr->h20, lmr_mask20(mask), param ? &p : nullptr))
            return ret12(r);
        DAT_LMR_PARAM out{};
        out.ia_handle = lmr->ia;
        out.mem_type = static_cast<DAT_MEM_TYPE>(p.mem_type);
        if (p.mem_type == v2::DAT_MEM_TYPE_LMR)
            out.region_desc.for_lmr_handle = to12(lmr->ia, p.region_desc.for_lmr_handle, DAT_HANDLE_TYPE_LMR);
        else
            std::memcpy(&out.region_desc, &p.region_desc, sizeof out.region_desc);
        out.length = p.length;
        out.pz_handle = to12(lmr->ia, p.pz_handle, DAT_HANDLE_TYPE_PZ);
        out.mem_priv = static_cast<DAT_MEM_PRIV_FLAGS>(p.mem_priv);
        out.lmr_context = p.lmr_context;
        out.rmr_context = p.rmr_context;
        out.registered_size = p.registered_size;
        out.registered_address = p.registered_address;
        *param = out;
        return DAT_SUCCESS;
    });
}

DAT12_EXPORT DAT_RETURN dat_lmr_free(DAT_LMR_HANDLE h) {
    Obj *lmr = as(h, DAT_HANDLE_TYPE_LMR);
    if (!lmr)
        return invalid_handle(DAT_INVALID_HANDLE_LMR);
    return guarded(FN, [&]() -> DAT_RETURN {
        if (v2::DAT_RETURN r = lmr->p20->lmr_free_func(lmr->h20))
            return ret12(r);
        unwrap(lmr);
        return DAT_SUCCESS;
    });
}

template <auto Slot>
static DAT_RETURN lmr_sync(const char *call, DAT_IA_HANDLE h, const DAT_LMR_TRIPLET *iov, DAT_VLEN n) {
    Obj *ia = as(h, DAT_HANDLE_TYPE_IA);
    if (!ia)
        return invalid_handle(DAT_INVALID_HANDLE_IA);
    return guarded(call, [&]() -> DAT_RETURN {
        Iov20 v;
        const bool fits = n <= static_cast<DAT_VLEN>(INT32_MAX);
        if (fits)
            if (DAT_RETURN r = v.convert(call, static_cast<DAT_COUNT>(n), iov, 2))
                return r;
        return ret12((ia->p20->*Slot)(ia->h20, fits ? v.data() : nullptr, n));
    });
}

DAT12_EXPORT DAT_RETURN dat_lmr_sync_rdma_read(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET *iov, DAT_VLEN n) {
    return lmr_sync<&v2::DAT_PROVIDER::lmr_sync_rdma_read_func>(FN, ia, iov, n);
}

DAT12_EXPORT DAT_RETURN dat_lmr_sync_rdma_write(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET *iov, DAT_VLEN n) {
    return lmr_sync<&v2::DAT_PROVIDER::lmr_sync_rdma_write_func>(FN, ia, iov, n);
}

DAT12_EXPORT DAT_RETURN dat_rmr_create(DAT_PZ_HANDLE h, DAT_RMR_HANDLE *out) {
    Obj *pz = as(h, DAT_HANDLE_TYPE_PZ);
    if (!pz)
        return invalid_handle(DAT_INVALID_HANDLE_PZ);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_RMR_HANDLE rmr20 = nullptr;
        if (v2::DAT_RETURN r = pz->p20->rmr_create_func(pz->h20, out ? &rmr20 : nullptr))
            return ret12(r);
        return created<&v2::DAT_PROVIDER::rmr_free_func>(pz->ia, DAT_HANDLE_TYPE_RMR, rmr20, out);
    });
}

#define RMR_OR_INVALID(h)                                                                                              \
    Obj *rmr = as(h, DAT_HANDLE_TYPE_RMR);                                                                             \
    if (!rmr)                                                                                                          \
    return invalid_handle(DAT_INVALID_HANDLE_RMR)

DAT12_EXPORT DAT_RETURN dat_rmr_query(DAT_RMR_HANDLE h, DAT_RMR_PARAM_MASK mask, DAT_RMR_PARAM *param) {
    RMR_OR_INVALID(h);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_RMR_PARAM p{};
        if (v2::DAT_RETURN r =
                rmr->p20->rmr_query_func(rmr->h20, static_cast<v2::DAT_RMR_PARAM_MASK>(mask), param ? &p : nullptr))
            return ret12(r);
        DAT_RMR_PARAM out{};
        out.ia_handle = rmr->ia;
        out.pz_handle = to12(rmr->ia, p.pz_handle, DAT_HANDLE_TYPE_PZ);
        lmr_triplet12(p.lmr_triplet, &out.lmr_triplet);
        out.mem_priv = static_cast<DAT_MEM_PRIV_FLAGS>(p.mem_priv);
        out.rmr_context = p.rmr_context;
        *param = out;
        return DAT_SUCCESS;
    });
}

// DAT 1.2 names the LMR by the context in the triplet alone.
DAT12_EXPORT DAT_RETURN dat_rmr_bind(DAT_RMR_HANDLE h, const DAT_LMR_TRIPLET *triplet, DAT_MEM_PRIV_FLAGS privileges,
                                     DAT_EP_HANDLE ep, DAT_RMR_COOKIE cookie, DAT_COMPLETION_FLAGS flags,
                                     DAT_RMR_CONTEXT *context) {
    RMR_OR_INVALID(h);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_LMR_TRIPLET t{};
        if (triplet && !lmr_triplet20(*triplet, &t))
            return invalid_arg(2);
        if (v2::DAT_RETURN r = rmr->p20->rmr_bind_func(
                rmr->h20, DAT_HANDLE_NULL, triplet ? &t : nullptr, static_cast<v2::DAT_MEM_PRIV_FLAGS>(privileges),
                v2::DAT_VA_TYPE_VA, to20(ep, DAT_HANDLE_TYPE_EP), cookie20(cookie),
                static_cast<v2::DAT_COMPLETION_FLAGS>(flags), context))
            return ret12(r, {1, 0, 2, 3, 0, 4, 5, 6, 7});
        return DAT_SUCCESS;
    });
}

DAT12_EXPORT DAT_RETURN dat_rmr_free(DAT_RMR_HANDLE h) {
    RMR_OR_INVALID(h);
    return guarded(FN, [&]() -> DAT_RETURN {
        if (v2::DAT_RETURN r = rmr->p20->rmr_free_func(rmr->h20))
            return ret12(r);
        unwrap(rmr);
        return DAT_SUCCESS;
    });
}

// ---- service points ---------------------------------------------------------------

DAT12_EXPORT DAT_RETURN dat_psp_create(DAT_IA_HANDLE h, DAT_CONN_QUAL qual, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS flags,
                                       DAT_PSP_HANDLE *out) {
    Obj *ia = as(h, DAT_HANDLE_TYPE_IA);
    if (!ia)
        return invalid_handle(DAT_INVALID_HANDLE_IA);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_PSP_HANDLE psp20 = nullptr;
        if (v2::DAT_RETURN r = ia->p20->psp_create_func(ia->h20, qual, to20(evd, DAT_HANDLE_TYPE_EVD),
                                                        static_cast<v2::DAT_PSP_FLAGS>(flags), out ? &psp20 : nullptr))
            return ret12(r);
        return created<&v2::DAT_PROVIDER::psp_free_func>(ia, DAT_HANDLE_TYPE_PSP, psp20, out);
    });
}

DAT12_EXPORT DAT_RETURN dat_psp_create_any(DAT_IA_HANDLE h, DAT_CONN_QUAL *qual, DAT_EVD_HANDLE evd,
                                           DAT_PSP_FLAGS flags, DAT_PSP_HANDLE *out) {
    Obj *ia = as(h, DAT_HANDLE_TYPE_IA);
    if (!ia)
        return invalid_handle(DAT_INVALID_HANDLE_IA);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_PSP_HANDLE psp20 = nullptr;
        if (v2::DAT_RETURN r =
                ia->p20->psp_create_any_func(ia->h20, qual, to20(evd, DAT_HANDLE_TYPE_EVD),
                                             static_cast<v2::DAT_PSP_FLAGS>(flags), out ? &psp20 : nullptr))
            return ret12(r);
        return created<&v2::DAT_PROVIDER::psp_free_func>(ia, DAT_HANDLE_TYPE_PSP, psp20, out);
    });
}

DAT12_EXPORT DAT_RETURN dat_psp_query(DAT_PSP_HANDLE h, DAT_PSP_PARAM_MASK mask, DAT_PSP_PARAM *param) {
    Obj *psp = as(h, DAT_HANDLE_TYPE_PSP);
    if (!psp)
        return invalid_handle(DAT_INVALID_HANDLE_PSP);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_PSP_PARAM p{};
        if (v2::DAT_RETURN r =
                psp->p20->psp_query_func(psp->h20, static_cast<v2::DAT_PSP_PARAM_MASK>(mask), param ? &p : nullptr))
            return ret12(r);
        DAT_PSP_PARAM out{};
        out.ia_handle = psp->ia;
        out.conn_qual = p.conn_qual;
        out.evd_handle = to12(psp->ia, p.evd_handle, DAT_HANDLE_TYPE_EVD);
        out.psp_flags = static_cast<DAT_PSP_FLAGS>(p.psp_flags);
        *param = out;
        return DAT_SUCCESS;
    });
}

DAT12_EXPORT DAT_RETURN dat_psp_free(DAT_PSP_HANDLE h) {
    Obj *psp = as(h, DAT_HANDLE_TYPE_PSP);
    if (!psp)
        return invalid_handle(DAT_INVALID_HANDLE_PSP);
    return guarded(FN, [&]() -> DAT_RETURN {
        if (v2::DAT_RETURN r = psp->p20->psp_free_func(psp->h20))
            return ret12(r);
        unwrap(psp);
        return DAT_SUCCESS;
    });
}

DAT12_EXPORT DAT_RETURN dat_rsp_create(DAT_IA_HANDLE h, DAT_CONN_QUAL qual, DAT_EP_HANDLE ep, DAT_EVD_HANDLE evd,
                                       DAT_RSP_HANDLE *out) {
    Obj *ia = as(h, DAT_HANDLE_TYPE_IA);
    if (!ia)
        return invalid_handle(DAT_INVALID_HANDLE_IA);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_RSP_HANDLE rsp20 = nullptr;
        if (v2::DAT_RETURN r = ia->p20->rsp_create_func(ia->h20, qual, to20(ep, DAT_HANDLE_TYPE_EP),
                                                        to20(evd, DAT_HANDLE_TYPE_EVD), out ? &rsp20 : nullptr))
            return ret12(r);
        return created<&v2::DAT_PROVIDER::rsp_free_func>(ia, DAT_HANDLE_TYPE_RSP, rsp20, out);
    });
}

DAT12_EXPORT DAT_RETURN dat_rsp_query(DAT_RSP_HANDLE h, DAT_RSP_PARAM_MASK mask, DAT_RSP_PARAM *param) {
    Obj *rsp = as(h, DAT_HANDLE_TYPE_RSP);
    if (!rsp)
        return invalid_handle(DAT_INVALID_HANDLE_RSP);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_RSP_PARAM p{};
        if (v2::DAT_RETURN r =
                rsp->p20->rsp_query_func(rsp->h20, static_cast<v2::DAT_RSP_PARAM_MASK>(mask), param ? &p : nullptr))
            return ret12(r);
        DAT_RSP_PARAM out{};
        out.ia_handle = rsp->ia;
        out.conn_qual = p.conn_qual;
        out.evd_handle = to12(rsp->ia, p.evd_handle, DAT_HANDLE_TYPE_EVD);
        out.ep_handle = to12(rsp->ia, p.ep_handle, DAT_HANDLE_TYPE_EP);
        *param = out;
        return DAT_SUCCESS;
    });
}

DAT12_EXPORT DAT_RETURN dat_rsp_free(DAT_RSP_HANDLE h) {
    Obj *rsp = as(h, DAT_HANDLE_TYPE_RSP);
    if (!rsp)
        return invalid_handle(DAT_INVALID_HANDLE_RSP);
    return guarded(FN, [&]() -> DAT_RETURN {
        if (v2::DAT_RETURN r = rsp->p20->rsp_free_func(rsp->h20))
            return ret12(r);
        unwrap(rsp);
        return DAT_SUCCESS;
    });
}

// ---- PZ ---------------------------------------------------------------------------

DAT12_EXPORT DAT_RETURN dat_pz_create(DAT_IA_HANDLE h, DAT_PZ_HANDLE *out) {
    Obj *ia = as(h, DAT_HANDLE_TYPE_IA);
    if (!ia)
        return invalid_handle(DAT_INVALID_HANDLE_IA);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_PZ_HANDLE pz20 = nullptr;
        if (v2::DAT_RETURN r = ia->p20->pz_create_func(ia->h20, out ? &pz20 : nullptr))
            return ret12(r);
        return created<&v2::DAT_PROVIDER::pz_free_func>(ia, DAT_HANDLE_TYPE_PZ, pz20, out);
    });
}

DAT12_EXPORT DAT_RETURN dat_pz_query(DAT_PZ_HANDLE h, DAT_PZ_PARAM_MASK mask, DAT_PZ_PARAM *param) {
    Obj *pz = as(h, DAT_HANDLE_TYPE_PZ);
    if (!pz)
        return invalid_handle(DAT_INVALID_HANDLE_PZ);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_PZ_PARAM p{};
        if (v2::DAT_RETURN r =
                pz->p20->pz_query_func(pz->h20, static_cast<v2::DAT_PZ_PARAM_MASK>(mask), param ? &p : nullptr))
            return ret12(r);
        param->ia_handle = pz->ia;
        return DAT_SUCCESS;
    });
}

DAT12_EXPORT DAT_RETURN dat_pz_free(DAT_PZ_HANDLE h) {
    Obj *pz = as(h, DAT_HANDLE_TYPE_PZ);
    if (!pz)
        return invalid_handle(DAT_INVALID_HANDLE_PZ);
    return guarded(FN, [&]() -> DAT_RETURN {
        if (v2::DAT_RETURN r = pz->p20->pz_free_func(pz->h20))
            return ret12(r);
        unwrap(pz);
        return DAT_SUCCESS;
    });
}

// ---- SRQ --------------------------------------------------------------------------

static_assert(sizeof(DAT_SRQ_ATTR) == sizeof(v2::DAT_SRQ_ATTR));

DAT12_EXPORT DAT_RETURN dat_srq_create(DAT_IA_HANDLE h, DAT_PZ_HANDLE pz, DAT_SRQ_ATTR *attr, DAT_SRQ_HANDLE *out) {
    Obj *ia = as(h, DAT_HANDLE_TYPE_IA);
    if (!ia)
        return invalid_handle(DAT_INVALID_HANDLE_IA);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_SRQ_HANDLE srq20 = nullptr;
        if (v2::DAT_RETURN r =
                ia->p20->srq_create_func(ia->h20, to20(pz, DAT_HANDLE_TYPE_PZ),
                                         reinterpret_cast<v2::DAT_SRQ_ATTR *>(attr), out ? &srq20 : nullptr))
            return ret12(r);
        return created<&v2::DAT_PROVIDER::srq_free_func>(ia, DAT_HANDLE_TYPE_SRQ, srq20, out);
    });
}

#define SRQ_OR_INVALID(h)                                                                                              \
    Obj *srq = as(h, DAT_HANDLE_TYPE_SRQ);                                                                             \
    if (!srq)                                                                                                          \
    return invalid_handle(DAT_INVALID_HANDLE_SRQ)

DAT12_EXPORT DAT_RETURN dat_srq_free(DAT_SRQ_HANDLE h) {
    SRQ_OR_INVALID(h);
    return guarded(FN, [&]() -> DAT_RETURN {
        if (v2::DAT_RETURN r = srq->p20->srq_free_func(srq->h20))
            return ret12(r);
        unwrap(srq);
        return DAT_SUCCESS;
    });
}

DAT12_EXPORT DAT_RETURN dat_srq_post_recv(DAT_SRQ_HANDLE h, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie) {
    SRQ_OR_INVALID(h);
    const char *call = FN;
    return guarded(call, [&]() -> DAT_RETURN {
        Iov20 v;
        if (DAT_RETURN r = v.convert(call, n, iov, 3))
            return r;
        return ret12(srq->p20->srq_post_recv_func(srq->h20, n, v.data(), cookie20(cookie)));
    });
}

DAT12_EXPORT DAT_RETURN dat_srq_query(DAT_SRQ_HANDLE h, DAT_SRQ_PARAM_MASK mask, DAT_SRQ_PARAM *param) {
    SRQ_OR_INVALID(h);
    return guarded(FN, [&]() -> DAT_RETURN {
        v2::DAT_SRQ_PARAM p{};
        if (v2::DAT_RETURN r =
                srq->p20->srq_query_func(srq->h20, static_cast<v2::DAT_SRQ_PARAM_MASK>(mask), param ? &p : nullptr))
            return ret12(r);
        DAT_SRQ_PARAM out{};
        out.ia_handle = srq->ia;
        out.srq_state = srq_state12(p.srq_state);
        out.pz_handle = to12(srq->ia, p.pz_handle, DAT_HANDLE_TYPE_PZ);
        out.max_recv_dtos = p.max_recv_dtos;
        out.max_recv_iov = p.max_recv_iov;
        out.low_watermark = p.low_watermark;
        out.available_dto_count = p.available_dto_count;
        out.outstanding_dto_count = p.outstanding_dto_count;
        *param = out;
        return DAT_SUCCESS;
    });
}

DAT12_EXPORT DAT_RETURN dat_srq_resize(DAT_SRQ_HANDLE h, DAT_COUNT qlen) {
    SRQ_OR_INVALID(h);
    return guarded(FN, [&] { return ret12(srq->p20->srq_resize_func(srq->h20, qlen)); });
}

DAT12_EXPORT DAT_RETURN dat_srq_set_lw(DAT_SRQ_HANDLE h, DAT_COUNT low_watermark) {
    SRQ_OR_INVALID(h);
    return guarded(FN, [&] { return ret12(srq->p20->srq_set_lw_func(srq->h20, low_watermark)); });
}

// ---- the provider table ------------------------------------------------------------

namespace {

DAT_RETURN ia_open_func12(const DAT_NAME_PTR name, DAT_COUNT qlen, DAT_EVD_HANDLE *evd, DAT_IA_HANDLE *ia) {
    return dat_ia_openv(name, qlen, evd, ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_THREADSAFE);
}

} // namespace

namespace dat12 {

// Every slot filled; the same functions as the exported calls (bound
// locally: the library is linked -Bsymbolic).
const DAT_PROVIDER kTable = {
    "libdat.so.1",
    nullptr,
    ia_open_func12,
    dat_ia_query,
    dat_ia_close,
    dat_set_consumer_context,
    dat_get_consumer_context,
    dat_get_handle_type,
    dat_cno_create,
    dat_cno_modify_agent,
    dat_cno_query,
    dat_cno_free,
    dat_cno_wait,
    dat_cr_query,
    dat_cr_accept,
    dat_cr_reject,
    dat_cr_handoff,
    dat_evd_create,
    dat_evd_query,
    dat_evd_modify_cno,
    dat_evd_enable,
    dat_evd_disable,
    dat_evd_wait,
    dat_evd_resize,
    dat_evd_post_se,
    dat_evd_dequeue,
    dat_evd_free,
    dat_ep_create,
    dat_ep_query,
    dat_ep_modify,
    dat_ep_connect,
    dat_ep_dup_connect,
    dat_ep_disconnect,
    dat_ep_post_send,
    dat_ep_post_recv,
    dat_ep_post_rdma_read,
    dat_ep_post_rdma_write,
    dat_ep_get_status,
    dat_ep_free,
    dat_lmr_create,
    dat_lmr_query,
    dat_lmr_free,
    dat_rmr_create,
    dat_rmr_query,
    dat_rmr_bind,
    dat_rmr_free,
    dat_psp_create,
    dat_psp_query,
    dat_psp_free,
    dat_rsp_create,
    dat_rsp_query,
    dat_rsp_free,
    dat_pz_create,
    dat_pz_query,
    dat_pz_free,
    dat_psp_create_any,
    dat_ep_reset,
    dat_evd_set_unwaitable,
    dat_evd_clear_unwaitable,
    dat_lmr_sync_rdma_read,
    dat_lmr_sync_rdma_write,
    dat_ep_create_with_srq,
    dat_ep_recv_query,
    dat_ep_set_watermark,
    dat_srq_create,
    dat_srq_free,
    dat_srq_post_recv,
    dat_srq_query,
    dat_srq_resize,
    dat_srq_set_lw,
};

} // namespace dat12
