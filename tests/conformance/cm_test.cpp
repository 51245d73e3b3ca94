// SPDX-License-Identifier: BSD-3-Clause
// Connection management: PSPs, connection requests and their private data,
// accept and reject, failed connection attempts, Endpoint states across a
// connection's life, reset and reconnect.
#include "connected.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <chrono>
#include <thread>
#include <vector>

using namespace conformance;

namespace {

class CmTest : public ConnectedTest {
protected:
    // A client EP of its own that asks for `q`, and the server's CR of it
    // (null on failure: the test failed).
    DAT_CR_HANDLE request_from_new_ep(DAT_CONN_QUAL q, DAT_EP_HANDLE *ep) {
        if (DAT_RETURN r = client.create_ep_on(ep, client.recv_evd, client.req_evd, client.conn_evd)) {
            ADD_FAILURE() << "dat_ep_create: " << ret_text(r);
            return DAT_HANDLE_NULL;
        }
        if (DAT_RETURN r = connect_ep(*ep, server_addr.ptr(), q)) {
            ADD_FAILURE() << "dat_ep_connect: " << ret_text(r);
            return DAT_HANDLE_NULL;
        }
        return server_wait_cr();
    }
    // Rejects `cr`; its requester, `ep`, hears PEER_REJECTED and is freed.
    void reject_and_free(DAT_CR_HANDLE cr, DAT_EP_HANDLE ep) {
        ASSERT_DAT_OK(dat_cr_reject(cr, 0, nullptr));
        DAT_EVENT ev{};
        ASSERT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_PEER_REJECTED, &ev));
        EXPECT_EQ(ev.event_data.connect_event_data.ep_handle, ep);
        EXPECT_DAT_OK(dat_ep_free(ep));
    }
};

std::vector<unsigned char> pdata(size_t n, unsigned char seed) {
    std::vector<unsigned char> v(n);
    for (size_t i = 0; i < n; ++i)
        v[i] = pattern_byte(seed, i);
    return v;
}

// `a` is the IPv4 address `ia` reports (dat_ia_query): where a peer on that
// IA connects from (127.0.0.1 for libfabric tcp on loopback, the RDMA
// netdev's address for verbs).
::testing::AssertionResult is_address_of(DAT_IA_ADDRESS_PTR a, DAT_IA_HANDLE ia) {
    IaAddress want;
    if (DAT_RETURN r = ia_address(ia, &want))
        return ::testing::AssertionFailure() << "dat_ia_query: " << ret_text(r);
    if (!a || a->sa_family != AF_INET)
        return ::testing::AssertionFailure() << "not an IPv4 address";
    const auto got = reinterpret_cast<const sockaddr_in *>(a)->sin_addr.s_addr;
    if (got != reinterpret_cast<const sockaddr_in *>(want.ptr())->sin_addr.s_addr)
        return ::testing::AssertionFailure()
               << "address " << inet_ntoa(in_addr{got}) << ", the IA's is " << want.text();
    return ::testing::AssertionSuccess();
}

// ---- PSPs ---------------------------------------------------------------------

TEST_P(CmTest, PspQueryReportsCreationParameters) {
    DAT_PSP_PARAM p{};
    ASSERT_DAT_OK(dat_psp_query(psp, DAT_PSP_FIELD_ALL, &p));
    EXPECT_EQ(p.ia_handle, server.ia.ia);
    EXPECT_EQ(p.conn_qual, port); // the qualifier dat_psp_create_any() returned
    EXPECT_EQ(p.evd_handle, server.cr_evd);
    EXPECT_EQ(p.psp_flags, DAT_PSP_CONSUMER_FLAG);
}

TEST_P(CmTest, PspCreateAnyAllocatesUnusedQualifiersAndFreeDestroysIt) {
    DAT_CONN_QUAL q2 = 0;
    DAT_PSP_HANDLE psp2 = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_psp_create_any(server.ia.ia, &q2, server.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp2));
    // dat_psp_create_any(3DAT): "allocates an unused Connection Qualifier".
    EXPECT_NE(q2, port);
    DAT_PSP_PARAM p{};
    ASSERT_DAT_OK(dat_psp_query(psp2, DAT_PSP_FIELD_CONN_QUAL, &p));
    EXPECT_EQ(p.conn_qual, q2);
    ASSERT_DAT_OK(dat_psp_free(psp2));
    // dat_psp_free(3DAT): use of the destroyed handle in any consequent operation fails.
    EXPECT_DAT_ERR(dat_psp_query(psp2, DAT_PSP_FIELD_ALL, &p), DAT_INVALID_HANDLE, 0);
}

TEST_P(CmTest, PspCreateOnQualifierInUseIsConnQualInUse) {
    DAT_PSP_HANDLE psp2 = DAT_HANDLE_NULL;
    // dat_psp_create(3DAT): DAT_CONN_QUAL_IN_USE "The specified Connection Qualifier was in use."
    EXPECT_DAT_ERR(dat_psp_create(server.ia.ia, port, server.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp2),
                   DAT_CONN_QUAL_IN_USE, 0);
    // The existing PSP is unaffected: a connection still reaches it.
    ASSERT_NO_FATAL_FAILURE(connect_pair());
}

TEST_P(CmTest, PspCreateOnQualifierInUseByAnotherOpenInstanceIsConnQualInUse) {
    // Both instances are the same IA (same name, same address): the
    // qualifier is in use on that IA.
    DAT_PSP_HANDLE psp2 = DAT_HANDLE_NULL;
    EXPECT_DAT_ERR(dat_psp_create(client.ia.ia, port, client.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp2),
                   DAT_CONN_QUAL_IN_USE, 0);
}

