// SPDX-License-Identifier: BSD-3-Clause
// datperf's ring workload: the eager path of the MPIs written for uDAPL
// (MVAPICH2's RDMA fast path, Open MPI's eager RDMA). The client writes each
// message into the next slot of a ring in the server's receive half; the
// server finds it by watching the slot's last byte, never a receive
// completion, and hands slots back in batches by an RDMA write of one byte
// (a credit) that the client watches in turn. Each side reaps its own write
// completions by dat_evd_dequeue on the one EVD that takes both its request
// and receive completions, between looks at memory, as those progress
// engines do. What it measures is the message rate of that pattern: each
// write is a separate post, landing only where the target side's progress
// places it while its owner only reads memory.
#include "session.hpp"

#include <algorithm>

namespace datperf {

namespace {

constexpr DAT_UINT64 kRingWriteCookie = 0x52494e47; // "RING"

// A slot's last byte carries its message's mark, 1..255: never 0 (the
// cleared ring) and, with fewer than 255 slots, never the mark of the
// previous lap's message in the same slot.
inline unsigned char mark(std::uint64_t i) { return static_cast<unsigned char>(i % 255 + 1); }

// The ring: the window's worth of slots of one message each, as many as fit
// in the receive half (the largest --sizes, at least 64 B), fewer than 255.
std::uint64_t ring_slots(const DataPath &d, const Phase &ph) {
    const std::uint64_t fit = d.max_size / std::max<std::uint64_t>(1, ph.size);
    return std::clamp<std::uint64_t>(std::min<std::uint64_t>(static_cast<std::uint64_t>(ph.window), fit), 1, 254);
}

// Credits come back every half ring (at least every slot).
std::uint64_t credit_batch(std::uint64_t slots) { return std::max<std::uint64_t>(1, slots / 2); }

// The server's credit writes take their byte from one of these send-half
// positions in turn: a position is written again only long after its last
// write completed (at most kCreditsOut outstanding).
constexpr std::uint64_t kCreditSources = 64, kCreditsOut = 32;

void reap(DataPath &d, Events &ev, std::uint64_t &done, const char *who) {
    DAT_EVENT e;
    if (!ev.poll(d.evd, &e))
        return;
    if (e.event_number != DAT_DTO_COMPLETION_EVENT ||
        e.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS ||
        e.event_data.dto_completion_event_data.user_cookie.as_64 != kRingWriteCookie)
        throw Error(std::string(who) + ": " + event_text(e) + " where an RDMA-write completion was due");
    ++done;
}

void post_write(DataPath &d, std::uint64_t local_off, std::uint64_t remote_off, std::uint64_t len) {
    DAT_LMR_TRIPLET iov = d.mem->iov(local_off, len);
    DAT_RMR_TRIPLET rmr = d.remote.rmr(d.max_size + remote_off, len);
    DAT_DTO_COOKIE c;
    c.as_64 = kRingWriteCookie;
    dat_check(dat_ep_post_rdma_write(d.ep, 1, &iov, c, &rmr, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_rdma_write");
}

} // namespace

Point client_ring(DataPath &d, Control &ctrl, Events &ev, const Phase &ph, Progress &progress) {
    const std::uint64_t slots = ring_slots(d, ph), batch = credit_batch(slots);
    const auto depth = static_cast<std::uint64_t>(d.request_depth);
    volatile unsigned char *credit = d.recv_buf(); // the server's credit byte lands here
    *credit = 0;
    ctrl.send(run_message(ph), ev);
    ctrl.receive(ev, Msg::Ready, "the server's Ready");
    const std::uint64_t total = ph.warmup + ph.iters;
    std::uint64_t posted = 0, done = 0, rounds = 0;
    Clock::time_point t0 = Clock::now();
    for (std::uint64_t i = 0; i < total; ++i) {
        if (i == ph.warmup)
            t0 = Clock::now();
        Events::Spin spin;
        // A free slot (the server handed it back) and room on the endpoint.
        while (i - rounds * batch >= slots || posted - done >= depth) {
            // Credit rounds are counted modulo 255 in the byte; at most
            // slots / batch of them (2) can arrive between two looks.
            const unsigned v = *credit;
            rounds += (v % 255 + 255 - rounds % 255) % 255;
            reap(d, ev, done, "ring (client)");
            ev.spin(spin, "a credit from the ring's owner");
        }
        const std::uint64_t off = (i % slots) * ph.size;
        d.send_buf()[off + ph.size - 1] = mark(i);
        post_write(d, off, off, ph.size);
        ++posted;
        progress.tick(i);
    }
    Events::Spin spin;
    while (done < posted) {
        reap(d, ev, done, "ring (client)");
        ev.spin(spin, "the last RDMA-write completions");
    }
    ctrl.receive(ev, Msg::Done, "the server's Done (every message found in its ring)");
    const auto t1 = Clock::now();
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

void server_ring(DataPath &d, Control &ctrl, Events &ev, const Phase &ph) {
    const std::uint64_t slots = ring_slots(d, ph), batch = credit_batch(slots);
    const std::uint64_t out = std::min<std::uint64_t>(kCreditsOut, static_cast<std::uint64_t>(d.request_depth));
    std::fill(d.recv_buf(), d.recv_buf() + slots * ph.size, 0);
    ctrl.send(ctrl_message(Msg::Ready), ev);
    const std::uint64_t total = ph.warmup + ph.iters;
    std::uint64_t posted = 0, done = 0, round = 0;
    for (std::uint64_t j = 0; j < total; ++j) {
        volatile unsigned char *last = d.recv_buf() + (j % slots) * ph.size + ph.size - 1;
        Events::Spin spin;
        while (*last != mark(j)) {
            reap(d, ev, done, "ring (server)");
            ev.spin(spin, "the next message in the ring (its last byte)");
        }
        if ((j + 1) % batch != 0)
            continue;
        while (posted - done >= out) {
            reap(d, ev, done, "ring (server)");
            ev.spin(spin, "a credit write's completion");
        }
        const std::uint64_t src = round % kCreditSources;
        d.send_buf()[src] = mark(round);
        post_write(d, src, 0, 1);
        ++posted;
        ++round;
    }
    Events::Spin spin;
    while (done < posted) {
        reap(d, ev, done, "ring (server)");
        ev.spin(spin, "the last credit writes' completions");
    }
    ctrl.send(ctrl_message(Msg::Done), ev);
}

} // namespace datperf
