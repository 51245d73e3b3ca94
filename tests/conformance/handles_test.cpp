// SPDX-License-Identifier: BSD-3-Clause
// Handle checking across the API: NULL handles, handles of another type and handles of
// destroyed objects must give DAT_INVALID_HANDLE (every page lists it for its handle
// argument) and never crash; dat_get_handle_type(3DAT); dat_set_consumer_context(3DAT) /
// dat_get_consumer_context(3DAT). Local objects only (a PSP and an RSP listen, nothing
// connects).
#include "conformance.hpp"

#include <cstdint>
#include <vector>

namespace {

using conformance::HandleKind;
using conformance::no_agent;

constexpr auto kRmrIaPz =
    static_cast<DAT_RMR_PARAM_MASK>(DAT_RMR_FIELD_IA_HANDLE | DAT_RMR_FIELD_PZ_HANDLE);
constexpr auto kLocal =
    static_cast<DAT_MEM_PRIV_FLAGS>(DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG);

// One live object of every kind a Consumer can create without a connection.
struct Objects {
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE sw_evd = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE dto_evd = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE conn_evd = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE cr_evd = DAT_HANDLE_NULL;
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    DAT_EP_HANDLE rsp_ep = DAT_HANDLE_NULL;
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
    DAT_CONN_QUAL psp_qual = 0;
    std::vector<char> buffer = std::vector<char>(8192);
};

DAT_RETURN create_lmr(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, void *address, DAT_VLEN length,
                      DAT_LMR_HANDLE *lmr) {
    DAT_REGION_DESCRIPTION region{};
    region.for_va = address;
    DAT_LMR_CONTEXT lctx = 0;
    DAT_RMR_CONTEXT rctx = 0;
    DAT_VLEN size = 0;
    DAT_VADDR addr = 0;
    return dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, length, pz, kLocal, DAT_VA_TYPE_VA, lmr,
                          &lctx, &rctx, &size, &addr);
}