TEST_P(CmTest, PspOnFixedQualifierDeliversRequestsAndFreedPspRejectsLikeNoListener) {
    DAT_PSP_HANDLE psp2 = DAT_HANDLE_NULL;
    DAT_CONN_QUAL q2 = 0;
    DAT_RETURN r = DAT_CONN_QUAL_IN_USE;
    // A qualifier that was free a moment ago; retry if a parallel process took it.
    for (int i = 0; i < 5 && DAT_GET_TYPE(r) == DAT_CONN_QUAL_IN_USE; ++i) {
        q2 = unused_conn_qual();
        r = dat_psp_create(server.ia.ia, q2, server.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp2);
    }
    ASSERT_DAT_OK(r);
    DAT_PSP_PARAM p{};
    ASSERT_DAT_OK(dat_psp_query(psp2, DAT_PSP_FIELD_ALL, &p));
    EXPECT_EQ(p.conn_qual, q2);

    ASSERT_DAT_OK(connect_ep(client.ep, server_addr.ptr(), q2));
    DAT_EVENT ev{};
    DAT_CR_HANDLE cr = server_wait_cr(&ev);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    EXPECT_EQ(ev.event_data.cr_arrival_event_data.sp_handle.psp_handle, psp2);
    EXPECT_EQ(ev.event_data.cr_arrival_event_data.conn_qual, q2);
    ASSERT_NO_FATAL_FAILURE(accept_pair(cr));

    // dat_psp_free(3DAT): requests for the qualifier are then rejected "with
    // the return analogous to the no listening Service Point", which
    // dat_ep_connect(3DAT) reports as DAT_CONNECTION_EVENT_NON_PEER_REJECTED.
    ASSERT_DAT_OK(dat_psp_free(psp2));
    DAT_EP_HANDLE ep2 = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(client.create_ep_on(&ep2, client.recv_evd, client.req_evd, client.conn_evd));
    ASSERT_DAT_OK(connect_ep(ep2, server_addr.ptr(), q2));
    EXPECT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, &ev));
    EXPECT_TRUE(no_event(server.cr_evd));
    EXPECT_EQ(ep_state(ep2), DAT_EP_STATE_DISCONNECTED);
    EXPECT_DAT_OK(dat_ep_free(ep2));
}

// dat_psp_free(3DAT): the free "shall have no effect on previously
// generated Connection Requested Events", Connection Request instances
// included: a request the consumer got before the free can still be
// rejected (the requester hears PEER_REJECTED) or accepted.
TEST_P(CmTest, RequestsGivenBeforeTheirPspWasFreedCanStillBeRejectedAndAccepted) {
    DAT_CONN_QUAL q = 0;
    DAT_PSP_HANDLE p = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_psp_create_any(server.ia.ia, &q, server.cr_evd, DAT_PSP_CONSUMER_FLAG, &p));
    DAT_EP_HANDLE refused = DAT_HANDLE_NULL;
    DAT_CR_HANDLE first = request_from_new_ep(q, &refused);
    ASSERT_NE(first, DAT_HANDLE_NULL);
    ASSERT_DAT_OK(connect_ep(client.ep, server_addr.ptr(), q));
    DAT_CR_HANDLE second = server_wait_cr();
    ASSERT_NE(second, DAT_HANDLE_NULL);
    ASSERT_DAT_OK(dat_psp_free(p));

    ASSERT_NO_FATAL_FAILURE(reject_and_free(first, refused));

    DAT_EVENT ev{};
    ASSERT_DAT_OK(dat_cr_accept(second, server.ep, 0, nullptr));
    ASSERT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, &ev));
    ASSERT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, &ev));
    ASSERT_NO_FATAL_FAILURE(disconnect_pair(client, DAT_CLOSE_GRACEFUL_FLAG));
}

// A request whose arrival event is still in its CR EVD when the Consumer
// frees that EVD (its RSP freed first) can be answered by nobody: the
// Provider rejects it. The requester sees NON_PEER_REJECTED instead of
// waiting for ever, and the RSP's Endpoint, Passive Connection Pending,
// is Unconnected again (dat_ep_free(3DAT) wants the request rejected first,
// which its lost CR handle no longer allows).
TEST_P(CmTest, RequestLeftInAFreedCrEvdIsRejectedByTheProvider) {
    DAT_EVD_HANDLE cr_evd = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_evd_create(server.ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd));
    DAT_CONN_QUAL q = 0;
    DAT_PSP_HANDLE probe = DAT_HANDLE_NULL; // a free qualifier for the RSP
    ASSERT_DAT_OK(dat_psp_create_any(server.ia.ia, &q, cr_evd, DAT_PSP_CONSUMER_FLAG, &probe));
    ASSERT_DAT_OK(dat_psp_free(probe));
    DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_rsp_create(server.ia.ia, q, server.ep, cr_evd, &rsp));
    ASSERT_DAT_OK(connect_ep(client.ep, server_addr.ptr(), q, DAT_TIMEOUT_INFINITE));
    ASSERT_TRUE(ep_state_becomes(server.ep, DAT_EP_STATE_PASSIVE_CONNECTION_PENDING));
    // dat_ep_query(3DAT): the remote address and both qualifiers are valid
    // in the pending states already.
    DAT_EP_PARAM param{};
    ASSERT_DAT_OK(dat_ep_query(server.ep, DAT_EP_FIELD_ALL, &param));
    ASSERT_NE(param.remote_ia_address_ptr, nullptr);
    EXPECT_EQ(param.remote_ia_address_ptr->sa_family, server_addr.storage.ss_family);
    EXPECT_NE(param.remote_port_qual, 0u);
    EXPECT_EQ(param.local_port_qual, q);
    ASSERT_DAT_OK(dat_rsp_free(rsp));
    ASSERT_DAT_OK(dat_evd_free(cr_evd));
    ASSERT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_NON_PEER_REJECTED));
    EXPECT_TRUE(ep_state_becomes(server.ep, DAT_EP_STATE_UNCONNECTED));
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_DISCONNECTED);
}

// Once the requests of a freed PSP are answered, its qualifier is free at
// once, in the same IA: a new PSP on it gets the next request.
TEST_P(CmTest, QualifierOfAFreedPspWhoseRequestsWereAnsweredServesANewPspAtOnce) {
    DAT_CONN_QUAL q = 0;
    DAT_PSP_HANDLE p = DAT_HANDLE_NULL;
    DAT_RETURN r = DAT_CONN_QUAL_IN_USE;
    for (int i = 0; i < 5 && DAT_GET_TYPE(r) == DAT_CONN_QUAL_IN_USE; ++i) {
        q = unused_conn_qual();
        r = dat_psp_create(server.ia.ia, q, server.cr_evd, DAT_PSP_CONSUMER_FLAG, &p);
    }
    ASSERT_DAT_OK(r);
    DAT_EP_HANDLE refused = DAT_HANDLE_NULL;
    DAT_CR_HANDLE cr = request_from_new_ep(q, &refused);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    ASSERT_DAT_OK(dat_psp_free(p));
    ASSERT_NO_FATAL_FAILURE(reject_and_free(cr, refused));

    DAT_EVENT ev{};
    DAT_PSP_HANDLE again = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_psp_create(server.ia.ia, q, server.cr_evd, DAT_PSP_CONSUMER_FLAG, &again));
    ASSERT_DAT_OK(connect_ep(client.ep, server_addr.ptr(), q));
    cr = server_wait_cr(&ev);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    EXPECT_EQ(ev.event_data.cr_arrival_event_data.sp_handle.psp_handle, again);
    ASSERT_NO_FATAL_FAILURE(accept_pair(cr));
    ASSERT_NO_FATAL_FAILURE(disconnect_pair(client, DAT_CLOSE_GRACEFUL_FLAG));
    EXPECT_DAT_OK(dat_psp_free(again));
}

