// SPDX-License-Identifier: BSD-3-Clause
// datperf-fi-bw: streaming bandwidth straight over libfabric reliable-datagram
// endpoints, the ceiling our RDM transport is held to (datperf --compare=fi_bw).
// fabtests' bandwidth programs are not packaged in Debian (libfabric-bin has
// fi_pingpong only), so this is the same measurement as datperf's streaming
// workloads with nothing between the program and libfabric: one buffer of
// SIZE bytes each side, WINDOW operations outstanding, completions read by
// busy-polling the one CQ, the clock around the measured operations' posts
// and completions at the initiator (the client).
//
//   datperf-fi-bw -p PROVIDER -o send|write|read -S SIZE -I ITERS [-W WINDOW] [-w WARMUP] [-D] [-O] -B PORT
//   datperf-fi-bw ... -P PORT HOST
//
// -B serves on TCP PORT (the out-of-band exchange of fabric addresses and
// the buffer's key), -P connects to it. -D and -O ask for what the RDM
// transport asks for (delivery-complete writes, sends ordered after sends
// and writes); without them the provider is free to take shorter paths. The client prints one line:
//   fi_bw: op=write size=65536 iters=4096 seconds=0.0123 MB/s=21800.5
// (MB/s is 10^6 bytes a second). The target of write and read only polls
// its CQ (shm executes some RMA in the target's progress) until the client
// says it is done. Exit status 0 measured, 1 a failure (said on stderr), 2
// bad usage.
#include "../common/shm_regions.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const char *what, long rc = 0) {
    if (rc)
        std::fprintf(stderr, "datperf-fi-bw: %s: %s (%ld)\n", what, fi_strerror(static_cast<int>(-rc)), rc);
    else
        std::fprintf(stderr, "datperf-fi-bw: %s\n", what);
    std::exit(1);
}

[[noreturn]] void usage(const char *why) {
    std::fprintf(stderr,
                 "datperf-fi-bw: %s\n"
                 "usage: datperf-fi-bw -p PROVIDER -o send|write|read -S SIZE -I ITERS [-W WINDOW] [-w WARMUP]\n"
                 "                     [-D] [-O]\n"
                 "                     (-B PORT | -P PORT HOST)\n",
                 why);
    std::exit(2);
}

void check(const char *what, long rc) {
    if (rc)
        die(what, rc);
}

// ---- the out-of-band exchange: a TCP connection --------------------------------------------

void write_all(int fd, const void *p, std::size_t n) {
    auto *c = static_cast<const char *>(p);
    while (n) {
        ssize_t w = ::write(fd, c, n);
        if (w <= 0)
            die("the out-of-band connection broke while writing");
        c += w;
        n -= static_cast<std::size_t>(w);
    }
}

void read_all(int fd, void *p, std::size_t n) {
    auto *c = static_cast<char *>(p);
    while (n) {
        ssize_t r = ::read(fd, c, n);
        if (r <= 0)
            die("the out-of-band connection closed early");
        c += r;
        n -= static_cast<std::size_t>(r);
    }
}

int serve(int port) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (ls < 0 || bind(ls, reinterpret_cast<sockaddr *>(&a), sizeof a) || listen(ls, 1))
        die(("cannot listen on TCP port " + std::to_string(port) + ": " + std::strerror(errno)).c_str());
    int s = accept(ls, nullptr, nullptr);
    close(ls);
    if (s < 0)
        die("accept failed");
    return s;
}

int dial(const char *host, int port) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, std::to_string(port).c_str(), &hints, &res) || !res)
        die((std::string("cannot resolve ") + host).c_str());
    int s = -1;
    for (int attempt = 0; attempt < 100 && s < 0; ++attempt) {
        s = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(s, res->ai_addr, res->ai_addrlen) == 0)
            break;
        close(s);
        s = -1;
        usleep(50000);
    }
    freeaddrinfo(res);
    if (s < 0)
        die(("cannot connect to " + std::string(host) + ":" + std::to_string(port)).c_str());
    int one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return s;
}

// What each side tells the other.
struct Card {
    std::uint32_t addrlen;
    std::uint8_t addr[256];
    std::uint64_t buf; // the address RMA names (0 where keys are offset-based)
    std::uint64_t key;
};

