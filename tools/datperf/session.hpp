// SPDX-License-Identifier: BSD-3-Clause
// datperf's DAT side: owning holders of DAT handles, the IA, registered
// memory, waiting for events, the control connection, and the two roles.
//
// A session is two connections between client and server on one PSP: a
// control connection (small messages that announce each measurement and
// carry the memory each side exposes) and a data connection, which carries
// nothing but the measured traffic. Each connect carries 8 bytes of private
// data (magic, role) so that the server tells them (and conn-rate's
// endpoints) apart. The client drives; the server does what each control
// message asks.
#pragma once

#include "datperf.hpp"

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace datperf {

// ---- owning holders -------------------------------------------------------------

// One DAT handle, freed with Free when the holder goes. A failed free is
// ignored: the teardown of a benchmark must not hide the error that ended it.
template <DAT_RETURN (*Free)(DAT_HANDLE)> class Owned {
public:
    Owned() = default;
    Owned(const Owned &) = delete;
    Owned &operator=(const Owned &) = delete;
    Owned(Owned &&o) noexcept : h_(o.release()) {}
    Owned &operator=(Owned &&o) noexcept {
        if (this != &o) {
            reset();
            h_ = o.release();
        }
        return *this;
    }
    ~Owned() { reset(); }

    DAT_HANDLE get() const { return h_; }
    DAT_HANDLE *out() {
        reset();
        return &h_;
    }
    DAT_HANDLE release() {
        DAT_HANDLE h = h_;
        h_ = DAT_HANDLE_NULL;
        return h;
    }
    void reset() {
        if (h_ != DAT_HANDLE_NULL)
            Free(h_);
        h_ = DAT_HANDLE_NULL;
    }
    explicit operator bool() const { return h_ != DAT_HANDLE_NULL; }

private:
    DAT_HANDLE h_ = DAT_HANDLE_NULL;
};

using OwnedEvd = Owned<dat_evd_free>;
using OwnedEp = Owned<dat_ep_free>;
using OwnedLmr = Owned<dat_lmr_free>;
using OwnedPsp = Owned<dat_psp_free>;
using OwnedPz = Owned<dat_pz_free>;

// ---- time -------------------------------------------------------------------------

using Clock = std::chrono::steady_clock;
inline double us_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
}

// The timestamps of the measured loops. clock_gettime costs ~25 ns where the
// kernel's clocksource can be read from user space (the vDSO: tsc,
// kvm-clock), but ~1 us in a guest under emulation whose clocksource is the
// HPET (a system call and an emulated device read, measured in the rxe VM):
// two of them inside every round trip would be counted as the provider's
// latency. There the x86 time-stamp counter is read instead (rdtsc, ~35 ns in
// that VM, as perftest times its samples), and its ticks are converted with
// the rate measured against steady_clock over the phase. Chosen once per
// process (--timer): TSC when clock_gettime costs over 150 ns a call.
class SampleClock {
public:
    using Stamp = std::uint64_t;
    // `choice`: "auto", "clock" or "tsc" (options checked it). False with
    // *error when the TSC was asked for and this CPU has none.
    bool choose(const std::string &choice, std::string *error);
    bool tsc() const { return tsc_; }
    // "clock_gettime" or "TSC (clock_gettime costs 1.02 us a call here)".
    const std::string &description() const { return description_; }

    Stamp now() const {
#if defined(__x86_64__)
        if (tsc_)
            return __rdtsc();
#endif
        return static_cast<Stamp>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
    }
    // A phase's calibration: both clocks read at its start; us_per_tick()
    // reads them again and returns the microseconds of one Stamp tick over
    // the span between.
    struct Mark {
        Clock::time_point wall;
        Stamp stamp;
    };
    Mark mark() const { return Mark{Clock::now(), now()}; }
    double us_per_tick(const Mark &since) const;

private:
    bool tsc_ = false;
    std::string description_ = "clock_gettime";
};

// The process's sample clock (run_client chooses it).
SampleClock &sample_clock();

// ---- the IA -------------------------------------------------------------------------

class Ia {
public:
    Ia() = default;
    Ia(const Ia &) = delete;
    Ia &operator=(const Ia &) = delete;
    ~Ia();