class HandlesTest : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        Objects &o = o_;
        ASSERT_DAT_OK(dat_ia_open(conformance::ia_name_ptr(GetParam()), 8, &o.async_evd, &o.ia));
        ASSERT_DAT_OK(dat_cno_create(o.ia, no_agent(), &o.cno));
        ASSERT_DAT_OK(dat_evd_create(o.ia, 8, o.cno, DAT_EVD_SOFTWARE_FLAG, &o.sw_evd));
        ASSERT_DAT_OK(dat_evd_create(o.ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &o.dto_evd));
        ASSERT_DAT_OK(dat_evd_create(o.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &o.conn_evd));
        ASSERT_DAT_OK(dat_evd_create(o.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &o.cr_evd));
        ASSERT_DAT_OK(dat_pz_create(o.ia, &o.pz));
        ASSERT_DAT_OK(create_lmr(o.ia, o.pz, o.buffer.data(), o.buffer.size(), &o.lmr));
        conformance::IaAttributes attrs;
        ASSERT_DAT_OK(attrs.query(o.ia));
        has_rmr_ = attrs.ia.max_rmrs >= 1; // else the RMR checks are left out
        if (has_rmr_)
            ASSERT_DAT_OK(dat_rmr_create(o.pz, &o.rmr));
        ASSERT_DAT_OK(dat_ep_create(o.ia, o.pz, o.dto_evd, o.dto_evd, o.conn_evd, nullptr, &o.ep));
        ASSERT_DAT_OK(dat_ep_create(o.ia, o.pz, o.dto_evd, o.dto_evd, o.conn_evd, nullptr, &o.rsp_ep));
        ASSERT_DAT_OK(dat_psp_create_any(o.ia, &o.psp_qual, o.cr_evd, DAT_PSP_CONSUMER_FLAG, &o.psp));
        // A connection qualifier nobody uses: let dat_psp_create_any find one, then take it over.
        DAT_CONN_QUAL rsp_qual = 0;
        DAT_PSP_HANDLE probe = DAT_HANDLE_NULL;
        ASSERT_DAT_OK(dat_psp_create_any(o.ia, &rsp_qual, o.cr_evd, DAT_PSP_CONSUMER_FLAG, &probe));
        ASSERT_DAT_OK(dat_psp_free(probe));
        // Checked by ReservedServicePointExists; without one the other tests leave the RSP out.
        rsp_create_ = dat_rsp_create(o.ia, rsp_qual, o.rsp_ep, o.cr_evd, &o.rsp);
        if (rsp_create_ != DAT_SUCCESS)
            o.rsp = DAT_HANDLE_NULL;
    }
    void TearDown() override {
        if (o_.ia != DAT_HANDLE_NULL)
            dat_ia_close(o_.ia, DAT_CLOSE_ABRUPT_FLAG);
    }

    // Every object still answers its query: nothing was destroyed or damaged by a refused call.
    void expect_all_alive() {
        Objects &o = o_;
        DAT_EVD_PARAM evd{};
        for (DAT_EVD_HANDLE h : {o.async_evd, o.sw_evd, o.dto_evd, o.conn_evd, o.cr_evd})
            EXPECT_DAT_OK(dat_evd_query(h, DAT_EVD_FIELD_ALL, &evd));
        DAT_CNO_PARAM cno{};
        EXPECT_DAT_OK(dat_cno_query(o.cno, DAT_CNO_FIELD_ALL, &cno));
        DAT_PZ_PARAM pz{};
        EXPECT_DAT_OK(dat_pz_query(o.pz, DAT_PZ_FIELD_ALL, &pz));
        DAT_LMR_PARAM lmr{};
        EXPECT_DAT_OK(dat_lmr_query(o.lmr, DAT_LMR_FIELD_ALL, &lmr));
        DAT_RMR_PARAM rmr{};
        if (has_rmr_) {
            EXPECT_DAT_OK(dat_rmr_query(o.rmr, kRmrIaPz, &rmr));
        }
        DAT_EP_PARAM ep{};
        EXPECT_DAT_OK(dat_ep_query(o.ep, DAT_EP_FIELD_ALL, &ep));
        EXPECT_DAT_OK(dat_ep_query(o.rsp_ep, DAT_EP_FIELD_ALL, &ep));
        DAT_PSP_PARAM psp{};
        EXPECT_DAT_OK(dat_psp_query(o.psp, DAT_PSP_FIELD_ALL, &psp));
        DAT_RSP_PARAM rsp{};
        if (o.rsp != DAT_HANDLE_NULL) {
            EXPECT_DAT_OK(dat_rsp_query(o.rsp, DAT_RSP_FIELD_ALL, &rsp));
        }
        DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
        EXPECT_DAT_OK(dat_ia_query(o.ia, &async, DAT_IA_FIELD_NONE, nullptr, DAT_PROVIDER_FIELD_NONE,
                                   nullptr));
    }

    Objects o_;
    bool has_rmr_ = false;
    DAT_RETURN rsp_create_ = DAT_INTERNAL_ERROR;
};

TEST_P(HandlesTest, ReservedServicePointExists) {
    // dat_rsp_create(3DAT) on an Unconnected EP and an unused connection qualifier.
    if (DAT_GET_TYPE(rsp_create_) == DAT_NOT_IMPLEMENTED)
        GTEST_SKIP() << "RSPs are issue 4 (the rest of the SPI): dat_rsp_create is not implemented yet";
    EXPECT_EQ(rsp_create_, DAT_SUCCESS) << "dat_rsp_create -> " << conformance::ret_text(rsp_create_);
}

TEST_P(HandlesTest, GetHandleTypeNamesEachObject) {
    const Objects &o = o_;
    const struct {
        DAT_HANDLE handle;
        DAT_HANDLE_TYPE type;
        const char *what;
    } cases[] = {
        {o.ia, DAT_HANDLE_TYPE_IA, "IA"},           {o.async_evd, DAT_HANDLE_TYPE_EVD, "async EVD"},
        {o.sw_evd, DAT_HANDLE_TYPE_EVD, "EVD"},     {o.cr_evd, DAT_HANDLE_TYPE_EVD, "CR EVD"},
        {o.cno, DAT_HANDLE_TYPE_CNO, "CNO"},        {o.pz, DAT_HANDLE_TYPE_PZ, "PZ"},
        {o.lmr, DAT_HANDLE_TYPE_LMR, "LMR"},        {o.rmr, DAT_HANDLE_TYPE_RMR, "RMR"},
        {o.ep, DAT_HANDLE_TYPE_EP, "EP"},           {o.psp, DAT_HANDLE_TYPE_PSP, "PSP"},
        {o.rsp, DAT_HANDLE_TYPE_RSP, "RSP"},
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(c.what);
        if (c.handle == DAT_HANDLE_NULL && (c.type == DAT_HANDLE_TYPE_RMR || c.type == DAT_HANDLE_TYPE_RSP))
            continue; // no RMRs (max_rmrs 0) or no RSP (see ReservedServicePointExists)
        DAT_HANDLE_TYPE type = static_cast<DAT_HANDLE_TYPE>(-1);
        // dat_get_handle_type(3DAT): "discover the type of a DAT Object using its handle".
        EXPECT_DAT_OK(dat_get_handle_type(c.handle, &type));
        EXPECT_EQ(type, c.type);
    }
}