// ---- the fabric --------------------------------------------------------------------------

// -D: writes complete once they landed at the target (FI_DELIVERY_COMPLETE),
// as the RDM transport asks for them; else the provider's default.
bool delivery_complete = false;
// -O: sends ordered after sends and after writes (FI_ORDER_SAS | FI_ORDER_SAW),
// as the RDM transport asks for (DAT's rule that a send follows the writes
// posted before it); else no ordering. shm carries RMA by the target's
// progress once ordering is asked for, by the initiator alone otherwise.
bool ordered = false;

struct Fabric {
    fi_info *info = nullptr;
    fid_fabric *fabric = nullptr;
    fid_domain *domain = nullptr;
    fid_av *av = nullptr;
    fid_cq *cq = nullptr;
    fid_ep *ep = nullptr;
    fid_mr *mr = nullptr;
    void *desc = nullptr;
    fi_addr_t peer = FI_ADDR_UNSPEC;
    std::vector<fi_context2> ctx;
    std::size_t next_ctx = 0;

    void open(const char *provider, int window, void *buf, std::size_t size) {
        fi_info *hints = fi_allocinfo();
        hints->ep_attr->type = FI_EP_RDM;
        hints->caps = FI_MSG | FI_RMA;
        hints->mode = FI_CONTEXT | FI_CONTEXT2;
        hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
        hints->domain_attr->threading = FI_THREAD_DOMAIN;
        if (ordered)
            hints->tx_attr->msg_order = hints->rx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_SAW;
        hints->fabric_attr->prov_name = strdup(provider);
        check("fi_getinfo", fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &info));
        fi_freeinfo(hints);
        check("fi_fabric", fi_fabric(info->fabric_attr, &fabric, nullptr));
        check("fi_domain", fi_domain(fabric, info, &domain, nullptr));
        fi_av_attr av_attr{};
        av_attr.type = FI_AV_TABLE;
        check("fi_av_open", fi_av_open(domain, &av_attr, &av, nullptr));
        fi_cq_attr cq_attr{};
        cq_attr.format = FI_CQ_FORMAT_CONTEXT;
        cq_attr.size = static_cast<std::size_t>(window) * 4 + 64;
        check("fi_cq_open", fi_cq_open(domain, &cq_attr, &cq, nullptr));
        check("fi_endpoint", fi_endpoint(domain, info, &ep, nullptr));
        check("fi_ep_bind av", fi_ep_bind(ep, &av->fid, 0));
        check("fi_ep_bind cq", fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
        check("fi_enable", fi_enable(ep));
        check("fi_mr_reg", fi_mr_reg(domain, buf, size,
                                     FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 1,
                                     0, &mr, nullptr));
        desc = fi_mr_desc(mr);
        ctx.resize(static_cast<std::size_t>(window) * 2 + 8);
    }

    Card card(void *buf) {
        Card c{};
        std::size_t len = sizeof c.addr;
        check("fi_getname", fi_getname(&ep->fid, c.addr, &len));
        c.addrlen = static_cast<std::uint32_t>(len);
        c.buf = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<std::uint64_t>(buf) : 0;
        c.key = fi_mr_key(mr);
        return c;
    }

    void connect(const Card &other) {
        if (fi_av_insert(av, other.addr, 1, &peer, 0, nullptr) != 1)
            die("fi_av_insert of the peer's address failed");
    }

    void *context() {
        void *c = &ctx[next_ctx];
        next_ctx = (next_ctx + 1) % ctx.size();
        return c;
    }

    // Completions read (at most `max`), or dies on an error completion.
    int poll(int max) {
        fi_cq_entry e[16];
        ssize_t n = fi_cq_read(cq, e, static_cast<std::size_t>(max < 16 ? max : 16));
        if (n > 0)
            return static_cast<int>(n);
        if (n == -FI_EAGAIN)
            return 0;
        if (n == -FI_EAVAIL) {
            fi_cq_err_entry err{};
            fi_cq_readerr(cq, &err, 0);
            std::fprintf(stderr, "datperf-fi-bw: a completion failed: %s (%s)\n", fi_strerror(err.err),
                         fi_cq_strerror(cq, err.prov_errno, err.err_data, nullptr, 0));
            std::exit(1);
        }
        die("fi_cq_read", n);
    }

