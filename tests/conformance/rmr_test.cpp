// SPDX-License-Identifier: BSD-3-Clause
// Remote Memory Regions (memory windows): dat_rmr_create(3DAT),
// dat_rmr_create_for_ep, dat_rmr_query(3DAT), dat_rmr_bind(3DAT),
// dat_rmr_free(3DAT), and the DAT 2.0 DTOs that name RMRs
// (dat_ep_post_send_with_invalidate, dat_ep_post_rdma_read_to_rmr).
//
// Window security is judged over a real connection as security_test judges
// LMRs (ConnectedTest::expect_rdma_refused): an RDMA Write or Read through
// a window that is unbound, rebound (the old context), freed, invalidated
// by a send, narrower than the access, or without the privilege must fail
// -- DAT_DTO_ERR_REMOTE_ACCESS, or an error with a broken connection -- and
// leave the target memory exactly as it was. The target is always one LMR
// of three pages with local access only: whatever reaches it remotely came
// through a window.
#include "connected.hpp"

#include <chrono>
#include <thread>

using namespace conformance;

namespace {

constexpr DAT_MEM_PRIV_FLAGS priv(int f) { return static_cast<DAT_MEM_PRIV_FLAGS>(f); }
constexpr DAT_MEM_PRIV_FLAGS kRemoteRead = DAT_MEM_PRIV_REMOTE_READ_FLAG;
constexpr DAT_MEM_PRIV_FLAGS kRemoteWrite = DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
constexpr DAT_MEM_PRIV_FLAGS kRemoteRw = priv(DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG);
constexpr unsigned char kTargetSeed = 0xC3; // the target's memory
constexpr size_t kPage = 4096;
constexpr auto kRmrIaPz = static_cast<DAT_RMR_PARAM_MASK>(DAT_RMR_FIELD_IA_HANDLE | DAT_RMR_FIELD_PZ_HANDLE);

DAT_RMR_COOKIE rmr_cookie(DAT_UINT64 v) {
    DAT_RMR_COOKIE c;
    c.as_64 = v;
    return c;
}

// The next event on `evd` is the completion of a bind of `rmr` with this cookie and status.
::testing::AssertionResult bind_event(DAT_EVD_HANDLE evd, DAT_RMR_HANDLE rmr, DAT_UINT64 ck,
                                      DAT_DTO_COMPLETION_STATUS want) {
    DAT_EVENT ev{};
    if (auto w = wait_event(evd, DAT_RMR_BIND_COMPLETION_EVENT, &ev); !w)
        return w;
    const auto &d = ev.event_data.rmr_completion_event_data;
    if (d.rmr_handle != rmr || d.user_cookie.as_64 != ck || d.status != want)
        return ::testing::AssertionFailure()
               << "bind completion {rmr " << d.rmr_handle << ", cookie 0x" << std::hex << d.user_cookie.as_64
               << std::dec << ", status " << dto_status_name(d.status) << "}, expected {rmr " << rmr << ", cookie 0x"
               << std::hex << ck << std::dec << ", status " << dto_status_name(want) << "}";
    return ::testing::AssertionSuccess();
}

// dat_rmr_bind of [off, off + len) of `b` on `side`'s Endpoint, and its completion.
::testing::AssertionResult bind_completes(Side &side, DAT_RMR_HANDLE rmr, const Buffer &b, size_t off, size_t len,
                                          DAT_MEM_PRIV_FLAGS p, DAT_RMR_CONTEXT *ctx) {
    const DAT_LMR_TRIPLET t = b.iov(off, len);
    const DAT_UINT64 ck = 0xB1D0000000000000ull | (off << 20) | len;
    DAT_RETURN r =
        dat_rmr_bind(rmr, b.lmr, &t, p, DAT_VA_TYPE_VA, side.ep, rmr_cookie(ck), DAT_COMPLETION_DEFAULT_FLAG, ctx);
    if (r != DAT_SUCCESS)
        return ::testing::AssertionFailure() << "dat_rmr_bind -> " << ret_text(r);
    return bind_event(side.req_evd, rmr, ck, DAT_RMR_BIND_SUCCESS);
}

// A bind of length 0 (dat_rmr_bind(3DAT): no memory region; the rmr_context
// returned is undefined) on `side`'s Endpoint, and its completion.
::testing::AssertionResult unbind_completes(Side &side, DAT_RMR_HANDLE rmr) {
    const DAT_LMR_TRIPLET none{};
    const DAT_UINT64 ck = 0x0B1D;
    DAT_RMR_CONTEXT ignored = 0;
    DAT_RETURN r = dat_rmr_bind(rmr, DAT_HANDLE_NULL, &none, DAT_MEM_PRIV_NONE_FLAG, DAT_VA_TYPE_VA, side.ep,
                                rmr_cookie(ck), DAT_COMPLETION_DEFAULT_FLAG, &ignored);
    if (r != DAT_SUCCESS)
        return ::testing::AssertionFailure() << "dat_rmr_bind (length 0) -> " << ret_text(r);
    return bind_event(side.req_evd, rmr, ck, DAT_RMR_BIND_SUCCESS);
}

// Whether `ia` offers windows of Endpoint scope. One that does not says so
// in rmr_scope_supported and refuses dat_rmr_create_for_ep on `pz` with
// DAT_MODEL_NOT_SUPPORTED, creating nothing (checked here).
bool ep_scope_offered(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz) {
    DAT_PROVIDER_ATTR pa{};
    EXPECT_DAT_OK(query_ia(ia, nullptr, &pa));
    if (pa.rmr_scope_supported != DAT_RMR_SCOPE_PZ)
        return true;
    DAT_RMR_HANDLE probe = DAT_HANDLE_NULL;
    EXPECT_DAT_ERR(dat_rmr_create_for_ep(pz, &probe), DAT_MODEL_NOT_SUPPORTED, 0);
    EXPECT_EQ(probe, DAT_HANDLE_NULL);
    return false;
}
constexpr const char *kNoEpScope =
    "the IA reports rmr_scope_supported DAT_RMR_SCOPE_PZ and refuses dat_rmr_create_for_ep with "
    "DAT_MODEL_NOT_SUPPORTED (checked): it cannot keep a window to one connection (plugins/ofi/README.md)";

// ---- without a connection -----------------------------------------------------------------------

class RmrTest : public ConformanceTest {
protected:
    void SetUp() override {
        ConformanceTest::SetUp();
        ASSERT_DAT_OK(ia_.open(GetParam()));
    }

    OpenIa ia_;
};

TEST_P(RmrTest, IaReportsRmrs) {
    IaAttributes attrs;
    ASSERT_DAT_OK(attrs.query(ia_.ia));
    // dat_ia_query: max_rmrs, max_rmr_target_address.
    EXPECT_GE(attrs.ia.max_rmrs, 1);
    EXPECT_GT(attrs.ia.max_rmr_target_address, DAT_VADDR(0));
}

TEST_P(RmrTest, CreateQueryFree) {
    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_rmr_create(ia_.pz, &rmr));
    ASSERT_NE(rmr, DAT_HANDLE_NULL);
    DAT_HANDLE_TYPE type{};
    EXPECT_DAT_OK(dat_get_handle_type(rmr, &type));
    EXPECT_EQ(type, DAT_HANDLE_TYPE_RMR);
    DAT_RMR_PARAM p{};
    ASSERT_DAT_OK(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &p));
    EXPECT_EQ(p.ia_handle, ia_.ia); // the Consumer's handle from dat_ia_open
    EXPECT_EQ(p.pz_handle, ia_.pz);
    EXPECT_DAT_OK(dat_rmr_free(rmr));
    // dat_rmr_free(3DAT): "Use of the handle of the destroyed RMR in any subsequent operation
    // except for the dat_rmr_free() fails."
    EXPECT_DAT_INVALID_HANDLE(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &p), HandleKind::Rmr);
    EXPECT_DAT_INVALID_HANDLE(dat_rmr_free(rmr), HandleKind::Rmr);
}

TEST_P(RmrTest, RmrsAreDistinctAndIndependent) {
    std::vector<DAT_RMR_HANDLE> rmrs(32, DAT_HANDLE_NULL);
    for (auto &r : rmrs)
        ASSERT_DAT_OK(dat_rmr_create(ia_.pz, &r));
    for (size_t i = 1; i < rmrs.size(); ++i)
        EXPECT_NE(rmrs[i], rmrs[i - 1]);
    EXPECT_DAT_OK(dat_rmr_free(rmrs[7]));
    DAT_RMR_PARAM p{};
    for (size_t i = 0; i < rmrs.size(); ++i)
        if (i != 7)
            EXPECT_DAT_OK(dat_rmr_query(rmrs[i], kRmrIaPz, &p));
    for (size_t i = 0; i < rmrs.size(); ++i)
        if (i != 7)
            EXPECT_DAT_OK(dat_rmr_free(rmrs[i]));
}

