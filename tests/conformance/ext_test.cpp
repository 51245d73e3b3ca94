// SPDX-License-Identifier: BSD-3-Clause
// The InfiniBand extensions (dat_ib_extensions.h) through dat_extension_op():
// what dat_ia_query says about them, RDMA write with immediate data (data
// and immediate arrive, exactly one receive is consumed, in order, with
// DAT_IB_DTO_EVENT and DAT_IB_EXTENSION_EVENT_DATA as the header lays them
// out), fetch and add and compare and swap where the IA offers them (and
// DAT_NOT_IMPLEMENTED, unadvertised, where it does not), the lightweight
// attribute query, and the errors: bad handles, unknown and unprovided
// operations, an unconnected Endpoint, bad triplets.
#include "connected.hpp"

#include <dat2/dat_ib_extensions.h>

#include <cstring>
#include <map>

using namespace conformance;

namespace {

constexpr unsigned char kCanary = 0xEE;
constexpr DAT_MEM_PRIV_FLAGS kRemoteWrite = static_cast<DAT_MEM_PRIV_FLAGS>(kLocalRw | DAT_MEM_PRIV_REMOTE_WRITE_FLAG);
// What dtestx registers its buffers with: everything, and the atomic target.
constexpr DAT_MEM_PRIV_FLAGS kAtomicTarget =
    static_cast<DAT_MEM_PRIV_FLAGS>(DAT_MEM_PRIV_ALL_FLAG | DAT_IB_MEM_PRIV_REMOTE_ATOMIC);

const DAT_IB_EXTENSION_EVENT_DATA &ext_of(const DAT_EVENT &ev) {
    return *reinterpret_cast<const DAT_IB_EXTENSION_EVENT_DATA *>(ev.event_extension_data);
}

std::uint64_t &word_at(Buffer &b, size_t off) { return *reinterpret_cast<std::uint64_t *>(b.data + off); }

class ExtTest : public ConnectedTest {
protected:
    bool advertised(const char *name) { return provider_attrs(client.ia.ia)[name] == "TRUE"; }

    DAT_RETURN write_immed(DAT_EP_HANDLE ep, DAT_LMR_TRIPLET *local, DAT_COUNT n, const DAT_RMR_TRIPLET &remote,
                           DAT_UINT32 immed, DAT_UINT64 ck) {
        return dat_ib_post_rdma_write_immed(ep, n, local, cookie(ck), &remote, immed, DAT_COMPLETION_DEFAULT_FLAG);
    }

    // The next event on `evd` is the extended completion of cookie `ck`,
    // successful, of extension type `type`.
    ::testing::AssertionResult wait_ext(DAT_EVD_HANDLE evd, DAT_UINT64 ck, DAT_IB_EXT_TYPE type, DAT_EVENT *out) {
        DAT_RETURN r = next_event(evd, out);
        if (r != DAT_SUCCESS)
            return ::testing::AssertionFailure() << "no event: " << ret_text(r);
        const auto &d = out->event_data.dto_completion_event_data;
        if (out->event_number != static_cast<DAT_EVENT_NUMBER>(DAT_IB_DTO_EVENT))
            return ::testing::AssertionFailure() << "expected DAT_IB_DTO_EVENT, got " << event_text(*out);
        if (d.user_cookie.as_64 != ck || d.status != DAT_DTO_SUCCESS)
            return ::testing::AssertionFailure()
                   << "cookie " << d.user_cookie.as_64 << " (want " << ck << "), status " << dto_status_name(d.status);
        if (ext_of(*out).type != type || ext_of(*out).status != DAT_OP_SUCCESS)
            return ::testing::AssertionFailure() << "extension type " << ext_of(*out).type << " (want " << type
                                                 << "), status " << ext_of(*out).status;
        return ::testing::AssertionSuccess();
    }

