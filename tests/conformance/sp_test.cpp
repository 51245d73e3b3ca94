// SPDX-License-Identifier: BSD-3-Clause
// Service points beyond the plain PSP: Reserved Service Points
// (dat_rsp_create/query/free), PSPs whose Endpoints the provider creates
// (DAT_PSP_PROVIDER_FLAG), dat_cr_handoff, DAT 2.0 Common Service Points
// (dat_csp_create/query/free, dat_ep_common_connect), over real loopback
// connections.
#include "connected.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <sys/resource.h>

namespace {

using namespace conformance;

class SpTest : public ConnectedTest {
protected:
    DAT_CR_HANDLE request_to(DAT_CONN_QUAL q, DAT_EVENT *ev = nullptr) {
        DAT_RETURN r = connect_ep(client.ep, server_addr.ptr(), q);
        EXPECT_EQ(r, DAT_SUCCESS) << "dat_ep_connect -> " << ret_text(r);
        return r == DAT_SUCCESS ? server_wait_cr(ev) : DAT_HANDLE_NULL;
    }
    DAT_EP_HANDLE local_ep_of(DAT_CR_HANDLE cr) {
        DAT_CR_PARAM p{};
        EXPECT_DAT_OK(dat_cr_query(cr, DAT_CR_FIELD_ALL, &p));
        return p.local_ep_handle;
    }
    // Both sides established after `cr` was accepted on its own Endpoint.
    void expect_established(DAT_EVD_HANDLE server_conn_evd) {
        EXPECT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED));
        EXPECT_TRUE(wait_event(server_conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED));
    }
};

// ---- Reserved Service Points -------------------------------------------------------

TEST_P(SpTest, RspRequestComesWithItsEndpointAndIsAcceptedWithNullEp) {
    DAT_CONN_QUAL q = unused_conn_qual();
    DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_rsp_create(server.ia.ia, q, server.ep, server.cr_evd, &rsp));
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_RESERVED);
    DAT_RSP_PARAM p{};
    ASSERT_DAT_OK(dat_rsp_query(rsp, DAT_RSP_FIELD_ALL, &p));
    EXPECT_EQ(p.conn_qual, q);
    EXPECT_EQ(p.ep_handle, server.ep);
    EXPECT_EQ(p.evd_handle, server.cr_evd);
    EXPECT_EQ(p.ia_handle, server.ia.ia);
    DAT_EVENT ev{};
    DAT_CR_HANDLE cr = request_to(q, &ev);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    // dat.h: the request of a Reserved point carries no service point handle.
    EXPECT_EQ(ev.event_data.cr_arrival_event_data.sp_handle.rsp_handle, DAT_HANDLE_NULL);
    EXPECT_EQ(ev.event_data.cr_arrival_event_data.conn_qual, q);
    EXPECT_EQ(local_ep_of(cr), server.ep);
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_PASSIVE_CONNECTION_PENDING);
    // dat_cr_accept(3DAT): "If the local Endpoint is specified by the Connection
    // Request, the ep_handle shall be DAT_HANDLE_NULL."
    ASSERT_DAT_OK(dat_cr_accept(cr, DAT_HANDLE_NULL, 0, nullptr));
    expect_established(server.conn_evd);
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_CONNECTED);
    // Freeing the RSP afterwards leaves the connection alone.
    EXPECT_DAT_OK(dat_rsp_free(rsp));
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_CONNECTED);
    disconnect_pair(client);
}

TEST_P(SpTest, RspGeneratesAtMostOneRequest) {
    DAT_CONN_QUAL q = unused_conn_qual();
    DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_rsp_create(server.ia.ia, q, server.ep, server.cr_evd, &rsp));
    DAT_CR_HANDLE cr = request_to(q);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    // A second client on the same qualifier is turned away by the provider
    // (dat_ep_connect(3DAT): NON_PEER_REJECTED, not by the remote Consumer).
    DAT_EP_HANDLE second = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(client.create_ep_on(&second, client.recv_evd, client.req_evd, client.conn_evd));
    ASSERT_DAT_OK(connect_ep(second, server_addr.ptr(), q));
    EXPECT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_NON_PEER_REJECTED));
    EXPECT_TRUE(no_event(server.cr_evd));
    EXPECT_DAT_OK(dat_cr_reject(cr, 0, nullptr));
    EXPECT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_PEER_REJECTED));
    EXPECT_DAT_OK(dat_ep_free(second));
    EXPECT_DAT_OK(dat_rsp_free(rsp));
}