TEST_P(RmrTest, CreateForEpHasEndpointScope) {
    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
    if (!ep_scope_offered(ia_.ia, ia_.pz))
        GTEST_SKIP() << kNoEpScope;
    ASSERT_DAT_OK(dat_rmr_create_for_ep(ia_.pz, &rmr));
    DAT_RMR_PARAM p{};
    ASSERT_DAT_OK(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &p));
    EXPECT_EQ(p.rmr_scope, DAT_RMR_SCOPE_EP);
    EXPECT_EQ(p.pz_handle, ia_.pz);
    EXPECT_DAT_OK(dat_rmr_free(rmr));
    // An RMR of dat_rmr_create is not confined to one Endpoint.
    ASSERT_DAT_OK(dat_rmr_create(ia_.pz, &rmr));
    ASSERT_DAT_OK(dat_rmr_query(rmr, DAT_RMR_FIELD_RMR_SCOPE, &p));
    EXPECT_NE(p.rmr_scope, DAT_RMR_SCOPE_EP);
    EXPECT_DAT_OK(dat_rmr_free(rmr));
}

TEST_P(RmrTest, CreateBadArguments) {
    // dat_rmr_create(3DAT): DAT_INVALID_HANDLE "The pz_handle parameter is invalid."
    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
    EXPECT_DAT_INVALID_HANDLE(dat_rmr_create(DAT_HANDLE_NULL, &rmr), HandleKind::Pz);
    EXPECT_DAT_INVALID_HANDLE(dat_rmr_create(ia_.ia, &rmr), HandleKind::Pz);
    EXPECT_DAT_INVALID_HANDLE(dat_rmr_create_for_ep(DAT_HANDLE_NULL, &rmr), HandleKind::Pz);
    EXPECT_DAT_INVALID_HANDLE(dat_rmr_create_for_ep(ia_.async_evd, &rmr), HandleKind::Pz);
    // Nowhere to return the handle.
    EXPECT_DAT_ERR(dat_rmr_create(ia_.pz, nullptr), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_rmr_create_for_ep(ia_.pz, nullptr), DAT_INVALID_PARAMETER, 0);
    // Nothing was created: the PZ is free to go.
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_pz_create(ia_.ia, &pz));
    EXPECT_DAT_ERR(dat_rmr_create(pz, nullptr), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_OK(dat_pz_free(pz));
}

TEST_P(RmrTest, QueryBadArguments) {
    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_rmr_create(ia_.pz, &rmr));
    DAT_RMR_PARAM p{};
    // dat_rmr_query(3DAT): DAT_INVALID_PARAMETER "The rmr_param_mask parameter is invalid.",
    // DAT_INVALID_HANDLE "The rmr_handle parameter is invalid."
    EXPECT_DAT_ERR(dat_rmr_query(rmr, static_cast<DAT_RMR_PARAM_MASK>(0x80), &p), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, nullptr), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_INVALID_HANDLE(dat_rmr_query(DAT_HANDLE_NULL, DAT_RMR_FIELD_ALL, &p), HandleKind::Rmr);
    EXPECT_DAT_INVALID_HANDLE(dat_rmr_query(ia_.pz, DAT_RMR_FIELD_ALL, &p), HandleKind::Rmr);
    EXPECT_DAT_OK(dat_rmr_free(rmr));
}

TEST_P(RmrTest, FreeBadHandles) {
    // dat_rmr_free(3DAT): DAT_INVALID_HANDLE "The rmr_handle handle is invalid."
    EXPECT_DAT_INVALID_HANDLE(dat_rmr_free(DAT_HANDLE_NULL), HandleKind::Rmr);
    EXPECT_DAT_INVALID_HANDLE(dat_rmr_free(ia_.pz), HandleKind::Rmr);
    // The PZ is untouched by the refused free.
    DAT_PZ_PARAM p{};
    EXPECT_DAT_OK(dat_pz_query(ia_.pz, DAT_PZ_FIELD_ALL, &p));
}

TEST_P(RmrTest, PzInUseUntilEveryRmrIsFreed) {
    // dat_pz_free(3DAT): "The Protection Zone cannot be destroyed if it is in use by an ...
    // RMR" -> DAT_INVALID_STATE.
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_pz_create(ia_.ia, &pz));
    DAT_RMR_HANDLE a = DAT_HANDLE_NULL, b = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_rmr_create(pz, &a));
    // Either kind holds the PZ.
    if (ep_scope_offered(ia_.ia, pz))
        ASSERT_DAT_OK(dat_rmr_create_for_ep(pz, &b));
    else
        ASSERT_DAT_OK(dat_rmr_create(pz, &b));
    EXPECT_DAT_ERR(dat_pz_free(pz), DAT_INVALID_STATE, 0);
    EXPECT_DAT_OK(dat_rmr_free(a));
    EXPECT_DAT_ERR(dat_pz_free(pz), DAT_INVALID_STATE, 0);
    EXPECT_DAT_OK(dat_rmr_free(b));
    EXPECT_DAT_OK(dat_pz_free(pz));
}

TEST_P(RmrTest, IaCloseGracefulRefusedWhileRmrExistsAbruptFreesIt) {
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_ia_open(ia_name_ptr(GetParam()), 8, &async, &ia));
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_pz_create(ia, &pz));
    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_rmr_create(pz, &rmr));
    // dat_ia_close(3DAT): a graceful close of an IA that still has objects fails.
    EXPECT_DAT_ERR(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_STATE, 0);
    DAT_RMR_PARAM p{};
    EXPECT_DAT_OK(dat_rmr_query(rmr, kRmrIaPz, &p));
    // An abrupt close destroys every object, the RMR with them.
    EXPECT_DAT_OK(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG));
    EXPECT_DAT_INVALID_HANDLE(dat_rmr_query(rmr, kRmrIaPz, &p), HandleKind::Rmr);
}

TEST_P(RmrTest, BindOnUnconnectedEndpointIsInvalidState) {
    std::vector<char> buf(8192);
    DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
    DAT_REGION_DESCRIPTION region{};
    region.for_va = buf.data();
    DAT_LMR_CONTEXT lctx = 0;
    DAT_RMR_CONTEXT unused = 0;
    DAT_VLEN size = 0;
    DAT_VADDR addr = 0;
    ASSERT_DAT_OK(dat_lmr_create(ia_.ia, DAT_MEM_TYPE_VIRTUAL, region, buf.size(), ia_.pz, kLocalRw, DAT_VA_TYPE_VA,
                                 &lmr, &lctx, &unused, &size, &addr));
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_evd_create(ia_.ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &evd));
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_ep_create(ia_.ia, ia_.pz, evd, evd, DAT_HANDLE_NULL, nullptr, &ep));
    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_rmr_create(ia_.pz, &rmr));
    DAT_LMR_TRIPLET t{reinterpret_cast<uintptr_t>(buf.data()), 4096, lctx};
    DAT_RMR_CONTEXT ctx = 0;
    // dat_rmr_bind(3DAT): DAT_INVALID_STATE "Endpoint was not in the a DAT_EP_STATE_CONNECTED or
    // DAT_EP_STATE_DISCONNECTED state."
    EXPECT_DAT_ERR(
        dat_rmr_bind(rmr, lmr, &t, kRemoteRw, DAT_VA_TYPE_VA, ep, rmr_cookie(1), DAT_COMPLETION_DEFAULT_FLAG, &ctx),
        DAT_INVALID_STATE, 0);
    EXPECT_TRUE(no_event(evd));
    // Nothing was bound: the LMR is not in use.
    EXPECT_DAT_OK(dat_rmr_free(rmr));
    EXPECT_DAT_OK(dat_ep_free(ep));
    EXPECT_DAT_OK(dat_evd_free(evd));
    EXPECT_DAT_OK(dat_lmr_free(lmr));
}

// ---- over a connection ------------------------------------------------------------------------------

class RmrConnectedTest : public ConnectedTest {
protected:
    void SetUp() override {
        ConnectedTest::SetUp();
        if (HasFatalFailure())
            return;
        ASSERT_NO_FATAL_FAILURE(connect_pair());
        ASSERT_DAT_OK(client.register_buffer(local, 3 * kPage));
        // The target: one LMR over three pages with local access only; only
        // windows give the client remote access.
        ASSERT_DAT_OK(server.register_buffer(target, 3 * kPage, kLocalRw));
        target.fill(kTargetSeed);
        ASSERT_DAT_OK(dat_rmr_create(server.ia.pz, &rmr));
    }

    void TearDown() override {
        if (rmr != DAT_HANDLE_NULL)
            dat_rmr_free(rmr);
        rmr = DAT_HANDLE_NULL;
        local.release();
        target.release();
        ConnectedTest::TearDown();
    }

    // A window over target [off, off + len) with `p`; its context in `ctx`.
    void bind_target(size_t off, size_t len, DAT_MEM_PRIV_FLAGS p, DAT_RMR_CONTEXT *ctx) {
        ASSERT_TRUE(bind_completes(server, rmr, target, off, len, p, ctx));
    }

    // The middle page of the target, through a window with `p`.
    DAT_RMR_CONTEXT bind_middle(DAT_MEM_PRIV_FLAGS p) {
        DAT_RMR_CONTEXT ctx = 0;
        bind_target(kPage, kPage, p, &ctx);
        return ctx;
    }

