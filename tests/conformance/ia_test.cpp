// SPDX-License-Identifier: BSD-3-Clause
// Interface Adapter: dat_ia_open(3DAT), dat_ia_query(3DAT), dat_ia_close(3DAT),
// dat_registry_list_providers(3DAT). Local objects only, no connections.
#include "conformance.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using conformance::HandleKind;
using Clock = std::chrono::steady_clock;

// An IA opened inside a test; closed (abrupt) if the test did not close it.
struct Ia {
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
    DAT_RETURN open(const std::string &name, DAT_COUNT qlen = 8) {
        async_evd = DAT_HANDLE_NULL;
        return dat_ia_open(conformance::ia_name_ptr(name), qlen, &async_evd, &ia);
    }
    DAT_RETURN close(DAT_CLOSE_FLAGS flags) {
        DAT_RETURN r = dat_ia_close(ia, flags);
        if (r == DAT_SUCCESS)
            ia = DAT_HANDLE_NULL;
        return r;
    }
    ~Ia() {
        if (ia != DAT_HANDLE_NULL)
            dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    }
};

class IaTest : public conformance::ConformanceTest {
protected:
    std::string name() const { return GetParam(); }
};

TEST_P(IaTest, OpenCreatesAsyncEvdWithAtLeastTheRequestedQueue) {
    Ia a;
    ASSERT_DAT_OK(a.open(name(), 8));
    EXPECT_NE(a.ia, DAT_HANDLE_NULL);
    // dat_ia_open(3DAT): DAT_HANDLE_NULL in *async_evd_handle makes the provider create it and return it.
    ASSERT_NE(a.async_evd, DAT_HANDLE_NULL);
    DAT_HANDLE_TYPE type{};
    EXPECT_DAT_OK(dat_get_handle_type(a.async_evd, &type));
    EXPECT_EQ(type, DAT_HANDLE_TYPE_EVD);

    DAT_EVD_PARAM param{};
    ASSERT_DAT_OK(dat_evd_query(a.async_evd, DAT_EVD_FIELD_ALL, &param));
    // dat_ia_open(3DAT): "queue size at least equal to async_evd_min_qlen".
    EXPECT_GE(param.evd_qlen, 8);
    // dat_ia_open(3DAT): "The Asynchronous Event Dispatcher is created with no CNO".
    EXPECT_EQ(param.cno_handle, DAT_HANDLE_NULL);
    EXPECT_TRUE(param.evd_flags & DAT_EVD_ASYNC_FLAG) << "evd_flags 0x" << std::hex << param.evd_flags;
    // dat_ia_open(3DAT): the IA instance owns the objects created through it.
    EXPECT_EQ(param.ia_handle, a.ia);
}

// dat_ia_open(3DAT): "The Provider is required to provide a queue size at
// least equal to async_evd_min_qlen": a length beyond any EVD's (the IA's
// max_evd_qlen) is refused, not shortened; so is a negative one.
TEST_P(IaTest, OpenRefusesAnAsyncQueueLongerThanAnyEvd) {
    Ia a;
    ASSERT_DAT_OK(a.open(name()));
    DAT_IA_ATTR attr{};
    ASSERT_DAT_OK(dat_ia_query(a.ia, nullptr, DAT_IA_FIELD_ALL, &attr, DAT_PROVIDER_FIELD_NONE, nullptr));
    for (DAT_COUNT qlen : {attr.max_evd_qlen + 1, DAT_COUNT(0x7fffffff), DAT_COUNT(-1)}) {
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
        SCOPED_TRACE("async_evd_min_qlen " + std::to_string(qlen));
        EXPECT_DAT_ERR(dat_ia_open(conformance::ia_name_ptr(name()), qlen, &evd, &ia), DAT_INVALID_PARAMETER,
                       DAT_INVALID_ARG2);
        if (ia != DAT_HANDLE_NULL)
            dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    }
    // 0 asks for no minimum.
    Ia b;
    ASSERT_DAT_OK(b.open(name(), 0));
}