TEST_P(SpTest, RspFreeReturnsTheEndpointToUnconnected) {
    DAT_CONN_QUAL q = unused_conn_qual();
    DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_rsp_create(server.ia.ia, q, server.ep, server.cr_evd, &rsp));
    // dat_rsp_create(3DAT): DAT_INVALID_STATE for an Endpoint that is not idle.
    DAT_RSP_HANDLE again = DAT_HANDLE_NULL;
    EXPECT_DAT_ERR(dat_rsp_create(server.ia.ia, unused_conn_qual(), server.ep, server.cr_evd, &again),
                   DAT_INVALID_STATE, 0);
    ASSERT_DAT_OK(dat_rsp_free(rsp));
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_UNCONNECTED);
    // dat_rsp_free(3DAT): requests on the qualifier are refused as if nothing listened.
    ASSERT_DAT_OK(connect_ep(client.ep, server_addr.ptr(), q));
    DAT_EVENT ev{};
    EXPECT_TRUE(next_event(client.conn_evd, &ev) == DAT_SUCCESS && ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
        << event_text(ev);
    EXPECT_TRUE(no_event(server.cr_evd));
    // And the handle is gone.
    DAT_RSP_PARAM p{};
    EXPECT_DAT_INVALID_HANDLE(dat_rsp_query(rsp, DAT_RSP_FIELD_ALL, &p), HandleKind::Rsp);
    EXPECT_DAT_INVALID_HANDLE(dat_rsp_free(rsp), HandleKind::Rsp);
}

TEST_P(SpTest, RspArgumentsAreChecked) {
    DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
    const DAT_CONN_QUAL q = unused_conn_qual();
    EXPECT_DAT_INVALID_HANDLE(dat_rsp_create(server.ia.ia, q, server.ep, server.conn_evd, &rsp), HandleKind::Evd);
    EXPECT_DAT_INVALID_HANDLE(dat_rsp_create(server.ia.ia, q, server.cr_evd, server.cr_evd, &rsp), HandleKind::Ep);
    EXPECT_DAT_INVALID_HANDLE(dat_rsp_create(server.ep, q, server.ep, server.cr_evd, &rsp), HandleKind::Ia);
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_UNCONNECTED);
    // dat_rsp_create(3DAT): DAT_CONN_QUAL_IN_USE -- the fixture's PSP listens on `port`.
    EXPECT_DAT_ERR(dat_rsp_create(server.ia.ia, port, server.ep, server.cr_evd, &rsp), DAT_CONN_QUAL_IN_USE, 0);
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_UNCONNECTED) << "a failed dat_rsp_create leaves the EP idle";
    DAT_RSP_PARAM p{};
    ASSERT_DAT_OK(dat_rsp_create(server.ia.ia, q, server.ep, server.cr_evd, &rsp));
    EXPECT_DAT_ERR(dat_rsp_query(rsp, DAT_RSP_FIELD_ALL, nullptr), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_INVALID_HANDLE(dat_rsp_query(psp, DAT_RSP_FIELD_ALL, &p), HandleKind::Rsp);
    EXPECT_DAT_INVALID_HANDLE(dat_rsp_free(psp), HandleKind::Rsp);
    EXPECT_DAT_OK(dat_rsp_free(rsp));
}

TEST_P(SpTest, RspWithoutEndpointGetsOneFromTheProvider) {
    DAT_CONN_QUAL q = unused_conn_qual();
    DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
    // dat_rsp_create(3DAT): "DAT_HANDLE_NULL requests the Provider to associate a
    // Provider-created Endpoint with this Service Point."
    ASSERT_DAT_OK(dat_rsp_create(server.ia.ia, q, DAT_HANDLE_NULL, server.cr_evd, &rsp));
    DAT_RSP_PARAM p{};
    ASSERT_DAT_OK(dat_rsp_query(rsp, DAT_RSP_FIELD_EP_HANDLE, &p));
    ASSERT_NE(p.ep_handle, DAT_HANDLE_NULL);
    EXPECT_EQ(ep_state(p.ep_handle), DAT_EP_STATE_RESERVED);
    DAT_CR_HANDLE cr = request_to(q);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    DAT_EP_HANDLE pep = local_ep_of(cr);
    EXPECT_EQ(pep, p.ep_handle);
    // The Consumer gives it EVDs before accepting (dat_ep_modify(3DAT) allows it
    // in Passive Connection Pending).
    DAT_EP_PARAM mod{};
    mod.recv_evd_handle = server.recv_evd;
    mod.request_evd_handle = server.req_evd;
    mod.connect_evd_handle = server.conn_evd;
    ASSERT_DAT_OK(
        dat_ep_modify(pep,
                      static_cast<DAT_EP_PARAM_MASK>(DAT_EP_FIELD_RECV_EVD_HANDLE | DAT_EP_FIELD_REQUEST_EVD_HANDLE |
                                                     DAT_EP_FIELD_CONNECT_EVD_HANDLE),
                      &mod));
    ASSERT_DAT_OK(dat_cr_accept(cr, DAT_HANDLE_NULL, 0, nullptr));
    expect_established(server.conn_evd);
    EXPECT_DAT_OK(dat_rsp_free(rsp));
    EXPECT_DAT_OK(dat_ep_disconnect(client.ep, DAT_CLOSE_ABRUPT_FLAG));
    EXPECT_TRUE(wait_connection_end(client.conn_evd));
    EXPECT_TRUE(wait_connection_end(server.conn_evd));
    EXPECT_DAT_OK(dat_ep_free(pep));
}

