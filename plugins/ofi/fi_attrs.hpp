// SPDX-License-Identifier: BSD-3-Clause
// What the MSG and the RDM transport of the libfabric plugin derive alike
// from DAT arguments and from fi_info.
#pragma once

#include "kit.hpp"

#include <rdma/fabric.h>

#include <algorithm>
#include <cstdint>

namespace dat2::ofi {

// The remote access a registration grants for DAT memory privileges.
inline std::uint64_t remote_access(DAT_MEM_PRIV_FLAGS privileges) {
    std::uint64_t access = 0;
    if (privileges & DAT_MEM_PRIV_REMOTE_READ_FLAG)
        access |= FI_REMOTE_READ;
    if (privileges & DAT_MEM_PRIV_REMOTE_WRITE_FLAG)
        access |= FI_REMOTE_WRITE;
    // DAT_IB_MEM_PRIV_REMOTE_ATOMIC: a fetching atomic reads and writes.
    if (privileges & DAT_MEM_PRIV_EXTENSION_BASE)
        access |= FI_REMOTE_READ | FI_REMOTE_WRITE;
    return access;
}

// The longest message or RDMA operation an IA offers over `info`.
inline std::uint64_t max_message_size(const fi_info &info) {
    return std::min<std::uint64_t>(info.ep_attr->max_msg_size, 1u << 30);
}

// The IA attributes that follow from the provider's limits: `iov` local
// segments per DTO, `rma_iov` per RDMA read or write (one remote segment).
inline void fill_ia_limits(DAT_IA_ATTR &a, const fi_info &info, std::size_t iov, std::size_t rma_iov) {
    a.max_rdma_read_per_ep_in = 64;
    a.max_rdma_read_per_ep_out = 64;
    a.max_iov_segments_per_dto = static_cast<DAT_COUNT>(iov);
    a.max_iov_segments_per_rdma_read = static_cast<DAT_COUNT>(rma_iov);
    a.max_iov_segments_per_rdma_write = static_cast<DAT_COUNT>(rma_iov);
    a.max_lmr_block_size = 0xffffffffu;
    a.max_lmr_virtual_address = ~DAT_VADDR(0);
    a.max_message_size = static_cast<DAT_SEG_LENGTH>(max_message_size(info));
    a.max_rdma_size = a.max_message_size;
    a.max_rdma_read_in = 64;
    a.max_rdma_read_out = 64;
    // A bound window is one more registration of the domain.
    const std::size_t mr_count = info.domain_attr->mr_cnt;
    a.max_rmrs = mr_count ? static_cast<DAT_COUNT>(std::min<std::size_t>(mr_count, kit::kMaxRmrs)) : kit::kMaxRmrs;
    a.max_rmr_target_address = ~DAT_VADDR(0);
    a.max_rdma_read_per_ep_in_guaranteed = DAT_TRUE;
    a.max_rdma_read_per_ep_out_guaranteed = DAT_TRUE;
    a.zb_supported = DAT_FALSE;
}

} // namespace dat2::ofi
