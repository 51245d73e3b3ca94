// SPDX-License-Identifier: BSD-3-Clause
// Disconnect and Endpoint destruction, per dat_ep_disconnect(3DAT) and
// dat_ep_free(3DAT): DISCONNECTED on both sides, flushing of preposted
// receives in posting order, ordering on a shared EVD, disconnect and free in
// every state, and posting after the disconnect.
#include "connected.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>

using namespace conformance;

namespace {

class DisconnectTest : public ConnectedTest {
protected:
    // Defined below: completions in the transport's queue plus flushes fit
    // the EVD; `local`: the server disconnects, else the client does.
    void completions_and_flushes_within_qlen(bool local);

    // `third`, another IA of this process (opened here with its EP), accepts
    // a connection from `ep` of the client through a PSP of its own (`psp`,
    // the caller frees it); both sides see it established.
    void connect_to_third(Side &third, DAT_EP_HANDLE ep, DAT_PSP_HANDLE &psp) {
        ASSERT_DAT_OK(third.open(GetParam()));
        ASSERT_DAT_OK(third.create_ep());
        const DAT_CONN_QUAL q = unused_conn_qual();
        ASSERT_DAT_OK(dat_psp_create(third.ia.ia, q, third.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp));
        IaAddress third_addr;
        ASSERT_DAT_OK(ia_address(third.ia.ia, &third_addr));
        ASSERT_DAT_OK(conformance::connect_ep(ep, third_addr.ptr(), q));
        DAT_EVENT ev{};
        ASSERT_TRUE(wait_event(third.cr_evd, DAT_CONNECTION_REQUEST_EVENT, &ev));
        ASSERT_DAT_OK(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, third.ep, 0, nullptr));
        ASSERT_TRUE(wait_event(third.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED));
        ASSERT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED));
    }

    // The client sends `n` messages of `size` bytes from `s` (registered
    // here), one at a time, each completed before the next (cookies 0..n-1).
    void client_sends(Buffer &s, int n, size_t size) {
        ASSERT_DAT_OK(client.register_buffer(s, size * n));
        for (int i = 0; i < n; ++i) {
            DAT_LMR_TRIPLET t = s.iov(size * i, size);
            ASSERT_DAT_OK(dat_ep_post_send(client.ep, 1, &t, cookie(i), DAT_COMPLETION_DEFAULT_FLAG));
            ASSERT_TRUE(wait_dto_ok(client.req_evd, i));
        }
    }

    // Over the connected pair: the server posts `n` receives of 64 bytes and
    // the client sends `n` messages, each completed at both ends (cookies 0..n-1).
    void exchange_messages(int n) {
        Buffer r, s;
        ASSERT_DAT_OK(server.post_recvs(r, n, 0, 64));
        ASSERT_NO_FATAL_FAILURE(client_sends(s, n, 64));
        for (int i = 0; i < n; ++i)
            ASSERT_TRUE(wait_dto_ok(server.recv_evd, i));
    }

    // A new connection of the pair, ended at once by the client's graceful
    // disconnect: `*waited`, how long until `watched` saw DISCONNECTED (the
    // other side must see it too).
    void connect_and_time_graceful_disconnect(Side &watched, std::chrono::steady_clock::duration *waited) {
        Side &other = &watched == &server ? client : server;
        ASSERT_NO_FATAL_FAILURE(connect_pair());
        const auto t0 = std::chrono::steady_clock::now();
        ASSERT_DAT_OK(dat_ep_disconnect(client.ep, DAT_CLOSE_GRACEFUL_FLAG));
        ASSERT_TRUE(wait_event(watched.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
        *waited = std::chrono::steady_clock::now() - t0;
        EXPECT_TRUE(wait_event(other.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    }

    // A connected pair; `from` disconnects with `flags`. dat_ep_disconnect(3DAT):
    // completion "reported ... through a DAT_CONNECTION_EVENT_DISCONNECTED event on
    // connect_evd_handle"; state DISCONNECTED -- on both sides, once.
    void disconnect_gives_disconnected_on_both_sides(Side &from, DAT_CLOSE_FLAGS flags) {
        Side &other = &from == &server ? client : server;
        ASSERT_NO_FATAL_FAILURE(connect_pair());
        ASSERT_DAT_OK(dat_ep_disconnect(from.ep, flags));
        for (Side *side : {&from, &other}) {
            SCOPED_TRACE(side == &server ? "server" : "client");
            DAT_EVENT ev{};
            ASSERT_TRUE(wait_event(side->conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED, &ev));
            EXPECT_EQ(ev.event_data.connect_event_data.ep_handle, side->ep);
            EXPECT_EQ(ep_state(side->ep), DAT_EP_STATE_DISCONNECTED);
        }
        EXPECT_TRUE(no_event(client.conn_evd));
        EXPECT_TRUE(no_event(server.conn_evd));
    }

    // A connected pair; the server posts `n` receives (cookies from `first`)
    // and disconnects with `flags`: dat_ep_disconnect(3DAT) "Upon disconnect,
    // all outstanding and in-progress DTOs ... must be completed", presented
    // "through a DTO completion Event Stream of the recv_evd_handle" -- for
    // outstanding receives, flushed in posting order. Both sides see DISCONNECTED.
    void local_disconnect_flushes_receives(DAT_CLOSE_FLAGS flags, int n, DAT_UINT64 first) {
        Buffer b;
        ASSERT_NO_FATAL_FAILURE(connect_pair());
        ASSERT_DAT_OK(server.post_recvs(b, n, first));
        ASSERT_DAT_OK(dat_ep_disconnect(server.ep, flags));
        EXPECT_TRUE(flushed_in_order(server.recv_evd, n, first));
        EXPECT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
        EXPECT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    }

    // The client connects to `q`; returns the request that reaches the server
    // (DAT_HANDLE_NULL after a failure) with its dat_cr_query parameters.
    DAT_CR_HANDLE request_to(DAT_CONN_QUAL q, DAT_CR_PARAM *p) {
        DAT_RETURN r = connect_ep(client.ep, server_addr.ptr(), q);
        EXPECT_EQ(r, DAT_SUCCESS) << "dat_ep_connect -> " << ret_text(r);
        DAT_CR_HANDLE cr = r == DAT_SUCCESS ? server_wait_cr() : DAT_HANDLE_NULL;
        if (cr == DAT_HANDLE_NULL)
            return cr;
        r = dat_cr_query(cr, DAT_CR_FIELD_ALL, p);
        EXPECT_EQ(r, DAT_SUCCESS) << "dat_cr_query -> " << ret_text(r);
        return r == DAT_SUCCESS ? cr : DAT_HANDLE_NULL;
    }

    // `ep` waits in a pending state for `cr`: dat_ep_free(3DAT) and
    // dat_ep_disconnect(3DAT) are refused there with DAT_INVALID_STATE; "the
    // Consumer shall first reject the associated Connection Request", which the
    // client sees as DAT_CONNECTION_EVENT_PEER_REJECTED.
    void expect_pending_until_rejected(DAT_EP_HANDLE ep, DAT_CR_HANDLE cr) {
        EXPECT_DAT_ERR(dat_ep_free(ep), DAT_INVALID_STATE, 0);
        EXPECT_DAT_ERR(dat_ep_disconnect(ep, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_STATE, 0);
        ASSERT_DAT_OK(dat_cr_reject(cr, 0, nullptr));
        EXPECT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_PEER_REJECTED));
    }

    // A Reserved Service Point for server.ep on an unused qualifier (rsp_qual).
    DAT_RETURN create_rsp() {
        rsp_qual = unused_conn_qual();
        return dat_rsp_create(server.ia.ia, rsp_qual, server.ep, server.cr_evd, &rsp);
    }
    DAT_CONN_QUAL rsp_qual = 0;
    DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;

    void disconnect_during_active_pending(DAT_CLOSE_FLAGS flag) {
        Buffer b;
        ASSERT_DAT_OK(client.post_recvs(b, 3, 0x600));
        ASSERT_NO_FATAL_FAILURE(client_connect());
        DAT_CR_HANDLE cr = server_wait_cr(); // pending at the server: not accepted
        ASSERT_NE(cr, DAT_HANDLE_NULL);
        ASSERT_EQ(ep_state(client.ep), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
        ASSERT_DAT_OK(dat_ep_disconnect(client.ep, flag));
        // dat_ep_disconnect(3DAT): "Both abrupt and graceful disconnect of the Endpoint
        // during connection establishment, DAT_EP_STATE_ACTIVE_CONNECTION_PENDING ...
        // "aborts" the connection establishment and transitions the local Endpoint into
        // DAT_EP_STATE_DISCONNECTED. That causes preposted Recv DTOs to be flushed to
        // recv_evd_handle." Its completion is a DISCONNECTED event.
        EXPECT_TRUE(ep_state_becomes(client.ep, DAT_EP_STATE_DISCONNECTED));
        EXPECT_TRUE(flushed_in_order(client.recv_evd, 3, 0x600));
        EXPECT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
        // The server takes the request after the active side gave up; nothing hangs.
        EXPECT_TRUE(accept_of_departed_peer(cr, server.ep, server.conn_evd));
        EXPECT_TRUE(no_event(client.conn_evd)) << "the aborted connection must not be established";
        EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_DISCONNECTED);
    }
};

// ---- DISCONNECTED on both sides -----------------------------------------------------------

TEST_P(DisconnectTest, GracefulDisconnectGivesDisconnectedOnBothSides) {
    disconnect_gives_disconnected_on_both_sides(client, DAT_CLOSE_GRACEFUL_FLAG);
}

TEST_P(DisconnectTest, AbruptDisconnectGivesDisconnectedOnBothSides) {
    disconnect_gives_disconnected_on_both_sides(server, DAT_CLOSE_ABRUPT_FLAG);
}

TEST_P(DisconnectTest, InvalidDisconnectFlagsAreInvalidParameter) {
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    // dat_ep_disconnect(3DAT): DAT_INVALID_PARAMETER "The disconnect_flags parameter is invalid."
    EXPECT_DAT_ERR(dat_ep_disconnect(client.ep, static_cast<DAT_CLOSE_FLAGS>(0x7)), DAT_INVALID_PARAMETER, 0);
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_CONNECTED);
    EXPECT_TRUE(no_event(server.conn_evd));
}

// ---- flushing of preposted receives ----------------------------------------------------------

TEST_P(DisconnectTest, LocalGracefulDisconnectFlushesReceivesInPostingOrder) {
    local_disconnect_flushes_receives(DAT_CLOSE_GRACEFUL_FLAG, 5, 0x100);
}

TEST_P(DisconnectTest, LocalAbruptDisconnectFlushesReceivesInPostingOrder) {
    // "For abrupt disconnect, all outstanding DTOs ... are completed unsuccessfully".
    local_disconnect_flushes_receives(DAT_CLOSE_ABRUPT_FLAG, 5, 0x200);
}

TEST_P(DisconnectTest, RemoteDisconnectFlushesReceivesInPostingOrder) {
    Buffer b, cb;
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_DAT_OK(server.post_recvs(b, 5, 0x300));
    ASSERT_DAT_OK(client.post_recvs(cb, 3, 0x380));
    ASSERT_DAT_OK(dat_ep_disconnect(client.ep, DAT_CLOSE_GRACEFUL_FLAG));
    EXPECT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    EXPECT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    EXPECT_TRUE(flushed_in_order(client.recv_evd, 3, 0x380));
    EXPECT_TRUE(flushed_in_order(server.recv_evd, 5, 0x300));
    DAT_EP_STATE st{};
    DAT_BOOLEAN recv_idle = DAT_FALSE, req_idle = DAT_FALSE;
    ASSERT_DAT_OK(dat_ep_get_status(server.ep, &st, &recv_idle, &req_idle));
    EXPECT_EQ(st, DAT_EP_STATE_DISCONNECTED);
    EXPECT_EQ(recv_idle, DAT_TRUE);
}

// Receive completions still in the transport's queue when the Endpoint
// disconnects, then the flushes of the receives left: together they fit in
// the EVD's qlen, so no DAT_ASYNC_ERROR_EVD_OVERFLOW (the kit used to count
// the drained completions as an overflow).
void DisconnectTest::completions_and_flushes_within_qlen(bool local) {
    constexpr int kQlen = 8, kRecvs = 6, kSends = 3;
    constexpr size_t kMsg = 256;
    DAT_EVD_HANDLE small = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_evd_create(server.ia.ia, kQlen, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &small));
    server.free_ep();
    ASSERT_DAT_OK(server.create_ep_on(&server.ep, small, server.req_evd, server.conn_evd));
    Buffer r, s;
    ASSERT_DAT_OK(server.post_recvs(r, kRecvs, 0x500, kMsg));
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_NO_FATAL_FAILURE(client_sends(s, kSends, kMsg));
    // Nobody reads the server's EVD while the receives land.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_DAT_OK(dat_ep_disconnect(local ? server.ep : client.ep, DAT_CLOSE_ABRUPT_FLAG));
    EXPECT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    // dat_ep_post_recv(3DAT) on a disconnected Endpoint: flushed at once,
    // behind what the disconnect queued.
    DAT_LMR_TRIPLET last = r.iov(0, kMsg);
    ASSERT_DAT_OK(dat_ep_post_recv(server.ep, 1, &last, cookie(0x600), DAT_COMPLETION_DEFAULT_FLAG));
    for (int i = 0; i < kSends; ++i)
        EXPECT_TRUE(wait_dto_ok(small, 0x500 + i));
    EXPECT_TRUE(flushed_in_order(small, kRecvs - kSends, 0x500 + kSends));
    EXPECT_TRUE(flushed_in_order(small, 1, 0x600));
    EXPECT_TRUE(no_event(small));
    DAT_EVENT ev{};
    DAT_RETURN q = dat_evd_dequeue(server.ia.async_evd, &ev);
    EXPECT_EQ(DAT_GET_TYPE(q), DAT_QUEUE_EMPTY) << "async event: " << event_text(ev);
    server.free_ep();
    EXPECT_DAT_OK(dat_evd_free(small));
}