TEST_P(SpTest, RspProviderEndpointGoesAwayWhenItsRequestIsRejected) {
    DAT_CONN_QUAL q = unused_conn_qual();
    DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_rsp_create(server.ia.ia, q, DAT_HANDLE_NULL, server.cr_evd, &rsp));
    DAT_CR_HANDLE cr = request_to(q);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    DAT_EP_HANDLE pep = local_ep_of(cr);
    ASSERT_NE(pep, DAT_HANDLE_NULL);
    ASSERT_DAT_OK(dat_cr_reject(cr, 0, nullptr));
    EXPECT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_PEER_REJECTED));
    // dat_cr_reject(3DAT): only an Endpoint the Consumer provided reverts to it;
    // the Provider's own is not left behind in the IA.
    EXPECT_DAT_INVALID_HANDLE(dat_ep_free(pep), HandleKind::Ep);
    DAT_RSP_PARAM p{};
    ASSERT_DAT_OK(dat_rsp_query(rsp, DAT_RSP_FIELD_EP_HANDLE, &p));
    EXPECT_EQ(p.ep_handle, DAT_HANDLE_NULL);
    EXPECT_DAT_OK(dat_rsp_free(rsp));
}

TEST_P(SpTest, RspRequestIsAcceptedOnlyOnItsEndpointAfterTheRspIsFreed) {
    DAT_CONN_QUAL q = unused_conn_qual();
    DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_rsp_create(server.ia.ia, q, server.ep, server.cr_evd, &rsp));
    DAT_CR_HANDLE cr = request_to(q);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    // dat_rsp_free(3DAT): "no effect on previously generated ... Connection Request".
    ASSERT_DAT_OK(dat_rsp_free(rsp));
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_PASSIVE_CONNECTION_PENDING);
    DAT_EP_HANDLE other = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(server.create_ep_on(&other, server.recv_evd, server.req_evd, server.conn_evd));
    EXPECT_DAT_INVALID_HANDLE(dat_cr_accept(cr, other, 0, nullptr), HandleKind::Ep);
    EXPECT_EQ(ep_state(other), DAT_EP_STATE_UNCONNECTED);
    ASSERT_DAT_OK(dat_cr_accept(cr, DAT_HANDLE_NULL, 0, nullptr));
    expect_established(server.conn_evd);
    EXPECT_DAT_OK(dat_ep_free(other));
    disconnect_pair(client);
}

// ---- DAT_PSP_PROVIDER_FLAG ----------------------------------------------------------

