// SPDX-License-Identifier: BSD-3-Clause
// Remote memory protection: RDMA Write and Read that the target must refuse
// (wrong rmr_context, outside the registered range, missing remote
// privilege, freed LMR, another PZ, another IA's context). The initiator's
// DTO must complete with an error -- DAT_DTO_ERR_REMOTE_ACCESS, or any error
// together with a broken connection -- never succeed with the connection
// intact, and the target memory must stay exactly as it was.
#include "connected.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

using namespace conformance;

namespace {

constexpr DAT_MEM_PRIV_FLAGS priv(int f) { return static_cast<DAT_MEM_PRIV_FLAGS>(f); }
constexpr unsigned char kTargetSeed = 0xC3; // the target's memory, which must not change
constexpr size_t kPage = 4096;

class SecurityTest : public ConnectedTest {
protected:
    void SetUp() override {
        ConnectedTest::SetUp();
        if (HasFatalFailure())
            return;
        ASSERT_NO_FATAL_FAILURE(connect_pair());
        ASSERT_DAT_OK(client.register_buffer(local, 3 * kPage));
    }

    // Target: three pages on the server, the middle one registered with
    // `privileges` in `pz` (the server's PZ by default); all three hold the
    // target pattern.
    void make_target(DAT_MEM_PRIV_FLAGS privileges, DAT_PZ_HANDLE pz = DAT_HANDLE_NULL) {
        ASSERT_DAT_OK(target.create(server.ia.ia, pz ? pz : server.ia.pz, 3 * kPage, privileges, kPage, kPage));
        target.fill(kTargetSeed);
        reg_begin = static_cast<size_t>(target.registered_address - reinterpret_cast<uintptr_t>(target.data));
        reg_end = reg_begin + static_cast<size_t>(target.registered_size);
        ASSERT_GE(reg_begin, 64u) << "provider registered more than asked";
        ASSERT_LE(reg_end + 64, target.size) << "provider registered more than asked";
        sync_rdma_read(server.ia.ia, target, 0, target.size);
        sync_rdma_write(server.ia.ia, target, 0, target.size);
    }

    // The verdict on one refused RDMA operation (ConnectedTest::expect_rdma_refused),
    // and the target memory unchanged. `must_break`: the man page says the
    // connection breaks whatever the status (freed LMR).
    void expect_refused(bool write, const DAT_RMR_TRIPLET &remote, bool must_break = false) {
        ASSERT_NO_FATAL_FAILURE(expect_rdma_refused(
            write, local, kPage, remote, kTargetSeed,
            static_cast<size_t>(remote.virtual_address - reinterpret_cast<uintptr_t>(target.data)), must_break));
        expect_target_unchanged();
        // Give a late placement the chance to show.
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        expect_target_unchanged();
    }

    void expect_target_unchanged() {
        sync_rdma_write(server.ia.ia, target, 0, target.size);
        EXPECT_EQ(target.mismatch(0, target.size, kTargetSeed, 0), -1) << "target memory changed";
    }

    // Offsets within target.data.
    DAT_RMR_TRIPLET at(size_t off, size_t len) const { return target.rmr(off, len); }

    // The target is an LMR in a second PZ of the server's IA, not the PZ of the
    // server's Endpoint: an RDMA `write` (else Read) with its context must be refused.
    void expect_refused_for_lmr_of_another_pz(bool write) {
        DAT_PZ_HANDLE pz2 = DAT_HANDLE_NULL;
        ASSERT_DAT_OK(dat_pz_create(server.ia.ia, &pz2));
        ASSERT_NO_FATAL_FAILURE(make_target(
            priv(kLocalRw | (write ? DAT_MEM_PRIV_REMOTE_WRITE_FLAG : DAT_MEM_PRIV_REMOTE_READ_FLAG)), pz2));
        expect_refused(write, at(reg_begin, 512));
        EXPECT_DAT_OK(target.free_lmr());
        EXPECT_DAT_OK(dat_pz_free(pz2));
    }

    // The target is the client's own LMR (in the client's PZ, on the client's IA
    // instance, with the remote privilege): its rmr_context means nothing to the
    // server's Endpoint. The memory that must stay untouched is the client's.
    void expect_refused_for_context_the_target_never_issued(bool write) {
        ASSERT_DAT_OK(client.register_buffer(
            target, 3 * kPage,
            priv(kLocalRw | (write ? DAT_MEM_PRIV_REMOTE_WRITE_FLAG : DAT_MEM_PRIV_REMOTE_READ_FLAG)), kPage, kPage));
        target.fill(kTargetSeed);
        reg_begin = kPage;
        expect_refused(write, at(reg_begin, 512));
    }

