// SPDX-License-Identifier: BSD-3-Clause
// Hostile input on a listening PSP's port: whoever can reach it can send
// anything. Garbage, a truncated message, a message whose lengths are past
// every limit, messages out of order, and connections that never send a
// byte (half-open) or stop in the middle of a message must not reach the
// Consumer as connection requests, crash the listener or stall it: a real
// client connecting afterwards, while the half-open connections are still
// open, is served as usual and its private data arrives intact.
//
// The bytes go to the TCP port of the PSP's qualifier at the IA's address,
// where a libfabric MSG provider (tcp) or the RDM transport's side channel
// listens. A transport whose listener is not a TCP port (rdma_cm) refuses
// the raw connection: the test then says so and skips.
#include "connected.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace conformance;

namespace {

class CmHostileTest : public ConnectedTest {
protected:
    void TearDown() override {
        for (int fd : fds)
            ::close(fd);
        fds.clear();
        ConnectedTest::TearDown();
    }

    // A TCP connection to the PSP's port, kept open until the test ends
    // (or closed by close_now). -1 with errno when refused.
    int raw_connect() {
        sockaddr_storage to = server_addr.storage;
        const auto p = htons(static_cast<uint16_t>(port));
        if (to.ss_family == AF_INET6)
            reinterpret_cast<sockaddr_in6 &>(to).sin6_port = p;
        else
            reinterpret_cast<sockaddr_in &>(to).sin_port = p;
        int fd = ::socket(to.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        const socklen_t len = to.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
        if (::connect(fd, reinterpret_cast<sockaddr *>(&to), len) != 0) {
            const int err = errno;
            ::close(fd);
            errno = err;
            return -1;
        }
        fds.push_back(fd);
        return fd;
    }

    void send_bytes(int fd, const std::string &bytes) {
        // The peer may drop us half way (that is its right): errors are ignored.
        (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    }

    void close_now(int fd) {
        ::close(fd);
        fds.erase(std::remove(fds.begin(), fds.end(), fd), fds.end());
    }

    static std::string header(uint8_t kind, uint16_t pdata_len, uint16_t addr_len) {
        std::string h("DRDM", 4);
        h += static_cast<char>(1);
        h += static_cast<char>(kind);
        h += static_cast<char>(pdata_len >> 8);
        h += static_cast<char>(pdata_len & 0xff);
        h += static_cast<char>(addr_len >> 8);
        h += static_cast<char>(addr_len & 0xff);
        h.append(6, '\0');
        h.append(8, '\0');   // qualifier
        h.append(8, '\x11'); // tag
        return h;
    }

    // Whether the IA's connections go over the RDM transport's side channel,
    // whose messages a test can forge (its IAs name themselves "libfabric
    // <provider> rdm"); `vendor` is the IA's vendor name either way.
    bool rdm_side_channel() {
        IaAttributes a;
        EXPECT_DAT_OK(a.query(server.ia.ia));
        vendor = a.ia.vendor_name;
        return vendor.size() >= 4 && vendor.compare(vendor.size() - 4, 4, " rdm") == 0;
    }

    std::vector<int> fds;
    std::string vendor;
};

TEST_P(CmHostileTest, GarbageTruncatedOversizedAndHalfOpenConnectionsLeaveTheListenerServing) {
    int probe = raw_connect();
    if (probe < 0 && errno == ECONNREFUSED)
        GTEST_SKIP() << "the IA's connection manager does not listen on the TCP port of a qualifier (rdma_cm)";
    ASSERT_GE(probe, 0) << "raw TCP connection to the PSP's port: " << std::strerror(errno);

    std::mt19937 rng(0xDA72);
    std::string junk(4096, '\0');
    for (char &c : junk)
        c = static_cast<char>(rng());

    // Garbage: a stray HTTP client, then random bytes.
    send_bytes(probe, "GET / HTTP/1.1\r\nHost: x\r\n\r\n" + junk);
    // Truncated: the start of a header, then the connection closes.
    int fd = raw_connect();
    ASSERT_GE(fd, 0);
    send_bytes(fd, header(1, 5, 8).substr(0, 11));
    close_now(fd);
    // Oversized: lengths past every limit, and the bytes to go with them.
    fd = raw_connect();
    ASSERT_GE(fd, 0);
    send_bytes(fd, header(1, 0xffff, 0xffff) + junk + junk);
    // A request without an address, and messages out of order.
    fd = raw_connect();
    ASSERT_GE(fd, 0);
    send_bytes(fd, header(1, 0, 0));
    fd = raw_connect();
    ASSERT_GE(fd, 0);
    send_bytes(fd, header(5, 0, 0) + header(6, 0, 0) + header(2, 0, 4) + "abcd");
    // Half a valid request, then silence.
    fd = raw_connect();
    ASSERT_GE(fd, 0);
    send_bytes(fd, header(1, 16, 8).substr(0, 40));
    // Half-open: connected, never a byte.
    for (int i = 0; i < 32; ++i)
        ASSERT_GE(raw_connect(), 0) << std::strerror(errno);

    // None of it is a connection request.
    EXPECT_TRUE(no_event(server.cr_evd, 200'000)) << "hostile bytes reached the Consumer as a connection request";

    // A real client is served while the half-open connections stay open.
    const char client_pdata[] = "a real client, after the hostile ones";
    const char server_pdata[] = "served";
    DAT_EVENT client_est{};
    ASSERT_NO_FATAL_FAILURE(
        connect_pair(client_pdata, sizeof client_pdata, server_pdata, sizeof server_pdata, &client_est, nullptr));
    const auto &cd = client_est.event_data.connect_event_data;
    ASSERT_GE(cd.private_data_size, static_cast<DAT_COUNT>(sizeof server_pdata));
    EXPECT_EQ(std::memcmp(cd.private_data, server_pdata, sizeof server_pdata), 0);

    // And the connection carries data.
    Buffer s, r;
    ASSERT_DAT_OK(client.register_buffer(s, 4096));
    s.fill(0x5D);
    ASSERT_DAT_OK(server.post_recvs(r, 1, 0x700, 4096));
    DAT_LMR_TRIPLET t = s.iov(0, 4096);
    ASSERT_DAT_OK(dat_ep_post_send(client.ep, 1, &t, cookie(0x701), DAT_COMPLETION_DEFAULT_FLAG));
    EXPECT_TRUE(wait_dto_ok(client.req_evd, 0x701));
    EXPECT_TRUE(wait_dto_ok(server.recv_evd, 0x700));
    EXPECT_EQ(r.mismatch(0, 4096, 0x5D, 0), -1);
}

// A well-formed request whose fabric address cannot be one of the
// provider's (one byte, and no string end): the Consumer's accept completes
// in error (dat_cr_accept(3DAT): DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR)
// instead of handing those bytes to the provider's address vector, which
// reads as many as its address format has; the listener keeps serving.
TEST_P(CmHostileTest, RequestWithAnAddressTheProviderCannotTakeEndsItsAcceptInError) {
    // Only the RDM transport's side channel takes a fabric address from the
    // requester.
    if (!rdm_side_channel())
        GTEST_SKIP() << GetParam() << " (" << vendor << "): its connection manager is libfabric's or rdma_cm's, "
                     << "which takes no fabric address from the requester";
    int fd = raw_connect();
    ASSERT_GE(fd, 0) << "raw TCP connection to the PSP's port: " << std::strerror(errno);
    // The header with the PSP's qualifier (big-endian, bytes 16 to 23).
    std::string request = header(1, 0, 1);
    for (int i = 0; i < 8; ++i)
        request[16 + i] = static_cast<char>(static_cast<uint64_t>(port) >> (56 - 8 * i));
    send_bytes(fd, request + "\x7f");
    DAT_EVENT ev{};
    ASSERT_TRUE(wait_event(server.cr_evd, DAT_CONNECTION_REQUEST_EVENT, &ev));
    DAT_EP_HANDLE ep2 = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(server.create_ep_on(&ep2, server.recv_evd, server.req_evd, server.conn_evd));
    ASSERT_DAT_OK(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, ep2, 0, nullptr));
    EXPECT_TRUE(wait_event(server.conn_evd, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR));
    EXPECT_DAT_OK(dat_ep_free(ep2));
    ASSERT_NO_FATAL_FAILURE(connect_pair());
}

// A request with more private data than the IA's max_private_data_size
// (the side channel's format has room for 256 bytes): the Consumer, who
// sizes its buffers by that attribute (dat_ia_query(3DAT)), is handed no
// more than it; the listener keeps serving.
TEST_P(CmHostileTest, RequestWithMorePrivateDataThanTheIaTakesIsCutToIt) {
    if (!rdm_side_channel())
        GTEST_SKIP() << GetParam() << " (" << vendor << "): its requests are libfabric's or rdma_cm's, "
                     << "which this test does not forge";
    const DAT_COUNT max = max_private_data_size;
    ASSERT_GT(max, 0);
    ASSERT_LT(max, 256);
    int fd = raw_connect();
    ASSERT_GE(fd, 0) << "raw TCP connection to the PSP's port: " << std::strerror(errno);
    std::string request = header(1, 256, 1);
    for (int i = 0; i < 8; ++i)
        request[16 + i] = static_cast<char>(static_cast<uint64_t>(port) >> (56 - 8 * i));
    send_bytes(fd, request + "\x7f" + std::string(256, 'P'));
    DAT_EVENT ev{};
    ASSERT_TRUE(wait_event(server.cr_evd, DAT_CONNECTION_REQUEST_EVENT, &ev));
    const DAT_CR_HANDLE cr = ev.event_data.cr_arrival_event_data.cr_handle;
    DAT_CR_PARAM param{};
    ASSERT_DAT_OK(dat_cr_query(cr, DAT_CR_FIELD_ALL, &param));
    EXPECT_LE(param.private_data_size, max) << "more private data than max_private_data_size";
    EXPECT_DAT_OK(dat_cr_reject(cr, 0, nullptr));
    ASSERT_NO_FATAL_FAILURE(connect_pair());
}

} // namespace

INSTANTIATE_OVER_IAS(CmHostileTest);