TEST_P(SpTest, ProviderCreatedEndpointIsConfiguredAndAccepted) {
    DAT_PROVIDER_ATTR pa{};
    ASSERT_DAT_OK(query_ia(server.ia.ia, nullptr, &pa));
    EXPECT_EQ(pa.ep_creator, DAT_PSP_CREATES_EP_IFASKED);
    DAT_CONN_QUAL q = 0;
    DAT_PSP_HANDLE ppsp = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_psp_create_any(server.ia.ia, &q, server.cr_evd, DAT_PSP_PROVIDER_FLAG, &ppsp));
    DAT_PSP_PARAM pp{};
    ASSERT_DAT_OK(dat_psp_query(ppsp, DAT_PSP_FIELD_ALL, &pp));
    EXPECT_EQ(pp.psp_flags, DAT_PSP_PROVIDER_FLAG);
    DAT_CR_HANDLE cr = request_to(q);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    DAT_EP_HANDLE tep = local_ep_of(cr);
    ASSERT_NE(tep, DAT_HANDLE_NULL);
    EXPECT_EQ(ep_state(tep), DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING);
    // dat_psp_create(3DAT): "All Endpoints created by the Provider have
    // DAT_HANDLE_NULL for the Protection Zone and all Event Dispatchers."
    DAT_EP_PARAM ep{};
    ASSERT_DAT_OK(dat_ep_query(tep, DAT_EP_FIELD_ALL, &ep));
    EXPECT_EQ(ep.pz_handle, DAT_HANDLE_NULL);
    EXPECT_EQ(ep.recv_evd_handle, DAT_HANDLE_NULL);
    EXPECT_EQ(ep.connect_evd_handle, DAT_HANDLE_NULL);
    // "Consumers should change Endpoint parameters, especially PZ and EVD".
    ep.pz_handle = server.ia.pz;
    ep.recv_evd_handle = server.recv_evd;
    ep.request_evd_handle = server.req_evd;
    ep.connect_evd_handle = server.conn_evd;
    ASSERT_DAT_OK(
        dat_ep_modify(tep,
                      static_cast<DAT_EP_PARAM_MASK>(DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_RECV_EVD_HANDLE |
                                                     DAT_EP_FIELD_REQUEST_EVD_HANDLE | DAT_EP_FIELD_CONNECT_EVD_HANDLE),
                      &ep));
    ASSERT_DAT_OK(dat_cr_accept(cr, DAT_HANDLE_NULL, 0, nullptr));
    expect_established(server.conn_evd);
    // The connection carries data on the provider's Endpoint.
    Buffer s, r;
    ASSERT_DAT_OK(client.register_buffer(s, 4096));
    ASSERT_DAT_OK(server.register_buffer(r, 4096));
    s.fill(0x2C);
    DAT_LMR_TRIPLET riov = r.iov(0, 4096), siov = s.iov(0, 100);
    ASSERT_DAT_OK(dat_ep_post_recv(tep, 1, &riov, cookie(7), DAT_COMPLETION_DEFAULT_FLAG));
    ASSERT_DAT_OK(dat_ep_post_send(client.ep, 1, &siov, cookie(8), DAT_COMPLETION_DEFAULT_FLAG));
    EXPECT_TRUE(wait_dto_ok(server.recv_evd, 7));
    EXPECT_TRUE(wait_dto_ok(client.req_evd, 8));
    EXPECT_EQ(r.mismatch(0, 100, 0x2C, 0), -1);
    EXPECT_DAT_OK(dat_ep_disconnect(tep, DAT_CLOSE_ABRUPT_FLAG));
    EXPECT_TRUE(wait_connection_end(server.conn_evd));
    EXPECT_TRUE(wait_connection_end(client.conn_evd));
    EXPECT_DAT_OK(dat_ep_free(tep));
    EXPECT_DAT_OK(dat_psp_free(ppsp));
}

TEST_P(SpTest, ProviderCreatedEndpointMayBeReplacedByTheConsumers) {
    DAT_CONN_QUAL q = 0;
    DAT_PSP_HANDLE ppsp = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_psp_create_any(server.ia.ia, &q, server.cr_evd, DAT_PSP_PROVIDER_FLAG, &ppsp));
    DAT_CR_HANDLE cr = request_to(q);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    DAT_EP_HANDLE tep = local_ep_of(cr);
    ASSERT_NE(tep, DAT_HANDLE_NULL);
    ASSERT_NO_FATAL_FAILURE(accept_pair(cr));
    // The provider took its unused Endpoint back.
    EXPECT_DAT_INVALID_HANDLE(dat_ep_free(tep), HandleKind::Ep);
    disconnect_pair(client);
    EXPECT_DAT_OK(dat_psp_free(ppsp));
}

// ---- dat_cr_handoff ---------------------------------------------------------------