TEST_P(IaTest, QueryReportsTheAsyncEvdOfTheOpen) {
    Ia a;
    ASSERT_DAT_OK(a.open(name()));
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_ia_query(a.ia, &async, DAT_IA_FIELD_NONE, nullptr, DAT_PROVIDER_FIELD_NONE, nullptr));
    EXPECT_EQ(async, a.async_evd);
}

TEST_P(IaTest, MultipleOpensAreIndependentInstances) {
    // dat_ia_open(3DAT): "Multiple instances (opens) of an IA can exist."
    Ia a, b;
    ASSERT_DAT_OK(a.open(name()));
    ASSERT_DAT_OK(b.open(name()));
    EXPECT_NE(a.ia, b.ia);
    EXPECT_NE(a.async_evd, b.async_evd);
    ASSERT_DAT_OK(a.close(DAT_CLOSE_ABRUPT_FLAG));
    // The other instance is untouched by the close.
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_pz_create(b.ia, &pz));
    DAT_PZ_PARAM pp{};
    EXPECT_DAT_OK(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &pp));
    EXPECT_EQ(pp.ia_handle, b.ia);
    EXPECT_DAT_OK(dat_pz_free(pz));
    EXPECT_DAT_OK(b.close(DAT_CLOSE_GRACEFUL_FLAG));
}

TEST_P(IaTest, UnknownNameIsProviderNotFound) {
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    const std::string bogus = name() + "-no-such-ia";
    EXPECT_DAT_ERR(dat_ia_open(conformance::ia_name_ptr(bogus), 8, &evd, &ia), DAT_PROVIDER_NOT_FOUND, 0);
}

// dat_ia_open(3DAT): DAT_INSUFFICIENT_RESOURCES, "The operation failed due
// to resource limitations". A process short of file descriptors is one:
// each open is tried with the limit a few descriptors above those open, in
// a child (the limit is the process's); every failure must say so.
TEST_P(IaTest, OpenShortOfFileDescriptorsIsInsufficientResources) {
    if (conformance::kAsanBuild || conformance::kTsanBuild)
        GTEST_SKIP() << "a sanitizer build: its runtime needs descriptors of its own (UBSan's type check reads "
                        "/proc/self/maps) and reports errors of its own when it has none";
    const std::string ia = name();
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::alarm(60);
        // The registry reads dat.conf at its first call: before the limit.
        DAT_COUNT entries = 0;
        dat_registry_list_providers(0, &entries, nullptr);
        long open_fds = -1; // the directory's own descriptor is not counted
        if (DIR *d = ::opendir("/proc/self/fd")) {
            while (dirent *e = ::readdir(d))
                open_fds += e->d_name[0] != '.';
            ::closedir(d);
        }
        rlimit lim{};
        ::getrlimit(RLIMIT_NOFILE, &lim);
        int failures = 0;
        for (long extra = 0; extra <= 32; ++extra) {
            rlimit low = lim;
            low.rlim_cur = static_cast<rlim_t>(open_fds + extra);
            ::setrlimit(RLIMIT_NOFILE, &low);
            DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
            DAT_IA_HANDLE h = DAT_HANDLE_NULL;
            const DAT_RETURN r = dat_ia_open(conformance::ia_name_ptr(ia), 8, &evd, &h);
            ::setrlimit(RLIMIT_NOFILE, &lim);
            if (r == DAT_SUCCESS) {
                dat_ia_close(h, DAT_CLOSE_ABRUPT_FLAG);
                continue;
            }
            ++failures;
            if (DAT_GET_TYPE(r) != DAT_INSUFFICIENT_RESOURCES) {
                const char *major = "", *minor = "";
                dat_strerror(r, &major, &minor);
                std::fprintf(stderr, "open with %ld descriptors to spare: %s %s\n", extra, major, minor);
                _exit(1);
            }
        }
        _exit(failures ? 0 : 2);
    }
    ASSERT_GT(pid, 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
    if (WEXITSTATUS(status) == 2)
        GTEST_SKIP() << ia << " opens with no file descriptor to spare (it takes none of its own): nothing to refuse";
    EXPECT_EQ(WEXITSTATUS(status), 0) << "an open short of descriptors failed with another code (above)";
}

