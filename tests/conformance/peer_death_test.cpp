// SPDX-License-Identifier: BSD-3-Clause
// Death of the peer process: a child process (forked before this process
// opens any IA) connects and is then SIGKILLed. Whatever this side has
// outstanding must complete -- posted receives flushed in posting order --
// and the connection must end with DISCONNECTED or BROKEN, within a bounded
// time, with no call hanging.
#include "connected.hpp"

#include <signal.h>

#include <chrono>
#include <thread>

using namespace conformance;

namespace {

constexpr int kRecvs = 4;
constexpr DAT_UINT64 kFirstCookie = 0xD0;
// How long the local side may take to notice that its peer's process died: the
// kernel closes a killed process's sockets at once, so this is generous.
constexpr auto kNoticeBound = std::chrono::seconds(5);

class PeerDeathTest : public ConformanceTest {
protected:
    void TearDown() override {
        child.kill_and_reap();
        if (psp != DAT_HANDLE_NULL)
            dat_psp_free(psp);
        side.close();
        ConformanceTest::TearDown();
    }

    // This process as the server of a Client child: PSP, tell the child the
    // port, take its request, create the Endpoint and post kRecvs receives.
    // Returns the request (DAT_HANDLE_NULL after a failure).
    DAT_CR_HANDLE serve() {
        EXPECT_EQ(side.open(GetParam()), DAT_SUCCESS);
        DAT_CONN_QUAL q = 0;
        EXPECT_EQ(dat_psp_create_any(side.ia.ia, &q, side.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), DAT_SUCCESS);
        PeerMsg pm;
        pm.kind = PeerMsg::Port;
        pm.value = q;
        EXPECT_TRUE(child.send(pm));
        EXPECT_TRUE(child.receive_kind(PeerMsg::ConnectPosted, nullptr));
        DAT_EVENT ev{};
        EXPECT_TRUE(wait_event(side.cr_evd, DAT_CONNECTION_REQUEST_EVENT, &ev));
        EXPECT_EQ(side.create_ep(), DAT_SUCCESS);
        EXPECT_EQ(side.post_recvs(rbuf, kRecvs, kFirstCookie), DAT_SUCCESS);
        if (::testing::Test::HasFailure())
            return DAT_HANDLE_NULL;
        return ev.event_data.cr_arrival_event_data.cr_handle;
    }

    // serve(), then accept: both this side and the child see the connection.
    void serve_and_accept() {
        DAT_CR_HANDLE cr = serve();
        ASSERT_NE(cr, DAT_HANDLE_NULL);
        ASSERT_DAT_OK(dat_cr_accept(cr, side.ep, 0, nullptr));
        ASSERT_TRUE(wait_event(side.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED));
        ASSERT_TRUE(child.receive_kind(PeerMsg::Established, nullptr));
    }

    // Kills the child now. Then the receives are flushed in order, the
    // connection ends, within kNoticeBound, and the Endpoint is DISCONNECTED.
    void kill_peer_and_expect_flush_and_end() {
        auto killed = std::chrono::steady_clock::now();
        child.kill_and_reap();
        EXPECT_TRUE(flushed_in_order(side.recv_evd, kRecvs, kFirstCookie)) << "after the peer died";
        EXPECT_TRUE(wait_connection_end(side.conn_evd));
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed);
        EXPECT_LT(ms, kNoticeBound) << "flush and connection end took " << ms.count() << " ms";
        // dat_ep_connect(3DAT) and friends: a connection that ends leaves the
        // Endpoint DISCONNECTED.
        EXPECT_TRUE(ep_state_becomes(side.ep, DAT_EP_STATE_DISCONNECTED));
        DAT_EP_STATE st{};
        DAT_BOOLEAN recv_idle = DAT_FALSE, req_idle = DAT_FALSE;
        ASSERT_DAT_OK(dat_ep_get_status(side.ep, &st, &recv_idle, &req_idle));
        EXPECT_EQ(recv_idle, DAT_TRUE);
        // Still a working Endpoint: reset is allowed from DISCONNECTED (dat_ep_reset(3DAT)).
        EXPECT_DAT_OK(dat_ep_reset(side.ep));
    }

    ChildPeer child;
    Side side;
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    Buffer rbuf;
};

TEST_P(PeerDeathTest, ClientKilledWhileServerHasReceivesPosted) {
    ASSERT_TRUE(child.start(GetParam(), ChildPeer::Role::Client)) << std::strerror(errno);
    ASSERT_NO_FATAL_FAILURE(serve_and_accept());
    kill_peer_and_expect_flush_and_end();
}

TEST_P(PeerDeathTest, ServerKilledWhileClientHasReceivesPosted) {
    ASSERT_TRUE(child.start(GetParam(), ChildPeer::Role::Server)) << std::strerror(errno);
    ASSERT_DAT_OK(side.open(GetParam()));
    ASSERT_DAT_OK(side.create_ep());
    ASSERT_DAT_OK(side.post_recvs(rbuf, kRecvs, kFirstCookie));
    ASSERT_TRUE(child.connect_from(side));
    kill_peer_and_expect_flush_and_end();
}

