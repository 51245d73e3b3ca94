// SPDX-License-Identifier: BSD-3-Clause
#include "conformance.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <cctype>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <type_traits>

namespace conformance {

std::vector<std::string> ia_names() {
    std::vector<std::string> names;
    const char *env = std::getenv("DAT2_CONFORMANCE_IAS");
    std::string list = env && *env ? env : "ofi-tcp";
    std::stringstream ss(list);
    for (std::string item; std::getline(ss, item, ',');)
        if (!item.empty())
            names.push_back(item);
    return names;
}

bool transmit_write_completion() {
    const char *env = std::getenv("DAT2_CONFORMANCE_WRITE_COMPLETION");
    return env && std::string(env) == "transmit";
}

std::string param_name(const ::testing::TestParamInfo<std::string> &info) {
    std::string out;
    for (char c : info.param)
        out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return out;
}

std::string ret_text(DAT_RETURN r) {
    const char *major = "?", *minor = "?";
    dat_strerror(r, &major, &minor);
    std::ostringstream os;
    os << major << " " << minor << " (0x" << std::hex << r << ")";
    return os.str();
}

bool not_provided(DAT_RETURN r) {
    return DAT_GET_TYPE(r) == DAT_NOT_IMPLEMENTED || DAT_GET_TYPE(r) == DAT_MODEL_NOT_SUPPORTED;
}

// ---- Watchdog -----------------------------------------------------------------

// Where each thread of this process waits, on stderr, from gdb when it is
// installed: the one thing a hang in CI leaves to go on.
static void print_thread_stacks() {
    if (std::system("command -v gdb >/dev/null 2>&1") != 0) {
        std::fprintf(stderr, "conformance watchdog: no gdb, so no thread stacks\n");
        return;
    }
    // Yama's ptrace_scope 1 lets only an ancestor attach; gdb is our descendant.
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    char cmd[256];
    std::snprintf(cmd, sizeof cmd,
                  "timeout 60 gdb -p %d -batch -ex 'thread apply all bt 24' 2>/dev/null"
                  " | grep -E '^Thread|^#' | cut -c1-240 >&2",
                  static_cast<int>(getpid()));
    std::fprintf(stderr, "conformance watchdog: the threads' stacks:\n");
    std::fflush(stderr);
    if (std::system(cmd) != 0)
        std::fprintf(stderr, "conformance watchdog: gdb could not show the stacks\n");
}

struct Watchdog::State {
    std::mutex m;
    std::condition_variable cv;
    bool stop = false;
    bool waiting = false;
    std::thread t;
};

void Watchdog::start(const std::string &what, int seconds) {
    stop();
    st_ = new State;
    State *st = st_;
    st->t = std::thread([st, what, seconds] {
        std::unique_lock<std::mutex> lk(st->m);
        st->waiting = true;
        st->cv.notify_all();
        if (!st->cv.wait_for(lk, std::chrono::seconds(seconds), [st] { return st->stop; })) {
            std::fprintf(stderr,
                         "\nconformance watchdog: %s still running after %d s (a DAT call never returned); "
                         "ending the process\n",
                         what.c_str(), seconds);
            print_thread_stacks();
            std::fflush(stderr);
            std::fflush(stdout);
            _exit(124);
        }
    });
    // Return once the thread sleeps: a test that forks next (ChildPeer)
    // must not fork while it is still starting and allocating, or the child
    // can inherit a held allocator lock (seen under ASan: the child hung in
    // its first allocation, 1 run in 8).
    std::unique_lock<std::mutex> lk(st->m);
    st->cv.wait(lk, [st] { return st->waiting; });
}

void Watchdog::stop() {
    if (!st_)
        return;
    {
        std::lock_guard<std::mutex> lk(st_->m);
        st_->stop = true;
    }
    st_->cv.notify_all();
    st_->t.join();
    delete st_;
    st_ = nullptr;
}

void ConformanceTest::SetUp() {
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    watchdog.start(std::string(info->test_suite_name()) + "." + info->name());
}

void ConformanceTest::TearDown() { watchdog.stop(); }

// ---- OpenIa -------------------------------------------------------------------

DAT_RETURN OpenIa::open(const std::string &name) {
    async_evd = DAT_HANDLE_NULL;
    DAT_RETURN r = dat_ia_open(ia_name_ptr(name), 8, &async_evd, &ia);
    if (r != DAT_SUCCESS)
        return r;
    return dat_pz_create(ia, &pz);
}

void OpenIa::close() {
    if (pz != DAT_HANDLE_NULL)
        dat_pz_free(pz);
    pz = DAT_HANDLE_NULL;
    if (ia != DAT_HANDLE_NULL)
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    ia = DAT_HANDLE_NULL;
}

// ---- helpers of the local-object suites --------------------------------------

namespace {

bool subtype_names(DAT_UINT32 s, HandleKind kind) {
    switch (kind) {
    case HandleKind::Any: return true;
    case HandleKind::Ia: return s == DAT_INVALID_HANDLE_IA;
    case HandleKind::Evd:
        return s == DAT_INVALID_HANDLE_EVD_CR || s == DAT_INVALID_HANDLE_EVD_REQUEST ||
               s == DAT_INVALID_HANDLE_EVD_RECV || s == DAT_INVALID_HANDLE_EVD_CONN ||
               s == DAT_INVALID_HANDLE_EVD_ASYNC;
    case HandleKind::Ep: return s == DAT_INVALID_HANDLE_EP;
    case HandleKind::Lmr: return s == DAT_INVALID_HANDLE_LMR;
    case HandleKind::Rmr: return s == DAT_INVALID_HANDLE_RMR;
    case HandleKind::Pz: return s == DAT_INVALID_HANDLE_PZ;
    case HandleKind::Psp: return s == DAT_INVALID_HANDLE_PSP;
    case HandleKind::Rsp: return s == DAT_INVALID_HANDLE_RSP;
    case HandleKind::Cr: return s == DAT_INVALID_HANDLE_CR;
    case HandleKind::Cno: return s == DAT_INVALID_HANDLE_CNO;
    case HandleKind::Srq: return s == DAT_INVALID_HANDLE_SRQ;
    }
    return false;
}

} // namespace

::testing::AssertionResult IsInvalidHandle(const char *expr_text, const char *kind_text, DAT_RETURN r,
                                           HandleKind kind) {
    if (DAT_GET_TYPE(r) != DAT_INVALID_HANDLE)
        return ::testing::AssertionFailure() << expr_text << " -> " << ret_text(r) << ", expected DAT_INVALID_HANDLE";
    const DAT_UINT32 s = DAT_GET_SUBTYPE(r);
    if (s == DAT_NO_SUBTYPE || (s >= DAT_INVALID_HANDLE1 && s <= DAT_INVALID_HANDLE10) || subtype_names(s, kind))
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << expr_text << " -> " << ret_text(r)
                                         << ": the subtype names another kind of object than " << kind_text;
}

DAT_HANDLE_TYPE handle_type(HandleKind kind) {
    switch (kind) {
    case HandleKind::Any:
    case HandleKind::Ia: return DAT_HANDLE_TYPE_IA;
    case HandleKind::Evd: return DAT_HANDLE_TYPE_EVD;
    case HandleKind::Ep: return DAT_HANDLE_TYPE_EP;
    case HandleKind::Lmr: return DAT_HANDLE_TYPE_LMR;
    case HandleKind::Rmr: return DAT_HANDLE_TYPE_RMR;
    case HandleKind::Pz: return DAT_HANDLE_TYPE_PZ;
    case HandleKind::Psp: return DAT_HANDLE_TYPE_PSP;
    case HandleKind::Rsp: return DAT_HANDLE_TYPE_RSP;
    case HandleKind::Cr: return DAT_HANDLE_TYPE_CR;
    case HandleKind::Cno: return DAT_HANDLE_TYPE_CNO;
    case HandleKind::Srq: return DAT_HANDLE_TYPE_SRQ;
    }
    return DAT_HANDLE_TYPE_IA;
}

namespace {

// fn(h, mask, &param) into a scratch `param`; `*ia` gets param.ia_handle.
template <class H, class M, class P>
DAT_RETURN query_param(DAT_RETURN (*fn)(H, M, P *), DAT_HANDLE h, typename std::common_type<M>::type mask,
                       DAT_IA_HANDLE *ia) {
    P param{};
    DAT_RETURN r = fn(static_cast<H>(h), mask, &param);
    if (ia)
        *ia = param.ia_handle;
    return r;
}

} // namespace

DAT_RETURN query_as(HandleKind kind, DAT_HANDLE h, DAT_IA_HANDLE *ia) {
    switch (kind) {
    case HandleKind::Any: {
        DAT_HANDLE_TYPE type{};
        return dat_get_handle_type(h, &type);
    }
    case HandleKind::Ia: {
        DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
        if (ia)
            *ia = h;
        return dat_ia_query(h, &async, DAT_IA_FIELD_NONE, nullptr, DAT_PROVIDER_FIELD_NONE, nullptr);
    }
    case HandleKind::Cr: { // a Connection Request does not name its IA
        DAT_CR_PARAM p{};
        return dat_cr_query(h, DAT_CR_FIELD_ALL, &p);
    }
    case HandleKind::Evd: return query_param(&dat_evd_query, h, DAT_EVD_FIELD_ALL, ia);
    case HandleKind::Ep: return query_param(&dat_ep_query, h, DAT_EP_FIELD_ALL, ia);
    case HandleKind::Lmr: return query_param(&dat_lmr_query, h, DAT_LMR_FIELD_ALL, ia);
    case HandleKind::Rmr:
        return query_param(&dat_rmr_query, h,
                           static_cast<DAT_RMR_PARAM_MASK>(DAT_RMR_FIELD_IA_HANDLE | DAT_RMR_FIELD_PZ_HANDLE), ia);
    case HandleKind::Pz: return query_param(&dat_pz_query, h, DAT_PZ_FIELD_ALL, ia);
    case HandleKind::Psp: return query_param(&dat_psp_query, h, DAT_PSP_FIELD_ALL, ia);
    case HandleKind::Rsp: return query_param(&dat_rsp_query, h, DAT_RSP_FIELD_ALL, ia);
    case HandleKind::Cno: return query_param(&dat_cno_query, h, DAT_CNO_FIELD_ALL, ia);
    case HandleKind::Srq: return query_param(&dat_srq_query, h, DAT_SRQ_FIELD_ALL, ia);
    }
    return DAT_INTERNAL_ERROR;
}

DAT_RETURN free_as(HandleKind kind, DAT_HANDLE h) {
    switch (kind) {
    case HandleKind::Ia: return dat_ia_close(h, DAT_CLOSE_ABRUPT_FLAG);
    case HandleKind::Evd: return dat_evd_free(h);
    case HandleKind::Ep: return dat_ep_free(h);
    case HandleKind::Lmr: return dat_lmr_free(h);
    case HandleKind::Rmr: return dat_rmr_free(h);
    case HandleKind::Pz: return dat_pz_free(h);
    case HandleKind::Psp: return dat_psp_free(h);
    case HandleKind::Rsp: return dat_rsp_free(h);
    case HandleKind::Cno: return dat_cno_free(h);
    case HandleKind::Srq: return dat_srq_free(h);
    case HandleKind::Any:
    case HandleKind::Cr: break;
    }
    return DAT_INTERNAL_ERROR;
}

DAT_EVENT software_event(void *pointer) {
    DAT_EVENT event{};
    event.event_number = DAT_SOFTWARE_EVENT;
    event.event_data.software_event_data.pointer = pointer;
    return event;
}

DAT_RETURN create_lmr(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, void *address, DAT_VLEN length, DAT_MEM_PRIV_FLAGS privileges,
                      DAT_LMR_HANDLE *lmr) {
    DAT_REGION_DESCRIPTION region{};
    region.for_va = address;
    DAT_LMR_CONTEXT lctx = 0;
    DAT_RMR_CONTEXT rctx = 0;
    DAT_VLEN size = 0;
    DAT_VADDR addr = 0;
    return dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, length, pz, privileges, DAT_VA_TYPE_VA, lmr, &lctx, &rctx,
                          &size, &addr);
}