TEST_P(IaTest, NullArgumentsAreInvalidParameter) {
    // dat_ia_open(3DAT) RETURN VALUES: DAT_INVALID_PARAMETER "Invalid parameter".
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    EXPECT_DAT_ERR(dat_ia_open(conformance::ia_name_ptr(name()), 8, &evd, nullptr), DAT_INVALID_PARAMETER, 0);
    evd = DAT_HANDLE_NULL;
    EXPECT_DAT_ERR(dat_ia_open(conformance::ia_name_ptr(name()), 8, nullptr, &ia), DAT_INVALID_PARAMETER, 0);
    evd = DAT_HANDLE_NULL;
    EXPECT_DAT_ERR(dat_ia_open(nullptr, 8, &evd, &ia), DAT_INVALID_PARAMETER, 0);
    // A negative minimum queue length for the async EVD the provider is asked to create.
    evd = DAT_HANDLE_NULL;
    EXPECT_DAT_ERR(dat_ia_open(conformance::ia_name_ptr(name()), -1, &evd, &ia), DAT_INVALID_PARAMETER, 0);
}

TEST_P(IaTest, QueryWithNullAttributeStructuresIsInvalidParameter) {
    Ia a;
    ASSERT_DAT_OK(a.open(name()));
    // dat_ia_query(3DAT): the Consumer passes structures "that the Provider fills"; asking for
    // fields without one is DAT_INVALID_PARAMETER.
    conformance::IaAttributes attrs;
    EXPECT_DAT_ERR(dat_ia_query(a.ia, nullptr, DAT_IA_FIELD_ALL, nullptr, DAT_PROVIDER_FIELD_NONE, nullptr),
                   DAT_INVALID_PARAMETER, 0);
    EXPECT_DAT_ERR(dat_ia_query(a.ia, nullptr, DAT_IA_FIELD_NONE, nullptr, DAT_PROVIDER_FIELD_ALL, nullptr),
                   DAT_INVALID_PARAMETER, 0);
}

