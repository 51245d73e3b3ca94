// SPDX-License-Identifier: BSD-3-Clause
// Shared receive queues over real connections: two client Endpoints feed
// one server SRQ; every dat_srq_* call and its documented error returns;
// the SRQ low watermark; dat_ep_create_with_srq; dat_ep_recv_query and
// dat_ep_set_watermark on Endpoints with and without an SRQ; what a
// disconnect, dat_srq_free and dat_ia_close do to the SRQ's receives.
//
// The asynchronous events of SRQs and watermarks carry the reasons DAT 2.0
// gives them (DAT_SRQ_LOW_WATERMARK_EVENT with the SRQ handle,
// DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT with the EP handle); DAT defines no
// event number for them, and the implementation uses
// DAT_ASYNC_ERROR_EP_BROKEN as OFED's providers do (kSrqEvent below).
#include "connected.hpp"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace conformance;

namespace {

constexpr DAT_EVENT_NUMBER kSrqEvent = DAT_ASYNC_ERROR_EP_BROKEN;
constexpr size_t kMsg = 256; // bytes per receive buffer

// Connected server and client, and the objects a test adds, freed after it.
class SrqSuite : public ConnectedTest {
protected:
    void SetUp() override {
        ConnectedTest::SetUp();
        if (HasFatalFailure() || IsSkipped())
            return;
        IaAttributes attrs;
        ASSERT_DAT_OK(attrs.query(server.ia.ia));
        ia_attr = attrs.ia;
        srq_supported = attrs.provider().srq_supported == DAT_TRUE;
        pz_difference = attrs.provider().srq_ep_pz_difference_supported == DAT_TRUE;
    }

    void TearDown() override {
        for (DAT_EP_HANDLE ep : eps)
            dat_ep_free(ep);
        for (DAT_SRQ_HANDLE srq : srqs)
            dat_srq_free(srq);
        for (DAT_EVD_HANDLE evd : evds)
            dat_evd_free(evd);
        ConnectedTest::TearDown();
    }

    DAT_SRQ_HANDLE make_srq(DAT_COUNT max_recv_dtos, DAT_COUNT low_watermark = DAT_SRQ_LW_DEFAULT) {
        DAT_SRQ_ATTR a{max_recv_dtos, 1, low_watermark};
        DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
        EXPECT_DAT_OK(dat_srq_create(server.ia.ia, server.ia.pz, &a, &srq));
        if (srq != DAT_HANDLE_NULL)
            srqs.push_back(srq);
        return srq;
    }
    DAT_RETURN free_srq(DAT_SRQ_HANDLE srq) {
        DAT_RETURN r = dat_srq_free(srq);
        if (r == DAT_SUCCESS)
            srqs.erase(std::remove(srqs.begin(), srqs.end(), srq), srqs.end());
        return r;
    }
    // A server EP that takes its receives from `srq`, completing them on `recv_evd`.
    DAT_EP_HANDLE make_srq_ep(DAT_SRQ_HANDLE srq, DAT_EVD_HANDLE recv_evd) {
        DAT_EP_ATTR a = suite_ep_attr(server.ia.ia);
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        EXPECT_DAT_OK(dat_ep_create_with_srq(server.ia.ia, server.ia.pz, recv_evd, server.req_evd, server.conn_evd, srq,
                                             &a, &ep));
        if (ep != DAT_HANDLE_NULL)
            eps.push_back(ep);
        return ep;
    }
    // Another client EP on the client's EVDs.
    DAT_EP_HANDLE make_client_ep() {
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        EXPECT_DAT_OK(client.create_ep_on(&ep, client.recv_evd, client.req_evd, client.conn_evd));
        if (ep != DAT_HANDLE_NULL)
            eps.push_back(ep);
        return ep;
    }
    DAT_RETURN free_ep(DAT_EP_HANDLE ep) {
        DAT_RETURN r = dat_ep_free(ep);
        if (r == DAT_SUCCESS)
            eps.erase(std::remove(eps.begin(), eps.end(), ep), eps.end());
        return r;
    }
    DAT_EVD_HANDLE make_dto_evd(DAT_IA_HANDLE ia) {
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        EXPECT_DAT_OK(dat_evd_create(ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &evd));
        if (evd != DAT_HANDLE_NULL)
            evds.push_back(evd);
        return evd;
    }

    // Posts receive buffers [first, first + n) of `b` (kMsg bytes each) to
    // the SRQ with their index as cookie.
    void post_srq(DAT_SRQ_HANDLE srq, const Buffer &b, int first, int n) {
        for (int i = first; i < first + n; ++i) {
            DAT_LMR_TRIPLET t = b.iov(kMsg * static_cast<size_t>(i), kMsg);
            ASSERT_DAT_OK(dat_srq_post_recv(srq, 1, &t, cookie(static_cast<DAT_UINT64>(i))));
        }
    }

    // Client EP `cep` connects to the server's PSP; the server accepts on `sep`.
    void connect_eps(DAT_EP_HANDLE cep, DAT_EP_HANDLE sep) {
        ASSERT_DAT_OK(connect_ep(cep, server_addr.ptr(), port));
        DAT_CR_HANDLE cr = server_wait_cr();
        ASSERT_NE(cr, DAT_HANDLE_NULL);
        ASSERT_DAT_OK(dat_cr_accept(cr, sep, 0, nullptr));
        DAT_EVENT ev{};
        ASSERT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, &ev));
        EXPECT_EQ(ev.event_data.connect_event_data.ep_handle, sep);
        ASSERT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, &ev));
        EXPECT_EQ(ev.event_data.connect_event_data.ep_handle, cep);
    }

    // `rounds` server buffers of kMsg in `rb`, an SRQ as deep, and an EP on
    // it (recv EVD server.recv_evd) that client.ep connects to.
    void connect_to_srq_of(int rounds, Buffer &rb, DAT_SRQ_HANDLE &srq) {
        ASSERT_DAT_OK(server.register_buffer(rb, static_cast<size_t>(rounds) * kMsg));
        srq = make_srq(rounds);
        DAT_EP_HANDLE sep = make_srq_ep(srq, server.recv_evd);
        ASSERT_NO_FATAL_FAILURE(connect_eps(client.ep, sep));
    }

    // Sends `text` (with its NUL) from `cep` out of slot `slot` of `sb`,
    // and waits for the send's completion.
    void send_text(DAT_EP_HANDLE cep, Buffer &sb, size_t slot, const std::string &text) {
        ASSERT_LT(text.size(), kMsg);
        std::memcpy(sb.data + slot * kMsg, text.c_str(), text.size() + 1);
        DAT_LMR_TRIPLET t = sb.iov(slot * kMsg, text.size() + 1);
        const DAT_UINT64 ck = 0x5000 + slot;
        ASSERT_DAT_OK(dat_ep_post_send(cep, 1, &t, cookie(ck), DAT_COMPLETION_DEFAULT_FLAG));
        ASSERT_TRUE(wait_dto_ok(client.req_evd, ck));
    }

    // The next receive completion on `evd`: successful, of a buffer of `rb`;
    // returns the text it carries and the EP that took it.
    void receive_text(DAT_EVD_HANDLE evd, const Buffer &rb, std::string *text, DAT_EP_HANDLE *ep,
                      DAT_UINT64 *ck = nullptr) {
        DAT_EVENT ev{};
        ASSERT_TRUE(wait_dto(evd, &ev));
        const auto &d = ev.event_data.dto_completion_event_data;
        ASSERT_EQ(d.status, DAT_DTO_SUCCESS) << event_text(ev);
        EXPECT_EQ(d.operation, DAT_DTO_RECEIVE);
        ASSERT_LT(d.user_cookie.as_64, rb.size / kMsg) << "a cookie that was never posted";
        const char *at = reinterpret_cast<const char *>(rb.data + kMsg * d.user_cookie.as_64);
        *text = std::string(at, strnlen(at, kMsg));
        EXPECT_EQ(d.transfered_length, text->size() + 1);
        *ep = d.ep_handle;
        if (ck)
            *ck = d.user_cookie.as_64;
    }

    struct SrqCounts {
        DAT_COUNT available, outstanding;
    };
    SrqCounts counts(DAT_SRQ_HANDLE srq) {
        DAT_SRQ_PARAM p{};
        EXPECT_DAT_OK(dat_srq_query(
            srq,
            static_cast<DAT_SRQ_PARAM_MASK>(DAT_SRQ_FIELD_AVAILABLE_DTO_COUNT | DAT_SRQ_FIELD_OUTSTANDING_DTO_COUNT),
            &p));
        return {p.available_dto_count, p.outstanding_dto_count};
    }

    // The next event on the server's async EVD is the SRQ/watermark event
    // for `handle` with `reason`.
    ::testing::AssertionResult srq_event(DAT_HANDLE handle, DAT_COUNT reason) {
        DAT_EVENT ev{};
        if (auto r = wait_event(server.ia.async_evd, kSrqEvent, &ev); !r)
            return r;
        const auto &d = ev.event_data.asynch_error_event_data;
        if (d.dat_handle != handle || d.reason != reason)
            return ::testing::AssertionFailure() << "async event for handle " << d.dat_handle << " reason " << d.reason
                                                 << ", expected " << handle << " reason " << reason;
        return ::testing::AssertionSuccess();
    }

    DAT_IA_ATTR ia_attr{};
    bool srq_supported = false;
    bool pz_difference = false;
    std::vector<DAT_EP_HANDLE> eps;
    std::vector<DAT_SRQ_HANDLE> srqs;
    std::vector<DAT_EVD_HANDLE> evds;
};

