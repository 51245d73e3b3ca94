// SPDX-License-Identifier: BSD-3-Clause
// Hostile handles and arguments (issue 7): a seeded random run of calls to
// every exported DAT function that takes a handle (and the registry calls),
// each with at least one argument that is invalid, must give an error code,
// never DAT_SUCCESS, a crash or a hang (the suite's watchdog ends a hang).
//
// Which "random" handles: DAT_HANDLE_TO_PROVIDER(h) is *(DAT_PROVIDER **)h,
// so libdat2 reads the first word of every handle that is not a small
// integer (DAT's ABI, OFED does the same): a handle pointing at unmapped
// memory would crash any DAT registry. What the design does promise is that
// anything readable is checked without trusting it: NULL, small integers
// (consumer IA handles are 1, 2, ...), live objects of another type or of
// another IA, freed objects (the kit's arena keeps their slots mapped),
// pointers into the middle of an object (misaligned), stack buffers holding
// random bytes or a copy of a live object's header (first word a genuine
// DAT_PROVIDER pointer: a forged handle), the DAT_PROVIDER table itself, and
// the handle of a closed IA. Those are what this test passes.
//
// Each call is made in one of two modes:
//  - bad handle: one handle argument (the target) is one of the above; the
//    others are valid, or ("chaos") each valid or invalid at random, and so
//    are the other arguments. With everything else valid and the bad handle
//    first (the one the call dispatches on), the answer must be
//    DAT_INVALID_HANDLE.
//  - bad argument: every handle valid (objects of one IA, unconnected EPs, a
//    pending connection request) and one argument out of range: a negative
//    or huge count or length, undefined flag or mask bits, an unknown enum
//    value, NULL where a result must be written, a non-software event.
// Afterwards every object still answers its query: no refused call destroyed
// or damaged anything.
//
// DAT2_HOSTILE_SEED picks the seed (printed either way; rerun with it to
// reproduce), DAT2_HOSTILE_CALLS the number of calls (default 20000).
#include "connected.hpp"

#include <dat2/dat_ib_extensions.h>
#include <dat2/dat_registry.h>
#include <dat2/udat_redirection.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

// Exported by libdat2 for providers (OFED's ABI); no public header declares it.
extern "C" DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE, DAT_IA_HANDLE *);

namespace {

using conformance::ret_text;

// What a handle argument must be. The EVD roles are one type (DAT_HANDLE_TYPE_EVD)
// with the valid value each call needs.
enum class K { Ia, EvdSw, EvdDto, EvdConn, EvdCr, Ep, Lmr, Rmr, Pz, Psp, Rsp, Cr, Cno, Srq, Csp, Any, Count };

bool is_evd(K k) { return k == K::EvdSw || k == K::EvdDto || k == K::EvdConn || k == K::EvdCr; }
// The handle type a kind is checked against (EVD roles share one).
K type_of(K k) { return is_evd(k) ? K::EvdSw : k; }

enum class Bad {
    Null,          // DAT_HANDLE_NULL
    SmallInt,      // 1..4095, not a live IA handle
    WrongType,     // a live object of another type (or the IA handle where an object is due)
    Freed,         // an object that was freed (or destroyed by an abrupt IA close)
    Foreign,       // a live object of the right type on another IA
    Forged,        // a stack copy of a live object's header: a real DAT_PROVIDER pointer first
    RandomBytes,   // a stack buffer of random bytes
    Misaligned,    // a pointer into the middle of a live object
    ProviderTable, // the DAT_PROVIDER table itself
    ClosedIa,      // the handle of an IA that was closed
    Count
};
const char *bad_name(Bad b) {
    static const char *const names[] = {"NULL",          "small integer", "wrong type", "freed",          "foreign IA",
                                        "forged header", "random bytes",  "misaligned", "provider table", "closed IA"};
    return names[static_cast<int>(b)];
}

enum class Mode { BadHandle, BadArg, Fixed };

// Everything the calls use: live objects on IA 1 (the valid values), live
// objects on IA 2 (foreign), freed ones, and stack buffers for forgeries.
struct World {
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL, ia2 = DAT_HANDLE_NULL, closed_ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL, async_evd2 = DAT_HANDLE_NULL;
    conformance::LocalObjects o, o2;                             // live on IA 1 and IA 2
    std::vector<DAT_HANDLE> pool[static_cast<int>(K::Count)];    // valid values, IA 1
    std::vector<DAT_HANDLE> foreign[static_cast<int>(K::Count)]; // IA 2
    std::vector<DAT_HANDLE> freed;
    std::set<std::uintptr_t> live_ia_numbers;
    const DAT_PROVIDER *provider = nullptr;
    // Header words (provider, magic, type, context, IA) of live objects, for forgeries.
    std::vector<std::array<unsigned char, 32>> headers;
    // Connection request kept pending on IA 1's PSP, and the EPs that asked.
    DAT_CR_HANDLE cr = DAT_HANDLE_NULL;
    DAT_EP_HANDLE cep = DAT_HANDLE_NULL, cep2 = DAT_HANDLE_NULL;
    DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
    DAT_CSP_HANDLE csp = DAT_HANDLE_NULL;
    conformance::IaAddress addr;
    DAT_CONN_QUAL unused_qual = 0;
    std::string ia_name;
    std::vector<char> buffer = std::vector<char>(65536);
    DAT_LMR_CONTEXT lmr_context = 0;
    DAT_EP_PARAM ep_param{};
    DAT_COUNT max_private_data = 0;

    std::vector<DAT_HANDLE> &live(K k) { return pool[static_cast<int>(k)]; }
};

// The source of one call's arguments: handle() and arg() in the order of the
// call's parameters; which one is invalid was decided before the call.
class Call {
public:
    Call(World &w, std::mt19937_64 &rng, Mode mode, int target, bool chaos, unsigned char (*stack)[128])
        : w_(w), rng_(rng), mode_(mode), target_(target), chaos_(chaos), stack_(stack) {}

    // A handle parameter of kind `k`; `optional`: DAT_HANDLE_NULL is a valid value.
    DAT_HANDLE h(K k, bool optional = false) {
        const int i = handles_++;
        bool bad = (mode_ == Mode::BadHandle && i == target_) || (chaos_ && i != target_ && coin());
        if (!bad)
            return good(k);
        if (i == target_)
            bad_kind_ = k;
        return bad_handle(k, optional, i);
    }

    // A non-handle argument: `good`, or one of `bads` when it is the target
    // (or, in a chaos call, at random).
    template <class T> T arg(T good, std::initializer_list<T> bads) {
        const int i = args_++;
        const bool bad = (mode_ == Mode::BadArg && i == target_) || (chaos_ && coin());
        if (!bad)
            return good;
        return bads.begin()[pick(bads.size())];
    }

    std::uint64_t r64() { return rng_(); }
    std::size_t pick(std::size_t n) { return static_cast<std::size_t>(rng_() % n); }
    bool coin() { return rng_() & 1; }
    DAT_TIMEOUT timeout() { return static_cast<DAT_TIMEOUT>(pick(1000)); } // us: a wait never blocks long

    int handles() const { return handles_; }
    int args() const { return args_; }
    Bad bad_category() const { return bad_; }
    K bad_kind() const { return bad_kind_; }

private:
    DAT_HANDLE good(K k) {
        if (k == K::Any) { // any live object, or the IA
            std::vector<DAT_HANDLE> all = {w_.ia, w_.async_evd};
            for (int j = 0; j < static_cast<int>(K::Any); ++j)
                all.insert(all.end(), w_.pool[j].begin(), w_.pool[j].end());
            return all[pick(all.size())];
        }
        auto &p = w_.live(k);
        return p.empty() ? DAT_HANDLE_NULL : p[pick(p.size())];
    }

    bool small_int_valid(K k) const { return k == K::Ia || k == K::Any; }

    DAT_HANDLE bad_handle(K k, bool optional, int position) {
        for (;;) {
            Bad b = static_cast<Bad>(pick(static_cast<int>(Bad::Count)));
            DAT_HANDLE v;
            if (make(b, k, optional, position, &v)) {
                if (position == target_)
                    bad_ = b;
                return v;
            }
        }
    }