TEST_P(IaTest, QueryAttributesAreSane) {
    Ia a;
    ASSERT_DAT_OK(a.open(name()));
    conformance::IaAttributes attrs;
    ASSERT_DAT_OK(attrs.query(a.ia));
    const DAT_IA_ATTR &ia = attrs.ia;
    const DAT_PROVIDER_ATTR &pa = attrs.provider();

    // dat_ia_query(3DAT): "Adapter name: ... The same as ia_name_ptr."
    EXPECT_STREQ(ia.adapter_name, name().c_str());
    // dat_ia_query(3DAT): "IA_address_ptr: An address of the interface Adapter."
    ASSERT_NE(ia.ia_address_ptr, nullptr);
    const int family = ia.ia_address_ptr->sa_family;
    EXPECT_TRUE(family == AF_INET || family == AF_INET6) << "sa_family " << family;
    if (family == AF_INET) {
        char text[INET_ADDRSTRLEN] = {};
        const auto *in = reinterpret_cast<const sockaddr_in *>(ia.ia_address_ptr);
        inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
        EXPECT_NE(in->sin_addr.s_addr, htonl(INADDR_ANY)) << "IA address " << text;
    }

    // Limits an IA that can run anything at all must report as at least 1.
    EXPECT_GE(ia.max_eps, 1);
    EXPECT_GE(ia.max_dto_per_ep, 1);
    EXPECT_GE(ia.max_evds, 1);
    EXPECT_GE(ia.max_evd_qlen, 1);
    EXPECT_GE(ia.max_iov_segments_per_dto, 1);
    EXPECT_GE(ia.max_lmrs, 1);
    EXPECT_GT(ia.max_lmr_block_size, 0u);
    EXPECT_GT(ia.max_lmr_virtual_address, 0u);
    EXPECT_GE(ia.max_pzs, 1);
    EXPECT_GT(ia.max_message_size, 0u);
    EXPECT_GT(ia.max_rdma_size, 0u);

    EXPECT_GT(std::strlen(pa.provider_name), 0u);
    // The API version this header asked for through dat_ia_openv.
    EXPECT_EQ(pa.dapl_version_major, static_cast<DAT_UINT32>(DAT_VERSION_MAJOR));
    // dat_ia_query(3DAT): "Max private data size: ... This value is at least 64 bytes."
    EXPECT_GE(pa.max_private_data_size, 64);
    // dat_ia_query(3DAT): "DAT_OPTIMAL_ALIGNMENT must be divisible by this attribute value.
    // The maximum allowed value is DAT_OPTIMAL_ALIGNMENT".
    ASSERT_GT(pa.optimal_buffer_alignment, 0u);
    EXPECT_LE(pa.optimal_buffer_alignment, static_cast<DAT_UINT32>(DAT_OPTIMAL_ALIGNMENT));
    EXPECT_EQ(DAT_OPTIMAL_ALIGNMENT % pa.optimal_buffer_alignment, 0u);
    // dat_ia_query(3DAT): "All Providers must support the following Memory Types:
    // DAT_MEM_TYPE_VIRTUAL, DAT_MEM_TYPE_LMR, and DAT_MEM_TYPE_SHARED_VIRTUAL" (their union).
    const unsigned all_types = DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR | DAT_MEM_TYPE_SHARED_VIRTUAL;
    EXPECT_EQ(pa.lmr_mem_types_supported & all_types, all_types)
        << "lmr_mem_types_supported 0x" << std::hex << pa.lmr_mem_types_supported;
    EXPECT_TRUE(pa.iov_ownership_on_return == DAT_IOV_CONSUMER ||
                pa.iov_ownership_on_return == DAT_IOV_PROVIDER_NOMOD ||
                pa.iov_ownership_on_return == DAT_IOV_PROVIDER_MOD)
        << pa.iov_ownership_on_return;
    EXPECT_TRUE(pa.ep_creator == DAT_PSP_CREATES_EP_NEVER || pa.ep_creator == DAT_PSP_CREATES_EP_IFASKED ||
                pa.ep_creator == DAT_PSP_CREATES_EP_ALWAYS)
        << pa.ep_creator;
    // A merging matrix is symmetric: entry [i][j] and [j][i] describe the same pair.
    for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j)
            EXPECT_EQ(pa.evd_stream_merging_supported[i][j], pa.evd_stream_merging_supported[j][i])
                << "[" << i << "][" << j << "]";

    // dat_ia_query(3DAT) also returns the async EVD handle.
    EXPECT_EQ(attrs.async_evd, a.async_evd);
}

// The DAT_IB_* attributes OFED's providers publish and consumers read:
// dtestsrq sizes its messages by DAT_IB_TRANSPORT_MTU and refuses to run
// without it.
TEST_P(IaTest, ProviderAttributesIncludeWhatOfedsProvidersPublish) {
    Ia a;
    ASSERT_DAT_OK(a.open(name()));
    conformance::IaAttributes attrs;
    ASSERT_DAT_OK(attrs.query(a.ia));
    const DAT_PROVIDER_ATTR &pa = attrs.provider();
    std::map<std::string, std::string> named;
    for (DAT_COUNT i = 0; i < pa.num_provider_specific_attr; ++i) {
        ASSERT_NE(pa.provider_specific_attr[i].name, nullptr);
        ASSERT_NE(pa.provider_specific_attr[i].value, nullptr);
        named[pa.provider_specific_attr[i].name] = pa.provider_specific_attr[i].value;
    }
    ASSERT_TRUE(named.count("DAT_IB_TRANSPORT_MTU")) << "no DAT_IB_TRANSPORT_MTU";
    const int mtu = std::atoi(named["DAT_IB_TRANSPORT_MTU"].c_str());
    EXPECT_TRUE(mtu == 256 || mtu == 512 || mtu == 1024 || mtu == 2048 || mtu == 4096)
        << "DAT_IB_TRANSPORT_MTU " << named["DAT_IB_TRANSPORT_MTU"];
    EXPECT_EQ(named["DAT_IB_RDMA_READ"], "TRUE");
    EXPECT_FALSE(named["DAT_IB_DEVICE_NAME"].empty());
    EXPECT_TRUE(named.count("DAT_EXTENSION_INTERFACE"));
}