    ~Fabric() {
        if (mr)
            fi_close(&mr->fid);
        if (ep)
            fi_close(&ep->fid);
        if (cq)
            fi_close(&cq->fid);
        if (av)
            fi_close(&av->fid);
        if (domain)
            fi_close(&domain->fid);
        if (fabric)
            fi_close(&fabric->fid);
        if (info)
            fi_freeinfo(info);
    }
};

enum class Op { Send, Write, Read };

// Posts one operation, polling the CQ while the provider asks to retry;
// `done` counts the completions read meanwhile.
void post_one(Fabric &f, Op op, void *buf, std::size_t size, const Card &target, std::uint64_t *done) {
    const auto give_up = Clock::now() + std::chrono::seconds(30);
    // One context per operation, kept across -FI_EAGAIN retries: the ring
    // must not turn over onto contexts of operations still outstanding.
    void *ctx = f.context();
    for (;;) {
        ssize_t rc;
        switch (op) {
        case Op::Send: rc = fi_send(f.ep, buf, size, f.desc, f.peer, ctx); break;
        case Op::Write:
            if (delivery_complete) {
                iovec iov{buf, size};
                fi_rma_iov rma{target.buf, size, target.key};
                fi_msg_rma msg{&iov, &f.desc, 1, f.peer, &rma, 1, ctx, 0};
                rc = fi_writemsg(f.ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
            } else {
                rc = fi_write(f.ep, buf, size, f.desc, f.peer, target.buf, target.key, ctx);
            }
            break;
        default: rc = fi_read(f.ep, buf, size, f.desc, f.peer, target.buf, target.key, ctx); break;
        }
        if (rc == 0)
            return;
        if (rc != -FI_EAGAIN)
            die("posting an operation", rc);
        *done += static_cast<std::uint64_t>(f.poll(16));
        if (Clock::now() > give_up)
            die("the provider refused a post for 30 s");
    }
}

// `count` operations, at most `window` outstanding; returns when all completed.
void stream(Fabric &f, Op op, void *buf, std::size_t size, const Card &target, std::uint64_t count, int window) {
    std::uint64_t posted = 0, done = 0;
    auto last = Clock::now();
    while (done < count) {
        while (posted < count && posted - done < static_cast<std::uint64_t>(window)) {
            post_one(f, op, buf, size, target, &done);
            ++posted;
        }
        if (int n = f.poll(16)) {
            done += static_cast<std::uint64_t>(n);
            last = Clock::now();
        } else if (Clock::now() - last > std::chrono::seconds(30)) {
            die("no completion for 30 s");
        }
    }
}

// The receiving side of send: keeps `depth` receives posted until `total`
// messages arrived.
void receive(Fabric &f, void *buf, std::size_t size, std::uint64_t total, int depth) {
    std::uint64_t posted = 0, got = 0;
    auto last = Clock::now();
    auto post_recv = [&] {
        void *ctx = f.context();
        for (;;) {
            ssize_t rc = fi_recv(f.ep, buf, size, f.desc, f.peer, ctx);
            if (rc == 0)
                return;
            if (rc != -FI_EAGAIN)
                die("fi_recv", rc);
            got += static_cast<std::uint64_t>(f.poll(16));
        }
    };
    while (got < total) {
        while (posted < total && posted - got < static_cast<std::uint64_t>(depth)) {
            post_recv();
            ++posted;
        }
        if (int n = f.poll(16)) {
            got += static_cast<std::uint64_t>(n);
            last = Clock::now();
        } else if (Clock::now() - last > std::chrono::seconds(30)) {
            die("no message for 30 s");
        }
    }
}

// The target of write and read: progresses its endpoint until the client's
// byte arrives on the out-of-band connection.
void serve_memory(Fabric &f, int oob) {
    fcntl(oob, F_SETFL, fcntl(oob, F_GETFL) | O_NONBLOCK);
    char b;
    for (unsigned spin = 0;; ++spin) {
        f.poll(16);
        if ((spin & 1023) == 0) {
            ssize_t r = ::read(oob, &b, 1);
            if (r == 1 || r == 0)
                return;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                die("the out-of-band connection failed");
        }
    }
}

std::uint64_t number(const char *flag, const char *text) {
    char *end = nullptr;
    unsigned long long v = std::strtoull(text, &end, 10);
    if (!*text || *end)
        usage((std::string(flag) + " wants a number, not '" + text + "'").c_str());
    return v;
}

} // namespace

