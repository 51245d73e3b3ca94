// SPDX-License-Identifier: BSD-3-Clause
// The InfiniBand extensions of DAT 2.0 (dat_ib_extensions.h), reached
// through dat_extension_op(): RDMA write with immediate data, 64-bit fetch
// and add and compare and swap, and the lightweight attribute query
// (dat_ib_open_query / dat_ib_close_query). Each extended DTO rides on the
// kit's post path (core/ep.cpp: the checks of an RDMA write or read, the
// DTO records, flushes) and is handed to Transport::post_ext; its
// completions come back as DAT_IB_DTO_EVENT with DAT_IB_EXTENSION_EVENT_DATA
// in event_extension_data, as OFED's providers report them.
//
// Not provided (DAT_NOT_IMPLEMENTED): unreliable datagrams (no UD service
// type here), counters, collectives. dat_ia_query says which of the rest a
// transport carries out, in the provider-specific attributes dtestx reads.
#include "ep.hpp"

#include "boundary.hpp"
#include "log.hpp"
#include "slots.hpp"

#include <dat2/dat_ib_extensions.h>

#include <cstdarg>
#include <cstring>

namespace dat2::kit {

static_assert(sizeof(DAT_IB_EXTENSION_EVENT_DATA) <= sizeof(DAT_EVENT{}.event_extension_data),
              "the extension's event data overlays DAT_EVENT.event_extension_data");

DAT_DTOS ext_operation(ExtKind kind) {
    switch (kind) {
    case ExtKind::kRdmaWriteImmed: return static_cast<DAT_DTOS>(DAT_IB_DTO_RDMA_WRITE_IMMED);
    case ExtKind::kFetchAdd: return static_cast<DAT_DTOS>(DAT_IB_DTO_FETCH_ADD);
    case ExtKind::kCmpSwap: return static_cast<DAT_DTOS>(DAT_IB_DTO_CMP_SWAP);
    case ExtKind::kNone:
    case ExtKind::kRmrBind: break;
    }
    return DAT_DTO_SEND;
}

// OFED's layout: the DTO completion data as for any DTO (the operation one
// of DAT_IB_DTO_*), the event number DAT_IB_DTO_EVENT, and in
// event_extension_data what the extension adds: the type of extended
// completion, its status (DAT_IB_OP_ERR when the DTO failed) and, for a
// receive consumed by immediate data, that data.
void ext_event(DAT_EVENT &e, const Op &op, const Completion *c) {
    e.event_number = static_cast<DAT_EVENT_NUMBER>(DAT_IB_DTO_EVENT);
    auto &d = e.event_data.dto_completion_event_data;
    DAT_IB_EXTENSION_EVENT_DATA x;
    std::memset(&x, 0, sizeof x);
    x.status = d.status == DAT_DTO_SUCCESS ? DAT_OP_SUCCESS : DAT_IB_OP_ERR;
    if (c) {
        // dat_ib_post_rdma_write_immed: the target's receive reports the
        // written length and the data; a send with immediate data (from a
        // peer that has it) the received length.
        const bool rdma = c->immed == Completion::Immed::kRdmaWrite;
        x.type = rdma ? DAT_IB_RDMA_WRITE_IMMED_DATA : DAT_IB_RECV_IMMED_DATA;
        x.val.immed.data = c->immed_data;
        d.operation = static_cast<DAT_DTOS>(rdma ? DAT_IB_DTO_RECV_IMMED : DAT_IB_DTO_RECV_MSG_IMMED);
    } else {
        switch (op.ext) {
        case ExtKind::kRdmaWriteImmed: x.type = DAT_IB_RDMA_WRITE_IMMED; break;
        case ExtKind::kFetchAdd: x.type = DAT_IB_FETCH_AND_ADD; break;
        case ExtKind::kCmpSwap: x.type = DAT_IB_CMP_AND_SWAP; break;
        case ExtKind::kNone:
        case ExtKind::kRmrBind: break;
        }
    }
    static_assert(sizeof x <= sizeof e.event_extension_data);
    std::memcpy(e.event_extension_data, &x, sizeof x);
}

void ext_query(Ia &ia, DAT_IA_ATTR &a, DAT_PROVIDER_ATTR &p) {
    const ExtCaps caps = ia.caps.ext;
    const bool any = caps.rdma_write_immed || caps.fetch_add || caps.cmp_swap;
    a.extension_supported = any ? DAT_EXTENSION_IB : DAT_EXTENSION_NONE;
    a.extension_version = any ? DAT_IB_EXTENSION_VERSION : 0;
    p.num_provider_specific_attr = static_cast<DAT_COUNT>(ia.provider_attrs.size());
    p.provider_specific_attr = ia.provider_attrs.empty() ? nullptr : ia.provider_attrs.data();
}

void make_provider_attrs(Ia &ia) {
    TransportFacts f;
    ia.transport->facts(f);
    std::vector<std::pair<std::string, std::string>> named;
    auto add = [&](const char *name, std::string value) {
        if (!value.empty())
            named.emplace_back(name, std::move(value));
    };
    add("DAT_IB_PROVIDER_NAME", f.provider);
    add("DAT_IB_DEVICE_NAME", f.device);
    add("DAT_IB_CONNECTIVITY_MODE", "DIRECT");
    add("DAT_IB_RDMA_READ", "TRUE");
    add("DAT_IB_NODE_GUID", f.node_guid);
    add("DAT_IB_GID", f.gid);
    add("DAT_IB_TRANSPORT_MTU", f.transport_mtu ? std::to_string(f.transport_mtu) : "");
    add("DAT_IB_PORT_STATUS", f.port_status);
    add("DAT_IB_PORT_NUMBER", f.port ? std::to_string(f.port) : "");
    // dtestx refuses an IA whose extension_supported is not DAT_EXTENSION_IB
    // and reads the capabilities from these attributes ("TRUE" enables).
    const ExtCaps caps = ia.caps.ext;
    auto truth = [](bool b) { return std::string(b ? "TRUE" : "FALSE"); };
    add("DAT_EXTENSION_INTERFACE", truth(caps.rdma_write_immed || caps.fetch_add || caps.cmp_swap));
    add(DAT_IB_ATTR_FETCH_AND_ADD, truth(caps.fetch_add));
    add(DAT_IB_ATTR_CMP_AND_SWAP, truth(caps.cmp_swap));
    add(DAT_IB_ATTR_IMMED_DATA, truth(caps.rdma_write_immed));
    add(DAT_IB_ATTR_UD, "FALSE");
    // The strings never move (a deque keeps its elements in place).
    for (auto &[name, value] : named) {
        ia.attr_text.push_back(std::move(name));
        const char *n = ia.attr_text.back().c_str();
        ia.attr_text.push_back(std::move(value));
        ia.provider_attrs.push_back({n, ia.attr_text.back().c_str()});
    }
}

namespace {

// The 8 bytes an atomic operation works on, as dat_ib_post_fetch_and_add
// and dat_ib_post_cmp_and_swap(3) describe them: the local triplet receives
// the original remote value, the remote one names an aligned 64-bit word.
constexpr DAT_VLEN kAtomicSize = sizeof(DAT_UINT64);

DAT_RETURN post_write_immed(DAT_HANDLE handle, va_list args) {
    const DAT_COUNT segments = va_arg(args, DAT_COUNT);
    DAT_LMR_TRIPLET *local = va_arg(args, DAT_LMR_TRIPLET *);
    const DAT_DTO_COOKIE cookie = va_arg(args, DAT_DTO_COOKIE);
    const DAT_RMR_TRIPLET *remote = va_arg(args, const DAT_RMR_TRIPLET *);
    const DAT_UINT32 immed = va_arg(args, DAT_UINT32);
    const auto flags = static_cast<DAT_COMPLETION_FLAGS>(va_arg(args, int));
    Ep *ep;
    if (DAT_RETURN r = handle_cast(handle, ep))
        return r;
    if (!ep->ia->caps.ext.rdma_write_immed)
        return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    if (!remote)
        return invalid_arg(6);
    ExtPost ext{ExtKind::kRdmaWriteImmed, immed, {0, 0}};
    return ep_post(ep, PostKind::kRdmaWrite, segments, local, cookie, remote, flags, &ext);
}

// Fetch and add (compare == nullptr) or compare and swap.
DAT_RETURN post_atomic(DAT_HANDLE handle, ExtKind kind, DAT_UINT64 first, DAT_UINT64 second, DAT_LMR_TRIPLET *local,
                       DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags,
                       int local_arg) {
    Ep *ep;
    if (DAT_RETURN r = handle_cast(handle, ep))
        return r;
    const ExtCaps caps = ep->ia->caps.ext;
    if (!(kind == ExtKind::kFetchAdd ? caps.fetch_add : caps.cmp_swap))
        return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    if (!local)
        return invalid_arg(local_arg);
    if (!remote)
        return invalid_arg(local_arg + 2);
    // InfiniBand (and libfabric's FI_UINT64) work on naturally aligned words.
    if (remote->virtual_address % kAtomicSize)
        return invalid_arg(local_arg + 2);
    if (local->segment_length < kAtomicSize)
        return DAT_ERROR(DAT_LENGTH_ERROR, 0);
    DAT_LMR_TRIPLET result = *local;
    result.segment_length = kAtomicSize;
    ExtPost ext{kind, 0, {first, second}};
    return ep_post(ep, PostKind::kRdmaRead, 1, &result, cookie, remote, flags, &ext);
}

// dat_ib_open_query: an IA opened for its attributes only (the handle goes
// back to dat_ib_close_query). The registry passes the IA name where the
// handle would be.
DAT_RETURN open_query(DAT_HANDLE name_as_handle, va_list args) {
    auto *ia_out = va_arg(args, DAT_IA_HANDLE *);
    const auto ia_mask = va_arg(args, DAT_IA_ATTR_MASK);
    auto *ia_attr = va_arg(args, DAT_IA_ATTR *);
    const auto provider_mask = va_arg(args, DAT_PROVIDER_ATTR_MASK);
    auto *provider_attr = va_arg(args, DAT_PROVIDER_ATTR *);
    if (!name_as_handle)
        return invalid_arg(1);
    if (!ia_out)
        return invalid_arg(3);
    if (!ia_attr && !provider_attr)
        return invalid_arg(4);
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    if (DAT_RETURN r = slot::ia_open(static_cast<DAT_NAME_PTR>(name_as_handle), 8, &async_evd, &ia))
        return r;
    DAT_RETURN r =
        slot::ia_query(ia, nullptr, ia_attr ? ia_mask : 0, ia_attr, provider_attr ? provider_mask : 0, provider_attr);
    if (r != DAT_SUCCESS) {
        slot::ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
        return r;
    }
    *ia_out = ia;
    return DAT_SUCCESS;
}

bool known_op(DAT_EXTENDED_OP op) {
    return (op >= DAT_IB_FETCH_AND_ADD_OP && op <= DAT_IB_UD_AH_FREE_OP) || op == DAT_IB_OPEN_QUERY_OP ||
           op == DAT_IB_CLOSE_QUERY_OP;
}

} // namespace

namespace slot {

DAT_RETURN extended_op(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args) {
    return guarded("dat_extension_op", [&]() -> DAT_RETURN {
        switch (op) {
        case DAT_IB_RDMA_WRITE_IMMED_OP: return post_write_immed(handle, args);
        case DAT_IB_FETCH_AND_ADD_OP: {
            const DAT_UINT64 add = va_arg(args, DAT_UINT64);
            DAT_LMR_TRIPLET *local = va_arg(args, DAT_LMR_TRIPLET *);
            const DAT_DTO_COOKIE cookie = va_arg(args, DAT_DTO_COOKIE);
            const DAT_RMR_TRIPLET *remote = va_arg(args, const DAT_RMR_TRIPLET *);
            const auto flags = static_cast<DAT_COMPLETION_FLAGS>(va_arg(args, int));
            return post_atomic(handle, ExtKind::kFetchAdd, add, 0, local, cookie, remote, flags, 4);
        }
        case DAT_IB_CMP_AND_SWAP_OP: {
            const DAT_UINT64 compare = va_arg(args, DAT_UINT64);
            const DAT_UINT64 swap = va_arg(args, DAT_UINT64);
            DAT_LMR_TRIPLET *local = va_arg(args, DAT_LMR_TRIPLET *);
            const DAT_DTO_COOKIE cookie = va_arg(args, DAT_DTO_COOKIE);
            const DAT_RMR_TRIPLET *remote = va_arg(args, const DAT_RMR_TRIPLET *);
            const auto flags = static_cast<DAT_COMPLETION_FLAGS>(va_arg(args, int));
            return post_atomic(handle, ExtKind::kCmpSwap, compare, swap, local, cookie, remote, flags, 5);
        }
        case DAT_IB_OPEN_QUERY_OP: return open_query(handle, args);
        case DAT_IB_CLOSE_QUERY_OP: {
            Ia *ia;
            if (DAT_RETURN r = handle_cast(handle, ia))
                return r;
            return slot::ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
        }
        default: break;
        }
        if (!known_op(op)) {
            DAT2_LOG(log::kGeneric, "dat_extension_op: unknown operation %d\n", op);
            return invalid_arg(2);
        }
        // Unreliable datagrams, counters and collectives: not provided.
        return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    });
}

} // namespace slot
} // namespace dat2::kit