// A request that reaches the server while its PSP is being freed: the
// provider has reported it, the consumer has not seen it. The requester must
// hear at once, not at its timeout: dat_psp_free(3DAT) rejects later
// requests like a qualifier nobody listens on, and a request the consumer
// did get is the consumer's to reject. The free follows the connect after a
// delay that varies, so that some requests fall between the two.
TEST_P(CmTest, RequestArrivingWhilePspIsFreedIsAnsweredBeforeItsTimeout) {
    constexpr DAT_TIMEOUT connect_timeout_us = 60'000'000;
    constexpr auto answer_within = std::chrono::seconds(5);
    int rejected_by_consumer = 0;
    for (int round = 0; round < 40; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        DAT_CONN_QUAL q = 0;
        DAT_PSP_HANDLE p = DAT_HANDLE_NULL;
        ASSERT_DAT_OK(dat_psp_create_any(server.ia.ia, &q, server.cr_evd, DAT_PSP_CONSUMER_FLAG, &p));
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        ASSERT_DAT_OK(client.create_ep_on(&ep, client.recv_evd, client.req_evd, client.conn_evd));
        ASSERT_DAT_OK(connect_ep(ep, server_addr.ptr(), q, connect_timeout_us));
        const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(40 * (round % 10));
        while (std::chrono::steady_clock::now() < spin_until) {
        }
        ASSERT_DAT_OK(dat_psp_free(p));
        DAT_EVENT ev{};
        bool answered = false, consumer_rejected = false;
        const auto give_up = std::chrono::steady_clock::now() + answer_within;
        while (!answered && std::chrono::steady_clock::now() < give_up) {
            DAT_EVENT cr_ev{};
            if (dat_evd_dequeue(server.cr_evd, &cr_ev) == DAT_SUCCESS) {
                ASSERT_EQ(cr_ev.event_number, DAT_CONNECTION_REQUEST_EVENT);
                ASSERT_DAT_OK(dat_cr_reject(cr_ev.event_data.cr_arrival_event_data.cr_handle, 0, nullptr));
                consumer_rejected = true;
                ++rejected_by_consumer;
            }
            if (dat_evd_dequeue(client.conn_evd, &ev) == DAT_SUCCESS)
                answered = true;
            else
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        ASSERT_TRUE(answered) << "no answer to the request within 5 s of the PSP's free";
        EXPECT_EQ(ev.event_data.connect_event_data.ep_handle, ep);
        // The consumer's reject, or the refusal of a PSP nobody listens on
        // (over verbs, rdma_cm's refusal of a request the kernel held for a
        // freed listener reads as PEER_REJECTED).
        EXPECT_TRUE(ev.event_number == DAT_CONNECTION_EVENT_NON_PEER_REJECTED ||
                    ev.event_number == DAT_CONNECTION_EVENT_PEER_REJECTED)
            << "event " << ev.event_number << (consumer_rejected ? " after the consumer's reject" : "");
        EXPECT_DAT_OK(dat_ep_free(ep));
    }
    EXPECT_TRUE(no_event(server.cr_evd));
    RecordProperty("rejected_by_consumer", rejected_by_consumer);
}

// ---- connection requests and private data ---------------------------------------

TEST_P(CmTest, ConnectionRequestCarriesClientPrivateDataIntact) {
    auto pd = pdata(64, 0x11); // 64: dat_ia_query(3DAT) max_private_data_size "is at least 64 bytes"
    ASSERT_NO_FATAL_FAILURE(client_connect(pd.data(), static_cast<DAT_COUNT>(pd.size())));
    DAT_EVENT ev{};
    DAT_CR_HANDLE cr = server_wait_cr(&ev);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    const auto &arr = ev.event_data.cr_arrival_event_data;
    EXPECT_EQ(arr.sp_handle.psp_handle, psp);
    EXPECT_EQ(arr.conn_qual, port);
    EXPECT_EQ(arr.truncate_flag, DAT_FALSE);

    DAT_CR_PARAM p{};
    ASSERT_DAT_OK(dat_cr_query(cr, DAT_CR_FIELD_ALL, &p));
    // dat_evd_wait(3DAT): "Provider must pass to the Consumer the entire Private Data".
    ASSERT_EQ(p.private_data_size, 64);
    ASSERT_NE(p.private_data, nullptr);
    EXPECT_EQ(std::memcmp(p.private_data, pd.data(), pd.size()), 0);
    // dat_cr_query(3DAT): provides remote_ia_address (the client's IA's).
    EXPECT_TRUE(is_address_of(p.remote_ia_address_ptr, client.ia.ia));
    // Consumer PSP: no provider-created Endpoint.
    EXPECT_EQ(p.local_ep_handle, DAT_HANDLE_NULL);
    ASSERT_NO_FATAL_FAILURE(accept_pair(cr));
}

TEST_P(CmTest, PrivateDataOfMaxSizeDeliveredIntactBothWays) {
    ASSERT_GE(max_private_data_size, 64); // dat_ia_query(3DAT): "at least 64 bytes"
    auto cpd = pdata(static_cast<size_t>(max_private_data_size), 0x21);
    auto spd = pdata(static_cast<size_t>(max_private_data_size), 0x22);
    ASSERT_NO_FATAL_FAILURE(client_connect(cpd.data(), max_private_data_size));
    DAT_CR_HANDLE cr = server_wait_cr();
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    DAT_CR_PARAM p{};
    ASSERT_DAT_OK(dat_cr_query(
        cr, static_cast<DAT_CR_PARAM_MASK>(DAT_CR_FIELD_PRIVATE_DATA_SIZE | DAT_CR_FIELD_PRIVATE_DATA), &p));
    ASSERT_EQ(p.private_data_size, max_private_data_size);
    EXPECT_EQ(std::memcmp(p.private_data, cpd.data(), cpd.size()), 0);
    DAT_EVENT ev{};
    ASSERT_NO_FATAL_FAILURE(accept_pair(cr, spd.data(), max_private_data_size, &ev));
    const auto &d = ev.event_data.connect_event_data;
    ASSERT_EQ(d.private_data_size, max_private_data_size);
    EXPECT_EQ(std::memcmp(d.private_data, spd.data(), spd.size()), 0);
}

TEST_P(CmTest, AcceptPrivateDataArrivesInClientEstablishedEvent) {
    auto spd = pdata(48, 0x33);
    DAT_EVENT cev{}, sev{};
    ASSERT_NO_FATAL_FAILURE(connect_pair(nullptr, 0, spd.data(), 48, &cev, &sev));
    // dat_evd_wait(3DAT): for the Active side ESTABLISHED "the Provider returns
    // the pointer for private_data and the private_data_size".
    const auto &c = cev.event_data.connect_event_data;
    EXPECT_EQ(c.ep_handle, client.ep);
    ASSERT_EQ(c.private_data_size, 48);
    ASSERT_NE(c.private_data, nullptr);
    EXPECT_EQ(std::memcmp(c.private_data, spd.data(), 48), 0);
    // "For the Passive side ... private_data_size returns zero."
    const auto &s = sev.event_data.connect_event_data;
    EXPECT_EQ(s.ep_handle, server.ep);
    EXPECT_EQ(s.private_data_size, 0);
}

TEST_P(CmTest, CrHandleIsDestroyedByAccept) {
    ASSERT_NO_FATAL_FAILURE(client_connect());
    DAT_CR_HANDLE cr = server_wait_cr();
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    ASSERT_NO_FATAL_FAILURE(accept_pair(cr));
    // dat_cr_accept(3DAT): "also destroys the Connection Request instance. Use
    // of the handle of the destroyed cr_handle in any consequent operation fails";
    // dat_cr_query(3DAT): DAT_INVALID_HANDLE "The cr_handle handle is invalid."
    DAT_CR_PARAM p{};
    EXPECT_DAT_INVALID_HANDLE(dat_cr_query(cr, DAT_CR_FIELD_ALL, &p), HandleKind::Cr);
}

TEST_P(CmTest, RejectWithPrivateDataGivesClientPeerRejected) {
    auto rpd = pdata(32, 0x44);
    ASSERT_NO_FATAL_FAILURE(client_connect());
    DAT_CR_HANDLE cr = server_wait_cr();
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    ASSERT_DAT_OK(dat_cr_reject(cr, 32, rpd.data()));
    DAT_EVENT ev{};
    // dat_ep_connect(3DAT): rejection "is reported ... through a
    // DAT_CONNECTION_EVENT_PEER_REJECTED event" and the Endpoint goes DISCONNECTED.
    ASSERT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_PEER_REJECTED, &ev));
    const auto &d = ev.event_data.connect_event_data;
    EXPECT_EQ(d.ep_handle, client.ep);
    // The reject's private data, when the provider passes it on, is the one given.
    if (d.private_data_size != 0) {
        EXPECT_EQ(d.private_data_size, 32);
        ASSERT_NE(d.private_data, nullptr);
        EXPECT_EQ(std::memcmp(d.private_data, rpd.data(), 32), 0);
    }
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_DISCONNECTED);
    // dat_cr_reject(3DAT): destroys the Connection Request ("Use of the handle of the
    // destroyed Connection Request in any consequent operation fails").
    DAT_CR_PARAM p{};
    EXPECT_DAT_INVALID_HANDLE(dat_cr_query(cr, DAT_CR_FIELD_ALL, &p), HandleKind::Cr);
    // The consumer's Endpoint was never given to the request.
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_UNCONNECTED);
    EXPECT_TRUE(no_event(server.conn_evd));
}