    DAT_RMR_TRIPLET at(size_t off, size_t len, DAT_RMR_CONTEXT ctx) const {
        DAT_RMR_TRIPLET t{};
        t.virtual_address = reinterpret_cast<uintptr_t>(target.data + off);
        t.segment_length = static_cast<DAT_SEG_LENGTH>(len);
        t.rmr_context = ctx;
        return t;
    }

    void expect_target_unchanged() {
        sync_rdma_write(server.ia.ia, target, 0, target.size);
        EXPECT_EQ(target.mismatch(0, target.size, kTargetSeed, 0), -1) << "target memory changed";
    }

    // An RDMA Write (or Read) the target must refuse; the target stays as it was.
    void expect_refused(bool write, const DAT_RMR_TRIPLET &remote, bool must_break = false) {
        ASSERT_NO_FATAL_FAILURE(expect_rdma_refused(
            write, local, kPage, remote, kTargetSeed,
            static_cast<size_t>(remote.virtual_address - reinterpret_cast<uintptr_t>(target.data)), must_break));
        expect_target_unchanged();
        // Give a late placement the chance to show.
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        expect_target_unchanged();
    }

    // A second connection between the two IAs, on the Sides' EVDs, its
    // server Endpoint in `server_pz`. Use with ASSERT_NO_FATAL_FAILURE.
    void connect_second(DAT_PZ_HANDLE server_pz, DAT_EP_HANDLE *c_ep, DAT_EP_HANDLE *s_ep) {
        DAT_EP_ATTR ca = suite_ep_attr(client.ia.ia), sa = suite_ep_attr(server.ia.ia);
        ASSERT_DAT_OK(
            dat_ep_create(client.ia.ia, client.ia.pz, client.recv_evd, client.req_evd, client.conn_evd, &ca, c_ep));
        ASSERT_DAT_OK(
            dat_ep_create(server.ia.ia, server_pz, server.recv_evd, server.req_evd, server.conn_evd, &sa, s_ep));
        ASSERT_DAT_OK(connect_ep(*c_ep, server_addr.ptr(), port));
        DAT_CR_HANDLE cr = server_wait_cr();
        ASSERT_NE(cr, DAT_HANDLE_NULL);
        ASSERT_NO_FATAL_FAILURE(accept_pair(cr, nullptr, 0, nullptr, nullptr, *s_ep));
    }

    // A window of Endpoint scope bound through the first connection: the
    // second connection (same PZs) is refused, the first still reaches it.
    // A window of dat_rmr_create_for_ep over the middle page, bound through
    // server.ep, with remote read and write. False: the IA offers none
    // (checked; the caller skips). Use with ASSERT_NO_FATAL_FAILURE.
    bool bind_ep_window(DAT_RMR_HANDLE *ep_rmr, DAT_RMR_CONTEXT *ctx) {
        if (!ep_scope_offered(server.ia.ia, server.ia.pz))
            return false;
        EXPECT_DAT_OK(dat_rmr_create_for_ep(server.ia.pz, ep_rmr));
        EXPECT_TRUE(bind_completes(server, *ep_rmr, target, kPage, kPage, kRemoteRw, ctx));
        return true;
    }

    void ep_window_through_another_connection(bool write) {
        DAT_RMR_HANDLE ep_rmr = DAT_HANDLE_NULL;
        DAT_RMR_CONTEXT ctx = 0;
        if (!bind_ep_window(&ep_rmr, &ctx))
            GTEST_SKIP() << kNoEpScope;
        ASSERT_FALSE(HasFailure());
        DAT_EP_HANDLE c2 = DAT_HANDLE_NULL, s2 = DAT_HANDLE_NULL;
        ASSERT_NO_FATAL_FAILURE(connect_second(server.ia.pz, &c2, &s2));
        std::swap(client.ep, c2); // the checks post on client.ep
        expect_refused(write, at(kPage, 512, ctx));
        std::swap(client.ep, c2);
        if (write)
            ASSERT_NO_FATAL_FAILURE(expect_write_lands(at(kPage, 512, ctx), 0x37, 0x69));
        else
            ASSERT_NO_FATAL_FAILURE(expect_read_returns(at(kPage, 512, ctx), 0x69));
        EXPECT_DAT_OK(dat_ep_free(c2));
        EXPECT_DAT_OK(dat_ep_free(s2));
        EXPECT_DAT_OK(dat_rmr_free(ep_rmr));
    }

    // A window of a second PZ, bound through a connection whose server
    // Endpoint is in that PZ: refused through the first connection (PZ 1),
    // reached through its own.
    void window_of_another_pz(bool write) {
        DAT_PZ_HANDLE pz2 = DAT_HANDLE_NULL;
        ASSERT_DAT_OK(dat_pz_create(server.ia.ia, &pz2));
        Buffer target2;
        ASSERT_DAT_OK(target2.create(server.ia.ia, pz2, 3 * kPage, kLocalRw));
        target2.fill(kTargetSeed);
        DAT_RMR_HANDLE rmr2 = DAT_HANDLE_NULL;
        ASSERT_DAT_OK(dat_rmr_create(pz2, &rmr2));
        DAT_EP_HANDLE c2 = DAT_HANDLE_NULL, s2 = DAT_HANDLE_NULL;
        ASSERT_NO_FATAL_FAILURE(connect_second(pz2, &c2, &s2));
        std::swap(server.ep, s2); // bind_completes binds through server.ep
        DAT_RMR_CONTEXT ctx = 0;
        const bool bound = bind_completes(server, rmr2, target2, kPage, kPage, kRemoteRw, &ctx);
        std::swap(server.ep, s2);
        ASSERT_TRUE(bound);
        DAT_RMR_TRIPLET remote{};
        remote.virtual_address = reinterpret_cast<uintptr_t>(target2.data + kPage);
        remote.segment_length = 512;
        remote.rmr_context = ctx;
        ASSERT_NO_FATAL_FAILURE(expect_rdma_refused(write, local, kPage, remote, kTargetSeed, kPage));
        std::this_thread::sleep_for(std::chrono::milliseconds(100)); // a late placement would show
        sync_rdma_write(server.ia.ia, target2, 0, target2.size);
        EXPECT_EQ(target2.mismatch(0, target2.size, kTargetSeed, 0), -1) << "the other PZ's memory changed";
        // Its own connection reaches it: the refusal was the PZ's doing.
        local.fill(0x38);
        DAT_LMR_TRIPLET l = local.iov(kPage, 512);
        const DAT_UINT64 ck = 0x6a;
        ASSERT_DAT_OK(write ? dat_ep_post_rdma_write(c2, 1, &l, cookie(ck), &remote, DAT_COMPLETION_DEFAULT_FLAG)
                            : dat_ep_post_rdma_read(c2, 1, &l, cookie(ck), &remote, DAT_COMPLETION_DEFAULT_FLAG));
        ASSERT_TRUE(wait_dto_ok(client.req_evd, ck));
        if (write) {
            EXPECT_EQ(landed(server.ia.ia, target2, kPage, 512, 0x38, kPage), -1) << "the write did not land";
        } else {
            EXPECT_EQ(local.mismatch(kPage, 512, kTargetSeed, kPage), -1) << "the read brought back other data";
        }
        EXPECT_DAT_OK(dat_ep_free(c2));
        EXPECT_DAT_OK(dat_ep_free(s2));
        EXPECT_DAT_OK(dat_rmr_free(rmr2));
        target2.release();
        EXPECT_DAT_OK(dat_pz_free(pz2));
    }

    // An RDMA Write of `len` bytes of the client's pattern `seed` to `remote` succeeds and lands.
    void expect_write_lands(const DAT_RMR_TRIPLET &remote, unsigned char seed, DAT_UINT64 ck) {
        local.fill(seed);
        DAT_LMR_TRIPLET l = local.iov(kPage, remote.segment_length);
        ASSERT_DAT_OK(dat_ep_post_rdma_write(client.ep, 1, &l, cookie(ck), &remote, DAT_COMPLETION_DEFAULT_FLAG));
        ASSERT_TRUE(wait_dto_ok(client.req_evd, ck));
        const size_t off = static_cast<size_t>(remote.virtual_address - reinterpret_cast<uintptr_t>(target.data));
        EXPECT_EQ(landed(server.ia.ia, target, off, remote.segment_length, seed, kPage), -1) << "the write did not land";
        EXPECT_EQ(target.mismatch(0, off, kTargetSeed, 0), -1) << "memory before the write changed";
        const size_t end = off + remote.segment_length;
        EXPECT_EQ(target.mismatch(end, target.size - end, kTargetSeed, end), -1) << "memory after the write changed";
    }

