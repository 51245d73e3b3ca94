// SPDX-License-Identifier: BSD-3-Clause
// datperf's measured loops, client and server side of each workload.
//
// Every phase starts the same way: the client prepares what it needs, sends
// Run; the server prepares (posts its receives, clears its memory, creates
// endpoints) and answers Ready; then both run. Receives are counted exactly:
// over a phase each side posts as many as it will consume, so that nothing
// is left on the data endpoint for the next phase. The loops allocate
// nothing and make no DAT call but the post and the dequeue or wait.
#include "session.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace datperf {

namespace {

enum : DAT_UINT64 { kSendCookie = 1, kRecvCookie, kWriteCookie, kReadCookie };

inline DAT_DTO_COOKIE cookie(DAT_UINT64 v) {
    DAT_DTO_COOKIE c;
    c.as_64 = v;
    return c;
}

[[noreturn]] void bad_completion(const DAT_EVENT &e, const char *during) {
    throw Error(std::string(during) + ": " + event_text(e) +
                (e.event_number == DAT_DTO_COMPLETION_EVENT ? " (the connection broke?)" : ""));
}

// The cookie of a successful DTO completion; anything else ends the run.
inline DAT_UINT64 completed(const DAT_EVENT &e, const char *during) {
    if (__builtin_expect(e.event_number != DAT_DTO_COMPLETION_EVENT ||
                             e.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS,
                         0))
        bad_completion(e, during);
    return e.event_data.dto_completion_event_data.user_cookie.as_64;
}

constexpr DAT_COMPLETION_FLAGS kFlags = DAT_COMPLETION_DEFAULT_FLAG;

// Posting on the data endpoint with the triplets of one size.
struct Poster {
    DataPath &d;
    DAT_LMR_TRIPLET send_iov, recv_iov;
    DAT_RMR_TRIPLET peer_recv, peer_send;