TEST_P(DisconnectTest, LocalDisconnectCompletionsAndFlushesWithinQlenAreNoOverflow) {
    completions_and_flushes_within_qlen(true);
}

TEST_P(DisconnectTest, RemoteDisconnectCompletionsAndFlushesWithinQlenAreNoOverflow) {
    completions_and_flushes_within_qlen(false);
}

// ---- ordering on a shared EVD -----------------------------------------------------------------

TEST_P(DisconnectTest, SharedEvdSuccessfulCompletionsPrecedeDisconnected) {
    constexpr int kSends = 16, kRecvs = 20;
    constexpr size_t kMsg = 16 * 1024;
    // One EVD per side for connection events, receives and requests.
    client.free_ep();
    server.free_ep();
    DAT_EVD_HANDLE cevd = DAT_HANDLE_NULL, sevd = DAT_HANDLE_NULL;
    const auto flags = static_cast<DAT_EVD_FLAGS>(DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG);
    ASSERT_DAT_OK(dat_evd_create(client.ia.ia, 512, DAT_HANDLE_NULL, flags, &cevd));
    ASSERT_DAT_OK(dat_evd_create(server.ia.ia, 512, DAT_HANDLE_NULL, flags, &sevd));
    // dat_ep_create(3DAT): on an EVD that other streams feed "only
    // DAT_COMPLETION_THRESHOLD is valid for Request/Recv Completion Flags".
    DAT_EP_ATTR ca = suite_ep_attr(client.ia.ia), sa = suite_ep_attr(server.ia.ia);
    ca.recv_completion_flags = ca.request_completion_flags = DAT_COMPLETION_EVD_THRESHOLD_FLAG;
    sa.recv_completion_flags = sa.request_completion_flags = DAT_COMPLETION_EVD_THRESHOLD_FLAG;
    ASSERT_DAT_OK(client.create_ep_on(&client.ep, cevd, cevd, cevd, &ca));
    ASSERT_DAT_OK(server.create_ep_on(&server.ep, sevd, sevd, sevd, &sa));

    Buffer s, r;
    ASSERT_DAT_OK(client.register_buffer(s, kMsg * kSends));
    s.fill(0x3C);
    ASSERT_DAT_OK(server.post_recvs(r, kRecvs, 1000, kMsg));
    ASSERT_NO_FATAL_FAILURE(client_connect());
    DAT_CR_HANDLE cr = server_wait_cr();
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    ASSERT_DAT_OK(dat_cr_accept(cr, server.ep, 0, nullptr));
    ASSERT_TRUE(wait_event(sevd, DAT_CONNECTION_EVENT_ESTABLISHED));
    ASSERT_TRUE(wait_event(cevd, DAT_CONNECTION_EVENT_ESTABLISHED));

    for (int i = 0; i < kSends; ++i) {
        DAT_LMR_TRIPLET t = s.iov(kMsg * i, kMsg);
        ASSERT_DAT_OK(dat_ep_post_send(client.ep, 1, &t, cookie(i), DAT_COMPLETION_DEFAULT_FLAG));
    }
    ASSERT_DAT_OK(dat_ep_disconnect(client.ep, DAT_CLOSE_GRACEFUL_FLAG));

    // Collects one side's events up to DISCONNECTED, then whatever follows.
    auto collect = [](DAT_EVD_HANDLE evd, std::vector<DAT_EVENT> &before, std::vector<DAT_EVENT> &after) {
        for (;;) {
            DAT_EVENT ev{};
            DAT_RETURN w = next_event(evd, &ev);
            ASSERT_EQ(w, DAT_SUCCESS) << "no DISCONNECTED: " << ret_text(w);
            if (ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED)
                break;
            ASSERT_EQ(ev.event_number, DAT_DTO_COMPLETION_EVENT) << event_text(ev);
            before.push_back(ev);
        }
        DAT_EVENT ev{};
        while (next_event(evd, &ev, kQuietTimeoutUs) == DAT_SUCCESS)
            after.push_back(ev);
    };
    std::vector<DAT_EVENT> cb, ca_, sb, sa_;
    ASSERT_NO_FATAL_FAILURE(collect(cevd, cb, ca_));
    ASSERT_NO_FATAL_FAILURE(collect(sevd, sb, sa_));

    // dat_ep_disconnect(3DAT): "If the same EVD is used for connect_evd_handle and any
    // recv_evd_handle and request_evd_handle, all successful Completion events of
    // in-progress DTOs precede the Disconnect Completion event."
    for (const auto *after : {&ca_, &sa_})
        for (const auto &ev : *after) {
            const char *side = after == &ca_ ? "client" : "server";
            if (ev.event_number != DAT_DTO_COMPLETION_EVENT)
                ADD_FAILURE() << side << ": second connection event after DISCONNECTED: " << event_text(ev);
            else
                EXPECT_NE(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS)
                    << side << ": successful completion after DISCONNECTED: " << event_text(ev);
        }
    // "For graceful disconnect, all outstanding and in-progress request DTOs ... must
    // try to be completed successfully first": over a healthy connection they do.
    ASSERT_EQ(cb.size() + ca_.size(), static_cast<size_t>(kSends)) << "every send completes exactly once";
    for (size_t i = 0; i < cb.size(); ++i) {
        const auto &d = cb[i].event_data.dto_completion_event_data;
        EXPECT_EQ(d.status, DAT_DTO_SUCCESS) << event_text(cb[i]);
        EXPECT_EQ(d.user_cookie.as_64, i);
    }
    EXPECT_EQ(cb.size(), static_cast<size_t>(kSends));
    // Server: the sends that completed arrived before DISCONNECTED, in order; the
    // receives left over were flushed.
    ASSERT_EQ(sb.size() + sa_.size(), static_cast<size_t>(kRecvs)) << "every receive completes exactly once";
    size_t ok = 0;
    for (const auto &ev : sb)
        if (ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS) {
            EXPECT_EQ(ev.event_data.dto_completion_event_data.user_cookie.as_64, 1000 + ok);
            EXPECT_EQ(ev.event_data.dto_completion_event_data.transfered_length, kMsg);
            ++ok;
        }
    EXPECT_EQ(ok, cb.size()) << "successful sends vs successful receives";
    EXPECT_EQ(r.mismatch(0, kMsg * ok, 0x3C, 0), -1);
    client.free_ep();
    server.free_ep();
    // dat_ep_free(3DAT): freeing "destroys an Event Stream for each of the associated
    // Event Dispatchers": nothing more arrives for the freed Endpoints.
    EXPECT_TRUE(no_event(cevd)) << "event for a freed Endpoint";
    EXPECT_TRUE(no_event(sevd)) << "event for a freed Endpoint";
    EXPECT_DAT_OK(dat_evd_free(cevd));
    EXPECT_DAT_OK(dat_evd_free(sevd));
}