TEST_P(SpTest, HandoffMovesTheRequestToAnotherServicePoint) {
    DAT_EVD_HANDLE other_evd = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_evd_create(server.ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &other_evd));
    DAT_CONN_QUAL other_q = 0;
    DAT_PSP_HANDLE other = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_psp_create_any(server.ia.ia, &other_q, other_evd, DAT_PSP_CONSUMER_FLAG, &other));
    const char hello[] = "handed";
    ASSERT_NO_FATAL_FAILURE(client_connect(hello, sizeof hello));
    DAT_CR_HANDLE cr = server_wait_cr();
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    // dat_cr_handoff(3DAT): DAT_INVALID_PARAMETER "The handoff parameter is invalid".
    EXPECT_DAT_ERR(dat_cr_handoff(cr, unused_conn_qual()), DAT_INVALID_PARAMETER, 0);
    ASSERT_DAT_OK(dat_cr_handoff(cr, other_q));
    // "This operation also destroys the Connection Request instance."
    DAT_CR_PARAM p{};
    EXPECT_DAT_INVALID_HANDLE(dat_cr_query(cr, DAT_CR_FIELD_ALL, &p), HandleKind::Cr);
    DAT_EVENT ev{};
    ASSERT_TRUE(wait_event(other_evd, DAT_CONNECTION_REQUEST_EVENT, &ev));
    const auto &d = ev.event_data.cr_arrival_event_data;
    EXPECT_EQ(d.sp_handle.psp_handle, other);
    EXPECT_EQ(d.conn_qual, other_q);
    ASSERT_DAT_OK(dat_cr_query(d.cr_handle, DAT_CR_FIELD_ALL, &p));
    ASSERT_EQ(p.private_data_size, DAT_COUNT(sizeof hello)) << "the request keeps its private data";
    EXPECT_EQ(std::memcmp(p.private_data, hello, sizeof hello), 0);
    ASSERT_NO_FATAL_FAILURE(accept_pair(d.cr_handle));
    EXPECT_TRUE(no_event(server.cr_evd));
    disconnect_pair(server);
    EXPECT_DAT_OK(dat_psp_free(other));
    EXPECT_DAT_OK(dat_evd_free(other_evd));
}

// dat_psp_create(3DAT): "The size of the event queue for the Event Dispatcher
// controls the size of the backlog for the created Public Service Point." A
// request the EVD has no room for is refused by the provider; once the
// Consumer has dequeued, the next one comes.
TEST_P(SpTest, PspBacklogIsTheQueueOfItsEvd) {
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(
        dat_evd_create(server.ia.ia, 1, DAT_HANDLE_NULL,
                       static_cast<DAT_EVD_FLAGS>(DAT_EVD_CR_FLAG | DAT_EVD_SOFTWARE_FLAG), &evd));
    DAT_CONN_QUAL q = 0;
    DAT_PSP_HANDLE small = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_psp_create_any(server.ia.ia, &q, evd, DAT_PSP_CONSUMER_FLAG, &small));
    int marker = 0;
    DAT_EVENT se{};
    se.event_number = DAT_SOFTWARE_EVENT;
    se.event_data.software_event_data.pointer = &marker;
    ASSERT_DAT_OK(dat_evd_post_se(evd, &se)); // the queue is full
    ASSERT_DAT_OK(connect_ep(client.ep, server_addr.ptr(), q));
    DAT_EVENT ev{};
    EXPECT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, &ev)) << event_text(ev);
    ASSERT_TRUE(wait_event(evd, DAT_SOFTWARE_EVENT, &ev));
    EXPECT_TRUE(no_event(evd)) << "the refused request reached the EVD";
    DAT_EP_HANDLE second = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(client.create_ep_on(&second, client.recv_evd, client.req_evd, client.conn_evd));
    ASSERT_DAT_OK(connect_ep(second, server_addr.ptr(), q));
    ASSERT_TRUE(wait_event(evd, DAT_CONNECTION_REQUEST_EVENT, &ev));
    EXPECT_EQ(ev.event_data.cr_arrival_event_data.sp_handle.psp_handle, small);
    EXPECT_DAT_OK(dat_cr_reject(ev.event_data.cr_arrival_event_data.cr_handle, 0, nullptr));
    EXPECT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_PEER_REJECTED));
    EXPECT_DAT_OK(dat_ep_free(second));
    EXPECT_DAT_OK(dat_psp_free(small));
    EXPECT_DAT_OK(dat_evd_free(evd));
}