    Poster(DataPath &dp, std::uint64_t size)
        : d(dp), send_iov(dp.mem->iov(0, size)), recv_iov(dp.mem->iov(dp.max_size, size)),
          peer_recv(dp.remote.rmr(dp.max_size, size)), peer_send(dp.remote.rmr(0, size)) {}
    void send() { dat_check(dat_ep_post_send(d.ep, 1, &send_iov, cookie(kSendCookie), kFlags), "dat_ep_post_send"); }
    // A send whose successful completion is not reported: the ping-pong's
    // (as ib_send_lat posts its sends unsignalled); the provider takes its
    // record back by itself, and a failure still comes as an event.
    void send_suppressed() {
        dat_check(dat_ep_post_send(d.ep, 1, &send_iov, cookie(kSendCookie), DAT_COMPLETION_SUPPRESS_FLAG),
                  "dat_ep_post_send");
    }
    void recv() { dat_check(dat_ep_post_recv(d.ep, 1, &recv_iov, cookie(kRecvCookie), kFlags), "dat_ep_post_recv"); }
    void write() {
        dat_check(dat_ep_post_rdma_write(d.ep, 1, &send_iov, cookie(kWriteCookie), &peer_recv, kFlags),
                  "dat_ep_post_rdma_write");
    }
    void read() {
        dat_check(dat_ep_post_rdma_read(d.ep, 1, &recv_iov, cookie(kReadCookie), &peer_send, kFlags),
                  "dat_ep_post_rdma_read");
    }
};

void ready(Control &ctrl, Events &ev) { ctrl.send(ctrl_message(Msg::Ready), ev); }

void start(Control &ctrl, Events &ev, const Phase &ph) {
    ctrl.send(run_message(ph), ev);
    ctrl.receive(ev, Msg::Ready, "the server's Ready");
}

// `samples`: round trips in SampleClock ticks; `first`, `last`: the measured
// span's ends; `cal`: the clocks at the phase's start.
Point latency_point(const Phase &ph, std::vector<double> &samples, SampleClock::Stamp first, SampleClock::Stamp last,
                    const SampleClock::Mark &cal) {
    const double us_per_tick = sample_clock().us_per_tick(cal);
    for (double &s : samples)
        s *= us_per_tick / 2; // one-way
    Point p;
    p.size = ph.size;
    p.iters = ph.iters;
    fill_latency(samples, &p);
    if (p.median_us > 0) {
        p.mb_s = static_cast<double>(ph.size) / p.median_us; // bytes per microsecond = 10^6 B/s
        p.msg_s = 1e6 / p.median_us;
    }
    p.seconds = static_cast<double>(last - first) * us_per_tick / 1e6;
    return p;
}

// ---- send/recv ping-pong ---------------------------------------------------------------

// Both sides: `initial` receives before the first message; one more after
// each consumed while fewer than `total` were posted.
struct RecvCredit {
    std::uint64_t posted = 0, total = 0;
    void prime(Poster &p, int depth) {
        while (posted < total && posted < static_cast<std::uint64_t>(depth)) {
            p.recv();
            ++posted;
        }
    }
    void replenish(Poster &p) {
        if (posted < total) {
            p.recv();
            ++posted;
        }
    }
};

Point client_pingpong(DataPath &d, Control &ctrl, Events &ev, const Phase &ph, Progress &progress) {
    Poster post(d, ph.size);
    const std::uint64_t total = ph.warmup + ph.iters;
    RecvCredit credit{0, total};
    std::vector<double> samples;
    samples.reserve(ph.iters);
    start(ctrl, ev, ph);
    credit.prime(post, d.recv_depth);
    DAT_EVENT e;
    const SampleClock &clock = sample_clock();
    const SampleClock::Mark cal = clock.mark();
    SampleClock::Stamp first = 0;
    for (std::uint64_t i = 0; i < total; ++i) {
        const SampleClock::Stamp t0 = clock.now();
        if (i == ph.warmup)
            first = t0;
        post.send_suppressed();
        ev.next(d.evd, &e, "the pong");
        if (completed(e, "pingpong") != kRecvCookie)
            bad_completion(e, "pingpong: a send completion, which was suppressed");
        const SampleClock::Stamp t1 = clock.now();
        if (i >= ph.warmup)
            samples.push_back(static_cast<double>(t1 - t0));
        credit.replenish(post);
        progress.tick(i);
    }
    const SampleClock::Stamp last = clock.now();
    return latency_point(ph, samples, first, last, cal);
}

void server_pingpong(DataPath &d, Control &ctrl, Events &ev, const Phase &ph) {
    Poster post(d, ph.size);
    const std::uint64_t total = ph.warmup + ph.iters;
    RecvCredit credit{0, total};
    credit.prime(post, d.recv_depth);
    ready(ctrl, ev);
    DAT_EVENT e;
    for (std::uint64_t i = 0; i < total; ++i) {
        ev.next(d.evd, &e, "the ping");
        if (completed(e, "pingpong (server)") != kRecvCookie)
            bad_completion(e, "pingpong (server): a send completion, which was suppressed");
        post.send_suppressed(); // answer first, replenish after: the pong leaves sooner
        credit.replenish(post);
    }
}

// ---- RDMA-write ping-pong ------------------------------------------------------------------

// Each side writes the whole message into the peer's receive half with a
// new value in its last byte (1..255, never the previous one), and waits for
// the peer's answer by watching the last byte of its own receive half. Both
// receive halves are cleared before the phase. Our own write completions
// are reaped while we watch.
struct WritePingPong {
    DataPath &d;
    Events &ev;
    Poster post;
    volatile unsigned char *incoming;
    unsigned char *outgoing;
    std::uint64_t posted = 0, done = 0;
    const std::uint64_t depth;

