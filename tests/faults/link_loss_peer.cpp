// SPDX-License-Identifier: BSD-3-Clause
// One side of the link-loss test (tests/faults/link_loss.sh, issue 7): a
// server or a client, each in its own network namespace, streaming RDMA
// writes and sends to the other through the DAT API with receives posted,
// and checking every byte that arrives. The script takes the veth link
// between the namespaces down and up and drives this program through
// commands on its standard input; the program states what it saw on its
// standard output, one line per fact, for the script to judge.
//
//   link_loss_peer server|client IA_NAME SERVER_ADDRESS PORT
//
// Commands, one per line:
//   mark       prints "MARK", then "ADVANCED" once 20 more rounds were verified
//   hold       starts no new round; prints "HELD" once no request DTO is
//              outstanding (only the receives are)
//   burst      while held: posts kChunks RDMA writes (into a scratch area of
//              the peer's, never checked) and kMsgsPerRound sends at once
//   reconnect  after "BROKEN": one side resets its Endpoint (dat_ep_reset),
//              the other frees and recreates its own, alternating with each
//              connection; the server prints "READY", the client connects
//   finish     both sides stop after a common last round, say goodbye, the
//              client disconnects; prints "DONE" and exits 0
//
// Output lines begin with LISTENING, ESTABLISHED, MARK, ADVANCED, HELD,
// BURST, BROKEN, READY, DONE or FAIL (then the exit status is 1). Times are
// wall-clock milliseconds since the epoch, comparable with the script's
// `date +%s%3N`.
//
// A round: each side fills half of its source buffer with the round's
// pattern, writes it into the peer's target buffer (kChunks RDMA writes),
// then sends kMsgsPerRound messages; the last one tells the peer that the
// writes have landed (a send is ordered after the writes before it). A side
// finishes a round when its own DTOs completed and the peer's data of that
// round was verified; the peer's next round goes to the other half, so
// nothing is overwritten before it was checked. Every DTO has a cookie of
// its own: a completion for a cookie that is not outstanding (a second one,
// or one never posted) is a failure.
#include "connected.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>

using namespace conformance;