// The SRQ suites: skipped where the IA says it has no SRQs.
class SrqTest : public SrqSuite {
protected:
    void SetUp() override {
        SrqSuite::SetUp();
        if (HasFatalFailure() || IsSkipped())
            return;
        if (!srq_supported)
            GTEST_SKIP() << GetParam() << " reports srq_supported false (no SRQs to test)";
    }
};

// dat_ep_recv_query and dat_ep_set_watermark on Endpoints without SRQ, and
// what an IA without SRQs answers: every IA.
class EpRecvTest : public SrqSuite {};

TEST_P(EpRecvTest, SrqSupportIsReportedTruthfully) {
    DAT_SRQ_ATTR a{4, 1, DAT_SRQ_LW_DEFAULT};
    DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
    DAT_RETURN r = dat_srq_create(server.ia.ia, server.ia.pz, &a, &srq);
    if (srq_supported) {
        EXPECT_EQ(r, DAT_SUCCESS) << ret_text(r);
        EXPECT_GT(ia_attr.max_srqs, 0);
        EXPECT_GT(ia_attr.max_recv_per_srq, 0);
        if (r == DAT_SUCCESS)
            EXPECT_DAT_OK(dat_srq_free(srq));
    } else {
        // dat_srq_create(3DAT): DAT_MODEL_NOT_SUPPORTED.
        EXPECT_EQ(DAT_GET_TYPE(r), DAT_MODEL_NOT_SUPPORTED) << ret_text(r);
        EXPECT_EQ(ia_attr.max_srqs, 0);
        EXPECT_EQ(srq, DAT_HANDLE_NULL);
    }
}

TEST_P(SrqTest, IaReportsItsSrqLimits) {
    // dat_ia_query(3DAT): what the IA reports is what it does.
    EXPECT_GT(ia_attr.max_srqs, 0);
    EXPECT_GT(ia_attr.max_ep_per_srq, 0);
    ASSERT_GT(ia_attr.max_recv_per_srq, 0);
    DAT_SRQ_ATTR a{ia_attr.max_recv_per_srq, 1, DAT_SRQ_LW_DEFAULT};
    DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_srq_create(server.ia.ia, server.ia.pz, &a, &srq));
    EXPECT_DAT_OK(dat_srq_free(srq));
    a.max_recv_dtos = ia_attr.max_recv_per_srq + 1;
    srq = DAT_HANDLE_NULL;
    EXPECT_DAT_ERR(dat_srq_create(server.ia.ia, server.ia.pz, &a, &srq), DAT_INVALID_PARAMETER, 0);
    EXPECT_EQ(srq, DAT_HANDLE_NULL);
}

TEST_P(SrqTest, CreateQueryFree) {
    DAT_SRQ_ATTR a{16, 1, DAT_SRQ_LW_DEFAULT};
    DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_srq_create(server.ia.ia, server.ia.pz, &a, &srq));
    DAT_HANDLE_TYPE type{};
    EXPECT_DAT_OK(dat_get_handle_type(srq, &type));
    EXPECT_EQ(type, DAT_HANDLE_TYPE_SRQ);
    DAT_SRQ_PARAM p{};
    ASSERT_DAT_OK(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, &p));
    EXPECT_EQ(p.ia_handle, server.ia.ia);
    EXPECT_EQ(p.srq_state, DAT_SRQ_STATE_OPERATIONAL);
    EXPECT_EQ(p.pz_handle, server.ia.pz);
    EXPECT_GE(p.max_recv_dtos, 16); // "at least"
    EXPECT_GE(p.max_recv_iov, 1);
    EXPECT_EQ(p.low_watermark, DAT_SRQ_LW_DEFAULT);
    EXPECT_EQ(p.available_dto_count, 0);
    EXPECT_EQ(p.outstanding_dto_count, 0);
    // An SRQ uses its PZ.
    EXPECT_DAT_ERR(dat_pz_free(server.ia.pz), DAT_INVALID_STATE, 0);
    // DAT_SRQ_LW_DEFAULT: no event at creation.
    EXPECT_TRUE(no_event(server.ia.async_evd));
    ASSERT_DAT_OK(dat_srq_free(srq));
    EXPECT_DAT_INVALID_HANDLE(dat_srq_free(srq), HandleKind::Srq);
    EXPECT_DAT_INVALID_HANDLE(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, &p), HandleKind::Srq);
}