TEST_P(DisconnectTest, GracefulDisconnectCompletesInFlightSendsSuccessfully) {
    constexpr int kSends = 8;
    const size_t msg = std::min<size_t>(256 * 1024, query_ep_attr(client.ep).max_message_size);
    Buffer s, r;
    ASSERT_DAT_OK(client.register_buffer(s, msg * kSends));
    s.fill(0x4D);
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_DAT_OK(server.post_recvs(r, kSends, 100, msg));
    for (int i = 0; i < kSends; ++i) {
        DAT_LMR_TRIPLET t = s.iov(msg * i, msg);
        ASSERT_DAT_OK(dat_ep_post_send(client.ep, 1, &t, cookie(i), DAT_COMPLETION_DEFAULT_FLAG));
    }
    ASSERT_DAT_OK(dat_ep_disconnect(client.ep, DAT_CLOSE_GRACEFUL_FLAG));
    // dat_ep_disconnect(3DAT): graceful: in-progress request DTOs "must try to be
    // completed successfully first, before disconnect proceeds".
    for (int i = 0; i < kSends; ++i)
        EXPECT_TRUE(wait_dto_ok(client.req_evd, i));
    for (int i = 0; i < kSends; ++i)
        EXPECT_TRUE(wait_dto_ok(server.recv_evd, 100 + i));
    EXPECT_EQ(r.mismatch(0, msg * kSends, 0x4D, 0), -1);
    EXPECT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    EXPECT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
}

TEST_P(DisconnectTest, AbruptDisconnectCompletesEveryDtoAndNoSuccessFollowsAFailure) {
    constexpr int kSends = 32;
    const size_t msg = std::min<size_t>(64 * 1024, query_ep_attr(client.ep).max_message_size);
    Buffer s, r, cr;
    ASSERT_DAT_OK(client.register_buffer(s, msg));
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_DAT_OK(client.post_recvs(cr, 4, 0x500));
    ASSERT_DAT_OK(server.post_recvs(r, kSends, 100, msg));
    for (int i = 0; i < kSends; ++i) {
        DAT_LMR_TRIPLET t = s.iov(0, msg);
        ASSERT_DAT_OK(dat_ep_post_send(client.ep, 1, &t, cookie(i), DAT_COMPLETION_DEFAULT_FLAG));
    }
    ASSERT_DAT_OK(dat_ep_disconnect(client.ep, DAT_CLOSE_ABRUPT_FLAG));
    // dat_ep_disconnect(3DAT): "all outstanding DTOs ... are completed unsuccessfully,
    // and in-progress DTOs ... can be completed successfully or unsuccessfully. If an
    // in-progress DTO is completed unsuccessfully, all follow on in-progress DTOs in the
    // same direction also must be completed unsuccessfully."
    bool failed = false;
    for (int i = 0; i < kSends; ++i) {
        DAT_EVENT ev{};
        ASSERT_TRUE(wait_dto(client.req_evd, &ev)) << "send " << i << " never completed";
        const auto &d = ev.event_data.dto_completion_event_data;
        EXPECT_EQ(d.user_cookie.as_64, static_cast<DAT_UINT64>(i)) << "completions out of order";
        if (d.status != DAT_DTO_SUCCESS) {
            failed = true;
        } else {
            EXPECT_FALSE(failed) << "send " << i << " succeeded after an earlier send failed";
        }
    }
    EXPECT_TRUE(flushed_in_order(client.recv_evd, 4, 0x500));
    EXPECT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    EXPECT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    // Every server receive completes too (delivered, or flushed).
    for (int i = 0; i < kSends; ++i) {
        DAT_EVENT ev{};
        ASSERT_TRUE(wait_dto(server.recv_evd, &ev)) << "server receive " << i << " never completed";
        EXPECT_EQ(ev.event_data.dto_completion_event_data.user_cookie.as_64, static_cast<DAT_UINT64>(100 + i));
    }
}

// A freed Endpoint's receive buffers are the consumer's again: nothing may
// write into them afterwards. Over a provider that matches a receive to a
// message before the data is there (rxm's rendezvous reads a large send
// into the posted buffer), cancelling it finds it taken, and the data
// would land after dat_ep_free returned. (The same at a connection's end:
// kit_rules_test, over a transport that decides when the data lands.)
namespace {

// Lets the client's side run for a while (its completions read), so that
// whatever the provider still had in flight for the server can arrive.
void let_client_run(Side &client) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    while (std::chrono::steady_clock::now() < until) {
        DAT_EVENT ev;
        while (dat_evd_dequeue(client.req_evd, &ev) == DAT_SUCCESS) {
        }
        while (dat_evd_dequeue(client.recv_evd, &ev) == DAT_SUCCESS) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

} // namespace

TEST_P(DisconnectTest, ReceiveBuffersOfAFreedEndpointAreNotWrittenAfterwards) {
    constexpr int kSends = 32;
    const size_t msg = std::min<size_t>(64 * 1024, query_ep_attr(client.ep).max_message_size);
    Buffer s, r;
    ASSERT_DAT_OK(client.register_buffer(s, msg));
    s.fill_byte(0xAB);
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_DAT_OK(server.post_recvs(r, kSends, 100, msg));
    for (int i = 0; i < kSends; ++i) {
        DAT_LMR_TRIPLET t = s.iov(0, msg);
        ASSERT_DAT_OK(dat_ep_post_send(client.ep, 1, &t, cookie(i), DAT_COMPLETION_DEFAULT_FLAG));
    }
    // Some of the messages have arrived and some are on their way.
    DAT_EVENT first{};
    ASSERT_TRUE(wait_dto(server.recv_evd, &first));
    server.free_ep();
    // dat_ep_free(3DAT): the Endpoint's DTOs are gone with it, and the
    // memory of its receives is the consumer's.
    r.fill_byte(0x5A);
    let_client_run(client);
    EXPECT_EQ(r.mismatch_byte(0, r.size, 0x5A), -1) << "a receive buffer of the freed EP was written afterwards";
}

// ---- disconnect in other states -------------------------------------------------------------

TEST_P(DisconnectTest, DisconnectOfUnconnectedEndpointIsInvalidState) {
    // dat_ep_disconnect(3DAT): "Disconnecting an Endpoint in DAT_EP_STATE_UNCONNECTED ... is disallowed."
    EXPECT_DAT_ERR(dat_ep_disconnect(client.ep, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_STATE, 0);
    EXPECT_DAT_ERR(dat_ep_disconnect(client.ep, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_STATE, 0);
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_UNCONNECTED);
    EXPECT_TRUE(no_event(client.conn_evd));
}

TEST_P(DisconnectTest, DisconnectOfDisconnectedEndpointIsANoOp) {
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_NO_FATAL_FAILURE(disconnect_pair(client));
    // dat_ep_disconnect(3DAT): "Disconnecting an unconnected Disconnected Endpoint is no-op."
    EXPECT_DAT_OK(dat_ep_disconnect(client.ep, DAT_CLOSE_GRACEFUL_FLAG));
    EXPECT_DAT_OK(dat_ep_disconnect(client.ep, DAT_CLOSE_ABRUPT_FLAG));
    EXPECT_DAT_OK(dat_ep_disconnect(server.ep, DAT_CLOSE_ABRUPT_FLAG));
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_DISCONNECTED);
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_DISCONNECTED);
    EXPECT_TRUE(no_event(client.conn_evd));
    EXPECT_TRUE(no_event(server.conn_evd));
}