TEST_P(HandlesTest, QueriesReportTheConsumerIaHandle) {
    // Every object reports the IA handle the Consumer got from dat_ia_open.
    const Objects &o = o_;
    DAT_EVD_PARAM evd{};
    ASSERT_DAT_OK(dat_evd_query(o.sw_evd, DAT_EVD_FIELD_IA_HANDLE, &evd));
    EXPECT_EQ(evd.ia_handle, o.ia);
    DAT_CNO_PARAM cno{};
    ASSERT_DAT_OK(dat_cno_query(o.cno, DAT_CNO_FIELD_ALL, &cno));
    EXPECT_EQ(cno.ia_handle, o.ia);
    DAT_PZ_PARAM pz{};
    ASSERT_DAT_OK(dat_pz_query(o.pz, DAT_PZ_FIELD_IA_HANDLE, &pz));
    EXPECT_EQ(pz.ia_handle, o.ia);
    DAT_LMR_PARAM lmr{};
    ASSERT_DAT_OK(dat_lmr_query(o.lmr, DAT_LMR_FIELD_IA_HANDLE, &lmr));
    EXPECT_EQ(lmr.ia_handle, o.ia);
    if (has_rmr_) {
        DAT_RMR_PARAM rmr{};
        ASSERT_DAT_OK(dat_rmr_query(o.rmr, kRmrIaPz, &rmr));
        EXPECT_EQ(rmr.ia_handle, o.ia);
        EXPECT_EQ(rmr.pz_handle, o.pz);
    }
    DAT_EP_PARAM ep{};
    ASSERT_DAT_OK(dat_ep_query(o.ep, DAT_EP_FIELD_ALL, &ep));
    EXPECT_EQ(ep.ia_handle, o.ia);
    EXPECT_EQ(ep.pz_handle, o.pz);
    EXPECT_EQ(ep.recv_evd_handle, o.dto_evd);
    EXPECT_EQ(ep.request_evd_handle, o.dto_evd);
    EXPECT_EQ(ep.connect_evd_handle, o.conn_evd);
    // dat_ep_create(3DAT): "The Endpoint is created in the Unconnected state."
    EXPECT_EQ(ep.ep_state, DAT_EP_STATE_UNCONNECTED);
    DAT_PSP_PARAM psp{};
    ASSERT_DAT_OK(dat_psp_query(o.psp, DAT_PSP_FIELD_ALL, &psp));
    EXPECT_EQ(psp.ia_handle, o.ia);
    EXPECT_EQ(psp.conn_qual, o.psp_qual);
    EXPECT_EQ(psp.evd_handle, o.cr_evd);
    EXPECT_EQ(psp.psp_flags, DAT_PSP_CONSUMER_FLAG);
    if (o.rsp != DAT_HANDLE_NULL) {
        DAT_RSP_PARAM rsp{};
        ASSERT_DAT_OK(dat_rsp_query(o.rsp, DAT_RSP_FIELD_ALL, &rsp));
        EXPECT_EQ(rsp.ia_handle, o.ia);
        EXPECT_EQ(rsp.ep_handle, o.rsp_ep);
        EXPECT_EQ(rsp.evd_handle, o.cr_evd);
    }
}