// ---- failed connection attempts -----------------------------------------------------

TEST_P(CmTest, ConnectToQualifierWithoutListenerIsNonPeerRejected) {
    DAT_CONN_QUAL q = unused_conn_qual();
    ASSERT_DAT_OK(connect_ep(client.ep, server_addr.ptr(), q));
    // dat_ep_connect(3DAT): NON_PEER_REJECTED "for all reasons of not establishing
    // the connection, except timeout, remote host not reachable, and remote peer
    // reject. For example, remote Consumer is not listening on the requested
    // Connection Qualifier"; the Endpoint goes to DISCONNECTED.
    DAT_EVENT ev{};
    EXPECT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, &ev));
    EXPECT_EQ(ev.event_data.connect_event_data.ep_handle, client.ep);
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_DISCONNECTED);
}

TEST_P(CmTest, ConnectToSilentPeerTimesOutWithinTimeout) {
    // A silent peer of the IA's own transport (a TCP socket would do for
    // libfabric tcp, not for rdma_cm, whose port space is not TCP's and which
    // refuses at once): a PSP whose connection requests nobody answers. The
    // request reaches it; its Consumer never accepts or rejects.
    DAT_EVD_HANDLE silent_evd = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_evd_create(server.ia.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &silent_evd));
    DAT_CONN_QUAL silent = 0;
    DAT_PSP_HANDLE silent_psp = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_psp_create_any(server.ia.ia, &silent, silent_evd, DAT_PSP_CONSUMER_FLAG, &silent_psp));
    constexpr DAT_TIMEOUT timeout_us = 500'000;
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_DAT_OK(connect_ep(client.ep, server_addr.ptr(), silent, timeout_us));
    DAT_EVENT ev{};
    ASSERT_DAT_OK(next_event(client.conn_evd, &ev, timeout_us + kEventTimeoutUs));
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    // dat_ep_connect(3DAT): "When the timeout expired prior to completion of the
    // Connection establishment, the local Endpoint is automatically transitioned into
    // a DAT_EP_STATE_DISCONNECTED state and the local Consumer [notified] through a
    // DAT_CONNECTION_EVENT_TIMED_OUT event"; UNREACHABLE also covers "the remote host
    // does not respond within the Consumer requested Timeout".
    EXPECT_TRUE(ev.event_number == DAT_CONNECTION_EVENT_TIMED_OUT ||
                ev.event_number == DAT_CONNECTION_EVENT_UNREACHABLE)
        << event_text(ev);
    EXPECT_LT(ms, 500 + 3000) << "the 500 ms connect timeout was not honoured";
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_DISCONNECTED);
    // The peer was a listener that did not answer, not one that refused.
    DAT_EVENT cr{};
    EXPECT_TRUE(wait_event(silent_evd, DAT_CONNECTION_REQUEST_EVENT, &cr, kQuietTimeoutUs))
        << "the connection request did not reach the silent PSP";
    if (cr.event_number == DAT_CONNECTION_REQUEST_EVENT)
        // Only to release it: its requester is gone, which the reject may report.
        dat_cr_reject(cr.event_data.cr_arrival_event_data.cr_handle, 0, nullptr);
    EXPECT_DAT_OK(dat_psp_free(silent_psp));
    EXPECT_DAT_OK(dat_evd_free(silent_evd));
    // The timed-out Endpoint is reusable after a reset.
    ASSERT_DAT_OK(dat_ep_reset(client.ep));
    ASSERT_NO_FATAL_FAILURE(connect_pair());
}