// Creating and freeing PSPs in a loop under a tight descriptor limit: what a
// freed PSP still holds must not make a later dat_psp_create_any fail.
TEST_P(SpTest, PspsCreatedAndFreedInALoopDoNotRunOutOfDescriptors) {
    int open_fds = 0;
    if (DIR *d = opendir("/proc/self/fd")) {
        while (readdir(d))
            ++open_fds;
        closedir(d);
    }
    rlimit old{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
    rlimit tight = old;
    tight.rlim_cur = static_cast<rlim_t>(open_fds + 32);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
    int done = 0;
    DAT_RETURN r = DAT_SUCCESS;
    for (; done < 200; ++done) {
        DAT_CONN_QUAL q = 0;
        DAT_PSP_HANDLE p = DAT_HANDLE_NULL;
        if ((r = dat_psp_create_any(server.ia.ia, &q, server.cr_evd, DAT_PSP_CONSUMER_FLAG, &p)) != DAT_SUCCESS)
            break;
        if ((r = dat_psp_free(p)) != DAT_SUCCESS)
            break;
    }
    setrlimit(RLIMIT_NOFILE, &old);
    EXPECT_EQ(done, 200) << "stopped after " << done << " with " << ret_text(r) << " (limit " << tight.rlim_cur
                         << " descriptors)";
    // The service point still serves connections.
    ASSERT_NO_FATAL_FAILURE(connect_pair());
}

// ---- 64-bit connection qualifiers -------------------------------------------------------
// DAT_CONN_QUAL has 64 bits; IP transports listen on ports. Qualifiers above
// 65535 fold onto ports 33534..65534 as OFED's cma provider folds them
// (plugins/*/README.md): those that differ by a multiple of 32001 share a
// port, and the plain port number is a third qualifier for it.
constexpr DAT_CONN_QUAL kFoldModulus = 32001, kFoldBase = 65535 - kFoldModulus;

class QualTest : public SpTest {
protected:
    // `create(q)` on a qualifier above 65535 whose port was free a moment
    // ago, retried while a parallel process takes the port; the qualifier
    // on success, 0 (test failed) otherwise.
    template <class Create> DAT_CONN_QUAL listen_above_16_bits(Create create) {
        DAT_RETURN r = DAT_CONN_QUAL_IN_USE;
        for (DAT_CONN_QUAL k = 0x2545F491; k < 0x2545F491 + 8 && DAT_GET_TYPE(r) == DAT_CONN_QUAL_IN_USE; ++k) {
            const DAT_CONN_QUAL port = unused_conn_qual();
            if (port < kFoldBase)
                continue;                                                // no qualifier above 65535 folds onto it
            const DAT_CONN_QUAL q = port - kFoldBase + kFoldModulus * k; // ~2^45: high bits set
            if ((r = create(q)) == DAT_SUCCESS)
                return q;
        }
        ADD_FAILURE() << "no qualifier above 65535 could listen: " << ret_text(r);
        return 0;
    }
    static DAT_CONN_QUAL port_of(DAT_CONN_QUAL q) { return q % kFoldModulus + kFoldBase; }
};

TEST_P(QualTest, PspAbove16BitsAcceptsConnectionsToItsQualifierAndReportsIt) {
    DAT_PSP_HANDLE big = DAT_HANDLE_NULL;
    const DAT_CONN_QUAL q = listen_above_16_bits(
        [&](DAT_CONN_QUAL c) { return dat_psp_create(server.ia.ia, c, server.cr_evd, DAT_PSP_CONSUMER_FLAG, &big); });
    ASSERT_GT(q, 0xffffu);
    DAT_PSP_PARAM pp{};
    ASSERT_DAT_OK(dat_psp_query(big, DAT_PSP_FIELD_CONN_QUAL, &pp));
    EXPECT_EQ(pp.conn_qual, q) << "dat_psp_query reports the qualifier given, not its port";
    DAT_EVENT ev{};
    DAT_CR_HANDLE cr = request_to(q, &ev);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    EXPECT_EQ(ev.event_data.cr_arrival_event_data.sp_handle.psp_handle, big);
    EXPECT_EQ(ev.event_data.cr_arrival_event_data.conn_qual, q);
    ASSERT_NO_FATAL_FAILURE(accept_pair(cr));
    DAT_EP_PARAM c{};
    ASSERT_DAT_OK(dat_ep_query(client.ep, DAT_EP_FIELD_REMOTE_PORT_QUAL, &c));
    EXPECT_EQ(c.remote_port_qual, q) << "dat_ep_query reports the qualifier connected to, not its port";
    disconnect_pair(client);
    EXPECT_DAT_OK(dat_psp_free(big));
}

TEST_P(QualTest, RspAbove16BitsAcceptsTheConnectionToItsQualifierAndReportsIt) {
    DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
    const DAT_CONN_QUAL q = listen_above_16_bits(
        [&](DAT_CONN_QUAL c) { return dat_rsp_create(server.ia.ia, c, server.ep, server.cr_evd, &rsp); });
    ASSERT_GT(q, 0xffffu);
    DAT_RSP_PARAM rp{};
    ASSERT_DAT_OK(dat_rsp_query(rsp, DAT_RSP_FIELD_CONN_QUAL, &rp));
    EXPECT_EQ(rp.conn_qual, q);
    DAT_EVENT ev{};
    DAT_CR_HANDLE cr = request_to(q, &ev);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    EXPECT_EQ(ev.event_data.cr_arrival_event_data.conn_qual, q);
    EXPECT_EQ(local_ep_of(cr), server.ep);
    ASSERT_DAT_OK(dat_cr_accept(cr, DAT_HANDLE_NULL, 0, nullptr));
    expect_established(server.conn_evd);
    DAT_EP_PARAM c{};
    ASSERT_DAT_OK(dat_ep_query(client.ep, DAT_EP_FIELD_REMOTE_PORT_QUAL, &c));
    EXPECT_EQ(c.remote_port_qual, q);
    EXPECT_DAT_OK(dat_rsp_free(rsp));
    disconnect_pair(client);
}

// Only where the transport carries the qualifier (libfabric: our CM header);
// rdma_cm has no room for it, and a request reaches the listener of its port
// as with OFED (tests/vm/verbs-suite.sh lists this test).
TEST_P(QualTest, ConnectToAnotherQualifierOfAListenersPortIsNonPeerRejected) {
    DAT_PSP_HANDLE big = DAT_HANDLE_NULL;
    const DAT_CONN_QUAL q = listen_above_16_bits(
        [&](DAT_CONN_QUAL c) { return dat_psp_create(server.ia.ia, c, server.cr_evd, DAT_PSP_CONSUMER_FLAG, &big); });
    ASSERT_GT(q, 0xffffu);
    // Other high bits, and the plain port number: both name the port q listens on.
    for (DAT_CONN_QUAL other : {q + kFoldModulus * 0x10000, port_of(q)}) {
        SCOPED_TRACE("connect to " + std::to_string(other) + ", listener on " + std::to_string(q));
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        ASSERT_DAT_OK(client.create_ep_on(&ep, client.recv_evd, client.req_evd, client.conn_evd));
        ASSERT_DAT_OK(connect_ep(ep, server_addr.ptr(), other));
        // Nobody listens on that qualifier: no request reaches the server, and
        // the client sees what a qualifier without listener gives.
        DAT_EVENT ev{};
        const bool quiet = no_event(server.cr_evd);
        EXPECT_TRUE(quiet) << "a request for another qualifier reached the listener";
        if (quiet) {
            EXPECT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, &ev));
            EXPECT_EQ(ep_state(ep), DAT_EP_STATE_DISCONNECTED);
        }
        EXPECT_DAT_OK(dat_ep_free(ep));
        if (!quiet)
            break; // the request is the fixture's to clean up
    }
    // The listener still serves its own qualifier.
    DAT_CR_HANDLE cr = request_to(q);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    ASSERT_NO_FATAL_FAILURE(accept_pair(cr));
    disconnect_pair(client);
    EXPECT_DAT_OK(dat_psp_free(big));
}

