// SPDX-License-Identifier: BSD-3-Clause
// Handle checking across the API: NULL handles, handles of another type and handles of
// destroyed objects must give DAT_INVALID_HANDLE (every page lists it for its handle
// argument) and never crash; dat_get_handle_type(3DAT); dat_set_consumer_context(3DAT) /
// dat_get_consumer_context(3DAT). Local objects only (a PSP and an RSP listen, nothing
// connects).
#include "conformance.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using conformance::HandleKind;
using conformance::no_agent;

constexpr auto kRmrIaPz = static_cast<DAT_RMR_PARAM_MASK>(DAT_RMR_FIELD_IA_HANDLE | DAT_RMR_FIELD_PZ_HANDLE);

// The IA (its async EVD too) and one live object of every other kind on it.
struct Objects : conformance::LocalObjects {
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
};

class HandlesTest : public conformance::ConformanceTest {
protected:
    void SetUp() override {
        ConformanceTest::SetUp();
        ASSERT_DAT_OK(dat_ia_open(conformance::ia_name_ptr(GetParam()), 8, &o_.async_evd, &o_.ia));
        // Without RMRs or an RSP (see RemoteMemoryRegionsExist, ReservedServicePointExists)
        // the other tests leave them out.
        ASSERT_NO_FATAL_FAILURE(o_.create(o_.ia));
        has_rmr_ = o_.has_rmr;
    }
    void TearDown() override {
        if (o_.ia != DAT_HANDLE_NULL)
            dat_ia_close(o_.ia, DAT_CLOSE_ABRUPT_FLAG);
        ConformanceTest::TearDown();
    }

    // Every object still answers its query: nothing was destroyed or damaged by a refused call.
    void expect_all_alive() {
        EXPECT_DAT_OK(conformance::query_as(HandleKind::Ia, o_.ia));
        EXPECT_DAT_OK(conformance::query_as(HandleKind::Evd, o_.async_evd));
        for (const auto &x : o_.all()) {
            SCOPED_TRACE(x.what);
            EXPECT_DAT_OK(conformance::query_as(x.kind, x.handle));
        }
    }

    Objects o_;
    bool has_rmr_ = false;
};

TEST_P(HandlesTest, ReservedServicePointExists) {
    // dat_rsp_create(3DAT) on an Unconnected EP and an unused connection qualifier.
    SKIP_IF_NOT_PROVIDED(o_.rsp_create, conformance::kGapRsp);
    EXPECT_EQ(o_.rsp_create, DAT_SUCCESS) << "dat_rsp_create -> " << conformance::ret_text(o_.rsp_create);
}

TEST_P(HandlesTest, RemoteMemoryRegionsExist) {
    // The RMR checks of the other tests run only when the IA has RMRs: every IA must have them
    // (dat_ia_query's max_rmrs), or those checks would pass without running.
    ASSERT_TRUE(has_rmr_) << "the IA reports max_rmrs 0";
    DAT_RMR_PARAM p{};
    EXPECT_DAT_OK(dat_rmr_query(o_.rmr, kRmrIaPz, &p));
}

TEST_P(HandlesTest, GetHandleTypeNamesEachObject) {
    std::vector<conformance::LocalObjects::Object> objects = o_.all();
    objects.push_back({o_.ia, HandleKind::Ia, "IA"});
    objects.push_back({o_.async_evd, HandleKind::Evd, "async EVD"});
    for (const auto &x : objects) {
        SCOPED_TRACE(x.what);
        DAT_HANDLE_TYPE type = static_cast<DAT_HANDLE_TYPE>(-1);
        // dat_get_handle_type(3DAT): "discover the type of a DAT Object using its handle".
        EXPECT_DAT_OK(dat_get_handle_type(x.handle, &type));
        EXPECT_EQ(type, conformance::handle_type(x.kind));
    }
}

