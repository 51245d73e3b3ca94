// SPDX-License-Identifier: BSD-3-Clause
// The scale workload: what connections cost that sit idle, as an MPI job or
// a database cluster keeps one to every peer (issue 17).
//
// N pairs are connected in batches over the server's one PSP; each side
// binds all of its pair endpoints to one connection EVD and one DTO EVD, as
// such libraries set them up. The passive side creates each endpoint when
// its request arrives. At each count: the per-pair setup time of the batch
// that reached it, each process's CPU while both sleep, descriptors and
// resident memory, and the ping-pong of the data connection (its own EVDs)
// with the pairs around it. Then the pairs are torn down in the same
// batches, last connected first (dat_ep_disconnect, and dat_ep_free on each
// endpoint's DISCONNECTED event, on both sides), and the figures taken
// again with none left.
//
// The client drives, one Run per step (ScaleOp); the server answers Ready
// and, once the step is done on its side, Done with its own figures. With
// --self the client holds both ends of every pair, connected to itself
// through a PSP of its own whose requests arrive on the same connection EVD
// (one process, as issue 17's table was measured); the server then holds
// only the data connection, and its figures are those of a process without
// pairs.
#include "session.hpp"
#include "usage.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <unordered_map>

namespace datperf {

namespace {

// The time spent inside calls of one kind over a batch.
struct CallTimer {
    double total_us = 0;
    std::uint64_t calls = 0;

    template <typename Call> DAT_RETURN time(Call call) {
        const auto t0 = Clock::now();
        DAT_RETURN r = call();
        total_us += us_between(t0, Clock::now());
        ++calls;
        return r;
    }
    double per_call() const { return calls ? total_us / static_cast<double>(calls) : kNotMeasured; }
};

// "(812 descriptors open, limit 1024)": why a dat_ep_create may have failed.
std::string fd_context() {
    rlimit r{};
    std::string limit = getrlimit(RLIMIT_NOFILE, &r) == 0 ? std::to_string(r.rlim_cur) : "unknown";
    return std::to_string(open_fds()) + " descriptors open, limit " + limit;
}

// This process's descriptors and memory now; nothing else measured.
ScaleReport snapshot() {
    ScaleReport r;
    std::memset(&r, 0, sizeof r);
    r.cpu_pct = r.create_us = r.accept_us = r.free_us = kNotMeasured;
    r.fds = static_cast<double>(open_fds());
    r.rss_kib = rss_kib();
    const HeapUse h = heap_use();
    r.heap_kib = h.in_use_kib;
    r.heap_free_kib = h.free_kept_kib;
    return r;
}

void put_threads(ScaleReport *r, const std::vector<ThreadCpu> &threads) {
    constexpr std::size_t kMax = sizeof r->threads / sizeof r->threads[0];
    for (std::size_t i = 0; i < kMax && i < threads.size(); ++i) {
        auto &t = r->threads[i];
        t.tid = static_cast<std::int32_t>(threads[i].tid);
        t.main = threads[i].main ? 1 : 0;
        t.pct = static_cast<float>(threads[i].pct);
        std::strncpy(t.name, threads[i].name.c_str(), sizeof t.name - 1);
        t.name[sizeof t.name - 1] = '\0';
    }
}

std::vector<ThreadCpu> threads_of(const ScaleReport &r) {
    std::vector<ThreadCpu> out;
    for (const auto &t : r.threads)
        if (t.tid > 0)
            out.push_back(ThreadCpu{t.tid, std::string(t.name, strnlen(t.name, sizeof t.name)), t.main != 0, t.pct});
    return out;
}

// Both processes asleep for `seconds`: this one's CPU over the sleep, into
// *r (cpu_pct, threads).
void idle_measure(double seconds, ScaleReport *r) {
    if (seconds <= 0)
        return;
    const CpuSnapshot before = CpuSnapshot::take();
    sleep_for_seconds(seconds);
    const CpuSnapshot after = CpuSnapshot::take();
    r->cpu_pct = after.process_pct_since(before);
    put_threads(r, after.threads_since(before));
}

CtrlMsg message(Msg type, const ScaleReport &r) {
    CtrlMsg m = ctrl_message(type);
    m.scale = r;
    return m;
}

DAT_EVD_HANDLE no_evd() { return DAT_HANDLE_NULL; }

bool ends_connection(DAT_EVENT_NUMBER n) {
    return n == DAT_CONNECTION_EVENT_DISCONNECTED || n == DAT_CONNECTION_EVENT_BROKEN;
}

// The pair endpoints of one process and the EVDs they share. Active
// endpoints connect (the client's), passive ones are created for a request
// and accept it (the server's; with --self, the client holds both).
class PairSet {
public:
    PairSet(Ia &ia, std::size_t max_pairs, bool self, Events &ev, double timeout_s)
        : ia_(ia), self_(self), ev_(ev), timeout_s_(timeout_s) {
        // Room for every event a batch may leave queued: the passive side
        // takes all its requests before it dequeues the ESTABLISHED events;
        // with --self one EVD sees requests and both ends' events.
        DAT_COUNT qlen = static_cast<DAT_COUNT>((self ? 3 : 2) * max_pairs + 64);
        if (ia.attr().max_evd_qlen > 0)
            qlen = std::min(qlen, ia.attr().max_evd_qlen);
        const auto conn_flags =
            static_cast<DAT_EVD_FLAGS>(self ? DAT_EVD_CONNECTION_FLAG | DAT_EVD_CR_FLAG : DAT_EVD_CONNECTION_FLAG);
        DAT_RETURN r = dat_evd_create(ia.get(), qlen, no_evd(), conn_flags, conn_evd_.out());
        if (r != DAT_SUCCESS)
            dat_fail(r, "dat_evd_create",
                     self ? "scale --self: one EVD for connection requests and connection events"
                          : "scale: the pairs' connection EVD");
        dat_check(dat_evd_create(ia.get(), qlen, no_evd(), DAT_EVD_DTO_FLAG, dto_evd_.out()), "dat_evd_create");
        attr_ = endpoint_attr(ia, 64, 1, 1, 0);
        if (self)
            dat_check(dat_psp_create_any(ia.get(), &self_qual_, conn_evd_.get(), DAT_PSP_CONSUMER_FLAG, psp_.out()),
                      "dat_psp_create_any");
    }

