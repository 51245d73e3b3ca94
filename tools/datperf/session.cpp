// SPDX-License-Identifier: BSD-3-Clause
// The server and client sessions: the progress line, the data side of
// either role, and each role's loop over the workloads.
#include "session.hpp"

#include "session.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace datperf {

// ---- progress line ----------------------------------------------------------------------

void Progress::start(const std::string &label, std::uint64_t total) {
    label_ = label;
    total_ = total;
    shown_ = false;
    start_ = last_ = Clock::now();
}

void Progress::tick_slow(std::uint64_t done) {
    auto now = Clock::now();
    if (now - start_ < std::chrono::seconds(1) || now - last_ < std::chrono::milliseconds(250))
        return;
    last_ = now;
    shown_ = true;
    std::fprintf(stderr, "\rdatperf: %s: %llu/%llu (%.0f%%)   ", label_.c_str(), static_cast<unsigned long long>(done),
                 static_cast<unsigned long long>(total_),
                 total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0);
    std::fflush(stderr);
}

void Progress::finish() {
    if (shown_) {
        std::fprintf(stderr, "\r%*s\r", static_cast<int>(label_.size()) + 48, "");
        std::fflush(stderr);
    }
    shown_ = false;
}

// ---- the data side, either role ---------------------------------------------------------------

namespace {

// Receives posted at once: twice the window (the sender may run a window
// ahead of the receiver's reposting), at least 16.
int recv_depth_for(int window) { return std::max(16, 2 * window); }

// Creates the data endpoint on `evd_out` and fills the DataPath with what
// the provider granted (dat_ep_query).
void create_data_endpoint(Ia &ia, Memory &mem, std::uint64_t max_size, int window, DAT_EVD_HANDLE conn_evd,
                          OwnedEvd &evd_out, OwnedEp &ep_out, DataPath *d) {
    DAT_EP_ATTR want = endpoint_attr(ia, max_size, recv_depth_for(window), window + 1, window);
    dat_check(dat_evd_create(ia.get(), want.max_recv_dtos + want.max_request_dtos + 16, DAT_HANDLE_NULL,
                             DAT_EVD_DTO_FLAG, evd_out.out()),
              "dat_evd_create");
    DAT_RETURN r = dat_ep_create(ia.get(), ia.pz(), evd_out.get(), evd_out.get(), conn_evd, &want, ep_out.out());
    if (r != DAT_SUCCESS)
        dat_fail(r, "dat_ep_create",
                 "data endpoint: " + std::to_string(want.max_recv_dtos) + " receives, " +
                     std::to_string(want.max_request_dtos) + " requests, " + std::to_string(want.max_rdma_read_out) +
                     " RDMA reads, messages up to " + std::to_string(want.max_message_size) + " bytes");
    DAT_EP_PARAM got;
    std::memset(&got, 0, sizeof got);
    DAT_EP_ATTR granted = want;
    if (dat_ep_query(ep_out.get(), DAT_EP_FIELD_ALL, &got) == DAT_SUCCESS)
        granted = got.ep_attr;
    d->ep = ep_out.get();
    d->evd = evd_out.get();
    d->mem = &mem;
    d->max_size = max_size;
    d->recv_depth = std::max(1, std::min(granted.max_recv_dtos, want.max_recv_dtos));
    // One request slot is kept spare: the ping-pongs post the next message
    // before the completion of the previous one is reaped.
    d->request_depth = std::max(1, std::min(granted.max_request_dtos, want.max_request_dtos) - 1);
    d->read_depth = std::max(1, std::min(granted.max_rdma_read_out > 0 ? granted.max_rdma_read_out : window, window));
    if (granted.max_message_size < max_size)
        throw Error("the data endpoint takes messages up to " + std::to_string(granted.max_message_size) +
                    " bytes only; the largest size asked for is " + std::to_string(max_size));
}

CtrlMsg hello_of(const Memory &mem, std::uint64_t max_size, int window, int rdma_read_in) {
    CtrlMsg m = ctrl_message(Msg::Hello);
    m.mem_address = reinterpret_cast<std::uintptr_t>(mem.data());
    m.mem_length = mem.size();
    m.rmr_context = mem.rmr_context();
    m.max_size = max_size;
    m.window = static_cast<std::uint32_t>(window);
    m.rdma_read_in = static_cast<std::uint32_t>(rdma_read_in);
    return m;
}

RemoteRegion remote_of(const CtrlMsg &hello) {
    RemoteRegion r;
    r.address = hello.mem_address;
    r.length = hello.mem_length;
    r.rmr_context = hello.rmr_context;
    return r;
}

int granted_read_in(DAT_EP_HANDLE ep, int fallback) {
    DAT_EP_PARAM p;
    std::memset(&p, 0, sizeof p);
    if (dat_ep_query(ep, DAT_EP_FIELD_ALL, &p) == DAT_SUCCESS && p.ep_attr.max_rdma_read_in > 0)
        return p.ep_attr.max_rdma_read_in;
    return fallback;
}

} // namespace