    // An RDMA Read of `remote` succeeds and brings back the target's pattern.
    void expect_read_returns(const DAT_RMR_TRIPLET &remote, DAT_UINT64 ck) {
        local.fill_byte(0);
        DAT_LMR_TRIPLET l = local.iov(kPage, remote.segment_length);
        ASSERT_DAT_OK(dat_ep_post_rdma_read(client.ep, 1, &l, cookie(ck), &remote, DAT_COMPLETION_DEFAULT_FLAG));
        ASSERT_TRUE(wait_dto_ok(client.req_evd, ck));
        sync_rdma_read(client.ia.ia, local, kPage, remote.segment_length);
        const size_t off = static_cast<size_t>(remote.virtual_address - reinterpret_cast<uintptr_t>(target.data));
        EXPECT_EQ(local.mismatch(kPage, remote.segment_length, kTargetSeed, off), -1)
            << "the read brought back other data";
    }

    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
    Buffer local, target;
};

// ---- dat_rmr_bind --------------------------------------------------------------------------------------

TEST_P(RmrConnectedTest, BindCompletesOnTheRequestEvdWithANewContext) {
    DAT_RMR_CONTEXT ctx = 0;
    // dat_rmr_bind(3DAT): "The Consumer is notified of the completion of this operation through a
    // rmr_bind Completion event on the request_evd_handle of the specified Endpoint"; "By default,
    // dat_rmr_bind() generates notification completions."
    ASSERT_NO_FATAL_FAILURE(bind_target(kPage + 256, 1024, kRemoteRw, &ctx));
    DAT_RMR_PARAM p{};
    ASSERT_DAT_OK(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &p));
    EXPECT_EQ(p.ia_handle, server.ia.ia);
    EXPECT_EQ(p.pz_handle, server.ia.pz);
    EXPECT_EQ(p.lmr_triplet.virtual_address, reinterpret_cast<uintptr_t>(target.data + kPage + 256));
    EXPECT_EQ(p.lmr_triplet.segment_length, 1024u);
    EXPECT_EQ(p.lmr_triplet.lmr_context, target.lmr_context);
    EXPECT_EQ(p.mem_priv & kRemoteRw, kRemoteRw);
    EXPECT_EQ(p.rmr_context, ctx);
    EXPECT_EQ(p.va_type, DAT_VA_TYPE_VA);
    // A window is not the LMR: its context differs from the LMR's (which has none here).
    EXPECT_NE(ctx, target.rmr_context);
    // Nothing else came.
    EXPECT_TRUE(no_event(server.req_evd));
    EXPECT_TRUE(no_event(client.conn_evd));
}

TEST_P(RmrConnectedTest, RebindGivesANewContext) {
    // dat_rmr_bind(3DAT): "generates a new rmr_context".
    DAT_RMR_CONTEXT first = bind_middle(kRemoteRw);
    DAT_RMR_CONTEXT second = bind_middle(kRemoteRw);
    EXPECT_NE(first, second);
    DAT_RMR_PARAM p{};
    ASSERT_DAT_OK(dat_rmr_query(rmr, DAT_RMR_FIELD_RMR_CONTEXT, &p));
    EXPECT_EQ(p.rmr_context, second);
    // Two windows over the same memory are two contexts too.
    DAT_RMR_HANDLE other = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_rmr_create(server.ia.pz, &other));
    DAT_RMR_CONTEXT third = 0;
    ASSERT_TRUE(bind_completes(server, other, target, kPage, kPage, kRemoteRw, &third));
    EXPECT_NE(third, second);
    EXPECT_NE(third, first);
    EXPECT_DAT_OK(dat_rmr_free(other));
}

TEST_P(RmrConnectedTest, BindWithSuppressFlagPostsNoEvent) {
    DAT_LMR_TRIPLET t = target.iov(kPage, kPage);
    DAT_RMR_CONTEXT ctx = 0;
    ASSERT_DAT_OK(dat_rmr_bind(rmr, target.lmr, &t, kRemoteWrite, DAT_VA_TYPE_VA, server.ep, rmr_cookie(7),
                               DAT_COMPLETION_SUPPRESS_FLAG, &ctx));
    EXPECT_TRUE(no_event(server.req_evd));
    // Bound all the same.
    ASSERT_NO_FATAL_FAILURE(expect_write_lands(at(kPage, 512, ctx), 0x21, 0x51));
}

TEST_P(RmrConnectedTest, BindWithBarrierFenceCompletes) {
    DAT_LMR_TRIPLET t = target.iov(kPage, kPage);
    DAT_RMR_CONTEXT ctx = 0;
    ASSERT_DAT_OK(dat_rmr_bind(rmr, target.lmr, &t, kRemoteRead, DAT_VA_TYPE_VA, server.ep, rmr_cookie(8),
                               DAT_COMPLETION_BARRIER_FENCE_FLAG, &ctx));
    EXPECT_TRUE(bind_event(server.req_evd, rmr, 8, DAT_RMR_BIND_SUCCESS));
    ASSERT_NO_FATAL_FAILURE(expect_read_returns(at(kPage, 512, ctx), 0x52));
}

TEST_P(RmrConnectedTest, BindAcceptsANullLmrHandle) {
    // DAT 2.0 passes the LMR both as a handle and in the triplet; the triplet's
    // lmr_context names it (OFED's programs may pass no handle).
    DAT_LMR_TRIPLET t = target.iov(kPage, kPage);
    DAT_RMR_CONTEXT ctx = 0;
    ASSERT_DAT_OK(dat_rmr_bind(rmr, DAT_HANDLE_NULL, &t, kRemoteWrite, DAT_VA_TYPE_VA, server.ep, rmr_cookie(9),
                               DAT_COMPLETION_DEFAULT_FLAG, &ctx));
    EXPECT_TRUE(bind_event(server.req_evd, rmr, 9, DAT_RMR_BIND_SUCCESS));
    ASSERT_NO_FATAL_FAILURE(expect_write_lands(at(kPage + 100, 700, ctx), 0x22, 0x53));
}

TEST_P(RmrConnectedTest, UnbindOfAnUnboundRmrCompletes) {
    EXPECT_TRUE(unbind_completes(server, rmr));
    EXPECT_TRUE(unbind_completes(server, rmr));
}

TEST_P(RmrConnectedTest, BindBadHandles) {
    DAT_LMR_TRIPLET t = target.iov(kPage, kPage);
    DAT_RMR_CONTEXT ctx = 0;
    auto bind = [&](DAT_RMR_HANDLE r, DAT_LMR_HANDLE l, DAT_EP_HANDLE e) {
        return dat_rmr_bind(r, l, &t, kRemoteRw, DAT_VA_TYPE_VA, e, rmr_cookie(1), DAT_COMPLETION_DEFAULT_FLAG, &ctx);
    };
    // dat_rmr_bind(3DAT): DAT_INVALID_HANDLE "Invalid DAT handle."
    EXPECT_DAT_INVALID_HANDLE(bind(DAT_HANDLE_NULL, target.lmr, server.ep), HandleKind::Rmr);
    EXPECT_DAT_INVALID_HANDLE(bind(target.lmr, target.lmr, server.ep), HandleKind::Rmr);
    EXPECT_DAT_INVALID_HANDLE(bind(rmr, target.lmr, DAT_HANDLE_NULL), HandleKind::Ep);
    EXPECT_DAT_INVALID_HANDLE(bind(rmr, target.lmr, server.ia.pz), HandleKind::Ep);
    // The Endpoint of another IA (the client's): not an Endpoint of this RMR's IA.
    EXPECT_DAT_INVALID_HANDLE(bind(rmr, target.lmr, client.ep), HandleKind::Ep);
    EXPECT_DAT_INVALID_HANDLE(bind(rmr, server.ia.pz, server.ep), HandleKind::Lmr);
    EXPECT_DAT_INVALID_HANDLE(bind(rmr, local.lmr, server.ep), HandleKind::Lmr); // the client's LMR
    EXPECT_TRUE(no_event(server.req_evd));
    // Nothing was bound: the LMR is free to go.
    EXPECT_DAT_OK(target.free_lmr());
}