TEST_P(DisconnectTest, AbruptDisconnectWhileAGracefulOneIsPendingEndsItAtOnce) {
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_DAT_OK(dat_ep_disconnect(client.ep, DAT_CLOSE_GRACEFUL_FLAG));
    const DAT_EP_STATE after_graceful = ep_state(client.ep); // DISCONNECT_PENDING over tcp, as a rule
    ASSERT_DAT_OK(dat_ep_disconnect(client.ep, DAT_CLOSE_ABRUPT_FLAG));
    // dat_ep_disconnect(3DAT): "The Consumer can call abrupt dat_ep_disconnect() when the local
    // Endpoint is in the DAT_EP_DISCONNECT_PENDING state. This causes the Endpoint to transition
    // into DAT_EP_STATE_DISCONNECTED without waiting".
    EXPECT_EQ(ep_state(client.ep), DAT_EP_STATE_DISCONNECTED) << "state after the graceful call: " << after_graceful;
    EXPECT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    EXPECT_TRUE(no_event(client.conn_evd)) << "one disconnect, one event";
    EXPECT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    EXPECT_TRUE(no_event(server.conn_evd));
}

TEST_P(DisconnectTest, GracefulDisconnectDuringActiveConnectionPendingAbortsAndFlushes) {
    disconnect_during_active_pending(DAT_CLOSE_GRACEFUL_FLAG);
}

TEST_P(DisconnectTest, AbruptDisconnectDuringActiveConnectionPendingAbortsAndFlushes) {
    disconnect_during_active_pending(DAT_CLOSE_ABRUPT_FLAG);
}

// ---- posting after the disconnect ---------------------------------------------------------------

TEST_P(DisconnectTest, DtosPostedAfterDisconnectAreFlushed) {
    Buffer s, t;
    ASSERT_DAT_OK(client.register_buffer(s, 4096));
    ASSERT_DAT_OK(server.register_buffer(t, 4096, DAT_MEM_PRIV_ALL_FLAG));
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_NO_FATAL_FAILURE(disconnect_pair(server));
    DAT_LMR_TRIPLET l = s.iov(0, 100);
    DAT_RMR_TRIPLET rm = t.rmr(0, 100);
    // dat_ep_post_send/rdma_write/rdma_read(3DAT): "The operation is valid for the
    // Endpoint in the DAT_EP_STATE_CONNECTED and DAT_EP_STATE_DISCONNECTED states. If
    // the operation returns successfully for the Endpoint in the DISCONNECTED state,
    // the posted [DTO] is immediately flushed to request_evd_handle." DAT_INVALID_STATE
    // is only for an Endpoint "not in the CONNECTED or DISCONNECTED state".
    DAT_RETURN r1 = dat_ep_post_send(client.ep, 1, &l, cookie(1), DAT_COMPLETION_DEFAULT_FLAG);
    DAT_RETURN r2 = dat_ep_post_rdma_write(client.ep, 1, &l, cookie(2), &rm, DAT_COMPLETION_DEFAULT_FLAG);
    DAT_RETURN r3 = dat_ep_post_rdma_read(client.ep, 1, &l, cookie(3), &rm, DAT_COMPLETION_DEFAULT_FLAG);
    // dat_ep_post_recv(3DAT): likewise "immediately flushed to recv_evd_handle".
    DAT_RETURN r4 = dat_ep_post_recv(client.ep, 1, &l, cookie(4), DAT_COMPLETION_DEFAULT_FLAG);
    EXPECT_EQ(r1, DAT_SUCCESS) << "post_send: " << ret_text(r1);
    EXPECT_EQ(r2, DAT_SUCCESS) << "post_rdma_write: " << ret_text(r2);
    EXPECT_EQ(r3, DAT_SUCCESS) << "post_rdma_read: " << ret_text(r3);
    EXPECT_EQ(r4, DAT_SUCCESS) << "post_recv: " << ret_text(r4);
    const DAT_RETURN posted[3] = {r1, r2, r3};
    for (DAT_UINT64 ck = 1; ck <= 3; ++ck) {
        if (posted[ck - 1] != DAT_SUCCESS)
            continue;
        DAT_EVENT ev{};
        ASSERT_TRUE(wait_dto(client.req_evd, &ev));
        EXPECT_EQ(ev.event_data.dto_completion_event_data.user_cookie.as_64, ck);
        EXPECT_EQ(ev.event_data.dto_completion_event_data.status, DAT_DTO_ERR_FLUSHED) << event_text(ev);
    }
    if (r4 == DAT_SUCCESS) {
        DAT_EVENT ev{};
        ASSERT_TRUE(wait_dto(client.recv_evd, &ev));
        EXPECT_EQ(ev.event_data.dto_completion_event_data.status, DAT_DTO_ERR_FLUSHED) << event_text(ev);
    }
    EXPECT_TRUE(no_event(server.recv_evd));
}

// dat_ep_get_status(3DAT): "A recv_idle value of DAT_TRUE specifies that there are no
// outstanding or in-progress Receive DTOs at the Endpoint". Receives the transport
// had when the connection broke (over tcp a message longer than its receive breaks
// it) are flushed; once their events are taken, none is outstanding, whether or
// not the transport ever reports them itself.
TEST_P(DisconnectTest, ReceivesFlushedWhenTheConnectionBrokeAreNotOutstanding) {
    Buffer r, s;
    ASSERT_DAT_OK(server.register_buffer(r, 4096));
    ASSERT_DAT_OK(client.register_buffer(s, 4096));
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    DAT_LMR_TRIPLET small = r.iov(0, 16), big = s.iov(0, 64);
    ASSERT_DAT_OK(dat_ep_post_recv(server.ep, 1, &small, cookie(1), DAT_COMPLETION_DEFAULT_FLAG));
    ASSERT_DAT_OK(dat_ep_post_send(client.ep, 1, &big, cookie(2), DAT_COMPLETION_DEFAULT_FLAG));
    DAT_EVENT ev{};
    ASSERT_TRUE(wait_dto(server.recv_evd, &ev));
    EXPECT_EQ(ev.event_data.dto_completion_event_data.status, DAT_DTO_ERR_LOCAL_LENGTH) << event_text(ev);
    ASSERT_TRUE(wait_dto(client.req_evd, &ev));
    DAT_LMR_TRIPLET room = s.iov(1024, 64);
    ASSERT_DAT_OK(dat_ep_post_recv(client.ep, 1, &room, cookie(3), DAT_COMPLETION_DEFAULT_FLAG));
    ASSERT_DAT_OK(dat_ep_post_recv(client.ep, 1, &room, cookie(4), DAT_COMPLETION_DEFAULT_FLAG));
    if (ep_state(client.ep) == DAT_EP_STATE_CONNECTED) // the transport kept the connection
        ASSERT_DAT_OK(dat_ep_disconnect(client.ep, DAT_CLOSE_ABRUPT_FLAG));
    EXPECT_TRUE(wait_connection_end(client.conn_evd));
    for (DAT_UINT64 ck = 3; ck <= 4; ++ck) {
        ASSERT_TRUE(wait_dto(client.recv_evd, &ev)) << "receive " << ck << " was not flushed";
        EXPECT_EQ(ev.event_data.dto_completion_event_data.user_cookie.as_64, ck);
        EXPECT_EQ(ev.event_data.dto_completion_event_data.status, DAT_DTO_ERR_FLUSHED) << event_text(ev);
    }
    DAT_EP_STATE st{};
    DAT_BOOLEAN recv_idle = DAT_FALSE, req_idle = DAT_FALSE;
    ASSERT_DAT_OK(dat_ep_get_status(client.ep, &st, &recv_idle, &req_idle));
    EXPECT_EQ(st, DAT_EP_STATE_DISCONNECTED);
    EXPECT_EQ(recv_idle, DAT_TRUE);
    EXPECT_EQ(req_idle, DAT_TRUE);
}

// Connection after connection, the client sends messages the server never
// posts receives for, and both sides end it. What an ended connection left
// unreceived is the provider's to drop, not to keep: over a provider whose
// endpoint the IA's connections share (shm keeps unmatched messages in a
// queue of 1024 entries for every receive of the endpoint), the next
// connection's receives and messages still go through.
TEST_P(DisconnectTest, MessagesEndedConnectionsLeftUnreceivedDoNotStopLaterOnes) {
    constexpr int kRounds = 30;
    constexpr int kLeft = 40;
    constexpr size_t kMsg = 64;
    Buffer s;
    ASSERT_DAT_OK(client.register_buffer(s, kMsg));
    DAT_LMR_TRIPLET t = s.iov(0, kMsg);
    for (int round = 0; round < kRounds; ++round) {
        SCOPED_TRACE(round);
        ASSERT_NO_FATAL_FAILURE(connect_pair());
        for (int i = 0; i < kLeft; ++i)
            ASSERT_DAT_OK(dat_ep_post_send(client.ep, 1, &t, cookie(i), DAT_COMPLETION_DEFAULT_FLAG));
        // Delivered where the transport takes a message with no receive
        // (libfabric's providers); retried where the peer must have one
        // (InfiniBand's receiver-not-ready), until the end flushes them.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        // Each side ends its own (the peer's end noticed without a receive:
        // PeerThatLeavesWithItsMessageUnreceivedEndsTheConnection).
        ASSERT_DAT_OK(dat_ep_disconnect(client.ep, DAT_CLOSE_ABRUPT_FLAG));
        ASSERT_DAT_OK(dat_ep_disconnect(server.ep, DAT_CLOSE_ABRUPT_FLAG));
        ASSERT_TRUE(wait_connection_end(client.conn_evd));
        ASSERT_TRUE(wait_connection_end(server.conn_evd));
        for (int i = 0; i < kLeft; ++i) {
            DAT_EVENT ev{};
            ASSERT_TRUE(wait_dto(client.req_evd, &ev)) << "send " << i << " never completed";
        }
        ASSERT_DAT_OK(dat_ep_reset(client.ep));
        ASSERT_DAT_OK(dat_ep_reset(server.ep));
    }
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_NO_FATAL_FAILURE(exchange_messages(8));
    disconnect_pair(client);
}