    Buffer local, target;
    size_t reg_begin = 0, reg_end = 0;
};

// ---- wrong context ------------------------------------------------------------------------

TEST_P(SecurityTest, RdmaWriteWithWrongRmrContext) {
    ASSERT_NO_FATAL_FAILURE(make_target(priv(kLocalRw | DAT_MEM_PRIV_REMOTE_WRITE_FLAG)));
    DAT_RMR_TRIPLET t = at(reg_begin, 512);
    t.rmr_context = ~target.rmr_context;
    ASSERT_NE(t.rmr_context, local.rmr_context);
    expect_refused(true, t);
}

TEST_P(SecurityTest, RdmaReadWithWrongRmrContext) {
    ASSERT_NO_FATAL_FAILURE(make_target(priv(kLocalRw | DAT_MEM_PRIV_REMOTE_READ_FLAG)));
    DAT_RMR_TRIPLET t = at(reg_begin, 512);
    t.rmr_context = target.rmr_context ^ 0x00010001u;
    expect_refused(false, t);
}

// ---- outside the registered range -------------------------------------------------------------
// dat_lmr_create(3DAT): registered_address/registered_size say what was registered.

TEST_P(SecurityTest, RdmaWriteStraddlingTheEndOfTheRegisteredRange) {
    ASSERT_NO_FATAL_FAILURE(make_target(priv(kLocalRw | DAT_MEM_PRIV_REMOTE_WRITE_FLAG)));
    expect_refused(true, at(reg_end - 32, 64));
}

TEST_P(SecurityTest, RdmaWriteWhollyAfterTheRegisteredRange) {
    ASSERT_NO_FATAL_FAILURE(make_target(priv(kLocalRw | DAT_MEM_PRIV_REMOTE_WRITE_FLAG)));
    expect_refused(true, at(reg_end + 16, 32));
}

TEST_P(SecurityTest, RdmaWriteStraddlingTheStartOfTheRegisteredRange) {
    ASSERT_NO_FATAL_FAILURE(make_target(priv(kLocalRw | DAT_MEM_PRIV_REMOTE_WRITE_FLAG)));
    expect_refused(true, at(reg_begin - 32, 64));
}

TEST_P(SecurityTest, RdmaReadStraddlingTheEndOfTheRegisteredRange) {
    ASSERT_NO_FATAL_FAILURE(make_target(priv(kLocalRw | DAT_MEM_PRIV_REMOTE_READ_FLAG)));
    expect_refused(false, at(reg_end - 32, 64));
}

// ---- privileges -----------------------------------------------------------------------------------
// dat_lmr_create(3DAT): "No remote privileges are given for Memory Region unless
// explicitly asked for by the Consumer."

TEST_P(SecurityTest, RdmaWriteToLmrWithoutRemoteWritePrivilege) {
    ASSERT_NO_FATAL_FAILURE(make_target(priv(kLocalRw | DAT_MEM_PRIV_REMOTE_READ_FLAG)));
    // dat_ep_post_rdma_write(3DAT): "rmr_context does not have the remote write privileges".
    expect_refused(true, at(reg_begin, 512));
}

TEST_P(SecurityTest, RdmaReadFromLmrWithoutRemoteReadPrivilege) {
    ASSERT_NO_FATAL_FAILURE(make_target(priv(kLocalRw | DAT_MEM_PRIV_REMOTE_WRITE_FLAG)));
    // dat_ep_post_rdma_read(3DAT): "rmr_context does not have the remote read privileges".
    expect_refused(false, at(reg_begin, 512));
}

TEST_P(SecurityTest, RdmaWriteToLmrWithLocalPrivilegesOnly) {
    ASSERT_NO_FATAL_FAILURE(make_target(kLocalRw));
    // "If mem_privileges does not specify remote Read and Write privileges,
    // rmr_context is not generated": whatever came back must not open the memory.
    expect_refused(true, at(reg_begin, 512));
}

TEST_P(SecurityTest, RdmaReadFromLmrWithLocalPrivilegesOnly) {
    ASSERT_NO_FATAL_FAILURE(make_target(kLocalRw));
    expect_refused(false, at(reg_begin, 512));
}

// ---- after a refusal ------------------------------------------------------------------------------
// A refusal ends at most the connection it happened on: new Endpoints on
// the same EVDs, connected again, carry RDMA as before. (Whatever the
// refusal left behind in the transport -- an answer that never came -- must
// not outlive that connection.)

TEST_P(SecurityTest, AfterARefusedRdmaWriteNewEndpointsOnTheSameEvdsCarryRdma) {
    ASSERT_NO_FATAL_FAILURE(make_target(priv(kLocalRw | DAT_MEM_PRIV_REMOTE_WRITE_FLAG)));
    DAT_RMR_TRIPLET bad = at(reg_begin, 512);
    bad.rmr_context = ~target.rmr_context;
    expect_refused(true, bad);
    client.free_ep();
    server.free_ep();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (DAT_EVD_HANDLE evd : {client.conn_evd, server.conn_evd, client.req_evd, server.recv_evd})
        drain(evd);
    ASSERT_DAT_OK(client.create_ep());
    ASSERT_DAT_OK(server.create_ep());
    ASSERT_NO_FATAL_FAILURE(connect_pair());
    for (int i = 0; i < 2; ++i) { // the second, after the first was answered
        const unsigned char seed = static_cast<unsigned char>(0x6B + i);
        local.fill(seed);
        DAT_LMR_TRIPLET l = local.iov(kPage, 512);
        DAT_RMR_TRIPLET good = at(reg_begin, 512);
        ASSERT_DAT_OK(dat_ep_post_rdma_write(client.ep, 1, &l, cookie(seed), &good, DAT_COMPLETION_DEFAULT_FLAG));
        ASSERT_TRUE(wait_dto_ok(client.req_evd, seed)) << "write " << i << " on the new connection";
        EXPECT_EQ(landed(server.ia.ia, target, reg_begin, 512, seed, kPage), -1) << "write " << i << " did not land";
    }
}

// ---- freed LMR ------------------------------------------------------------------------------------
// dat_lmr_free(3DAT): "The use of rmr_context of the destroyed LMR by a remote peer
// for an RDMA DTO results in an error and broken connection on which it was used.
// Any remote RDMA operation that uses the destroyed LMR rmr_context, whose
// Transport-specific request arrived to the local host after the dat_lmr_free()
// has completed, fails and reports a protection violation."

TEST_P(SecurityTest, RdmaWriteAfterTheRemoteLmrWasFreed) {
    ASSERT_NO_FATAL_FAILURE(make_target(priv(kLocalRw | DAT_MEM_PRIV_REMOTE_WRITE_FLAG)));
    DAT_RMR_TRIPLET t = at(reg_begin, 512);
    ASSERT_DAT_OK(target.free_lmr()); // the memory stays ours
    expect_refused(true, t, /*must_break=*/true);
}

TEST_P(SecurityTest, RdmaReadAfterTheRemoteLmrWasFreed) {
    ASSERT_NO_FATAL_FAILURE(make_target(priv(kLocalRw | DAT_MEM_PRIV_REMOTE_READ_FLAG)));
    DAT_RMR_TRIPLET t = at(reg_begin, 512);
    ASSERT_DAT_OK(target.free_lmr());
    expect_refused(false, t, /*must_break=*/true);
}

// ---- contexts the target Endpoint may not use -----------------------------------------------------
// dat_ep_create(3DAT): "Only memory referred to by LMRs and RMRs that match the
// Endpoint Protection Zone can be accessed by the Endpoint."
// dat_ep_post_rdma_write(3DAT): DAT_PROTECTION_VIOLATION "Protection Zone mismatch
// between ... the rmr_context and the remote Endpoint."

// The verbs plugin has one PD per PZ, the ofi plugin one libfabric domain
// per PZ (a domain is the scope of a memory key): both must refuse these.

TEST_P(SecurityTest, RdmaWriteToLmrOfAnotherPz) { expect_refused_for_lmr_of_another_pz(true); }

TEST_P(SecurityTest, RdmaReadFromLmrOfAnotherPz) { expect_refused_for_lmr_of_another_pz(false); }

TEST_P(SecurityTest, RdmaWriteWithAContextTheTargetIaNeverIssued) {
    expect_refused_for_context_the_target_never_issued(true);
}

TEST_P(SecurityTest, RdmaReadWithAContextTheTargetIaNeverIssued) {
    expect_refused_for_context_the_target_never_issued(false);
}

} // namespace

INSTANTIATE_OVER_IAS(SecurityTest);