    // dat_ia_open, dat_ia_query, one PZ. Throws Error naming the IA.
    void open(const std::string &name);
    DAT_IA_HANDLE get() const { return ia_; }
    DAT_PZ_HANDLE pz() const { return pz_.get(); }
    const std::string &name() const { return name_; }
    const DAT_IA_ATTR &attr() const { return attr_; }
    std::string vendor() const;
    // The IA's own address (ia_address_ptr), copied.
    DAT_IA_ADDRESS_PTR address() { return reinterpret_cast<DAT_IA_ADDRESS_PTR>(&address_); }
    std::string address_text() const;

private:
    std::string name_;
    DAT_IA_HANDLE ia_ = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async_evd_ = DAT_HANDLE_NULL;
    DAT_IA_ATTR attr_{};
    sockaddr_storage address_{};
    OwnedPz pz_;
};

std::string sockaddr_text(const sockaddr *sa);

// ---- registered memory ----------------------------------------------------------------

// Page-aligned memory registered as one LMR with every privilege.
class Memory {
public:
    Memory() = default;
    Memory(const Memory &) = delete;
    Memory &operator=(const Memory &) = delete;
    ~Memory();

    void create(Ia &ia, std::size_t len, const char *what);
    unsigned char *data() const { return data_; }
    std::size_t size() const { return len_; }
    DAT_LMR_TRIPLET iov(std::size_t off, std::size_t len) const {
        DAT_LMR_TRIPLET t;
        t.virtual_address = reinterpret_cast<std::uintptr_t>(data_ + off);
        t.segment_length = static_cast<DAT_SEG_LENGTH>(len);
        t.lmr_context = lmr_context_;
        return t;
    }
    DAT_RMR_CONTEXT rmr_context() const { return rmr_context_; }

private:
    unsigned char *data_ = nullptr;
    std::size_t len_ = 0;
    OwnedLmr lmr_;
    DAT_LMR_CONTEXT lmr_context_ = 0;
    DAT_RMR_CONTEXT rmr_context_ = 0;
};

// The peer's memory, as its HELLO described it.
struct RemoteRegion {
    std::uint64_t address = 0;
    std::uint64_t length = 0;
    DAT_RMR_CONTEXT rmr_context = 0;
    DAT_RMR_TRIPLET rmr(std::uint64_t off, std::uint64_t len) const {
        DAT_RMR_TRIPLET t;
        t.virtual_address = address + off;
        t.segment_length = static_cast<DAT_SEG_LENGTH>(len);
        t.rmr_context = rmr_context;
        return t;
    }
};

// ---- events ---------------------------------------------------------------------------

// The next event of an EVD, by dat_evd_dequeue busy-polling or dat_evd_wait,
// giving up with an Error after `timeout_s` without one.
class Events {
public:
    explicit Events(double timeout_s) : timeout_s_(timeout_s) {}
    void set_mode(Completion c) { mode_ = c; }
    Completion mode() const { return mode_; }

    void next(DAT_EVD_HANDLE evd, DAT_EVENT *ev, const char *waiting_for) {
        if (mode_ == Completion::Poll) {
            DAT_RETURN r = dat_evd_dequeue(evd, ev);
            if (r == DAT_SUCCESS)
                return;
            next_slow(evd, ev, waiting_for, r);
        } else {
            next_waiting(evd, ev, waiting_for, timeout_s_);
        }
    }
    // One dat_evd_dequeue: true with an event, false when the queue is empty.
    bool poll(DAT_EVD_HANDLE evd, DAT_EVENT *ev) {
        DAT_RETURN r = dat_evd_dequeue(evd, ev);
        if (r == DAT_SUCCESS)
            return true;
        if (DAT_GET_TYPE(r) != DAT_QUEUE_EMPTY)
            dat_check(r, "dat_evd_dequeue");
        return false;
    }
    // A busy wait's deadline. Its clock is first read at the first check,
    // after 4096 spins: a wait that ends sooner (every ping-pong iteration)
    // reads no clock, whose cost would count as latency (SampleClock). The
    // --timeout then runs from that first check.
    struct Spin {
        std::uint64_t count = 0;
        Clock::time_point since{};
    };
    // For loops that spin on something else than an EVD (memory): call once
    // per spin; every few thousand spins it checks the deadline.
    void spin(Spin &s, const char *waiting_for) {
        if ((++s.count & 0xfff) == 0)
            check_deadline(s, waiting_for);
    }
    // dat_evd_wait with its own timeout (0: infinite), whatever the mode.
    void next_waiting(DAT_EVD_HANDLE evd, DAT_EVENT *ev, const char *waiting_for, double timeout_s);
    void check_deadline(Spin &s, const char *waiting_for);

private:
    void next_slow(DAT_EVD_HANDLE evd, DAT_EVENT *ev, const char *waiting_for, DAT_RETURN first);