TEST_P(CmTest, ConnectToUnreachableAddressFailsCleanly) {
    // 203.0.113.1 (TEST-NET-3): no DAT peer there, and possibly no route from the IA.
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(0xCB007101);
    constexpr DAT_TIMEOUT timeout_us = 500'000;
    auto t0 = std::chrono::steady_clock::now();
    DAT_RETURN r = connect_ep(client.ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&sin), port, timeout_us);
    if (r != DAT_SUCCESS) {
        // dat_ep_connect(3DAT): "If the Provider can locally determine that the
        // remote_ia_address is invalid, or that the remote_ia_address cannot be converted
        // to a Transport-specific address, the operation can fail synchronously with a
        // DAT_INVALID_ADDRESS return."
        EXPECT_EQ(DAT_GET_TYPE(r), DAT_INVALID_ADDRESS) << ret_text(r);
        EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_UNCONNECTED);
        return;
    }
    DAT_EVENT ev{};
    ASSERT_DAT_OK(next_event(client.conn_evd, &ev, timeout_us + kEventTimeoutUs));
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    // dat_ep_connect(3DAT): UNREACHABLE "When the Provider cannot reach the remote host
    // or the remote host does not respond within the Consumer requested Timeout";
    // TIMED_OUT "When the timeout expired prior to completion".
    EXPECT_TRUE(ev.event_number == DAT_CONNECTION_EVENT_TIMED_OUT ||
                ev.event_number == DAT_CONNECTION_EVENT_UNREACHABLE)
        << event_text(ev);
    EXPECT_LT(ms, 500 + 3000) << "the 500 ms connect timeout was not honoured";
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_DISCONNECTED);
}

// ---- Endpoint states ---------------------------------------------------------------

TEST_P(CmTest, EndpointStatesAcrossConnectAcceptDisconnectReset) {
    DAT_EP_STATE st{};
    DAT_BOOLEAN recv_idle = DAT_FALSE, req_idle = DAT_FALSE;
    ASSERT_DAT_OK(dat_ep_get_status(client.ep, &st, &recv_idle, &req_idle));
    EXPECT_EQ(st, DAT_EP_STATE_UNCONNECTED) << ep_state_name(st); // dat_ep_create(3DAT)
    EXPECT_EQ(recv_idle, DAT_TRUE);
    EXPECT_EQ(req_idle, DAT_TRUE);
    DAT_EP_PARAM p{};
    ASSERT_DAT_OK(dat_ep_query(client.ep, DAT_EP_FIELD_EP_STATE, &p));
    EXPECT_EQ(p.ep_state, DAT_EP_STATE_UNCONNECTED);

    ASSERT_NO_FATAL_FAILURE(client_connect());
    // dat_ep_connect(3DAT): "Upon successful completion of this operation, the
    // local Endpoint is transferred into DAT_EP_STATE_ACTIVE_CONNECTION_PENDING."
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING) << ep_state_name(ep_state(client.ep));
    DAT_CR_HANDLE cr = server_wait_cr();
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    // Not accepted yet.
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING) << ep_state_name(ep_state(client.ep));
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_UNCONNECTED);

    Buffer rbuf;
    ASSERT_DAT_OK(rbuf.create(server.ia.ia, server.ia.pz, 4096));
    DAT_LMR_TRIPLET iov = rbuf.iov(0, 4096);
    ASSERT_DAT_OK(dat_ep_post_recv(server.ep, 1, &iov, cookie(7), DAT_COMPLETION_DEFAULT_FLAG));
    ASSERT_DAT_OK(dat_ep_get_status(server.ep, &st, &recv_idle, &req_idle));
    EXPECT_EQ(recv_idle, DAT_FALSE); // dat_ep_get_status(3DAT): a Receive is outstanding
    EXPECT_EQ(req_idle, DAT_TRUE);

    ASSERT_NO_FATAL_FAILURE(accept_pair(cr));
    // dat_ep_connect(3DAT) / dat_cr_accept(3DAT): CONNECTED with the ESTABLISHED event.
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_CONNECTED) << ep_state_name(ep_state(client.ep));
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_CONNECTED) << ep_state_name(ep_state(server.ep));
    ASSERT_DAT_OK(dat_ep_query(server.ep, DAT_EP_FIELD_EP_STATE, &p));
    EXPECT_EQ(p.ep_state, DAT_EP_STATE_CONNECTED);

    ASSERT_DAT_OK(dat_ep_disconnect(client.ep, DAT_CLOSE_GRACEFUL_FLAG));
    ASSERT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    // dat_ep_disconnect(3DAT): DISCONNECTED "upon successful asynchronous completion".
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_DISCONNECTED) << ep_state_name(ep_state(client.ep));
    ASSERT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_DISCONNECTED) << ep_state_name(ep_state(server.ep));
    DAT_EVENT ev{};
    ASSERT_TRUE(wait_dto(server.recv_evd, &ev));
    EXPECT_EQ(ev.event_data.dto_completion_event_data.status, DAT_DTO_ERR_FLUSHED) << event_text(ev);
    ASSERT_DAT_OK(dat_ep_get_status(server.ep, &st, &recv_idle, &req_idle));
    EXPECT_EQ(recv_idle, DAT_TRUE);

    // dat_ep_reset(3DAT): Disconnected -> Unconnected.
    ASSERT_DAT_OK(dat_ep_reset(client.ep));
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_UNCONNECTED) << ep_state_name(ep_state(client.ep));
    ASSERT_DAT_OK(dat_ep_reset(server.ep));
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_UNCONNECTED) << ep_state_name(ep_state(server.ep));
}