TEST_P(RmrConnectedTest, BindBadParameters) {
    DAT_RMR_CONTEXT ctx = 0;
    const DAT_LMR_TRIPLET good = target.iov(kPage, kPage);
    auto bind = [&](const DAT_LMR_TRIPLET *t, DAT_LMR_HANDLE l, DAT_MEM_PRIV_FLAGS p, DAT_VA_TYPE va,
                    DAT_COMPLETION_FLAGS f,
                    DAT_RMR_CONTEXT *out) { return dat_rmr_bind(rmr, l, t, p, va, server.ep, rmr_cookie(2), f, out); };
    // dat_rmr_bind(3DAT): DAT_INVALID_PARAMETER "Invalid parameter. For example, the
    // target_address or segment_length exceeded the limits of the existing LMR."
    EXPECT_DAT_ERR(bind(nullptr, target.lmr, kRemoteRw, DAT_VA_TYPE_VA, DAT_COMPLETION_DEFAULT_FLAG, &ctx),
                   DAT_INVALID_PARAMETER, 0);
    DAT_LMR_TRIPLET t = target.iov(3 * kPage - 100, 200); // past the end of the LMR
    EXPECT_DAT_ERR(bind(&t, target.lmr, kRemoteRw, DAT_VA_TYPE_VA, DAT_COMPLETION_DEFAULT_FLAG, &ctx),
                   DAT_INVALID_PARAMETER, 0);
    t = target.iov(0, 100);
    t.virtual_address -= 1; // one byte before it
    EXPECT_DAT_ERR(bind(&t, target.lmr, kRemoteRw, DAT_VA_TYPE_VA, DAT_COMPLETION_DEFAULT_FLAG, &ctx),
                   DAT_INVALID_PARAMETER, 0);
    t = target.iov(kPage, 0xFFFFFFFFu); // a length that wraps
    EXPECT_DAT_ERR(bind(&t, target.lmr, kRemoteRw, DAT_VA_TYPE_VA, DAT_COMPLETION_DEFAULT_FLAG, &ctx),
                   DAT_INVALID_PARAMETER, 0);
    t = good;
    t.lmr_context ^= 0x5a5a0000u; // a context that names no LMR
    EXPECT_DAT_ERR(bind(&t, DAT_HANDLE_NULL, kRemoteRw, DAT_VA_TYPE_VA, DAT_COMPLETION_DEFAULT_FLAG, &ctx),
                   DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(bind(&t, target.lmr, kRemoteRw, DAT_VA_TYPE_VA, DAT_COMPLETION_DEFAULT_FLAG, &ctx),
                   DAT_INVALID_PARAMETER, 0);
    // Privileges, va_type, completion flags outside their definitions.
    EXPECT_DAT_ERR(bind(&good, target.lmr, priv(0x100), DAT_VA_TYPE_VA, DAT_COMPLETION_DEFAULT_FLAG, &ctx),
                   DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(bind(&good, target.lmr, kRemoteRw, static_cast<DAT_VA_TYPE>(7), DAT_COMPLETION_DEFAULT_FLAG, &ctx),
                   DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(bind(&good, target.lmr, kRemoteRw, DAT_VA_TYPE_VA, static_cast<DAT_COMPLETION_FLAGS>(0x100), &ctx),
                   DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(bind(&good, target.lmr, kRemoteRw, DAT_VA_TYPE_VA, DAT_COMPLETION_SOLICITED_WAIT_FLAG, &ctx),
                   DAT_INVALID_PARAMETER, 0);
    // "The value of DAT_COMPLETION_UNSIGNALLED_FLAG is only valid if the Endpoint Request
    // Completion Flags DAT_COMPLETION_UNSIGNALLED_FLAG. Otherwise, DAT_INVALID_PARAMETER is returned."
    ASSERT_EQ(query_ep_attr(server.ep).request_completion_flags & DAT_COMPLETION_UNSIGNALLED_FLAG, 0);
    EXPECT_DAT_ERR(bind(&good, target.lmr, kRemoteRw, DAT_VA_TYPE_VA, DAT_COMPLETION_UNSIGNALLED_FLAG, &ctx),
                   DAT_INVALID_PARAMETER, 0);
    // Nowhere to return the new rmr_context.
    EXPECT_DAT_ERR(bind(&good, target.lmr, kRemoteRw, DAT_VA_TYPE_VA, DAT_COMPLETION_DEFAULT_FLAG, nullptr),
                   DAT_INVALID_PARAMETER, 0);
    // DAT_MODEL_NOT_SUPPORTED "The requested Model was not supported by the Provider": zero-based
    // addresses, where the IA says it has none.
    DAT_IA_ATTR ia_attr{};
    ASSERT_DAT_OK(query_ia(server.ia.ia, &ia_attr, nullptr));
    if (!ia_attr.zb_supported)
        EXPECT_DAT_ERR(bind(&good, target.lmr, kRemoteRw, DAT_VA_TYPE_ZB, DAT_COMPLETION_DEFAULT_FLAG, &ctx),
                       DAT_MODEL_NOT_SUPPORTED, 0);
    EXPECT_TRUE(no_event(server.req_evd));
    EXPECT_DAT_OK(target.free_lmr()); // nothing was bound
}

TEST_P(RmrConnectedTest, BindAcrossProtectionZonesIsProtectionViolation) {
    // dat_rmr_bind(3DAT): DAT_PROTECTION_VIOLATION "Protection violation for local or remote memory
    // access." dat_rmr_create(3DAT): "The pz_handle parameter provide Consumers a way to restrict
    // access to an RMR by authorized connection only."
    DAT_PZ_HANDLE pz2 = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_pz_create(server.ia.ia, &pz2));
    DAT_RMR_CONTEXT ctx = 0;
    DAT_LMR_TRIPLET t = target.iov(kPage, kPage);
    // The RMR in another PZ than the Endpoint (and the LMR).
    DAT_RMR_HANDLE foreign = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_rmr_create(pz2, &foreign));
    EXPECT_DAT_ERR(dat_rmr_bind(foreign, target.lmr, &t, kRemoteRw, DAT_VA_TYPE_VA, server.ep, rmr_cookie(3),
                                DAT_COMPLETION_DEFAULT_FLAG, &ctx),
                   DAT_PROTECTION_VIOLATION, 0);
    // The LMR in another PZ than the RMR and the Endpoint.
    Buffer other;
    ASSERT_DAT_OK(other.create(server.ia.ia, pz2, 2 * kPage, kLocalRw));
    DAT_LMR_TRIPLET o = other.iov(0, kPage);
    EXPECT_DAT_ERR(dat_rmr_bind(rmr, other.lmr, &o, kRemoteRw, DAT_VA_TYPE_VA, server.ep, rmr_cookie(4),
                                DAT_COMPLETION_DEFAULT_FLAG, &ctx),
                   DAT_PROTECTION_VIOLATION, 0);
    EXPECT_TRUE(no_event(server.req_evd));
    EXPECT_DAT_OK(dat_rmr_free(foreign));
    EXPECT_DAT_OK(other.free_lmr());
    EXPECT_DAT_OK(dat_pz_free(pz2));
}

TEST_P(RmrConnectedTest, RemoteWriteWindowOverLmrWithoutLocalWriteIsPrivilegesViolation) {
    // dat_rmr_bind(3DAT): "Set RMR's DAT_MEM_PRIV_REMOTE_WRITE_FLAG requires that LMR's
    // DAT_MEM_PRIV_LOCAL_WRITE_FLAG is also set, or the operation fails and returns
    // DAT_PRIVILEGES_VIOLATION."
    Buffer ro;
    ASSERT_DAT_OK(server.register_buffer(ro, 2 * kPage, DAT_MEM_PRIV_LOCAL_READ_FLAG));
    DAT_LMR_TRIPLET t = ro.iov(0, kPage);
    DAT_RMR_CONTEXT ctx = 0;
    EXPECT_DAT_ERR(dat_rmr_bind(rmr, ro.lmr, &t, kRemoteWrite, DAT_VA_TYPE_VA, server.ep, rmr_cookie(5),
                                DAT_COMPLETION_DEFAULT_FLAG, &ctx),
                   DAT_PRIVILEGES_VIOLATION, 0);
    EXPECT_TRUE(no_event(server.req_evd));
    // Remote read over the same LMR is fine.
    EXPECT_TRUE(bind_completes(server, rmr, ro, 0, kPage, kRemoteRead, &ctx));
    EXPECT_TRUE(unbind_completes(server, rmr));
    EXPECT_DAT_OK(ro.free_lmr());
}

TEST_P(RmrConnectedTest, BindOnDisconnectedEndpointIsFlushed) {
    ASSERT_NO_FATAL_FAILURE(disconnect_pair(client));
    ASSERT_EQ(ep_state(server.ep), DAT_EP_STATE_DISCONNECTED);
    DAT_LMR_TRIPLET t = target.iov(kPage, kPage);
    DAT_RMR_CONTEXT ctx = 0;
    // dat_rmr_bind(3DAT): "If the operation returns successfully for the Endpoint in
    // DAT_EP_STATE_DISCONNECTED state, the posted RMR Bind is immediately flushed to
    // request_evd_handle."
    ASSERT_DAT_OK(dat_rmr_bind(rmr, target.lmr, &t, kRemoteRw, DAT_VA_TYPE_VA, server.ep, rmr_cookie(6),
                               DAT_COMPLETION_DEFAULT_FLAG, &ctx));
    EXPECT_TRUE(bind_event(server.req_evd, rmr, 6, DAT_RMR_BIND_FAILURE));
    // The flushed bind bound nothing.
    EXPECT_DAT_OK(target.free_lmr());
}

TEST_P(RmrConnectedTest, BindCompletionComesAfterEarlierRequestsOfTheEndpoint) {
    // A bind is a request of its Endpoint: its completion is not reported
    // ahead of DTOs posted before it (libfabric tcp completes large RDMA
    // Writes late, the bind at once).
    const DAT_EP_ATTR a = query_ep_attr(server.ep);
    const int writes = std::max(1, std::min(8, a.max_request_dtos - 2));
    const size_t each = std::min<size_t>(1 << 20, a.max_rdma_size ? a.max_rdma_size : (1 << 20));
    Buffer src, sink;
    ASSERT_DAT_OK(server.register_buffer(src, each));
    ASSERT_DAT_OK(client.register_buffer(sink, each * writes, kRemoteWrite));
    src.fill(0x62);
    for (int i = 0; i < writes; ++i) {
        DAT_LMR_TRIPLET l = src.iov(0, each);
        DAT_RMR_TRIPLET rem = sink.rmr(each * i, each);
        ASSERT_DAT_OK(dat_ep_post_rdma_write(server.ep, 1, &l, cookie(0x700 + i), &rem, DAT_COMPLETION_DEFAULT_FLAG));
    }
    DAT_LMR_TRIPLET t = target.iov(kPage, kPage);
    DAT_RMR_CONTEXT ctx = 0;
    ASSERT_DAT_OK(dat_rmr_bind(rmr, target.lmr, &t, kRemoteRw, DAT_VA_TYPE_VA, server.ep, rmr_cookie(9),
                               DAT_COMPLETION_DEFAULT_FLAG, &ctx));
    for (int i = 0; i < writes; ++i)
        ASSERT_TRUE(wait_dto_ok(server.req_evd, 0x700 + i)) << "completion " << i << " of " << writes << " writes";
    EXPECT_TRUE(bind_event(server.req_evd, rmr, 9, DAT_RMR_BIND_SUCCESS));
    ASSERT_NO_FATAL_FAILURE(expect_write_lands(at(kPage, 512, ctx), 0x23, 0x53));
}

// ---- what a binding holds ---------------------------------------------------------------------------

TEST_P(RmrConnectedTest, LmrFreeRefusedWhileAWindowIsBoundToIt) {
    (void)bind_middle(kRemoteRw);
    // dat_lmr_free(3DAT): "The LMR cannot be destroyed if it is in use by an RMR" ->
    // DAT_INVALID_STATE.
    EXPECT_DAT_ERR(dat_lmr_free(target.lmr), DAT_INVALID_STATE, 0);
    DAT_LMR_PARAM p{};
    EXPECT_DAT_OK(dat_lmr_query(target.lmr, DAT_LMR_FIELD_ALL, &p)); // still there
    // Unbound (a bind of length 0), the LMR is free to go.
    ASSERT_TRUE(unbind_completes(server, rmr));
    EXPECT_DAT_OK(target.free_lmr());
}

TEST_P(RmrConnectedTest, RmrFreeOfABoundWindowReleasesTheLmr) {
    (void)bind_middle(kRemoteRw);
    EXPECT_DAT_ERR(dat_lmr_free(target.lmr), DAT_INVALID_STATE, 0);
    // dat_rmr_free(3DAT): "allowed on either bound or unbound RMR. If RMR is bound,
    // dat_rmr_free() unbinds ... and then free RMR."
    EXPECT_DAT_OK(dat_rmr_free(rmr));
    rmr = DAT_HANDLE_NULL;
    EXPECT_DAT_OK(target.free_lmr());
}

TEST_P(RmrConnectedTest, RebindToAnotherLmrMovesTheHold) {
    Buffer second;
    ASSERT_DAT_OK(server.register_buffer(second, 2 * kPage, kLocalRw));
    (void)bind_middle(kRemoteRw);
    DAT_RMR_CONTEXT ctx = 0;
    ASSERT_TRUE(bind_completes(server, rmr, second, 0, kPage, kRemoteRw, &ctx));
    EXPECT_DAT_OK(target.free_lmr()); // no longer bound to
    EXPECT_DAT_ERR(dat_lmr_free(second.lmr), DAT_INVALID_STATE, 0);
    ASSERT_TRUE(unbind_completes(server, rmr));
    EXPECT_DAT_OK(second.free_lmr());
}

TEST_P(RmrConnectedTest, AbruptIaCloseFreesABoundWindow) {
    (void)bind_middle(kRemoteRw);
    EXPECT_DAT_OK(dat_ia_close(server.ia.ia, DAT_CLOSE_ABRUPT_FLAG));
    DAT_RMR_PARAM p{};
    EXPECT_DAT_INVALID_HANDLE(dat_rmr_query(rmr, kRmrIaPz, &p), HandleKind::Rmr);
    // Everything of the server's IA is gone with it.
    rmr = DAT_HANDLE_NULL;
    target.lmr = DAT_HANDLE_NULL;
    psp = DAT_HANDLE_NULL;
    server.ep = server.cr_evd = server.conn_evd = server.req_evd = server.recv_evd = DAT_HANDLE_NULL;
    server.ia.pz = server.ia.ia = DAT_HANDLE_NULL;
}

// A window's binding ends with the Endpoint it was bound through: freeing
// that Endpoint does not wait for the window (a device may hold a QP while
// a type 2 window is bound through it), and the window can be bound again
// through another connection.
TEST_P(RmrConnectedTest, FreeingTheEndpointOfABoundWindowReturnsPromptly) {
    (void)bind_middle(kRemoteRw);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_DAT_OK(dat_ep_free(server.ep));
    server.ep = DAT_HANDLE_NULL;
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_LT(took, std::chrono::seconds(10))
        << "dat_ep_free took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
    DAT_EVENT ev{};
    ASSERT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED, &ev)); // the first connection's end
    DAT_EP_HANDLE c2 = DAT_HANDLE_NULL, s2 = DAT_HANDLE_NULL;
    ASSERT_NO_FATAL_FAILURE(connect_second(server.ia.pz, &c2, &s2));
    std::swap(server.ep, s2);
    DAT_RMR_CONTEXT ctx = 0;
    const bool bound = bind_completes(server, rmr, target, kPage, kPage, kRemoteWrite, &ctx);
    std::swap(server.ep, s2);
    ASSERT_TRUE(bound);
    std::swap(client.ep, c2); // expect_write_lands writes through client.ep
    expect_write_lands(at(kPage, 512, ctx), 0x39, 0x69);
    std::swap(client.ep, c2);
    EXPECT_DAT_OK(dat_ep_free(c2));
    EXPECT_DAT_OK(dat_ep_free(s2));
}