    WritePingPong(DataPath &dp, Events &events, std::uint64_t size)
        : d(dp), ev(events), post(dp, size), incoming(dp.recv_buf() + size - 1), outgoing(dp.send_buf() + size - 1),
          depth(static_cast<std::uint64_t>(dp.request_depth)) {}
    static unsigned char mark(std::uint64_t i) { return static_cast<unsigned char>(i % 255 + 1); }
    void write(unsigned char m) {
        DAT_EVENT e;
        while (posted - done >= depth) {
            ev.next(d.evd, &e, "an RDMA-write completion");
            completed(e, "write-lat");
            ++done;
        }
        *outgoing = m;
        post.write();
        ++posted;
    }
    void await(unsigned char m) {
        DAT_EVENT e;
        Events::Spin spin;
        while (*incoming != m) {
            if (ev.poll(d.evd, &e)) {
                completed(e, "write-lat");
                ++done;
            } else {
                ev.spin(spin, "the peer's RDMA write (last byte of the buffer)");
            }
        }
    }
    void drain() {
        DAT_EVENT e;
        while (done < posted) {
            ev.next(d.evd, &e, "an RDMA-write completion");
            completed(e, "write-lat");
            ++done;
        }
    }
};

Point client_write_lat(DataPath &d, Control &ctrl, Events &ev, const Phase &ph, Progress &progress) {
    std::memset(d.recv_buf(), 0, ph.size);
    WritePingPong pp(d, ev, ph.size);
    const std::uint64_t total = ph.warmup + ph.iters;
    std::vector<double> samples;
    samples.reserve(ph.iters);
    start(ctrl, ev, ph);
    const SampleClock &clock = sample_clock();
    const SampleClock::Mark cal = clock.mark();
    SampleClock::Stamp first = 0;
    for (std::uint64_t i = 0; i < total; ++i) {
        const unsigned char m = WritePingPong::mark(i);
        const SampleClock::Stamp t0 = clock.now();
        if (i == ph.warmup)
            first = t0;
        pp.write(m);
        pp.await(m);
        const SampleClock::Stamp t1 = clock.now();
        if (i >= ph.warmup)
            samples.push_back(static_cast<double>(t1 - t0));
        progress.tick(i);
    }
    const SampleClock::Stamp last = clock.now();
    pp.drain();
    return latency_point(ph, samples, first, last, cal);
}

void server_write_lat(DataPath &d, Control &ctrl, Events &ev, const Phase &ph) {
    std::memset(d.recv_buf(), 0, ph.size);
    WritePingPong pp(d, ev, ph.size);
    ready(ctrl, ev);
    const std::uint64_t total = ph.warmup + ph.iters;
    for (std::uint64_t i = 0; i < total; ++i) {
        const unsigned char m = WritePingPong::mark(i);
        pp.await(m);
        pp.write(m);
    }
    pp.drain();
}

// ---- streaming bandwidth -----------------------------------------------------------------

// `count` operations with at most `window` outstanding; returns when all completed.
template <typename PostFn>
void stream(DataPath &d, Events &ev, std::uint64_t count, int window, DAT_UINT64 kind, PostFn post_one,
            const char *name, Progress &progress, std::uint64_t progress_base) {
    std::uint64_t posted = 0, done = 0;
    const auto w = static_cast<std::uint64_t>(window);
    DAT_EVENT e;
    while (done < count) {
        while (posted < count && posted - done < w) {
            post_one();
            ++posted;
        }
        ev.next(d.evd, &e, "a completion");
        if (completed(e, name) != kind)
            bad_completion(e, name);
        ++done;
        progress.tick(progress_base + done);
    }
}

Point client_stream(DataPath &d, Control &ctrl, Events &ev, const Phase &ph, Progress &progress) {
    Poster post(d, ph.size);
    const char *name = info(ph.workload).name;
    start(ctrl, ev, ph);
    auto run = [&](std::uint64_t count, std::uint64_t base) {
        switch (ph.workload) {
        case Workload::WriteBw:
            stream(
                d, ev, count, ph.window, kWriteCookie, [&] { post.write(); }, name, progress, base);
            break;
        case Workload::ReadBw:
            stream(
                d, ev, count, ph.window, kReadCookie, [&] { post.read(); }, name, progress, base);
            break;
        default:
            stream(
                d, ev, count, ph.window, kSendCookie, [&] { post.send(); }, name, progress, base);
            break;
        }
    };
    run(ph.warmup, 0);
    const auto t0 = Clock::now();
    run(ph.iters, ph.warmup);
    const auto t1 = Clock::now();
    if (ph.workload == Workload::SendBw) // the server received everything
        ctrl.receive(ev, Msg::Done, "the server's Done");
    Point p;
    p.size = ph.size;
    p.iters = ph.iters;
    p.seconds = us_between(t0, t1) / 1e6;
    if (p.seconds > 0) {
        p.mb_s = static_cast<double>(ph.size) * static_cast<double>(ph.iters) / (p.seconds * 1e6);
        p.msg_s = static_cast<double>(ph.iters) / p.seconds;
    }
    return p;
}

void server_send_bw(DataPath &d, Control &ctrl, Events &ev, const Phase &ph) {
    Poster post(d, ph.size);
    const std::uint64_t total = ph.warmup + ph.iters;
    RecvCredit credit{0, total};
    credit.prime(post, d.recv_depth);
    ready(ctrl, ev);
    DAT_EVENT e;
    for (std::uint64_t got = 0; got < total; ++got) {
        ev.next(d.evd, &e, "a message");
        if (completed(e, "send (server)") != kRecvCookie)
            bad_completion(e, "send (server)");
        credit.replenish(post);
    }
    ctrl.send(ctrl_message(Msg::Done), ev);
}

// ---- connection rate --------------------------------------------------------------------------

// The endpoints of one conn-rate phase and their EVDs, on either side.
struct EndpointSet {
    OwnedEvd conn_evd, dto_evd; // declared first: freed after the endpoints
    std::vector<OwnedEp> eps;
    std::unordered_map<DAT_EP_HANDLE, std::size_t> index;