namespace {

constexpr std::size_t kChunk = 32 * 1024;
constexpr int kChunks = 16;                     // RDMA writes per round
constexpr std::size_t kHalf = kChunk * kChunks; // one round's data, per direction
constexpr std::size_t kTarget = 3 * kHalf;      // two halves for rounds, one scratch area for bursts
constexpr int kMsgsPerRound = 4;
constexpr std::size_t kMsgSize = 256;
constexpr int kRecvs = 16;                              // receives kept posted
constexpr int kSendSlots = kMsgsPerRound + 1;           // the round's messages and the goodbye
constexpr std::uint64_t kMagic = 0x4C494E4B4C4F5353ull; // "LINKLOSS"
constexpr std::uint32_t kByeIndex = 0xB7E;
constexpr std::uint32_t kBurstIndex = 0xB0057;
constexpr int kMarkRounds = 20;
// Nothing in this program may wait forever: the whole test takes ~15 s.
constexpr int kPeerWatchdogSeconds = 75;
constexpr auto kStallLimit = std::chrono::seconds(40); // no verified round, no break, no command
constexpr DAT_TIMEOUT kConnectTimeoutUs = 5'000'000;

long long now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// The pattern of one stream of bytes (a round's data or one message),
// 8 bytes at a time: a mix of the stream key and the word's index.
std::uint64_t pattern_word(std::uint64_t key, std::size_t word) {
    std::uint64_t x = key * 0x9E3779B97F4A7C15ull + (word + 1) * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    return x;
}

void fill_pattern(unsigned char *p, std::size_t len, std::uint64_t key) {
    for (std::size_t w = 0; w * 8 < len; ++w) {
        std::uint64_t v = pattern_word(key, w);
        std::memcpy(p + w * 8, &v, std::min<std::size_t>(8, len - w * 8));
    }
}

// Offset of the first byte that differs from the pattern, or -1.
long check_pattern(const unsigned char *p, std::size_t len, std::uint64_t key) {
    for (std::size_t w = 0; w * 8 < len; ++w) {
        std::uint64_t v = pattern_word(key, w);
        std::size_t n = std::min<std::size_t>(8, len - w * 8);
        if (std::memcmp(p + w * 8, &v, n) != 0) {
            const auto *e = reinterpret_cast<const unsigned char *>(&v);
            for (std::size_t i = 0; i < n; ++i)
                if (p[w * 8 + i] != e[i])
                    return static_cast<long>(w * 8 + i);
        }
    }
    return -1;
}

// Stream keys: connection (epoch), sending side, round, and which stream.
std::uint64_t stream_key(std::uint32_t epoch, std::uint32_t sender, std::uint64_t round, std::uint32_t what) {
    return (static_cast<std::uint64_t>(epoch) << 56) ^ (static_cast<std::uint64_t>(sender) << 52) ^ (round << 12) ^
           what;
}

// What the two sides tell each other when they connect: where to write.
struct Hello {
    std::uint64_t magic;
    std::uint64_t address;
    std::uint64_t length;
    std::uint32_t rmr_context;
    std::uint32_t epoch;
};

struct Msg {
    std::uint64_t magic;
    std::uint64_t round;
    std::uint32_t epoch;
    std::uint32_t sender;
    std::uint32_t index;      // 0..kMsgsPerRound-1, kByeIndex or kBurstIndex
    std::uint32_t last_round; // the client's choice of the last round, +1; 0: not chosen yet
    unsigned char payload[kMsgSize - 32];
};
static_assert(sizeof(Msg) == kMsgSize);

enum class Kind : std::uint8_t { Write, Send, Recv };
const char *kind_name(Kind k) { return k == Kind::Write ? "write" : k == Kind::Send ? "send" : "recv"; }

struct Dto {
    Kind kind;
    int slot; // receive or send buffer slot
};

class LinkLossPeer {
public:
    LinkLossPeer(bool server, std::string ia_name, std::string server_host, DAT_CONN_QUAL port)
        : server_(server), me_(server ? 0 : 1), ia_name_(std::move(ia_name)), server_host_(std::move(server_host)),
          port_(port) {}
    ~LinkLossPeer() {
        if (psp_ != DAT_HANDLE_NULL)
            dat_psp_free(psp_);
        // Buffers (their LMRs) before the IA.
        src_.release();
        dst_.release();
        out_.release();
        in_.release();
        side_.close();
    }
    bool run();

private:
    // ---- reporting
    bool fail(const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    void say(const char *fmt, ...) __attribute__((format(printf, 2, 3)));

    // ---- setup and connections
    bool open();
    bool resolve_server();
    bool connect_client();
    bool accept_server();
    bool take_hello(const void *pdata, DAT_COUNT len);
    bool post_all_recvs();
    bool after_established();

    // ---- posting
    DAT_DTO_COOKIE track(Kind kind, int slot);
    bool post_recv(int slot);
    bool post_send(int slot, std::uint64_t round, std::uint32_t index);
    // kChunks RDMA writes of src_ [local, +kHalf) to the peer's [remote, +kHalf).
    void post_writes(std::size_t local, std::size_t remote);
    bool start_round();
    bool burst();

    // ---- events
    // Waits up to `wait_us` for a DTO completion, then handles every queued
    // completion, connection event and command. False after a failure.
    bool pump(DAT_TIMEOUT wait_us);
    bool on_dto(const DAT_EVENT &ev);
    bool on_recv(int slot);
    bool on_conn(const DAT_EVENT &ev);
    bool on_command(const std::string &cmd);
    bool read_commands();
    void note_break(const std::string &what);

    // ---- phases
    bool stream();       // until the connection breaks or the last round is done
    bool report_break(); // every outstanding DTO completed; prints BROKEN
    bool await_command(const char *cmd);
    bool reconnect();
    bool part(); // goodbye, disconnect, DONE

    const bool server_;
    const std::uint32_t me_; // 0 server, 1 client
    const std::string ia_name_;
    const std::string server_host_;
    const DAT_CONN_QUAL port_;
    sockaddr_storage server_addr_{};

    Side side_;
    DAT_EVD_HANDLE dto_evd_ = DAT_HANDLE_NULL; // requests and receives
    DAT_PSP_HANDLE psp_ = DAT_HANDLE_NULL;
    Buffer src_, dst_, out_, in_;
    DAT_RMR_TRIPLET remote_{};

    std::unordered_map<std::uint64_t, Dto> outstanding_;
    std::uint64_t next_cookie_ = 1;
    int requests_outstanding_ = 0;

    std::uint32_t epoch_ = 0; // connection number
    std::uint64_t round_ = 0; // the current round of this connection
    bool round_started_ = false;
    std::map<std::uint64_t, int> peer_msgs_; // round -> messages of the peer received
    std::uint64_t peer_verified_ = 0;        // the peer's rounds 0..peer_verified_-1 are verified
    std::uint64_t rounds_total_ = 0;         // over all connections
    std::uint64_t bytes_verified_ = 0;
    std::uint64_t last_round_plus1_ = 0; // 0 until "finish" (client) or the client's message (server)
    bool peer_bye_ = false;

    bool hold_ = false, held_said_ = false; // "hold": no new round; HELD printed

    // A pending "mark".
    bool marked_ = false;
    std::uint64_t mark_target_ = 0;
    long long mark_ms_ = 0;

    // The break of a connection.
    bool broken_ = false;     // no more posts on this connection
    bool conn_ended_ = false; // DISCONNECTED or BROKEN seen
    DAT_EVENT_NUMBER end_event_ = DAT_CONNECTION_EVENT_DISCONNECTED;
    long long first_sign_ms_ = 0, end_event_ms_ = 0, last_completion_ms_ = 0, last_success_ms_ = 0;
    std::string first_sign_;
    std::map<std::string, int> errors_by_kind_;
    std::map<std::string, int> errors_by_status_;
    std::map<std::string, int> ok_after_first_sign_;    // by kind
    bool request_failed_ = false, recv_failed_ = false; // a DTO of that direction completed with an error
    int outstanding_at_end_event_ = -1;

    std::string stdin_buf_;
    std::vector<std::string> commands_;
    bool parting_ = false; // our goodbye is posted: the peer's disconnect may flush our receives
};

namespace {

// One line on stdout (the script reads it as it comes): `prefix`, then the
// formatted text.
void print_line(const char *prefix, const char *fmt, va_list ap) {
    std::fputs(prefix, stdout);
    std::vprintf(fmt, ap);
    std::printf("\n");
    std::fflush(stdout);
}

} // namespace

void LinkLossPeer::say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    print_line("", fmt, ap);
    va_end(ap);
}

bool LinkLossPeer::fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    print_line(server_ ? "FAIL server: " : "FAIL client: ", fmt, ap);
    va_end(ap);
    return false;
}