TEST_P(SrqTest, CreateRefusesInvalidArguments) {
    DAT_SRQ_ATTR good{8, 1, DAT_SRQ_LW_DEFAULT};
    DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
    EXPECT_DAT_INVALID_HANDLE(dat_srq_create(server.ia.pz, server.ia.pz, &good, &srq), HandleKind::Ia);
    // dat_srq_create(3DAT): DAT_INVALID_HANDLE for a PZ that is not one (of this IA).
    EXPECT_DAT_INVALID_HANDLE(dat_srq_create(server.ia.ia, client.ia.pz, &good, &srq), HandleKind::Pz);
    EXPECT_DAT_INVALID_HANDLE(dat_srq_create(server.ia.ia, server.recv_evd, &good, &srq), HandleKind::Pz);
    EXPECT_DAT_ERR(dat_srq_create(server.ia.ia, server.ia.pz, nullptr, &srq), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_srq_create(server.ia.ia, server.ia.pz, &good, nullptr), DAT_INVALID_PARAMETER, 0);
    const DAT_SRQ_ATTR bad[] = {
        {0, 1, 0},                                    // no receives
        {-1, 1, 0},                                   //
        {8, -1, 0},                                   // negative IOV
        {8, ia_attr.max_iov_segments_per_dto + 1, 0}, // more segments than a DTO takes
        {8, 1, -1},                                   // negative watermark
        {8, 1, 9},                                    // watermark above max_recv_dtos
    };
    for (DAT_SRQ_ATTR a : bad) {
        SCOPED_TRACE(testing::Message() << "max_recv_dtos " << a.max_recv_dtos << " max_recv_iov " << a.max_recv_iov
                                        << " low_watermark " << a.low_watermark);
        EXPECT_DAT_ERR(dat_srq_create(server.ia.ia, server.ia.pz, &a, &srq), DAT_INVALID_PARAMETER, 0);
    }
    EXPECT_EQ(srq, DAT_HANDLE_NULL);
}

TEST_P(SrqTest, CallsRefuseHandlesThatAreNoSrq) {
    DAT_SRQ_HANDLE srq = make_srq(4);
    Buffer b;
    ASSERT_DAT_OK(server.register_buffer(b, kMsg));
    DAT_LMR_TRIPLET t = b.iov(0, kMsg);
    DAT_SRQ_PARAM p{};
    for (DAT_HANDLE h : {static_cast<DAT_HANDLE>(server.ep), static_cast<DAT_HANDLE>(server.ia.pz)}) {
        EXPECT_DAT_INVALID_HANDLE(dat_srq_post_recv(h, 1, &t, cookie(1)), HandleKind::Srq);
        EXPECT_DAT_INVALID_HANDLE(dat_srq_query(h, DAT_SRQ_FIELD_ALL, &p), HandleKind::Srq);
        EXPECT_DAT_INVALID_HANDLE(dat_srq_resize(h, 8), HandleKind::Srq);
        EXPECT_DAT_INVALID_HANDLE(dat_srq_set_lw(h, 1), HandleKind::Srq);
        EXPECT_DAT_INVALID_HANDLE(dat_srq_free(h), HandleKind::Srq);
    }
    // A freed SRQ is no SRQ either.
    ASSERT_DAT_OK(free_srq(srq));
    EXPECT_DAT_INVALID_HANDLE(dat_srq_post_recv(srq, 1, &t, cookie(1)), HandleKind::Srq);
    EXPECT_DAT_INVALID_HANDLE(dat_srq_resize(srq, 8), HandleKind::Srq);
    EXPECT_DAT_INVALID_HANDLE(dat_srq_set_lw(srq, 1), HandleKind::Srq);
}

TEST_P(SrqTest, PostRecvChecksItsBuffers) {
    DAT_SRQ_HANDLE srq = make_srq(4);
    Buffer b, read_only, other_pz;
    ASSERT_DAT_OK(server.register_buffer(b, 2 * kMsg));
    ASSERT_DAT_OK(server.register_buffer(read_only, kMsg, DAT_MEM_PRIV_LOCAL_READ_FLAG));
    DAT_PZ_HANDLE pz2 = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_pz_create(server.ia.ia, &pz2));
    ASSERT_DAT_OK(other_pz.create(server.ia.ia, pz2, kMsg, kLocalRw));
    DAT_LMR_TRIPLET t = b.iov(0, kMsg);
    // dat_srq_post_recv(3DAT): at most max_recv_iov segments.
    DAT_SRQ_PARAM p{};
    ASSERT_DAT_OK(dat_srq_query(srq, DAT_SRQ_FIELD_MAX_RECV_IOV, &p));
    std::vector<DAT_LMR_TRIPLET> many(static_cast<size_t>(p.max_recv_iov) + 1, t);
    EXPECT_DAT_ERR(dat_srq_post_recv(srq, p.max_recv_iov + 1, many.data(), cookie(1)), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_srq_post_recv(srq, -1, &t, cookie(1)), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_srq_post_recv(srq, 1, nullptr, cookie(1)), DAT_INVALID_PARAMETER, 0);
    // Outside its LMR: DAT_INVALID_PARAMETER.
    DAT_LMR_TRIPLET outside = b.iov(kMsg, 2 * kMsg);
    EXPECT_DAT_ERR(dat_srq_post_recv(srq, 1, &outside, cookie(1)), DAT_INVALID_PARAMETER, 0);
    // No local write privilege, or no LMR at all: DAT_PRIVILEGES_VIOLATION.
    DAT_LMR_TRIPLET ro = read_only.iov(0, kMsg);
    EXPECT_DAT_ERR(dat_srq_post_recv(srq, 1, &ro, cookie(1)), DAT_PRIVILEGES_VIOLATION, 0);
    DAT_LMR_TRIPLET bogus = t;
    bogus.lmr_context ^= 0x5a5a0000;
    EXPECT_DAT_ERR(dat_srq_post_recv(srq, 1, &bogus, cookie(1)), DAT_PRIVILEGES_VIOLATION, 0);
    // An LMR of another PZ than the SRQ's: DAT_PROTECTION_VIOLATION.
    DAT_LMR_TRIPLET foreign = other_pz.iov(0, kMsg);
    EXPECT_DAT_ERR(dat_srq_post_recv(srq, 1, &foreign, cookie(1)), DAT_PROTECTION_VIOLATION, 0);
    EXPECT_EQ(counts(srq).available, 0) << "a refused post queued a buffer";
    // A zero-size receive needs no buffer.
    EXPECT_DAT_OK(dat_srq_post_recv(srq, 0, nullptr, cookie(2)));
    // The SRQ holds max_recv_dtos receives, then DAT_INSUFFICIENT_RESOURCES.
    for (int i = 1; i < 4; ++i)
        EXPECT_DAT_OK(dat_srq_post_recv(srq, 1, &t, cookie(10 + i)));
    EXPECT_DAT_ERR(dat_srq_post_recv(srq, 1, &t, cookie(20)), DAT_INSUFFICIENT_RESOURCES, 0);
    EXPECT_EQ(counts(srq).available, 4);
    other_pz.release();
    EXPECT_DAT_OK(dat_pz_free(pz2));
}

TEST_P(SrqTest, QueryChecksItsArguments) {
    DAT_SRQ_HANDLE srq = make_srq(4);
    DAT_SRQ_PARAM p{};
    EXPECT_DAT_ERR(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, nullptr), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_srq_query(srq, static_cast<DAT_SRQ_PARAM_MASK>(0x100), &p), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_OK(dat_srq_query(srq, static_cast<DAT_SRQ_PARAM_MASK>(0), &p));
}