// ---- RDMA through windows ----------------------------------------------------------------------------

TEST_P(RmrConnectedTest, RdmaWriteThroughAWindowLands) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteWrite);
    ASSERT_NO_FATAL_FAILURE(expect_write_lands(at(kPage + 300, 1000, ctx), 0x31, 0x61));
    target.fill(kTargetSeed);
    // The whole window, to its last byte.
    ASSERT_NO_FATAL_FAILURE(expect_write_lands(at(kPage, kPage, ctx), 0x32, 0x62));
}

TEST_P(RmrConnectedTest, RdmaReadThroughAWindowReturnsTheTarget) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteRead);
    ASSERT_NO_FATAL_FAILURE(expect_read_returns(at(kPage + 40, 2000, ctx), 0x63));
    ASSERT_NO_FATAL_FAILURE(expect_read_returns(at(kPage, kPage, ctx), 0x64));
    expect_target_unchanged();
}

TEST_P(RmrConnectedTest, WindowsOfDatRmrCreateForEpWork) {
    DAT_RMR_HANDLE ep_rmr = DAT_HANDLE_NULL;
    DAT_RMR_CONTEXT ctx = 0;
    if (!bind_ep_window(&ep_rmr, &ctx))
        GTEST_SKIP() << kNoEpScope;
    ASSERT_FALSE(HasFailure());
    ASSERT_NO_FATAL_FAILURE(expect_write_lands(at(kPage, 512, ctx), 0x33, 0x65));
    EXPECT_DAT_OK(dat_rmr_free(ep_rmr));
}

// dat_rmr_create_for_ep(3DAT): a window of Endpoint scope is "bound to at
// most one EP at a time": another connection of the same PZ must not reach it.
TEST_P(RmrConnectedTest, EndpointScopedWindowIsUnreachableThroughAnotherConnectionWrite) {
    ASSERT_NO_FATAL_FAILURE(ep_window_through_another_connection(true));
}

TEST_P(RmrConnectedTest, EndpointScopedWindowIsUnreachableThroughAnotherConnectionRead) {
    ASSERT_NO_FATAL_FAILURE(ep_window_through_another_connection(false));
}

// dat_ep_create(3DAT): "Only memory referred to by LMRs and RMRs that match the
// Endpoint Protection Zone can be accessed by the Endpoint": a window of
// another PZ (bound through that PZ's own connection) is out of reach of
// this connection's Endpoints.
TEST_P(RmrConnectedTest, RdmaWriteThroughAWindowOfAnotherPz) { ASSERT_NO_FATAL_FAILURE(window_of_another_pz(true)); }

TEST_P(RmrConnectedTest, RdmaReadThroughAWindowOfAnotherPz) { ASSERT_NO_FATAL_FAILURE(window_of_another_pz(false)); }

// ---- window security: what must be refused ----------------------------------------------------------

TEST_P(RmrConnectedTest, RdmaWriteThroughAnUnboundWindow) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteRw);
    ASSERT_TRUE(unbind_completes(server, rmr));
    expect_refused(true, at(kPage, 512, ctx));
}

