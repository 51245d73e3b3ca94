// SPDX-License-Identifier: BSD-3-Clause
// Local Memory Regions: dat_lmr_create(3DAT), dat_lmr_query(3DAT), dat_lmr_free(3DAT),
// dat_lmr_sync_rdma_read(3DAT), dat_lmr_sync_rdma_write(3DAT). Local only.
#include "conformance.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <tuple>

namespace {

using conformance::HandleKind;

constexpr auto kLocal = static_cast<DAT_MEM_PRIV_FLAGS>(DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG);
constexpr auto kRemote =
    static_cast<DAT_MEM_PRIV_FLAGS>(DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG);
constexpr DAT_RMR_CONTEXT kUnwritten = 0xdeadbeef;

DAT_VADDR vaddr(const void *p) { return static_cast<DAT_VADDR>(reinterpret_cast<std::uintptr_t>(p)); }

// What dat_lmr_create returns besides the status.
struct Lmr {
    DAT_LMR_HANDLE handle = DAT_HANDLE_NULL;
    DAT_LMR_CONTEXT lmr_context = 0;
    DAT_RMR_CONTEXT rmr_context = kUnwritten;
    DAT_VLEN registered_size = 0;
    DAT_VADDR registered_address = 0;
};

DAT_RETURN create(DAT_IA_HANDLE ia, DAT_MEM_TYPE type, const DAT_REGION_DESCRIPTION &region, DAT_VLEN length,
                  DAT_PZ_HANDLE pz, DAT_MEM_PRIV_FLAGS privileges, Lmr *out) {
    return dat_lmr_create(ia, type, region, length, pz, privileges, DAT_VA_TYPE_VA, &out->handle, &out->lmr_context,
                          &out->rmr_context, &out->registered_size, &out->registered_address);
}

// A page-aligned anonymous mapping, shared (for DAT_MEM_TYPE_SHARED_VIRTUAL) or private.
struct Mapping {
    void *address = MAP_FAILED;
    std::size_t length = 0;
    Mapping(std::size_t len, int flags, int fd = -1) : length(len) {
        address = mmap(nullptr, len, PROT_READ | PROT_WRITE, flags, fd, 0);
    }
    ~Mapping() {
        if (address != MAP_FAILED)
            munmap(address, length);
    }
    char *data() const { return static_cast<char *>(address); }
};

class LmrTest : public conformance::ConformanceTest {
protected:
    static constexpr std::size_t kLen = 64 * 1024;

    void SetUp() override {
        ConformanceTest::SetUp();
        ASSERT_DAT_OK(ia_.open(GetParam()));
        ASSERT_NE(buffer_.address, MAP_FAILED);
    }

    DAT_RETURN create_virtual(void *address, DAT_VLEN length, DAT_MEM_PRIV_FLAGS privileges, Lmr *out,
                              DAT_PZ_HANDLE pz = nullptr) {
        DAT_REGION_DESCRIPTION region{};
        region.for_va = address;
        return create(ia_.ia, DAT_MEM_TYPE_VIRTUAL, region, length, pz ? pz : ia_.pz, privileges, out);
    }

    // dat_lmr_create(3DAT): registered_size/registered_address say "how much the contiguous
    // region of Consumer virtual memory was registered ... and where the region starts";
    // it covers at least what was asked for.
    static void expect_covers(const Lmr &lmr, const void *address, DAT_VLEN length) {
        EXPECT_LE(lmr.registered_address, vaddr(address));
        EXPECT_GE(lmr.registered_address + lmr.registered_size, vaddr(address) + length)
            << "registered [0x" << std::hex << lmr.registered_address << ", +0x" << lmr.registered_size
            << ") does not cover [" << address << ", +0x" << length << ")";
    }

