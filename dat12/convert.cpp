// SPDX-License-Identifier: BSD-3-Clause
// DAT 1.2 <-> DAT 2.0 structures. Where a 2.0 field is narrower (DAT 2.0
// lengths are DAT_SEG_LENGTH, 32 bits; DAT 1.2's are DAT_VLEN, 64 bits), a
// value that does not fit is refused (triplets) or saturated (attributes,
// which are limits).
#include "dat12.hpp"

#include "log.hpp"

#include <cstdint>
#include <cstring>
#include <limits>

namespace dat12 {

namespace {

constexpr DAT_VLEN kMaxSeg = std::numeric_limits<v2::DAT_SEG_LENGTH>::max();

v2::DAT_SEG_LENGTH seg20(DAT_VLEN v) {
    return v > kMaxSeg ? static_cast<v2::DAT_SEG_LENGTH>(kMaxSeg) : static_cast<v2::DAT_SEG_LENGTH>(v);
}

} // namespace

// Same values below DAT 2.0's additions.
static_assert(int(v2::DAT_EP_STATE_COMPLETION_PENDING) == int(DAT_EP_STATE_COMPLETION_PENDING));
static_assert(int(v2::DAT_SOFTWARE_EVENT) == int(DAT_SOFTWARE_EVENT));
static_assert(int(v2::DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR) == int(DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR));
static_assert(int(v2::DAT_RMR_OPERATION_FAILED) == int(DAT_RMR_OPERATION_FAILED));

DAT_EP_STATE ep_state12(v2::DAT_EP_STATE s) {
    if (s == v2::DAT_EP_STATE_CONNECTED_SINGLE_PATH || s == v2::DAT_EP_STATE_CONNECTED_MULTI_PATH)
        return DAT_EP_STATE_CONNECTED;
    return static_cast<DAT_EP_STATE>(s);
}

// The two versions number these the other way round.
DAT_SRQ_STATE srq_state12(v2::DAT_SRQ_STATE s) {
    return s == v2::DAT_SRQ_STATE_OPERATIONAL ? DAT_SRQ_STATE_OPERATIONAL : DAT_SRQ_STATE_ERROR;
}

static DAT_DTO_COMPLETION_STATUS dto_status12(v2::DAT_DTO_COMPLETION_STATUS s) {
    return s > v2::DAT_RMR_OPERATION_FAILED ? DAT_DTO_ERR_LOCAL_PROTECTION : static_cast<DAT_DTO_COMPLETION_STATUS>(s);
}

bool event12(Obj *evd, const v2::DAT_EVENT &in, DAT_EVENT *out) {
    Obj *ia = evd->ia;
    DAT_EVENT e;
    std::memset(&e, 0, sizeof e);
    e.evd_handle = evd;
    switch (in.event_number) {
    case v2::DAT_DTO_COMPLETION_EVENT: {
        const auto &d = in.event_data.dto_completion_event_data;
        auto &o = e.event_data.dto_completion_event_data;
        o.ep_handle = to12(ia, d.ep_handle, DAT_HANDLE_TYPE_EP);
        o.user_cookie.as_64 = d.user_cookie.as_64;
        o.status = dto_status12(d.status);
        o.transfered_length = d.transfered_length;
        break;
    }
    case v2::DAT_RMR_BIND_COMPLETION_EVENT: {
        const auto &d = in.event_data.rmr_completion_event_data;
        auto &o = e.event_data.rmr_completion_event_data;
        o.rmr_handle = to12(ia, d.rmr_handle, DAT_HANDLE_TYPE_RMR);
        o.user_cookie.as_64 = d.user_cookie.as_64;
        o.status = dto_status12(d.status);
        break;
    }
    case v2::DAT_CONNECTION_REQUEST_EVENT: {
        const auto &d = in.event_data.cr_arrival_event_data;
        auto &o = e.event_data.cr_arrival_event_data;
        // A PSP or an RSP of ours; which one, its consumer context tells.
        if (v2::DAT_HANDLE sp = d.sp_handle.psp_handle) {
            v2::DAT_HANDLE_TYPE t{};
            auto *p20 = *static_cast<const v2::DAT_PROVIDER *const *>(sp);
            p20->get_handle_type_func(sp, &t);
            o.sp_handle.psp_handle =
                to12(ia, sp, t == v2::DAT_HANDLE_TYPE_RSP ? DAT_HANDLE_TYPE_RSP : DAT_HANDLE_TYPE_PSP);
        }
        o.local_ia_address_ptr = d.local_ia_address_ptr;
        o.conn_qual = d.conn_qual;
        o.cr_handle = to12(ia, d.cr_handle, DAT_HANDLE_TYPE_CR);
        if (d.cr_handle && !o.cr_handle)
            return false;
        break;
    }
    case v2::DAT_CONNECTION_EVENT_ESTABLISHED:
    case v2::DAT_CONNECTION_EVENT_PEER_REJECTED:
    case v2::DAT_CONNECTION_EVENT_NON_PEER_REJECTED:
    case v2::DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR:
    case v2::DAT_CONNECTION_EVENT_DISCONNECTED:
    case v2::DAT_CONNECTION_EVENT_BROKEN:
    case v2::DAT_CONNECTION_EVENT_TIMED_OUT:
    case v2::DAT_CONNECTION_EVENT_UNREACHABLE: {
        const auto &d = in.event_data.connect_event_data;
        auto &o = e.event_data.connect_event_data;
        o.ep_handle = to12(ia, d.ep_handle, DAT_HANDLE_TYPE_EP);
        o.private_data_size = d.private_data_size;
        o.private_data = d.private_data;
        break;
    }
    case v2::DAT_ASYNC_ERROR_EVD_OVERFLOW:
    case v2::DAT_ASYNC_ERROR_IA_CATASTROPHIC:
    case v2::DAT_ASYNC_ERROR_EP_BROKEN:
    case v2::DAT_ASYNC_ERROR_TIMED_OUT:
    case v2::DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR: {
        const auto &d = in.event_data.asynch_error_event_data;
        auto &o = e.event_data.asynch_error_event_data;
        // The object the error is about: the IA (reported by its registry
        // handle, a small integer) or one of its objects.
        v2::DAT_HANDLE h = d.dat_handle;
        if (reinterpret_cast<std::uintptr_t>(h) < 4096) {
            o.dat_handle = ia;
        } else {
            v2::DAT_HANDLE_TYPE t{};
            auto *p20 = *static_cast<const v2::DAT_PROVIDER *const *>(h);
            if (p20->get_handle_type_func(h, &t) == v2::DAT_SUCCESS && t <= v2::DAT_HANDLE_TYPE_SRQ)
                o.dat_handle = t == v2::DAT_HANDLE_TYPE_IA ? ia : to12(ia, h, static_cast<DAT_HANDLE_TYPE>(t));
        }
        o.reason = d.reason;
        break;
    }
    case v2::DAT_SOFTWARE_EVENT:
        e.event_data.software_event_data.pointer = in.event_data.software_event_data.pointer;
        break;
    default:
        // High-availability and extension events: no 1.2 program asks for them.
        DAT2_ERR("libdat.so.1: dropped DAT 2.0 event 0x%x, which DAT 1.2 cannot express",
                 static_cast<unsigned>(in.event_number));
        return false;
    }
    e.event_number = static_cast<DAT_EVENT_NUMBER>(in.event_number);
    *out = e;
    return true;
}

bool event20(const DAT_EVENT &in, v2::DAT_EVENT *out) {
    if (in.event_number != DAT_SOFTWARE_EVENT)
        return false; // dat_evd_post_se(3DAT): software events only
    std::memset(out, 0, sizeof *out);
    out->event_number = v2::DAT_SOFTWARE_EVENT;
    out->event_data.software_event_data.pointer = in.event_data.software_event_data.pointer;
    return true;
}

void ia_attr12(const v2::DAT_IA_ATTR &in, DAT_IA_ATTR *out) {
    DAT_IA_ATTR a;
    std::memset(&a, 0, sizeof a);
    std::memcpy(a.adapter_name, in.adapter_name, sizeof a.adapter_name);
    std::memcpy(a.vendor_name, in.vendor_name, sizeof a.vendor_name);
    a.hardware_version_major = in.hardware_version_major;
    a.hardware_version_minor = in.hardware_version_minor;
    a.firmware_version_major = in.firmware_version_major;
    a.firmware_version_minor = in.firmware_version_minor;
    a.ia_address_ptr = in.ia_address_ptr;
    a.max_eps = in.max_eps;
    a.max_dto_per_ep = in.max_dto_per_ep;
    a.max_rdma_read_per_ep_in = in.max_rdma_read_per_ep_in;
    a.max_rdma_read_per_ep_out = in.max_rdma_read_per_ep_out;
    a.max_evds = in.max_evds;
    a.max_evd_qlen = in.max_evd_qlen;
    a.max_iov_segments_per_dto = in.max_iov_segments_per_dto;
    a.max_lmrs = in.max_lmrs;
    a.max_lmr_block_size = in.max_lmr_block_size;
    a.max_lmr_virtual_address = in.max_lmr_virtual_address;
    a.max_pzs = in.max_pzs;
    a.max_message_size = in.max_message_size;
    a.max_rdma_size = in.max_rdma_size;
    a.max_rmrs = in.max_rmrs;
    a.max_rmr_target_address = in.max_rmr_target_address;
    a.max_srqs = in.max_srqs;
    a.max_ep_per_srq = in.max_ep_per_srq;
    a.max_recv_per_srq = in.max_recv_per_srq;
    a.max_iov_segments_per_rdma_read = in.max_iov_segments_per_rdma_read;
    a.max_iov_segments_per_rdma_write = in.max_iov_segments_per_rdma_write;
    a.max_rdma_read_in = in.max_rdma_read_in;
    a.max_rdma_read_out = in.max_rdma_read_out;
    a.max_rdma_read_per_ep_in_guaranteed = static_cast<DAT_BOOLEAN>(in.max_rdma_read_per_ep_in_guaranteed);
    a.max_rdma_read_per_ep_out_guaranteed = static_cast<DAT_BOOLEAN>(in.max_rdma_read_per_ep_out_guaranteed);
    a.num_transport_attr = in.num_transport_attr;
    a.transport_attr = reinterpret_cast<DAT_NAMED_ATTR *>(in.transport_attr);
    a.num_vendor_attr = in.num_vendor_attr;
    a.vendor_attr = reinterpret_cast<DAT_NAMED_ATTR *>(in.vendor_attr);
    *out = a;
}

void provider_attr12(const v2::DAT_PROVIDER_ATTR &in, DAT_PROVIDER_ATTR *out) {
    // evd_stream_merging_supported is const in the struct (the consumer
    // only reads it): the struct is built in raw storage.
    alignas(DAT_PROVIDER_ATTR) unsigned char raw[sizeof(DAT_PROVIDER_ATTR)] = {};
    auto *a = reinterpret_cast<DAT_PROVIDER_ATTR *>(raw);
    std::memcpy(a->provider_name, in.provider_name, sizeof a->provider_name);
    a->provider_version_major = in.provider_version_major;
    a->provider_version_minor = in.provider_version_minor;
    // The API the consumer speaks is libdat.so.1's, whatever the entry says.
    a->dapl_version_major = DAT_VERSION_MAJOR;
    a->dapl_version_minor = DAT_VERSION_MINOR;
    a->lmr_mem_types_supported = static_cast<DAT_MEM_TYPE>(in.lmr_mem_types_supported);
    a->iov_ownership_on_return = static_cast<DAT_IOV_OWNERSHIP>(in.iov_ownership_on_return);
    a->dat_qos_supported = static_cast<DAT_QOS>(in.dat_qos_supported);
    a->completion_flags_supported =
        static_cast<DAT_COMPLETION_FLAGS>(in.completion_flags_supported & (DAT_COMPLETION_EVD_THRESHOLD_FLAG * 2 - 1));
    a->is_thread_safe = static_cast<DAT_BOOLEAN>(in.is_thread_safe);
    a->max_private_data_size = in.max_private_data_size;
    a->supports_multipath = static_cast<DAT_BOOLEAN>(in.supports_multipath);
    a->ep_creator = static_cast<DAT_EP_CREATOR_FOR_PSP>(in.ep_creator);
    a->pz_support = static_cast<DAT_PZ_SUPPORT>(in.pz_support);
    a->optimal_buffer_alignment = in.optimal_buffer_alignment;
    std::memcpy(reinterpret_cast<DAT_BOOLEAN *>(raw + offsetof(DAT_PROVIDER_ATTR, evd_stream_merging_supported)),
                in.evd_stream_merging_supported, sizeof a->evd_stream_merging_supported);
    a->srq_supported = static_cast<DAT_BOOLEAN>(in.srq_supported);
    a->srq_watermarks_supported = in.srq_watermarks_supported;
    a->srq_ep_pz_difference_supported = static_cast<DAT_BOOLEAN>(in.srq_ep_pz_difference_supported);
    a->srq_info_supported = in.srq_info_supported;
    a->ep_recv_info_supported = in.ep_recv_info_supported;
    a->lmr_sync_req = static_cast<DAT_BOOLEAN>(in.lmr_sync_req);
    a->dto_async_return_guaranteed = static_cast<DAT_BOOLEAN>(in.dto_async_return_guaranteed);
    a->rdma_write_for_rdma_read_req = static_cast<DAT_BOOLEAN>(in.rdma_write_for_rdma_read_req);
    a->num_provider_specific_attr = in.num_provider_specific_attr;
    a->provider_specific_attr = reinterpret_cast<DAT_NAMED_ATTR *>(in.provider_specific_attr);
    std::memcpy(static_cast<void *>(out), raw, sizeof raw);
}

void ep_attr20(const DAT_EP_ATTR &in, v2::DAT_EP_ATTR *out) {
    std::memset(out, 0, sizeof *out);
    out->service_type = static_cast<v2::DAT_SERVICE_TYPE>(in.service_type);
    out->max_message_size = seg20(in.max_message_size);
    out->max_rdma_size = seg20(in.max_rdma_size);
    out->qos = static_cast<v2::DAT_QOS>(in.qos);
    out->recv_completion_flags = static_cast<v2::DAT_COMPLETION_FLAGS>(in.recv_completion_flags);
    out->request_completion_flags = static_cast<v2::DAT_COMPLETION_FLAGS>(in.request_completion_flags);
    out->max_recv_dtos = in.max_recv_dtos;
    out->max_request_dtos = in.max_request_dtos;
    out->max_recv_iov = in.max_recv_iov;
    out->max_request_iov = in.max_request_iov;
    out->max_rdma_read_in = in.max_rdma_read_in;
    out->max_rdma_read_out = in.max_rdma_read_out;
    out->srq_soft_hw = in.srq_soft_hw;
    out->max_rdma_read_iov = in.max_rdma_read_iov;
    out->max_rdma_write_iov = in.max_rdma_write_iov;
    out->ep_transport_specific_count = in.ep_transport_specific_count;
    out->ep_transport_specific = reinterpret_cast<v2::DAT_NAMED_ATTR *>(in.ep_transport_specific);
    out->ep_provider_specific_count = in.ep_provider_specific_count;
    out->ep_provider_specific = reinterpret_cast<v2::DAT_NAMED_ATTR *>(in.ep_provider_specific);
}

void ep_attr12(const v2::DAT_EP_ATTR &in, DAT_EP_ATTR *out) {
    std::memset(out, 0, sizeof *out);
    out->service_type = static_cast<DAT_SERVICE_TYPE>(in.service_type);
    out->max_message_size = in.max_message_size;
    out->max_rdma_size = in.max_rdma_size;
    out->qos = static_cast<DAT_QOS>(in.qos);
    out->recv_completion_flags = static_cast<DAT_COMPLETION_FLAGS>(in.recv_completion_flags);
    out->request_completion_flags = static_cast<DAT_COMPLETION_FLAGS>(in.request_completion_flags);
    out->max_recv_dtos = in.max_recv_dtos;
    out->max_request_dtos = in.max_request_dtos;
    out->max_recv_iov = in.max_recv_iov;
    out->max_request_iov = in.max_request_iov;
    out->max_rdma_read_in = in.max_rdma_read_in;
    out->max_rdma_read_out = in.max_rdma_read_out;
    out->srq_soft_hw = in.srq_soft_hw;
    out->max_rdma_read_iov = in.max_rdma_read_iov;
    out->max_rdma_write_iov = in.max_rdma_write_iov;
    out->ep_transport_specific_count = in.ep_transport_specific_count;
    out->ep_transport_specific = reinterpret_cast<DAT_NAMED_ATTR *>(in.ep_transport_specific);
    out->ep_provider_specific_count = in.ep_provider_specific_count;
    out->ep_provider_specific = reinterpret_cast<DAT_NAMED_ATTR *>(in.ep_provider_specific);
}

void ep_param12(Obj *ep, const v2::DAT_EP_PARAM &in, DAT_EP_PARAM *out) {
    Obj *ia = ep->ia;
    DAT_EP_PARAM p;
    std::memset(&p, 0, sizeof p);
    p.ia_handle = ia;
    p.ep_state = ep_state12(in.ep_state);
    p.local_ia_address_ptr = in.local_ia_address_ptr;
    p.local_port_qual = in.local_port_qual;
    p.remote_ia_address_ptr = in.remote_ia_address_ptr;
    p.remote_port_qual = in.remote_port_qual;
    p.pz_handle = to12(ia, in.pz_handle, DAT_HANDLE_TYPE_PZ);
    p.recv_evd_handle = to12(ia, in.recv_evd_handle, DAT_HANDLE_TYPE_EVD);
    p.request_evd_handle = to12(ia, in.request_evd_handle, DAT_HANDLE_TYPE_EVD);
    p.connect_evd_handle = to12(ia, in.connect_evd_handle, DAT_HANDLE_TYPE_EVD);
    p.srq_handle = to12(ia, in.srq_handle, DAT_HANDLE_TYPE_SRQ);
    ep_attr12(in.ep_attr, &p.ep_attr);
    *out = p;
}

// DAT 2.0 inserted DAT_EP_FIELD_COMM at bit 2: 1.2's bits 2..10 are 2.0's
// 3..11; bits 0, 1 and the ep_attr bits (12 and up) are the same. Bit 11,
// which 1.2 does not define, becomes bit 63, which 2.0 does not either.
v2::DAT_EP_PARAM_MASK ep_mask20(DAT_EP_PARAM_MASK mask) {
    const DAT_EP_PARAM_MASK low = mask & (DAT_EP_FIELD_IA_HANDLE | DAT_EP_FIELD_EP_STATE);
    const DAT_EP_PARAM_MASK shifted = mask & UINT64_C(0x7FC); // bits 2..10
    const DAT_EP_PARAM_MASK attr = mask & ~UINT64_C(0xFFF);
    const DAT_EP_PARAM_MASK undefined = (mask & UINT64_C(0x800)) ? UINT64_C(1) << 63 : 0;
    return low | (shifted << 1) | attr | undefined;
}

bool lmr_triplet20(const DAT_LMR_TRIPLET &in, v2::DAT_LMR_TRIPLET *out) {
    if (in.segment_length > kMaxSeg)
        return false;
    out->virtual_address = in.virtual_address;
    out->segment_length = static_cast<v2::DAT_SEG_LENGTH>(in.segment_length);
    out->lmr_context = in.lmr_context;
    return true;
}

void lmr_triplet12(const v2::DAT_LMR_TRIPLET &in, DAT_LMR_TRIPLET *out) {
    out->lmr_context = in.lmr_context;
    out->pad = 0;
    out->virtual_address = in.virtual_address;
    out->segment_length = in.segment_length;
}

bool rmr_triplet20(const DAT_RMR_TRIPLET &in, v2::DAT_RMR_TRIPLET *out) {
    if (in.segment_length > kMaxSeg)
        return false;
    out->virtual_address = in.target_address;
    out->segment_length = static_cast<v2::DAT_SEG_LENGTH>(in.segment_length);
    out->rmr_context = in.rmr_context;
    return true;
}

} // namespace dat12