TEST_P(HandlesTest, QueriesReportTheConsumerIaHandle) {
    // Every object reports the IA handle the Consumer got from dat_ia_open.
    const Objects &o = o_;
    for (const auto &x : o.all()) {
        SCOPED_TRACE(x.what);
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
        ASSERT_DAT_OK(conformance::query_as(x.kind, x.handle, &ia));
        EXPECT_EQ(ia, o.ia);
    }
    if (has_rmr_) {
        DAT_RMR_PARAM rmr{};
        ASSERT_DAT_OK(dat_rmr_query(o.rmr, kRmrIaPz, &rmr));
        EXPECT_EQ(rmr.pz_handle, o.pz);
    }
    DAT_EP_PARAM ep{};
    ASSERT_DAT_OK(dat_ep_query(o.ep, DAT_EP_FIELD_ALL, &ep));
    EXPECT_EQ(ep.pz_handle, o.pz);
    EXPECT_EQ(ep.recv_evd_handle, o.dto_evd);
    EXPECT_EQ(ep.request_evd_handle, o.dto_evd);
    EXPECT_EQ(ep.connect_evd_handle, o.conn_evd);
    // dat_ep_create(3DAT): "The Endpoint is created in the Unconnected state."
    EXPECT_EQ(ep.ep_state, DAT_EP_STATE_UNCONNECTED);
    DAT_PSP_PARAM psp{};
    ASSERT_DAT_OK(dat_psp_query(o.psp, DAT_PSP_FIELD_ALL, &psp));
    EXPECT_EQ(psp.conn_qual, o.psp_qual);
    EXPECT_EQ(psp.evd_handle, o.cr_evd);
    EXPECT_EQ(psp.psp_flags, DAT_PSP_CONSUMER_FLAG);
    if (o.rsp != DAT_HANDLE_NULL) {
        DAT_RSP_PARAM rsp{};
        ASSERT_DAT_OK(dat_rsp_query(o.rsp, DAT_RSP_FIELD_ALL, &rsp));
        EXPECT_EQ(rsp.ep_handle, o.rsp_ep);
        EXPECT_EQ(rsp.evd_handle, o.cr_evd);
    }
}

TEST_P(HandlesTest, NullHandlesAreInvalidHandle) {
    const DAT_HANDLE null = DAT_HANDLE_NULL;
    // Every query and every free (dat_ia_query and dat_ia_close for the IA; for
    // HandleKind::Any the generic dat_get_handle_type).
    for (HandleKind kind : {HandleKind::Ia, HandleKind::Evd, HandleKind::Ep, HandleKind::Lmr, HandleKind::Rmr,
                            HandleKind::Pz, HandleKind::Psp, HandleKind::Rsp, HandleKind::Cno, HandleKind::Any}) {
        SCOPED_TRACE(::testing::Message() << "handle type " << conformance::handle_type(kind));
        EXPECT_DAT_INVALID_HANDLE(conformance::query_as(kind, null), kind);
        if (kind != HandleKind::Any) {
            EXPECT_DAT_INVALID_HANDLE(conformance::free_as(kind, null), kind);
        }
    }
    // The other calls on a handle, by object.
    DAT_EVENT ev{};
    DAT_EVENT sw = conformance::software_event(nullptr);
    DAT_COUNT nmore = 0;
    EXPECT_DAT_INVALID_HANDLE(dat_evd_post_se(null, &sw), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_dequeue(null, &ev), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_wait(null, 0, 1, &ev, &nmore), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_enable(null), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_disable(null), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_set_unwaitable(null), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_clear_unwaitable(null), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_resize(null, 8), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_evd_modify_cno(null, DAT_HANDLE_NULL), HandleKind::Evd);
    DAT_EP_STATE state{};
    DAT_BOOLEAN recv_idle{}, req_idle{};
    EXPECT_DAT_INVALID_HANDLE(dat_ep_get_status(null, &state, &recv_idle, &req_idle), HandleKind::Ep);
    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
    EXPECT_DAT_INVALID_HANDLE(dat_rmr_create(null, &rmr), HandleKind::Pz);
    DAT_EVD_HANDLE fired = DAT_HANDLE_NULL;
    EXPECT_DAT_INVALID_HANDLE(dat_cno_wait(null, 0, &fired), HandleKind::Cno);
    EXPECT_DAT_INVALID_HANDLE(dat_cno_modify_agent(null, no_agent()), HandleKind::Cno);
    // dat_get_handle_type(3DAT), dat_get/set_consumer_context(3DAT): DAT_INVALID_HANDLE "The
    // dat_handle parameter is invalid."
    DAT_CONTEXT context{};
    EXPECT_DAT_INVALID_HANDLE(dat_get_consumer_context(null, &context), HandleKind::Any);
    EXPECT_DAT_INVALID_HANDLE(dat_set_consumer_context(null, context), HandleKind::Any);
    expect_all_alive();
}