TEST_P(RmrConnectedTest, RdmaReadThroughAnUnboundWindow) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteRw);
    ASSERT_TRUE(unbind_completes(server, rmr));
    expect_refused(false, at(kPage, 512, ctx));
}

TEST_P(RmrConnectedTest, RdmaWriteWithTheContextOfAnEarlierBinding) {
    DAT_RMR_CONTEXT old_ctx = bind_middle(kRemoteRw);
    DAT_RMR_CONTEXT new_ctx = bind_middle(kRemoteRw);
    ASSERT_NE(old_ctx, new_ctx);
    // The new context works...
    ASSERT_NO_FATAL_FAILURE(expect_write_lands(at(kPage, 256, new_ctx), 0x34, 0x66));
    target.fill(kTargetSeed);
    // ... the old one must not: dat_rmr_bind(3DAT): "Any RDMA DTO that uses the previous value of
    // rmr_context after the dat_rmr_bind() is completed fail and report a protection violation."
    expect_refused(true, at(kPage, 256, old_ctx));
}

TEST_P(RmrConnectedTest, RdmaReadWithTheContextOfAnEarlierBinding) {
    DAT_RMR_CONTEXT old_ctx = bind_middle(kRemoteRw);
    // Rebound elsewhere in the same LMR.
    DAT_RMR_CONTEXT new_ctx = 0;
    ASSERT_NO_FATAL_FAILURE(bind_target(2 * kPage, kPage, kRemoteRw, &new_ctx));
    ASSERT_NE(old_ctx, new_ctx);
    expect_refused(false, at(kPage, 256, old_ctx));
}

// dat_rmr_free(3DAT): "Any remote RDMA operation that uses the destroyed RMR rmr_context, whose
// Transport-specific request arrived to the local host after the dat_rmr_free() has completed,
// fails and reports a protection violation."
TEST_P(RmrConnectedTest, RdmaWriteAfterTheWindowWasFreed) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteRw);
    ASSERT_DAT_OK(dat_rmr_free(rmr));
    rmr = DAT_HANDLE_NULL;
    expect_refused(true, at(kPage, 512, ctx));
}

TEST_P(RmrConnectedTest, RdmaReadAfterTheWindowWasFreed) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteRw);
    ASSERT_DAT_OK(dat_rmr_free(rmr));
    rmr = DAT_HANDLE_NULL;
    expect_refused(false, at(kPage, 512, ctx));
}

// Outside the window but inside the LMR under it: the window, not the LMR, is what was exposed.
TEST_P(RmrConnectedTest, RdmaWriteStraddlingTheEndOfTheWindow) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteRw);
    expect_refused(true, at(2 * kPage - 32, 64, ctx));
}

TEST_P(RmrConnectedTest, RdmaWriteStraddlingTheStartOfTheWindow) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteRw);
    expect_refused(true, at(kPage - 32, 64, ctx));
}

TEST_P(RmrConnectedTest, RdmaWriteWhollyOutsideTheWindowInsideTheLmr) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteRw);
    expect_refused(true, at(2 * kPage + 100, 200, ctx));
}

TEST_P(RmrConnectedTest, RdmaReadStraddlingTheEndOfTheWindow) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteRw);
    expect_refused(false, at(2 * kPage - 32, 64, ctx));
}

TEST_P(RmrConnectedTest, RdmaReadWhollyOutsideTheWindowInsideTheLmr) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteRw);
    expect_refused(false, at(100, 200, ctx));
}

// dat_rmr_bind(3DAT): "The mem_privileges parameter allows Consumers to restrict the type of
// remote accesses to the registered RMR by RDMA DTOs."
TEST_P(RmrConnectedTest, RdmaWriteThroughAReadOnlyWindow) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteRead);
    expect_refused(true, at(kPage, 512, ctx));
}

TEST_P(RmrConnectedTest, RdmaReadThroughAWriteOnlyWindow) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteWrite);
    expect_refused(false, at(kPage, 512, ctx));
}

TEST_P(RmrConnectedTest, RdmaWriteThroughAWindowWithoutRemotePrivileges) {
    DAT_RMR_CONTEXT ctx = bind_middle(DAT_MEM_PRIV_NONE_FLAG);
    expect_refused(true, at(kPage, 512, ctx));
}

TEST_P(RmrConnectedTest, RdmaReadThroughAWindowWithoutRemotePrivileges) {
    DAT_RMR_CONTEXT ctx = bind_middle(DAT_MEM_PRIV_NONE_FLAG);
    expect_refused(false, at(kPage, 512, ctx));
}

// ---- dat_ep_post_send_with_invalidate (DAT 2.0) ---------------------------------------------------

class RmrInvalidateTest : public RmrConnectedTest {
protected:
    // A transport that cannot close the window once the message is placed
    // refuses the call before looking at the Endpoint's state: asked on an
    // Endpoint of its own that has no connection (one that can answers
    // DAT_INVALID_STATE, posting nothing).
    void SetUp() override {
        RmrConnectedTest::SetUp();
        if (HasFatalFailure())
            return;
        DAT_EP_HANDLE probe = DAT_HANDLE_NULL;
        ASSERT_DAT_OK(client.create_ep_on(&probe, client.recv_evd, client.req_evd, client.conn_evd));
        DAT_RETURN r = dat_ep_post_send_with_invalidate(probe, 0, nullptr, cookie(0x6ff), DAT_COMPLETION_DEFAULT_FLAG,
                                                        DAT_TRUE, 0);
        EXPECT_DAT_OK(dat_ep_free(probe));
        EXPECT_NE(r, DAT_SUCCESS);
        if (DAT_GET_TYPE(r) == DAT_MODEL_NOT_SUPPORTED) {
            EXPECT_TRUE(no_event(client.req_evd));
            GTEST_SKIP() << "dat_ep_post_send_with_invalidate is DAT_MODEL_NOT_SUPPORTED on this IA: its transport "
                            "cannot make the window unreachable when the message is placed (plugins/ofi/README.md)";
        }
    }

    void TearDown() override {
        recv_buf.release();
        send_buf.release();
        RmrConnectedTest::TearDown();
    }

    // A receive on the server, then a send of 64 bytes from the client with
    // `invalidate` and `ctx`; both complete. The server's receive event in `*recv`.
    void send_with_invalidate(DAT_BOOLEAN invalidate, DAT_RMR_CONTEXT ctx, DAT_EVENT *recv) {
        ASSERT_DAT_OK(server.post_recvs(recv_buf, 1, 0x700, 256));
        ASSERT_DAT_OK(client.register_buffer(send_buf, 256));
        send_buf.fill(0x44);
        DAT_LMR_TRIPLET t = send_buf.iov(0, 64);
        DAT_RETURN r = dat_ep_post_send_with_invalidate(client.ep, 1, &t, cookie(0x701), DAT_COMPLETION_DEFAULT_FLAG,
                                                        invalidate, ctx);
        ASSERT_EQ(r, DAT_SUCCESS) << "dat_ep_post_send_with_invalidate -> " << ret_text(r);
        ASSERT_TRUE(wait_dto_ok(client.req_evd, 0x701));
        ASSERT_TRUE(wait_dto_ok(server.recv_evd, 0x700, recv));
        EXPECT_EQ(recv->event_data.dto_completion_event_data.transfered_length, 64u);
        EXPECT_EQ(recv_buf.mismatch(0, 64, 0x44, 0), -1) << "the message did not arrive intact";
    }

    Buffer recv_buf, send_buf;
};

TEST_P(RmrInvalidateTest, SendWithInvalidateUnbindsThePeersWindow) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteRw);
    DAT_EVENT ev{};
    ASSERT_NO_FATAL_FAILURE(send_with_invalidate(DAT_TRUE, ctx, &ev));
    const auto &d = ev.event_data.dto_completion_event_data;
    EXPECT_EQ(d.operation, DAT_DTO_RECEIVE_WITH_INVALIDATE);
    EXPECT_EQ(d.rmr_context, ctx);
    // Unbound: the LMR is no longer held.
    EXPECT_DAT_OK(target.free_lmr());
}

TEST_P(RmrInvalidateTest, RdmaWriteThroughAWindowTheSendInvalidated) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteRw);
    DAT_EVENT ev{};
    ASSERT_NO_FATAL_FAILURE(send_with_invalidate(DAT_TRUE, ctx, &ev));
    ASSERT_EQ(ev.event_data.dto_completion_event_data.operation, DAT_DTO_RECEIVE_WITH_INVALIDATE);
    expect_refused(true, at(kPage, 512, ctx));
}

TEST_P(RmrInvalidateTest, RdmaReadThroughAWindowTheSendInvalidated) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteRw);
    DAT_EVENT ev{};
    ASSERT_NO_FATAL_FAILURE(send_with_invalidate(DAT_TRUE, ctx, &ev));
    ASSERT_EQ(ev.event_data.dto_completion_event_data.operation, DAT_DTO_RECEIVE_WITH_INVALIDATE);
    expect_refused(false, at(kPage, 512, ctx));
}