    conformance::OpenIa ia_;
    Mapping buffer_{kLen, MAP_PRIVATE | MAP_ANONYMOUS};
};

TEST_P(LmrTest, VirtualCreateQueryFree) {
    char *address = buffer_.data() + 128; // not page-aligned on purpose
    const DAT_VLEN length = 10000;
    Lmr lmr;
    ASSERT_DAT_OK(create_virtual(address, length, kLocal, &lmr));
    ASSERT_NE(lmr.handle, DAT_HANDLE_NULL);
    expect_covers(lmr, address, length);
    DAT_HANDLE_TYPE type{};
    EXPECT_DAT_OK(dat_get_handle_type(lmr.handle, &type));
    EXPECT_EQ(type, DAT_HANDLE_TYPE_LMR);

    DAT_LMR_PARAM p{};
    ASSERT_DAT_OK(dat_lmr_query(lmr.handle, DAT_LMR_FIELD_ALL, &p));
    EXPECT_EQ(p.ia_handle, ia_.ia); // the Consumer's IA handle
    EXPECT_EQ(p.mem_type, DAT_MEM_TYPE_VIRTUAL);
    EXPECT_EQ(p.region_desc.for_va, address);
    EXPECT_EQ(p.length, length);
    EXPECT_EQ(p.pz_handle, ia_.pz);
    EXPECT_EQ(p.mem_priv, kLocal);
    EXPECT_EQ(p.va_type, DAT_VA_TYPE_VA);
    EXPECT_EQ(p.lmr_context, lmr.lmr_context);
    EXPECT_EQ(p.rmr_context, lmr.rmr_context);
    EXPECT_EQ(p.registered_size, lmr.registered_size);
    EXPECT_EQ(p.registered_address, lmr.registered_address);

    ASSERT_DAT_OK(dat_lmr_free(lmr.handle));
    // dat_lmr_free(3DAT): "Use of the handle of the destroyed LMR in any subsequent operation
    // except for dat_lmr_free() fails."
    EXPECT_DAT_INVALID_HANDLE(dat_lmr_query(lmr.handle, DAT_LMR_FIELD_ALL, &p), HandleKind::Lmr);
    DAT_REGION_DESCRIPTION from_lmr{};
    from_lmr.for_lmr_handle = lmr.handle;
    Lmr derived;
    EXPECT_DAT_INVALID_HANDLE(create(ia_.ia, DAT_MEM_TYPE_LMR, from_lmr, 0, ia_.pz, kLocal, &derived), HandleKind::Lmr);
    // dat_lmr_free itself is the one operation the page exempts: it may fail or be a no-op,
    // but must not report anything else.
    DAT_RETURN again = dat_lmr_free(lmr.handle);
    EXPECT_TRUE(again == DAT_SUCCESS || DAT_GET_TYPE(again) == DAT_INVALID_HANDLE) << conformance::ret_text(again);
}

TEST_P(LmrTest, RmrContextOnlyWithRemotePrivileges) {
    // dat_lmr_create(3DAT) (and the seed text): "If mem_privileges does not specify remote Read
    // and Write privileges, rmr_context is not generated and NULL is returned. No remote
    // privileges are given for Memory Region unless explicitly asked for by the Consumer."
    for (DAT_MEM_PRIV_FLAGS privileges :
         {DAT_MEM_PRIV_NONE_FLAG, DAT_MEM_PRIV_LOCAL_READ_FLAG, DAT_MEM_PRIV_LOCAL_WRITE_FLAG, kLocal}) {
        SCOPED_TRACE(::testing::Message() << "mem_privileges 0x" << std::hex << privileges);
        Lmr lmr;
        ASSERT_DAT_OK(create_virtual(buffer_.data(), 4096, privileges, &lmr));
        EXPECT_EQ(lmr.rmr_context, 0u);
        DAT_LMR_PARAM p{};
        ASSERT_DAT_OK(dat_lmr_query(
            lmr.handle, static_cast<DAT_LMR_PARAM_MASK>(DAT_LMR_FIELD_RMR_CONTEXT | DAT_LMR_FIELD_MEM_PRIV), &p));
        EXPECT_EQ(p.rmr_context, 0u);
        EXPECT_EQ(p.mem_priv, privileges);
        EXPECT_DAT_OK(dat_lmr_free(lmr.handle));
    }
    for (DAT_MEM_PRIV_FLAGS privileges : {kRemote, DAT_MEM_PRIV_ALL_FLAG}) {
        SCOPED_TRACE(::testing::Message() << "mem_privileges 0x" << std::hex << privileges);
        Lmr lmr;
        ASSERT_DAT_OK(create_virtual(buffer_.data(), 4096, privileges, &lmr));
        EXPECT_NE(lmr.rmr_context, 0u) << "remote privileges asked, no rmr_context generated";
        EXPECT_NE(lmr.rmr_context, kUnwritten) << "rmr_context not written";
        DAT_LMR_PARAM p{};
        ASSERT_DAT_OK(dat_lmr_query(lmr.handle, DAT_LMR_FIELD_RMR_CONTEXT, &p));
        EXPECT_EQ(p.rmr_context, lmr.rmr_context);
        EXPECT_DAT_OK(dat_lmr_free(lmr.handle));
    }
}

TEST_P(LmrTest, LmrTypeReusesAnExistingRegion) {
    char *address = buffer_.data() + 4096;
    const DAT_VLEN length = 16384;
    Lmr base;
    ASSERT_DAT_OK(create_virtual(address, length, kLocal, &base));
    DAT_PZ_HANDLE pz2 = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_pz_create(ia_.ia, &pz2));