TEST_P(HandlesTest, NullHandlesAreInvalidHandle) {
    const DAT_HANDLE null = DAT_HANDLE_NULL;
    DAT_EVD_PARAM evd_param{};
    DAT_EVENT ev{};
    DAT_EVENT sw = conformance::software_event(nullptr);
    DAT_COUNT nmore = 0;
    EXPECT_DAT_INVALID_HANDLE(dat_evd_query(null, DAT_EVD_FIELD_ALL, &evd_param), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_free(null), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_post_se(null, &sw), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_dequeue(null, &ev), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_wait(null, 0, 1, &ev, &nmore), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_enable(null), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_disable(null), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_set_unwaitable(null), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_clear_unwaitable(null), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_resize(null, 8), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_modify_cno(null, DAT_HANDLE_NULL), HandleKind::Evd);
    DAT_EP_PARAM ep_param{};
    DAT_EP_STATE state{};
    DAT_BOOLEAN recv_idle{}, req_idle{};
    EXPECT_DAT_INVALID_HANDLE(dat_ep_query(null, DAT_EP_FIELD_ALL, &ep_param), HandleKind::Ep);
    EXPECT_DAT_INVALID_HANDLE(dat_ep_free(null), HandleKind::Ep);
    EXPECT_DAT_INVALID_HANDLE(dat_ep_get_status(null, &state, &recv_idle, &req_idle), HandleKind::Ep);
    DAT_LMR_PARAM lmr_param{};
    EXPECT_DAT_INVALID_HANDLE(dat_lmr_query(null, DAT_LMR_FIELD_ALL, &lmr_param), HandleKind::Lmr);
    EXPECT_DAT_INVALID_HANDLE(dat_lmr_free(null), HandleKind::Lmr);
    DAT_RMR_PARAM rmr_param{};
    EXPECT_DAT_INVALID_HANDLE(dat_rmr_query(null, DAT_RMR_FIELD_ALL, &rmr_param), HandleKind::Rmr);
    EXPECT_DAT_INVALID_HANDLE(dat_rmr_free(null), HandleKind::Rmr);
    DAT_PZ_PARAM pz_param{};
    EXPECT_DAT_INVALID_HANDLE(dat_pz_query(null, DAT_PZ_FIELD_ALL, &pz_param), HandleKind::Pz);
    EXPECT_DAT_INVALID_HANDLE(dat_pz_free(null), HandleKind::Pz);
    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
    EXPECT_DAT_INVALID_HANDLE(dat_rmr_create(null, &rmr), HandleKind::Pz);
    DAT_CNO_PARAM cno_param{};
    DAT_EVD_HANDLE fired = DAT_HANDLE_NULL;
    EXPECT_DAT_INVALID_HANDLE(dat_cno_query(null, DAT_CNO_FIELD_ALL, &cno_param), HandleKind::Cno);
    EXPECT_DAT_INVALID_HANDLE(dat_cno_free(null), HandleKind::Cno);
    EXPECT_DAT_INVALID_HANDLE(dat_cno_wait(null, 0, &fired), HandleKind::Cno);
    EXPECT_DAT_INVALID_HANDLE(dat_cno_modify_agent(null, no_agent()), HandleKind::Cno);
    DAT_PSP_PARAM psp_param{};
    EXPECT_DAT_INVALID_HANDLE(dat_psp_query(null, DAT_PSP_FIELD_ALL, &psp_param), HandleKind::Psp);
    EXPECT_DAT_INVALID_HANDLE(dat_psp_free(null), HandleKind::Psp);
    DAT_RSP_PARAM rsp_param{};
    EXPECT_DAT_INVALID_HANDLE(dat_rsp_query(null, DAT_RSP_FIELD_ALL, &rsp_param), HandleKind::Rsp);
    EXPECT_DAT_INVALID_HANDLE(dat_rsp_free(null), HandleKind::Rsp);
    conformance::IaAttributes attrs;
    EXPECT_DAT_INVALID_HANDLE(attrs.query(null), HandleKind::Ia);
    EXPECT_DAT_INVALID_HANDLE(dat_ia_close(null, DAT_CLOSE_ABRUPT_FLAG), HandleKind::Ia);
    // dat_get_handle_type(3DAT), dat_get/set_consumer_context(3DAT): DAT_INVALID_HANDLE "The
    // dat_handle parameter is invalid."
    DAT_HANDLE_TYPE type{};
    DAT_CONTEXT context{};
    EXPECT_DAT_INVALID_HANDLE(dat_get_handle_type(null, &type), HandleKind::Any);
    EXPECT_DAT_INVALID_HANDLE(dat_get_consumer_context(null, &context), HandleKind::Any);
    EXPECT_DAT_INVALID_HANDLE(dat_set_consumer_context(null, context), HandleKind::Any);
    expect_all_alive();
}