TEST_P(SrqTest, ResizeNeverDropsOutstandingReceives) {
    DAT_SRQ_HANDLE srq = make_srq(8);
    Buffer b;
    ASSERT_DAT_OK(server.register_buffer(b, 20 * kMsg));
    ASSERT_NO_FATAL_FAILURE(post_srq(srq, b, 0, 5));
    // dat_srq_resize(3DAT): below the outstanding receives is DAT_INVALID_STATE.
    EXPECT_DAT_ERR(dat_srq_resize(srq, 4), DAT_INVALID_STATE, 0);
    ASSERT_DAT_OK(dat_srq_resize(srq, 5));
    DAT_SRQ_PARAM p{};
    ASSERT_DAT_OK(dat_srq_query(srq, DAT_SRQ_FIELD_MAX_RECV_DTO, &p));
    EXPECT_GE(p.max_recv_dtos, 5);
    EXPECT_LE(p.max_recv_dtos, 8);
    if (p.max_recv_dtos == 5) {
        DAT_LMR_TRIPLET t = b.iov(5 * kMsg, kMsg);
        EXPECT_DAT_ERR(dat_srq_post_recv(srq, 1, &t, cookie(5)), DAT_INSUFFICIENT_RESOURCES, 0);
    }
    // Growing makes room.
    ASSERT_DAT_OK(dat_srq_resize(srq, 16));
    ASSERT_NO_FATAL_FAILURE(post_srq(srq, b, 5, 11));
    EXPECT_EQ(counts(srq).available, 16);
    EXPECT_DAT_ERR(dat_srq_resize(srq, 0), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_srq_resize(srq, -3), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_srq_resize(srq, ia_attr.max_recv_per_srq + 1), DAT_INVALID_PARAMETER, 0);
    // Nor below the low watermark: 2 queued, watermark 6 (which fires).
    DAT_SRQ_HANDLE small = make_srq(8);
    ASSERT_NO_FATAL_FAILURE(post_srq(small, b, 16, 2));
    ASSERT_DAT_OK(dat_srq_set_lw(small, 6));
    EXPECT_TRUE(srq_event(small, DAT_SRQ_LOW_WATERMARK_EVENT));
    EXPECT_DAT_ERR(dat_srq_resize(small, 4), DAT_INVALID_STATE, 0);
    EXPECT_DAT_OK(dat_srq_resize(small, 6));
}

TEST_P(SrqTest, LowWatermarkFiresOnceWhenSetBelowWhatIsQueued) {
    DAT_SRQ_HANDLE srq = make_srq(8);
    Buffer b;
    ASSERT_DAT_OK(server.register_buffer(b, 8 * kMsg));
    ASSERT_NO_FATAL_FAILURE(post_srq(srq, b, 0, 2));
    // dat_srq_set_lw(3DAT): above max_recv_dtos or negative is DAT_INVALID_PARAMETER.
    EXPECT_DAT_ERR(dat_srq_set_lw(srq, 9), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_srq_set_lw(srq, -1), DAT_INVALID_PARAMETER, 0);
    ASSERT_DAT_OK(dat_srq_set_lw(srq, 2)); // 2 queued: not below
    EXPECT_TRUE(no_event(server.ia.async_evd));
    // Two queued, watermark 4: the event comes during the call, once.
    ASSERT_DAT_OK(dat_srq_set_lw(srq, 4));
    EXPECT_TRUE(srq_event(srq, DAT_SRQ_LOW_WATERMARK_EVENT));
    DAT_SRQ_PARAM p{};
    ASSERT_DAT_OK(dat_srq_query(srq, DAT_SRQ_FIELD_LOW_WATERMARK, &p));
    EXPECT_EQ(p.low_watermark, 4);
    EXPECT_TRUE(no_event(server.ia.async_evd)) << "one event per setting";
    // Setting it again arms it again.
    ASSERT_DAT_OK(dat_srq_set_lw(srq, 4));
    EXPECT_TRUE(srq_event(srq, DAT_SRQ_LOW_WATERMARK_EVENT));
    // dat_srq_create(3DAT): a watermark other than DAT_SRQ_LW_DEFAULT at
    // creation fires at once (the SRQ has no buffers).
    DAT_SRQ_HANDLE armed = make_srq(8, 1);
    EXPECT_TRUE(srq_event(armed, DAT_SRQ_LOW_WATERMARK_EVENT));
    // DAT_SRQ_LW_DEFAULT never fires.
    ASSERT_DAT_OK(dat_srq_set_lw(srq, DAT_SRQ_LW_DEFAULT));
    EXPECT_TRUE(no_event(server.ia.async_evd));
}

TEST_P(SrqTest, EpCreateWithSrqChecksItsArguments) {
    DAT_SRQ_HANDLE srq = make_srq(4);
    DAT_EP_ATTR a = suite_ep_attr(server.ia.ia);
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    // dat_ep_create_with_srq(3DAT): ep_attributes "Cannot be NULL".
    EXPECT_DAT_ERR(dat_ep_create_with_srq(server.ia.ia, server.ia.pz, server.recv_evd, server.req_evd, server.conn_evd,
                                          srq, nullptr, &ep),
                   DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_ep_create_with_srq(server.ia.ia, server.ia.pz, server.recv_evd, server.req_evd, server.conn_evd,
                                          srq, &a, nullptr),
                   DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_INVALID_HANDLE(dat_ep_create_with_srq(server.ia.ia, server.ia.pz, server.recv_evd, server.req_evd,
                                                     server.conn_evd, server.ia.pz, &a, &ep),
                              HandleKind::Srq);
    // An SRQ of another IA is no SRQ of this one.
    DAT_SRQ_ATTR sa{4, 1, DAT_SRQ_LW_DEFAULT};
    DAT_SRQ_HANDLE client_srq = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_srq_create(client.ia.ia, client.ia.pz, &sa, &client_srq));
    EXPECT_DAT_INVALID_HANDLE(dat_ep_create_with_srq(server.ia.ia, server.ia.pz, server.recv_evd, server.req_evd,
                                                     server.conn_evd, client_srq, &a, &ep),
                              HandleKind::Srq);
    EXPECT_DAT_OK(dat_srq_free(client_srq));
    EXPECT_EQ(ep, DAT_HANDLE_NULL);
    // Receives complete on the recv EVD of the EP that took the buffer: an
    // EP without one is refused as a model this provider does not support,
    // or works.
    DAT_RETURN r = dat_ep_create_with_srq(server.ia.ia, server.ia.pz, DAT_HANDLE_NULL, server.req_evd, server.conn_evd,
                                          srq, &a, &ep);
    if (r == DAT_SUCCESS)
        eps.push_back(ep);
    else
        EXPECT_TRUE(not_provided(r)) << ret_text(r);
    // The SRQ's PZ and the EP's may differ when the provider says so.
    if (pz_difference) {
        DAT_PZ_HANDLE pz2 = DAT_HANDLE_NULL;
        ASSERT_DAT_OK(dat_pz_create(server.ia.ia, &pz2));
        DAT_EP_HANDLE ep2 = DAT_HANDLE_NULL;
        EXPECT_DAT_OK(
            dat_ep_create_with_srq(server.ia.ia, pz2, server.recv_evd, server.req_evd, server.conn_evd, srq, &a, &ep2));
        EXPECT_DAT_OK(dat_ep_free(ep2));
        EXPECT_DAT_OK(dat_pz_free(pz2));
    }
}