std::vector<LocalObjects::Object> LocalObjects::all() const {
    std::vector<Object> out = {
        {cno, HandleKind::Cno, "CNO"},         {sw_evd, HandleKind::Evd, "software EVD"},
        {dto_evd, HandleKind::Evd, "DTO EVD"}, {conn_evd, HandleKind::Evd, "connection EVD"},
        {cr_evd, HandleKind::Evd, "CR EVD"},   {pz, HandleKind::Pz, "PZ"},
        {lmr, HandleKind::Lmr, "LMR"},         {ep, HandleKind::Ep, "EP"},
        {rsp_ep, HandleKind::Ep, "RSP's EP"},  {psp, HandleKind::Psp, "PSP"},
    };
    if (has_rmr)
        out.push_back({rmr, HandleKind::Rmr, "RMR"});
    if (rsp != DAT_HANDLE_NULL)
        out.push_back({rsp, HandleKind::Rsp, "RSP"});
    return out;
}

void LocalObjects::create(DAT_IA_HANDLE ia) {
    ASSERT_DAT_OK(dat_cno_create(ia, no_agent(), &cno));
    ASSERT_DAT_OK(dat_evd_create(ia, 8, cno, DAT_EVD_SOFTWARE_FLAG, &sw_evd));
    ASSERT_DAT_OK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto_evd));
    ASSERT_DAT_OK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_evd));
    ASSERT_DAT_OK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd));
    ASSERT_DAT_OK(dat_pz_create(ia, &pz));
    ASSERT_DAT_OK(create_lmr(
        ia, pz, buffer.data(), buffer.size(),
        static_cast<DAT_MEM_PRIV_FLAGS>(DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG), &lmr));
    IaAttributes attrs;
    ASSERT_DAT_OK(attrs.query(ia));
    has_rmr = attrs.ia.max_rmrs >= 1;
    if (has_rmr) {
        ASSERT_DAT_OK(dat_rmr_create(pz, &rmr));
    }
    ASSERT_DAT_OK(dat_ep_create(ia, pz, dto_evd, dto_evd, conn_evd, nullptr, &ep));
    ASSERT_DAT_OK(dat_ep_create(ia, pz, dto_evd, dto_evd, conn_evd, nullptr, &rsp_ep));
    ASSERT_DAT_OK(dat_psp_create_any(ia, &psp_qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp));
    // A connection qualifier nobody uses: let dat_psp_create_any find one, then take it over.
    DAT_CONN_QUAL rsp_qual = 0;
    DAT_PSP_HANDLE probe = DAT_HANDLE_NULL;
    ASSERT_DAT_OK(dat_psp_create_any(ia, &rsp_qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &probe));
    ASSERT_DAT_OK(dat_psp_free(probe));
    rsp_create = dat_rsp_create(ia, rsp_qual, rsp_ep, cr_evd, &rsp);
    if (rsp_create != DAT_SUCCESS)
        rsp = DAT_HANDLE_NULL;
}