    // dat_lmr_create(3DAT): DAT_MEM_TYPE_LMR "Region description: An LMR_handle. Length: Length
    // parameter is ignored." USAGE: "Consumers can create an LMR over the existing LMR memory
    // with different Protection Zones and privileges".
    DAT_REGION_DESCRIPTION region{};
    region.for_lmr_handle = base.handle;
    Lmr derived;
    ASSERT_DAT_OK(create(ia_.ia, DAT_MEM_TYPE_LMR, region, 0 /* ignored */, pz2, DAT_MEM_PRIV_ALL_FLAG, &derived));
    EXPECT_NE(derived.handle, base.handle);
    expect_covers(derived, address, length);
    EXPECT_NE(derived.rmr_context, 0u); // remote privileges were asked for this one
    DAT_LMR_PARAM p{};
    ASSERT_DAT_OK(dat_lmr_query(derived.handle, DAT_LMR_FIELD_ALL, &p));
    EXPECT_EQ(p.mem_type, DAT_MEM_TYPE_LMR);
    EXPECT_EQ(p.region_desc.for_lmr_handle, base.handle);
    EXPECT_EQ(p.pz_handle, pz2);
    EXPECT_EQ(p.mem_priv, DAT_MEM_PRIV_ALL_FLAG);
    EXPECT_EQ(p.lmr_context, derived.lmr_context);

    // The derived LMR keeps its own PZ busy (dat_pz_free(3DAT)).
    EXPECT_DAT_ERR(dat_pz_free(pz2), DAT_INVALID_STATE, 0);
    EXPECT_DAT_OK(dat_lmr_free(derived.handle));
    EXPECT_DAT_OK(dat_pz_free(pz2));
    EXPECT_DAT_OK(dat_lmr_free(base.handle));
}

TEST_P(LmrTest, LmrTypeWithABadLmrHandleIsInvalidHandle) {
    Lmr derived;
    DAT_REGION_DESCRIPTION region{};
    region.for_lmr_handle = DAT_HANDLE_NULL;
    EXPECT_DAT_INVALID_HANDLE(create(ia_.ia, DAT_MEM_TYPE_LMR, region, 0, ia_.pz, kLocal, &derived), HandleKind::Lmr);
    region.for_lmr_handle = ia_.pz; // a PZ is no LMR
    EXPECT_DAT_INVALID_HANDLE(create(ia_.ia, DAT_MEM_TYPE_LMR, region, 0, ia_.pz, kLocal, &derived), HandleKind::Lmr);
}

// ---- DAT_MEM_TYPE_SHARED_VIRTUAL ---------------------------------------------------------

class SharedMemory {
public:
    explicit SharedMemory(std::size_t len) : len_(len) {
        fd_ = memfd_create("dat2-conformance-lmr", 0);
        if (fd_ >= 0 && ftruncate(fd_, static_cast<off_t>(len)) != 0) {
            close(fd_);
            fd_ = -1;
        }
    }
    ~SharedMemory() {
        if (fd_ >= 0)
            close(fd_);
    }
    // One more mapping of the same shared pages at its own address.
    std::unique_ptr<Mapping> map() const { return std::make_unique<Mapping>(len_, MAP_SHARED, fd_); }
    bool ok() const { return fd_ >= 0; }

private:
    int fd_ = -1;
    std::size_t len_;
};

