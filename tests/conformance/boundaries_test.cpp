// SPDX-License-Identifier: BSD-3-Clause
// Objects of one IA passed to another, and endpoint attributes beyond what
// the IA reports: each is refused with the man page's code, never posted to
// a transport that cannot carry it.
#include "conformance.hpp"
#include "connected.hpp"

#include <cstring>

namespace {

class BoundariesTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        ASSERT_DAT_OK(a_.open(GetParam()));
        ASSERT_DAT_OK(b_.open(GetParam()));
    }
    DAT_EVD_HANDLE dto_evd(DAT_IA_HANDLE ia) {
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        EXPECT_DAT_OK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &evd));
        return evd;
    }
    conformance::OpenIa a_, b_;
};

TEST_P(BoundariesTest, EndpointWithAnotherIasPzOrEvdIsInvalidHandle) {
    DAT_EVD_HANDLE evd_a = dto_evd(a_.ia), evd_b = dto_evd(b_.ia);
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    // dat_ep_create(3DAT): DAT_INVALID_HANDLE "Invalid DAT handle": a PZ or
    // EVD of another IA instance is not a handle of this one.
    EXPECT_DAT_ERR(dat_ep_create(a_.ia, b_.pz, evd_a, evd_a, DAT_HANDLE_NULL, nullptr, &ep), DAT_INVALID_HANDLE,
                   DAT_INVALID_HANDLE_PZ);
    EXPECT_DAT_ERR(dat_ep_create(a_.ia, a_.pz, evd_b, evd_a, DAT_HANDLE_NULL, nullptr, &ep), DAT_INVALID_HANDLE,
                   DAT_INVALID_HANDLE_EVD_RECV);
    EXPECT_DAT_ERR(dat_ep_create(a_.ia, a_.pz, evd_a, evd_b, DAT_HANDLE_NULL, nullptr, &ep), DAT_INVALID_HANDLE,
                   DAT_INVALID_HANDLE_EVD_REQUEST);
    EXPECT_EQ(ep, DAT_HANDLE_NULL);
    EXPECT_DAT_OK(dat_evd_free(evd_a));
    EXPECT_DAT_OK(dat_evd_free(evd_b));
}

TEST_P(BoundariesTest, EvdWithAnotherIasCnoIsInvalidHandle) {
    DAT_CNO_HANDLE cno_b = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_cno_create(b_.ia, DAT_OS_WAIT_PROXY_AGENT{nullptr, nullptr}, &cno_b));
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    EXPECT_DAT_ERR(dat_evd_create(a_.ia, 8, cno_b, DAT_EVD_SOFTWARE_FLAG, &evd), DAT_INVALID_HANDLE,
                   DAT_INVALID_HANDLE_CNO);
    ASSERT_DAT_OK(dat_evd_create(a_.ia, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd));
    EXPECT_DAT_ERR(dat_evd_modify_cno(evd, cno_b), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    EXPECT_DAT_OK(dat_evd_free(evd));
    EXPECT_DAT_OK(dat_cno_free(cno_b));
}

