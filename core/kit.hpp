// SPDX-License-Identifier: BSD-3-Clause
// The provider kit's objects: the DAT objects every plugin shares, their
// states and the limits the kit enforces. The kit implements every
// DAT_PROVIDER slot over them (argument and handle checks with the man
// pages' return codes, the EP state machine, EVD queues and waiting, CNOs,
// PZ/LMR bookkeeping, DTO records and their completion order, flushes). A
// plugin supplies a Transport per IA underneath: core/transport.hpp is the
// whole interface between the two, and says which of the fields below a
// transport may read (it writes none).
#pragma once

#include "event_loop.hpp"
#include "lock.hpp"
#include "object.hpp"
#include "wait.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <sys/socket.h>
#include <type_traits>
#include <vector>

namespace dat2::kit {

struct Ia;
struct Pz;
struct Evd;
struct Cno;
struct Ep;
struct Lmr;
struct Rmr;
struct Psp;
struct Cr;
struct Op;
struct Srq;
class Transport;
class EventLoop;

// The InfiniBand extensions' DTOs (dat_ib_extensions.h, core/ext.cpp).
// kRmrBind: not a DTO but a dat_rmr_bind, whose completion takes its turn
// among the EP's requests (core/rmr.cpp); the transport never sees its record.
enum class ExtKind : std::uint8_t { kNone, kRdmaWriteImmed, kFetchAdd, kCmpSwap, kRmrBind };

// ---- limits the kit enforces whatever the transport ------------------------
inline constexpr DAT_COUNT kMaxEvdQlen = 1 << 20;
inline constexpr DAT_COUNT kMaxLmrs = 1 << 16;
inline constexpr DAT_COUNT kMaxRmrs = 1 << 16;
inline constexpr DAT_COUNT kMaxObjects = 1 << 16; // EPs, EVDs, PZs per IA (Capabilities::max_*)
inline constexpr DAT_COUNT kMaxPrivateData = 192; // bytes a consumer may send
inline constexpr DAT_COUNT kDefaultDtos = 64;
inline constexpr DAT_COUNT kMaxDtos = 16384;
inline constexpr DAT_COUNT kMaxIov = 16;

// One local segment of a DTO, resolved from an LMR triplet: what the
// transport posts.
struct Segment {
    void *addr;
    std::size_t length;
    void *desc; // the LMR's transport descriptor (Registration::desc)
};

// Which extended DTOs of dat_ib_extensions.h a transport carries out.
struct ExtCaps {
    bool rdma_write_immed = false;
    bool fetch_add = false;
    bool cmp_swap = false;
};

// What a transport can do, returned by Transport::open() (core/transport.hpp
// explains each); the kit enforces the limits and reports them in
// dat_ia_query.
struct Capabilities {
    DAT_COUNT max_private_data = kMaxPrivateData; // bytes of consumer data a CM message carries
    DAT_COUNT max_iov = kMaxIov;                  // segments per DTO
    DAT_COUNT max_dtos = kMaxDtos;                // max_recv_dtos and max_request_dtos of an EP
    DAT_COUNT max_eps = kMaxObjects, max_evds = kMaxObjects, max_pzs = kMaxObjects;
    DAT_COUNT max_srq_recvs = 0;      // receives one SRQ holds; 0: no SRQs
    bool requests_in_order = false;   // an EP's requests complete in posting order
    // An EP's receives may complete out of posting order (a long message
    // after a short one sent behind it): the kit reports them in order.
    bool recvs_out_of_order = false;
    bool fence = false;               // honours DAT_COMPLETION_BARRIER_FENCE_FLAG itself
    bool recv_before_connect = false; // takes receives on an EP that has no connection yet
    // The peer's window is unreachable from the moment the message is placed
    // (the device unbinds it), not only once the receive is reaped.
    bool send_with_invalidate = false;
    // A window of dat_rmr_create_for_ep is reachable through its Endpoint's
    // connection only (the device checks the QP a window is bound to).
    bool rmr_scope_ep = false;
    ExtCaps ext;
};

// ---- objects ---------------------------------------------------------------

struct Pz : ObjectHeader {
    std::atomic<int> users{0}; // LMRs, EPs, RMRs, SRQs
};

// A DTO in flight. Records live in their EP for the EP's lifetime, so a
// completion that arrives late (after a flush) still finds valid memory.
struct Op {
    // Scratch the transport may hand to its library with the operation
    // (libfabric's FI_CONTEXT2 mode writes here); first, so &op is the context.
    void *transport_context[8] = {};
    // kHeld: a request the transport completed before an earlier request of
    // its EP, or a receive before an earlier receive
    // (Capabilities::recvs_out_of_order); reported, in posting order, once
    // the earlier ones are.
    enum State : std::uint8_t { kFree, kPosted, kFlushed, kHeld };
    std::atomic<std::uint8_t> state{kFree};
    bool suppress = false; // DAT_COMPLETION_SUPPRESS_FLAG
    bool is_recv = false;
    DAT_DTOS operation = DAT_DTO_SEND;
    std::uint64_t seq = 0;                                   // posting order, for flushes
    std::uint64_t rseq = 0; // posting order among the EP's requests, or among its receives
    DAT_DTO_COMPLETION_STATUS held_status = DAT_DTO_SUCCESS; // kHeld: its completion
    std::uint32_t held_length = 0;
    bool held_silent = false; // kHeld: a post that failed, reported by its return code
    // A held receive's completion: the rest of its Completion.
    bool held_invalidate = false;
    std::uint8_t held_immed = 0; // Completion::Immed
    std::uint32_t held_immed_data = 0;
    DAT_RMR_CONTEXT held_rmr_context = 0;
    DAT_DTO_COOKIE cookie{};
    std::uint32_t length = 0;
    Ep *ep = nullptr;
    // A receive posted to a shared receive queue (core/srq.hpp): the SRQ owns
    // the record, and `ep` is the EP that took it, which the transport sets
    // before it returns the completion from cq_read.
    Srq *srq = nullptr;
    Op *next_free = nullptr;
    // An extended DTO of dat_ib_extensions.h (core/ext.cpp); kNone for the
    // standard ones. The operands stay here, where the transport may read
    // them until the DTO completes.
    ExtKind ext = ExtKind::kNone;
    std::uint32_t immed = 0;       // kRdmaWriteImmed: the immediate data
    std::uint64_t operand[2] = {}; // kFetchAdd: {add}; kCmpSwap: {compare, swap}
    Rmr *rmr = nullptr;            // kRmrBind: the window bound or unbound
};

struct Cno : ObjectHeader {
    std::mutex mu;
    std::condition_variable cv;
    DAT_OS_WAIT_PROXY_AGENT agent{nullptr, nullptr};
    Evd *triggered = nullptr; // set when an EVD fired and no agent took it
    bool waiting = false;
    std::atomic<int> evds{0};
    std::atomic<int> inside{0};
    // Notifications taken under an EVD's lock and not yet delivered
    // (cno_to_notify_locked): freeing the CNO waits for them.
    std::atomic<int> notifying{0};
    std::atomic<bool> aborted{false};
    int fd = -1;          // readable while triggered
    bool fd_cno = false;  // made by dat_cno_fd_create: its query names the fd
};

struct Evd : ObjectHeader {
    Lock mu;
    DAT_EVD_FLAGS flags = DAT_EVD_DEFAULT_FLAG;
    DAT_COUNT qlen = 0;
    bool enabled = true;
    bool waitable = true;
    bool waiter = false;
    bool overflowed = false;
    // Events ready for the consumer, FIFO. Sized to qlen at creation and on
    // resize; the hot paths (dequeue, wait) never allocate.
    std::vector<DAT_EVENT> ring;
    std::size_t head = 0, count = 0;
    // Provider-generated events (connections, flushes) that did not fit: never
    // lost, delivered after the ring drains.
    std::deque<DAT_EVENT> spill;
    // While dat_evd_dequeue reads the transport's queue with the FIFO and
    // the spill empty: the consumer's buffer, where the first completion
    // event is built (it is the oldest); cleared once used.
    DAT_EVENT *direct = nullptr;
    Cno *cno = nullptr;
    int wake_fd = -1;          // eventfd: software and CM events, unwaitable
    void *cq = nullptr;        // the transport's completion queue (DTO EVDs)
    std::atomic<int> users{0}; // EPs and PSPs referring to it
    // EP streams feeding it that use consumer-controlled notification
    // (UNSIGNALLED / SOLICITED_WAIT): dat_evd_wait's threshold must be 1.
    std::atomic<int> notify_streams{0};
    std::atomic<int> inside{0}; // threads in dat_evd_wait, or in dat_cno_wait for it (freeing waits for them)
    // Bumped by every dat_evd_dequeue: a transport's helper thread leaves a
    // queue alone while its consumer keeps polling it (plugins/ofi, cm_loop).
    std::atomic<std::uint32_t> dequeues{0};
    std::atomic<bool> aborted{false}; // the IA is closing: waiters return DAT_ABORT
    // `cno` is set and the EVD enabled (both under mu): its completions
    // trigger the CNO, whose consumer may wait outside DAT (the CNO's fd,
    // its agent), counted in no `inside`: a transport's helper thread reads
    // such an EVD's queues as it would a waiter's. Set by evd_cno_changed_locked.
    std::atomic<bool> feeds_cno{false};
};

struct Lmr : ObjectHeader {
    DAT_MEM_TYPE mem_type = DAT_MEM_TYPE_VIRTUAL;
    DAT_REGION_DESCRIPTION region{};
    char cookie[DAT_LMR_COOKIE_SIZE] = {};
    Pz *pz = nullptr;
    Lmr *parent = nullptr; // DAT_MEM_TYPE_LMR
    std::uintptr_t address = 0;
    DAT_VLEN length = 0;
    DAT_MEM_PRIV_FLAGS privileges = DAT_MEM_PRIV_NONE_FLAG;
    DAT_VA_TYPE va_type = DAT_VA_TYPE_VA;
    DAT_LMR_CONTEXT lmr_context = 0;
    DAT_RMR_CONTEXT rmr_context = 0;
    bool has_rmr_context = false;
    std::atomic<int> users{0}; // RMRs bound to it, LMRs made from it
    void *mr = nullptr;        // transport registration
    void *desc = nullptr;      // transport descriptor for local buffers
};

// A memory window (core/rmr.cpp): created unbound in a PZ; dat_rmr_bind
// exposes a range of an LMR under a new rmr_context each time (the old one
// stops working); a bind of length 0, a peer's send with invalidate and
// dat_rmr_free unbind it.
struct Rmr : ObjectHeader {
    std::mutex mu; // the binding below
    Pz *pz = nullptr;
    DAT_RMR_SCOPE scope = DAT_RMR_SCOPE_PZ; // DAT_RMR_SCOPE_EP: dat_rmr_create_for_ep
    Lmr *lmr = nullptr;                     // bound to (counted in lmr->users), or nullptr
    DAT_LMR_TRIPLET range{};                // the bound range of `lmr`
    DAT_MEM_PRIV_FLAGS privileges = DAT_MEM_PRIV_NONE_FLAG;
    DAT_VA_TYPE va_type = DAT_VA_TYPE_VA;
    DAT_RMR_CONTEXT rmr_context = 0; // set by the transport's rmr_bind
    void *tp = nullptr;              // the transport's window
};

struct Psp : ObjectHeader {
    DAT_CONN_QUAL conn_qual = 0;
    Evd *evd = nullptr;
    DAT_PSP_FLAGS flags = DAT_PSP_CONSUMER_FLAG;
    void *tp = nullptr;
};

// A Reserved Service Point: generates at most one request, for its EP.
struct Rsp : Psp {
    Ep *ep = nullptr;
    bool ep_is_providers = false; // created for dat_rsp_create(ep_handle NULL)
    bool used = false;            // its one request has come
};

// A Common Service Point (DAT 2.0): listens on an IA address and port.
struct Csp : Psp {
    DAT_COMM comm{};
    sockaddr_storage address{};
};

struct Cr : ObjectHeader {
    // Taken by whoever answers the request (accept, reject, handoff) or
    // destroys it (dat_ia_close), so that only one does (cr_claim).
    std::atomic<bool> claimed{false};
    Psp *psp = nullptr;
    DAT_CONN_QUAL conn_qual = 0;
    sockaddr_storage remote{};
    DAT_PORT_QUAL remote_port = 0;
    unsigned char private_data[256];
    DAT_COUNT private_data_size = 0;
    Ep *provider_ep = nullptr; // the RSP's EP, or one created for a DAT_PSP_PROVIDER_FLAG PSP
    void *tp = nullptr;        // the transport's pending request
    // Kept apart from `psp`, which dat_rsp_free clears while the request lives on.
    bool for_rsp = false;
    bool provider_ep_is_providers = false; // goes away unless the Consumer accepts on it
    // Refused by the provider, not the Consumer: the requester sees
    // DAT_CONNECTION_EVENT_NON_PEER_REJECTED (Transport::reject).
    bool refused = false;
};

struct Ep : ObjectHeader {
    std::mutex mu; // connection state; never taken on the post paths
    std::atomic<DAT_EP_STATE> state{DAT_EP_STATE_UNCONNECTED};
    // Connection calls (connect, accept, disconnect) inside the transport,
    // each counted under mu with its state check; `releasing` (under mu)
    // refuses new ones. ep_release_all waits for the count to drop, so that
    // a dat_ep_free or dat_ia_close in another thread, which may follow an
    // event that call caused, never frees what the transport still uses.
    std::atomic<int> cm_calls{0};
    bool releasing = false;
    Pz *pz = nullptr;
    Evd *recv_evd = nullptr, *request_evd = nullptr, *connect_evd = nullptr;
    // Counts the dat_ep_modify calls that changed pz, recv_evd, request_evd
    // or the queues' sizes (DTOs, IOVs, RDMA reads): a transport that built
    // queues for them compares one number per post.
    std::uint32_t rebinds = 0;
    bool connect_evd_foreign = false; // connect_evd belongs to another IA (ep.cpp)
    DAT_EP_ATTR attr{};
    sockaddr_storage remote{};
    DAT_PORT_QUAL remote_port = 0;
    DAT_PORT_QUAL local_port = 0; // set by the transport once connected
    Cr *cr = nullptr;             // the request being accepted, while passive pending
    // Private data of the last connection event (the event points here).
    unsigned char event_data[256];
    // DTO records: one pool for requests and one for receives.
    std::vector<Op> ops;
    Lock ops_mu;
    // Capabilities::requests_in_order: held by a request's post from taking
    // its record to the transport's post, and around ep_in_request_order()
    // (core/transport.hpp).
    Lock post_mu;
    Op *free_requests = nullptr, *free_recvs = nullptr;
    std::uint64_t next_seq = 0; // Op::seq of the next record taken (under ops_mu)
    // Request completions are reported in posting order (an RC queue; the
    // DAT event model keeps an Event Stream's order) even where the
    // transport completes them out of order (libfabric tcp completes a send
    // before RDMA writes posted ahead of it that wait for delivery).
    // req_next_rseq: the next request's rseq (under ops_mu);
    // req_report_rseq: the next rseq to report, req_held: completed requests
    // waiting for it, by rseq modulo their size, a power of two at least the
    // pool's (both under the request EVD's mu).
    std::uint64_t req_next_rseq = 0, req_report_rseq = 0;
    std::vector<Op *> req_held;
    // A request was reported unsuccessfully: every later one is reported
    // flushed until the EP is reset (under the request EVD's mu).
    bool requests_failed = false;
    // Every request not yet reported, by rseq modulo req_held's size: stored (with
    // release) by op_take under ops_mu, loaded (acquire) under the request
    // EVD's mu where a completion stands for earlier requests too
    // (Capabilities::requests_in_order).
    std::vector<Op *> req_ops;
    // Capabilities::recvs_out_of_order: receives are reported in posting
    // order, as requests are. recv_next_rseq: the next receive's rseq (under
    // ops_mu); recv_report_rseq: the next to report, recv_held: completed
    // receives waiting for it, by rseq modulo its size (under the recv
    // EVD's mu; empty without the capability).
    std::uint64_t recv_next_rseq = 0, recv_report_rseq = 0;
    std::vector<Op *> recv_held;
    std::atomic<int> recvs_posted{0}, requests_posted{0};
    std::atomic<int> reads_posted{0}; // RDMA reads not yet completed (barrier fence)
    void *tp = nullptr;               // the transport's endpoint state
    Srq *srq = nullptr;               // dat_ep_create_with_srq: its receives come from there
    // Receives posted while the transport cannot take them (no
    // Capabilities::recv_before_connect and no connection yet), handed over
    // in posting order by ep_transport_ready(); under pending_mu.
    struct PendingRecv {
        Op *op;
        std::vector<Segment> segs;
    };
    std::vector<PendingRecv> pending_recvs;
    Lock pending_mu;
    std::atomic<bool> transport_ready{false};
    // ep_flush_outstanding holds flush_mu over its pass, and sets
    // connection_flushed after it until dat_ep_reset: a receive posted as
    // the connection ended learns there whether the pass still comes.
    Lock flush_mu;
    bool connection_flushed = false;
    // dat_ep_connect's timeout, on the IA's event loop (core/cm.cpp).
    EventLoop::Timer *connect_timer = nullptr;
    // dat_ep_set_watermark (core/srq.cpp): DAT_WATERMARK_INFINITE = not armed.
    std::atomic<DAT_COUNT> soft_high_watermark{DAT_WATERMARK_INFINITE};
    std::atomic<DAT_COUNT> hard_high_watermark{DAT_WATERMARK_INFINITE};
};

// A shared receive queue (core/srq.cpp). Its receive records (Op with
// op.srq set) are queued by the transport on its shared receive context;
// whichever EP of the SRQ takes one completes it on its own recv EVD. The
// kit counts records posted and not yet completed; it cannot see the moment
// an EP takes one (transports report receives only once they complete).
struct Srq : ObjectHeader {
    Pz *pz = nullptr;
    DAT_COUNT max_recv_iov = 1;
    std::atomic<int> users{0}; // EPs created with it
    void *tp = nullptr;        // the transport's shared receive context
    // The low watermark was crossed where its event could not be posted
    // (under the lock of an EVD that is also the async EVD): the next call
    // on the SRQ posts it.
    std::atomic<bool> lw_pending{false};