    double timeout_s_;
    Completion mode_ = Completion::Poll;
};

// ---- progress line ----------------------------------------------------------------------

class Progress {
public:
    explicit Progress(bool enabled) : enabled_(enabled) {}
    void start(const std::string &label, std::uint64_t total);
    void tick(std::uint64_t done) {
        if (enabled_ && (done & 63) == 0)
            tick_slow(done);
    }
    void finish();

private:
    void tick_slow(std::uint64_t done);
    bool enabled_;
    bool shown_ = false;
    std::string label_;
    std::uint64_t total_ = 0;
    Clock::time_point start_{}, last_{};
};

// ---- control messages --------------------------------------------------------------------

enum class Msg : std::uint32_t { Hello = 1, Run, Ready, Done, Quit, Bye };

// The steps of the scale workload, each a Run from the client (scale.cpp).
enum class ScaleOp : std::uint32_t { None = 0, Begin, Connect, Idle, Teardown, End };

// What one side of the scale workload tells the other about itself, in its
// Ready and Done messages.
struct ScaleReport {
    double cpu_pct;                               // Idle: over the sleep, % of one CPU
    double fds, rss_kib, heap_kib, heap_free_kib; // before the sleep, or after the batch
    double create_us, accept_us, free_us;         // Connect, Teardown: per call over the batch
    struct Thread {
        std::int32_t tid;
        std::int32_t main;
        float pct;
        char name[16];
    } threads[3]; // Idle: the busiest, over the sleep
};

// One control message; both hosts are assumed to share byte order.
struct CtrlMsg {
    std::uint32_t magic;
    Msg type;
    // Hello: the sender's data memory and limits.
    std::uint64_t mem_address;
    std::uint64_t mem_length;
    std::uint32_t rmr_context;
    std::uint32_t window; // client: --window; server: what it granted
    std::uint64_t max_size;
    std::uint32_t rdma_read_in; // RDMA reads the sender serves at once
    // Run: one measurement.
    Workload workload;
    Completion completion;
    std::uint64_t size;
    std::uint64_t iters;
    std::uint64_t warmup;
    std::uint32_t endpoints; // conn-rate: endpoints; scale: pairs of the batch (Begin: the most)
    ScaleOp op;              // scale: the step
    ScaleReport scale;       // scale: the sender's figures
};

constexpr std::uint32_t kCtrlMagic = 0x44505246; // "DPRF"

// Connection roles, in each connect's private data.
enum class ConnRole : std::uint32_t { Control = 1, Data = 2, ConnRate = 3, Scale = 4 };
struct ConnTag {
    std::uint32_t magic;
    ConnRole role;
};

// The control connection's endpoint: a ring of posted receives (reposted as
// each is consumed) and one send buffer; its own DTO EVD. Never on a
// measured path.
class Control {
public:
    static constexpr int kSlots = 8;
    void create(Ia &ia, DAT_EVD_HANDLE conn_evd, double timeout_s);
    DAT_EP_HANDLE ep() const { return ep_.get(); }
    void send(const CtrlMsg &m, Events &ev);
    // The next message; `expect` checks its type (Msg{}: any). Waits at
    // most `timeout_s` (0: forever; negative: the session's --timeout).
    CtrlMsg receive(Events &ev, Msg expect, const char *waiting_for, double timeout_s = -1);

private:
    void pump(Events &ev, const char *waiting_for, double timeout_s);
    void post_recv(int slot);

    Memory mem_; // kSlots receive slots, then the send slot
    OwnedEvd evd_;
    OwnedEp ep_;
    std::deque<CtrlMsg> received_;
    std::uint64_t sends_posted_ = 0, sends_done_ = 0;
    double timeout_s_ = 30;
};

// ---- connections ----------------------------------------------------------------------------

// Endpoint attributes within the IA's limits.
DAT_EP_ATTR endpoint_attr(const Ia &ia, std::uint64_t max_size, int recv_dtos, int request_dtos, int rdma_reads);

void connect_endpoint(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual, ConnRole role,
                      DAT_EVD_HANDLE conn_evd, Events &ev, double timeout_s);