    // Whether the IA offers the atomic `attr` names. When it does not, the
    // operation must say so (DAT_NOT_IMPLEMENTED, nothing posted, the target
    // untouched) and skip_reason names the transport.
    bool skip_unless(const char *attr) {
        if (advertised(attr))
            return false;
        check_not_implemented(attr);
        IaAttributes a;
        a.query(client.ia.ia);
        skip_reason = std::string(GetParam()) + " (" + a.ia.vendor_name + "): " + attr +
                      " is FALSE and the operation returned DAT_NOT_IMPLEMENTED (checked): the transport has none "
                      "(libfabric tcp has no atomics; the sockets provider, which has, crashes inside libfabric on "
                      "an incoming connection, so the suites cannot run it)";
        return true;
    }
    std::string skip_reason;

    void check_not_implemented(const char *attr) {
        Buffer result, target;
        ASSERT_DAT_OK(client.register_buffer(result, 64));
        ASSERT_DAT_OK(server.register_buffer(target, 64, kAtomicTarget));
        ASSERT_NO_FATAL_FAILURE(connect_pair());
        word_at(target, 0) = 7;
        DAT_LMR_TRIPLET l = result.iov(0, 8);
        DAT_RMR_TRIPLET r = target.rmr(0, 8);
        if (std::strcmp(attr, DAT_IB_ATTR_FETCH_AND_ADD) == 0)
            EXPECT_DAT_ERR(dat_ib_post_fetch_and_add(client.ep, 1, &l, cookie(1), &r, DAT_COMPLETION_DEFAULT_FLAG),
                           DAT_NOT_IMPLEMENTED, 0);
        else
            EXPECT_DAT_ERR(dat_ib_post_cmp_and_swap(client.ep, 7, 8, &l, cookie(2), &r, DAT_COMPLETION_DEFAULT_FLAG),
                           DAT_NOT_IMPLEMENTED, 0);
        EXPECT_TRUE(no_event(client.req_evd));
        EXPECT_EQ(word_at(target, 0), 7u);
    }
};

// ---- attributes -------------------------------------------------------------------

TEST_P(ExtTest, IaQueryReportsTheIbExtensionAndItsCapabilities) {
    IaAttributes a;
    ASSERT_DAT_OK(a.query(client.ia.ia));
    EXPECT_EQ(a.ia.extension_supported, DAT_EXTENSION_IB);
    EXPECT_EQ(a.ia.extension_version, DAT_IB_EXTENSION_VERSION);
    auto attrs = provider_attrs(client.ia.ia);
    // What dtestx reads: each capability named, "TRUE" or "FALSE".
    for (const char *name : {DAT_IB_ATTR_IMMED_DATA, DAT_IB_ATTR_FETCH_AND_ADD, DAT_IB_ATTR_CMP_AND_SWAP}) {
        ASSERT_EQ(attrs.count(name), 1u) << name << " missing";
        EXPECT_TRUE(attrs[name] == "TRUE" || attrs[name] == "FALSE") << name << "=" << attrs[name];
    }
    EXPECT_EQ(attrs[DAT_IB_ATTR_IMMED_DATA], "TRUE");
    EXPECT_EQ(attrs[DAT_IB_ATTR_UD], "FALSE") << "no unreliable datagram service";
    EXPECT_EQ(attrs.count(DAT_IB_ATTR_COUNTERS), 0u) << "counters are not provided";
}

TEST_P(ExtTest, OpenQueryReportsTheAttributesWithoutAnIaAndCloseQueryReleasesIt) {
    DAT_HANDLE h = DAT_HANDLE_NULL;
    DAT_IA_ATTR ia_attr{};
    alignas(DAT_PROVIDER_ATTR) unsigned char raw[sizeof(DAT_PROVIDER_ATTR)] = {};
    auto *pa = reinterpret_cast<DAT_PROVIDER_ATTR *>(raw);
    // The header's macro casts to `const DAT_NAME_PTR` (a qualifier on a cast result).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-qualifiers"
    DAT_RETURN r =
        dat_ib_open_query(ia_name_ptr(GetParam()), &h, DAT_IA_FIELD_ALL, &ia_attr, DAT_PROVIDER_FIELD_ALL, pa);
#pragma GCC diagnostic pop
    ASSERT_DAT_OK(r);
    ASSERT_NE(h, DAT_HANDLE_NULL);
    EXPECT_EQ(ia_attr.extension_supported, DAT_EXTENSION_IB);
    EXPECT_NE(ia_attr.ia_address_ptr, nullptr);
    EXPECT_GT(pa->num_provider_specific_attr, 0);
    EXPECT_DAT_OK(dat_ib_close_query(h));
    // The handle is gone: closing again is refused.
    EXPECT_DAT_INVALID_HANDLE(dat_ib_close_query(h), HandleKind::Any);
}

// ---- RDMA write with immediate data --------------------------------------------------

TEST_P(ExtTest, WriteImmedLandsTheDataAndCompletesTheOldestReceiveWithTheImmediate) {
    Buffer src, target, rbuf, mark_s;
    ASSERT_DAT_OK(client.register_buffer(src, 8192));
    ASSERT_DAT_OK(server.register_buffer(target, 8192, kRemoteWrite));
    src.fill(0x42);
    target.fill_byte(kCanary);
    ASSERT_DAT_OK(server.register_buffer(rbuf, 512));
    rbuf.fill_byte(kCanary);
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    for (DAT_UINT64 ck : {1, 2}) {
        DAT_LMR_TRIPLET t = rbuf.iov(256 * (ck - 1), 256);
        ASSERT_DAT_OK(dat_ep_post_recv(server.ep, 1, &t, cookie(ck), DAT_COMPLETION_DEFAULT_FLAG));
    }
    DAT_LMR_TRIPLET local = src.iov(10, 3000);
    ASSERT_DAT_OK(write_immed(client.ep, &local, 1, target.rmr(100, 3000), 0xCAFEF00Du, 0x77));

    DAT_EVENT ev{};
    ASSERT_TRUE(wait_ext(client.req_evd, 0x77, DAT_IB_RDMA_WRITE_IMMED, &ev));
    EXPECT_EQ(ev.event_data.dto_completion_event_data.ep_handle, client.ep);
    EXPECT_EQ(ev.event_data.dto_completion_event_data.transfered_length, 3000u);
    EXPECT_EQ(ev.event_data.dto_completion_event_data.operation, static_cast<DAT_DTOS>(DAT_IB_DTO_RDMA_WRITE_IMMED));
    EXPECT_EQ(ev.evd_handle, client.req_evd);

    ASSERT_TRUE(wait_ext(server.recv_evd, 1, DAT_IB_RDMA_WRITE_IMMED_DATA, &ev)) << "the oldest receive (cookie 1)";
    const auto &d = ev.event_data.dto_completion_event_data;
    EXPECT_EQ(d.ep_handle, server.ep);
    EXPECT_EQ(d.transfered_length, 3000u) << "the written length";
    EXPECT_EQ(d.operation, static_cast<DAT_DTOS>(DAT_IB_DTO_RECV_IMMED));
    EXPECT_EQ(ext_of(ev).val.immed.data, 0xCAFEF00Du);
    // By the receive's completion the data is in place, exactly.
    EXPECT_EQ(target.mismatch(100, 3000, 0x42, 10), -1);
    EXPECT_EQ(target.mismatch_byte(0, 100, kCanary), -1) << "written before the remote range";
    EXPECT_EQ(target.mismatch_byte(3100, 8192 - 3100, kCanary), -1) << "written after the remote range";
    EXPECT_EQ(rbuf.mismatch_byte(0, 512, kCanary), -1) << "the immediate data wrote into the receive buffer";

    // Exactly one receive was consumed: the next send takes cookie 2, as a
    // plain receive.
    ASSERT_DAT_OK(client.register_buffer(mark_s, 64));
    DAT_LMR_TRIPLET m = mark_s.iov(0, 8);
    ASSERT_DAT_OK(dat_ep_post_send(client.ep, 1, &m, cookie(0x78), DAT_COMPLETION_DEFAULT_FLAG));
    ASSERT_TRUE(wait_dto_ok(client.req_evd, 0x78));
    ASSERT_TRUE(wait_dto_ok(server.recv_evd, 2, &ev));
    EXPECT_EQ(ev.event_number, DAT_DTO_COMPLETION_EVENT);
    EXPECT_EQ(ev.event_data.dto_completion_event_data.operation, DAT_DTO_RECEIVE);
    EXPECT_EQ(ev.event_data.dto_completion_event_data.transfered_length, 8u);
    EXPECT_TRUE(no_event(server.recv_evd));
}

TEST_P(ExtTest, WritesWithImmediateCompleteReceivesInPostingOrder) {
    Buffer src, target, rbuf;
    ASSERT_DAT_OK(client.register_buffer(src, 4096));
    ASSERT_DAT_OK(server.register_buffer(target, 4096, kRemoteWrite));
    src.fill(0x10);
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_DAT_OK(server.post_recvs(rbuf, 5, 100, 64));
    for (DAT_UINT32 i = 0; i < 5; ++i) {
        DAT_LMR_TRIPLET local = src.iov(i * 512, 100 + i);
        ASSERT_DAT_OK(write_immed(client.ep, &local, 1, target.rmr(i * 512, 100 + i), 0x1000 + i, 10 + i));
    }
    DAT_EVENT ev{};
    for (DAT_UINT32 i = 0; i < 5; ++i) {
        ASSERT_TRUE(wait_ext(server.recv_evd, 100 + i, DAT_IB_RDMA_WRITE_IMMED_DATA, &ev)) << "write " << i;
        EXPECT_EQ(ext_of(ev).val.immed.data, 0x1000 + i);
        EXPECT_EQ(ev.event_data.dto_completion_event_data.transfered_length, 100 + i);
    }
    for (DAT_UINT32 i = 0; i < 5; ++i)
        ASSERT_TRUE(wait_ext(client.req_evd, 10 + i, DAT_IB_RDMA_WRITE_IMMED, &ev)) << "write " << i;
    EXPECT_EQ(target.mismatch(0, 100, 0x10, 0), -1);
    EXPECT_EQ(target.mismatch(4 * 512, 104, 0x10, 4 * 512), -1);
}

// A write of no data (num_segments 0) still carries its immediate data: the
// oldest receive completes with it and a written length of 0.
TEST_P(ExtTest, WriteImmedOfNoDataStillDeliversTheImmediate) {
    Buffer target, rbuf;
    ASSERT_DAT_OK(server.register_buffer(target, 4096, kRemoteWrite));
    target.fill_byte(kCanary);
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_DAT_OK(server.post_recvs(rbuf, 1, 0x30, 64));
    ASSERT_DAT_OK(write_immed(client.ep, nullptr, 0, target.rmr(0, 64), 0xD00Du, 0x31));
    DAT_EVENT ev{};
    ASSERT_TRUE(wait_ext(client.req_evd, 0x31, DAT_IB_RDMA_WRITE_IMMED, &ev));
    EXPECT_EQ(ev.event_data.dto_completion_event_data.transfered_length, 0u);
    ASSERT_TRUE(wait_ext(server.recv_evd, 0x30, DAT_IB_RDMA_WRITE_IMMED_DATA, &ev));
    EXPECT_EQ(ext_of(ev).val.immed.data, 0xD00Du);
    EXPECT_EQ(ev.event_data.dto_completion_event_data.transfered_length, 0u);
    EXPECT_EQ(target.mismatch_byte(0, 4096, kCanary), -1);
}

TEST_P(ExtTest, WriteImmedOnUnconnectedEndpointIsInvalidState) {
    Buffer src, target;
    ASSERT_DAT_OK(client.register_buffer(src, 256));
    ASSERT_DAT_OK(server.register_buffer(target, 256, kRemoteWrite));
    DAT_LMR_TRIPLET local = src.iov(0, 64);
    EXPECT_DAT_ERR(write_immed(client.ep, &local, 1, target.rmr(0, 64), 1, 1), DAT_INVALID_STATE, 0);
    EXPECT_TRUE(no_event(client.req_evd));
}

TEST_P(ExtTest, WriteImmedFromABogusLmrContextIsRefused) {
    Buffer src, target, rbuf;
    ASSERT_DAT_OK(client.register_buffer(src, 256));
    ASSERT_DAT_OK(server.register_buffer(target, 256, kRemoteWrite));
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_DAT_OK(server.post_recvs(rbuf, 1, 1, 64));
    DAT_LMR_TRIPLET local = src.iov(0, 64);
    local.lmr_context ^= 0x5a5a0000;
    EXPECT_DAT_ERR(write_immed(client.ep, &local, 1, target.rmr(0, 64), 1, 1), DAT_PRIVILEGES_VIOLATION, 0);
    EXPECT_TRUE(no_event(server.recv_evd)) << "a refused write with immediate data consumed a receive";
}

TEST_P(ExtTest, WriteImmedOfAFlushedConnectionIsReportedAsExtendedAndFlushed) {
    // Receives flushed by a disconnect are plain receives; a write with
    // immediate data posted on a disconnected Endpoint is flushed at once
    // as what it is.
    Buffer src, target;
    ASSERT_DAT_OK(client.register_buffer(src, 256));
    ASSERT_DAT_OK(server.register_buffer(target, 256, kRemoteWrite));
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    ASSERT_NO_FATAL_FAILURE(disconnect_pair(client));
    ASSERT_EQ(ep_state(client.ep), DAT_EP_STATE_DISCONNECTED);
    DAT_LMR_TRIPLET local = src.iov(0, 64);
    ASSERT_DAT_OK(write_immed(client.ep, &local, 1, target.rmr(0, 64), 5, 0x99));
    DAT_EVENT ev{};
    ASSERT_DAT_OK(next_event(client.req_evd, &ev));
    EXPECT_EQ(ev.event_number, static_cast<DAT_EVENT_NUMBER>(DAT_IB_DTO_EVENT)) << event_text(ev);
    EXPECT_EQ(ev.event_data.dto_completion_event_data.user_cookie.as_64, 0x99u);
    EXPECT_EQ(ev.event_data.dto_completion_event_data.status, DAT_DTO_ERR_FLUSHED);
    EXPECT_EQ(ext_of(ev).type, DAT_IB_RDMA_WRITE_IMMED);
    EXPECT_EQ(ext_of(ev).status, DAT_IB_OP_ERR);
}

// ---- errors ----------------------------------------------------------------------------

TEST_P(ExtTest, ExtendedDtoOnAHandleThatIsNoEndpointIsInvalidHandle) {
    Buffer src;
    ASSERT_DAT_OK(client.register_buffer(src, 256));
    DAT_LMR_TRIPLET local = src.iov(0, 8);
    DAT_RMR_TRIPLET remote = src.rmr(0, 8);
    EXPECT_DAT_INVALID_HANDLE(write_immed(client.req_evd, &local, 1, remote, 1, 1), HandleKind::Ep);
    EXPECT_DAT_INVALID_HANDLE(write_immed(client.ia.ia, &local, 1, remote, 1, 1), HandleKind::Ep);
    EXPECT_DAT_INVALID_HANDLE(write_immed(DAT_HANDLE_NULL, &local, 1, remote, 1, 1), HandleKind::Ep);
    EXPECT_DAT_INVALID_HANDLE(
        dat_ib_post_fetch_and_add(client.req_evd, 1, &local, cookie(1), &remote, DAT_COMPLETION_DEFAULT_FLAG),
        HandleKind::Ep);
    // A freed Endpoint.
    DAT_EP_HANDLE ep = client.ep;
    client.free_ep();
    EXPECT_DAT_INVALID_HANDLE(write_immed(ep, &local, 1, remote, 1, 1), HandleKind::Ep);
}

TEST_P(ExtTest, UnknownOperationIsInvalidParameter) {
    // Also codes in the close range other than the close query, and
    // negative ones: the handle is good, the operation is not.
    for (int op : {777, 0xfff, static_cast<int>(DAT_IB_UD_AH_FREE_OP) + 1, DAT_CLOSE_EXTENSION_BASE + 1, 9999, -1}) {
        DAT_RETURN r = dat_extension_op(client.ep, static_cast<DAT_EXTENDED_OP>(op), 0, nullptr);
        EXPECT_EQ(DAT_GET_TYPE(r), DAT_INVALID_PARAMETER) << "op " << op << ": " << ret_text(r);
    }
}

TEST_P(ExtTest, UnprovidedOperationsAreNotImplemented) {
    // No unreliable datagrams, counters or collectives here.
    Buffer src;
    ASSERT_DAT_OK(client.register_buffer(src, 256));
    DAT_LMR_TRIPLET local = src.iov(0, 8);
    DAT_IB_ADDR_HANDLE ah{};
    EXPECT_DAT_ERR(dat_ib_post_send_ud(client.ep, 1, &local, &ah, cookie(1), DAT_COMPLETION_DEFAULT_FLAG),
                   DAT_NOT_IMPLEMENTED, 0);
    DAT_UINT64 counters[DCNT_IA_ALL_COUNTERS] = {};
    EXPECT_DAT_ERR(dat_ib_query_counters(client.ia.ia, DCNT_IA_ALL_COUNTERS, counters, 0), DAT_NOT_IMPLEMENTED, 0);
    EXPECT_DAT_ERR(dat_ib_collective_barrier(client.ia.ia, DAT_CONTEXT{}, DAT_COMPLETION_DEFAULT_FLAG),
                   DAT_NOT_IMPLEMENTED, 0);
    EXPECT_TRUE(no_event(client.req_evd));
}

// ---- atomics ------------------------------------------------------------------------------

TEST_P(ExtTest, FetchAndAddReturnsTheOriginalValueAndAdds) {
    if (skip_unless(DAT_IB_ATTR_FETCH_AND_ADD)) // checked DAT_NOT_IMPLEMENTED first
        GTEST_SKIP() << skip_reason;
    Buffer result, target;
    ASSERT_DAT_OK(client.register_buffer(result, 64));
    ASSERT_DAT_OK(server.register_buffer(target, 64, kAtomicTarget));
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    word_at(target, 8) = 0x10;
    word_at(target, 16) = 0xABCD; // the neighbour stays
    word_at(result, 0) = 0;
    DAT_LMR_TRIPLET l = result.iov(0, 8);
    DAT_RMR_TRIPLET r = target.rmr(8, 8);
    DAT_EVENT ev{};
    ASSERT_DAT_OK(dat_ib_post_fetch_and_add(client.ep, 0x100, &l, cookie(0x31), &r, DAT_COMPLETION_DEFAULT_FLAG));
    ASSERT_TRUE(wait_ext(client.req_evd, 0x31, DAT_IB_FETCH_AND_ADD, &ev));
    EXPECT_EQ(ev.event_data.dto_completion_event_data.operation, static_cast<DAT_DTOS>(DAT_IB_DTO_FETCH_ADD));
    EXPECT_EQ(word_at(result, 0), 0x10u) << "the original value";
    EXPECT_EQ(word_at(target, 8), 0x110u);
    ASSERT_DAT_OK(dat_ib_post_fetch_and_add(client.ep, 0x100, &l, cookie(0x32), &r, DAT_COMPLETION_DEFAULT_FLAG));
    ASSERT_TRUE(wait_ext(client.req_evd, 0x32, DAT_IB_FETCH_AND_ADD, &ev));
    EXPECT_EQ(word_at(result, 0), 0x110u);
    EXPECT_EQ(word_at(target, 8), 0x210u);
    EXPECT_EQ(word_at(target, 16), 0xABCDu);
    EXPECT_TRUE(no_event(server.recv_evd)) << "an atomic consumed a receive";
}

TEST_P(ExtTest, CompareAndSwapSwapsOnlyWhenEqualAndAlwaysReturnsTheOriginal) {
    if (skip_unless(DAT_IB_ATTR_CMP_AND_SWAP)) // checked DAT_NOT_IMPLEMENTED first
        GTEST_SKIP() << skip_reason;
    Buffer result, target;
    ASSERT_DAT_OK(client.register_buffer(result, 64));
    ASSERT_DAT_OK(server.register_buffer(target, 64, kAtomicTarget));
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    word_at(target, 0) = 0x54321;
    DAT_LMR_TRIPLET l = result.iov(0, 8);
    DAT_RMR_TRIPLET r = target.rmr(0, 8);
    DAT_EVENT ev{};
    // Compare fails: nothing swapped, the original comes back.
    ASSERT_DAT_OK(
        dat_ib_post_cmp_and_swap(client.ep, 0x654321, 0x6789A, &l, cookie(1), &r, DAT_COMPLETION_DEFAULT_FLAG));
    ASSERT_TRUE(wait_ext(client.req_evd, 1, DAT_IB_CMP_AND_SWAP, &ev));
    EXPECT_EQ(ev.event_data.dto_completion_event_data.operation, static_cast<DAT_DTOS>(DAT_IB_DTO_CMP_SWAP));
    EXPECT_EQ(word_at(result, 0), 0x54321u);
    EXPECT_EQ(word_at(target, 0), 0x54321u) << "swapped although the compare failed";
    // Compare succeeds.
    ASSERT_DAT_OK(
        dat_ib_post_cmp_and_swap(client.ep, 0x54321, 0x98765, &l, cookie(2), &r, DAT_COMPLETION_DEFAULT_FLAG));
    ASSERT_TRUE(wait_ext(client.req_evd, 2, DAT_IB_CMP_AND_SWAP, &ev));
    EXPECT_EQ(word_at(result, 0), 0x54321u);
    EXPECT_EQ(word_at(target, 0), 0x98765u);
}

TEST_P(ExtTest, AtomicOnAMisalignedOrShortTripletIsRefused) {
    if (!advertised(DAT_IB_ATTR_FETCH_AND_ADD))
        GTEST_SKIP() << GetParam() << ": " << DAT_IB_ATTR_FETCH_AND_ADD
                     << " is FALSE (libfabric tcp has no atomics): nothing to refuse but the operation itself, "
                        "which FetchAndAddReturnsTheOriginalValueAndAdds checks";
    Buffer result, target;
    ASSERT_DAT_OK(client.register_buffer(result, 64));
    ASSERT_DAT_OK(server.register_buffer(target, 64, kAtomicTarget));
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    DAT_LMR_TRIPLET l = result.iov(0, 8);
    DAT_RMR_TRIPLET misaligned = target.rmr(4, 8);
    EXPECT_DAT_ERR(dat_ib_post_fetch_and_add(client.ep, 1, &l, cookie(1), &misaligned, DAT_COMPLETION_DEFAULT_FLAG),
                   DAT_INVALID_PARAMETER, 0);
    DAT_LMR_TRIPLET short_local = result.iov(0, 4);
    DAT_RMR_TRIPLET r = target.rmr(0, 8);
    EXPECT_DAT_ERR(dat_ib_post_fetch_and_add(client.ep, 1, &short_local, cookie(2), &r, DAT_COMPLETION_DEFAULT_FLAG),
                   DAT_LENGTH_ERROR, 0);
    EXPECT_TRUE(no_event(client.req_evd));
}

INSTANTIATE_OVER_IAS(ExtTest);

} // namespace