    // One bad value of category `b` for a parameter of kind `k`; false when
    // the category does not apply (or could be a valid value here).
    bool make(Bad b, K k, bool optional, int position, DAT_HANDLE *out) {
        const K t = type_of(k);
        switch (b) {
        case Bad::Null: *out = DAT_HANDLE_NULL; return !optional;
        case Bad::SmallInt: {
            auto v = static_cast<std::uintptr_t>(1 + pick(4095));
            if (small_int_valid(k) && w_.live_ia_numbers.count(v))
                return false;
            *out = reinterpret_cast<DAT_HANDLE>(v);
            return true;
        }
        case Bad::WrongType: {
            if (k == K::Any)
                return false;
            std::vector<DAT_HANDLE> others;
            if (t != K::Ia)
                others.push_back(w_.ia); // the consumer's IA handle where an object is due
            for (int j = 0; j < static_cast<int>(K::Any); ++j)
                if (type_of(static_cast<K>(j)) != t)
                    others.insert(others.end(), w_.pool[j].begin(), w_.pool[j].end());
            if (t != K::EvdSw)
                others.push_back(w_.async_evd);
            *out = others[pick(others.size())];
            return true;
        }
        case Bad::Freed: *out = w_.freed[pick(w_.freed.size())]; return true;
        case Bad::Foreign: {
            // Only where another handle of the call anchors it to IA 1 (a
            // call on one object of IA 2 alone is a valid call). A connection
            // EVD may belong to any IA of the Provider (core/ep.cpp: dapltest
            // -T L gives every IA's EPs the first IA's connection EVD).
            if (k == K::Any || k == K::Ia || k == K::EvdConn || position == 0)
                return false;
            auto &f = w_.foreign[static_cast<int>(k)];
            if (f.empty())
                return false;
            *out = f[pick(f.size())];
            return true;
        }
        case Bad::Forged: {
            unsigned char *buf = stack_[0];
            for (std::size_t j = 0; j < 128; ++j)
                buf[j] = static_cast<unsigned char>(rng_());
            const auto &hdr = w_.headers[pick(w_.headers.size())];
            std::memcpy(buf, hdr.data(), coin() ? hdr.size() : sizeof(void *));
            *out = buf;
            return true;
        }
        case Bad::RandomBytes: {
            unsigned char *buf = stack_[1];
            for (std::size_t j = 0; j < 128; ++j)
                buf[j] = static_cast<unsigned char>(rng_());
            *out = buf;
            return true;
        }
        case Bad::Misaligned: {
            // Offsets below the smallest arena slot (64 bytes): never the start of another object.
            static const std::uintptr_t offsets[] = {1, 2, 3, 4, 7, 8, 12, 16, 24, 32, 40, 48, 56};
            std::vector<DAT_HANDLE> src = t == K::Ia || k == K::Any ? w_.live(K::Pz) : w_.live(k);
            if (src.empty())
                return false;
            auto base = reinterpret_cast<std::uintptr_t>(src[pick(src.size())]);
            *out = reinterpret_cast<DAT_HANDLE>(base + offsets[pick(std::size(offsets))]);
            return true;
        }
        case Bad::ProviderTable: *out = const_cast<DAT_PROVIDER *>(w_.provider); return true;
        case Bad::ClosedIa:
            *out = w_.closed_ia;
            return !w_.live_ia_numbers.count(reinterpret_cast<std::uintptr_t>(w_.closed_ia));
        case Bad::Count: break;
        }
        return false;
    }