void LocalObjects::destroy() {
    if (rsp != DAT_HANDLE_NULL) {
        ASSERT_DAT_OK(dat_rsp_free(rsp));
    }
    ASSERT_DAT_OK(dat_psp_free(psp));
    ASSERT_DAT_OK(dat_ep_free(rsp_ep));
    ASSERT_DAT_OK(dat_ep_free(ep));
    if (has_rmr) {
        ASSERT_DAT_OK(dat_rmr_free(rmr));
    }
    ASSERT_DAT_OK(dat_lmr_free(lmr));
    ASSERT_DAT_OK(dat_pz_free(pz));
    for (DAT_EVD_HANDLE evd : {cr_evd, conn_evd, dto_evd, sw_evd})
        ASSERT_DAT_OK(dat_evd_free(evd));
    ASSERT_DAT_OK(dat_cno_free(cno));
}

std::future<EvdWait> start_evd_wait(DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout_us, DAT_COUNT threshold) {
    return std::async(std::launch::async, [evd, timeout_us, threshold] {
        EvdWait w;
        w.r = dat_evd_wait(evd, timeout_us, threshold, &w.ev, &w.nmore);
        return w;
    });
}

std::future<CnoWait> start_cno_wait(DAT_CNO_HANDLE cno, DAT_TIMEOUT timeout_us) {
    return std::async(std::launch::async, [cno, timeout_us] {
        CnoWait w;
        w.evd = reinterpret_cast<DAT_EVD_HANDLE>(std::uintptr_t(0x5a5a5a5a));
        w.r = dat_cno_wait(cno, timeout_us, &w.evd);
        return w;
    });
}

DAT_RETURN IaAttributes::query(DAT_IA_HANDLE ia_handle) {
    return dat_ia_query(ia_handle, &async_evd, DAT_IA_FIELD_ALL, &ia, DAT_PROVIDER_FIELD_ALL, &provider());
}

} // namespace conformance
