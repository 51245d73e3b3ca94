// SPDX-License-Identifier: BSD-3-Clause
// Shared receive queues: one ibv_srq per DAT SRQ, as deep as the IA allows
// (dat_srq_resize then only changes the kit's count). EPs created with it
// get QPs on it; a receive's completion names the QP, and so the EP.
#include "verbs.hpp"

#include "log.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace dat2::verbs {

DAT_RETURN VerbsTransport::srq_open(kit::Srq &srq, void *&tp) {
    if (!max_srq_recvs_)
        return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    if (srq.max_recv_iov > dev_attr_.max_srq_sge)
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ibv_pd *pd = pd_acquire(srq.pz);
    if (!pd)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
    ibv_srq_init_attr attr{};
    attr.attr.max_wr = static_cast<std::uint32_t>(max_srq_recvs_);
    attr.attr.max_sge = static_cast<std::uint32_t>(std::max(1, srq.max_recv_iov));
    ibv_srq *s = ibv_create_srq(pd, &attr);
    if (!s) {
        const int err = errno;
        DAT2_ERR("%s: ibv_create_srq(%u x %u): %s\n", name(), attr.attr.max_wr, attr.attr.max_sge, std::strerror(err));
        pd_release(srq.pz);
        return to_dat(err, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ));
    }
    tp = s;
    return DAT_SUCCESS;
}

void VerbsTransport::srq_close(kit::Srq &srq) {
    if (!srq.tp)
        return;
    if (int rc = ibv_destroy_srq(static_cast<ibv_srq *>(srq.tp)))
        DAT2_ERR("%s: ibv_destroy_srq: %s\n", name(), std::strerror(rc));
    pd_release(srq.pz);
}

DAT_RETURN VerbsTransport::srq_post(kit::Srq &srq, kit::Op &op, const kit::Segment *segs, int nsegs) {
    ibv_sge sge[kit::kMaxIov];
    to_sges(segs, nsegs, sge);
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = reinterpret_cast<std::uintptr_t>(&op);
    wr.sg_list = sge;
    wr.num_sge = nsegs;
    int rc = ibv_post_srq_recv(static_cast<ibv_srq *>(srq.tp), &wr, &bad);
    if (rc == 0)
        return DAT_SUCCESS;
    if (rc == ENOMEM)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    DAT2_ERR("%s: ibv_post_srq_recv: %s\n", name(), std::strerror(rc));
    return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
}

} // namespace dat2::verbs