TEST_P(SrqTest, EpWithSrqTakesNoReceivesOfItsOwn) {
    DAT_SRQ_HANDLE srq = make_srq(4);
    DAT_EP_HANDLE ep = make_srq_ep(srq, server.recv_evd);
    ASSERT_NE(ep, DAT_HANDLE_NULL);
    DAT_EP_PARAM p{};
    ASSERT_DAT_OK(dat_ep_query(ep, DAT_EP_FIELD_SRQ_HANDLE, &p));
    EXPECT_EQ(p.srq_handle, srq);
    ASSERT_DAT_OK(dat_ep_query(server.ep, DAT_EP_FIELD_SRQ_HANDLE, &p));
    EXPECT_EQ(p.srq_handle, DAT_HANDLE_NULL);
    // dat_ep_create_with_srq(3DAT): "Receive buffers cannot be posted to the
    // created Endpoint".
    Buffer b;
    ASSERT_DAT_OK(server.register_buffer(b, kMsg));
    DAT_LMR_TRIPLET t = b.iov(0, kMsg);
    EXPECT_DAT_ERR(dat_ep_post_recv(ep, 1, &t, cookie(1), DAT_COMPLETION_DEFAULT_FLAG), DAT_INVALID_STATE, 0);
    // Its receives complete on its recv EVD: dat_ep_modify cannot take it away.
    DAT_EP_PARAM none{};
    none.recv_evd_handle = DAT_HANDLE_NULL;
    EXPECT_DAT_ERR(dat_ep_modify(ep, DAT_EP_FIELD_RECV_EVD_HANDLE, &none), DAT_INVALID_PARAMETER, 0);
    ASSERT_DAT_OK(dat_ep_query(ep, DAT_EP_FIELD_RECV_EVD_HANDLE, &p));
    EXPECT_EQ(p.recv_evd_handle, server.recv_evd);
    // dat_srq_free(3DAT): not while an EP uses it.
    EXPECT_DAT_ERR(dat_srq_free(srq), DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_IN_USE);
    ASSERT_DAT_OK(free_ep(ep));
    EXPECT_DAT_OK(free_srq(srq));
}

TEST_P(SrqTest, TwoClientsFeedOneSrqEachEpOnItsOwnRecvEvd) {
    Buffer rb, sb;
    ASSERT_DAT_OK(server.register_buffer(rb, 16 * kMsg));
    ASSERT_DAT_OK(client.register_buffer(sb, 16 * kMsg));
    DAT_SRQ_HANDLE srq = make_srq(16);
    DAT_EVD_HANDLE evd[2] = {server.recv_evd, make_dto_evd(server.ia.ia)};
    DAT_EP_HANDLE sep[2] = {make_srq_ep(srq, evd[0]), make_srq_ep(srq, evd[1])};
    DAT_EP_HANDLE cep[2] = {client.ep, make_client_ep()};
    ASSERT_NO_FATAL_FAILURE(post_srq(srq, rb, 0, 8));
    EXPECT_EQ(counts(srq).available, 8);
    for (int i = 0; i < 2; ++i)
        ASSERT_NO_FATAL_FAILURE(connect_eps(cep[i], sep[i]));
    // Three messages from each client, interleaved.
    for (int m = 0; m < 3; ++m)
        for (int c = 0; c < 2; ++c)
            ASSERT_NO_FATAL_FAILURE(send_text(cep[c], sb, static_cast<size_t>(c * 3 + m),
                                              "client " + std::to_string(c) + " message " + std::to_string(m)));
    std::set<DAT_UINT64> used;
    for (int c = 0; c < 2; ++c) {
        for (int m = 0; m < 3; ++m) {
            std::string text;
            DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
            DAT_UINT64 ck = 0;
            ASSERT_NO_FATAL_FAILURE(receive_text(evd[c], rb, &text, &ep, &ck));
            // On the recv EVD of the EP that took the buffer, naming that EP,
            // in the order the connection's sends were posted.
            EXPECT_EQ(ep, sep[c]);
            EXPECT_EQ(text, "client " + std::to_string(c) + " message " + std::to_string(m));
            EXPECT_TRUE(used.insert(ck).second) << "buffer " << ck << " completed twice";
        }
    }
    EXPECT_TRUE(no_event(evd[0]));
    EXPECT_TRUE(no_event(evd[1]));
    SrqCounts n = counts(srq);
    EXPECT_EQ(n.available, 2);
    EXPECT_EQ(n.outstanding, 2);
    // dat_ep_recv_query(3DAT) on EPs with an SRQ: the provider cannot see
    // the buffers an EP holds before they complete.
    DAT_COUNT nbufs = 0, span = 0;
    EXPECT_DAT_OK(dat_ep_recv_query(sep[0], &nbufs, &span));
    EXPECT_EQ(nbufs, DAT_VALUE_UNKNOWN);
    EXPECT_EQ(span, DAT_VALUE_UNKNOWN);
}

// A consumer asleep in dat_evd_wait on the recv EVD of an EP with an SRQ,
// while another thread posts to the SRQ the buffer that a message which
// already arrived (of no bytes) takes: it wakes for that receive at once.
TEST_P(SrqTest, AWaiterWakesForTheSrqReceiveOfAMessageThatArrivedFirst) {
    constexpr int kRounds = 4;
    constexpr long kWokenMs = conformance::kPromptWakeMs;
    Buffer rb;
    DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
    ASSERT_NO_FATAL_FAILURE(connect_to_srq_of(kRounds, rb, srq));
    for (int round = 0; round < kRounds; ++round) {
        const DAT_UINT64 ck = 0x700 + static_cast<DAT_UINT64>(round);
        ASSERT_DAT_OK(dat_ep_post_send(client.ep, 0, nullptr, cookie(ck), DAT_COMPLETION_DEFAULT_FLAG));
        // The message reaches the server (InfiniBand's sender retries until
        // the receive is posted: its send completes after that).
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        DAT_LMR_TRIPLET t = rb.iov(kMsg * static_cast<size_t>(round), kMsg);
        const WaitAcrossPost w = wait_across_post(
            server.recv_evd, [&] { return dat_srq_post_recv(srq, 1, &t, cookie(static_cast<DAT_UINT64>(round))); });
        ASSERT_DAT_OK(w.post);
        ASSERT_DAT_OK(w.wait);
        const auto &d = w.event.event_data.dto_completion_event_data;
        ASSERT_EQ(w.event.event_number, DAT_DTO_COMPLETION_EVENT);
        EXPECT_EQ(d.status, DAT_DTO_SUCCESS) << event_text(w.event);
        EXPECT_EQ(d.user_cookie.as_64, static_cast<DAT_UINT64>(round));
        EXPECT_EQ(d.transfered_length, 0u);
        std::cout << "[ info     ] round " << round << ": woken " << w.ms << " ms after the SRQ's receive was posted\n";
        EXPECT_GE(w.ms, 0) << "round " << round << ": the wait returned before the receive was posted";
        EXPECT_LT(w.ms, kWokenMs) << "round " << round;
        ASSERT_TRUE(wait_dto_ok(client.req_evd, ck));
    }
}