TEST_P(BoundariesTest, LmrWithAnotherIasPzIsInvalidHandle) {
    static char buf[4096];
    DAT_REGION_DESCRIPTION region;
    region.for_va = buf;
    DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
    DAT_LMR_CONTEXT lctx;
    DAT_RMR_CONTEXT rctx;
    DAT_VLEN size;
    DAT_VADDR addr;
    EXPECT_DAT_ERR(dat_lmr_create(a_.ia, DAT_MEM_TYPE_VIRTUAL, region, sizeof buf, b_.pz, DAT_MEM_PRIV_ALL_FLAG,
                                  DAT_VA_TYPE_VA, &lmr, &lctx, &rctx, &size, &addr),
                   DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    EXPECT_EQ(lmr, DAT_HANDLE_NULL);
}

TEST_P(BoundariesTest, EndpointAttributesBeyondTheIaAreInvalidParameter) {
    DAT_IA_ATTR ia_attr;
    ASSERT_DAT_OK(dat_ia_query(a_.ia, nullptr, DAT_IA_FIELD_ALL, &ia_attr, 0, nullptr));
    DAT_EVD_HANDLE evd = dto_evd(a_.ia);
    DAT_EP_ATTR attr;
    std::memset(&attr, 0, sizeof attr);
    attr.service_type = DAT_SERVICE_TYPE_RC;
    attr.max_message_size = 4096;
    attr.max_rdma_size = 4096;
    attr.max_recv_dtos = attr.max_request_dtos = 8;
    attr.max_recv_iov = attr.max_request_iov = attr.max_rdma_read_iov = attr.max_rdma_write_iov = 1;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_ep_create(a_.ia, a_.pz, evd, evd, DAT_HANDLE_NULL, &attr, &ep));
    ASSERT_DAT_OK(dat_ep_free(ep));
    // dat_ep_create(3DAT): DAT_INVALID_PARAMETER "One of the requested EP
    // parameters or attributes was invalid": more segments per DTO than
    // dat_ia_query's max_iov_segments_per_dto.
    attr.max_request_iov = ia_attr.max_iov_segments_per_dto + 1;
    ep = DAT_HANDLE_NULL;
    EXPECT_DAT_ERR(dat_ep_create(a_.ia, a_.pz, evd, evd, DAT_HANDLE_NULL, &attr, &ep), DAT_INVALID_PARAMETER, 0);
    EXPECT_EQ(ep, DAT_HANDLE_NULL);
    attr.max_request_iov = 1;
    attr.max_recv_iov = ia_attr.max_iov_segments_per_dto + 1;
    EXPECT_DAT_ERR(dat_ep_create(a_.ia, a_.pz, evd, evd, DAT_HANDLE_NULL, &attr, &ep), DAT_INVALID_PARAMETER, 0);
    attr.max_recv_iov = 1;
    // Attributes no EP can have, at creation and in dat_ep_modify(3DAT): negative
    // RDMA Read counts, a qos that is no DAT_QOS value, and receive completion
    // flags that "Recv posting does not support" (dat_ep_modify(3DAT)).
    DAT_EP_HANDLE quiet = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_ep_create(a_.ia, a_.pz, evd, evd, DAT_HANDLE_NULL, &attr, &quiet));
    auto refused = [&](const char *what, DAT_EP_PARAM_MASK field, auto change) {
        SCOPED_TRACE(what);
        DAT_EP_ATTR bad = attr;
        change(bad);
        DAT_EP_HANDLE none = DAT_HANDLE_NULL;
        EXPECT_DAT_ERR(dat_ep_create(a_.ia, a_.pz, evd, evd, DAT_HANDLE_NULL, &bad, &none), DAT_INVALID_PARAMETER, 0);
        EXPECT_EQ(none, DAT_HANDLE_NULL);
        DAT_EP_PARAM param{};
        param.ep_attr = bad;
        EXPECT_DAT_ERR(dat_ep_modify(quiet, field, &param), DAT_INVALID_PARAMETER, 0);
    };
    refused("max_rdma_read_in -1", DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN,
            [](DAT_EP_ATTR &a) { a.max_rdma_read_in = -1; });
    refused("max_rdma_read_out -7", DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT,
            [](DAT_EP_ATTR &a) { a.max_rdma_read_out = -7; });
    refused("qos 0x40", DAT_EP_FIELD_EP_ATTR_QOS, [](DAT_EP_ATTR &a) { a.qos = static_cast<DAT_QOS>(0x40); });
    refused("recv_completion_flags SUPPRESS", DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS,
            [](DAT_EP_ATTR &a) { a.recv_completion_flags = DAT_COMPLETION_SUPPRESS_FLAG; });
    refused("recv_completion_flags BARRIER_FENCE", DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS,
            [](DAT_EP_ATTR &a) { a.recv_completion_flags = DAT_COMPLETION_BARRIER_FENCE_FLAG; });
    EXPECT_EQ(conformance::query_ep_attr(quiet).recv_completion_flags, DAT_COMPLETION_DEFAULT_FLAG) << "a refused modify changed it";
    EXPECT_DAT_OK(dat_ep_free(quiet));
    EXPECT_DAT_OK(dat_evd_free(evd));
}

TEST_P(BoundariesTest, WatermarksThatCannotFireAreRefusedNotAccepted) {
    DAT_EVD_HANDLE evd = dto_evd(a_.ia);
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_ep_create(a_.ia, a_.pz, evd, evd, DAT_HANDLE_NULL, nullptr, &ep));
    // Infinite on both sides asks for no event: nothing to arm.
    EXPECT_DAT_OK(dat_ep_set_watermark(ep, DAT_WATERMARK_INFINITE, DAT_WATERMARK_INFINITE));
    // An EP without SRQ counts its posted receives: its watermarks can fire
    // (srq_test.cpp checks that they do). On an EP with an SRQ they cannot,
    // and are refused with DAT_MODEL_NOT_SUPPORTED (srq_test.cpp too).
    EXPECT_DAT_OK(dat_ep_set_watermark(ep, 4, DAT_WATERMARK_INFINITE));
    EXPECT_DAT_ERR(dat_ep_set_watermark(ep, -5, DAT_WATERMARK_INFINITE), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_OK(dat_ep_free(ep));
    EXPECT_DAT_OK(dat_evd_free(evd));
}

} // namespace

INSTANTIATE_OVER_IAS(BoundariesTest);