    Lock mu; // everything below
    DAT_COUNT max_recv_dtos = 0;
    DAT_COUNT low_watermark = DAT_SRQ_LW_DEFAULT;
    bool lw_armed = false;
    // Receive records. A transport holds &op while one is posted, so they
    // never move: dat_srq_resize adds records, a shrink only lowers the limit.
    std::deque<Op> ops;
    Op *free_ops = nullptr;
    DAT_COUNT posted = 0; // records with the transport: queued, or taken by an EP and not completed
    std::vector<Ep *> eps;
    std::uint64_t next_seq = 0;
};

// The children of an IA, one intrusive list per handle type (links in
// ObjectHeader): insertion, removal and counts are O(1) and a scan for one
// type never walks the others, so an IA with thousands of objects creates
// and frees each in constant time. Guarded by Ia::mu.
class ObjectList {
public:
    static constexpr std::size_t kTypes = 16; // DAT_HANDLE_TYPE_CR .. _CSP, extensions folded in the last

    void push_back(ObjectHeader *o) {
        Bucket &b = bucket(o->type);
        o->sibling_prev = b.tail;
        o->sibling_next = nullptr;
        (b.tail ? b.tail->sibling_next : b.head) = o;
        b.tail = o;
        ++b.count;
        ++total_;
        o->listed = true;
    }
    void erase(ObjectHeader *o) {
        if (!o->listed)
            return;
        Bucket &b = bucket(o->type);
        (o->sibling_prev ? o->sibling_prev->sibling_next : b.head) = o->sibling_next;
        (o->sibling_next ? o->sibling_next->sibling_prev : b.tail) = o->sibling_prev;
        o->sibling_prev = o->sibling_next = nullptr;
        o->listed = false;
        --b.count;
        --total_;
    }
    std::size_t size() const { return total_; }
    std::size_t count(DAT_HANDLE_TYPE t) const { return bucket(t).count; }
    ObjectHeader *last(DAT_HANDLE_TYPE t) const { return bucket(t).tail; } // the most recent