TEST_P(HandlesTest, HandlesOfAnotherTypeAreInvalidHandle) {
    const Objects &o = o_;
    DAT_EVD_PARAM evd_param{};
    DAT_EVENT ev{};
    DAT_EVENT sw = conformance::software_event(nullptr);
    DAT_COUNT nmore = 0;
    // EVD calls given a PZ, CNO, LMR, EP, PSP, RSP, RMR and the Consumer's IA handle.
    EXPECT_DAT_INVALID_HANDLE(dat_evd_query(o.pz, DAT_EVD_FIELD_ALL, &evd_param), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_query(o.cno, DAT_EVD_FIELD_ALL, &evd_param), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_query(o.ia, DAT_EVD_FIELD_ALL, &evd_param), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_post_se(o.ep, &sw), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_dequeue(o.psp, &ev), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_wait(o.lmr, 0, 1, &ev, &nmore), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_enable(o.cno), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_disable(o.rsp_ep), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_set_unwaitable(o.psp), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_clear_unwaitable(o.ep), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_resize(o.pz, 8), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_modify_cno(o.cno, DAT_HANDLE_NULL), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_free(o.lmr), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_free(o.pz), HandleKind::Evd);
    // EP calls given EVDs, an LMR, a PZ.
    DAT_EP_PARAM ep_param{};
    DAT_EP_STATE state{};
    DAT_BOOLEAN recv_idle{}, req_idle{};
    EXPECT_DAT_INVALID_HANDLE(dat_ep_query(o.sw_evd, DAT_EP_FIELD_ALL, &ep_param), HandleKind::Ep);
    EXPECT_DAT_INVALID_HANDLE(dat_ep_get_status(o.lmr, &state, &recv_idle, &req_idle), HandleKind::Ep);
    EXPECT_DAT_INVALID_HANDLE(dat_ep_free(o.pz), HandleKind::Ep);
    EXPECT_DAT_INVALID_HANDLE(dat_ep_free(o.dto_evd), HandleKind::Ep);
    // LMR, RMR, PZ, CNO, PSP, RSP calls given something else.
    DAT_LMR_PARAM lmr_param{};
    EXPECT_DAT_INVALID_HANDLE(dat_lmr_query(o.ep, DAT_LMR_FIELD_ALL, &lmr_param), HandleKind::Lmr);
    EXPECT_DAT_INVALID_HANDLE(dat_lmr_query(o.psp, DAT_LMR_FIELD_ALL, &lmr_param), HandleKind::Lmr);
    EXPECT_DAT_INVALID_HANDLE(dat_lmr_free(o.sw_evd), HandleKind::Lmr);
    if (has_rmr_) { // RMR calls of an IA without RMRs are not about handles
        DAT_RMR_PARAM rmr_param{};
        EXPECT_DAT_INVALID_HANDLE(dat_rmr_query(o.lmr, DAT_RMR_FIELD_ALL, &rmr_param), HandleKind::Rmr);
        EXPECT_DAT_INVALID_HANDLE(dat_rmr_free(o.lmr), HandleKind::Rmr);
        DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
        EXPECT_DAT_INVALID_HANDLE(dat_rmr_create(o.lmr, &rmr), HandleKind::Pz);
    }
    DAT_PZ_PARAM pz_param{};
    EXPECT_DAT_INVALID_HANDLE(dat_pz_query(o.sw_evd, DAT_PZ_FIELD_ALL, &pz_param), HandleKind::Pz);
    EXPECT_DAT_INVALID_HANDLE(dat_pz_query(o.ia, DAT_PZ_FIELD_ALL, &pz_param), HandleKind::Pz);
    EXPECT_DAT_INVALID_HANDLE(dat_pz_free(o.lmr), HandleKind::Pz);
    EXPECT_DAT_INVALID_HANDLE(dat_pz_free(o.async_evd), HandleKind::Pz);
    DAT_CNO_PARAM cno_param{};
    DAT_EVD_HANDLE fired = DAT_HANDLE_NULL;
    EXPECT_DAT_INVALID_HANDLE(dat_cno_query(o.sw_evd, DAT_CNO_FIELD_ALL, &cno_param), HandleKind::Cno);
    EXPECT_DAT_INVALID_HANDLE(dat_cno_wait(o.sw_evd, 0, &fired), HandleKind::Cno);
    EXPECT_DAT_INVALID_HANDLE(dat_cno_modify_agent(o.pz, no_agent()), HandleKind::Cno);
    EXPECT_DAT_INVALID_HANDLE(dat_cno_free(o.pz), HandleKind::Cno);
    DAT_PSP_PARAM psp_param{};
    EXPECT_DAT_INVALID_HANDLE(dat_psp_query(o.lmr, DAT_PSP_FIELD_ALL, &psp_param), HandleKind::Psp);
    if (o.rsp != DAT_HANDLE_NULL) {
        EXPECT_DAT_INVALID_HANDLE(dat_psp_query(o.rsp, DAT_PSP_FIELD_ALL, &psp_param), HandleKind::Psp);
    }
    EXPECT_DAT_INVALID_HANDLE(dat_psp_query(o.pz, DAT_PSP_FIELD_ALL, &psp_param), HandleKind::Psp);
    EXPECT_DAT_INVALID_HANDLE(dat_psp_free(o.cr_evd), HandleKind::Psp);
    if (o.rsp != DAT_HANDLE_NULL) { // see ReservedServicePointExists
        DAT_RSP_PARAM rsp_param{};
        EXPECT_DAT_INVALID_HANDLE(dat_rsp_query(o.psp, DAT_RSP_FIELD_ALL, &rsp_param), HandleKind::Rsp);
        EXPECT_DAT_INVALID_HANDLE(dat_rsp_free(o.ep), HandleKind::Rsp);
    }
    // IA calls given a provider object.
    conformance::IaAttributes attrs;
    EXPECT_DAT_INVALID_HANDLE(attrs.query(o.pz), HandleKind::Ia);
    EXPECT_DAT_INVALID_HANDLE(dat_ia_close(o.sw_evd, DAT_CLOSE_ABRUPT_FLAG), HandleKind::Ia);
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    EXPECT_DAT_INVALID_HANDLE(dat_pz_create(o.pz, &pz), HandleKind::Ia);
    // Handle arguments after the first: dat_ep_create with an LMR as PZ and a PZ as EVD.
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    EXPECT_DAT_INVALID_HANDLE(dat_ep_create(o.ia, o.lmr, DAT_HANDLE_NULL, DAT_HANDLE_NULL,
                                            DAT_HANDLE_NULL, nullptr, &ep),
                              HandleKind::Pz);
    EXPECT_DAT_INVALID_HANDLE(dat_ep_create(o.ia, o.pz, o.pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL,
                                            nullptr, &ep),
                              HandleKind::Evd);
    // dat_psp_create(3DAT): DAT_INVALID_HANDLE "The ia_handle or evd_handle parameter is invalid."
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    DAT_CONN_QUAL qual = 0;
    EXPECT_DAT_INVALID_HANDLE(dat_psp_create_any(o.ia, &qual, o.pz, DAT_PSP_CONSUMER_FLAG, &psp),
                              HandleKind::Evd);
    // Every refused call left every object alone.
    expect_all_alive();
}