// A peer that sends a message the Endpoint has no receive for and then
// leaves (disconnects, either way, or frees its Endpoint): the Endpoint's
// connection ends too, without a receive posted (over libfabric tcp the
// unreceived message held the stream, and the end behind it went unseen).
TEST_P(DisconnectTest, PeerThatLeavesWithItsMessageUnreceivedEndsTheConnection) {
    Buffer s;
    ASSERT_DAT_OK(client.register_buffer(s, 64));
    DAT_LMR_TRIPLET t = s.iov(0, 64);
    for (int way = 0; way < 3; ++way) {
        SCOPED_TRACE(way == 0 ? "graceful disconnect" : way == 1 ? "abrupt disconnect" : "dat_ep_free");
        if (client.ep == DAT_HANDLE_NULL)
            ASSERT_DAT_OK(client.create_ep());
        ASSERT_NO_FATAL_FAILURE(connect_pair());
        ASSERT_DAT_OK(dat_ep_post_send(client.ep, 1, &t, cookie(way), DAT_COMPLETION_DEFAULT_FLAG));
        // Delivered where the transport takes a message with no receive
        // (libfabric's providers, whose send then completes); retried where
        // the peer must have one (InfiniBand's receiver-not-ready), until
        // the end flushes it.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (way < 2) {
            ASSERT_DAT_OK(dat_ep_disconnect(client.ep, way == 0 ? DAT_CLOSE_GRACEFUL_FLAG : DAT_CLOSE_ABRUPT_FLAG));
            ASSERT_TRUE(wait_connection_end(client.conn_evd));
            DAT_EVENT ev{};
            ASSERT_TRUE(wait_dto(client.req_evd, &ev)) << "the send never completed";
        } else {
            client.free_ep();
        }
        ASSERT_TRUE(wait_connection_end(server.conn_evd));
        ASSERT_DAT_OK(dat_ep_reset(server.ep));
        if (client.ep != DAT_HANDLE_NULL)
            ASSERT_DAT_OK(dat_ep_reset(client.ep));
        drain(server.recv_evd);
        drain(client.req_evd);
    }
}

// One thread posts receives (at most 8 outstanding) and reads their
// completions while the client streams sends and another thread ends the
// connection abruptly, both posting thread and disconnecting thread on one
// CPU so that the end can fall anywhere in a post. dat_ep_post_recv(3DAT)
// takes a receive in every state: each one the post accepted completes
// exactly once, delivered or flushed, and dat_ep_reset gives every record
// back (the whole pool can be posted again).
TEST_P(DisconnectTest, ReceivesPostedWhileTheConnectionEndsCompleteOnceEach) {
    constexpr int kRounds = 20;
    constexpr int kInFlight = 8;
    constexpr size_t kMsg = 64;
    Buffer r, s;
    ASSERT_DAT_OK(server.register_buffer(r, kMsg));
    ASSERT_DAT_OK(client.register_buffer(s, kMsg));
    cpu_set_t saved, one;
    ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof saved, &saved), 0);
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof one, &one), 0);
    std::minstd_rand rng(7);
    for (int round = 0; round < kRounds && !HasFatalFailure(); ++round) {
        SCOPED_TRACE(round);
        ASSERT_NO_FATAL_FAILURE(connect_pair());
        std::atomic<bool> stop{false};
        std::atomic<int> posted{0};   // receives, at the server
        std::atomic<int> received{0}; // messages, at the server
        std::vector<int> seen;        // completions per receive, by cookie
        DAT_RETURN refused = DAT_SUCCESS;
        std::thread receiver([&] {
            pthread_setaffinity_np(pthread_self(), sizeof one, &one);
            DAT_LMR_TRIPLET t = r.iov(0, kMsg);
            int outstanding = 0;
            const auto read_one = [&](DAT_TIMEOUT timeout_us) {
                DAT_EVENT ev{};
                DAT_COUNT n = 0;
                DAT_RETURN rc = timeout_us ? dat_evd_wait(server.recv_evd, timeout_us, 1, &ev, &n)
                                           : dat_evd_dequeue(server.recv_evd, &ev);
                if (rc != DAT_SUCCESS)
                    return false;
                const auto &d = ev.event_data.dto_completion_event_data;
                if (d.user_cookie.as_64 < seen.size())
                    ++seen[d.user_cookie.as_64];
                if (d.status == DAT_DTO_SUCCESS)
                    received.fetch_add(1, std::memory_order_relaxed);
                --outstanding;
                return true;
            };
            while (!stop.load(std::memory_order_relaxed) && refused == DAT_SUCCESS) {
                while (outstanding < kInFlight) {
                    refused = dat_ep_post_recv(server.ep, 1, &t, cookie(seen.size()), DAT_COMPLETION_DEFAULT_FLAG);
                    if (refused != DAT_SUCCESS)
                        break;
                    seen.push_back(0);
                    ++outstanding;
                    posted.fetch_add(1, std::memory_order_relaxed);
                }
                while (read_one(0)) {
                }
            }
            while (outstanding > 0 && read_one(5 * 1000 * 1000)) {
            }
        });
        std::thread sender([&] {
            DAT_LMR_TRIPLET t = s.iov(0, kMsg);
            int outstanding = 0, sent = 0;
            while (!stop.load(std::memory_order_relaxed)) {
                // No further ahead of the receiver than its receives.
                if (outstanding < 4 && sent < received.load(std::memory_order_relaxed) + kInFlight) {
                    if (dat_ep_post_send(client.ep, 1, &t, cookie(0), DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS)
                        break;
                    ++outstanding;
                    ++sent;
                }
                DAT_EVENT ev{};
                while (dat_evd_dequeue(client.req_evd, &ev) == DAT_SUCCESS)
                    --outstanding;
                std::this_thread::yield();
            }
        });
        // The end falls among the receiver's posts, not before its first.
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (posted.load(std::memory_order_relaxed) == 0 && std::chrono::steady_clock::now() < until)
            std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::microseconds(100 + rng() % 2000));
        EXPECT_DAT_OK(dat_ep_disconnect(server.ep, DAT_CLOSE_ABRUPT_FLAG));
        EXPECT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        stop = true;
        receiver.join();
        sender.join();
        EXPECT_EQ(refused, DAT_SUCCESS) << "dat_ep_post_recv -> " << ret_text(refused);
        ASSERT_GT(seen.size(), 0u);
        for (std::size_t i = 0; i < seen.size(); ++i)
            ASSERT_EQ(seen[i], 1) << "receive " << i << " of " << seen.size();
        EXPECT_TRUE(wait_connection_end(client.conn_evd));
        DAT_EVENT ev{};
        while (dat_evd_wait(client.req_evd, 100 * 1000, 1, &ev, nullptr) == DAT_SUCCESS) {
        }
        ASSERT_DAT_OK(dat_ep_reset(server.ep));
        ASSERT_DAT_OK(dat_ep_reset(client.ep));
        const DAT_COUNT pool = query_ep_attr(server.ep).max_recv_dtos;
        Buffer again; // all of them: no record stayed with the last connection
        ASSERT_DAT_OK(server.post_recvs(again, static_cast<int>(pool), 1u << 20, kMsg));
        server.free_ep();
        ASSERT_DAT_OK(server.create_ep());
    }
    pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
}

// ---- dat_ep_free in every state -------------------------------------------------------------------

TEST_P(DisconnectTest, FreeUnconnectedEndpointWithPostedReceives) {
    Buffer b;
    ASSERT_DAT_OK(client.post_recvs(b, 3, 0x700));
    ASSERT_DAT_OK(dat_ep_free(client.ep));
    DAT_EP_HANDLE freed = client.ep;
    client.ep = DAT_HANDLE_NULL;
    // dat_ep_free(3DAT): "Use of the handle of the destroyed Endpoint in any subsequent
    // operation except for the dat_ep_free() fails."
    DAT_EP_STATE st{};
    DAT_BOOLEAN a = DAT_FALSE, c = DAT_FALSE;
    EXPECT_DAT_ERR(dat_ep_get_status(freed, &st, &a, &c), DAT_INVALID_HANDLE, 0);
    // dat_ep_free(3DAT): the Consumer "must be ready for all completions that are not
    // dequeued yet either still being on the Endpoint recv_evd_handle ... or not being
    // there": what is there can only be the flushed receives, each at most once.
    std::set<DAT_UINT64> seen;
    for (const DAT_EVENT &ev : drain(client.recv_evd)) {
        const auto &d = ev.event_data.dto_completion_event_data;
        EXPECT_EQ(ev.event_number, DAT_DTO_COMPLETION_EVENT) << event_text(ev);
        EXPECT_EQ(d.status, DAT_DTO_ERR_FLUSHED) << event_text(ev);
        EXPECT_TRUE(d.user_cookie.as_64 >= 0x700 && d.user_cookie.as_64 < 0x703) << event_text(ev);
        EXPECT_TRUE(seen.insert(d.user_cookie.as_64).second) << "completed twice: " << event_text(ev);
    }
    // "The freeing of an Endpoint also destroys an Event Stream for each of the
    // associated Event Dispatchers": nothing feeds them any more (dat_evd_free(3DAT)).
    for (DAT_EVD_HANDLE *e : {&client.recv_evd, &client.req_evd, &client.conn_evd}) {
        EXPECT_DAT_OK(dat_evd_free(*e));
        *e = DAT_HANDLE_NULL;
    }
}