    World &w_;
    std::mt19937_64 &rng_;
    Mode mode_;
    int target_;
    bool chaos_;
    unsigned char (*stack_)[128];
    int handles_ = 0, args_ = 0;
    Bad bad_ = Bad::Count;
    K bad_kind_ = K::Count;
};

// One exported function: its handle and argument counts (what Call sees),
// and the call.
struct Entry {
    const char *name;
    int nhandles;
    int nargs;
    std::function<DAT_RETURN(Call &, World &)> fn;
    // False when an argument besides the handles is invalid in every call
    // (an unknown extension op): then the error need not be DAT_INVALID_HANDLE.
    bool args_valid = true;
};

constexpr DAT_COUNT kHugeCount = 1 << 30;
constexpr DAT_UINT64 kHugeMask = 0x8000000000000000ull;

template <class T> T as(std::uint64_t v) { return static_cast<T>(v); }

std::vector<Entry> entries() {
    // Local scratch that calls write into; valid memory, never shared across calls.
    thread_local DAT_EVENT ev;
    thread_local DAT_COUNT count;
    thread_local DAT_CONTEXT context;
    thread_local DAT_HANDLE_TYPE handle_type;
    thread_local DAT_EVD_HANDLE evd_out;
    thread_local DAT_HANDLE handle_out;
    thread_local DAT_CONN_QUAL qual_out;
    thread_local DAT_FD fd_out;
    thread_local DAT_IA_ATTR ia_attr;
    alignas(DAT_PROVIDER_ATTR) thread_local unsigned char provider_attr_raw[sizeof(DAT_PROVIDER_ATTR)];
    thread_local DAT_EVD_PARAM evd_param;
    thread_local DAT_EP_PARAM ep_param;
    thread_local DAT_LMR_PARAM lmr_param;
    thread_local DAT_RMR_PARAM rmr_param;
    thread_local DAT_PZ_PARAM pz_param;
    thread_local DAT_PSP_PARAM psp_param;
    thread_local DAT_RSP_PARAM rsp_param;
    thread_local DAT_CSP_PARAM csp_param;
    thread_local DAT_CR_PARAM cr_param;
    thread_local DAT_CNO_PARAM cno_param;
    thread_local DAT_SRQ_PARAM srq_param;
    thread_local DAT_EP_STATE ep_state;
    thread_local DAT_BOOLEAN idle1, idle2;
    thread_local DAT_LMR_CONTEXT lctx;
    thread_local DAT_RMR_CONTEXT rctx;
    thread_local DAT_VLEN vlen;
    thread_local DAT_VADDR vaddr;
    thread_local const char *msg1, *msg2;
    thread_local DAT_PROVIDER_INFO *provider_list[8];
    thread_local DAT_HA_RELATIONSHIP relationship;
    auto *pattr = reinterpret_cast<DAT_PROVIDER_ATTR *>(provider_attr_raw);

    static char pdata[512];
    static DAT_EVENT software = conformance::software_event(nullptr);
    static DAT_EVENT not_software = [] {
        DAT_EVENT e{};
        e.event_number = DAT_DTO_COMPLETION_EVENT;
        return e;
    }();
    static sockaddr_in bad_family = [] {
        sockaddr_in a{};
        a.sin_family = 0x7777;
        return a;
    }();
    static DAT_COMM comm{};

    // Valid DTO pieces over IA 1's LMR (the EPs are unconnected: posts fail
    // anyway, except receives).
    auto iov = [](World &w) {
        thread_local DAT_LMR_TRIPLET t;
        t.lmr_context = w.lmr_context;
        t.virtual_address = reinterpret_cast<DAT_VADDR>(w.o.buffer.data());
        t.segment_length = 64;
        return &t;
    };
    auto remote = []() {
        thread_local DAT_RMR_TRIPLET r;
        r.rmr_context = 1;
        r.virtual_address = 0x10000;
        r.segment_length = 64;
        return &r;
    };
    auto cookie = [](Call &c) {
        DAT_DTO_COOKIE k;
        k.as_64 = c.r64();
        return k;
    };
    const auto kBadCompletion = as<DAT_COMPLETION_FLAGS>(0x40000000);
    // Not allowed by the world's EPs (default completion flags): invalid on every post.
    const auto kUnsignalled = DAT_COMPLETION_UNSIGNALLED_FLAG;
    const auto kGoodCompletion = DAT_COMPLETION_DEFAULT_FLAG;

    std::vector<Entry> e = {
        // ---- IA and any handle -----------------------------------------------------
        {"dat_ia_query", 1, 2,
         [=](Call &c, World &) {
             DAT_IA_HANDLE ia = c.h(K::Ia);
             return dat_ia_query(ia, &evd_out, DAT_IA_FIELD_ALL, c.arg<DAT_IA_ATTR *>(&ia_attr, {nullptr}),
                                 DAT_PROVIDER_FIELD_ALL, c.arg<DAT_PROVIDER_ATTR *>(pattr, {nullptr}));
         }},
        {"dat_ia_close", 1, 1,
         [](Call &c, World &) {
             DAT_IA_HANDLE ia = c.h(K::Ia);
             return dat_ia_close(ia, c.arg(DAT_CLOSE_ABRUPT_FLAG, {as<DAT_CLOSE_FLAGS>(0x7), as<DAT_CLOSE_FLAGS>(0x100),
                                                                   as<DAT_CLOSE_FLAGS>(-1)}));
         }},
        {"dat_set_consumer_context", 1, 0,
         [](Call &c, World &) {
             DAT_CONTEXT v;
             v.as_64 = 0;
             return dat_set_consumer_context(c.h(K::Any), v);
         }},
        {"dat_get_consumer_context", 1, 1,
         [](Call &c, World &) {
             DAT_HANDLE h = c.h(K::Any);
             return dat_get_consumer_context(h, c.arg<DAT_CONTEXT *>(&context, {nullptr}));
         }},
        {"dat_get_handle_type", 1, 1,
         [](Call &c, World &) {
             DAT_HANDLE h = c.h(K::Any);
             return dat_get_handle_type(h, c.arg<DAT_HANDLE_TYPE *>(&handle_type, {nullptr}));
         }},
        {"dat_extension_op", 1, 0,
         [](Call &c, World &) {
             // No operation of DAT_IB_EXTENSIONS: an unknown one, never an open or close.
             auto op = as<DAT_EXTENDED_OP>(0x4000 | (c.r64() & 0xfff));
             DAT_HANDLE h = c.h(K::Any);
             return dat_extension_op(h, op, nullptr, nullptr, nullptr, nullptr);
         },
         false},
        {"dat_extension_op(open, unknown IA name)", 0, 0,
         [](Call &c, World &) {
             char name[24];
             std::snprintf(name, sizeof name, "no-such-ia-%08x", static_cast<unsigned>(c.r64()));
             return dat_extension_op(DAT_HANDLE_NULL, DAT_IB_OPEN_QUERY_OP, name, nullptr, nullptr, nullptr);
         }},
        {"dats_get_ia_handle", 1, 1,
         [](Call &c, World &) {
             DAT_IA_HANDLE h = c.h(K::Ia);
             return dats_get_ia_handle(h, c.arg<DAT_IA_HANDLE *>(&handle_out, {nullptr}));
         }},
        {"dat_ia_openv", 0, 3,
         [](Call &c, World &w) {
             DAT_NAME_PTR name = c.arg<DAT_NAME_PTR>(conformance::ia_name_ptr(w.ia_name), {nullptr});
             DAT_IA_HANDLE *out = c.arg<DAT_IA_HANDLE *>(&handle_out, {nullptr});
             DAT_UINT32 major = c.arg<DAT_UINT32>(DAT_VERSION_MAJOR, {1, 99});
             evd_out = DAT_HANDLE_NULL;
             DAT_RETURN r = dat_ia_openv(name, 8, &evd_out, out, major, DAT_VERSION_MINOR, DAT_FALSE);
             if (r == DAT_SUCCESS && out) // reported as a failure by the caller; do not leak the IA
                 dat_ia_close(*out, DAT_CLOSE_ABRUPT_FLAG);
             return r;
         }},
        {"dat_registry_list_providers", 0, 2,
         [](Call &c, World &) {
             DAT_COUNT max = c.arg<DAT_COUNT>(8, {-1, INT_MIN});
             DAT_COUNT *n = c.arg<DAT_COUNT *>(&count, {nullptr});
             return dat_registry_list_providers(max, n, provider_list);
         }},
        {"dat_registry_add_provider", 0, 0,
         [](Call &c, World &w) {
             static DAT_PROVIDER empty{}; // no ia_open_func: never a provider
             DAT_PROVIDER_INFO info{};
             std::snprintf(info.ia_name, sizeof info.ia_name, "hostile-%08x", static_cast<unsigned>(c.r64()));
             switch (c.pick(3)) {
             case 0: return dat_registry_add_provider(nullptr, &info);
             case 1: return dat_registry_add_provider(w.provider, nullptr);
             default: return dat_registry_add_provider(&empty, &info);
             }
         }},
        {"dat_registry_remove_provider", 0, 0,
         [](Call &c, World &w) {
             DAT_PROVIDER_INFO info{};
             std::snprintf(info.ia_name, sizeof info.ia_name, "hostile-%08x", static_cast<unsigned>(c.r64()));
             switch (c.pick(3)) {
             case 0: return dat_registry_remove_provider(nullptr, &info);
             case 1: return dat_registry_remove_provider(w.provider, nullptr);
             default: return dat_registry_remove_provider(w.provider, &info); // a name it is not registered under
             }
         }},
        {"dat_registry_providers_related", 0, 3,
         [](Call &c, World &w) {
             DAT_NAME_PTR n1 = c.arg<DAT_NAME_PTR>(conformance::ia_name_ptr(w.ia_name), {nullptr});
             DAT_NAME_PTR n2 = c.arg<DAT_NAME_PTR>(conformance::ia_name_ptr(w.ia_name), {nullptr});
             return dat_registry_providers_related(n1, n2, c.arg<DAT_HA_RELATIONSHIP *>(&relationship, {nullptr}));
         }},
        {"dat_strerror", 0, 1,
         [](Call &c, World &) {
             auto code = static_cast<DAT_RETURN>(c.r64());
             return dat_strerror(code, c.arg<const char **>(&msg1, {nullptr}), &msg2);
         }},
        // ---- CR ------------------------------------------------------------------------
        {"dat_cr_query", 1, 1,
         [](Call &c, World &) {
             DAT_CR_HANDLE cr = c.h(K::Cr);
             return dat_cr_query(cr, DAT_CR_FIELD_ALL, c.arg<DAT_CR_PARAM *>(&cr_param, {nullptr}));
         }},
        {"dat_cr_accept", 2, 1,
         [](Call &c, World &) {
             DAT_CR_HANDLE cr = c.h(K::Cr);
             DAT_EP_HANDLE ep = c.h(K::Ep);
             return dat_cr_accept(cr, ep, c.arg<DAT_COUNT>(0, {-1, kHugeCount, INT_MIN}), pdata);
         }},
        {"dat_cr_reject", 1, 1,
         [](Call &c, World &) {
             DAT_CR_HANDLE cr = c.h(K::Cr);
             return dat_cr_reject(cr, c.arg<DAT_COUNT>(0, {-1, kHugeCount, INT_MIN}), pdata);
         }},
        {"dat_cr_handoff", 1, 0, [](Call &c, World &w) { return dat_cr_handoff(c.h(K::Cr), w.unused_qual); }},
        // ---- EVD -----------------------------------------------------------------------
        {"dat_evd_create", 2, 3,
         [](Call &c, World &) {
             DAT_IA_HANDLE ia = c.h(K::Ia);
             DAT_CNO_HANDLE cno = c.h(K::Cno, true);
             DAT_COUNT qlen = c.arg<DAT_COUNT>(8, {-1, INT_MIN, kHugeCount});
             auto flags = c.arg(DAT_EVD_SOFTWARE_FLAG, {as<DAT_EVD_FLAGS>(0x40000000)});
             return dat_evd_create(ia, qlen, cno, flags, c.arg<DAT_EVD_HANDLE *>(&evd_out, {nullptr}));
         }},
        {"dat_evd_resize", 1, 1,
         [](Call &c, World &) {
             DAT_EVD_HANDLE evd = c.h(K::EvdSw);
             return dat_evd_resize(evd, c.arg<DAT_COUNT>(8, {-1, INT_MIN, kHugeCount}));
         }},
        {"dat_evd_post_se", 1, 1,
         [](Call &c, World &) {
             DAT_EVD_HANDLE evd = c.h(K::EvdSw);
             return dat_evd_post_se(evd, c.arg<const DAT_EVENT *>(&software, {nullptr, &not_software}));
         }},
        {"dat_evd_dequeue", 1, 1,
         [](Call &c, World &) {
             DAT_EVD_HANDLE evd = c.h(K::EvdSw);
             return dat_evd_dequeue(evd, c.arg<DAT_EVENT *>(&ev, {nullptr}));
         }},
        {"dat_evd_query", 1, 1,
         [](Call &c, World &) {
             DAT_EVD_HANDLE evd = c.h(K::EvdSw);
             return dat_evd_query(evd, DAT_EVD_FIELD_ALL, c.arg<DAT_EVD_PARAM *>(&evd_param, {nullptr}));
         }},
        {"dat_evd_free", 1, 0, [](Call &c, World &) { return dat_evd_free(c.h(K::EvdSw)); }},
        {"dat_evd_modify_cno", 2, 0,
         [](Call &c, World &) {
             DAT_EVD_HANDLE evd = c.h(K::EvdSw);
             return dat_evd_modify_cno(evd, c.h(K::Cno, true));
         }},
        {"dat_evd_enable", 1, 0, [](Call &c, World &) { return dat_evd_enable(c.h(K::EvdSw)); }},
        {"dat_evd_disable", 1, 0, [](Call &c, World &) { return dat_evd_disable(c.h(K::EvdSw)); }},
        {"dat_evd_set_unwaitable", 1, 0, [](Call &c, World &) { return dat_evd_set_unwaitable(c.h(K::EvdSw)); }},
        {"dat_evd_clear_unwaitable", 1, 0,
         [](Call &c, World &) { return dat_evd_clear_unwaitable(c.h(K::EvdSw)); }},
        {"dat_evd_wait", 1, 2,
         [](Call &c, World &) {
             DAT_EVD_HANDLE evd = c.h(K::EvdSw);
             // dat_evd_wait(3DAT): a non-positive threshold, or one above the queue length, is invalid.
             DAT_COUNT threshold = c.arg<DAT_COUNT>(1, {0, -1, INT_MIN, kHugeCount});
             // (n_more_events may be NULL: OFED's consumers pass it so.)
             return dat_evd_wait(evd, c.timeout(), threshold, c.arg<DAT_EVENT *>(&ev, {nullptr}), &count);
         }},
        // ---- CNO -----------------------------------------------------------------------
        {"dat_cno_create", 1, 1,
         [](Call &c, World &) {
             DAT_IA_HANDLE ia = c.h(K::Ia);
             return dat_cno_create(ia, conformance::no_agent(), c.arg<DAT_CNO_HANDLE *>(&handle_out, {nullptr}));
         }},
        {"dat_cno_fd_create", 1, 2,
         [](Call &c, World &) {
             DAT_IA_HANDLE ia = c.h(K::Ia);
             DAT_FD *fd = c.arg<DAT_FD *>(&fd_out, {nullptr});
             return dat_cno_fd_create(ia, fd, c.arg<DAT_CNO_HANDLE *>(&handle_out, {nullptr}));
         }},
        {"dat_cno_modify_agent", 1, 0,
         [](Call &c, World &) { return dat_cno_modify_agent(c.h(K::Cno), conformance::no_agent()); }},
        {"dat_cno_query", 1, 1,
         [](Call &c, World &) {
             DAT_CNO_HANDLE cno = c.h(K::Cno);
             return dat_cno_query(cno, DAT_CNO_FIELD_ALL, c.arg<DAT_CNO_PARAM *>(&cno_param, {nullptr}));
         }},
        {"dat_cno_free", 1, 0, [](Call &c, World &) { return dat_cno_free(c.h(K::Cno)); }},
        {"dat_cno_wait", 1, 1,
         [](Call &c, World &) {
             DAT_CNO_HANDLE cno = c.h(K::Cno);
             return dat_cno_wait(cno, c.timeout(), c.arg<DAT_EVD_HANDLE *>(&evd_out, {nullptr}));
         }},
        {"dat_cno_trigger", 1, 0, [](Call &c, World &) { return dat_cno_trigger(c.h(K::Cno), &evd_out); }},
        // ---- EP ------------------------------------------------------------------------
        {"dat_ep_create", 5, 2,
         [](Call &c, World &) {
             thread_local DAT_EP_ATTR bad_attr;
             bad_attr = DAT_EP_ATTR{};
             bad_attr.service_type = as<DAT_SERVICE_TYPE>(0x7777);
             bad_attr.max_recv_dtos = -1;
             DAT_IA_HANDLE ia = c.h(K::Ia);
             DAT_PZ_HANDLE pz = c.h(K::Pz);
             DAT_EVD_HANDLE recv = c.h(K::EvdDto, true), req = c.h(K::EvdDto, true), conn = c.h(K::EvdConn, true);
             const DAT_EP_ATTR *attr = c.arg<const DAT_EP_ATTR *>(nullptr, {&bad_attr});
             return dat_ep_create(ia, pz, recv, req, conn, attr, c.arg<DAT_EP_HANDLE *>(&handle_out, {nullptr}));
         }},
        {"dat_ep_create_with_srq", 6, 1,
         [](Call &c, World &) {
             DAT_IA_HANDLE ia = c.h(K::Ia);
             DAT_PZ_HANDLE pz = c.h(K::Pz);
             DAT_EVD_HANDLE recv = c.h(K::EvdDto, true), req = c.h(K::EvdDto, true), conn = c.h(K::EvdConn, true);
             DAT_SRQ_HANDLE srq = c.h(K::Srq);
             return dat_ep_create_with_srq(ia, pz, recv, req, conn, srq, nullptr,
                                           c.arg<DAT_EP_HANDLE *>(&handle_out, {nullptr}));
         }},
        {"dat_ep_query", 1, 1,
         [](Call &c, World &) {
             DAT_EP_HANDLE ep = c.h(K::Ep);
             return dat_ep_query(ep, DAT_EP_FIELD_ALL, c.arg<DAT_EP_PARAM *>(&ep_param, {nullptr}));
         }},
        {"dat_ep_modify", 1, 2,
         [](Call &c, World &w) {
             DAT_EP_HANDLE ep = c.h(K::Ep);
             // dat_ep_modify(3DAT): a mask naming a field that cannot be modified is invalid.
             auto mask = c.arg<DAT_EP_PARAM_MASK>(DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS,
                                                  {DAT_EP_FIELD_IA_HANDLE, as<DAT_EP_PARAM_MASK>(kHugeMask)});
             return dat_ep_modify(ep, mask, c.arg<const DAT_EP_PARAM *>(&w.ep_param, {nullptr}));
         }},
        {"dat_ep_connect", 1, 4,
         [](Call &c, World &w) {
             DAT_EP_HANDLE ep = c.h(K::Ep);
             auto addr = c.arg<DAT_IA_ADDRESS_PTR>(w.addr.ptr(),
                                                   {nullptr, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&bad_family)});
             DAT_COUNT size = c.arg<DAT_COUNT>(0, {-1, kHugeCount, w.max_private_data + 1});
             auto qos = c.arg(DAT_QOS_BEST_EFFORT, {as<DAT_QOS>(0x7fff0000)});
             auto flags = c.arg(DAT_CONNECT_DEFAULT_FLAG, {as<DAT_CONNECT_FLAGS>(0x40000)});
             return dat_ep_connect(ep, addr, w.unused_qual, c.timeout() + 1, size, pdata, qos, flags);
         }},
        {"dat_ep_dup_connect", 2, 2,
         [](Call &c, World &) {
             DAT_EP_HANDLE ep = c.h(K::Ep);
             DAT_EP_HANDLE dup = c.h(K::Ep);
             DAT_COUNT size = c.arg<DAT_COUNT>(0, {-1, kHugeCount});
             auto qos = c.arg(DAT_QOS_BEST_EFFORT, {as<DAT_QOS>(0x7fff0000)});
             return dat_ep_dup_connect(ep, dup, c.timeout() + 1, size, pdata, qos);
         }},
        {"dat_ep_common_connect", 1, 2,
         [](Call &c, World &w) {
             DAT_EP_HANDLE ep = c.h(K::Ep);
             auto addr = c.arg<DAT_IA_ADDRESS_PTR>(w.addr.ptr(),
                                                   {nullptr, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&bad_family)});
             DAT_COUNT size = c.arg<DAT_COUNT>(0, {-1, kHugeCount});
             return dat_ep_common_connect(ep, addr, c.timeout() + 1, size, pdata);
         }},
        {"dat_ep_disconnect", 1, 1,
         [](Call &c, World &) {
             DAT_EP_HANDLE ep = c.h(K::Ep);
             return dat_ep_disconnect(ep, c.arg(DAT_CLOSE_ABRUPT_FLAG, {as<DAT_CLOSE_FLAGS>(0x7),
                                                                        as<DAT_CLOSE_FLAGS>(0x100)}));
         }},
        {"dat_ep_post_send", 1, 2,
         [=](Call &c, World &w) {
             DAT_EP_HANDLE ep = c.h(K::Ep);
             DAT_COUNT n = c.arg<DAT_COUNT>(1, {-1, INT_MIN, kHugeCount});
             return dat_ep_post_send(ep, n, iov(w), cookie(c), c.arg(kGoodCompletion, {kBadCompletion, kUnsignalled}));
         }},
        {"dat_ep_post_send_with_invalidate", 1, 2,
         [=](Call &c, World &w) {
             DAT_EP_HANDLE ep = c.h(K::Ep);
             DAT_COUNT n = c.arg<DAT_COUNT>(1, {-1, INT_MIN, kHugeCount});
             return dat_ep_post_send_with_invalidate(ep, n, iov(w), cookie(c), c.arg(kGoodCompletion, {kBadCompletion, kUnsignalled}),
                                                     DAT_FALSE, 0);
         }},
        {"dat_ep_post_recv", 1, 3,
         [=](Call &c, World &w) {
             DAT_EP_HANDLE ep = c.h(K::Ep);
             DAT_COUNT n = c.arg<DAT_COUNT>(1, {-1, INT_MIN, kHugeCount});
             DAT_LMR_TRIPLET *segs = c.arg<DAT_LMR_TRIPLET *>(iov(w), {nullptr});
             return dat_ep_post_recv(ep, n, segs, cookie(c), c.arg(kGoodCompletion, {kBadCompletion, kUnsignalled}));
         }},
        {"dat_ep_post_rdma_read", 1, 3,
         [=](Call &c, World &w) {
             DAT_EP_HANDLE ep = c.h(K::Ep);
             DAT_COUNT n = c.arg<DAT_COUNT>(1, {-1, INT_MIN, kHugeCount});
             const DAT_RMR_TRIPLET *r = c.arg<const DAT_RMR_TRIPLET *>(remote(), {nullptr});
             return dat_ep_post_rdma_read(ep, n, iov(w), cookie(c), r, c.arg(kGoodCompletion, {kBadCompletion, kUnsignalled}));
         }},
        {"dat_ep_post_rdma_read_to_rmr", 1, 3,
         [=](Call &c, World &) {
             DAT_EP_HANDLE ep = c.h(K::Ep);
             const DAT_RMR_TRIPLET *l = c.arg<const DAT_RMR_TRIPLET *>(remote(), {nullptr});
             const DAT_RMR_TRIPLET *r = c.arg<const DAT_RMR_TRIPLET *>(remote(), {nullptr});
             return dat_ep_post_rdma_read_to_rmr(ep, l, cookie(c), r, c.arg(kGoodCompletion, {kBadCompletion, kUnsignalled}));
         }},
        {"dat_ep_post_rdma_write", 1, 3,
         [=](Call &c, World &w) {
             DAT_EP_HANDLE ep = c.h(K::Ep);
             DAT_COUNT n = c.arg<DAT_COUNT>(1, {-1, INT_MIN, kHugeCount});
             const DAT_RMR_TRIPLET *r = c.arg<const DAT_RMR_TRIPLET *>(remote(), {nullptr});
             return dat_ep_post_rdma_write(ep, n, iov(w), cookie(c), r, c.arg(kGoodCompletion, {kBadCompletion, kUnsignalled}));
         }},
        {"dat_ep_get_status", 1, 0,
         [](Call &c, World &) { return dat_ep_get_status(c.h(K::Ep), &ep_state, &idle1, &idle2); }},
        {"dat_ep_free", 1, 0, [](Call &c, World &) { return dat_ep_free(c.h(K::Ep)); }},
        {"dat_ep_reset", 1, 0, [](Call &c, World &) { return dat_ep_reset(c.h(K::Ep)); }},
        {"dat_ep_recv_query", 1, 0,
         [](Call &c, World &) { return dat_ep_recv_query(c.h(K::Ep), &count, &count); }},
        {"dat_ep_set_watermark", 1, 0,
         [](Call &c, World &) { return dat_ep_set_watermark(c.h(K::Ep), 1, 1); }},
        // ---- LMR / RMR -------------------------------------------------------------------
        {"dat_lmr_create", 2, 3,
         [](Call &c, World &w) {
             DAT_IA_HANDLE ia = c.h(K::Ia);
             DAT_REGION_DESCRIPTION region{};
             region.for_va = w.buffer.data();
             auto type = c.arg(DAT_MEM_TYPE_VIRTUAL, {as<DAT_MEM_TYPE>(0x777)});
             DAT_PZ_HANDLE pz = c.h(K::Pz);
             auto va_type = c.arg(DAT_VA_TYPE_VA, {as<DAT_VA_TYPE>(0x77)});
             return dat_lmr_create(ia, type, region, 4096, pz,
                                   as<DAT_MEM_PRIV_FLAGS>(DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG),
                                   va_type, c.arg<DAT_LMR_HANDLE *>(&handle_out, {nullptr}), &lctx, &rctx, &vlen,
                                   &vaddr);
         }},
        {"dat_lmr_create(DAT_MEM_TYPE_LMR)", 3, 1,
         [](Call &c, World &) {
             DAT_IA_HANDLE ia = c.h(K::Ia);
             DAT_REGION_DESCRIPTION region{};
             region.for_lmr_handle = c.h(K::Lmr);
             DAT_PZ_HANDLE pz = c.h(K::Pz);
             return dat_lmr_create(ia, DAT_MEM_TYPE_LMR, region, 4096, pz,
                                   as<DAT_MEM_PRIV_FLAGS>(DAT_MEM_PRIV_LOCAL_READ_FLAG), DAT_VA_TYPE_VA,
                                   c.arg<DAT_LMR_HANDLE *>(&handle_out, {nullptr}), &lctx, &rctx, &vlen, &vaddr);
         }},
        {"dat_lmr_query", 1, 1,
         [](Call &c, World &) {
             DAT_LMR_HANDLE lmr = c.h(K::Lmr);
             return dat_lmr_query(lmr, DAT_LMR_FIELD_ALL, c.arg<DAT_LMR_PARAM *>(&lmr_param, {nullptr}));
         }},
        {"dat_lmr_free", 1, 0, [](Call &c, World &) { return dat_lmr_free(c.h(K::Lmr)); }},
        {"dat_lmr_sync_rdma_read", 1, 1,
         [=](Call &c, World &w) {
             DAT_IA_HANDLE ia = c.h(K::Ia);
             return dat_lmr_sync_rdma_read(ia, c.arg<const DAT_LMR_TRIPLET *>(iov(w), {nullptr}), 1);
         }},
        {"dat_lmr_sync_rdma_write", 1, 1,
         [=](Call &c, World &w) {
             DAT_IA_HANDLE ia = c.h(K::Ia);
             return dat_lmr_sync_rdma_write(ia, c.arg<const DAT_LMR_TRIPLET *>(iov(w), {nullptr}), 1);
         }},
        {"dat_rmr_create", 1, 1,
         [](Call &c, World &) {
             DAT_PZ_HANDLE pz = c.h(K::Pz);
             return dat_rmr_create(pz, c.arg<DAT_RMR_HANDLE *>(&handle_out, {nullptr}));
         }},
        {"dat_rmr_create_for_ep", 1, 1,
         [](Call &c, World &) {
             DAT_PZ_HANDLE pz = c.h(K::Pz);
             return dat_rmr_create_for_ep(pz, c.arg<DAT_RMR_HANDLE *>(&handle_out, {nullptr}));
         }},
        {"dat_rmr_query", 1, 1,
         [](Call &c, World &) {
             DAT_RMR_HANDLE rmr = c.h(K::Rmr);
             return dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, c.arg<DAT_RMR_PARAM *>(&rmr_param, {nullptr}));
         }},
        {"dat_rmr_bind", 3, 3,
         [=](Call &c, World &w) {
             DAT_RMR_HANDLE rmr = c.h(K::Rmr);
             // NULL: the LMR the triplet's lmr_context names (OFED's DAT 2.0; core/rmr.cpp).
             DAT_LMR_HANDLE lmr = c.h(K::Lmr, true);
             const DAT_LMR_TRIPLET *segs = c.arg<const DAT_LMR_TRIPLET *>(iov(w), {nullptr});
             auto va_type = c.arg(DAT_VA_TYPE_VA, {as<DAT_VA_TYPE>(0x77)});
             DAT_EP_HANDLE ep = c.h(K::Ep);
             DAT_RMR_COOKIE ck;
             ck.as_64 = c.r64();
             return dat_rmr_bind(rmr, lmr, segs, DAT_MEM_PRIV_REMOTE_READ_FLAG, va_type, ep, ck, kGoodCompletion,
                                 c.arg<DAT_RMR_CONTEXT *>(&rctx, {nullptr}));
         }},
        {"dat_rmr_free", 1, 0, [](Call &c, World &) { return dat_rmr_free(c.h(K::Rmr)); }},
        // ---- service points ------------------------------------------------------------
        {"dat_psp_create", 2, 2,
         [](Call &c, World &w) {
             DAT_IA_HANDLE ia = c.h(K::Ia);
             DAT_EVD_HANDLE evd = c.h(K::EvdCr);
             auto flags = c.arg(DAT_PSP_CONSUMER_FLAG, {as<DAT_PSP_FLAGS>(0x55)});
             return dat_psp_create(ia, w.unused_qual, evd, flags, c.arg<DAT_PSP_HANDLE *>(&handle_out, {nullptr}));
         }},
        {"dat_psp_create_any", 2, 3,
         [](Call &c, World &) {
             DAT_IA_HANDLE ia = c.h(K::Ia);
             DAT_CONN_QUAL *q = c.arg<DAT_CONN_QUAL *>(&qual_out, {nullptr});
             DAT_EVD_HANDLE evd = c.h(K::EvdCr);
             auto flags = c.arg(DAT_PSP_CONSUMER_FLAG, {as<DAT_PSP_FLAGS>(0x55)});
             return dat_psp_create_any(ia, q, evd, flags, c.arg<DAT_PSP_HANDLE *>(&handle_out, {nullptr}));
         }},
        {"dat_psp_query", 1, 1,
         [](Call &c, World &) {
             DAT_PSP_HANDLE psp = c.h(K::Psp);
             return dat_psp_query(psp, DAT_PSP_FIELD_ALL, c.arg<DAT_PSP_PARAM *>(&psp_param, {nullptr}));
         }},
        {"dat_psp_free", 1, 0, [](Call &c, World &) { return dat_psp_free(c.h(K::Psp)); }},
        {"dat_rsp_create", 3, 1,
         [](Call &c, World &w) {
             DAT_IA_HANDLE ia = c.h(K::Ia);
             DAT_EP_HANDLE ep = c.h(K::Ep, true); // NULL: a provider-created EP (dat_rsp_create(3DAT))
             DAT_EVD_HANDLE evd = c.h(K::EvdCr);
             return dat_rsp_create(ia, w.unused_qual, ep, evd, c.arg<DAT_RSP_HANDLE *>(&handle_out, {nullptr}));
         }},
        {"dat_rsp_query", 1, 1,
         [](Call &c, World &) {
             DAT_RSP_HANDLE rsp = c.h(K::Rsp);
             return dat_rsp_query(rsp, DAT_RSP_FIELD_ALL, c.arg<DAT_RSP_PARAM *>(&rsp_param, {nullptr}));
         }},
        {"dat_rsp_free", 1, 0, [](Call &c, World &) { return dat_rsp_free(c.h(K::Rsp)); }},
        {"dat_csp_create", 2, 2,
         [](Call &c, World &w) {
             DAT_IA_HANDLE ia = c.h(K::Ia);
             auto addr = c.arg<DAT_IA_ADDRESS_PTR>(w.addr.ptr(),
                                                   {nullptr, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&bad_family)});
             DAT_EVD_HANDLE evd = c.h(K::EvdCr);
             return dat_csp_create(ia, &comm, addr, evd, c.arg<DAT_CSP_HANDLE *>(&handle_out, {nullptr}));
         }},
        {"dat_csp_query", 1, 1,
         [](Call &c, World &) {
             DAT_CSP_HANDLE csp = c.h(K::Csp);
             return dat_csp_query(csp, DAT_CSP_FIELD_ALL, c.arg<DAT_CSP_PARAM *>(&csp_param, {nullptr}));
         }},
        {"dat_csp_free", 1, 0, [](Call &c, World &) { return dat_csp_free(c.h(K::Csp)); }},
        // ---- PZ ------------------------------------------------------------------------
        {"dat_pz_create", 1, 1,
         [](Call &c, World &) {
             DAT_IA_HANDLE ia = c.h(K::Ia);
             return dat_pz_create(ia, c.arg<DAT_PZ_HANDLE *>(&handle_out, {nullptr}));
         }},
        {"dat_pz_query", 1, 1,
         [](Call &c, World &) {
             DAT_PZ_HANDLE pz = c.h(K::Pz);
             return dat_pz_query(pz, DAT_PZ_FIELD_ALL, c.arg<DAT_PZ_PARAM *>(&pz_param, {nullptr}));
         }},
        {"dat_pz_free", 1, 0, [](Call &c, World &) { return dat_pz_free(c.h(K::Pz)); }},
        // ---- SRQ -----------------------------------------------------------------------
        {"dat_srq_create", 2, 2,
         [](Call &c, World &) {
             thread_local DAT_SRQ_ATTR good_attr, bad_attr;
             good_attr = DAT_SRQ_ATTR{16, 1, 0};
             bad_attr = DAT_SRQ_ATTR{-1, -1, -1};
             DAT_IA_HANDLE ia = c.h(K::Ia);
             DAT_PZ_HANDLE pz = c.h(K::Pz);
             DAT_SRQ_ATTR *attr = c.arg<DAT_SRQ_ATTR *>(&good_attr, {nullptr, &bad_attr});
             return dat_srq_create(ia, pz, attr, c.arg<DAT_SRQ_HANDLE *>(&handle_out, {nullptr}));
         }},
        {"dat_srq_free", 1, 0, [](Call &c, World &) { return dat_srq_free(c.h(K::Srq)); }},
        {"dat_srq_post_recv", 1, 2,
         [=](Call &c, World &w) {
             DAT_SRQ_HANDLE srq = c.h(K::Srq);
             DAT_COUNT n = c.arg<DAT_COUNT>(1, {-1, INT_MIN, kHugeCount});
             DAT_LMR_TRIPLET *segs = c.arg<DAT_LMR_TRIPLET *>(iov(w), {nullptr});
             return dat_srq_post_recv(srq, n, segs, cookie(c));
         }},
        {"dat_srq_query", 1, 1,
         [](Call &c, World &) {
             DAT_SRQ_HANDLE srq = c.h(K::Srq);
             return dat_srq_query(srq, DAT_SRQ_FIELD_ALL, c.arg<DAT_SRQ_PARAM *>(&srq_param, {nullptr}));
         }},
        {"dat_srq_resize", 1, 1,
         [](Call &c, World &) {
             DAT_SRQ_HANDLE srq = c.h(K::Srq);
             return dat_srq_resize(srq, c.arg<DAT_COUNT>(64, {-1, INT_MIN, kHugeCount}));
         }},
        {"dat_srq_set_lw", 1, 1,
         [](Call &c, World &) {
             // dat_srq_set_lw(3DAT): a low watermark above max_recv_dtos is invalid.
             DAT_SRQ_HANDLE srq = c.h(K::Srq);
             return dat_srq_set_lw(srq, c.arg<DAT_COUNT>(1, {kHugeCount}));
         }},
    };
    return e;
}