TEST_P(QualTest, ServicePointsWhoseQualifiersShareAPortAreConnQualInUse) {
    DAT_PSP_HANDLE big = DAT_HANDLE_NULL;
    const DAT_CONN_QUAL q = listen_above_16_bits(
        [&](DAT_CONN_QUAL c) { return dat_psp_create(server.ia.ia, c, server.cr_evd, DAT_PSP_CONSUMER_FLAG, &big); });
    ASSERT_GT(q, 0xffffu);
    // dat_psp_create(3DAT)/dat_rsp_create(3DAT): DAT_CONN_QUAL_IN_USE -- the
    // port is the one resource both qualifiers need.
    DAT_PSP_HANDLE psp2 = DAT_HANDLE_NULL;
    EXPECT_DAT_ERR(dat_psp_create(server.ia.ia, q + kFoldModulus, server.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp2),
                   DAT_CONN_QUAL_IN_USE, 0);
    EXPECT_DAT_ERR(dat_psp_create(client.ia.ia, port_of(q), client.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp2),
                   DAT_CONN_QUAL_IN_USE, 0);
    DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
    EXPECT_DAT_ERR(dat_rsp_create(server.ia.ia, q - kFoldModulus, server.ep, server.cr_evd, &rsp), DAT_CONN_QUAL_IN_USE,
                   0);
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_UNCONNECTED);
    // Freed, the port serves another of its qualifiers.
    ASSERT_DAT_OK(dat_psp_free(big));
    const DAT_CONN_QUAL q2 = q + 3 * kFoldModulus;
    DAT_RETURN r = dat_psp_create(server.ia.ia, q2, server.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp2);
    if (DAT_GET_TYPE(r) == DAT_CONN_QUAL_IN_USE)
        GTEST_SKIP() << "a parallel process took port " << port_of(q) << " after it was freed";
    ASSERT_DAT_OK(r);
    DAT_PSP_PARAM pp{};
    ASSERT_DAT_OK(dat_psp_query(psp2, DAT_PSP_FIELD_CONN_QUAL, &pp));
    EXPECT_EQ(pp.conn_qual, q2);
    EXPECT_DAT_OK(dat_psp_free(psp2));
}