TEST_P(DisconnectTest, FreeConnectedEndpoint) {
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    // dat_ep_free(3DAT): "The Endpoint can be destroyed in any Endpoint state except
    // Reserved, Passive Connection Pending, and Tentative Connection Pending."
    ASSERT_DAT_OK(dat_ep_free(client.ep));
    client.ep = DAT_HANDLE_NULL;
    // The connection is gone with it; the peer learns it.
    EXPECT_TRUE(wait_connection_end(server.conn_evd));
    EXPECT_TRUE(ep_state_becomes(server.ep, DAT_EP_STATE_DISCONNECTED));
    // "The freeing of an Endpoint also destroys an Event Stream for each of the
    // associated Event Dispatchers": the freed Endpoint reports nothing more.
    EXPECT_TRUE(no_event(client.conn_evd)) << "event for a freed Endpoint";
    EXPECT_TRUE(no_event(client.recv_evd)) << "event for a freed Endpoint";
    EXPECT_TRUE(no_event(client.req_evd)) << "event for a freed Endpoint";
}

// A connected Endpoint freed as soon as its sends completed (a program that
// sends its last word and exits): the peer receives every message before
// the end of the connection flushes the receives it has left, though nobody
// read its EVD before the end arrived. Over the RDM transport the messages
// and the end travel apart (fabric, side channel).
TEST_P(DisconnectTest, FreeConnectedEndpointRightAfterItsSendsDeliversThemFirst) {
    constexpr int kSends = 3, kRecvs = 5;
    constexpr size_t kMsg = 64;
    Buffer r, s;
    ASSERT_DAT_OK(server.post_recvs(r, kRecvs, 0x700, kMsg));
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_NO_FATAL_FAILURE(client_sends(s, kSends, kMsg));
    ASSERT_DAT_OK(dat_ep_free(client.ep));
    client.ep = DAT_HANDLE_NULL;
    EXPECT_TRUE(wait_connection_end(server.conn_evd));
    for (int i = 0; i < kSends; ++i)
        EXPECT_TRUE(wait_dto_ok(server.recv_evd, 0x700 + i));
    EXPECT_TRUE(flushed_in_order(server.recv_evd, kRecvs - kSends, 0x700 + kSends));
}

// An Endpoint freed while its graceful disconnect waits for its requests,
// after the consumer read their completions: a request EVD of one event
// takes one completion from the transport at a time, so whatever the
// transport queued behind the send for the Endpoint of its own (verbs: the
// marker that tells when the send queue drained) is still unread when
// dat_ep_free(3DAT) returns. Reading the EVD afterwards must not reach the
// freed Endpoint's state (under ASan, a use after free).
TEST_P(DisconnectTest, FreeDuringGracefulDisconnectAfterItsSendCompletedLeavesTheEvdSound) {
    DAT_EVD_HANDLE one = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_evd_create(client.ia.ia, 1, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &one));
    client.free_ep();
    ASSERT_DAT_OK(client.create_ep_on(&client.ep, client.recv_evd, one, client.conn_evd));
    Buffer r, s;
    ASSERT_DAT_OK(server.post_recvs(r, 1, 0x800, 64));
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_DAT_OK(client.register_buffer(s, 64));
    DAT_LMR_TRIPLET t = s.iov(0, 64);
    ASSERT_DAT_OK(dat_ep_post_send(client.ep, 1, &t, cookie(1), DAT_COMPLETION_DEFAULT_FLAG));
    ASSERT_DAT_OK(dat_ep_disconnect(client.ep, DAT_CLOSE_GRACEFUL_FLAG));
    EXPECT_TRUE(wait_dto_ok(one, 1));
    // What the transport posted behind the send completes meanwhile.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_DAT_OK(dat_ep_free(client.ep));
    client.ep = DAT_HANDLE_NULL;
    DAT_EVENT ev{};
    const DAT_RETURN r2 = dat_evd_dequeue(one, &ev);
    EXPECT_EQ(DAT_GET_TYPE(r2), DAT_QUEUE_EMPTY) << "event for a freed Endpoint: " << ret_text(r2);
    EXPECT_TRUE(wait_dto_ok(server.recv_evd, 0x800));
    EXPECT_DAT_OK(dat_evd_free(one));
}

// ---- an Endpoint reused after dat_ep_reset ----------------------------------------------

// The client's Endpoint carries 20 messages over a first connection, is
// reset (dat_ep_reset(3DAT)) and connects again to a new server Endpoint;
// over the second connection nothing is sent. Its graceful disconnect
// follows none of the first connection's messages: the server sees
// DISCONNECTED at once, not after waiting for messages that will not come.
TEST_P(DisconnectTest, GracefulDisconnectOfAReusedEndpointWaitsForNoMessageOfItsLastConnection) {
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_NO_FATAL_FAILURE(exchange_messages(20));
    ASSERT_NO_FATAL_FAILURE(disconnect_pair(client));
    ASSERT_DAT_OK(dat_ep_reset(client.ep));
    server.free_ep();
    ASSERT_DAT_OK(server.create_ep());
    std::chrono::steady_clock::duration waited{};
    ASSERT_NO_FATAL_FAILURE(connect_and_time_graceful_disconnect(server, &waited));
    EXPECT_LT(waited, std::chrono::milliseconds(500));
}

// A first connection ends abruptly with a 1 MiB send the peer never took;
// both Endpoints are reset and connect again. Nothing is outstanding on the
// second connection: its graceful disconnect does not wait for the first
// connection's send.
TEST_P(DisconnectTest, GracefulDisconnectOfAReusedEndpointWaitsForNoRequestOfItsLastConnection) {
    constexpr size_t kBig = 1 << 20;
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    Buffer s;
    ASSERT_DAT_OK(client.register_buffer(s, kBig));
    DAT_LMR_TRIPLET t = s.iov(0, kBig);
    ASSERT_DAT_OK(dat_ep_post_send(client.ep, 1, &t, cookie(7), DAT_COMPLETION_DEFAULT_FLAG));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_DAT_OK(dat_ep_disconnect(client.ep, DAT_CLOSE_ABRUPT_FLAG));
    ASSERT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    // The server ends its side too, not waiting to notice the client's end.
    ASSERT_DAT_OK(dat_ep_disconnect(server.ep, DAT_CLOSE_ABRUPT_FLAG));
    ASSERT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    DAT_EVENT ev{};
    ASSERT_TRUE(wait_dto(client.req_evd, &ev));
    ASSERT_DAT_OK(dat_ep_reset(client.ep));
    ASSERT_DAT_OK(dat_ep_reset(server.ep));
    std::chrono::steady_clock::duration waited{};
    ASSERT_NO_FATAL_FAILURE(connect_and_time_graceful_disconnect(client, &waited));
    EXPECT_LT(waited, std::chrono::milliseconds(500));
}

// Both Endpoints of a connection ended gracefully are reset; the client
// posts two receives before it connects again, and the server sends one
// message on the new connection: the first receive takes it, whole, and the
// second stays posted (over shm a receive of the transport's own, left from
// the old connection, made the first complete empty).
TEST_P(DisconnectTest, ReceivesAReusedEndpointPostsBeforeConnectingTakeTheNewConnectionsMessages) {
    constexpr size_t kMsg = 24;
    Buffer r, s;
    ASSERT_DAT_OK(client.register_buffer(r, 2 * 64));
    ASSERT_DAT_OK(server.register_buffer(s, kMsg));
    s.fill(0x29);
    DAT_LMR_TRIPLET t = s.iov(0, kMsg);
    for (int round = 0; round < 10; ++round) {
        SCOPED_TRACE(round);
        ASSERT_NO_FATAL_FAILURE(connect_pair());
        disconnect_pair(client);
        ASSERT_DAT_OK(dat_ep_reset(client.ep));
        ASSERT_DAT_OK(dat_ep_reset(server.ep));
        r.fill_byte(0xEE);
        for (int i = 0; i < 2; ++i) {
            DAT_LMR_TRIPLET in = r.iov(64 * i, 64);
            ASSERT_DAT_OK(dat_ep_post_recv(client.ep, 1, &in, cookie(10 + i), DAT_COMPLETION_DEFAULT_FLAG));
        }
        ASSERT_NO_FATAL_FAILURE(connect_pair());
        ASSERT_DAT_OK(dat_ep_post_send(server.ep, 1, &t, cookie(1), DAT_COMPLETION_DEFAULT_FLAG));
        ASSERT_TRUE(wait_dto_ok(server.req_evd, 1));
        DAT_EVENT ev{};
        ASSERT_TRUE(wait_dto_ok(client.recv_evd, 10, &ev));
        EXPECT_EQ(ev.event_data.dto_completion_event_data.transfered_length, kMsg);
        EXPECT_EQ(r.mismatch(0, kMsg, 0x29, 0), -1);
        EXPECT_TRUE(no_event(client.recv_evd));
        disconnect_pair(client);
        ASSERT_TRUE(wait_dto(client.recv_evd, &ev)); // the second receive, flushed
        ASSERT_DAT_OK(dat_ep_reset(client.ep));
        ASSERT_DAT_OK(dat_ep_reset(server.ep));
    }
}