DAT_REGION_DESCRIPTION shared_region(void *address, char (*cookie)[DAT_LMR_COOKIE_SIZE]) {
    DAT_REGION_DESCRIPTION region{};
    region.for_shared_memory.virtual_address = address;
    region.for_shared_memory.shared_memory_id = cookie;
    return region;
}

TEST_P(LmrTest, SharedVirtualSameCookieTwoMappings) {
    SharedMemory shm(3 * 4096);
    ASSERT_TRUE(shm.ok());
    auto first = shm.map(), second = shm.map();
    ASSERT_NE(first->address, MAP_FAILED);
    ASSERT_NE(second->address, MAP_FAILED);
    ASSERT_NE(first->address, second->address);

    // dat_lmr_create(3DAT): "All DAT Consumers of the same uDAPL Provider specify the same
    // Consumer cookie to indicate who is sharing the shared memory region."
    char cookie[DAT_LMR_COOKIE_SIZE];
    for (int i = 0; i < DAT_LMR_COOKIE_SIZE; ++i)
        cookie[i] = static_cast<char>(0xa0 + i);
    Lmr a, b;
    ASSERT_DAT_OK(create(ia_.ia, DAT_MEM_TYPE_SHARED_VIRTUAL, shared_region(first->address, &cookie), first->length,
                         ia_.pz, kLocal, &a));
    ASSERT_DAT_OK(create(ia_.ia, DAT_MEM_TYPE_SHARED_VIRTUAL, shared_region(second->address, &cookie), second->length,
                         ia_.pz, kLocal, &b));
    EXPECT_NE(a.handle, b.handle);
    expect_covers(a, first->address, first->length);
    expect_covers(b, second->address, second->length);
    DAT_LMR_PARAM p{};
    ASSERT_DAT_OK(dat_lmr_query(b.handle, DAT_LMR_FIELD_ALL, &p));
    EXPECT_EQ(p.mem_type, DAT_MEM_TYPE_SHARED_VIRTUAL);
    EXPECT_EQ(p.region_desc.for_shared_memory.virtual_address, second->address);
    ASSERT_NE(p.region_desc.for_shared_memory.shared_memory_id, nullptr);
    EXPECT_EQ(std::memcmp(*p.region_desc.for_shared_memory.shared_memory_id, cookie, DAT_LMR_COOKIE_SIZE), 0);
    EXPECT_EQ(p.length, second->length);
    EXPECT_DAT_OK(dat_lmr_free(a.handle));
    EXPECT_DAT_OK(dat_lmr_free(b.handle));
}

TEST_P(LmrTest, SharedVirtualCookieIsAll40Bytes) {
    // dat_lmr_create(3DAT): "The identifier is an array of 40 bytes allocated by the Consumer.
    // The Provider must check the entire 40 bytes and shall not interpret it as a
    // null-terminated string." Two cookies equal in their first 30 bytes (with a NUL at byte 4)
    // name two different regions, of different sizes here.
    SharedMemory shm_a(2 * 4096), shm_b(5 * 4096);
    ASSERT_TRUE(shm_a.ok() && shm_b.ok());
    auto map_a = shm_a.map(), map_b = shm_b.map();
    ASSERT_NE(map_a->address, MAP_FAILED);
    ASSERT_NE(map_b->address, MAP_FAILED);
    char cookie_a[DAT_LMR_COOKIE_SIZE], cookie_b[DAT_LMR_COOKIE_SIZE];
    for (int i = 0; i < DAT_LMR_COOKIE_SIZE; ++i)
        cookie_a[i] = cookie_b[i] = static_cast<char>('A' + i);
    cookie_a[4] = cookie_b[4] = '\0';
    cookie_b[30] = 'z'; // the only difference, after byte 20
    ASSERT_NE(std::memcmp(cookie_a, cookie_b, DAT_LMR_COOKIE_SIZE), 0);

    Lmr a, b;
    ASSERT_DAT_OK(create(ia_.ia, DAT_MEM_TYPE_SHARED_VIRTUAL, shared_region(map_a->address, &cookie_a), map_a->length,
                         ia_.pz, kLocal, &a));
    ASSERT_DAT_OK(create(ia_.ia, DAT_MEM_TYPE_SHARED_VIRTUAL, shared_region(map_b->address, &cookie_b), map_b->length,
                         ia_.pz, kLocal, &b));
    expect_covers(a, map_a->address, map_a->length);
    expect_covers(b, map_b->address, map_b->length);
    for (auto [lmr, map, cookie] :
         {std::make_tuple(&a, map_a.get(), cookie_a), std::make_tuple(&b, map_b.get(), cookie_b)}) {
        DAT_LMR_PARAM p{};
        ASSERT_DAT_OK(dat_lmr_query(lmr->handle, DAT_LMR_FIELD_ALL, &p));
        EXPECT_EQ(p.region_desc.for_shared_memory.virtual_address, map->address);
        EXPECT_EQ(p.length, map->length);
        ASSERT_NE(p.region_desc.for_shared_memory.shared_memory_id, nullptr);
        EXPECT_EQ(std::memcmp(*p.region_desc.for_shared_memory.shared_memory_id, cookie, DAT_LMR_COOKIE_SIZE), 0)
            << "the LMR reports another region's cookie";
        EXPECT_EQ(p.registered_address, lmr->registered_address);
        EXPECT_EQ(p.registered_size, lmr->registered_size);
    }
    EXPECT_DAT_OK(dat_lmr_free(a.handle));
    EXPECT_DAT_OK(dat_lmr_free(b.handle));
}