// Waits for a connection request whose private data names `role` (a
// request of another role is an error); *cr_out is its handle.
// The request of a DAT_CONNECTION_REQUEST_EVENT, checked to be `role`'s.
DAT_CR_HANDLE request_of(const DAT_EVENT &e, ConnRole role);
void wait_request(DAT_EVD_HANDLE cr_evd, ConnRole role, Events &ev, double timeout_s, DAT_CR_HANDLE *cr_out);
void accept_request(DAT_CR_HANDLE cr, DAT_EP_HANDLE ep, DAT_EVD_HANDLE conn_evd, Events &ev, double timeout_s);

// ---- what the measured loops use ----------------------------------------------------------

// The data connection on one side: local memory is [0, max_size) to send
// from (and to be read by the peer), [max_size, 2 max_size) to receive
// into (and to be written by the peer); the peer's has the same layout.
struct DataPath {
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL; // request and receive completions
    Memory *mem = nullptr;
    RemoteRegion remote;
    std::uint64_t max_size = 0;
    int recv_depth = 1;    // receives posted at once
    int request_depth = 1; // requests outstanding at once
    int read_depth = 1;    // RDMA reads outstanding at once
    unsigned char *send_buf() const { return mem->data(); }
    unsigned char *recv_buf() const { return mem->data() + max_size; }
};

struct Phase {
    Workload workload = Workload::PingPong;
    Completion completion = Completion::Poll;
    std::uint64_t size = 0, iters = 0, warmup = 0;
    int window = 1;
    int endpoints = 0;
    ScaleOp op = ScaleOp::None;
};

// Everything a conn-rate or scale measurement needs from its session.
struct ConnRateSetup {
    Ia *ia = nullptr;
    DAT_EVD_HANDLE cr_evd = DAT_HANDLE_NULL; // server
    DAT_IA_ADDRESS_PTR server = nullptr;     // client
    DAT_CONN_QUAL qual = 0;                  // client
    double timeout_s = 30;
};

// workloads.cpp: one measurement on each side, the Run/Ready exchange and
// whatever else the workload needs on the control connection included.
Point client_phase(DataPath &d, Control &ctrl, Events &ev, const Phase &ph, Progress &progress,
                   const ConnRateSetup &cr);
void server_phase(DataPath &d, Control &ctrl, Events &ev, const Phase &ph, const ConnRateSetup &cr);

// scale.cpp: the scale workload. The client runs every step (the server
// follows its Run messages until ScaleOp::End) and returns the row with no
// pairs, one row per pair count, then the row after teardown.
std::vector<ScaleRow> client_scale(DataPath &d, Control &ctrl, Events &ev, const Options &opt, Progress &progress,
                                   const ConnRateSetup &cr);
void server_scale(DataPath &d, Control &ctrl, Events &ev, const Phase &begin, const ConnRateSetup &cr);

// ring.cpp: the ring workload's two sides.
Point client_ring(DataPath &d, Control &ctrl, Events &ev, const Phase &ph, Progress &progress);
void server_ring(DataPath &d, Control &ctrl, Events &ev, const Phase &ph);
CtrlMsg ctrl_message(Msg type);
CtrlMsg run_message(const Phase &ph);
Phase phase_of(const CtrlMsg &m);

// ---- the roles ----------------------------------------------------------------------------

// Serves one client session. `ready_fd` >= 0 (the one-command mode): the
// pipe that learns "<conn_qual>\n" once the PSP listens. Returns the exit
// status; errors are printed, prefixed "datperf (server):".
int run_server(const Options &opt, const std::string &ia_name, int ready_fd);

struct SessionResults {
    SessionInfo info;
    std::vector<TestResult> tests;
};

// What the client reports as it goes (each may be empty). on_point
// returns when the next measurement may start: the one-command mode runs
// the comparison peers for that size in between, while the session idles.
struct ClientHooks {
    std::function<void(const SessionInfo &)> on_info;
    std::function<void(const TestResult &)> on_test; // a workload starts (no points yet)
    std::function<void(const Point &)> on_point;
    std::function<void(const std::vector<ScaleRow> &)> on_scale; // scale's rows, at its end
};

// Connects to the server at `host` (empty: the IA's own address) and
// measures every workload and size of `opt`. Throws Error.
SessionResults run_client(const Options &opt, const std::string &ia_name, const std::string &host, DAT_CONN_QUAL qual,
                          const ClientHooks &hooks = ClientHooks());

// The dat.conf entries the registry lists (dat_registry_list_providers).
std::vector<std::string> registry_names();
// "a, b, c" (the first few, and how many more).
std::string names_text(const std::vector<std::string> &names);

} // namespace datperf