// The same with nobody waiting in DAT: the recv EVD feeds a CNO whose
// consumer polls the CNO's fd. The SRQ's receive completes the message that
// arrived first, and the fd becomes readable.
TEST_P(SrqTest, ACnoFdBecomesReadableForTheSrqReceiveOfAMessageThatArrivedFirst) {
    constexpr int kRounds = 4;
    constexpr long kReadableMs = conformance::kPromptWakeMs;
    Buffer rb;
    DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
    ASSERT_NO_FATAL_FAILURE(connect_to_srq_of(kRounds, rb, srq));
    DAT_FD fd = -1;
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_cno_fd_create(server.ia.ia, &fd, &cno));
    ASSERT_DAT_OK(dat_evd_modify_cno(server.recv_evd, cno));
    for (int round = 0; round < kRounds; ++round) {
        const DAT_UINT64 ck = 0x780 + static_cast<DAT_UINT64>(round);
        ASSERT_DAT_OK(dat_ep_post_send(client.ep, 0, nullptr, cookie(ck), DAT_COMPLETION_DEFAULT_FLAG));
        std::this_thread::sleep_for(std::chrono::milliseconds(50)); // the message reaches the server
        pollfd p{fd, POLLIN, 0};
        ASSERT_EQ(::poll(&p, 1, 0), 0) << "round " << round << ": the CNO fired before the receive was posted";
        DAT_LMR_TRIPLET t = rb.iov(kMsg * static_cast<size_t>(round), kMsg);
        const auto posted = std::chrono::steady_clock::now();
        ASSERT_DAT_OK(dat_srq_post_recv(srq, 1, &t, cookie(static_cast<DAT_UINT64>(round))));
        const int ready = ::poll(&p, 1, 10'000);
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - posted).count();
        std::cout << "[ info     ] round " << round << ": the CNO's fd readable " << ms
                  << " ms after the SRQ's receive was posted\n";
        EXPECT_EQ(ready, 1) << "round " << round << ": the CNO's fd never became readable";
        EXPECT_LT(ms, kReadableMs) << "round " << round;
        DAT_EVD_HANDLE hit = DAT_HANDLE_NULL;
        EXPECT_DAT_OK(dat_cno_trigger(cno, &hit));
        EXPECT_EQ(hit, server.recv_evd);
        ASSERT_TRUE(wait_dto_ok(server.recv_evd, static_cast<DAT_UINT64>(round)));
        ASSERT_TRUE(wait_dto_ok(client.req_evd, ck));
    }
    ASSERT_DAT_OK(dat_evd_modify_cno(server.recv_evd, DAT_HANDLE_NULL));
    EXPECT_DAT_OK(dat_cno_free(cno));
}

TEST_P(SrqTest, TwoClientsFeedOneSrqThroughOneRecvEvd) {
    Buffer rb, sb;
    ASSERT_DAT_OK(server.register_buffer(rb, 16 * kMsg));
    ASSERT_DAT_OK(client.register_buffer(sb, 16 * kMsg));
    DAT_SRQ_HANDLE srq = make_srq(16);
    DAT_EP_HANDLE sep[2] = {make_srq_ep(srq, server.recv_evd), make_srq_ep(srq, server.recv_evd)};
    DAT_EP_HANDLE cep[2] = {client.ep, make_client_ep()};
    ASSERT_NO_FATAL_FAILURE(post_srq(srq, rb, 0, 6));
    for (int i = 0; i < 2; ++i)
        ASSERT_NO_FATAL_FAILURE(connect_eps(cep[i], sep[i]));
    for (int m = 0; m < 3; ++m)
        for (int c = 0; c < 2; ++c)
            ASSERT_NO_FATAL_FAILURE(
                send_text(cep[c], sb, static_cast<size_t>(c * 3 + m), std::to_string(c) + ":" + std::to_string(m)));
    int next[2] = {0, 0};
    for (int i = 0; i < 6; ++i) {
        std::string text;
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        ASSERT_NO_FATAL_FAILURE(receive_text(server.recv_evd, rb, &text, &ep));
        ASSERT_EQ(text.size(), 3u) << text;
        const int c = text[0] - '0';
        ASSERT_TRUE(c == 0 || c == 1) << text;
        EXPECT_EQ(ep, sep[c]) << "the completion of \"" << text << "\" names another EP";
        EXPECT_EQ(text[2] - '0', next[c]++) << "out of order on connection " << c;
    }
    SrqCounts n = counts(srq);
    EXPECT_EQ(n.available, 0);
    EXPECT_EQ(n.outstanding, 0);
}

TEST_P(SrqTest, CountsFollowTheManPageExample) {
    // dat_srq_query(3DAT) USAGE: 10 entries, one EP, 3 buffers posted.
    Buffer rb, sb;
    ASSERT_DAT_OK(server.register_buffer(rb, 10 * kMsg));
    ASSERT_DAT_OK(client.register_buffer(sb, kMsg));
    DAT_SRQ_HANDLE srq = make_srq(10);
    DAT_EP_HANDLE sep = make_srq_ep(srq, server.recv_evd);
    ASSERT_NO_FATAL_FAILURE(connect_eps(client.ep, sep));
    ASSERT_NO_FATAL_FAILURE(post_srq(srq, rb, 0, 3));
    SrqCounts n = counts(srq);
    EXPECT_EQ(n.available, 3);
    EXPECT_EQ(n.outstanding, 3);
    ASSERT_NO_FATAL_FAILURE(send_text(client.ep, sb, 0, "one"));
    // After the message arrived: available 2, outstanding 3 ...
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while ((n = counts(srq)).available != 2 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(5ms);
    EXPECT_EQ(n.available, 2);
    EXPECT_EQ(n.outstanding, 3);
    // ... and once the consumer dequeued the completion: 2 and 2.
    std::string text;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ASSERT_NO_FATAL_FAILURE(receive_text(server.recv_evd, rb, &text, &ep));
    EXPECT_EQ(ep, sep);
    n = counts(srq);
    EXPECT_EQ(n.available, 2);
    EXPECT_EQ(n.outstanding, 2);
    DAT_SRQ_PARAM p{};
    ASSERT_DAT_OK(dat_srq_query(srq, DAT_SRQ_FIELD_MAX_RECV_DTO, &p));
    EXPECT_GE(p.max_recv_dtos, 10);
}

TEST_P(SrqTest, LowWatermarkFiresWhenEpsTakeBuffers) {
    Buffer rb, sb;
    ASSERT_DAT_OK(server.register_buffer(rb, 8 * kMsg));
    ASSERT_DAT_OK(client.register_buffer(sb, 8 * kMsg));
    DAT_SRQ_HANDLE srq = make_srq(8);
    DAT_EP_HANDLE sep = make_srq_ep(srq, server.recv_evd);
    ASSERT_NO_FATAL_FAILURE(post_srq(srq, rb, 0, 4));
    ASSERT_DAT_OK(dat_srq_set_lw(srq, 3));
    ASSERT_NO_FATAL_FAILURE(connect_eps(client.ep, sep));
    std::string text;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    // 4 -> 3 queued: not below the watermark.
    ASSERT_NO_FATAL_FAILURE(send_text(client.ep, sb, 0, "a"));
    ASSERT_NO_FATAL_FAILURE(receive_text(server.recv_evd, rb, &text, &ep));
    EXPECT_TRUE(no_event(server.ia.async_evd));
    // 3 -> 2: below; one event.
    ASSERT_NO_FATAL_FAILURE(send_text(client.ep, sb, 1, "b"));
    ASSERT_NO_FATAL_FAILURE(receive_text(server.recv_evd, rb, &text, &ep));
    EXPECT_TRUE(srq_event(srq, DAT_SRQ_LOW_WATERMARK_EVENT));
    // 2 -> 1: disarmed until set again.
    ASSERT_NO_FATAL_FAILURE(send_text(client.ep, sb, 2, "c"));
    ASSERT_NO_FATAL_FAILURE(receive_text(server.recv_evd, rb, &text, &ep));
    EXPECT_TRUE(no_event(server.ia.async_evd));
    ASSERT_DAT_OK(dat_srq_set_lw(srq, 3));
    EXPECT_TRUE(srq_event(srq, DAT_SRQ_LOW_WATERMARK_EVENT));
}

TEST_P(SrqTest, DisconnectLeavesTheSrqsReceivesToTheOtherEps) {
    Buffer rb, sb;
    ASSERT_DAT_OK(server.register_buffer(rb, 8 * kMsg));
    ASSERT_DAT_OK(client.register_buffer(sb, 8 * kMsg));
    DAT_SRQ_HANDLE srq = make_srq(8);
    DAT_EP_HANDLE sep[2] = {make_srq_ep(srq, server.recv_evd), make_srq_ep(srq, server.recv_evd)};
    DAT_EP_HANDLE cep[2] = {client.ep, make_client_ep()};
    ASSERT_NO_FATAL_FAILURE(post_srq(srq, rb, 0, 4));
    for (int i = 0; i < 2; ++i)
        ASSERT_NO_FATAL_FAILURE(connect_eps(cep[i], sep[i]));
    ASSERT_DAT_OK(dat_ep_disconnect(cep[0], DAT_CLOSE_GRACEFUL_FLAG));
    DAT_EVENT ev{};
    ASSERT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED, &ev));
    EXPECT_EQ(ev.event_data.connect_event_data.ep_handle, sep[0]);
    ASSERT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    // Nothing of the SRQ is flushed for the EP that left...
    EXPECT_TRUE(no_event(server.recv_evd));
    EXPECT_EQ(counts(srq).available, 4);
    // ... which is reported once it holds none of the SRQ's buffers any
    // more (OFED's "last WQE reached", on the async EVD).
    EXPECT_TRUE(srq_event(sep[0], DAT_EP_TRANSFER_TO_ERROR));
    // The other connection still receives into the SRQ's buffers.
    ASSERT_NO_FATAL_FAILURE(send_text(cep[1], sb, 0, "still here"));
    std::string text;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ASSERT_NO_FATAL_FAILURE(receive_text(server.recv_evd, rb, &text, &ep));
    EXPECT_EQ(text, "still here");
    EXPECT_EQ(ep, sep[1]);
    // The SRQ stays in use while any EP of it exists.
    ASSERT_DAT_OK(free_ep(sep[0]));
    EXPECT_DAT_ERR(free_srq(srq), DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_IN_USE);
    ASSERT_DAT_OK(free_ep(sep[1]));
    // Freed with three receives queued: they go, with no completion anywhere.
    EXPECT_EQ(counts(srq).available, 3);
    EXPECT_DAT_OK(free_srq(srq));
    EXPECT_TRUE(no_event(server.recv_evd));
}