    std::size_t active() const { return active_.size(); }
    std::size_t passive() const { return passive_.size(); }
    // --self: where the active endpoints connect.
    DAT_CONN_QUAL self_qual() const { return self_qual_; }

    CallTimer create, connect, disconnect, free, passive_create, accept, passive_free;
    void reset_timers() {
        for (CallTimer *t : {&create, &connect, &disconnect, &free, &passive_create, &accept, &passive_free})
            *t = CallTimer{};
    }

    // Active side: `k` more pairs to `server` at `qual`, at most `window`
    // connects outstanding; with --self their requests are accepted here too.
    void connect_batch(std::size_t k, std::size_t window, DAT_IA_ADDRESS_PTR server, DAT_CONN_QUAL qual,
                       Progress &progress) {
        ConnTag tag{kCtrlMagic, ConnRole::Scale};
        const auto connect_timeout = static_cast<DAT_TIMEOUT>(std::min(timeout_s_ * 1e6, 4e9));
        const std::size_t base = active_.size();
        std::size_t issued = 0, up = 0, passive_up = 0;
        const std::size_t passive_want = self_ ? k : 0;
        DAT_EVENT e;
        while (up < k || passive_up < passive_want) {
            while (issued < k && issued - up < window) {
                OwnedEp ep;
                DAT_RETURN r = create.time([&] {
                    return dat_ep_create(ia_.get(), ia_.pz(), dto_evd_.get(), dto_evd_.get(), conn_evd_.get(), &attr_,
                                         ep.out());
                });
                if (r != DAT_SUCCESS)
                    dat_fail(r, "dat_ep_create", pair_text(base + issued) + ", " + fd_context());
                r = connect.time([&] {
                    return dat_ep_connect(ep.get(), server, qual, connect_timeout, sizeof tag, &tag,
                                          DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
                });
                if (r != DAT_SUCCESS)
                    dat_fail(r, "dat_ep_connect", pair_text(base + issued) + ", " + fd_context());
                active_index_[ep.get()] = active_.size();
                active_.push_back(std::move(ep));
                ++issued;
            }
            ev_.next(conn_evd_.get(), &e, "a scale pair to be established");
            if (self_ && e.event_number == DAT_CONNECTION_REQUEST_EVENT) {
                accept_one(e);
                continue;
            }
            if (e.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
                throw Error("scale: connecting " + pair_text(base + up) + ": " + event_text(e) + " (" + fd_context() +
                            ")");
            if (active_index_.count(e.event_data.connect_event_data.ep_handle)) {
                ++up;
                progress.tick(up);
            } else if (self_ && passive_.count(e.event_data.connect_event_data.ep_handle)) {
                ++passive_up;
            } else {
                throw Error("scale: ESTABLISHED names an endpoint that is not one of the pairs");
            }
        }
    }

    // Passive side (the server): `k` requests from `cr_evd`, each given a
    // new endpoint, then their `k` ESTABLISHED events.
    void accept_batch(std::size_t k, DAT_EVD_HANDLE cr_evd) {
        DAT_EVENT e;
        for (std::size_t i = 0; i < k; ++i) {
            ev_.next(cr_evd, &e, "a scale pair's connection request");
            accept_one(e);
        }
        for (std::size_t i = 0; i < k; ++i) {
            ev_.next(conn_evd_.get(), &e, "an accepted scale pair to be established");
            if (e.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
                throw Error("scale: accepted pair " + std::to_string(passive_.size() - k + i + 1) +
                            " failed: " + event_text(e));
        }
    }

    // Active side: disconnects the last `k` pairs, at most `window` at once,
    // and frees each endpoint on its DISCONNECTED event (with --self the
    // passive ends too).
    void teardown_batch(std::size_t k, std::size_t window, Progress &progress) {
        if (k > active_.size())
            throw Error("scale: tearing down more pairs than are connected");
        const std::size_t end = active_.size();
        std::size_t issued = 0, down = 0, passive_down = 0;
        const std::size_t passive_want = self_ ? k : 0;
        DAT_EVENT e;
        while (down < k || passive_down < passive_want) {
            while (issued < k && issued - down < window) {
                DAT_EP_HANDLE ep = active_[end - 1 - issued].get();
                DAT_RETURN r = disconnect.time([&] { return dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG); });
                if (r != DAT_SUCCESS)
                    dat_fail(r, "dat_ep_disconnect", pair_text(end - 1 - issued));
                ++issued;
            }
            ev_.next(conn_evd_.get(), &e, "a scale pair to be disconnected");
            if (!ends_connection(e.event_number))
                throw Error("scale: expected a pair to close, got " + event_text(e));
            DAT_EP_HANDLE h = e.event_data.connect_event_data.ep_handle;
            auto a = active_index_.find(h);
            if (a != active_index_.end()) {
                DAT_EP_HANDLE ep = active_[a->second].release();
                active_index_.erase(a);
                dat_check(free.time([&] { return dat_ep_free(ep); }), "dat_ep_free");
                ++down;
                progress.tick(down);
            } else if (self_ && free_passive(h)) {
                ++passive_down;
            } else {
                throw Error("scale: " + event_text(e) + " names an endpoint that is not one of the pairs");
            }
        }
        active_.resize(end - k);
    }

    // Passive side (the server): frees `k` endpoints on their
    // DISCONNECTED events.
    void await_teardown(std::size_t k) {
        DAT_EVENT e;
        for (std::size_t i = 0; i < k; ++i) {
            ev_.next(conn_evd_.get(), &e, "a scale pair to be disconnected by the client");
            if (!ends_connection(e.event_number))
                throw Error("scale: expected a pair to close, got " + event_text(e));
            if (!free_passive(e.event_data.connect_event_data.ep_handle))
                throw Error("scale: " + event_text(e) + " names an endpoint that is not one of the pairs");
        }
    }

private:
    static std::string pair_text(std::size_t index) { return "scale pair " + std::to_string(index + 1); }

    void accept_one(const DAT_EVENT &e) {
        DAT_CR_HANDLE req = request_of(e, ConnRole::Scale);
        OwnedEp ep;
        DAT_RETURN r = passive_create.time([&] {
            return dat_ep_create(ia_.get(), ia_.pz(), dto_evd_.get(), dto_evd_.get(), conn_evd_.get(), &attr_,
                                 ep.out());
        });
        if (r != DAT_SUCCESS) {
            dat_cr_reject(req, 0, nullptr);
            dat_fail(r, "dat_ep_create", "accepting " + pair_text(passive_.size()) + ", " + fd_context());
        }
        r = accept.time([&] { return dat_cr_accept(req, ep.get(), 0, nullptr); });
        if (r != DAT_SUCCESS)
            dat_fail(r, "dat_cr_accept", pair_text(passive_.size()) + ", " + fd_context());
        DAT_EP_HANDLE h = ep.get();
        passive_.emplace(h, std::move(ep));
    }

    bool free_passive(DAT_EP_HANDLE h) {
        auto p = passive_.find(h);
        if (p == passive_.end())
            return false;
        DAT_EP_HANDLE ep = p->second.release();
        passive_.erase(p);
        dat_check(passive_free.time([&] { return dat_ep_free(ep); }), "dat_ep_free");
        return true;
    }

    Ia &ia_;
    const bool self_;
    Events &ev_;
    double timeout_s_;
    DAT_EP_ATTR attr_{};
    // Declared before the endpoints: freed after them.
    OwnedEvd conn_evd_, dto_evd_;
    OwnedPsp psp_;
    DAT_CONN_QUAL self_qual_ = 0;
    std::vector<OwnedEp> active_; // in connect order
    std::unordered_map<DAT_EP_HANDLE, std::size_t> active_index_;
    std::unordered_map<DAT_EP_HANDLE, OwnedEp> passive_;
};

// One step on the server: Run, then its Ready.
CtrlMsg request(Control &ctrl, Events &ev, const Phase &ph, const char *waiting_for) {
    ctrl.send(run_message(ph), ev);
    return ctrl.receive(ev, Msg::Ready, waiting_for);
}

Phase scale_phase(ScaleOp op, Completion c) {
    Phase ph;
    ph.workload = Workload::Scale;
    ph.completion = c;
    ph.op = op;
    return ph;
}

void fill_client(ScaleRow *row, const ScaleReport &r) {
    row->client_cpu_pct = r.cpu_pct;
    row->client_fds = r.fds;
    row->client_rss_kib = r.rss_kib;
    row->client_heap_kib = r.heap_kib;
    row->client_heap_free_kib = r.heap_free_kib;
    row->client_threads = threads_of(r);
}

void fill_server(ScaleRow *row, const ScaleReport &r) {
    row->server_cpu_pct = r.cpu_pct;
    row->server_fds = r.fds;
    row->server_rss_kib = r.rss_kib;
    row->server_heap_kib = r.heap_kib;
    row->server_heap_free_kib = r.heap_free_kib;
    row->server_threads = threads_of(r);
}

} // namespace

std::vector<ScaleRow> client_scale(DataPath &d, Control &ctrl, Events &ev, const Options &opt, Progress &progress,
                                   const ConnRateSetup &cr) {
    const bool self = opt.scale_self;
    const Completion mode = completion_for(opt, Workload::Scale);
    const std::vector<std::uint64_t> &counts = opt.pairs;
    const std::size_t window = static_cast<std::size_t>(std::clamp(opt.window, 1, 256));
    const std::string prefix = self ? "scale --self" : "scale";

    PairSet pairs(*cr.ia, counts.back(), self, ev, cr.timeout_s);
    Phase begin = scale_phase(ScaleOp::Begin, mode);
    begin.endpoints = self ? 0 : static_cast<int>(counts.back());
    begin.window = static_cast<int>(window);
    request(ctrl, ev, begin, "the server's Ready (scale)");
    DAT_IA_ADDRESS_PTR target = self ? cr.ia->address() : cr.server;
    const DAT_CONN_QUAL qual = self ? pairs.self_qual() : cr.qual;

    // Both processes asleep; each one's figures into the row.
    auto idle = [&](ScaleRow *row) {
        ScaleReport mine = snapshot();
        Phase ph = scale_phase(ScaleOp::Idle, mode);
        ph.size = static_cast<std::uint64_t>(opt.idle_s * 1000);
        request(ctrl, ev, ph, "the server's Ready (scale idle)");
        idle_measure(opt.idle_s, &mine);
        CtrlMsg done = ctrl.receive(ev, Msg::Done, "the server's Done (scale idle)", opt.idle_s + cr.timeout_s);
        fill_client(row, mine);
        fill_server(row, done.scale);
    };
    // The data connection's ping-pong, as the pingpong workload runs it.
    auto pingpong = [&](ScaleRow *row) {
        Phase pp;
        pp.workload = Workload::PingPong;
        pp.completion = opt.completion_forced ? opt.completion : Completion::Poll;
        pp.size = scale_pingpong_size(opt);
        pp.iters = iters_for(opt, Workload::Scale, pp.size);
        pp.warmup = warmup_for(opt, Workload::Scale, pp.iters);
        ev.set_mode(pp.completion);
        progress.start(prefix + ": ping-pong at " + std::to_string(static_cast<std::uint64_t>(row->pairs)) + " pairs",
                       pp.warmup + pp.iters);
        const Point p = client_phase(d, ctrl, ev, pp, progress, cr);
        progress.finish();
        ev.set_mode(mode);
        row->pp_median_us = p.median_us;
        row->pp_p99_us = p.p99_us;
        row->pp_min_us = p.min_us;
    };

    std::vector<ScaleRow> rows(counts.size() + 2);
    // The ping-pong first: what its first run allocates for good is then in
    // the figures with no pairs, which the idle step takes.
    pingpong(&rows[0]);
    idle(&rows[0]);
    std::uint64_t held = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
        ScaleRow &row = rows[i + 1];
        const std::uint64_t k = counts[i] - held;
        row.pairs = static_cast<double>(counts[i]);
        row.batch = static_cast<double>(k);
        Phase ph = scale_phase(ScaleOp::Connect, mode);
        ph.endpoints = static_cast<int>(k);
        if (!self)
            request(ctrl, ev, ph, "the server's Ready (scale connect)");
        pairs.reset_timers();
        progress.start(prefix + ": connecting pairs " + std::to_string(held + 1) + ".." + std::to_string(counts[i]), k);
        const auto t0 = Clock::now();
        pairs.connect_batch(k, window, target, qual, progress);
        ScaleReport server{};
        if (!self)
            server = ctrl.receive(ev, Msg::Done, "the server's Done (scale connect)").scale;
        const auto t1 = Clock::now();
        progress.finish();
        row.setup_us = us_between(t0, t1) / static_cast<double>(k);
        row.create_us = pairs.create.per_call();
        row.connect_us = pairs.connect.per_call();
        row.passive_create_us = self ? pairs.passive_create.per_call() : server.create_us;
        row.accept_us = self ? pairs.accept.per_call() : server.accept_us;
        held = counts[i];
        pingpong(&row);
        idle(&row);
    }
    for (std::size_t i = counts.size(); i-- > 0;) {
        ScaleRow &row = rows[i + 1];
        const std::uint64_t k = counts[i] - (i ? counts[i - 1] : 0);
        Phase ph = scale_phase(ScaleOp::Teardown, mode);
        ph.endpoints = static_cast<int>(k);
        if (!self)
            request(ctrl, ev, ph, "the server's Ready (scale teardown)");
        pairs.reset_timers();
        progress.start(
            prefix + ": tearing down pairs " + std::to_string(counts[i]) + ".." + std::to_string(counts[i] - k + 1), k);
        const auto t0 = Clock::now();
        pairs.teardown_batch(k, window, progress);
        ScaleReport server{};
        if (!self)
            server = ctrl.receive(ev, Msg::Done, "the server's Done (scale teardown)").scale;
        const auto t1 = Clock::now();
        progress.finish();
        row.teardown_us = us_between(t0, t1) / static_cast<double>(k);
        row.disconnect_us = pairs.disconnect.per_call();
        row.free_us = pairs.free.per_call();
        row.passive_free_us = self ? pairs.passive_free.per_call() : server.free_us;
    }
    ScaleRow &after = rows.back();
    after.after = 1;
    pingpong(&after);
    idle(&after);
    // Last, as it changes what it measures: what malloc was keeping.
    after.server_rss_trimmed_kib =
        request(ctrl, ev, scale_phase(ScaleOp::End, mode), "the server's Ready (scale end)").scale.rss_kib;
    trim_heap();
    after.client_rss_trimmed_kib = rss_kib();
    return rows;
}

void server_scale(DataPath &d, Control &ctrl, Events &ev, const Phase &begin, const ConnRateSetup &cr) {
    if (begin.op != ScaleOp::Begin || begin.endpoints < 0 || begin.endpoints > kMaxPairs)
        throw Error("scale: the client asks for " + std::to_string(begin.endpoints) + " pairs");
    const Completion mode = begin.completion;
    std::unique_ptr<PairSet> pairs;
    if (begin.endpoints > 0) // --self: the client holds both ends
        pairs = std::make_unique<PairSet>(*cr.ia, static_cast<std::size_t>(begin.endpoints), false, ev, cr.timeout_s);
    ctrl.send(message(Msg::Ready, snapshot()), ev);
    auto need_pairs = [&](const Phase &ph) -> PairSet & {
        const std::size_t held = pairs ? pairs->passive() : 0;
        const bool fits = ph.op == ScaleOp::Connect ? pairs && held + static_cast<std::size_t>(ph.endpoints) <=
                                                                   static_cast<std::size_t>(begin.endpoints)
                                                    : pairs && static_cast<std::size_t>(ph.endpoints) <= held;
        if (ph.endpoints < 1 || !fits)
            throw Error("scale: the client's step names " + std::to_string(ph.endpoints) + " pairs; " +
                        std::to_string(held) + " are held of " + std::to_string(begin.endpoints));
        return *pairs;
    };
    for (;;) {
        // No deadline: the client runs its own steps in between.
        CtrlMsg m = ctrl.receive(ev, Msg::Run, "the client's next scale step", 0);
        const Phase ph = phase_of(m);
        if (ph.workload == Workload::PingPong) {
            ev.set_mode(ph.completion);
            server_phase(d, ctrl, ev, ph, cr);
            ev.set_mode(mode);
            continue;
        }
        if (ph.workload != Workload::Scale)
            throw Error("scale: the client asks for another workload in the middle");
        switch (ph.op) {
        case ScaleOp::Connect: {
            PairSet &p = need_pairs(ph);
            p.reset_timers();
            ctrl.send(ctrl_message(Msg::Ready), ev);
            p.accept_batch(static_cast<std::size_t>(ph.endpoints), cr.cr_evd);
            ScaleReport r = snapshot();
            r.create_us = p.passive_create.per_call();
            r.accept_us = p.accept.per_call();
            ctrl.send(message(Msg::Done, r), ev);
            break;
        }
        case ScaleOp::Idle: {
            ScaleReport r = snapshot();
            ctrl.send(ctrl_message(Msg::Ready), ev);
            idle_measure(static_cast<double>(ph.size) / 1000.0, &r);
            ctrl.send(message(Msg::Done, r), ev);
            break;
        }
        case ScaleOp::Teardown: {
            PairSet &p = need_pairs(ph);
            p.reset_timers();
            ctrl.send(ctrl_message(Msg::Ready), ev);
            p.await_teardown(static_cast<std::size_t>(ph.endpoints));
            ScaleReport r = snapshot();
            r.free_us = p.passive_free.per_call();
            ctrl.send(message(Msg::Done, r), ev);
            break;
        }
        case ScaleOp::End:
            pairs.reset();
            trim_heap();
            ctrl.send(message(Msg::Ready, snapshot()), ev);
            return;
        default: throw Error("scale: the client asks for an unknown step");
        }
    }
}

} // namespace datperf