// The server's Endpoint received 20 messages over a first connection and
// is reset; each later round a new client Endpoint sends one 8 KiB message
// and, once its send completed, disconnects gracefully, while the server
// waits on its connection EVD only. The receive completes successfully:
// dat_ep_disconnect(3DAT) flushes only what was not sent before.
TEST_P(DisconnectTest, AReusedEndpointReceivesWhatItsPeerSentBeforeAGracefulDisconnect) {
    constexpr int kRounds = 4;
    constexpr size_t kMsg = 8192;
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_NO_FATAL_FAILURE(exchange_messages(20));
    ASSERT_NO_FATAL_FAILURE(disconnect_pair(client));
    for (int round = 0; round < kRounds; ++round) {
        SCOPED_TRACE(round);
        ASSERT_DAT_OK(dat_ep_reset(server.ep));
        client.free_ep();
        ASSERT_DAT_OK(client.create_ep());
        Buffer r, s;
        ASSERT_DAT_OK(server.post_recvs(r, 1, 100, kMsg));
        ASSERT_NO_FATAL_FAILURE(connect_pair());
        ASSERT_DAT_OK(client.register_buffer(s, kMsg));
        DAT_LMR_TRIPLET t = s.iov(0, kMsg);
        ASSERT_DAT_OK(dat_ep_post_send(client.ep, 1, &t, cookie(1), DAT_COMPLETION_DEFAULT_FLAG));
        ASSERT_TRUE(wait_dto_ok(client.req_evd, 1));
        ASSERT_DAT_OK(dat_ep_disconnect(client.ep, DAT_CLOSE_GRACEFUL_FLAG));
        ASSERT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
        EXPECT_TRUE(wait_dto_ok(server.recv_evd, 100)) << "the message sent before the disconnect";
        ASSERT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    }
}

// A program that closes its IA as soon as its connection is established
// (a client that exits at once), over and over: the peer IA learns that
// each connection ended, and keeps working. Both IAs are in this process:
// over shm, a peer in the same process reads the closing side's memory
// directly, and what it had not yet taken from the closing side when that
// side's endpoints went would be read from unmapped memory.
TEST_P(DisconnectTest, AnIaClosedRightAfterItsConnectionIsEstablishedLeavesItsPeerWorking) {
    constexpr int kRounds = 30;
    for (int i = 0; i < kRounds; ++i) {
        ASSERT_NO_FATAL_FAILURE(client_connect());
        DAT_CR_HANDLE cr = server_wait_cr();
        ASSERT_NE(cr, DAT_HANDLE_NULL);
        ASSERT_DAT_OK(dat_cr_accept(cr, server.ep, 0, nullptr));
        ASSERT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED)) << "round " << i;
        client.close();
        // The server's side ends, established first or not.
        for (;;) {
            DAT_EVENT ev{};
            const DAT_RETURN r = next_event(server.conn_evd, &ev);
            ASSERT_EQ(r, DAT_SUCCESS) << "round " << i << ": no end of the connection: " << ret_text(r);
            if (ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED)
                continue;
            ASSERT_TRUE(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED ||
                        ev.event_number == DAT_CONNECTION_EVENT_BROKEN ||
                        ev.event_number == DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR)
                << "round " << i << ": " << event_text(ev);
            break;
        }
        server.free_ep();
        ASSERT_DAT_OK(server.create_ep());
        ASSERT_DAT_OK(client.open(ia_name));
        ASSERT_DAT_OK(client.create_ep());
    }
    // The server's IA still carries a connection and a message.
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    Buffer in, out;
    ASSERT_DAT_OK(server.post_recvs(in, 1, 7));
    ASSERT_DAT_OK(client.register_buffer(out, 64));
    out.fill(3);
    DAT_LMR_TRIPLET t = out.iov(0, 64);
    ASSERT_DAT_OK(dat_ep_post_send(client.ep, 1, &t, cookie(8), DAT_COMPLETION_DEFAULT_FLAG));
    EXPECT_TRUE(wait_dto_ok(client.req_evd, 8));
    EXPECT_TRUE(wait_dto_ok(server.recv_evd, 7));
    EXPECT_EQ(in.mismatch(0, 64, 3, 0), -1);
}

// RDMA Writes whose completions the consumer leaves unread for seconds
// (it waits on its connection EVD, as MVAPICH2's MPI_Finalize does), then a
// graceful disconnect from both sides: each side's connection ends
// DISCONNECTED, not BROKEN (a consumer counting DISCONNECTED events waits
// for ever otherwise), and the writes completed successfully.
TEST_P(DisconnectTest, WritesLeftUnreadForSecondsThenAGracefulDisconnectIsNotBroken) {
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    Buffer target, src;
    ASSERT_DAT_OK(server.register_buffer(target, 4096, DAT_MEM_PRIV_ALL_FLAG));
    ASSERT_DAT_OK(client.register_buffer(src, 4096));
    src.fill(5);
    constexpr int kWrites = 4;
    for (int i = 0; i < kWrites; ++i) {
        DAT_LMR_TRIPLET l = src.iov(static_cast<size_t>(i) * 512, 512);
        DAT_RMR_TRIPLET r = target.rmr(static_cast<size_t>(i) * 512, 512);
        ASSERT_DAT_OK(dat_ep_post_rdma_write(client.ep, 1, &l, cookie(20 + i), &r, DAT_COMPLETION_DEFAULT_FLAG));
    }
    // Longer than any bound a transport may set on an unanswered write.
    EXPECT_TRUE(no_event(client.conn_evd, 3'000'000)) << "the connection ended while its writes were answered";
    ASSERT_DAT_OK(dat_ep_disconnect(client.ep, DAT_CLOSE_GRACEFUL_FLAG));
    ASSERT_DAT_OK(dat_ep_disconnect(server.ep, DAT_CLOSE_GRACEFUL_FLAG));
    EXPECT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    EXPECT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED));
    for (int i = 0; i < kWrites; ++i)
        EXPECT_TRUE(wait_dto_ok(client.req_evd, 20 + i));
    EXPECT_EQ(target.mismatch(0, kWrites * 512, 5, 0), -1);
}

TEST_P(DisconnectTest, FreeDisconnectedEndpoint) {
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_NO_FATAL_FAILURE(disconnect_pair(client));
    EXPECT_DAT_OK(dat_ep_free(client.ep));
    client.ep = DAT_HANDLE_NULL;
    EXPECT_DAT_OK(dat_ep_free(server.ep));
    server.ep = DAT_HANDLE_NULL;
}

TEST_P(DisconnectTest, FreeDuringActiveConnectionPendingAbortsTheConnection) {
    ASSERT_NO_FATAL_FAILURE(client_connect());
    DAT_CR_HANDLE cr = server_wait_cr();
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    ASSERT_EQ(ep_state(client.ep), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
    // dat_ep_free(3DAT): "The destruction of the Endpoint during connection setup
    // aborts connection establishment."
    ASSERT_DAT_OK(dat_ep_free(client.ep));
    client.ep = DAT_HANDLE_NULL;
    EXPECT_TRUE(accept_of_departed_peer(cr, server.ep, server.conn_evd));
}

TEST_P(DisconnectTest, FreeOrDisconnectReservedEndpointIsInvalidState) {
    DAT_RETURN r = create_rsp();
    SKIP_IF_NOT_PROVIDED(r, kGapRsp);
    ASSERT_DAT_OK(r);
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_RESERVED) << ep_state_name(ep_state(server.ep));
    // dat_ep_free(3DAT): DAT_INVALID_STATE "The Endpoint is in DAT_EP_STATE_RESERVED ..."
    EXPECT_DAT_ERR(dat_ep_free(server.ep), DAT_INVALID_STATE, 0);
    // dat_ep_disconnect(3DAT): disconnecting in RESERVED "is disallowed".
    EXPECT_DAT_ERR(dat_ep_disconnect(server.ep, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_STATE, 0);
    // "the Consumer shall first destroy the associated Reserved Service Point that
    // transitions the Endpoint into the Unconnected state where the Endpoint can be destroyed."
    ASSERT_DAT_OK(dat_rsp_free(rsp));
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_UNCONNECTED);
    EXPECT_DAT_OK(dat_ep_free(server.ep));
    server.ep = DAT_HANDLE_NULL;
}

TEST_P(DisconnectTest, FreeOrDisconnectPassiveConnectionPendingEndpointIsInvalidState) {
    DAT_RETURN r = create_rsp();
    SKIP_IF_NOT_PROVIDED(r, kGapRsp);
    ASSERT_DAT_OK(r);
    DAT_CR_PARAM p{};
    DAT_CR_HANDLE cr = request_to(rsp_qual, &p);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    EXPECT_EQ(p.local_ep_handle, server.ep);
    // dat_rsp_create(3DAT): "The Local Endpoint is transitioned from Reserved to
    // Passive Connection Pending state."
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_PASSIVE_CONNECTION_PENDING) << ep_state_name(ep_state(server.ep));
    // The reject "transitions the Endpoint into the Unconnected state".
    ASSERT_NO_FATAL_FAILURE(expect_pending_until_rejected(server.ep, cr));
    EXPECT_EQ(ep_state(server.ep), DAT_EP_STATE_UNCONNECTED) << ep_state_name(ep_state(server.ep));
    EXPECT_DAT_OK(dat_ep_free(server.ep));
    server.ep = DAT_HANDLE_NULL;
    EXPECT_DAT_OK(dat_rsp_free(rsp));
}