TEST_P(IaTest, QueryAndCloseOnBadHandlesAreInvalidHandle) {
    conformance::IaAttributes attrs;
    EXPECT_DAT_INVALID_HANDLE(attrs.query(DAT_HANDLE_NULL), HandleKind::Ia);
    EXPECT_DAT_INVALID_HANDLE(dat_ia_close(DAT_HANDLE_NULL, DAT_CLOSE_ABRUPT_FLAG), HandleKind::Ia);

    Ia a;
    ASSERT_DAT_OK(a.open(name()));
    DAT_IA_HANDLE closed = a.ia;
    ASSERT_DAT_OK(a.close(DAT_CLOSE_ABRUPT_FLAG));
    EXPECT_DAT_INVALID_HANDLE(attrs.query(closed), HandleKind::Ia);
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    EXPECT_DAT_INVALID_HANDLE(dat_pz_create(closed, &pz), HandleKind::Ia);
    EXPECT_DAT_INVALID_HANDLE(dat_ia_close(closed, DAT_CLOSE_ABRUPT_FLAG), HandleKind::Ia);
}

// dat_ia_close(3DAT): DAT_INVALID_HANDLE "ia_handle is invalid" -- also once another IA was opened
// after the close: the stale handle must not name the new IA (a second close would close it).
TEST_P(IaTest, AClosedIaHandleDoesNotNameTheIaOpenedAfterIt) {
    Ia a;
    ASSERT_DAT_OK(a.open(name()));
    const DAT_IA_HANDLE closed = a.ia;
    ASSERT_DAT_OK(a.close(DAT_CLOSE_ABRUPT_FLAG));
    Ia b;
    ASSERT_DAT_OK(b.open(name()));
    EXPECT_NE(b.ia, closed);
    conformance::IaAttributes attrs;
    EXPECT_DAT_INVALID_HANDLE(attrs.query(closed), HandleKind::Ia);
    DAT_HANDLE_TYPE type{};
    EXPECT_DAT_INVALID_HANDLE(dat_get_handle_type(closed, &type), HandleKind::Any);
    EXPECT_DAT_INVALID_HANDLE(dat_ia_close(closed, DAT_CLOSE_ABRUPT_FLAG), HandleKind::Ia);
    EXPECT_DAT_OK(attrs.query(b.ia)); // the IA opened after the close is still open
}

TEST_P(IaTest, CloseWithInvalidFlagsIsInvalidParameter) {
    Ia a;
    ASSERT_DAT_OK(a.open(name()));
    // dat_ia_close(3DAT): DAT_INVALID_PARAMETER "ia_flags is invalid".
    EXPECT_DAT_ERR(dat_ia_close(a.ia, static_cast<DAT_CLOSE_FLAGS>(0x7e)), DAT_INVALID_PARAMETER, 0);
    // The IA is still open.
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    EXPECT_DAT_OK(dat_ia_query(a.ia, &async, DAT_IA_FIELD_NONE, nullptr, DAT_PROVIDER_FIELD_NONE, nullptr));
}