// A handle is a pointer the consumer may have made up: one into memory that
// is not mapped (never, or no longer), or whose first word runs into such
// memory, is as invalid as any other (OFED's library faults on it).
TEST_P(HandlesTest, HandlesIntoUnmappedMemoryAreInvalidHandle) {
    const long page = ::sysconf(_SC_PAGESIZE);
    void *m = ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    auto *first = static_cast<char *>(m);
    std::memset(first, 0, 2 * page);
    // Refused while mapped (and holding no object), then unmapped: a
    // check that remembered the page as readable would fault below.
    for (HandleKind kind : {HandleKind::Pz, HandleKind::Evd, HandleKind::Any})
        EXPECT_DAT_INVALID_HANDLE(conformance::query_as(kind, static_cast<DAT_HANDLE>(first + page)), kind);
    ASSERT_EQ(::munmap(first + page, page), 0);
    for (char *at : {first + page, first + page + 0x128, first + page - 4}) {
        SCOPED_TRACE(::testing::Message() << "handle " << static_cast<void *>(at) << " (page at " << m << ")");
        const auto h = static_cast<DAT_HANDLE>(at);
        for (HandleKind kind : {HandleKind::Evd, HandleKind::Ep, HandleKind::Lmr, HandleKind::Rmr, HandleKind::Pz,
                                HandleKind::Psp, HandleKind::Rsp, HandleKind::Cno, HandleKind::Any}) {
            SCOPED_TRACE(::testing::Message() << "handle type " << conformance::handle_type(kind));
            EXPECT_DAT_INVALID_HANDLE(conformance::query_as(kind, h), kind);
            if (kind != HandleKind::Any) {
                EXPECT_DAT_INVALID_HANDLE(conformance::free_as(kind, h), kind);
            }
        }
        DAT_EVENT ev{};
        EXPECT_DAT_INVALID_HANDLE(dat_evd_dequeue(h, &ev), HandleKind::Evd);
        DAT_LMR_TRIPLET seg{};
        EXPECT_DAT_INVALID_HANDLE(dat_ep_post_send(h, 0, &seg, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG),
                                  HandleKind::Ep);
        EXPECT_DAT_INVALID_HANDLE(dat_ep_post_recv(h, 0, &seg, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG),
                                  HandleKind::Ep);
        DAT_CONTEXT context{};
        EXPECT_DAT_INVALID_HANDLE(dat_get_consumer_context(h, &context), HandleKind::Any);
        EXPECT_DAT_INVALID_HANDLE(dat_set_consumer_context(h, context), HandleKind::Any);
    }
    ::munmap(first, page);
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
    EXPECT_DAT_INVALID_HANDLE(
        dat_ep_create(o.ia, o.lmr, DAT_HANDLE_NULL, DAT_HANDLE_NULL, DAT_HANDLE_NULL, nullptr, &ep), HandleKind::Pz);
    EXPECT_DAT_INVALID_HANDLE(dat_ep_create(o.ia, o.pz, o.pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL, nullptr, &ep),
                              HandleKind::Evd);
    // dat_psp_create(3DAT): DAT_INVALID_HANDLE "The ia_handle or evd_handle parameter is invalid."
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    DAT_CONN_QUAL qual = 0;
    EXPECT_DAT_INVALID_HANDLE(dat_psp_create_any(o.ia, &qual, o.pz, DAT_PSP_CONSUMER_FLAG, &psp), HandleKind::Evd);
    // Every refused call left every object alone.
    expect_all_alive();
}