TEST_P(LmrTest, SharedVirtualWithoutCookieIsInvalidParameter) {
    SharedMemory shm(4096);
    ASSERT_TRUE(shm.ok());
    auto map = shm.map();
    Lmr lmr;
    EXPECT_DAT_ERR(create(ia_.ia, DAT_MEM_TYPE_SHARED_VIRTUAL, shared_region(map->address, nullptr), map->length,
                          ia_.pz, kLocal, &lmr),
                   DAT_INVALID_PARAMETER, 0);
}

// ---- bad arguments -----------------------------------------------------------------------

TEST_P(LmrTest, CreateBadHandles) {
    Lmr lmr;
    DAT_REGION_DESCRIPTION region{};
    region.for_va = buffer_.data();
    // dat_lmr_create(3DAT): DAT_INVALID_HANDLE "Invalid DAT handle."
    EXPECT_DAT_INVALID_HANDLE(create(ia_.ia, DAT_MEM_TYPE_VIRTUAL, region, 4096, DAT_HANDLE_NULL, kLocal, &lmr),
                              HandleKind::Pz);
    EXPECT_DAT_INVALID_HANDLE(create(DAT_HANDLE_NULL, DAT_MEM_TYPE_VIRTUAL, region, 4096, ia_.pz, kLocal, &lmr),
                              HandleKind::Ia);
    // Another kind of object in the PZ argument, and a freed PZ.
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_evd_create(ia_.ia, 4, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd));
    EXPECT_DAT_INVALID_HANDLE(create(ia_.ia, DAT_MEM_TYPE_VIRTUAL, region, 4096, evd, kLocal, &lmr), HandleKind::Pz);
    EXPECT_DAT_OK(dat_evd_free(evd));
    DAT_PZ_HANDLE freed = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_pz_create(ia_.ia, &freed));
    ASSERT_DAT_OK(dat_pz_free(freed));
    EXPECT_DAT_INVALID_HANDLE(create(ia_.ia, DAT_MEM_TYPE_VIRTUAL, region, 4096, freed, kLocal, &lmr), HandleKind::Pz);
}

TEST_P(LmrTest, CreateBadParameters) {
    Lmr lmr;
    DAT_REGION_DESCRIPTION region{};
    // dat_lmr_create(3DAT): DAT_INVALID_PARAMETER "Invalid parameter." -- no memory to register.
    region.for_va = buffer_.data();
    EXPECT_DAT_ERR(create(ia_.ia, DAT_MEM_TYPE_VIRTUAL, region, 0, ia_.pz, kLocal, &lmr), DAT_INVALID_PARAMETER, 0);
    region.for_va = nullptr;
    EXPECT_DAT_ERR(create(ia_.ia, DAT_MEM_TYPE_VIRTUAL, region, 4096, ia_.pz, kLocal, &lmr), DAT_INVALID_PARAMETER, 0);
    // No place for the handle.
    region.for_va = buffer_.data();
    DAT_LMR_CONTEXT lctx = 0;
    DAT_RMR_CONTEXT rctx = 0;
    DAT_VLEN size = 0;
    DAT_VADDR addr = 0;
    EXPECT_DAT_ERR(dat_lmr_create(ia_.ia, DAT_MEM_TYPE_VIRTUAL, region, 4096, ia_.pz, kLocal, DAT_VA_TYPE_VA, nullptr,
                                  &lctx, &rctx, &size, &addr),
                   DAT_INVALID_PARAMETER, 0);
    // A memory type that does not exist: an invalid parameter, or (dat_lmr_create(3DAT))
    // DAT_MODEL_NOT_SUPPORTED "requested Memory Type was not supported by the Provider".
    DAT_RETURN r = create(ia_.ia, static_cast<DAT_MEM_TYPE>(0x40), region, 4096, ia_.pz, kLocal, &lmr);
    EXPECT_TRUE(DAT_GET_TYPE(r) == DAT_INVALID_PARAMETER || DAT_GET_TYPE(r) == DAT_MODEL_NOT_SUPPORTED)
        << conformance::ret_text(r);
    if (r == DAT_SUCCESS)
        dat_lmr_free(lmr.handle);
}