class HostileTest : public conformance::ConformanceTest {
protected:
    void SetUp() override {
        ConformanceTest::SetUp();
        w_.ia_name = GetParam();
        ASSERT_NO_FATAL_FAILURE(build_world());
    }
    void TearDown() override {
        if (w_.cr != DAT_HANDLE_NULL)
            dat_cr_reject(w_.cr, 0, nullptr);
        if (w_.csp != DAT_HANDLE_NULL)
            dat_csp_free(w_.csp);
        if (w_.ia != DAT_HANDLE_NULL)
            dat_ia_close(w_.ia, DAT_CLOSE_ABRUPT_FLAG);
        if (w_.ia2 != DAT_HANDLE_NULL)
            dat_ia_close(w_.ia2, DAT_CLOSE_ABRUPT_FLAG);
        ConformanceTest::TearDown();
    }

    void add_local(const conformance::LocalObjects &o, std::vector<DAT_HANDLE> *pools) {
        auto put = [&](K k, DAT_HANDLE h) {
            if (h != DAT_HANDLE_NULL)
                pools[static_cast<int>(k)].push_back(h);
        };
        put(K::Cno, o.cno);
        put(K::EvdSw, o.sw_evd);
        put(K::EvdDto, o.dto_evd);
        put(K::EvdConn, o.conn_evd);
        put(K::EvdCr, o.cr_evd);
        put(K::Pz, o.pz);
        put(K::Lmr, o.lmr);
        if (o.has_rmr)
            put(K::Rmr, o.rmr);
        put(K::Ep, o.ep);
        put(K::Ep, o.rsp_ep);
        put(K::Psp, o.psp);
        put(K::Rsp, o.rsp);
    }