TEST_P(HandlesTest, HandlesOfDestroyedObjectsAreInvalidHandle) {
    const Objects &o = o_;
    // A second object of each kind, destroyed; then every call on its handle fails.
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    DAT_CONN_QUAL qual = 0;
    ASSERT_DAT_OK(dat_evd_create(o.ia, 4, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd));
    ASSERT_DAT_OK(dat_cno_create(o.ia, no_agent(), &cno));
    ASSERT_DAT_OK(dat_pz_create(o.ia, &pz));
    ASSERT_DAT_OK(create_lmr(o.ia, pz, o_.buffer.data(), 4096, &lmr));
    if (has_rmr_)
        ASSERT_DAT_OK(dat_rmr_create(pz, &rmr));
    ASSERT_DAT_OK(dat_ep_create(o.ia, pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL, DAT_HANDLE_NULL, nullptr, &ep));
    ASSERT_DAT_OK(dat_psp_create_any(o.ia, &qual, o.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp));
    ASSERT_DAT_OK(dat_psp_free(psp));
    ASSERT_DAT_OK(dat_ep_free(ep));
    if (has_rmr_)
        ASSERT_DAT_OK(dat_rmr_free(rmr));
    ASSERT_DAT_OK(dat_lmr_free(lmr));
    ASSERT_DAT_OK(dat_pz_free(pz));
    ASSERT_DAT_OK(dat_cno_free(cno));
    ASSERT_DAT_OK(dat_evd_free(evd));

    DAT_EVD_PARAM evd_param{};
    DAT_EVENT ev{};
    DAT_EVENT sw = conformance::software_event(nullptr);
    DAT_COUNT nmore = 0;
    // dat_evd_free(3DAT): "Use of the handle of the destroyed Event Dispatcher in any
    // consequent operation fails."
    EXPECT_DAT_INVALID_HANDLE(dat_evd_query(evd, DAT_EVD_FIELD_ALL, &evd_param), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_post_se(evd, &sw), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_dequeue(evd, &ev), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_wait(evd, 0, 1, &ev, &nmore), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_free(evd), HandleKind::Evd);
    // dat_psp_free(3DAT): "... in any consequent operation fails."
    DAT_PSP_PARAM psp_param{};
    EXPECT_DAT_INVALID_HANDLE(dat_psp_query(psp, DAT_PSP_FIELD_ALL, &psp_param), HandleKind::Psp);
    EXPECT_DAT_INVALID_HANDLE(dat_psp_free(psp), HandleKind::Psp);
    // A destroyed CNO is no CNO (dat_cno_query(3DAT): "The cno_handle parameter is invalid").
    DAT_CNO_PARAM cno_param{};
    DAT_EVD_HANDLE fired = DAT_HANDLE_NULL;
    EXPECT_DAT_INVALID_HANDLE(dat_cno_query(cno, DAT_CNO_FIELD_ALL, &cno_param), HandleKind::Cno);
    EXPECT_DAT_INVALID_HANDLE(dat_cno_wait(cno, 0, &fired), HandleKind::Cno);
    EXPECT_DAT_INVALID_HANDLE(dat_cno_free(cno), HandleKind::Cno);
    // dat_pz_free(3DAT), dat_lmr_free(3DAT), dat_ep_free(3DAT), dat_rmr_free(3DAT): use of the
    // destroyed handle "in any subsequent operation except for dat_X_free() fails".
    DAT_PZ_PARAM pz_param{};
    EXPECT_DAT_INVALID_HANDLE(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &pz_param), HandleKind::Pz);
    if (has_rmr_) {
        DAT_RMR_HANDLE rmr2 = DAT_HANDLE_NULL;
        EXPECT_DAT_INVALID_HANDLE(dat_rmr_create(pz, &rmr2), HandleKind::Pz);
    }
    DAT_LMR_PARAM lmr_param{};
    EXPECT_DAT_INVALID_HANDLE(dat_lmr_query(lmr, DAT_LMR_FIELD_ALL, &lmr_param), HandleKind::Lmr);
    DAT_RMR_PARAM rmr_param{};
    if (has_rmr_) {
        EXPECT_DAT_INVALID_HANDLE(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &rmr_param), HandleKind::Rmr);
    }
    DAT_EP_PARAM ep_param{};
    DAT_EP_STATE state{};
    DAT_BOOLEAN recv_idle{}, req_idle{};
    EXPECT_DAT_INVALID_HANDLE(dat_ep_query(ep, DAT_EP_FIELD_ALL, &ep_param), HandleKind::Ep);
    EXPECT_DAT_INVALID_HANDLE(dat_ep_get_status(ep, &state, &recv_idle, &req_idle), HandleKind::Ep);
    // The exempted frees may fail or do nothing, but nothing else.
    for (DAT_RETURN r : {dat_pz_free(pz), dat_lmr_free(lmr), dat_ep_free(ep),
                         has_rmr_ ? dat_rmr_free(rmr) : DAT_RETURN(DAT_SUCCESS)})
        EXPECT_TRUE(r == DAT_SUCCESS || DAT_GET_TYPE(r) == DAT_INVALID_HANDLE) << conformance::ret_text(r);
    // The generic calls do not know destroyed objects either.
    DAT_HANDLE_TYPE type{};
    DAT_CONTEXT context{};
    for (DAT_HANDLE h : {DAT_HANDLE(evd), DAT_HANDLE(cno), DAT_HANDLE(pz), DAT_HANDLE(lmr),
                         DAT_HANDLE(ep), DAT_HANDLE(psp)}) {
        EXPECT_DAT_INVALID_HANDLE(dat_get_handle_type(h, &type), HandleKind::Any);
        EXPECT_DAT_INVALID_HANDLE(dat_get_consumer_context(h, &context), HandleKind::Any);
        EXPECT_DAT_INVALID_HANDLE(dat_set_consumer_context(h, context), HandleKind::Any);
    }
    expect_all_alive();
}