    // for (ObjectHeader *o : list.of_type(t)): oldest first; erasing the
    // current object ends the walk.
    class Iterator {
    public:
        explicit Iterator(ObjectHeader *o) : o_(o) {}
        ObjectHeader *operator*() const { return o_; }
        Iterator &operator++() {
            o_ = o_->sibling_next;
            return *this;
        }
        bool operator!=(const Iterator &other) const { return o_ != other.o_; }

    private:
        ObjectHeader *o_;
    };
    struct Range {
        ObjectHeader *first;
        Iterator begin() const { return Iterator(first); }
        Iterator end() const { return Iterator(nullptr); }
    };
    Range of_type(DAT_HANDLE_TYPE t) const { return Range{bucket(t).head}; }

private:
    struct Bucket {
        ObjectHeader *head = nullptr, *tail = nullptr;
        std::size_t count = 0;
    };
    Bucket &bucket(DAT_HANDLE_TYPE t) { return buckets_[std::min<std::size_t>(t, kTypes - 1)]; }
    const Bucket &bucket(DAT_HANDLE_TYPE t) const { return buckets_[std::min<std::size_t>(t, kTypes - 1)]; }
    Bucket buckets_[kTypes];
    std::size_t total_ = 0;
};

struct Ia : ObjectHeader {
    std::string name;
    Capabilities caps; // what the transport's open() returned
    // The IA's connection management thread (core/event_loop.hpp): made
    // before the transport, stopped before it goes, freed after it.
    std::unique_ptr<EventLoop> loop;
    std::unique_ptr<Transport> transport;
    // Created by ia_open (owned), or an async EVD of another IA that the
    // Consumer passed to dat_ia_open (borrowed). Read and changed under the
    // kit's async lock (post_async, async_evd_borrow/return, evd_release).
    Evd *async_evd = nullptr;
    bool async_evd_owned = false;
    std::mutex mu;      // the object lists below
    ObjectList objects; // every child, for ia_close
    // LMR contexts: index (16 bits) | generation (16 bits, the process's
    // counter: lmr.cpp) << 16; table read without a lock on the post path.
    std::vector<std::atomic<Lmr *>> lmr_table;
    std::deque<std::uint32_t> lmr_free; // popped at the back, freed indexes pushed at the front
    std::atomic<int> rmrs{0};           // RMRs that exist (kMaxRmrs)
    // dat_ia_query's provider-specific attributes, made once at dat_ia_open
    // (core/ext.cpp): the names and values, and the array that points at them.
    std::deque<std::string> attr_text;
    std::vector<DAT_NAMED_ATTR> provider_attrs;
    Ia();
    ~Ia();
};

#define DAT2_HANDLE_TRAITS(Type, dat_type, invalid_subtype)                                                            \
    template <> struct HandleTraits<Type> {                                                                            \
        static constexpr DAT_HANDLE_TYPE kType = dat_type;                                                             \
        static constexpr DAT_RETURN kSubtype = invalid_subtype;                                                        \
    }
DAT2_HANDLE_TRAITS(Ia, DAT_HANDLE_TYPE_IA, DAT_INVALID_HANDLE_IA);
DAT2_HANDLE_TRAITS(Pz, DAT_HANDLE_TYPE_PZ, DAT_INVALID_HANDLE_PZ);
// An EVD's subtype depends on the role it is passed in; callers name it.
DAT2_HANDLE_TRAITS(Evd, DAT_HANDLE_TYPE_EVD, DAT_INVALID_HANDLE_EVD_REQUEST);
DAT2_HANDLE_TRAITS(Cno, DAT_HANDLE_TYPE_CNO, DAT_INVALID_HANDLE_CNO);
DAT2_HANDLE_TRAITS(Ep, DAT_HANDLE_TYPE_EP, DAT_INVALID_HANDLE_EP);
DAT2_HANDLE_TRAITS(Lmr, DAT_HANDLE_TYPE_LMR, DAT_INVALID_HANDLE_LMR);
DAT2_HANDLE_TRAITS(Rmr, DAT_HANDLE_TYPE_RMR, DAT_INVALID_HANDLE_RMR);
DAT2_HANDLE_TRAITS(Psp, DAT_HANDLE_TYPE_PSP, DAT_INVALID_HANDLE_PSP);
DAT2_HANDLE_TRAITS(Rsp, DAT_HANDLE_TYPE_RSP, DAT_INVALID_HANDLE_RSP);
DAT2_HANDLE_TRAITS(Csp, DAT_HANDLE_TYPE_CSP, DAT_INVALID_HANDLE1);
DAT2_HANDLE_TRAITS(Cr, DAT_HANDLE_TYPE_CR, DAT_INVALID_HANDLE_CR);
DAT2_HANDLE_TRAITS(Srq, DAT_HANDLE_TYPE_SRQ, DAT_INVALID_HANDLE_SRQ);
#undef DAT2_HANDLE_TRAITS

} // namespace dat2::kit