bool LinkLossPeer::resolve_server() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_flags = AI_NUMERICHOST;
    addrinfo *res = nullptr;
    if (int e = getaddrinfo(server_host_.c_str(), nullptr, &hints, &res); e != 0 || !res)
        return fail("server address '%s': %s", server_host_.c_str(), gai_strerror(e));
    std::memcpy(&server_addr_, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return true;
}

bool LinkLossPeer::open() {
    if (DAT_RETURN r = side_.open(ia_name_))
        return fail("opening IA %s: %s", ia_name_.c_str(), ret_text(r).c_str());
    dto_evd_ = side_.req_evd;
    if (DAT_RETURN r = side_.create_ep_on(&side_.ep, dto_evd_, dto_evd_, side_.conn_evd))
        return fail("dat_ep_create: %s", ret_text(r).c_str());
    const auto remote_write = static_cast<DAT_MEM_PRIV_FLAGS>(kLocalRw | DAT_MEM_PRIV_REMOTE_WRITE_FLAG);
    if (DAT_RETURN r = side_.register_buffer(src_, 2 * kHalf))
        return fail("registering the source buffer: %s", ret_text(r).c_str());
    if (DAT_RETURN r = side_.register_buffer(dst_, kTarget, remote_write))
        return fail("registering the target buffer: %s", ret_text(r).c_str());
    if (dst_.rmr_context == 0)
        return fail("the target buffer's LMR has no rmr_context");
    if (DAT_RETURN r = side_.register_buffer(out_, kSendSlots * kMsgSize))
        return fail("registering the send buffer: %s", ret_text(r).c_str());
    if (DAT_RETURN r = side_.register_buffer(in_, kRecvs * kMsgSize))
        return fail("registering the receive buffer: %s", ret_text(r).c_str());
    // Standard input carries the script's commands; never block on it.
    int fl = fcntl(0, F_GETFL);
    if (fl < 0 || fcntl(0, F_SETFL, fl | O_NONBLOCK) < 0)
        return fail("stdin: %s", std::strerror(errno));
    return true;
}

DAT_DTO_COOKIE LinkLossPeer::track(Kind kind, int slot) {
    std::uint64_t c = next_cookie_++;
    outstanding_.emplace(c, Dto{kind, slot});
    if (kind != Kind::Recv)
        ++requests_outstanding_;
    return cookie(c);
}

// A post that fails is taken as a sign that the connection broke (the
// connection event must follow): nothing was posted, nothing may complete.
bool LinkLossPeer::post_recv(int slot) {
    DAT_LMR_TRIPLET t = in_.iov(static_cast<std::size_t>(slot) * kMsgSize, kMsgSize);
    DAT_DTO_COOKIE ck = track(Kind::Recv, slot);
    DAT_RETURN r = dat_ep_post_recv(side_.ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG);
    if (r == DAT_SUCCESS)
        return true;
    outstanding_.erase(ck.as_64);
    note_break("dat_ep_post_recv -> " + ret_text(r));
    return true;
}

bool LinkLossPeer::post_all_recvs() {
    for (int i = 0; i < kRecvs; ++i)
        if (!post_recv(i))
            return false;
    return true;
}

bool LinkLossPeer::post_send(int slot, std::uint64_t round, std::uint32_t index) {
    auto *m = reinterpret_cast<Msg *>(out_.data + static_cast<std::size_t>(slot) * kMsgSize);
    m->magic = kMagic;
    m->round = round;
    m->epoch = epoch_;
    m->sender = me_;
    m->index = index;
    m->last_round = static_cast<std::uint32_t>(last_round_plus1_);
    fill_pattern(m->payload, sizeof m->payload, stream_key(epoch_, me_, round, 1 + index));
    DAT_LMR_TRIPLET t = out_.iov(static_cast<std::size_t>(slot) * kMsgSize, kMsgSize);
    DAT_DTO_COOKIE ck = track(Kind::Send, slot);
    DAT_RETURN r = dat_ep_post_send(side_.ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG);
    if (r == DAT_SUCCESS)
        return true;
    outstanding_.erase(ck.as_64);
    --requests_outstanding_;
    note_break("dat_ep_post_send -> " + ret_text(r));
    return true;
}