TEST_P(IaTest, AbruptCloseDestroysEveryObject) {
    Ia a;
    ASSERT_DAT_OK(a.open(name()));
    conformance::LocalObjects o;
    ASSERT_NO_FATAL_FAILURE(o.create(a.ia));
    // dat_ia_close(3DAT): "The abrupt close does a phased, cascading destroy."
    ASSERT_DAT_OK(a.close(DAT_CLOSE_ABRUPT_FLAG));
    // Every handle of the destroyed objects now fails (and nothing crashes).
    for (const auto &x : o.all())
        EXPECT_DAT_INVALID_HANDLE(conformance::query_as(x.kind, x.handle), x.kind) << x.what;
    DAT_EVENT ev{};
    EXPECT_DAT_INVALID_HANDLE(dat_evd_dequeue(a.async_evd, &ev), HandleKind::Evd);
}

TEST_P(IaTest, AbruptCloseUnblocksEvdWaiterWithAbort) {
    Ia a;
    ASSERT_DAT_OK(a.open(name()));
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_evd_create(a.ia, 4, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd));
    auto waiter = conformance::start_evd_wait(evd);
    ASSERT_TRUE(conformance::still_blocked(waiter));
    const auto start = Clock::now();
    ASSERT_DAT_OK(a.close(DAT_CLOSE_ABRUPT_FLAG));
    const bool unblocked = static_cast<bool>(conformance::returns_within(waiter));
    const DAT_RETURN r = waiter.get().r; // after its own 5 s timeout if the close did not wake it
    // dat_ia_close(3DAT): "All direct waiters on all EVDs are also unblocked and return with DAT_ABORT."
    EXPECT_TRUE(unblocked) << "waiter not unblocked by the close; it returned " << conformance::ret_text(r) << " after "
                           << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()
                           << " ms";
    EXPECT_DAT_ERR(r, DAT_ABORT, 0);
}