    void build_world() {
        World &w = w_;
        const std::string &name = w.ia_name;
        // Every live object first, freed ones last: a freed arena slot is
        // reused only by an object made after it, so no freed handle can name
        // a live object (checked below).
        ASSERT_DAT_OK(dat_ia_open(conformance::ia_name_ptr(name), 8, &w.async_evd, &w.ia));
        ASSERT_NO_FATAL_FAILURE(w.o.create(w.ia));
        add_local(w.o, w.pool);
        w.pool[static_cast<int>(K::Ia)].push_back(w.ia);
        ASSERT_DAT_OK(conformance::ia_address(w.ia, &w.addr));
        DAT_PROVIDER_ATTR pa{};
        ASSERT_DAT_OK(conformance::query_ia(w.ia, nullptr, &pa));
        w.max_private_data = pa.max_private_data_size;
        {
            DAT_LMR_PARAM lp{};
            ASSERT_DAT_OK(dat_lmr_query(w.o.lmr, DAT_LMR_FIELD_ALL, &lp));
            w.lmr_context = lp.lmr_context;
        }
        ASSERT_DAT_OK(dat_ep_query(w.o.ep, DAT_EP_FIELD_ALL, &w.ep_param));
        w.unused_qual = unused_qual(w.ia, w.o.cr_evd);

        DAT_SRQ_ATTR sa{16, 1, 0};
        DAT_RETURN r = dat_srq_create(w.ia, w.o.pz, &sa, &w.srq);
        if (r == DAT_SUCCESS)
            w.live(K::Srq).push_back(w.srq);
        else
            std::printf("hostile: no SRQ on %s (%s): SRQ calls get only invalid SRQ handles\n", name.c_str(),
                        ret_text(r).c_str());
        conformance::IaAddress csp_addr = w.addr;
        kit_port(csp_addr, static_cast<std::uint16_t>(unused_qual(w.ia, w.o.cr_evd)));
        DAT_COMM comm{};
        r = dat_csp_create(w.ia, &comm, csp_addr.ptr(), w.o.cr_evd, &w.csp);
        if (r == DAT_SUCCESS)
            w.live(K::Csp).push_back(w.csp);
        else
            std::printf("hostile: no CSP on %s (%s): CSP calls get only invalid CSP handles\n", name.c_str(),
                        ret_text(r).c_str());

        // A connection request left pending on the PSP: a live CR handle.
        ASSERT_DAT_OK(dat_ep_create(w.ia, w.o.pz, w.o.dto_evd, w.o.dto_evd, w.o.conn_evd, nullptr, &w.cep));
        ASSERT_DAT_OK(conformance::connect_ep(w.cep, w.addr.ptr(), w.o.psp_qual, 300'000'000));
        DAT_EVENT cev{};
        ASSERT_TRUE(conformance::wait_event(w.o.cr_evd, DAT_CONNECTION_REQUEST_EVENT, &cev));
        w.cr = cev.event_data.cr_arrival_event_data.cr_handle;
        w.live(K::Cr).push_back(w.cr);
        w.live(K::Ep).push_back(w.cep);

        // IA 2: live objects of every kind on another IA.
        ASSERT_DAT_OK(dat_ia_open(conformance::ia_name_ptr(name), 8, &w.async_evd2, &w.ia2));
        ASSERT_NO_FATAL_FAILURE(w.o2.create(w.ia2));
        add_local(w.o2, w.foreign);
        for (DAT_IA_HANDLE ia : {w.ia, w.ia2})
            w.live_ia_numbers.insert(reinterpret_cast<std::uintptr_t>(ia));

        // Header words of live objects, and the provider table.
        for (int k = 0; k < static_cast<int>(K::Any); ++k)
            for (DAT_HANDLE h : w.pool[k]) {
                if (static_cast<K>(k) == K::Ia)
                    continue;
                std::array<unsigned char, 32> hdr;
                std::memcpy(hdr.data(), h, hdr.size());
                w.headers.push_back(hdr);
            }
        std::memcpy(&w.provider, w.o.pz, sizeof w.provider);

        // Freed handles: a second connection request, rejected; objects of
        // every kind freed; an IA closed abruptly with its objects.
        ASSERT_DAT_OK(dat_ep_create(w.ia, w.o.pz, w.o.dto_evd, w.o.dto_evd, w.o.conn_evd, nullptr, &w.cep2));
        w.live(K::Ep).push_back(w.cep2);
        ASSERT_DAT_OK(conformance::connect_ep(w.cep2, w.addr.ptr(), w.o.psp_qual, 300'000'000));
        ASSERT_TRUE(conformance::wait_event(w.o.cr_evd, DAT_CONNECTION_REQUEST_EVENT, &cev));
        DAT_CR_HANDLE dead_cr = cev.event_data.cr_arrival_event_data.cr_handle;
        ASSERT_DAT_OK(dat_cr_reject(dead_cr, 0, nullptr));
        w.freed.push_back(dead_cr);
        conformance::LocalObjects dead;
        ASSERT_NO_FATAL_FAILURE(dead.create(w.ia));
        ASSERT_NO_FATAL_FAILURE(dead.destroy());
        for (const auto &x : dead.all())
            w.freed.push_back(x.handle);
        DAT_EVD_HANDLE async3 = DAT_HANDLE_NULL;
        ASSERT_DAT_OK(dat_ia_open(conformance::ia_name_ptr(name), 8, &async3, &w.closed_ia));
        {
            conformance::LocalObjects on_closed;
            ASSERT_NO_FATAL_FAILURE(on_closed.create(w.closed_ia));
            for (const auto &x : on_closed.all())
                w.freed.push_back(x.handle);
        }
        w.freed.push_back(async3);
        ASSERT_DAT_OK(dat_ia_close(w.closed_ia, DAT_CLOSE_ABRUPT_FLAG));

        std::set<DAT_HANDLE> live;
        for (int k = 0; k < static_cast<int>(K::Count); ++k) {
            live.insert(w.pool[k].begin(), w.pool[k].end());
            live.insert(w.foreign[k].begin(), w.foreign[k].end());
        }
        for (DAT_HANDLE h : w.freed)
            ASSERT_EQ(live.count(h), 0u) << "a freed handle names a live object";
    }