TEST_P(HandlesTest, HandlesOfDestroyedObjectsAreInvalidHandle) {
    // A second object of each kind, destroyed; then every call on its handle fails.
    conformance::LocalObjects dead;
    ASSERT_NO_FATAL_FAILURE(dead.create(o_.ia));
    ASSERT_NO_FATAL_FAILURE(dead.destroy());
    const DAT_EVD_HANDLE evd = dead.sw_evd;
    const DAT_CNO_HANDLE cno = dead.cno;
    const DAT_PZ_HANDLE pz = dead.pz;
    const DAT_LMR_HANDLE lmr = dead.lmr;
    const DAT_RMR_HANDLE rmr = dead.rmr;
    const DAT_EP_HANDLE ep = dead.ep;
    const DAT_PSP_HANDLE psp = dead.psp;

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
    if (has_rmr_) {
        DAT_RMR_HANDLE rmr2 = DAT_HANDLE_NULL;
        EXPECT_DAT_INVALID_HANDLE(dat_rmr_create(pz, &rmr2), HandleKind::Pz);
    }
    DAT_EP_STATE state{};
    DAT_BOOLEAN recv_idle{}, req_idle{};
    EXPECT_DAT_INVALID_HANDLE(dat_ep_get_status(ep, &state, &recv_idle, &req_idle), HandleKind::Ep);
    // The exempted frees may fail or do nothing, but nothing else.
    for (DAT_RETURN r :
         {dat_pz_free(pz), dat_lmr_free(lmr), dat_ep_free(ep), has_rmr_ ? dat_rmr_free(rmr) : DAT_RETURN(DAT_SUCCESS)})
        EXPECT_TRUE(r == DAT_SUCCESS || DAT_GET_TYPE(r) == DAT_INVALID_HANDLE) << conformance::ret_text(r);
    // dat_X_free(3DAT): use of the destroyed handle "in any subsequent operation except for
    // dat_X_free() fails" -- its query, and the generic calls, do not know it either.
    DAT_CONTEXT context{};
    for (const auto &x : dead.all()) {
        SCOPED_TRACE(x.what);
        EXPECT_DAT_INVALID_HANDLE(conformance::query_as(x.kind, x.handle), x.kind);
        EXPECT_DAT_INVALID_HANDLE(conformance::query_as(HandleKind::Any, x.handle), HandleKind::Any);
        EXPECT_DAT_INVALID_HANDLE(dat_get_consumer_context(x.handle, &context), HandleKind::Any);
        EXPECT_DAT_INVALID_HANDLE(dat_set_consumer_context(x.handle, context), HandleKind::Any);
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
    EXPECT_DAT_INVALID_HANDLE(conformance::query_as(HandleKind::Any, ia), HandleKind::Any);
    // dat_ia_close(3DAT): the abrupt close destroyed every object of the IA.
    EXPECT_DAT_INVALID_HANDLE(conformance::query_as(HandleKind::Any, o.async_evd), HandleKind::Any);
    for (const auto &x : o.all()) {
        SCOPED_TRACE(x.what);
        EXPECT_DAT_INVALID_HANDLE(conformance::query_as(HandleKind::Any, x.handle), HandleKind::Any);
        EXPECT_DAT_INVALID_HANDLE(conformance::query_as(x.kind, x.handle), x.kind);
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