TEST_P(IaTest, GracefulCloseRefusesWhileObjectsExist) {
    // dat_ia_close(3DAT): graceful close of an IA with Consumer-created objects "does not destroy
    // the IA instance and returns the DAT_INVALID_STATE". Checked for each object kind alone.
    enum Kind { kPz, kEvd, kCno, kLmr, kEp };
    for (Kind kind : {kPz, kEvd, kCno, kLmr, kEp}) {
        SCOPED_TRACE(::testing::Message() << "object kind " << kind);
        Ia a;
        ASSERT_DAT_OK(a.open(name()));
        DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
        DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        std::vector<char> buffer(4096);
        switch (kind) {
        case kPz: ASSERT_DAT_OK(dat_pz_create(a.ia, &pz)); break;
        case kEvd: ASSERT_DAT_OK(dat_evd_create(a.ia, 4, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd)); break;
        case kCno: ASSERT_DAT_OK(dat_cno_create(a.ia, conformance::no_agent(), &cno)); break;
        case kLmr:
            ASSERT_DAT_OK(dat_pz_create(a.ia, &pz));
            ASSERT_DAT_OK(
                conformance::create_lmr(a.ia, pz, buffer.data(), buffer.size(), DAT_MEM_PRIV_LOCAL_READ_FLAG, &lmr));
            break;
        case kEp:
            ASSERT_DAT_OK(dat_pz_create(a.ia, &pz));
            ASSERT_DAT_OK(dat_ep_create(a.ia, pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL, DAT_HANDLE_NULL, nullptr, &ep));
            break;
        }
        EXPECT_DAT_ERR(dat_ia_close(a.ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_STATE, 0);
        // The IA and its objects survive the refused close.
        DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
        EXPECT_DAT_OK(dat_ia_query(a.ia, &async, DAT_IA_FIELD_NONE, nullptr, DAT_PROVIDER_FIELD_NONE, nullptr));
        if (ep != DAT_HANDLE_NULL) {
            EXPECT_DAT_OK(dat_ep_free(ep));
        }
        if (lmr != DAT_HANDLE_NULL) {
            EXPECT_DAT_OK(dat_lmr_free(lmr));
        }
        if (pz != DAT_HANDLE_NULL) {
            EXPECT_DAT_OK(dat_pz_free(pz));
        }
        if (evd != DAT_HANDLE_NULL) {
            EXPECT_DAT_OK(dat_evd_free(evd));
        }
        if (cno != DAT_HANDLE_NULL) {
            EXPECT_DAT_OK(dat_cno_free(cno));
        }
        // dat_ia_close(3DAT): the async EVD the open created need not be freed for graceful close.
        EXPECT_DAT_OK(a.close(DAT_CLOSE_GRACEFUL_FLAG));
    }
}

TEST_P(IaTest, GracefulCloseOfACleanIaSucceeds) {
    Ia a;
    ASSERT_DAT_OK(a.open(name()));
    DAT_EVD_HANDLE async = a.async_evd;
    EXPECT_DAT_OK(a.close(DAT_CLOSE_GRACEFUL_FLAG));
    // dat_ia_close(3DAT): "If async EVD was created as part of the of dat_ia_open(3DAT),
    // dat_ia_close() must destroy it."
    DAT_EVD_PARAM param{};
    EXPECT_DAT_INVALID_HANDLE(dat_evd_query(async, DAT_EVD_FIELD_ALL, &param), HandleKind::Evd);
}

TEST_P(IaTest, ConsumerSuppliedAsyncEvdIsUsedAndNotDestroyedByClose) {
    Ia first;
    ASSERT_DAT_OK(first.open(name()));
    // An asynchronous EVD created by the Consumer for this provider.
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_evd_create(first.ia, 8, DAT_HANDLE_NULL, DAT_EVD_ASYNC_FLAG, &async));

    DAT_EVD_HANDLE passed = async;
    DAT_IA_HANDLE second = DAT_HANDLE_NULL;
    // dat_ia_open(3DAT): "If async_evd_handle is not DAT_HANDLE_NULL, the Provider does not
    // create an Event Dispatcher ... The async_evd_handle value passed in by the Consumer must
    // be an asynchronous Event Dispatcher created for the same Provider" -- this one is.
    // "the Provider ignores the async_evd_min_qlen value": also one no EVD could have.
    DAT_RETURN r = dat_ia_open(conformance::ia_name_ptr(name()), 0x7fffffff, &passed, &second);
    ASSERT_DAT_OK(r);
    // dat_ia_open(3DAT): the provider does not create an EVD; the handle is the one passed in.
    EXPECT_EQ(passed, async);
    DAT_EVD_HANDLE reported = DAT_HANDLE_NULL;
    EXPECT_DAT_OK(dat_ia_query(second, &reported, DAT_IA_FIELD_NONE, nullptr, DAT_PROVIDER_FIELD_NONE, nullptr));
    EXPECT_EQ(reported, async);
    // dat_evd_free(3DAT): DAT_INVALID_STATE while the EVD is in use (here: by the second IA).
    EXPECT_DAT_ERR(dat_evd_free(async), DAT_INVALID_STATE, 0);
    EXPECT_DAT_OK(dat_ia_close(second, DAT_CLOSE_ABRUPT_FLAG));
    // dat_ia_close(3DAT): "If async_evd_handle was passed in by the Consumer at dat_ia_open(),
    // this handle is not destroyed."
    DAT_EVD_PARAM param{};
    EXPECT_DAT_OK(dat_evd_query(async, DAT_EVD_FIELD_ALL, &param));
    EXPECT_DAT_OK(dat_evd_free(async));
}