TEST_P(PeerDeathTest, WaiterBlockedOnReceiveWakesWhenPeerIsKilled) {
    ASSERT_TRUE(child.start(GetParam(), ChildPeer::Role::Client)) << std::strerror(errno);
    ASSERT_NO_FATAL_FAILURE(serve_and_accept());
    // The peer dies while this thread is blocked in dat_evd_wait() on the recv EVD.
    pid_t pid = child.pid();
    auto killed = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    std::thread killer([pid] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        ::kill(pid, SIGKILL);
    });
    DAT_EVENT ev{};
    DAT_RETURN r = next_event(side.recv_evd, &ev);
    auto woke_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed).count();
    killer.join();
    ASSERT_EQ(r, DAT_SUCCESS) << "the blocked waiter was not woken: " << ret_text(r);
    EXPECT_LT(woke_ms, std::chrono::duration_cast<std::chrono::milliseconds>(kNoticeBound).count())
        << "the blocked dat_evd_wait() returned " << woke_ms << " ms after the peer was killed";
    EXPECT_EQ(ev.event_number, DAT_DTO_COMPLETION_EVENT) << event_text(ev);
    EXPECT_EQ(ev.event_data.dto_completion_event_data.status, DAT_DTO_ERR_FLUSHED) << event_text(ev);
    EXPECT_EQ(ev.event_data.dto_completion_event_data.user_cookie.as_64, kFirstCookie);
    child.kill_and_reap();
    EXPECT_TRUE(flushed_in_order(side.recv_evd, kRecvs - 1, kFirstCookie + 1));
    EXPECT_TRUE(wait_connection_end(side.conn_evd));
}

TEST_P(PeerDeathTest, ClientKilledBeforeTheServerAccepts) {
    ASSERT_TRUE(child.start(GetParam(), ChildPeer::Role::Client)) << std::strerror(errno);
    DAT_CR_HANDLE cr = serve();
    ASSERT_NE(cr, DAT_HANDLE_NULL);
    child.kill_and_reap();
    std::this_thread::sleep_for(std::chrono::milliseconds(200)); // its sockets are closed by now
    // dat_cr_accept(3DAT): "If the Provider cannot complete the Connection establishment
    // ... the Consumer is notified through ... DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR
    // ... Endpoint transitions into Disconnected state and all posted Recv DTOs are
    // flushed to its recv_evd_handle." A provider that only learns of the death after
    // ESTABLISHED must then end the connection.
    bool accepted = false;
    EXPECT_TRUE(accept_of_departed_peer(cr, side.ep, side.conn_evd, &accepted));
    if (!accepted)
        return; // refused without effect on the Endpoint (checked): nothing was flushed
    EXPECT_TRUE(flushed_in_order(side.recv_evd, kRecvs, kFirstCookie));
    EXPECT_TRUE(ep_state_becomes(side.ep, DAT_EP_STATE_DISCONNECTED));
}

// The other way round: the server took the request and dies before it
// answers. dat_ep_connect(3DAT): NON_PEER_REJECTED "if the connection cannot
// be established for all reasons ... except timeout ... For example ...
// Transport errors"; not the connect's own timeout, and never a wait for
// ever. With a connect timeout: that is the connect libfabric tcp leaves
// without news of the server's end.
TEST_P(PeerDeathTest, ServerKilledHoldingTheRequest) {
    ASSERT_TRUE(child.start(GetParam(), ChildPeer::Role::HoldingServer)) << std::strerror(errno);
    ASSERT_DAT_OK(side.open(GetParam()));
    ASSERT_DAT_OK(side.create_ep());
    PeerMsg pm;
    ASSERT_TRUE(child.receive_kind(PeerMsg::Port, &pm));
    IaAddress addr;
    ASSERT_DAT_OK(ia_address(side.ia.ia, &addr));
    ASSERT_DAT_OK(connect_ep(side.ep, addr.ptr(), pm.value, 20 * 1000 * 1000));
    ASSERT_TRUE(child.receive_kind(PeerMsg::RequestHeld, nullptr));
    std::this_thread::sleep_for(std::chrono::milliseconds(500)); // held a while
    const auto killed = std::chrono::steady_clock::now();
    child.kill_and_reap();
    DAT_EVENT ev{};
    const DAT_RETURN waited = dat_evd_wait(side.conn_evd, 10'000'000, 1, &ev, nullptr);
    ASSERT_EQ(waited, DAT_SUCCESS) << "no connection event 10 s after the kill: " << ret_text(waited);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed);
    EXPECT_EQ(ev.event_number, DAT_CONNECTION_EVENT_NON_PEER_REJECTED) << event_text(ev);
    EXPECT_LT(ms, kNoticeBound) << "the connect failed " << ms.count() << " ms after the kill";
    EXPECT_TRUE(ep_state_becomes(side.ep, DAT_EP_STATE_DISCONNECTED));
}

} // namespace

INSTANTIATE_OVER_IAS(PeerDeathTest);