TEST_P(CmTest, EpQueryReportsPeerAddressesAndPortQualifiers) {
    ASSERT_NO_FATAL_FAILURE(client_connect());
    DAT_EVENT crev{};
    DAT_CR_HANDLE cr = server_wait_cr(&crev);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    DAT_CR_PARAM crp{};
    ASSERT_DAT_OK(dat_cr_query(cr, DAT_CR_FIELD_ALL, &crp));
    DAT_PORT_QUAL client_port_in_cr = crp.remote_port_qual;
    ASSERT_NO_FATAL_FAILURE(accept_pair(cr));

    DAT_EP_PARAM c{}, s{};
    ASSERT_DAT_OK(dat_ep_query(client.ep, DAT_EP_FIELD_ALL, &c));
    ASSERT_DAT_OK(dat_ep_query(server.ep, DAT_EP_FIELD_ALL, &s));
    // dat_ep_query(3DAT): remote address and port valid in CONNECTED.
    EXPECT_EQ(c.remote_port_qual, port);
    EXPECT_TRUE(is_address_of(c.remote_ia_address_ptr, server.ia.ia));
    EXPECT_TRUE(is_address_of(s.remote_ia_address_ptr, client.ia.ia));
    // dat_ep_connect(3DAT): the active Endpoint's Port Qualifier "is passed to the
    // remote side ... available to the remote Consumer in the Connection Request".
    EXPECT_EQ(c.local_port_qual, client_port_in_cr);
    EXPECT_EQ(s.remote_port_qual, c.local_port_qual);
    EXPECT_EQ(c.ia_handle, client.ia.ia);
    EXPECT_EQ(c.pz_handle, client.ia.pz);
    EXPECT_EQ(c.recv_evd_handle, client.recv_evd);
    EXPECT_EQ(c.request_evd_handle, client.req_evd);
    EXPECT_EQ(c.connect_evd_handle, client.conn_evd);
}

TEST_P(CmTest, ResetIsNoOpWhenUnconnectedAndInvalidWhenConnected) {
    // dat_ep_reset(3DAT): "For Unconnected state, the operation is no-op ... the
    // preposted Recvs are not affected by the call."
    Buffer rbuf;
    ASSERT_DAT_OK(rbuf.create(client.ia.ia, client.ia.pz, 4096));
    DAT_LMR_TRIPLET iov = rbuf.iov(0, 4096);
    ASSERT_DAT_OK(dat_ep_post_recv(client.ep, 1, &iov, cookie(0xC1), DAT_COMPLETION_DEFAULT_FLAG));
    ASSERT_DAT_OK(dat_ep_reset(client.ep));
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_UNCONNECTED);
    EXPECT_TRUE(no_event(client.recv_evd));

    ASSERT_NO_FATAL_FAILURE(connect_pair());
    // ... the preposted Recv is still there and receives.
    Buffer sbuf;
    ASSERT_DAT_OK(sbuf.create(server.ia.ia, server.ia.pz, 4096));
    sbuf.fill(0x61);
    DAT_LMR_TRIPLET siov = sbuf.iov(0, 100);
    ASSERT_DAT_OK(dat_ep_post_send(server.ep, 1, &siov, cookie(1), DAT_COMPLETION_DEFAULT_FLAG));
    EXPECT_TRUE(wait_dto_ok(server.req_evd, 1));
    EXPECT_TRUE(wait_dto_ok(client.recv_evd, 0xC1));
    EXPECT_EQ(rbuf.mismatch(0, 100, 0x61, 0), -1);

    // "Valid for both Disconnected and Unconnected states" only.
    EXPECT_DAT_ERR(dat_ep_reset(client.ep), DAT_INVALID_STATE, 0);
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_CONNECTED);
}

TEST_P(CmTest, ResetThenReconnectTheSameEndpoints) {
    Buffer sbuf, rbuf;
    ASSERT_DAT_OK(sbuf.create(client.ia.ia, client.ia.pz, 4096));
    ASSERT_DAT_OK(rbuf.create(server.ia.ia, server.ia.pz, 4096));
    for (int round = 0; round < 3; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        DAT_LMR_TRIPLET riov = rbuf.iov(0, 4096);
        ASSERT_DAT_OK(dat_ep_post_recv(server.ep, 1, &riov, cookie(100 + round), DAT_COMPLETION_DEFAULT_FLAG));
        ASSERT_NO_FATAL_FAILURE(connect_pair());
        sbuf.fill(static_cast<unsigned char>(0x70 + round));
        DAT_LMR_TRIPLET siov = sbuf.iov(0, 1000);
        ASSERT_DAT_OK(dat_ep_post_send(client.ep, 1, &siov, cookie(200 + round), DAT_COMPLETION_DEFAULT_FLAG));
        ASSERT_TRUE(wait_dto_ok(client.req_evd, 200 + round));
        DAT_EVENT ev{};
        ASSERT_TRUE(wait_dto_ok(server.recv_evd, 100 + round, &ev));
        EXPECT_EQ(ev.event_data.dto_completion_event_data.transfered_length, 1000u);
        EXPECT_EQ(rbuf.mismatch(0, 1000, static_cast<unsigned char>(0x70 + round), 0), -1);
        ASSERT_NO_FATAL_FAILURE(
            disconnect_pair(round % 2 ? server : client, round == 1 ? DAT_CLOSE_ABRUPT_FLAG : DAT_CLOSE_GRACEFUL_FLAG));
        ASSERT_DAT_OK(dat_ep_reset(client.ep));
        ASSERT_DAT_OK(dat_ep_reset(server.ep));
        ASSERT_EQ(ep_state(client.ep), DAT_EP_STATE_UNCONNECTED);
        ASSERT_EQ(ep_state(server.ep), DAT_EP_STATE_UNCONNECTED);
        // The ended connection's ports are not reported as the next one's.
        DAT_EP_PARAM p{};
        ASSERT_DAT_OK(dat_ep_query(client.ep, DAT_EP_FIELD_ALL, &p));
        EXPECT_EQ(p.local_port_qual, 0u);
        EXPECT_EQ(p.remote_port_qual, 0u);
    }
}

TEST_P(CmTest, ConnectInWrongStateIsInvalidState) {
    // dat_ep_connect(3DAT): DAT_INVALID_STATE "Endpoint was not in DAT_EP_STATE_UNCONNECTED state."
    ASSERT_NO_FATAL_FAILURE(client_connect());
    ASSERT_EQ(ep_state(client.ep), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
    EXPECT_DAT_ERR(connect_ep(client.ep, server_addr.ptr(), port), DAT_INVALID_STATE, 0);
    DAT_CR_HANDLE cr = server_wait_cr();
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    EXPECT_TRUE(no_event(server.cr_evd)); // the refused call sent nothing
    ASSERT_NO_FATAL_FAILURE(accept_pair(cr));

    EXPECT_DAT_ERR(connect_ep(client.ep, server_addr.ptr(), port), DAT_INVALID_STATE, 0);
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_CONNECTED);

    ASSERT_NO_FATAL_FAILURE(disconnect_pair(client));
    EXPECT_DAT_ERR(connect_ep(client.ep, server_addr.ptr(), port), DAT_INVALID_STATE, 0);
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_DISCONNECTED);
    EXPECT_TRUE(no_event(server.cr_evd));
}