TEST_P(IaTest, AsyncEvdOfAnotherIaMustBeAnAsyncEvd) {
    Ia first;
    ASSERT_DAT_OK(first.open(name()));
    DAT_EVD_HANDLE dto = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_evd_create(first.ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto));
    DAT_EVD_HANDLE passed = dto;
    DAT_IA_HANDLE second = DAT_HANDLE_NULL;
    // dat_ia_open(3DAT): DAT_INVALID_HANDLE "Invalid DAT handle; async_evd_handle is invalid".
    EXPECT_DAT_INVALID_HANDLE(dat_ia_open(conformance::ia_name_ptr(name()), 8, &passed, &second), HandleKind::Evd);
    EXPECT_EQ(passed, dto); // unchanged on failure
    EXPECT_DAT_OK(dat_evd_free(dto));
}

TEST_P(IaTest, BorrowedAsyncEvdGoingAwayWithItsIaLeavesTheBorrowerWorking) {
    Ia first;
    ASSERT_DAT_OK(first.open(name()));
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_evd_create(first.ia, 8, DAT_HANDLE_NULL, DAT_EVD_ASYNC_FLAG, &async));
    DAT_EVD_HANDLE passed = async;
    DAT_IA_HANDLE second = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_ia_open(conformance::ia_name_ptr(name()), 8, &passed, &second));
    // The owner closes abruptly, taking its EVDs along (dat_ia_close(3DAT)).
    ASSERT_DAT_OK(dat_ia_close(first.ia, DAT_CLOSE_ABRUPT_FLAG));
    first.ia = DAT_HANDLE_NULL;
    DAT_EVD_PARAM param{};
    EXPECT_DAT_INVALID_HANDLE(dat_evd_query(async, DAT_EVD_FIELD_ALL, &param), HandleKind::Evd);
    // The borrower still works and closes cleanly.
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    EXPECT_DAT_OK(dat_pz_create(second, &pz));
    EXPECT_DAT_OK(dat_pz_free(pz));
    EXPECT_DAT_OK(dat_ia_close(second, DAT_CLOSE_GRACEFUL_FLAG));
}

TEST_P(IaTest, RegistryListsTheIaName) {
    // dat_ia_open(3DAT): "Valid IA names are obtained from dat_registry_list_providers(3DAT)."
    // dat_registry_list_providers(3DAT): a count query (no room) answers DAT_INVALID_PARAMETER
    // with the number of entries. A list too small fails with DAT_INVALID_PARAMETER by the
    // man page; OFED's libdat2, and ours, fill it with the first entries instead.
    DAT_COUNT count = 0;
    EXPECT_DAT_ERR(dat_registry_list_providers(0, &count, nullptr), DAT_INVALID_PARAMETER, 0);
    ASSERT_GE(count, 1);
    DAT_PROVIDER_INFO first{};
    DAT_PROVIDER_INFO *one[] = {&first};
    DAT_COUNT got = -1;
    DAT_RETURN r = dat_registry_list_providers(1, &got, one);
    if (r == DAT_SUCCESS) {
        EXPECT_EQ(got, 1);
    } else {
        EXPECT_DAT_ERR(r, DAT_INVALID_PARAMETER, 0);
    }
    std::vector<DAT_PROVIDER_INFO> storage(static_cast<std::size_t>(count));
    std::vector<DAT_PROVIDER_INFO *> list;
    for (auto &info : storage)
        list.push_back(&info);
    ASSERT_DAT_OK(dat_registry_list_providers(count, &got, list.data()));
    ASSERT_GE(got, 1);
    ASSERT_LE(got, count);
    if (r == DAT_SUCCESS) {
        EXPECT_STREQ(first.ia_name, list[0]->ia_name) << "the first entry, alone and in the whole list";
    }
    bool found = false;
    for (DAT_COUNT i = 0; i < got; ++i)
        if (name() == list[i]->ia_name) {
            found = true;
            EXPECT_EQ(list[i]->dapl_version_major, static_cast<DAT_UINT32>(DAT_VERSION_MAJOR));
        }
    EXPECT_TRUE(found) << name() << " not listed";
}

INSTANTIATE_OVER_IAS(IaTest);

} // namespace