TEST_P(DisconnectTest, FreeOrDisconnectTentativeConnectionPendingEndpointIsInvalidState) {
    DAT_CONN_QUAL q = 0;
    DAT_PSP_HANDLE ppsp = DAT_HANDLE_NULL;
    DAT_RETURN r = dat_psp_create_any(server.ia.ia, &q, server.cr_evd, DAT_PSP_PROVIDER_FLAG, &ppsp);
    // dat_psp_create_any(3DAT): "If the Provider cannot satisfy the request, the
    // operation shall fail and DAT_MODEL_NOT_SUPPORTED is returned" -- consistent
    // only with a provider that says it never creates Endpoints (dat_ia_query(3DAT)).
    if (not_provided(r)) {
        DAT_PROVIDER_ATTR pa{};
        ASSERT_DAT_OK(query_ia(server.ia.ia, nullptr, &pa));
        EXPECT_EQ(pa.ep_creator, DAT_PSP_CREATES_EP_NEVER) << "DAT_PSP_PROVIDER_FLAG refused (" << ret_text(r)
                                                           << ") by a provider whose ep_creator is " << pa.ep_creator;
    }
    SKIP_IF_NOT_PROVIDED(r, kGapPspProvider);
    ASSERT_DAT_OK(r);
    DAT_CR_PARAM p{};
    DAT_CR_HANDLE cr = request_to(q, &p);
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    ASSERT_NE(p.local_ep_handle, DAT_HANDLE_NULL) << "DAT_PSP_PROVIDER_FLAG: the request carries an Endpoint";
    DAT_EP_HANDLE tep = p.local_ep_handle;
    EXPECT_EQ(ep_state(tep), DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING) << ep_state_name(ep_state(tep));
    // The reject "transitions the Endpoint back to Provider control".
    ASSERT_NO_FATAL_FAILURE(expect_pending_until_rejected(tep, cr));
    EXPECT_DAT_OK(dat_psp_free(ppsp));
}

} // namespace

// The peer disconnects while this side's consumer has not read a
// completion yet (of a send, or of a receive): this side learns of it at
// once, not only once its consumer reads (the RDM transport's disconnect
// waits for the DTOs the peer's followed, which it counted as they were
// read, and gave up after a second), and the completion is the success it
// was. Meanwhile a send posted here would go to a peer that takes nothing.
TEST_P(DisconnectTest, APeersDisconnectIsSeenWhileThisSidesCompletionsAreUnread) {
    for (const bool unread_is_receive : {false, true}) {
        for (const DAT_CLOSE_FLAGS how : {DAT_CLOSE_ABRUPT_FLAG, DAT_CLOSE_GRACEFUL_FLAG}) {
            SCOPED_TRACE(std::string(unread_is_receive ? "an unread receive" : "an unread send") + ", peer " +
                         (how == DAT_CLOSE_ABRUPT_FLAG ? "abrupt" : "graceful"));
            ASSERT_NO_FATAL_FAILURE(connect_pair());
            Buffer sbuf, rbuf;
            ASSERT_DAT_OK(server.post_recvs(rbuf, 1, 0x10, 64));
            ASSERT_DAT_OK(client.post_recvs(sbuf, 1, 0x20, 64));
            DAT_LMR_TRIPLET t = sbuf.iov(0, 8);
            if (unread_is_receive) {
                DAT_LMR_TRIPLET st = rbuf.iov(0, 8);
                ASSERT_DAT_OK(dat_ep_post_send(server.ep, 1, &st, cookie(0x11), DAT_COMPLETION_DEFAULT_FLAG));
                ASSERT_TRUE(wait_dto_ok(server.req_evd, 0x11));
            } else {
                ASSERT_DAT_OK(dat_ep_post_send(client.ep, 1, &t, cookie(0x21), DAT_COMPLETION_DEFAULT_FLAG));
                ASSERT_TRUE(wait_dto_ok(server.recv_evd, 0x10));
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50)); // its completion is there, unread
            ASSERT_DAT_OK(dat_ep_disconnect(server.ep, how));
            ASSERT_TRUE(wait_connection_end(server.conn_evd));
            // Within the second the transport would otherwise wait.
            DAT_EVENT ev{};
            ASSERT_TRUE(wait_event(client.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED, &ev, 900 * 1000))
                << "the peer's disconnect, with a completion unread";
            if (unread_is_receive)
                EXPECT_TRUE(wait_dto_ok(client.recv_evd, 0x20));
            else
                EXPECT_TRUE(wait_dto_ok(client.req_evd, 0x21));
            // Both EPs again, for the next round.
            server.free_ep();
            client.free_ep();
            ASSERT_DAT_OK(server.create_ep());
            ASSERT_DAT_OK(client.create_ep());
            for (Side *side : {&server, &client})
                for (DAT_EVD_HANDLE e : {side->recv_evd, side->req_evd})
                    while (dat_evd_dequeue(e, &ev) == DAT_SUCCESS) {
                    }
        }
    }
}

// The peer of a connection is another IA of this process, which closes.
// This side's endpoints made afterwards open, connect and carry a message.
// (shm 1.17 reaches a peer of its own process through that peer's mapping
// of its region, which the peer's close unmaps, and touched every peer of
// the address vector at each new endpoint: SIGSEGV.)
TEST_P(DisconnectTest, EndpointsMadeAfterAPeerIaOfThisProcessClosedOpenAndConnect) {
    Side third;
    DAT_PSP_HANDLE psp3 = DAT_HANDLE_NULL;
    ASSERT_NO_FATAL_FAILURE(connect_to_third(third, client.ep, psp3));
    ASSERT_DAT_OK(dat_ep_disconnect(client.ep, DAT_CLOSE_ABRUPT_FLAG));
    ASSERT_TRUE(wait_connection_end(client.conn_evd));
    ASSERT_TRUE(wait_connection_end(third.conn_evd));
    // EVDs the client has not used yet: a new endpoint of its transport.
    DAT_EVD_HANDLE creq = DAT_HANDLE_NULL, crecv = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_evd_create(client.ia.ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &creq));
    ASSERT_DAT_OK(dat_evd_create(client.ia.ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &crecv));
    EXPECT_DAT_OK(dat_psp_free(psp3));
    third.close();
    DAT_EP_HANDLE cep = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(client.create_ep_on(&cep, crecv, creq, client.conn_evd));
    Buffer out, in;
    ASSERT_DAT_OK(client.register_buffer(out, 64));
    ASSERT_DAT_OK(server.post_recvs(in, 1, 7, 64));
    ASSERT_DAT_OK(conformance::connect_ep(cep, server_addr.ptr(), port));
    DAT_CR_HANDLE cr = server_wait_cr();
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    ASSERT_NO_FATAL_FAILURE(accept_pair(cr));
    DAT_LMR_TRIPLET t = out.iov(0, 64);
    ASSERT_DAT_OK(dat_ep_post_send(cep, 1, &t, conformance::cookie(8), DAT_COMPLETION_DEFAULT_FLAG));
    EXPECT_TRUE(wait_dto_ok(creq, 8));
    EXPECT_TRUE(wait_dto_ok(server.recv_evd, 7));
    ASSERT_DAT_OK(dat_ep_disconnect(cep, DAT_CLOSE_ABRUPT_FLAG));
    EXPECT_TRUE(wait_connection_end(client.conn_evd));
    EXPECT_DAT_OK(dat_ep_free(cep));
    EXPECT_DAT_OK(dat_evd_free(creq));
    EXPECT_DAT_OK(dat_evd_free(crecv));
}

// As above, but the peer IA closes while its connection to this side is up
// and this side makes its next endpoint at once, before it has seen the
// connection end: the address vector entry of the closed peer is still in
// use then.
TEST_P(DisconnectTest, EndpointsMadeRightAfterAConnectedPeerIaOfThisProcessClosedOpenAndConnect) {
    for (int round = 0; round < 3; ++round) {
        SCOPED_TRACE(round);
        Side third;
        DAT_EP_HANDLE linked = DAT_HANDLE_NULL;
        ASSERT_DAT_OK(client.create_ep_on(&linked, client.recv_evd, client.req_evd, client.conn_evd));
        DAT_PSP_HANDLE psp3 = DAT_HANDLE_NULL;
        ASSERT_NO_FATAL_FAILURE(connect_to_third(third, linked, psp3));
        // Everything of the IA at once, its connected endpoint included.
        EXPECT_DAT_OK(dat_ia_close(third.ia.ia, DAT_CLOSE_ABRUPT_FLAG));
        third.ia.ia = third.ia.pz = third.ia.async_evd = DAT_HANDLE_NULL; // dat_ia_close freed them
        third.cr_evd = third.conn_evd = third.req_evd = third.recv_evd = third.ep = DAT_HANDLE_NULL;
        // At once: EVDs the client has not used yet, so a new libfabric endpoint.
        DAT_EVD_HANDLE creq = DAT_HANDLE_NULL, crecv = DAT_HANDLE_NULL;
        ASSERT_DAT_OK(dat_evd_create(client.ia.ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &creq));
        ASSERT_DAT_OK(dat_evd_create(client.ia.ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &crecv));
        DAT_EP_HANDLE cep = DAT_HANDLE_NULL;
        ASSERT_DAT_OK(client.create_ep_on(&cep, crecv, creq, client.conn_evd));
        ASSERT_TRUE(wait_connection_end(client.conn_evd));
        EXPECT_DAT_OK(dat_ep_free(linked));
        EXPECT_DAT_OK(dat_ep_free(cep));
        EXPECT_DAT_OK(dat_evd_free(creq));
        EXPECT_DAT_OK(dat_evd_free(crecv));
    }
}

INSTANTIATE_OVER_IAS(DisconnectTest);