int main(int argc, char **argv) {
    const char *provider = nullptr, *host = nullptr;
    Op op = Op::Send;
    std::uint64_t size = 0, iters = 0, warmup = ~0ull;
    int window = 64, port = 0;
    bool server = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto arg = [&]() -> const char * {
            if (i + 1 >= argc)
                usage((a + " wants a value").c_str());
            return argv[++i];
        };
        if (a == "-p")
            provider = arg();
        else if (a == "-o") {
            std::string o = arg();
            op = o == "send"    ? Op::Send
                 : o == "write" ? Op::Write
                 : o == "read"  ? Op::Read
                                : (usage("-o: send, write or read"), Op::Send);
        } else if (a == "-S")
            size = number("-S", arg());
        else if (a == "-I")
            iters = number("-I", arg());
        else if (a == "-W")
            window = static_cast<int>(std::min<std::uint64_t>(number("-W", arg()), 1u << 20));
        else if (a == "-D")
            delivery_complete = true;
        else if (a == "-O")
            ordered = true;
        else if (a == "-w")
            warmup = number("-w", arg());
        else if (a == "-B") {
            port = static_cast<int>(std::min<std::uint64_t>(number("-B", arg()), 1u << 20));
            server = true;
        } else if (a == "-P") {
            port = static_cast<int>(std::min<std::uint64_t>(number("-P", arg()), 1u << 20));
            if (i + 1 >= argc)
                usage("-P PORT HOST");
            host = argv[++i];
        } else
            usage(("unknown argument '" + a + "'").c_str());
    }
    if (!provider || !size || !iters || !port || window < 1 || size > (64ull << 20))
        usage("-p, -S (1 B to 64 MiB), -I and -B or -P are needed");
    if (window > 65536 || port > 65535)
        usage("-W at most 65536, a port at most 65535");
    if (warmup == ~0ull)
        warmup = iters / 10 < 100 ? iters / 10 : 100;

    std::vector<char> buf(size, 'b');
    Fabric f;
    // As the ofi plugin does: regions killed processes left hold memory, and
    // one left under this pid would make shm refuse the endpoint (EBUSY).
    dat2::remove_shm_regions_of_dead_processes([](const char *) {});
    f.open(provider, window, buf.data(), buf.size());
    const int oob = server ? serve(port) : dial(host, port);
    Card mine = f.card(buf.data()), theirs{};
    write_all(oob, &mine, sizeof mine);
    read_all(oob, &theirs, sizeof theirs);
    if (theirs.addrlen > sizeof theirs.addr)
        die("the peer's fabric address is too long");
    f.connect(theirs);

    const std::uint64_t total = warmup + iters;
    char byte = 'd';
    if (server) {
        if (op == Op::Send) {
            receive(f, buf.data(), size, total, window * 2);
            write_all(oob, &byte, 1); // everything arrived
        } else {
            serve_memory(f, oob);
        }
        close(oob);
        return 0;
    }
    stream(f, op, buf.data(), size, theirs, warmup, window);
    const auto t0 = Clock::now();
    stream(f, op, buf.data(), size, theirs, iters, window);
    const auto t1 = Clock::now();
    if (op == Op::Send)
        read_all(oob, &byte, 1); // the server received everything
    else
        write_all(oob, &byte, 1);
    close(oob);
    const double s = std::chrono::duration<double>(t1 - t0).count();
    std::printf("fi_bw: op=%s size=%llu iters=%llu seconds=%.6f MB/s=%.1f\n",
                op == Op::Send ? "send" : op == Op::Write ? "write" : "read", static_cast<unsigned long long>(size),
                static_cast<unsigned long long>(iters), s, s > 0 ? static_cast<double>(size * iters) / s / 1e6 : 0.0);
    return 0;
}