// The window is closed when the message is placed, not when the receiver
// reaps it: an RDMA Write posted right behind the send, on the same
// connection and before the server looks at its queue, must not land.
TEST_P(RmrInvalidateTest, RdmaWriteRightBehindTheInvalidatingSendIsRefused) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteRw);
    ASSERT_DAT_OK(server.post_recvs(recv_buf, 1, 0x710, 256));
    ASSERT_DAT_OK(client.register_buffer(send_buf, 256));
    DAT_LMR_TRIPLET t = send_buf.iov(0, 64);
    ASSERT_DAT_OK(
        dat_ep_post_send_with_invalidate(client.ep, 1, &t, cookie(0x711), DAT_COMPLETION_DEFAULT_FLAG, DAT_TRUE, ctx));
    local.fill(0x39);
    DAT_LMR_TRIPLET l = local.iov(kPage, 512);
    const DAT_RMR_TRIPLET remote = at(kPage, 512, ctx);
    ASSERT_DAT_OK(dat_ep_post_rdma_write(client.ep, 1, &l, cookie(0x712), &remote, DAT_COMPLETION_DEFAULT_FLAG));
    // Both requests complete (the write in error, or flushed by the broken
    // connection); the send's event comes first.
    bool write_seen = false;
    for (int i = 0; i < 2 && !write_seen; ++i) {
        DAT_EVENT ev{};
        ASSERT_TRUE(wait_dto(client.req_evd, &ev)) << "a request never completed";
        const auto &d = ev.event_data.dto_completion_event_data;
        if (d.user_cookie.as_64 == 0x712) {
            write_seen = true;
            EXPECT_NE(d.status, DAT_DTO_SUCCESS) << "the write behind the invalidating send landed";
        }
    }
    EXPECT_TRUE(write_seen);
    std::this_thread::sleep_for(std::chrono::milliseconds(100)); // a late placement would show
    expect_target_unchanged();
}

TEST_P(RmrInvalidateTest, WithoutTheInvalidateFlagItIsAPlainSend) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteRw);
    DAT_EVENT ev{};
    ASSERT_NO_FATAL_FAILURE(send_with_invalidate(DAT_FALSE, ctx, &ev));
    EXPECT_EQ(ev.event_data.dto_completion_event_data.operation, DAT_DTO_RECEIVE);
    // The window still works.
    ASSERT_NO_FATAL_FAILURE(expect_write_lands(at(kPage, 512, ctx), 0x35, 0x67));
}

TEST_P(RmrInvalidateTest, InvalidatingAContextThatIsNoWindowDeliversAPlainReceive) {
    DAT_RMR_CONTEXT ctx = bind_middle(kRemoteRw);
    DAT_EVENT ev{};
    ASSERT_NO_FATAL_FAILURE(send_with_invalidate(DAT_TRUE, ctx ^ 0x00ff0000u, &ev));
    EXPECT_EQ(ev.event_data.dto_completion_event_data.operation, DAT_DTO_RECEIVE);
    // The window it did not name still works.
    ASSERT_NO_FATAL_FAILURE(expect_write_lands(at(kPage, 512, ctx), 0x36, 0x68));
}

TEST_P(RmrInvalidateTest, SendWithInvalidateBadArguments) {
    DAT_LMR_TRIPLET t{};
    EXPECT_DAT_INVALID_HANDLE(
        dat_ep_post_send_with_invalidate(DAT_HANDLE_NULL, 0, &t, cookie(1), DAT_COMPLETION_DEFAULT_FLAG, DAT_TRUE, 1),
        HandleKind::Ep);
    EXPECT_DAT_ERR(
        dat_ep_post_send_with_invalidate(client.ep, 1, nullptr, cookie(1), DAT_COMPLETION_DEFAULT_FLAG, DAT_TRUE, 1),
        DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_ep_post_send_with_invalidate(client.ep, 0, &t, cookie(1),
                                                    static_cast<DAT_COMPLETION_FLAGS>(0x100), DAT_TRUE, 1),
                   DAT_INVALID_PARAMETER, 0);
    EXPECT_TRUE(no_event(client.req_evd));
}

// ---- dat_ep_post_rdma_read_to_rmr (DAT 2.0) -------------------------------------------------------

TEST_P(RmrConnectedTest, RdmaReadToRmrLandsInTheLocalWindow) {
    // The source: an LMR of the server with remote read. The sink: a window of the
    // client over its own memory, with remote write (the iWARP model).
    Buffer source;
    ASSERT_DAT_OK(server.register_buffer(source, 2 * kPage, priv(kLocalRw | DAT_MEM_PRIV_REMOTE_READ_FLAG)));
    source.fill(0x77);
    DAT_RMR_HANDLE sink_rmr = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_rmr_create(client.ia.pz, &sink_rmr));
    local.fill_byte(0);
    DAT_RMR_CONTEXT sink_ctx = 0;
    ASSERT_TRUE(bind_completes(client, sink_rmr, local, kPage, kPage, kRemoteWrite, &sink_ctx));
    DAT_RMR_TRIPLET sink{reinterpret_cast<uintptr_t>(local.data + kPage + 64), 1500, sink_ctx};
    DAT_RMR_TRIPLET src = source.rmr(100, 1500);
    ASSERT_DAT_OK(dat_ep_post_rdma_read_to_rmr(client.ep, &sink, cookie(0x81), &src, DAT_COMPLETION_DEFAULT_FLAG));
    DAT_EVENT ev{};
    ASSERT_TRUE(wait_dto_ok(client.req_evd, 0x81, &ev));
    EXPECT_EQ(ev.event_data.dto_completion_event_data.operation, DAT_DTO_RDMA_READ);
    EXPECT_EQ(ev.event_data.dto_completion_event_data.transfered_length, 1500u);
    EXPECT_EQ(local.mismatch(kPage + 64, 1500, 0x77, 100), -1) << "the read did not land in the window";
    EXPECT_EQ(local.mismatch_byte(0, kPage + 64, 0), -1) << "memory before the window's range changed";
    EXPECT_EQ(local.mismatch_byte(kPage + 64 + 1500, local.size - (kPage + 64 + 1500), 0), -1)
        << "memory after the window's range changed";
    EXPECT_DAT_OK(dat_rmr_free(sink_rmr));
}

TEST_P(RmrConnectedTest, RdmaReadToRmrBadArguments) {
    Buffer source;
    ASSERT_DAT_OK(server.register_buffer(source, kPage, priv(kLocalRw | DAT_MEM_PRIV_REMOTE_READ_FLAG)));
    DAT_RMR_TRIPLET src = source.rmr(0, 256);
    DAT_RMR_HANDLE sink_rmr = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_rmr_create(client.ia.pz, &sink_rmr));
    DAT_RMR_CONTEXT ro_ctx = 0;
    ASSERT_TRUE(bind_completes(client, sink_rmr, local, kPage, kPage, kRemoteRead, &ro_ctx));
    DAT_RMR_TRIPLET sink{reinterpret_cast<uintptr_t>(local.data + kPage), 256, ro_ctx};
    auto post = [&](DAT_EP_HANDLE ep, const DAT_RMR_TRIPLET *l, const DAT_RMR_TRIPLET *r) {
        return dat_ep_post_rdma_read_to_rmr(ep, l, cookie(0x82), r, DAT_COMPLETION_DEFAULT_FLAG);
    };
    EXPECT_DAT_INVALID_HANDLE(post(DAT_HANDLE_NULL, &sink, &src), HandleKind::Ep);
    EXPECT_DAT_ERR(post(client.ep, nullptr, &src), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(post(client.ep, &sink, nullptr), DAT_INVALID_PARAMETER, 0);
    // The sink window has no remote write: the read's data may not enter it.
    EXPECT_DAT_ERR(post(client.ep, &sink, &src), DAT_PRIVILEGES_VIOLATION, 0);
    // A context that is no window of the client's.
    DAT_RMR_TRIPLET unknown = sink;
    unknown.rmr_context ^= 0x00ff0000u;
    EXPECT_DAT_ERR(post(client.ep, &unknown, &src), DAT_PRIVILEGES_VIOLATION, 0);
    // Outside the window's range.
    DAT_RMR_CONTEXT rw_ctx = 0;
    ASSERT_TRUE(bind_completes(client, sink_rmr, local, kPage, kPage, kRemoteRw, &rw_ctx));
    DAT_RMR_TRIPLET outside{reinterpret_cast<uintptr_t>(local.data + 2 * kPage - 100), 256, rw_ctx};
    EXPECT_DAT_ERR(post(client.ep, &outside, &src), DAT_INVALID_PARAMETER, 0);
    EXPECT_TRUE(no_event(client.req_evd));
    EXPECT_DAT_OK(dat_rmr_free(sink_rmr));
}

INSTANTIATE_OVER_IAS(RmrTest);
INSTANTIATE_OVER_IAS(RmrConnectedTest);
INSTANTIATE_OVER_IAS(RmrInvalidateTest);

} // namespace