    EndpointSet(Ia &ia, int n) {
        dat_check(dat_evd_create(ia.get(), 2 * n + 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, conn_evd.out()),
                  "dat_evd_create");
        dat_check(dat_evd_create(ia.get(), 2 * n + 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, dto_evd.out()),
                  "dat_evd_create");
        DAT_EP_ATTR attr = endpoint_attr(ia, 64, 1, 1, 0);
        eps.resize(static_cast<std::size_t>(n));
        for (std::size_t i = 0; i < eps.size(); ++i) {
            DAT_RETURN r =
                dat_ep_create(ia.get(), ia.pz(), dto_evd.get(), dto_evd.get(), conn_evd.get(), &attr, eps[i].out());
            if (r != DAT_SUCCESS)
                dat_fail(r, "dat_ep_create",
                         "conn-rate endpoint " + std::to_string(i + 1) + " of " + std::to_string(n));
            index[eps[i].get()] = i;
        }
    }
    // Waits for `n` connection ends (DISCONNECTED or BROKEN).
    void await_ends(Events &ev, std::size_t n, double timeout_s) {
        DAT_EVENT e;
        for (std::size_t i = 0; i < n; ++i) {
            ev.next_waiting(conn_evd.get(), &e, "the conn-rate connections to close", timeout_s);
            if (e.event_number != DAT_CONNECTION_EVENT_DISCONNECTED && e.event_number != DAT_CONNECTION_EVENT_BROKEN)
                throw Error("conn-rate: expected the connections to close, got " + event_text(e));
        }
    }
};

Point client_conn_rate(Control &ctrl, Events &ev, const Phase &ph, Progress &progress, const ConnRateSetup &cr) {
    const auto n = static_cast<std::size_t>(ph.endpoints);
    EndpointSet set(*cr.ia, ph.endpoints);
    std::vector<Clock::time_point> started(n);
    std::vector<double> setup_us(n, 0.0);
    ConnTag tag{kCtrlMagic, ConnRole::ConnRate};
    const auto w = static_cast<std::size_t>(ph.window);
    const DAT_TIMEOUT connect_timeout = static_cast<DAT_TIMEOUT>(std::min(cr.timeout_s * 1e6, 4e9));
    start(ctrl, ev, ph);
    const auto t0 = Clock::now();
    std::size_t issued = 0, up = 0;
    DAT_EVENT e;
    while (up < n) {
        while (issued < n && issued - up < w) {
            started[issued] = Clock::now();
            DAT_RETURN r = dat_ep_connect(set.eps[issued].get(), cr.server, cr.qual, connect_timeout, sizeof tag, &tag,
                                          DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
            if (r != DAT_SUCCESS)
                dat_fail(r, "dat_ep_connect", "conn-rate endpoint " + std::to_string(issued + 1));
            ++issued;
        }
        ev.next(set.conn_evd.get(), &e, "a conn-rate connection to be established");
        const auto now = Clock::now();
        if (e.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
            throw Error("conn-rate: connection " + std::to_string(up + 1) + " of " + std::to_string(n) +
                        " failed: " + event_text(e));
        auto it = set.index.find(e.event_data.connect_event_data.ep_handle);
        if (it == set.index.end())
            throw Error("conn-rate: ESTABLISHED names an endpoint we do not know");
        setup_us[it->second] = us_between(started[it->second], now);
        ++up;
        progress.tick(up);
    }
    const auto t1 = Clock::now();
    ctrl.receive(ev, Msg::Done, "the server's Done (all accepted)");
    for (auto &ep : set.eps)
        dat_check(dat_ep_disconnect(ep.get(), DAT_CLOSE_GRACEFUL_FLAG), "dat_ep_disconnect");
    set.await_ends(ev, n, cr.timeout_s);
    ctrl.receive(ev, Msg::Done, "the server's Done (all closed)");

    Point p;
    p.size = n;
    p.iters = n;
    fill_latency(setup_us, &p);
    p.seconds = us_between(t0, t1) / 1e6;
    if (p.seconds > 0)
        p.msg_s = static_cast<double>(n) / p.seconds;
    return p;
}

void server_conn_rate(Control &ctrl, Events &ev, const Phase &ph, const ConnRateSetup &cr) {
    if (ph.endpoints < 1 || ph.endpoints > 10000)
        throw Error("conn-rate: the client asks for " + std::to_string(ph.endpoints) + " endpoints");
    const auto n = static_cast<std::size_t>(ph.endpoints);
    EndpointSet set(*cr.ia, ph.endpoints);
    ready(ctrl, ev);
    DAT_EVENT e;
    for (std::size_t i = 0; i < n; ++i) {
        ev.next(cr.cr_evd, &e, "a conn-rate connection request");
        DAT_CR_HANDLE req = request_of(e, ConnRole::ConnRate);
        dat_check(dat_cr_accept(req, set.eps[i].get(), 0, nullptr), "dat_cr_accept");
    }
    for (std::size_t i = 0; i < n; ++i) {
        ev.next(set.conn_evd.get(), &e, "a conn-rate connection to be established");
        if (e.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
            throw Error("conn-rate: accepted connection " + std::to_string(i + 1) + " failed: " + event_text(e));
    }
    ctrl.send(ctrl_message(Msg::Done), ev);
    set.await_ends(ev, n, cr.timeout_s);
    set.eps.clear();
    ctrl.send(ctrl_message(Msg::Done), ev);
}

} // namespace

Point client_phase(DataPath &d, Control &ctrl, Events &ev, const Phase &ph, Progress &progress,
                   const ConnRateSetup &cr) {
    switch (ph.workload) {
    case Workload::PingPong: return client_pingpong(d, ctrl, ev, ph, progress);
    case Workload::WriteLat: return client_write_lat(d, ctrl, ev, ph, progress);
    case Workload::WriteBw:
    case Workload::ReadBw:
    case Workload::SendBw: return client_stream(d, ctrl, ev, ph, progress);
    case Workload::ConnRate: return client_conn_rate(ctrl, ev, ph, progress, cr);
    case Workload::Scale: break; // run_client calls client_scale
    case Workload::Ring: return client_ring(d, ctrl, ev, ph, progress);
    }
    throw Error("unknown workload");
}

void server_phase(DataPath &d, Control &ctrl, Events &ev, const Phase &ph, const ConnRateSetup &cr) {
    switch (ph.workload) {
    case Workload::PingPong: server_pingpong(d, ctrl, ev, ph); return;
    case Workload::WriteLat: server_write_lat(d, ctrl, ev, ph); return;
    case Workload::WriteBw:
    case Workload::ReadBw: ready(ctrl, ev); return; // the target only exposes its memory
    case Workload::SendBw: server_send_bw(d, ctrl, ev, ph); return;
    case Workload::ConnRate: server_conn_rate(ctrl, ev, ph, cr); return;
    case Workload::Scale: server_scale(d, ctrl, ev, ph, cr); return;
    case Workload::Ring: server_ring(d, ctrl, ev, ph); return;
    }
    throw Error("the client asks for an unknown workload");
}

} // namespace datperf