// ---- dat_ep_dup_connect ----------------------------------------------------------------------

TEST_P(CmTest, DupConnectReachesTheRemoteEndOfTheDuplicatedEndpoint) {
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    DAT_EP_HANDLE dup = DAT_HANDLE_NULL, sdup = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(client.create_ep_on(&dup, client.recv_evd, client.req_evd, client.conn_evd));
    ASSERT_DAT_OK(server.create_ep_on(&sdup, server.recv_evd, server.req_evd, server.conn_evd));
    // dat_ep_dup_connect(3DAT): "The remote end of the requested connection shall be the same
    // as the remote end of the dup_ep_handle": the same IA and Connection Qualifier.
    auto pd = pdata(24, 0x41);
    ASSERT_DAT_OK(dat_ep_dup_connect(dup, client.ep, kEventTimeoutUs, 24, pd.data(), DAT_QOS_BEST_EFFORT));
    EXPECT_EQ(ep_state(dup), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
    DAT_EVENT ev{};
    DAT_CR_HANDLE cr = server_wait_cr(&ev);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    EXPECT_EQ(ev.event_data.cr_arrival_event_data.sp_handle.psp_handle, psp);
    EXPECT_EQ(ev.event_data.cr_arrival_event_data.conn_qual, port);
    DAT_CR_PARAM p{};
    ASSERT_DAT_OK(dat_cr_query(cr, DAT_CR_FIELD_ALL, &p));
    ASSERT_EQ(p.private_data_size, 24);
    EXPECT_EQ(std::memcmp(p.private_data, pd.data(), pd.size()), 0);
    EXPECT_TRUE(is_address_of(p.remote_ia_address_ptr, client.ia.ia));
    DAT_EVENT cest{};
    ASSERT_NO_FATAL_FAILURE(accept_pair(cr, nullptr, 0, &cest, nullptr, sdup));
    EXPECT_EQ(cest.event_data.connect_event_data.ep_handle, dup);
    EXPECT_EQ(ep_state(dup), DAT_EP_STATE_CONNECTED);
    // The new connection carries data, and the duplicated one is untouched.
    Buffer sbuf, rbuf;
    ASSERT_DAT_OK(client.register_buffer(sbuf, 4096));
    ASSERT_DAT_OK(server.register_buffer(rbuf, 4096));
    sbuf.fill(0x42);
    DAT_LMR_TRIPLET riov = rbuf.iov(0, 4096), siov = sbuf.iov(0, 512);
    ASSERT_DAT_OK(dat_ep_post_recv(sdup, 1, &riov, cookie(0xd1), DAT_COMPLETION_DEFAULT_FLAG));
    ASSERT_DAT_OK(dat_ep_post_send(dup, 1, &siov, cookie(0xd2), DAT_COMPLETION_DEFAULT_FLAG));
    ASSERT_TRUE(wait_dto_ok(client.req_evd, 0xd2));
    ASSERT_TRUE(wait_dto_ok(server.recv_evd, 0xd1));
    EXPECT_EQ(rbuf.mismatch(0, 512, 0x42, 0), -1);
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_CONNECTED);
    ASSERT_DAT_OK(dat_ep_disconnect(dup, DAT_CLOSE_ABRUPT_FLAG));
    EXPECT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    EXPECT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    EXPECT_DAT_OK(dat_ep_free(dup));
    EXPECT_DAT_OK(dat_ep_free(sdup));
}