// A provider that does not pin memory would register an unmapped range, and the first DTO
// that touched it would fault; verbs refuses it. dat_lmr_create(3DAT): DAT_INVALID_PARAMETER.
TEST_P(LmrTest, UnmappedMemoryIsInvalidParameter) {
    Lmr lmr;
    // Far more than this process maps: some of it is not mapped.
    EXPECT_DAT_ERR(create_virtual(buffer_.data(), DAT_VLEN{1} << 50, kLocal, &lmr), DAT_INVALID_PARAMETER, 0);
    // A page unmapped just before: used once, at once, as any mapping the
    // process makes next (a log line's allocation, another thread's) may
    // take its place.
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void *gone = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(gone, MAP_FAILED);
    ASSERT_EQ(munmap(gone, page), 0);
    EXPECT_DAT_ERR(create_virtual(static_cast<char *>(gone) + 16, 64, kLocal, &lmr), DAT_INVALID_PARAMETER, 0);
}

// ---- sync ----------------------------------------------------------------------------------

TEST_P(LmrTest, SyncOnRegisteredRangesSucceeds) {
    Lmr lmr;
    ASSERT_DAT_OK(create_virtual(buffer_.data(), kLen, DAT_MEM_PRIV_ALL_FLAG, &lmr));
    Lmr other;
    ASSERT_DAT_OK(create_virtual(buffer_.data() + kLen / 2, 4096, kLocal, &other));
    const DAT_LMR_TRIPLET one[] = {{vaddr(buffer_.data() + 100), 1000, lmr.lmr_context}};
    // dat_lmr_sync_rdma_read(3DAT) / dat_lmr_sync_rdma_write(3DAT): DAT_SUCCESS for ranges inside
    // their LMRs; "The local_segments entries need not contain the same LMR".
    EXPECT_DAT_OK(dat_lmr_sync_rdma_read(ia_.ia, one, 1));
    EXPECT_DAT_OK(dat_lmr_sync_rdma_write(ia_.ia, one, 1));
    const DAT_LMR_TRIPLET several[] = {{vaddr(buffer_.data()), static_cast<DAT_SEG_LENGTH>(kLen), lmr.lmr_context},
                                       {vaddr(buffer_.data() + kLen / 2), 4096, other.lmr_context},
                                       {vaddr(buffer_.data() + kLen - 1), 1, lmr.lmr_context}};
    EXPECT_DAT_OK(dat_lmr_sync_rdma_read(ia_.ia, several, 3));
    EXPECT_DAT_OK(dat_lmr_sync_rdma_write(ia_.ia, several, 3));
    // dat.h, DAT_LMR_TRIPLET: "When 0 is specified for the segment_length then the other two
    // elements of the dat_lmr_triplet are irrelevant and can be invalid."
    const DAT_LMR_TRIPLET with_empty[] = {{vaddr(buffer_.data() + 100), 1000, lmr.lmr_context},
                                          {0xdead, 0, lmr.lmr_context ^ 0x5a5a5a5au}};
    EXPECT_DAT_OK(dat_lmr_sync_rdma_read(ia_.ia, with_empty, 2));
    EXPECT_DAT_OK(dat_lmr_sync_rdma_write(ia_.ia, with_empty, 2));
    // No segments at all: nothing to make visible, and the man pages do not call it invalid.
    EXPECT_DAT_OK(dat_lmr_sync_rdma_read(ia_.ia, one, 0));
    EXPECT_DAT_OK(dat_lmr_sync_rdma_write(ia_.ia, nullptr, 0));
    EXPECT_DAT_OK(dat_lmr_free(other.handle));
    EXPECT_DAT_OK(dat_lmr_free(lmr.handle));
}