void LinkLossPeer::post_writes(std::size_t local, std::size_t remote) {
    for (int i = 0; i < kChunks && !broken_; ++i) {
        const std::size_t off = static_cast<std::size_t>(i) * kChunk;
        DAT_LMR_TRIPLET l = src_.iov(local + off, kChunk);
        DAT_RMR_TRIPLET r = remote_;
        r.virtual_address += remote + off;
        r.segment_length = kChunk;
        DAT_DTO_COOKIE ck = track(Kind::Write, i);
        DAT_RETURN ret = dat_ep_post_rdma_write(side_.ep, 1, &l, ck, &r, DAT_COMPLETION_DEFAULT_FLAG);
        if (ret != DAT_SUCCESS) {
            outstanding_.erase(ck.as_64);
            --requests_outstanding_;
            note_break("dat_ep_post_rdma_write -> " + ret_text(ret));
        }
    }
}

bool LinkLossPeer::start_round() {
    const std::size_t half = (round_ % 2) * kHalf;
    fill_pattern(src_.data + half, kHalf, stream_key(epoch_, me_, round_, 0));
    post_writes(half, half);
    for (int i = 0; i < kMsgsPerRound && !broken_; ++i)
        if (!post_send(i, round_, static_cast<std::uint32_t>(i)))
            return false;
    round_started_ = true;
    return true;
}

bool LinkLossPeer::burst() {
    if (!hold_ || requests_outstanding_ != 0)
        return fail("'burst' needs 'hold' first and no request outstanding (%d are)", requests_outstanding_);
    post_writes(0, 2 * kHalf);
    for (int i = 0; i < kMsgsPerRound && !broken_; ++i)
        if (!post_send(i, round_, kBurstIndex))
            return false;
    say("BURST side=%s posted=%d outstanding=%zu at_ms=%lld", server_ ? "server" : "client", requests_outstanding_,
        outstanding_.size(), now_ms());
    return true;
}

void LinkLossPeer::note_break(const std::string &what) {
    if (broken_)
        return;
    broken_ = true;
    first_sign_ = what;
    first_sign_ms_ = now_ms();
}

bool LinkLossPeer::on_recv(int slot) {
    const auto *m = reinterpret_cast<const Msg *>(in_.data + static_cast<std::size_t>(slot) * kMsgSize);
    if (m->magic != kMagic || m->epoch != epoch_ || m->sender != 1 - me_)
        return fail("receive slot %d: not a message of this connection's peer (magic %" PRIx64 ", epoch %u, sender %u)",
                    slot, m->magic, m->epoch, m->sender);
    if (long bad = check_pattern(m->payload, sizeof m->payload, stream_key(epoch_, m->sender, m->round, 1 + m->index));
        bad >= 0)
        return fail("message %u of round %" PRIu64 ": payload byte %ld differs", m->index, m->round, bad);
    if (m->last_round && !server_ && m->last_round != last_round_plus1_)
        return fail("the server names a last round the client did not choose");
    if (m->last_round && server_)
        last_round_plus1_ = m->last_round;
    if (m->index == kByeIndex) {
        peer_bye_ = true;
        return true;
    }
    if (m->index == kBurstIndex)
        return true;
    if (m->round < peer_verified_ || m->round > round_ + 1 || m->index >= kMsgsPerRound)
        return fail("message %u of round %" PRIu64 " arrived while this side is in round %" PRIu64, m->index, m->round,
                    round_);
    int &seen = peer_msgs_[m->round];
    if (static_cast<int>(m->index) != seen)
        return fail("message %u of round %" PRIu64 " arrived after %d of that round (out of order)", m->index, m->round,
                    seen);
    ++seen;
    if (seen < kMsgsPerRound)
        return true;
    // The round's last message: the peer's writes of that round have landed.
    if (m->round != peer_verified_)
        return fail("round %" PRIu64 " completed before round %" PRIu64, m->round, peer_verified_);
    const std::size_t half = (m->round % 2) * kHalf;
    if (long bad = check_pattern(dst_.data + half, kHalf, stream_key(epoch_, m->sender, m->round, 0)); bad >= 0)
        return fail("round %" PRIu64 ": byte %ld of the %zu written by the peer differs", m->round, bad, kHalf);
    peer_msgs_.erase(m->round);
    ++peer_verified_;
    bytes_verified_ += kHalf + kMsgsPerRound * kMsgSize;
    return true;
}