TEST_P(HandlesTest, HandlesOfAClosedIaAreInvalidHandle) {
    Objects &o = o_;
    DAT_IA_HANDLE ia = o.ia;
    ASSERT_DAT_OK(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG));
    o.ia = DAT_HANDLE_NULL;
    conformance::IaAttributes attrs;
    EXPECT_DAT_INVALID_HANDLE(attrs.query(ia), HandleKind::Ia);
    DAT_HANDLE_TYPE type{};
    EXPECT_DAT_INVALID_HANDLE(dat_get_handle_type(ia, &type), HandleKind::Any);
    // dat_ia_close(3DAT): the abrupt close destroyed every object of the IA.
    for (DAT_HANDLE h : {DAT_HANDLE(o.sw_evd), DAT_HANDLE(o.async_evd), DAT_HANDLE(o.cno),
                         DAT_HANDLE(o.pz), DAT_HANDLE(o.lmr), DAT_HANDLE(o.ep),
                         DAT_HANDLE(o.psp)})
        EXPECT_DAT_INVALID_HANDLE(dat_get_handle_type(h, &type), HandleKind::Any);
    DAT_PSP_PARAM psp_param{};
    EXPECT_DAT_INVALID_HANDLE(dat_psp_query(o.psp, DAT_PSP_FIELD_ALL, &psp_param), HandleKind::Psp);
    if (o.rsp != DAT_HANDLE_NULL) {
        DAT_RSP_PARAM rsp_param{};
        EXPECT_DAT_INVALID_HANDLE(dat_rsp_query(o.rsp, DAT_RSP_FIELD_ALL, &rsp_param), HandleKind::Rsp);
    }
}