TEST_P(SrqTest, ResetKeepsTheEpOnItsSrq) {
    Buffer rb, sb;
    ASSERT_DAT_OK(server.register_buffer(rb, 4 * kMsg));
    ASSERT_DAT_OK(client.register_buffer(sb, 4 * kMsg));
    DAT_SRQ_HANDLE srq = make_srq(4);
    DAT_EP_HANDLE sep = make_srq_ep(srq, server.recv_evd);
    ASSERT_NO_FATAL_FAILURE(post_srq(srq, rb, 0, 4));
    ASSERT_NO_FATAL_FAILURE(connect_eps(client.ep, sep));
    ASSERT_DAT_OK(dat_ep_disconnect(sep, DAT_CLOSE_ABRUPT_FLAG));
    ASSERT_TRUE(wait_connection_end(server.conn_evd));
    ASSERT_TRUE(wait_connection_end(client.conn_evd));
    EXPECT_TRUE(srq_event(sep, DAT_EP_TRANSFER_TO_ERROR));
    // dat_ep_create_with_srq(3DAT): dat_ep_reset does not change the EP's SRQ.
    ASSERT_DAT_OK(dat_ep_reset(sep));
    ASSERT_DAT_OK(dat_ep_reset(client.ep));
    DAT_EP_PARAM p{};
    ASSERT_DAT_OK(dat_ep_query(sep, DAT_EP_FIELD_SRQ_HANDLE, &p));
    EXPECT_EQ(p.srq_handle, srq);
    ASSERT_NO_FATAL_FAILURE(connect_eps(client.ep, sep));
    ASSERT_NO_FATAL_FAILURE(send_text(client.ep, sb, 0, "again"));
    std::string text;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ASSERT_NO_FATAL_FAILURE(receive_text(server.recv_evd, rb, &text, &ep));
    EXPECT_EQ(text, "again");
    EXPECT_EQ(ep, sep);
}

TEST_P(SrqTest, IaCloseFreesSrqsWithTheirEpsAndReceives) {
    OpenIa third;
    ASSERT_DAT_OK(third.open(GetParam()));
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_evd_create(third.ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &evd));
    DAT_SRQ_ATTR sa{8, 1, DAT_SRQ_LW_DEFAULT};
    DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_srq_create(third.ia, third.pz, &sa, &srq));
    DAT_EP_ATTR a = suite_ep_attr(third.ia);
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_ep_create_with_srq(third.ia, third.pz, evd, evd, DAT_HANDLE_NULL, srq, &a, &ep));
    Buffer b;
    ASSERT_DAT_OK(b.create(third.ia, third.pz, 4 * kMsg, kLocalRw));
    for (int i = 0; i < 4; ++i) {
        DAT_LMR_TRIPLET t = b.iov(kMsg * static_cast<size_t>(i), kMsg);
        ASSERT_DAT_OK(dat_srq_post_recv(srq, 1, &t, cookie(static_cast<DAT_UINT64>(i))));
    }
    // dat_ia_close(3DAT), abrupt: everything of the IA goes, SRQ included.
    b.lmr = DAT_HANDLE_NULL; // closed with the IA
    EXPECT_DAT_OK(dat_ia_close(third.ia, DAT_CLOSE_ABRUPT_FLAG));
    third.ia = DAT_HANDLE_NULL;
    third.pz = DAT_HANDLE_NULL;
    EXPECT_DAT_INVALID_HANDLE(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, nullptr), HandleKind::Srq);
}

// ---- dat_ep_recv_query and dat_ep_set_watermark without SRQ ---------------------