bool LinkLossPeer::on_dto(const DAT_EVENT &ev) {
    if (ev.event_number != DAT_DTO_COMPLETION_EVENT)
        return fail("unexpected event on the DTO EVD: %s", event_text(ev).c_str());
    const auto &d = ev.event_data.dto_completion_event_data;
    auto it = outstanding_.find(d.user_cookie.as_64);
    if (it == outstanding_.end())
        return fail("a completion for cookie %" PRIu64
                    ", which is not outstanding (completed twice, or never posted): %s",
                    d.user_cookie.as_64, event_text(ev).c_str());
    const Dto dto = it->second;
    outstanding_.erase(it);
    if (dto.kind != Kind::Recv)
        --requests_outstanding_;
    last_completion_ms_ = now_ms();
    if (d.status != DAT_DTO_SUCCESS) {
        if (parting_) {
            // After the goodbye the peer may disconnect at any time: that
            // flushes the receives, and only them.
            if (dto.kind != Kind::Recv)
                return fail("a %s completed with %s after the goodbye", kind_name(dto.kind),
                            dto_status_name(d.status).c_str());
            return true;
        }
        note_break("a DTO completed with an error");
        (dto.kind == Kind::Recv ? recv_failed_ : request_failed_) = true;
        ++errors_by_kind_[kind_name(dto.kind)];
        ++errors_by_status_[dto_status_name(d.status)];
        return true;
    }
    if (conn_ended_ && !parting_)
        return fail("a %s completed successfully after %s", kind_name(dto.kind), event_name(end_event_).c_str());
    // dat_ep_disconnect(3DAT): "If an in-progress DTO is completed
    // unsuccessfully, all follow on in-progress DTOs in the same direction
    // also must be completed unsuccessfully."
    if (dto.kind == Kind::Recv ? recv_failed_ : request_failed_)
        return fail("a %s completed successfully after an earlier %s completed with an error", kind_name(dto.kind),
                    dto.kind == Kind::Recv ? "receive" : "request");
    last_success_ms_ = last_completion_ms_;
    if (broken_) {
        ++ok_after_first_sign_[kind_name(dto.kind)];
        return true;
    }
    if (dto.kind == Kind::Recv) {
        if (d.transfered_length != kMsgSize)
            return fail("a receive completed with %llu bytes, sent were %zu",
                        static_cast<unsigned long long>(d.transfered_length), kMsgSize);
        if (!on_recv(dto.slot))
            return false;
        return post_recv(dto.slot);
    }
    return true;
}

bool LinkLossPeer::on_conn(const DAT_EVENT &ev) {
    if (ev.event_number != DAT_CONNECTION_EVENT_DISCONNECTED && ev.event_number != DAT_CONNECTION_EVENT_BROKEN)
        return fail("unexpected connection event: %s", event_text(ev).c_str());
    if (conn_ended_)
        return fail("a second %s for one connection", event_name(ev.event_number).c_str());
    conn_ended_ = true;
    end_event_ = ev.event_number;
    end_event_ms_ = now_ms();
    outstanding_at_end_event_ = static_cast<int>(outstanding_.size());
    note_break(ev.event_number == DAT_CONNECTION_EVENT_BROKEN ? "DAT_CONNECTION_EVENT_BROKEN"
                                                              : "DAT_CONNECTION_EVENT_DISCONNECTED");
    return true;
}

bool LinkLossPeer::read_commands() {
    char buf[256];
    for (;;) {
        ssize_t n = ::read(0, buf, sizeof buf);
        if (n > 0) {
            stdin_buf_.append(buf, static_cast<std::size_t>(n));
            continue;
        }
        if (n == 0)
            return fail("standard input closed (the script ended)");
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            break;
        return fail("reading standard input: %s", std::strerror(errno));
    }
    for (std::size_t nl; (nl = stdin_buf_.find('\n')) != std::string::npos;) {
        commands_.push_back(stdin_buf_.substr(0, nl));
        stdin_buf_.erase(0, nl + 1);
    }
    return true;
}

// Commands that act at once ("mark", and "finish" while streaming); the
// others wait in commands_ for the phase that takes them.
bool LinkLossPeer::on_command(const std::string &cmd) {
    if (cmd == "mark") {
        marked_ = true;
        mark_target_ = rounds_total_ + kMarkRounds;
        mark_ms_ = now_ms();
        say("MARK side=%s epoch=%u rounds=%" PRIu64 " outstanding=%zu at_ms=%lld", server_ ? "server" : "client",
            epoch_, rounds_total_, outstanding_.size(), mark_ms_);
        return true;
    }
    if (cmd == "hold") {
        hold_ = true;
        return true;
    }
    if (cmd == "finish") {
        // The client chooses the last round: two ahead of its own, so that
        // neither side has passed it when the choice reaches the server.
        if (!server_)
            last_round_plus1_ = round_ + 3;
        return true;
    }
    return fail("unknown command '%s'", cmd.c_str());
}

bool LinkLossPeer::pump(DAT_TIMEOUT wait_us) {
    DAT_EVENT ev{};
    DAT_COUNT nmore = 0;
    DAT_RETURN r = dat_evd_wait(dto_evd_, wait_us, 1, &ev, &nmore);
    if (r == DAT_SUCCESS) {
        if (!on_dto(ev))
            return false;
    } else if (DAT_GET_TYPE(r) != DAT_TIMEOUT_EXPIRED) {
        return fail("dat_evd_wait on the DTO EVD: %s", ret_text(r).c_str());
    }
    while (dat_evd_dequeue(dto_evd_, &ev) == DAT_SUCCESS)
        if (!on_dto(ev))
            return false;
    while (dat_evd_dequeue(side_.conn_evd, &ev) == DAT_SUCCESS)
        if (!on_conn(ev))
            return false;
    if (!read_commands())
        return false;
    return true;
}