TEST_P(HandlesTest, ConsumerContextRoundTripsOnEveryHandle) {
    const Objects &o = o_;
    std::vector<DAT_HANDLE> handles = {o.ia, o.async_evd, o.sw_evd, o.cno, o.pz, o.lmr, o.ep, o.psp};
    if (has_rmr_)
        handles.push_back(o.rmr);
    if (o.rsp != DAT_HANDLE_NULL)
        handles.push_back(o.rsp);
    std::uint64_t n = 0;
    for (DAT_HANDLE h : handles) {
        SCOPED_TRACE(::testing::Message() << "handle #" << n);
        DAT_CONTEXT set{};
        set.as_64 = 0x1234567800000000ull + n++;
        ASSERT_DAT_OK(dat_set_consumer_context(h, set));
        DAT_CONTEXT got{};
        ASSERT_DAT_OK(dat_get_consumer_context(h, &got));
        EXPECT_EQ(got.as_64, set.as_64);
    }
    // Each handle keeps its own context (dat_set_consumer_context(3DAT): "Only a single Consumer
    // context is provided for any dat_handle").
    n = 0;
    for (DAT_HANDLE h : handles) {
        DAT_CONTEXT got{};
        ASSERT_DAT_OK(dat_get_consumer_context(h, &got));
        EXPECT_EQ(got.as_64, 0x1234567800000000ull + n++);
    }
    // "If there is a previous Consumer context associated with the specified handle, the new
    // context replaces the old one. The Consumer can disassociate the existing context by
    // providing a NULL pointer for the context."
    int marker = 0;
    for (DAT_HANDLE h : handles) {
        DAT_CONTEXT ptr{};
        ptr.as_ptr = &marker;
        ASSERT_DAT_OK(dat_set_consumer_context(h, ptr));
        DAT_CONTEXT got{};
        ASSERT_DAT_OK(dat_get_consumer_context(h, &got));
        EXPECT_EQ(got.as_ptr, &marker);
        DAT_CONTEXT none{};
        none.as_ptr = nullptr;
        ASSERT_DAT_OK(dat_set_consumer_context(h, none));
        got.as_ptr = &marker;
        ASSERT_DAT_OK(dat_get_consumer_context(h, &got));
        EXPECT_EQ(got.as_ptr, nullptr);
    }
}

TEST_P(HandlesTest, ConsumerContextsOfTwoIasAreIndependent) {
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_IA_HANDLE other = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_ia_open(conformance::ia_name_ptr(GetParam()), 8, &async, &other));
    DAT_CONTEXT a{}, b{};
    a.as_64 = 111;
    b.as_64 = 222;
    EXPECT_DAT_OK(dat_set_consumer_context(o_.ia, a));
    EXPECT_DAT_OK(dat_set_consumer_context(other, b));
    DAT_CONTEXT got{};
    EXPECT_DAT_OK(dat_get_consumer_context(o_.ia, &got));
    EXPECT_EQ(got.as_64, 111u);
    EXPECT_DAT_OK(dat_get_consumer_context(other, &got));
    EXPECT_EQ(got.as_64, 222u);
    EXPECT_DAT_OK(dat_ia_close(other, DAT_CLOSE_ABRUPT_FLAG));
}

INSTANTIATE_OVER_IAS(HandlesTest);

} // namespace