// ---- Common Service Points -----------------------------------------------------------

TEST_P(SpTest, CommonServicePointAcceptsCommonConnect) {
    // dat_csp_create: the IA's own address with a port the CSP listens on.
    DAT_CONN_QUAL q = unused_conn_qual();
    IaAddress at = server_addr;
    if (at.storage.ss_family == AF_INET)
        reinterpret_cast<sockaddr_in *>(&at.storage)->sin_port = htons(static_cast<uint16_t>(q));
    else
        reinterpret_cast<sockaddr_in6 *>(&at.storage)->sin6_port = htons(static_cast<uint16_t>(q));
    DAT_COMM comm{AF_INET, 1, 0};
    DAT_CSP_HANDLE csp = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_csp_create(server.ia.ia, &comm, at.ptr(), server.cr_evd, &csp));
    DAT_CSP_PARAM cp{};
    ASSERT_DAT_OK(dat_csp_query(csp, DAT_CSP_FIELD_ALL, &cp));
    EXPECT_EQ(cp.evd_handle, server.cr_evd);
    EXPECT_EQ(cp.ia_handle, server.ia.ia);
    ASSERT_NE(cp.comm, nullptr);
    EXPECT_EQ(cp.comm->domain, comm.domain);
    ASSERT_NE(cp.address_ptr, nullptr);
    EXPECT_EQ(std::memcmp(cp.address_ptr, at.ptr(), sizeof(sockaddr_in)), 0);
    DAT_HANDLE_TYPE type{};
    ASSERT_DAT_OK(dat_get_handle_type(csp, &type));
    EXPECT_EQ(type, DAT_HANDLE_TYPE_CSP);
    // dat_ep_common_connect: the port inside the address names the service.
    ASSERT_DAT_OK(dat_ep_common_connect(client.ep, at.ptr(), kEventTimeoutUs, 0, nullptr));
    DAT_EVENT ev{};
    DAT_CR_HANDLE cr = server_wait_cr(&ev);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    EXPECT_EQ(ev.event_data.cr_arrival_event_data.sp_handle.csp_handle, csp);
    ASSERT_NO_FATAL_FAILURE(accept_pair(cr));
    disconnect_pair(client);
    EXPECT_DAT_OK(dat_csp_free(csp));
    EXPECT_DAT_INVALID_HANDLE(dat_csp_free(csp), HandleKind::Any);
}

TEST_P(SpTest, CommonServicePointArgumentsAreChecked) {
    DAT_CSP_HANDLE csp = DAT_HANDLE_NULL;
    DAT_COMM comm{AF_INET, 1, 0};
    // Not an address of this IA.
    sockaddr_in elsewhere{};
    elsewhere.sin_family = AF_INET;
    elsewhere.sin_addr.s_addr = htonl(0xC0000201); // 192.0.2.1, TEST-NET-1
    elsewhere.sin_port = htons(static_cast<uint16_t>(unused_conn_qual()));
    EXPECT_DAT_ERR(
        dat_csp_create(server.ia.ia, &comm, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&elsewhere), server.cr_evd, &csp),
        DAT_INVALID_ADDRESS, 0);
    EXPECT_DAT_ERR(dat_csp_create(server.ia.ia, &comm, nullptr, server.cr_evd, &csp), DAT_INVALID_ADDRESS, 0);
    IaAddress at = server_addr;
    EXPECT_DAT_INVALID_HANDLE(dat_csp_create(server.ia.ia, &comm, at.ptr(), server.conn_evd, &csp), HandleKind::Evd);
    // The fixture's PSP listens on `port` already.
    reinterpret_cast<sockaddr_in *>(&at.storage)->sin_port = htons(static_cast<uint16_t>(port));
    EXPECT_DAT_ERR(dat_csp_create(server.ia.ia, &comm, at.ptr(), server.cr_evd, &csp), DAT_CONN_QUAL_IN_USE, 0);
    DAT_CSP_PARAM cp{};
    EXPECT_DAT_INVALID_HANDLE(dat_csp_query(psp, DAT_CSP_FIELD_ALL, &cp), HandleKind::Any);
    EXPECT_DAT_ERR(dat_ep_common_connect(client.ep, nullptr, kEventTimeoutUs, 0, nullptr), DAT_INVALID_ADDRESS, 0);
}

} // namespace

INSTANTIATE_OVER_IAS(SpTest);
INSTANTIATE_OVER_IAS(QualTest);