    static DAT_CONN_QUAL unused_qual(DAT_IA_HANDLE ia, DAT_EVD_HANDLE cr_evd) {
        DAT_CONN_QUAL q = 0;
        DAT_PSP_HANDLE p = DAT_HANDLE_NULL;
        EXPECT_DAT_OK(dat_psp_create_any(ia, &q, cr_evd, DAT_PSP_CONSUMER_FLAG, &p));
        EXPECT_DAT_OK(dat_psp_free(p));
        return q;
    }
    static void kit_port(conformance::IaAddress &a, std::uint16_t port) {
        if (a.storage.ss_family == AF_INET6)
            reinterpret_cast<sockaddr_in6 *>(&a.storage)->sin6_port = htons(port);
        else
            reinterpret_cast<sockaddr_in *>(&a.storage)->sin_port = htons(port);
    }

    // Every live object of IA 1 and IA 2 answers its query, and the pending
    // connection request is still there.
    void expect_all_alive() {
        for (auto *o : {&w_.o, &w_.o2})
            for (const auto &x : o->all()) {
                SCOPED_TRACE(x.what);
                EXPECT_DAT_OK(conformance::query_as(x.kind, x.handle));
            }
        EXPECT_DAT_OK(conformance::query_as(conformance::HandleKind::Cr, w_.cr));
        EXPECT_DAT_OK(conformance::query_as(conformance::HandleKind::Ep, w_.cep));
        if (w_.srq != DAT_HANDLE_NULL) {
            EXPECT_DAT_OK(conformance::query_as(conformance::HandleKind::Srq, w_.srq));
        }
        if (w_.csp != DAT_HANDLE_NULL) {
            DAT_CSP_PARAM p{};
            EXPECT_DAT_OK(dat_csp_query(w_.csp, DAT_CSP_FIELD_ALL, &p));
        }
        EXPECT_DAT_OK(conformance::query_as(conformance::HandleKind::Ia, w_.ia));
        EXPECT_DAT_OK(conformance::query_as(conformance::HandleKind::Ia, w_.ia2));
        // The software EVD still carries an event through.
        int marker = 0;
        DAT_EVENT se = conformance::software_event(&marker);
        conformance::drain(w_.o.sw_evd);
        EXPECT_DAT_OK(dat_evd_post_se(w_.o.sw_evd, &se));
        DAT_EVENT got{};
        EXPECT_DAT_OK(dat_evd_dequeue(w_.o.sw_evd, &got));
        EXPECT_EQ(got.event_data.software_event_data.pointer, &marker);
    }

