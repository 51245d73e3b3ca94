// SPDX-License-Identifier: BSD-3-Clause
// Protection Zone: dat_pz_create(3DAT), dat_pz_query(3DAT), dat_pz_free(3DAT).
#include "conformance.hpp"

#include <vector>

namespace {

using conformance::HandleKind;

class PzTest : public conformance::ConformanceTest {
protected:
    void SetUp() override {
        ConformanceTest::SetUp();
        ASSERT_DAT_OK(ia_.open(GetParam()));
    }

    DAT_RETURN make_lmr(DAT_PZ_HANDLE pz, DAT_LMR_HANDLE *lmr) {
        return conformance::create_lmr(
            ia_.ia, pz, buffer_.data(), buffer_.size(),
            static_cast<DAT_MEM_PRIV_FLAGS>(DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG), lmr);
    }

    conformance::OpenIa ia_;
    std::vector<char> buffer_ = std::vector<char>(16384);
};

TEST_P(PzTest, CreateQueryFree) {
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_pz_create(ia_.ia, &pz));
    ASSERT_NE(pz, DAT_HANDLE_NULL);
    DAT_HANDLE_TYPE type{};
    EXPECT_DAT_OK(dat_get_handle_type(pz, &type));
    EXPECT_EQ(type, DAT_HANDLE_TYPE_PZ);
    DAT_PZ_PARAM param{};
    ASSERT_DAT_OK(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &param));
    // The IA handle reported back is the Consumer's, from dat_ia_open.
    EXPECT_EQ(param.ia_handle, ia_.ia);
    EXPECT_DAT_OK(dat_pz_free(pz));
    // dat_pz_free(3DAT): "Use of the handle of the destroyed Protection Zone in any subsequent
    // operation except for dat_pz_free() fails."
    EXPECT_DAT_INVALID_HANDLE(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &param), HandleKind::Pz);
    DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
    EXPECT_DAT_INVALID_HANDLE(make_lmr(pz, &lmr), HandleKind::Pz);
}

TEST_P(PzTest, PzsAreDistinct) {
    DAT_PZ_HANDLE a = DAT_HANDLE_NULL, b = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_pz_create(ia_.ia, &a));
    ASSERT_DAT_OK(dat_pz_create(ia_.ia, &b));
    EXPECT_NE(a, b);
    EXPECT_NE(a, ia_.pz);
    EXPECT_DAT_OK(dat_pz_free(a));
    // Freeing one PZ leaves the others usable.
    DAT_PZ_PARAM param{};
    EXPECT_DAT_OK(dat_pz_query(b, DAT_PZ_FIELD_ALL, &param));
    EXPECT_DAT_OK(dat_pz_free(b));
}

TEST_P(PzTest, CreateBadArguments) {
    // dat_pz_create(3DAT): DAT_INVALID_PARAMETER "Invalid parameter", DAT_INVALID_HANDLE
    // "The ia_handle parameter is invalid".
    EXPECT_DAT_ERR(dat_pz_create(ia_.ia, nullptr), DAT_INVALID_PARAMETER, 0);
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    EXPECT_DAT_INVALID_HANDLE(dat_pz_create(DAT_HANDLE_NULL, &pz), HandleKind::Ia);
    // Another kind of handle where the IA handle belongs.
    EXPECT_DAT_INVALID_HANDLE(dat_pz_create(ia_.pz, &pz), HandleKind::Ia);
}

TEST_P(PzTest, QueryInvalidMaskIsInvalidParameter) {
    DAT_PZ_PARAM param{};
    // dat_pz_query(3DAT): DAT_INVALID_PARAMETER "The pz_param_mask parameter is invalid."
    EXPECT_DAT_ERR(dat_pz_query(ia_.pz, static_cast<DAT_PZ_PARAM_MASK>(0x80), &param), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_pz_query(ia_.pz, DAT_PZ_FIELD_ALL, nullptr), DAT_INVALID_PARAMETER, 0);
}

TEST_P(PzTest, FreeWhileLmrUsesItIsInvalidState) {
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_pz_create(ia_.ia, &pz));
    DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(make_lmr(pz, &lmr));
    // dat_pz_free(3DAT): "The Protection Zone cannot be destroyed if it is in use by an Endpoint,
    // LMR, or RMR" -> DAT_INVALID_STATE.
    EXPECT_DAT_ERR(dat_pz_free(pz), DAT_INVALID_STATE, 0);
    DAT_PZ_PARAM param{};
    EXPECT_DAT_OK(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &param)); // still there
    EXPECT_DAT_OK(dat_lmr_free(lmr));
    EXPECT_DAT_OK(dat_pz_free(pz));
}

TEST_P(PzTest, FreeWhileEpUsesItIsInvalidState) {
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_pz_create(ia_.ia, &pz));
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_ep_create(ia_.ia, pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL, DAT_HANDLE_NULL, nullptr, &ep));
    // dat_pz_free(3DAT): in use by an Endpoint -> DAT_INVALID_STATE.
    EXPECT_DAT_ERR(dat_pz_free(pz), DAT_INVALID_STATE, 0);
    DAT_EP_PARAM ep_param{};
    ASSERT_DAT_OK(dat_ep_query(ep, DAT_EP_FIELD_PZ_HANDLE, &ep_param));
    EXPECT_EQ(ep_param.pz_handle, pz);
    EXPECT_DAT_OK(dat_ep_free(ep));
    EXPECT_DAT_OK(dat_pz_free(pz));
}

TEST_P(PzTest, FreeWhileRmrUsesItIsInvalidState) {
    conformance::IaAttributes attrs;
    ASSERT_DAT_OK(attrs.query(ia_.ia));
    ASSERT_GE(attrs.ia.max_rmrs, 1) << "the IA reports no RMRs";
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_pz_create(ia_.ia, &pz));
    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_rmr_create(pz, &rmr));
    // dat_pz_free(3DAT): in use by an RMR -> DAT_INVALID_STATE.
    EXPECT_DAT_ERR(dat_pz_free(pz), DAT_INVALID_STATE, 0);
    EXPECT_DAT_OK(dat_rmr_free(rmr));
    EXPECT_DAT_OK(dat_pz_free(pz));
}

TEST_P(PzTest, FreeCountsEveryUser) {
    // Two users: the PZ stays busy until the last one is gone.
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_pz_create(ia_.ia, &pz));
    DAT_LMR_HANDLE lmr1 = DAT_HANDLE_NULL, lmr2 = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(make_lmr(pz, &lmr1));
    ASSERT_DAT_OK(make_lmr(pz, &lmr2));
    EXPECT_DAT_OK(dat_lmr_free(lmr1));
    EXPECT_DAT_ERR(dat_pz_free(pz), DAT_INVALID_STATE, 0);
    EXPECT_DAT_OK(dat_lmr_free(lmr2));
    EXPECT_DAT_OK(dat_pz_free(pz));
}

TEST_P(PzTest, FreeBadHandles) {
    EXPECT_DAT_INVALID_HANDLE(dat_pz_free(DAT_HANDLE_NULL), HandleKind::Pz);
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_evd_create(ia_.ia, 4, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd));
    EXPECT_DAT_INVALID_HANDLE(dat_pz_free(evd), HandleKind::Pz);
    // The EVD is untouched by the refused free.
    DAT_EVD_PARAM param{};
    EXPECT_DAT_OK(dat_evd_query(evd, DAT_EVD_FIELD_ALL, &param));
    EXPECT_DAT_OK(dat_evd_free(evd));
}

INSTANTIATE_OVER_IAS(PzTest);

} // namespace