TEST_P(CmTest, DupConnectBadArguments) {
    DAT_EP_HANDLE dup = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(client.create_ep_on(&dup, client.recv_evd, client.req_evd, client.conn_evd));
    // dat_ep_dup_connect(3DAT): DAT_INVALID_STATE "A parameter is in an invalid state": the
    // Endpoint to duplicate is not connected.
    EXPECT_DAT_ERR(dat_ep_dup_connect(dup, client.ep, kEventTimeoutUs, 0, nullptr, DAT_QOS_BEST_EFFORT),
                   DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONNECTED);
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    // DAT_INVALID_HANDLE "The ep_handle or dup_ep_handle parameter is invalid".
    EXPECT_DAT_INVALID_HANDLE(
        dat_ep_dup_connect(DAT_HANDLE_NULL, client.ep, kEventTimeoutUs, 0, nullptr, DAT_QOS_BEST_EFFORT),
        HandleKind::Ep);
    EXPECT_DAT_ERR(dat_ep_dup_connect(dup, DAT_HANDLE_NULL, kEventTimeoutUs, 0, nullptr, DAT_QOS_BEST_EFFORT),
                   DAT_INVALID_HANDLE, DAT_INVALID_HANDLE2);
    EXPECT_DAT_ERR(dat_ep_dup_connect(dup, client.ia.pz, kEventTimeoutUs, 0, nullptr, DAT_QOS_BEST_EFFORT),
                   DAT_INVALID_HANDLE, DAT_INVALID_HANDLE2);
    // DAT_INVALID_PARAMETER: a negative private_data_size, or data without a pointer.
    EXPECT_DAT_ERR(dat_ep_dup_connect(dup, client.ep, kEventTimeoutUs, -1, nullptr, DAT_QOS_BEST_EFFORT),
                   DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    EXPECT_DAT_ERR(dat_ep_dup_connect(dup, client.ep, kEventTimeoutUs, 8, nullptr, DAT_QOS_BEST_EFFORT),
                   DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    // "If the local Provider or Transport does not support the requested qos, the operation
    // fails and DAT_MODEL_NOT_SUPPORTED is returned synchronously"; a value that is no DAT_QOS
    // is an invalid parameter.
    EXPECT_DAT_ERR(dat_ep_dup_connect(dup, client.ep, kEventTimeoutUs, 0, nullptr, DAT_QOS_LOW_LATENCY),
                   DAT_MODEL_NOT_SUPPORTED, 0);
    EXPECT_DAT_ERR(dat_ep_dup_connect(dup, client.ep, kEventTimeoutUs, 0, nullptr, static_cast<DAT_QOS>(0x100)),
                   DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    // timeout: "Values must be positive."
    EXPECT_DAT_ERR(dat_ep_dup_connect(dup, client.ep, 0, 0, nullptr, DAT_QOS_BEST_EFFORT), DAT_INVALID_PARAMETER,
                   DAT_INVALID_ARG3);
    // Refused calls send nothing and leave the Endpoint as it was.
    EXPECT_EQ(ep_state(dup), DAT_EP_STATE_UNCONNECTED);
    EXPECT_TRUE(no_event(server.cr_evd));
    EXPECT_DAT_OK(dat_ep_free(dup));
}

TEST_P(CmTest, ConnectWithAnUnsupportedQosOrNoTimeoutIsRefused) {
    // dat_ep_connect(3DAT): "If the local Provider or Transport does not support the requested
    // qos, the operation fails and DAT_MODEL_NOT_SUPPORTED is returned synchronously."
    DAT_PROVIDER_ATTR pa{};
    ASSERT_DAT_OK(query_ia(client.ia.ia, nullptr, &pa));
    EXPECT_EQ(pa.dat_qos_supported, DAT_QOS_BEST_EFFORT);
    EXPECT_DAT_ERR(dat_ep_connect(client.ep, server_addr.ptr(), port, kEventTimeoutUs, 0, nullptr,
                                  DAT_QOS_HIGH_THROUGHPUT, DAT_CONNECT_DEFAULT_FLAG),
                   DAT_MODEL_NOT_SUPPORTED, 0);
    EXPECT_DAT_ERR(dat_ep_connect(client.ep, server_addr.ptr(), port, kEventTimeoutUs, 0, nullptr,
                                  static_cast<DAT_QOS>(0x40), DAT_CONNECT_DEFAULT_FLAG),
                   DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    // dat_ep_connect(3DAT): timeout "Values must be positive."
    EXPECT_DAT_ERR(dat_ep_connect(client.ep, server_addr.ptr(), port, 0, 0, nullptr, DAT_QOS_BEST_EFFORT,
                                  DAT_CONNECT_DEFAULT_FLAG),
                   DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_UNCONNECTED);
    EXPECT_TRUE(no_event(server.cr_evd));
}

// ---- private data limits ---------------------------------------------------------------

TEST_P(CmTest, ConnectPrivateDataLargerThanMaxIsInvalidParameter) {
    ASSERT_GE(max_private_data_size, 64);
    auto pd = pdata(static_cast<size_t>(max_private_data_size) + 1, 0x55);
    // dat_evd_wait(3DAT): "If the Consumer provides more data than ... max_private_data_size,
    // DAT_INVALID_PARAMETER is returned for that operation."
    EXPECT_DAT_ERR(
        connect_ep(client.ep, server_addr.ptr(), port, kEventTimeoutUs, max_private_data_size + 1, pd.data()),
        DAT_INVALID_PARAMETER, 0);
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_UNCONNECTED);
    EXPECT_TRUE(no_event(server.cr_evd));
    // dat_ep_connect(3DAT): private_data_size "Must be nonnegative."
    EXPECT_DAT_ERR(connect_ep(client.ep, server_addr.ptr(), port, kEventTimeoutUs, -1, pd.data()),
                   DAT_INVALID_PARAMETER, 0);
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_UNCONNECTED);
    // The Endpoint is still usable.
    ASSERT_NO_FATAL_FAILURE(connect_pair());
}

TEST_P(CmTest, AcceptPrivateDataLargerThanMaxIsInvalidParameterAndLeavesRequestPending) {
    ASSERT_GE(max_private_data_size, 64);
    auto pd = pdata(static_cast<size_t>(max_private_data_size) + 1, 0x66);
    ASSERT_NO_FATAL_FAILURE(client_connect());
    DAT_CR_HANDLE cr = server_wait_cr();
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    // dat_cr_accept(3DAT): DAT_INVALID_PARAMETER "The private_data_size or private_data
    // parameter is invalid, out of range"; dat_evd_wait(3DAT) names dat_cr_accept too.
    EXPECT_DAT_ERR(dat_cr_accept(cr, server.ep, max_private_data_size + 1, pd.data()), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_cr_accept(cr, server.ep, -1, pd.data()), DAT_INVALID_PARAMETER, 0);
    EXPECT_TRUE(no_event(client.conn_evd));
    // "the operation fails without any effect on the local Endpoint, Pending
    // Connection Request, private data, or remote Endpoint."
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_UNCONNECTED);
    DAT_EVENT ev{};
    ASSERT_NO_FATAL_FAILURE(accept_pair(cr, pd.data(), 16, &ev));
    EXPECT_EQ(ev.event_data.connect_event_data.private_data_size, 16);
    EXPECT_EQ(std::memcmp(ev.event_data.connect_event_data.private_data, pd.data(), 16), 0);
}

TEST_P(CmTest, AcceptOnConnectedEndpointFailsAndLeavesRequestPending) {
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    // A second client Endpoint asks for a connection ...
    DAT_EP_HANDLE cep2 = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(client.create_ep_on(&cep2, client.recv_evd, client.req_evd, client.conn_evd));
    ASSERT_DAT_OK(connect_ep(cep2, server_addr.ptr(), port));
    DAT_CR_HANDLE cr = server_wait_cr();
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    // ... and the server offers its already connected Endpoint. dat_cr_accept(3DAT):
    // "If the provided local Endpoint does not satisfy the requested Connection
    // Request, the operation fails without any effect on the local Endpoint,
    // Pending Connection Request, private data, or remote Endpoint." The page
    // names no code for it; an Endpoint in the wrong state is DAT_INVALID_STATE
    // in the DAT error model, and an unfit ep_handle argument DAT_INVALID_HANDLE
    // or (a combination of parameters) DAT_INVALID_PARAMETER -- nothing else.
    DAT_RETURN r = dat_cr_accept(cr, server.ep, 0, nullptr);
    EXPECT_TRUE(DAT_GET_TYPE(r) == DAT_INVALID_STATE || DAT_GET_TYPE(r) == DAT_INVALID_HANDLE ||
                DAT_GET_TYPE(r) == DAT_INVALID_PARAMETER)
        << "dat_cr_accept on a connected Endpoint -> " << ret_text(r);
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_CONNECTED);
    EXPECT_TRUE(no_event(client.conn_evd));
    DAT_EP_HANDLE sep2 = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(server.create_ep_on(&sep2, server.recv_evd, server.req_evd, server.conn_evd));
    DAT_EVENT cev{}, sev{};
    ASSERT_NO_FATAL_FAILURE(accept_pair(cr, nullptr, 0, &cev, &sev, sep2));
    EXPECT_EQ(sev.event_data.connect_event_data.ep_handle, sep2);
    EXPECT_EQ(cev.event_data.connect_event_data.ep_handle, cep2);
    // The first connection is untouched.
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_CONNECTED);
    EXPECT_DAT_OK(dat_ep_free(cep2));
    EXPECT_DAT_OK(dat_ep_free(sep2));
}

} // namespace

INSTANTIATE_OVER_IAS(CmTest);