    World w_;
};

// An error: a DAT error code, not success and not one of the "nothing yet"
// answers a valid call can get (an empty queue, an expired wait).
bool is_refusal(DAT_RETURN r) {
    const DAT_RETURN t = DAT_GET_TYPE(r);
    return t != DAT_SUCCESS && t != DAT_QUEUE_EMPTY && t != DAT_TIMEOUT_EXPIRED;
}

TEST_P(HostileTest, EveryCallRefusesInvalidHandlesAndArguments) {
    const char *seed_env = std::getenv("DAT2_HOSTILE_SEED");
    const std::uint64_t seed =
        seed_env && *seed_env ? std::strtoull(seed_env, nullptr, 0)
                              : static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    const char *calls_env = std::getenv("DAT2_HOSTILE_CALLS");
    const long calls = calls_env && *calls_env ? std::strtol(calls_env, nullptr, 0) : 20000;
    std::printf("hostile: seed %llu (DAT2_HOSTILE_SEED=%llu reproduces), %ld calls\n",
                static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed), calls);
    std::fflush(stdout);
    RecordProperty("seed", std::to_string(seed));

    std::mt19937_64 rng(seed);
    const std::vector<Entry> table = entries();
    alignas(64) unsigned char stack[2][128]; // forged and random handles point here

    std::map<std::string, std::array<long, 3>> per_fn; // bad handle, bad argument, fixed
    long by_category[static_cast<int>(Bad::Count)] = {};
    long made = 0, strict = 0, failures = 0;
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < calls; ++i) {
        const Entry &e = table[rng() % table.size()];
        Mode mode;
        if (e.nhandles == 0 && e.nargs == 0)
            mode = Mode::Fixed;
        else if (e.nargs == 0 || (e.nhandles > 0 && rng() % 10 < 6))
            mode = Mode::BadHandle;
        else
            mode = Mode::BadArg;
        const int target = mode == Mode::BadHandle ? static_cast<int>(rng() % e.nhandles)
                           : mode == Mode::BadArg  ? static_cast<int>(rng() % e.nargs)
                                                   : -1;
        const bool chaos = mode == Mode::BadHandle && (rng() & 1);
        Call c(w_, rng, mode, target, chaos, stack);
        const DAT_RETURN r = e.fn(c, w_);
        ++made;
        ASSERT_EQ(c.handles(), e.nhandles) << e.name << ": the table's handle count is wrong";
        ASSERT_EQ(c.args(), e.nargs) << e.name << ": the table's argument count is wrong";
        per_fn[e.name][static_cast<int>(mode)]++;
        if (mode == Mode::BadHandle)
            by_category[static_cast<int>(c.bad_category())]++;

        std::string what;
        if (!is_refusal(r)) {
            what = "accepted";
        } else if (DAT_GET_TYPE(r) == DAT_NOT_IMPLEMENTED && e.args_valid) {
            // Every slot of our provider table is filled: a call that reaches
            // one (a live handle of another type does) never meets the
            // table's DAT_NOT_IMPLEMENTED default.
            what = "answered DAT_NOT_IMPLEMENTED";
        } else if (mode == Mode::BadHandle && !chaos && target == 0 && e.args_valid &&
                   DAT_GET_TYPE(r) != DAT_INVALID_HANDLE) {
            // The handle the call dispatches on is bad, everything else is valid.
            what = "did not answer DAT_INVALID_HANDLE";
        }
        if (mode == Mode::BadHandle && !chaos && target == 0 && e.args_valid)
            ++strict;
        if (!what.empty()) {
            if (++failures <= 25) {
                std::string how = mode == Mode::BadHandle
                                      ? std::string("handle #") + std::to_string(target) + " " +
                                            bad_name(c.bad_category()) +
                                            (chaos ? ", other arguments random" : ", other arguments valid")
                                  : mode == Mode::BadArg ? "argument #" + std::to_string(target) + " out of range"
                                                         : "invalid by construction";
                ADD_FAILURE() << "call " << i << ": " << e.name << " (" << how << ") " << what << ": " << ret_text(r)
                              << " (seed " << seed << ")";
            }
        }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(failures, 0) << failures << " of " << made << " calls were not refused as they must be";

    // Every function was called in every mode it has.
    for (const Entry &e : table) {
        const auto &n = per_fn[e.name];
        if (e.nhandles == 0 && e.nargs == 0) {
            EXPECT_GT(n[2], 0) << e.name << " was never called";
        }
        if (e.nhandles > 0) {
            EXPECT_GT(n[0], 0) << e.name << " never got a bad handle";
        }
        if (e.nargs > 0) {
            EXPECT_GT(n[1], 0) << e.name << " never got a bad argument";
        }
    }
    std::printf("hostile: calls fuzzed: %ld (%zu functions) in %.2f s, %ld refused as required, %ld checked for "
                "DAT_INVALID_HANDLE exactly; bad handles by kind:",
                made, table.size(), secs, made - failures, strict);
    for (int b = 0; b < static_cast<int>(Bad::Count); ++b)
        std::printf(" %s %ld%s", bad_name(static_cast<Bad>(b)), by_category[b],
                    b + 1 < static_cast<int>(Bad::Count) ? "," : "\n");
    std::fflush(stdout);
    RecordProperty("calls_fuzzed", std::to_string(made));

    expect_all_alive();
}

INSTANTIATE_OVER_IAS(HostileTest);

} // namespace