// ---- server ---------------------------------------------------------------------------------------

int run_server(const Options &opt, const std::string &ia_name, int ready_fd) {
    const bool loopback = ready_fd >= 0;
    try {
        Events ev(opt.timeout_s);
        Ia ia; // first: everything below is freed before the IA closes
        ia.open(ia_name);
        OwnedEvd cr_evd, conn_evd;
        dat_check(dat_evd_create(ia.get(), 512, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, cr_evd.out()), "dat_evd_create");
        dat_check(dat_evd_create(ia.get(), 64, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, conn_evd.out()),
                  "dat_evd_create");
        OwnedPsp psp;
        DAT_CONN_QUAL qual = 0;
        if (opt.port >= 0) {
            qual = static_cast<DAT_CONN_QUAL>(opt.port);
            DAT_RETURN r = dat_psp_create(ia.get(), qual, cr_evd.get(), DAT_PSP_CONSUMER_FLAG, psp.out());
            if (r != DAT_SUCCESS)
                dat_fail(r, "dat_psp_create", "port " + std::to_string(qual) + " (in use?)");
        } else {
            dat_check(dat_psp_create_any(ia.get(), &qual, cr_evd.get(), DAT_PSP_CONSUMER_FLAG, psp.out()),
                      "dat_psp_create_any");
        }
        Control ctrl;
        ctrl.create(ia, conn_evd.get(), opt.timeout_s);
        if (loopback) {
            std::string line = std::to_string(qual) + "\n";
            if (write(ready_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
                throw Error("cannot tell the client the port");
            close(ready_fd);
        } else {
            std::printf("datperf server: %s (%s) on %s port %llu; waiting for a client\n", ia_name.c_str(),
                        ia.vendor().c_str(), ia.address_text().c_str(), static_cast<unsigned long long>(qual));
            std::fflush(stdout);
        }

        DAT_CR_HANDLE cr = DAT_HANDLE_NULL;
        wait_request(cr_evd.get(), ConnRole::Control, ev, loopback ? opt.timeout_s : 0, &cr);
        accept_request(cr, ctrl.ep(), conn_evd.get(), ev, opt.timeout_s);
        CtrlMsg hello = ctrl.receive(ev, Msg::Hello, "the client's Hello", opt.timeout_s);
        if (hello.max_size < 1 || hello.max_size > kMaxSize || hello.window < 1 || hello.window > 4096)
            throw Error("the client's Hello asks for sizes up to " + std::to_string(hello.max_size) +
                        " bytes with a window of " + std::to_string(hello.window) + ": out of range");

        Memory mem;
        mem.create(ia, 2 * hello.max_size, "data buffers");
        OwnedEvd data_evd;
        OwnedEp data_ep;
        DataPath d;
        create_data_endpoint(ia, mem, hello.max_size, static_cast<int>(hello.window), conn_evd.get(), data_evd, data_ep,
                             &d);
        d.remote = remote_of(hello);
        d.read_depth = std::min<int>(d.read_depth, static_cast<int>(std::max<std::uint32_t>(1, hello.rdma_read_in)));
        ctrl.send(hello_of(mem, hello.max_size, d.request_depth, granted_read_in(d.ep, d.read_depth)), ev);
        wait_request(cr_evd.get(), ConnRole::Data, ev, opt.timeout_s, &cr);
        accept_request(cr, d.ep, conn_evd.get(), ev, opt.timeout_s);

        ConnRateSetup crs;
        crs.ia = &ia;
        crs.cr_evd = cr_evd.get();
        crs.timeout_s = opt.timeout_s;
        for (;;) {
            // No deadline: between measurements the client may run the
            // comparison peers for a while; a client that goes away breaks
            // the control connection, which ends this wait.
            CtrlMsg m = ctrl.receive(ev, Msg{}, "the client's next request", 0);
            if (m.type == Msg::Quit) {
                ctrl.send(ctrl_message(Msg::Bye), ev);
                break;
            }
            if (m.type != Msg::Run)
                throw Error("control protocol: expected Run or Quit");
            const WorkloadInfo *known = nullptr;
            for (const auto &w : workloads())
                if (w.id == m.workload)
                    known = &w;
            if (!known)
                throw Error("the client asks for workload " + std::to_string(static_cast<unsigned>(m.workload)) +
                            ", which this datperf does not know");
            Phase ph = phase_of(m);
            if (known->sized && (ph.size < 1 || ph.size > hello.max_size))
                throw Error("the client asks for " + std::to_string(ph.size) + " bytes; its Hello said 1.." +
                            std::to_string(hello.max_size));
            ev.set_mode(ph.completion);
            server_phase(d, ctrl, ev, ph, crs);
        }
        if (!loopback)
            std::printf("datperf server: the client is done\n");
        return 0;
    } catch (const Error &e) {
        std::fprintf(stderr, "datperf (server): %s\n", e.what());
    } catch (const std::exception &e) {
        std::fprintf(stderr, "datperf (server): %s\n", e.what());
    }
    return 1;
}

// ---- client ---------------------------------------------------------------------------------------

namespace {

void resolve(const std::string &host, sockaddr_storage *out) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (rc != 0 || !res)
        throw Error("cannot resolve '" + host + "': " + gai_strerror(rc));
    std::memcpy(out, res->ai_addr, std::min<std::size_t>(res->ai_addrlen, sizeof *out));
    freeaddrinfo(res);
}

// A label for the progress line: "pingpong 4k".
std::string phase_label(const Phase &ph) {
    if (ph.workload == Workload::ConnRate)
        return std::string(info(ph.workload).name) + " " + std::to_string(ph.endpoints) + " endpoints";
    return std::string(info(ph.workload).name) + " " + size_text(ph.size);
}

} // namespace

SessionResults run_client(const Options &opt, const std::string &ia_name, const std::string &host, DAT_CONN_QUAL qual,
                          const ClientHooks &hooks) {
    Events ev(opt.timeout_s);
    Progress progress(opt.progress > 0);
    Ia ia; // first: everything below is freed before the IA closes
    ia.open(ia_name);
    OwnedEvd conn_evd;
    dat_check(dat_evd_create(ia.get(), 64, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, conn_evd.out()), "dat_evd_create");
    Control ctrl;
    ctrl.create(ia, conn_evd.get(), opt.timeout_s);

    sockaddr_storage server{};
    if (host.empty())
        std::memcpy(&server, ia.address(), sizeof server);
    else
        resolve(host, &server);
    auto server_addr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&server);
    connect_endpoint(ctrl.ep(), server_addr, qual, ConnRole::Control, conn_evd.get(), ev, opt.timeout_s);

    std::uint64_t max_size = 64;
    for (auto w : opt.workloads)
        if (info(w).sized)
            max_size = std::max(max_size, opt.sizes.back());
        else if (w == Workload::Scale)
            max_size = std::max(max_size, scale_pingpong_size(opt));
    Memory mem;
    mem.create(ia, 2 * max_size, "data buffers");
    OwnedEvd data_evd;
    OwnedEp data_ep;
    DataPath d;
    create_data_endpoint(ia, mem, max_size, opt.window, conn_evd.get(), data_evd, data_ep, &d);
    ctrl.send(hello_of(mem, max_size, opt.window, granted_read_in(d.ep, d.read_depth)), ev);
    CtrlMsg hello = ctrl.receive(ev, Msg::Hello, "the server's Hello", opt.timeout_s);
    d.remote = remote_of(hello);
    // Reads in flight are bounded by what we may issue and the server serves.
    d.read_depth = std::min<int>(d.read_depth, static_cast<int>(std::max<std::uint32_t>(1, hello.rdma_read_in)));
    connect_endpoint(d.ep, server_addr, qual, ConnRole::Data, conn_evd.get(), ev, opt.timeout_s);

    SessionResults out;
    std::string timer_error;
    if (!sample_clock().choose(opt.timer, &timer_error))
        throw Error(timer_error);
    out.info.timer = sample_clock().description();
    out.info.ia_name = ia_name;
    out.info.vendor = ia.vendor();
    out.info.ia_address = ia.address_text();
    out.info.server_address = sockaddr_text(reinterpret_cast<const sockaddr *>(&server));
    if (hooks.on_info)
        hooks.on_info(out.info);

    ConnRateSetup crs;
    crs.ia = &ia;
    crs.server = server_addr;
    crs.qual = qual;
    crs.timeout_s = opt.timeout_s;
    for (auto w : opt.workloads) {
        TestResult t;
        t.workload = w;
        t.completion = completion_for(opt, w);
        switch (w) {
        case Workload::PingPong:
        case Workload::WriteLat: t.window = 1; break;
        case Workload::WriteBw:
        case Workload::SendBw:
        case Workload::Ring: t.window = std::min(opt.window, d.request_depth); break;
        case Workload::ReadBw: t.window = std::min(opt.window, d.read_depth); break;
        case Workload::ConnRate:
        case Workload::Scale: t.window = std::min(opt.window, 256); break;
        }
        if (hooks.on_test)
            hooks.on_test(t);
        if (w == Workload::Scale) {
            ev.set_mode(t.completion);
            t.scale = client_scale(d, ctrl, ev, opt, progress, crs);
            if (hooks.on_scale)
                hooks.on_scale(t.scale);
            out.tests.push_back(std::move(t));
            continue;
        }
        std::vector<std::uint64_t> sizes = opt.sizes;
        if (!info(w).sized)
            sizes = {static_cast<std::uint64_t>(opt.endpoints)};
        for (auto size : sizes) {
            Phase ph;
            ph.workload = w;
            ph.completion = t.completion;
            ph.size = info(w).sized ? size : 0;
            ph.iters = iters_for(opt, w, size);
            ph.warmup = warmup_for(opt, w, ph.iters);
            ph.window = t.window;
            ph.endpoints = info(w).sized ? 0 : opt.endpoints;
            ev.set_mode(ph.completion);
            progress.start(phase_label(ph), ph.warmup + ph.iters);
            Point p = client_phase(d, ctrl, ev, ph, progress, crs);
            progress.finish();
            t.points.push_back(p);
            if (hooks.on_point)
                hooks.on_point(p);
        }
        out.tests.push_back(std::move(t));
    }
    ctrl.send(ctrl_message(Msg::Quit), ev);
    ctrl.receive(ev, Msg::Bye, "the server's Bye", opt.timeout_s);
    return out;
}

} // namespace datperf