bool LinkLossPeer::stream() {
    auto progress = std::chrono::steady_clock::now();
    for (;;) {
        if (!pump(20'000))
            return false;
        while (!commands_.empty() && commands_.front() != "reconnect") {
            std::string cmd = commands_.front();
            commands_.erase(commands_.begin());
            if (!(cmd == "burst" ? burst() : on_command(cmd)))
                return false;
        }
        if (!commands_.empty())
            return fail("command '%s' while streaming", commands_.front().c_str());
        if (broken_)
            return true;
        if (round_started_ && requests_outstanding_ == 0 && peer_verified_ > round_) {
            ++round_;
            ++rounds_total_;
            round_started_ = false;
            progress = std::chrono::steady_clock::now();
            if (marked_ && rounds_total_ >= mark_target_) {
                marked_ = false;
                say("ADVANCED side=%s epoch=%u rounds=%" PRIu64 " bytes_verified=%" PRIu64 " ms_since_mark=%lld",
                    server_ ? "server" : "client", epoch_, rounds_total_, bytes_verified_, now_ms() - mark_ms_);
            }
            if (last_round_plus1_ && round_ >= last_round_plus1_)
                return true;
        }
        if (!round_started_ && !hold_ && !start_round())
            return false;
        if (hold_ && !held_said_ && requests_outstanding_ == 0) {
            held_said_ = true;
            say("HELD side=%s epoch=%u round=%" PRIu64 " outstanding=%zu at_ms=%lld", server_ ? "server" : "client",
                epoch_, round_, outstanding_.size(), now_ms());
        }
        if (std::chrono::steady_clock::now() - progress > kStallLimit)
            return fail("no round finished in %lld s, and the connection did not end (round %" PRIu64
                        ", %zu DTOs outstanding)",
                        static_cast<long long>(kStallLimit.count()), round_, outstanding_.size());
    }
}

bool LinkLossPeer::report_break() {
    // dat_ep_disconnect(3DAT) and the DAT model: when a connection ends,
    // every DTO still outstanding completes, flushed. Wait for all of them
    // and for the connection event, whichever comes first.
    auto deadline = std::chrono::steady_clock::now() + kStallLimit;
    while (!conn_ended_ || !outstanding_.empty()) {
        if (!pump(20'000))
            return false;
        if (!commands_.empty())
            return fail("command '%s' before the connection ended", commands_.front().c_str());
        if (std::chrono::steady_clock::now() > deadline)
            return fail("%lld s after '%s': %s, %zu DTOs still outstanding",
                        static_cast<long long>(kStallLimit.count()), first_sign_.c_str(),
                        conn_ended_ ? "connection ended" : "no DISCONNECTED or BROKEN event", outstanding_.size());
    }
    // Nothing more may come: no second completion, no second event.
    DAT_EVENT ev{};
    DAT_COUNT nmore = 0;
    DAT_RETURN r = dat_evd_wait(dto_evd_, 300'000, 1, &ev, &nmore);
    if (r == DAT_SUCCESS)
        return fail("an event after every DTO had completed: %s", event_text(ev).c_str());
    if (dat_evd_dequeue(side_.conn_evd, &ev) == DAT_SUCCESS)
        return fail("a second connection event: %s", event_text(ev).c_str());
    DAT_EP_STATE st = ep_state(side_.ep);
    if (st != DAT_EP_STATE_DISCONNECTED)
        return fail("after %s the Endpoint is %s, not DISCONNECTED", event_name(end_event_).c_str(),
                    ep_state_name(st).c_str());
    std::string kinds, statuses, ok_after;
    int flushed = 0;
    for (const auto &[k, n] : errors_by_kind_) {
        kinds += " err_" + k + "=" + std::to_string(n);
        flushed += n;
    }
    for (const auto &[s, n] : errors_by_status_)
        statuses += (statuses.empty() ? "" : ",") + s + ":" + std::to_string(n);
    for (const auto &[k, n] : ok_after_first_sign_)
        ok_after += (ok_after.empty() ? "" : ",") + k + ":" + std::to_string(n);
    say("BROKEN side=%s epoch=%u event=%s first_sign=\"%s\" first_sign_ms=%lld event_ms=%lld last_completion_ms=%lld "
        "last_success_ms=%lld outstanding_at_event=%d errors=%d%s statuses=%s ok_after_first_sign=%s "
        "rounds=%" PRIu64 " bytes_verified=%" PRIu64,
        server_ ? "server" : "client", epoch_, event_name(end_event_).c_str(), first_sign_.c_str(), first_sign_ms_,
        end_event_ms_, last_completion_ms_, last_success_ms_, outstanding_at_end_event_, flushed, kinds.c_str(),
        statuses.empty() ? "none" : statuses.c_str(), ok_after.empty() ? "none" : ok_after.c_str(), rounds_total_,
        bytes_verified_);
    return true;
}

bool LinkLossPeer::await_command(const char *cmd) {
    auto deadline = std::chrono::steady_clock::now() + kStallLimit;
    while (commands_.empty()) {
        if (std::chrono::steady_clock::now() > deadline)
            return fail("no '%s' command in %lld s", cmd, static_cast<long long>(kStallLimit.count()));
        pollfd p{0, POLLIN, 0};
        ::poll(&p, 1, 50);
        if (!read_commands())
            return false;
    }
    std::string got = commands_.front();
    commands_.erase(commands_.begin());
    if (got != cmd)
        return fail("expected the command '%s', got '%s'", cmd, got.c_str());
    return true;
}

bool LinkLossPeer::take_hello(const void *pdata, DAT_COUNT len) {
    Hello h{};
    if (!pdata || len < static_cast<DAT_COUNT>(sizeof h))
        return fail("the peer's private data has %d bytes, expected %zu", len, sizeof h);
    std::memcpy(&h, pdata, sizeof h);
    if (h.magic != kMagic || h.epoch != epoch_ || h.length != kTarget)
        return fail("the peer's private data does not describe its target buffer of connection %u", epoch_);
    remote_.virtual_address = h.address;
    remote_.segment_length = h.length;
    remote_.rmr_context = h.rmr_context;
    return true;
}

bool LinkLossPeer::after_established() {
    say("ESTABLISHED side=%s epoch=%u at_ms=%lld", server_ ? "server" : "client", epoch_, now_ms());
    round_ = 0;
    round_started_ = false;
    peer_verified_ = 0;
    peer_msgs_.clear();
    broken_ = conn_ended_ = false;
    hold_ = held_said_ = false;
    errors_by_kind_.clear();
    errors_by_status_.clear();
    ok_after_first_sign_.clear();
    request_failed_ = recv_failed_ = false;
    outstanding_at_end_event_ = -1;
    return true;
}

bool LinkLossPeer::connect_client() {
    Hello h{kMagic, dst_.registered_address, kTarget, dst_.rmr_context, epoch_};
    // The server recreates its Endpoint before it says READY, and the link
    // is up by then: one attempt should do. A refusal from the network can
    // still come while the link's neighbours are resolved, so a few more.
    for (int attempt = 1;; ++attempt) {
        DAT_RETURN r = connect_ep(side_.ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&server_addr_), port_,
                                  kConnectTimeoutUs, sizeof h, &h);
        if (r != DAT_SUCCESS)
            return fail("dat_ep_connect: %s", ret_text(r).c_str());
        DAT_EVENT ev{};
        if (DAT_RETURN w = next_event(side_.conn_evd, &ev, kConnectTimeoutUs + 5'000'000); w != DAT_SUCCESS)
            return fail("no connection event after dat_ep_connect: %s", ret_text(w).c_str());
        if (ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED) {
            const auto &c = ev.event_data.connect_event_data;
            return take_hello(c.private_data, c.private_data_size) && after_established();
        }
        bool retry = ev.event_number == DAT_CONNECTION_EVENT_NON_PEER_REJECTED ||
                     ev.event_number == DAT_CONNECTION_EVENT_UNREACHABLE ||
                     ev.event_number == DAT_CONNECTION_EVENT_TIMED_OUT;
        if (!retry || attempt == 3)
            return fail("connecting (attempt %d): %s", attempt, event_text(ev).c_str());
        say("RETRY side=client attempt=%d event=%s", attempt, event_name(ev.event_number).c_str());
        // The failed attempt flushed the receives (dat_ep_connect(3DAT)).
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (!outstanding_.empty()) {
            if (!pump(100'000))
                return false;
            if (std::chrono::steady_clock::now() > deadline)
                return fail("%zu receives not flushed 5 s after a failed connect", outstanding_.size());
        }
        if (DAT_RETURN rr = dat_ep_reset(side_.ep))
            return fail("dat_ep_reset after a failed connect: %s", ret_text(rr).c_str());
        if (!post_all_recvs())
            return false;
        usleep(200'000);
    }
}

bool LinkLossPeer::accept_server() {
    DAT_EVENT ev{};
    if (!wait_event(side_.cr_evd, DAT_CONNECTION_REQUEST_EVENT, &ev, 30'000'000))
        return fail("no connection request within 30 s");
    DAT_CR_HANDLE cr = ev.event_data.cr_arrival_event_data.cr_handle;
    DAT_CR_PARAM param{};
    if (DAT_RETURN r = dat_cr_query(cr, DAT_CR_FIELD_ALL, &param))
        return fail("dat_cr_query: %s", ret_text(r).c_str());
    if (!take_hello(param.private_data, param.private_data_size)) {
        dat_cr_reject(cr, 0, nullptr);
        return false;
    }
    Hello h{kMagic, dst_.registered_address, kTarget, dst_.rmr_context, epoch_};
    if (DAT_RETURN r = dat_cr_accept(cr, side_.ep, sizeof h, &h))
        return fail("dat_cr_accept: %s", ret_text(r).c_str());
    if (auto w = wait_event(side_.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, kConnectTimeoutUs); !w)
        return fail("accepting: %s", w.message());
    return after_established();
}

bool LinkLossPeer::reconnect() {
    // Every completion of the broken connection was taken: the EVDs are empty.
    std::vector<DAT_EVENT> left = drain(dto_evd_);
    if (!left.empty())
        return fail("%zu events left on the DTO EVD after the break, first %s", left.size(),
                    event_text(left[0]).c_str());
    ++epoch_;
    // Both ways back from a broken connection, each side taking each in turn:
    // connection 1 the server frees and recreates, the client resets.
    const bool recreate = (epoch_ % 2 == 1) == server_;
    if (recreate) {
        if (DAT_RETURN r = dat_ep_free(side_.ep))
            return fail("dat_ep_free of the disconnected Endpoint: %s", ret_text(r).c_str());
        side_.ep = DAT_HANDLE_NULL;
        if (DAT_RETURN r = side_.create_ep_on(&side_.ep, dto_evd_, dto_evd_, side_.conn_evd))
            return fail("dat_ep_create: %s", ret_text(r).c_str());
    } else {
        if (DAT_RETURN r = dat_ep_reset(side_.ep))
            return fail("dat_ep_reset of the disconnected Endpoint: %s", ret_text(r).c_str());
        if (DAT_EP_STATE st = ep_state(side_.ep); st != DAT_EP_STATE_UNCONNECTED)
            return fail("after dat_ep_reset the Endpoint is %s, not UNCONNECTED", ep_state_name(st).c_str());
    }
    if (!post_all_recvs())
        return false;
    say("READY side=%s epoch=%u endpoint=%s", server_ ? "server" : "client", epoch_,
        recreate ? "freed-and-recreated" : "reset");
    return server_ ? accept_server() : connect_client();
}

bool LinkLossPeer::part() {
    // Both sides finished the last round: say goodbye, so that neither
    // disconnects while the other still waits for a completion.
    if (!post_send(kMsgsPerRound, round_, kByeIndex))
        return false;
    parting_ = true;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!(peer_bye_ && requests_outstanding_ == 0)) {
        // The peer disconnects once it has our goodbye and its own DTOs
        // completed; ours complete regardless (or fail the test, on_dto).
        if (broken_ && !(conn_ended_ && peer_bye_))
            return fail("the connection ended before both sides said goodbye (%s)", first_sign_.c_str());
        if (!pump(20'000))
            return false;
        if (std::chrono::steady_clock::now() > deadline)
            return fail("no goodbye from the peer within 10 s");
    }
    if (!server_ && !conn_ended_)
        if (DAT_RETURN r = dat_ep_disconnect(side_.ep, DAT_CLOSE_GRACEFUL_FLAG))
            return fail("dat_ep_disconnect: %s", ret_text(r).c_str());
    // The posted receives are flushed now; the connection ends.
    while (!conn_ended_ || !outstanding_.empty()) {
        if (!pump(20'000))
            return false;
        if (std::chrono::steady_clock::now() > deadline)
            return fail("the connection did not end within 10 s of the goodbye (%zu DTOs outstanding)",
                        outstanding_.size());
    }
    if (end_event_ != DAT_CONNECTION_EVENT_DISCONNECTED)
        return fail("a graceful disconnect ended with %s", event_name(end_event_).c_str());
    say("DONE side=%s epochs=%u rounds=%" PRIu64 " bytes_verified=%" PRIu64, server_ ? "server" : "client", epoch_ + 1,
        rounds_total_, bytes_verified_);
    return true;
}

bool LinkLossPeer::run() {
    if (!resolve_server() || !open())
        return false;
    if (server_) {
        if (DAT_RETURN r = dat_psp_create(side_.ia.ia, port_, side_.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp_))
            return fail("dat_psp_create on port %llu: %s", static_cast<unsigned long long>(port_), ret_text(r).c_str());
        if (!post_all_recvs())
            return false;
        say("LISTENING side=server port=%llu", static_cast<unsigned long long>(port_));
        if (!accept_server())
            return false;
    } else {
        if (!post_all_recvs() || !connect_client())
            return false;
    }
    // Stream until the script says "finish"; every break in between is
    // reported, and a "reconnect" follows.
    for (;;) {
        if (!stream())
            return false;
        if (!broken_)
            return part();
        if (!report_break() || !await_command("reconnect") || !reconnect())
            return false;
    }
}

} // namespace

int main(int argc, char **argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    if (argc != 5 || (std::strcmp(argv[1], "server") != 0 && std::strcmp(argv[1], "client") != 0)) {
        std::fprintf(stderr, "usage: %s server|client IA_NAME SERVER_ADDRESS PORT\n", argv[0]);
        return 2;
    }
    char *end = nullptr;
    unsigned long port = std::strtoul(argv[4], &end, 10);
    if (!end || *end || port == 0 || port > 65535) {
        std::fprintf(stderr, "%s: bad port '%s'\n", argv[0], argv[4]);
        return 2;
    }
    Watchdog watchdog;
    watchdog.start(std::string("link_loss_peer ") + argv[1], kPeerWatchdogSeconds);
    bool ok;
    {
        LinkLossPeer peer(std::strcmp(argv[1], "server") == 0, argv[2], argv[3], port);
        ok = peer.run();
    }
    watchdog.stop();
    return ok ? 0 : 1;
}