TEST_P(EpRecvTest, RecvQueryCountsTheReceivesOfAnEpWithoutSrq) {
    Buffer rb, sb;
    ASSERT_DAT_OK(server.register_buffer(rb, 4 * kMsg));
    ASSERT_DAT_OK(client.register_buffer(sb, kMsg));
    DAT_COUNT nbufs = -7, span = -7;
    ASSERT_DAT_OK(dat_ep_recv_query(server.ep, &nbufs, &span));
    EXPECT_EQ(nbufs, 0);
    EXPECT_EQ(span, 0);
    for (int i = 0; i < 3; ++i) {
        DAT_LMR_TRIPLET t = rb.iov(kMsg * static_cast<size_t>(i), kMsg);
        ASSERT_DAT_OK(
            dat_ep_post_recv(server.ep, 1, &t, cookie(static_cast<DAT_UINT64>(i)), DAT_COMPLETION_DEFAULT_FLAG));
    }
    // dat_ep_recv_query(3DAT): without an SRQ a buffer is allocated to the EP
    // when posted; the span is never less than the count.
    ASSERT_DAT_OK(dat_ep_recv_query(server.ep, &nbufs, &span));
    EXPECT_EQ(nbufs, 3);
    EXPECT_EQ(span, 3);
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_NO_FATAL_FAILURE(send_text(client.ep, sb, 0, "x"));
    ASSERT_TRUE(wait_dto_ok(server.recv_evd, 0));
    ASSERT_DAT_OK(dat_ep_recv_query(server.ep, &nbufs, &span));
    EXPECT_EQ(nbufs, 2);
    EXPECT_EQ(span, 2);
    // Either count may be left out.
    EXPECT_DAT_OK(dat_ep_recv_query(server.ep, nullptr, &span));
    EXPECT_DAT_OK(dat_ep_recv_query(server.ep, &nbufs, nullptr));
    EXPECT_DAT_INVALID_HANDLE(dat_ep_recv_query(server.ia.pz, &nbufs, &span), HandleKind::Ep);
}

TEST_P(EpRecvTest, SoftHighWatermarkOfAnEpWithoutSrq) {
    Buffer rb;
    ASSERT_DAT_OK(server.register_buffer(rb, 8 * kMsg));
    EXPECT_DAT_ERR(dat_ep_set_watermark(server.ep, -5, DAT_WATERMARK_INFINITE), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_ep_set_watermark(server.ep, DAT_WATERMARK_INFINITE, -5), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_INVALID_HANDLE(dat_ep_set_watermark(server.ia.pz, 2, 2), HandleKind::Ep);
    ASSERT_DAT_OK(dat_ep_set_watermark(server.ep, 2, DAT_WATERMARK_INFINITE));
    auto post = [&](int i) {
        DAT_LMR_TRIPLET t = rb.iov(kMsg * static_cast<size_t>(i), kMsg);
        return dat_ep_post_recv(server.ep, 1, &t, cookie(static_cast<DAT_UINT64>(i)), DAT_COMPLETION_DEFAULT_FLAG);
    };
    ASSERT_DAT_OK(post(0));
    ASSERT_DAT_OK(post(1));
    EXPECT_TRUE(no_event(server.ia.async_evd)); // 2 buffers: not above 2
    // dat_ep_set_watermark(3DAT): exceeded for the first time: one event ...
    ASSERT_DAT_OK(post(2));
    EXPECT_TRUE(srq_event(server.ep, DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT));
    // ... and no other until it is set again.
    ASSERT_DAT_OK(post(3));
    EXPECT_TRUE(no_event(server.ia.async_evd));
    // Set below what the EP holds: the event comes during the call.
    ASSERT_DAT_OK(dat_ep_set_watermark(server.ep, 3, DAT_WATERMARK_INFINITE));
    EXPECT_TRUE(srq_event(server.ep, DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT));
    // Infinite: no event.
    ASSERT_DAT_OK(dat_ep_set_watermark(server.ep, DAT_WATERMARK_INFINITE, DAT_WATERMARK_INFINITE));
    ASSERT_DAT_OK(post(4));
    EXPECT_TRUE(no_event(server.ia.async_evd));
}

TEST_P(EpRecvTest, HardHighWatermarkBreaksTheConnection) {
    Buffer rb;
    ASSERT_DAT_OK(server.register_buffer(rb, 8 * kMsg));
    auto post = [&](int i) {
        DAT_LMR_TRIPLET t = rb.iov(kMsg * static_cast<size_t>(i), kMsg);
        return dat_ep_post_recv(server.ep, 1, &t, cookie(static_cast<DAT_UINT64>(i)), DAT_COMPLETION_DEFAULT_FLAG);
    };
    ASSERT_DAT_OK(post(0));
    ASSERT_DAT_OK(post(1));
    ASSERT_DAT_OK(dat_ep_set_watermark(server.ep, DAT_WATERMARK_INFINITE, 2));
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    EXPECT_TRUE(no_event(server.conn_evd));
    // dat_ep_set_watermark(3DAT): more buffers at the EP than the hard
    // watermark: a connection broken event on the EP's connect EVD.
    ASSERT_DAT_OK(post(2));
    DAT_EVENT ev{};
    ASSERT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_BROKEN, &ev));
    EXPECT_EQ(ev.event_data.connect_event_data.ep_handle, server.ep);
    EXPECT_TRUE(wait_connection_end(client.conn_evd));
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_DISCONNECTED);
}

TEST_P(EpRecvTest, HardHighWatermarkAlreadyExceededBreaksAtEstablishment) {
    Buffer rb;
    ASSERT_DAT_OK(server.register_buffer(rb, 8 * kMsg));
    for (int i = 0; i < 3; ++i) {
        DAT_LMR_TRIPLET t = rb.iov(kMsg * static_cast<size_t>(i), kMsg);
        ASSERT_DAT_OK(
            dat_ep_post_recv(server.ep, 1, &t, cookie(static_cast<DAT_UINT64>(i)), DAT_COMPLETION_DEFAULT_FLAG));
    }
    // Not connected: nothing to break yet.
    ASSERT_DAT_OK(dat_ep_set_watermark(server.ep, DAT_WATERMARK_INFINITE, 1));
    // "the Provider is ready to generate a connection broken event as soon
    // as the connection is established".
    ASSERT_NO_FATAL_FAILURE(client_connect());
    DAT_CR_HANDLE cr = server_wait_cr();
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    ASSERT_DAT_OK(dat_cr_accept(cr, server.ep, 0, nullptr));
    ASSERT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED));
    ASSERT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_BROKEN));
    // The client may see its connection established before it ends.
    DAT_EVENT ev{};
    ASSERT_EQ(next_event(client.conn_evd, &ev), DAT_SUCCESS);
    if (ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED)
        EXPECT_TRUE(wait_connection_end(client.conn_evd));
    else
        EXPECT_NE(ev.event_number, DAT_CONNECTION_EVENT_ESTABLISHED) << event_text(ev);
}

TEST_P(SrqTest, HighWatermarksOfAnEpWithSrqAreNotSupported) {
    DAT_SRQ_HANDLE srq = make_srq(4);
    DAT_EP_HANDLE ep = make_srq_ep(srq, server.recv_evd);
    // The SRQ buffers an EP holds are not observable (they are reported only
    // once their message completed): nothing could fire.
    EXPECT_DAT_ERR(dat_ep_set_watermark(ep, 4, DAT_WATERMARK_INFINITE), DAT_MODEL_NOT_SUPPORTED, 0);
    EXPECT_DAT_ERR(dat_ep_set_watermark(ep, DAT_WATERMARK_INFINITE, 4), DAT_MODEL_NOT_SUPPORTED, 0);
    EXPECT_DAT_OK(dat_ep_set_watermark(ep, DAT_WATERMARK_INFINITE, DAT_WATERMARK_INFINITE));
}

} // namespace

INSTANTIATE_OVER_IAS(SrqTest);
INSTANTIATE_OVER_IAS(EpRecvTest);