TEST_P(LmrTest, SyncOutsideTheRegionIsInvalidParameter) {
    char *address = buffer_.data() + 8192;
    Lmr lmr;
    ASSERT_DAT_OK(create_virtual(address, 8192, DAT_MEM_PRIV_ALL_FLAG, &lmr));
    const DAT_VADDR end = lmr.registered_address + lmr.registered_size;
    // dat_lmr_sync_rdma_read(3DAT): DAT_INVALID_PARAMETER "the address range for a local segment
    // fell outside the boundaries of the corresponding Local Memory Region or the LMR handle was
    // invalid" (the same for dat_lmr_sync_rdma_write(3DAT)).
    const DAT_LMR_TRIPLET past_end[] = {{end, 16, lmr.lmr_context}};
    const DAT_LMR_TRIPLET straddling[] = {{end - 8, 16, lmr.lmr_context}};
    const DAT_LMR_TRIPLET before[] = {{lmr.registered_address - 64, 16, lmr.lmr_context}};
    const DAT_LMR_TRIPLET second_bad[] = {{vaddr(address), 16, lmr.lmr_context}, {end, 16, lmr.lmr_context}};
    const DAT_LMR_TRIPLET bogus_context[] = {{vaddr(address), 16, lmr.lmr_context ^ 0x5a5a5a5au}};
    for (auto *sync : {&dat_lmr_sync_rdma_read, &dat_lmr_sync_rdma_write}) {
        SCOPED_TRACE(sync == &dat_lmr_sync_rdma_read ? "dat_lmr_sync_rdma_read" : "dat_lmr_sync_rdma_write");
        EXPECT_DAT_ERR(sync(ia_.ia, past_end, 1), DAT_INVALID_PARAMETER, 0);
        EXPECT_DAT_ERR(sync(ia_.ia, straddling, 1), DAT_INVALID_PARAMETER, 0);
        EXPECT_DAT_ERR(sync(ia_.ia, before, 1), DAT_INVALID_PARAMETER, 0);
        EXPECT_DAT_ERR(sync(ia_.ia, second_bad, 2), DAT_INVALID_PARAMETER, 0);
        EXPECT_DAT_ERR(sync(ia_.ia, bogus_context, 1), DAT_INVALID_PARAMETER, 0);
        // DAT_INVALID_HANDLE "The DAT handle is invalid."
        const DAT_LMR_TRIPLET good[] = {{vaddr(address), 16, lmr.lmr_context}};
        EXPECT_DAT_INVALID_HANDLE(sync(DAT_HANDLE_NULL, good, 1), HandleKind::Ia);
    }
    // A freed LMR's context no longer names a region.
    const DAT_LMR_TRIPLET freed[] = {{vaddr(address), 16, lmr.lmr_context}};
    ASSERT_DAT_OK(dat_lmr_free(lmr.handle));
    EXPECT_DAT_ERR(dat_lmr_sync_rdma_read(ia_.ia, freed, 1), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_lmr_sync_rdma_write(ia_.ia, freed, 1), DAT_INVALID_PARAMETER, 0);
}

TEST_P(LmrTest, QueryInvalidMaskIsInvalidParameter) {
    Lmr lmr;
    ASSERT_DAT_OK(create_virtual(buffer_.data(), 4096, kLocal, &lmr));
    DAT_LMR_PARAM p{};
    // dat_lmr_query(3DAT): DAT_INVALID_PARAMETER "The lmr_param_mask function is invalid."
    EXPECT_DAT_ERR(dat_lmr_query(lmr.handle, static_cast<DAT_LMR_PARAM_MASK>(0x1000), &p), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_lmr_query(lmr.handle, DAT_LMR_FIELD_ALL, nullptr), DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_OK(dat_lmr_free(lmr.handle));
}

INSTANTIATE_OVER_IAS(LmrTest);

} // namespace
