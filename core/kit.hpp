// SPDX-License-Identifier: BSD-3-Clause
// The provider kit: the DAT objects every plugin shares, their states and
// rules, and the interface a transport implements underneath them.
//
// Division of labour: the kit implements every DAT_PROVIDER slot (argument
// and handle checks with the man pages' return codes, the EP state machine,
// EVD queues and waiting, CNOs, PZ/LMR bookkeeping, DTO cookies and flushes).
// A plugin supplies a Transport per IA: completion queues, memory
// registration, connection management and posting, and reports connection
// events back through the kit's on_*() functions.
#pragma once

#include "lock.hpp"
#include "object.hpp"

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

// The InfiniBand extensions' DTOs (dat_ib_extensions.h, core/ext.cpp).
// kRmrBind: not a DTO but a dat_rmr_bind, whose completion takes its turn
// among the EP's requests (core/rmr.cpp); the transport never sees its record.
enum class ExtKind : std::uint8_t { kNone, kRdmaWriteImmed, kFetchAdd, kCmpSwap, kRmrBind };

// ---- limits the kit enforces whatever the transport ------------------------
inline constexpr DAT_COUNT kMaxEvdQlen = 1 << 20;
inline constexpr DAT_COUNT kMaxLmrs = 1 << 16;
inline constexpr DAT_COUNT kMaxRmrs = 1 << 16;
inline constexpr DAT_COUNT kMaxObjects = 1 << 16; // EPs, EVDs, PZs per IA (Ia::max_*)
inline constexpr DAT_COUNT kMaxPrivateData = 192; // bytes a consumer may send
inline constexpr DAT_COUNT kDefaultDtos = 64;
inline constexpr DAT_COUNT kMaxDtos = 16384;
inline constexpr DAT_COUNT kMaxIov = 16;

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
    // its EP; reported, in posting order, once the earlier ones are.
    enum State : std::uint8_t { kFree, kPosted, kFlushed, kHeld };
    std::atomic<std::uint8_t> state{kFree};
    bool suppress = false;  // DAT_COMPLETION_SUPPRESS_FLAG
    bool is_recv = false;
    DAT_DTOS operation = DAT_DTO_SEND;
    std::uint64_t seq = 0;  // posting order, for flushes
    std::uint64_t rseq = 0; // requests: posting order among the EP's requests
    DAT_DTO_COMPLETION_STATUS held_status = DAT_DTO_SUCCESS; // kHeld: its completion
    std::uint32_t held_length = 0;
    bool held_silent = false; // kHeld: a post that failed, reported by its return code
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
    std::uint32_t immed = 0;         // kRdmaWriteImmed: the immediate data
    std::uint64_t operand[2] = {};   // kFetchAdd: {add}; kCmpSwap: {compare, swap}
    Rmr *rmr = nullptr;              // kRmrBind: the window bound or unbound
};

struct Cno : ObjectHeader {
    std::mutex mu;
    std::condition_variable cv;
    DAT_OS_WAIT_PROXY_AGENT agent{nullptr, nullptr};
    Evd *triggered = nullptr; // set when an EVD fired and no agent took it
    bool waiting = false;
    std::atomic<int> evds{0};
    std::atomic<int> inside{0};
    std::atomic<bool> aborted{false};
    int fd = -1; // dat_cno_fd_create: readable while triggered
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
    int wake_fd = -1;                 // eventfd: software and CM events, unwaitable
    void *cq = nullptr;               // the transport's completion queue (DTO EVDs)
    std::atomic<int> users{0};        // EPs and PSPs referring to it
    // EP streams feeding it that use consumer-controlled notification
    // (UNSIGNALLED / SOLICITED_WAIT): dat_evd_wait's threshold must be 1.
    std::atomic<int> notify_streams{0};
    std::atomic<int> inside{0};       // threads in dat_evd_wait (freeing waits for them)
    // Bumped by every dat_evd_dequeue: a transport's helper thread leaves a
    // queue alone while its consumer keeps polling it (plugins/ofi, cm_loop).
    std::atomic<std::uint32_t> dequeues{0};
    std::atomic<bool> aborted{false}; // the IA is closing: waiters return DAT_ABORT
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
    Psp *psp = nullptr;
    DAT_CONN_QUAL conn_qual = 0;
    sockaddr_storage remote{};
    DAT_PORT_QUAL remote_port = 0;
    unsigned char private_data[256];
    DAT_COUNT private_data_size = 0;
    Ep *provider_ep = nullptr; // the RSP's EP, or one created for a DAT_PSP_PROVIDER_FLAG PSP
    void *tp = nullptr;        // the transport's pending request
};

struct Ep : ObjectHeader {
    std::mutex mu; // connection state; never taken on the post paths
    std::atomic<DAT_EP_STATE> state{DAT_EP_STATE_UNCONNECTED};
    Pz *pz = nullptr;
    Evd *recv_evd = nullptr, *request_evd = nullptr, *connect_evd = nullptr;
    bool connect_evd_foreign = false; // connect_evd belongs to another IA (ep.cpp)
    DAT_EP_ATTR attr{};
    sockaddr_storage remote{};
    DAT_PORT_QUAL remote_port = 0;
    DAT_PORT_QUAL local_port = 0; // set by the transport once connected
    Cr *cr = nullptr; // the request being accepted, while passive pending
    // Private data of the last connection event (the event points here).
    unsigned char event_data[256];
    // DTO records: one pool for requests and one for receives.
    std::vector<Op> ops;
    Lock ops_mu;
    // Ia::requests_in_order: held by a request's post from taking its record
    // to the transport's post (and by the transport for its own work
    // requests that must keep their place among them).
    Lock post_mu;
    Op *free_requests = nullptr, *free_recvs = nullptr;
    std::uint64_t next_seq = 0; // Op::seq of the next record taken (under ops_mu)
    // Request completions are reported in posting order (an RC queue; the
    // DAT event model keeps an Event Stream's order) even where the
    // transport completes them out of order (libfabric tcp completes a send
    // before RDMA writes posted ahead of it that wait for delivery).
    // req_next_rseq: the next request's rseq (under ops_mu);
    // req_report_rseq: the next rseq to report, req_held: completed requests
    // waiting for it, by rseq modulo the pool (both under the request EVD's mu).
    std::uint64_t req_next_rseq = 0, req_report_rseq = 0;
    std::vector<Op *> req_held;
    // Every request not yet reported, by rseq modulo the pool: stored (with
    // release) by op_take under ops_mu, loaded (acquire) under the request
    // EVD's mu where a completion stands for earlier requests too
    // (Ia::requests_in_order).
    std::vector<Op *> req_ops;
    std::atomic<int> recvs_posted{0}, requests_posted{0};
    std::atomic<int> reads_posted{0}; // RDMA reads not yet completed (barrier fence)
    void *tp = nullptr; // the transport's endpoint state
    Srq *srq = nullptr; // dat_ep_create_with_srq: its receives come from there
    // dat_ep_set_watermark (core/srq.cpp): DAT_WATERMARK_INFINITE = not armed.
    std::atomic<DAT_COUNT> soft_high_watermark{DAT_WATERMARK_INFINITE};
    std::atomic<DAT_COUNT> hard_high_watermark{DAT_WATERMARK_INFINITE};
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
    std::unique_ptr<Transport> transport;
    DAT_COUNT max_private_data = kMaxPrivateData; // the transport may lower it
    DAT_COUNT max_iov = kMaxIov;                  // segments per DTO, ditto
    DAT_COUNT max_dtos = kMaxDtos;                // max_recv_dtos, max_request_dtos of an EP, ditto
    DAT_COUNT max_srq_recvs = 0; // receives one SRQ can hold; 0: no SRQs (set by the transport)
    // Set by a transport whose requests of an EP complete in posting order
    // (one RC send queue: verbs). The completion of a request then stands for
    // every earlier request of its EP, and the transport may post a send or
    // an RDMA write with DAT_COMPLETION_SUPPRESS_FLAG without asking for a
    // completion of its own (an unsignalled work request): such requests
    // still posted when a later one completes succeeded, and the kit
    // reports them so (silently) before it. Any other request it posts
    // completes. The kit holds Ep::post_mu from taking a request's record
    // (its rseq) to the transport's post, so that posting order is the
    // queue's order also when threads post on one EP at once.
    bool requests_in_order = false;
    // How many EPs, EVDs and PZs the IA holds at most: what dat_ia_query
    // reports as max_eps, max_evds, max_pzs, and what ia_has_room() enforces
    // (one more is DAT_INSUFFICIENT_RESOURCES). The transport lowers them
    // where its own resources (file descriptors) run out first.
    DAT_COUNT max_eps = kMaxObjects, max_evds = kMaxObjects, max_pzs = kMaxObjects;
    // Created by ia_open (owned), or an async EVD of another IA that the
    // Consumer passed to dat_ia_open (borrowed). Read and changed under the
    // kit's async lock (post_async, async_evd_borrow/return, evd_release).
    Evd *async_evd = nullptr;
    bool async_evd_owned = false;
    std::mutex mu;                // the object lists below
    ObjectList objects;           // every child, for ia_close
    // LMR contexts: index (16 bits) | generation (16 bits) << 16; table read
    // without a lock on the post path.
    std::vector<std::atomic<Lmr *>> lmr_table;
    std::vector<std::uint16_t> lmr_generation;
    std::deque<std::uint32_t> lmr_free; // popped at the back, freed indexes pushed at the front
    std::atomic<int> rmrs{0}; // RMRs that exist (kMaxRmrs)
    // dat_ia_query's provider-specific attributes (core/ext.cpp fills them).
    DAT_NAMED_ATTR provider_attrs[6] = {};
    Ia() : lmr_table(kMaxLmrs), lmr_generation(kMaxLmrs, 1) {}
};

#define DAT2_HANDLE_TRAITS(Type, dat_type, invalid_subtype)                                  \
    template <> struct HandleTraits<Type> {                                                  \
        static constexpr DAT_HANDLE_TYPE kType = dat_type;                                   \
        static constexpr DAT_RETURN kSubtype = invalid_subtype;                              \
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
#undef DAT2_HANDLE_TRAITS

// ---- what a transport provides ---------------------------------------------

// One local segment of a DTO, resolved from an LMR triplet.
struct Segment {
    void *addr;
    std::size_t length;
    void *desc;
};

// A completion as the transport reads it from its queue.
// Trivial on purpose: every poll of an EVD declares an array of 32 of them,
// and default member initializers cost ~130 stores per poll (measured with
// callgrind: an empty dat_evd_dequeue spent a third of its instructions
// there). A transport's cq_read sets every field of each entry it returns.
struct Completion {
    Op *op;
    DAT_DTO_COMPLETION_STATUS status;
    std::uint32_t length;
    // A receive of a send with invalidate: the sender asked to unbind our
    // RMR of this rmr_context (dat_ep_post_send_with_invalidate).
    bool invalidate;
    DAT_RMR_CONTEXT rmr_context;
    // A receive consumed by the peer's RDMA write with immediate data
    // (`length` is the written length) or by a send carrying immediate data.
    enum class Immed : std::uint8_t { kNone, kRdmaWrite, kSend } immed;
    std::uint32_t immed_data;
};
static_assert(std::is_trivially_default_constructible<Completion>::value, "polls declare arrays of them");

// Which extended DTOs a transport carries out (Transport::ext_caps).
struct ExtCaps {
    bool rdma_write_immed = false;
    bool fetch_add = false;
    bool cmp_swap = false;
};

enum class PostKind { kSend, kRecv, kRdmaRead, kRdmaWrite };

class Transport {
public:
    virtual ~Transport() = default;

    // Attributes: the kit fills the generic ones first, the transport its limits.
    virtual void query(DAT_IA_ATTR &ia_attr, DAT_PROVIDER_ATTR &provider_attr) = 0;
    virtual const sockaddr *address() const = 0;

    // Completion queue behind a DTO EVD (sets evd.cq).
    virtual DAT_RETURN cq_open(Evd &evd) = 0;
    virtual void cq_close(Evd &evd) = 0;
    // Reads up to `max` completions, every field of each set; 0 when empty.
    virtual int cq_read(Evd &evd, Completion *out, int max) = 0;
    // The fd to poll for completions, and whether blocking on it now is safe
    // (false: completions may already be queued, read again first).
    virtual int cq_fd(Evd &evd) = 0;
    virtual bool cq_arm(Evd &evd) = 0;

    // Memory registration of lmr.address/length with lmr.privileges; sets
    // lmr.mr, lmr.desc and, when remote access was asked, lmr.rmr_context.
    virtual DAT_RETURN mr_register(Lmr &lmr) = 0;
    virtual void mr_deregister(Lmr &lmr) = 0;

    // Endpoint transport state (ep.tp). ep_close: afterwards no completion
    // for this EP appears in any queue and no buffer of it is touched.
    virtual DAT_RETURN ep_open(Ep &ep) = 0;
    virtual void ep_close(Ep &ep) = 0;
    // Drops the connection resources so that the EP can connect again.
    virtual void ep_reset(Ep &ep) = 0;

    virtual DAT_RETURN connect(Ep &ep, const sockaddr *addr, DAT_CONN_QUAL qual, const void *pdata,
                               std::size_t pdata_len, DAT_TIMEOUT timeout) = 0;
    // Starts a disconnect; the transport calls on_disconnected() when done.
    virtual DAT_RETURN disconnect(Ep &ep, bool graceful) = 0;

    // qual == nullptr: any free qualifier, reported through *assigned.
    virtual DAT_RETURN psp_open(Psp &psp, const DAT_CONN_QUAL *qual, DAT_CONN_QUAL *assigned) = 0;
    virtual void psp_close(Psp &psp) = 0;
    virtual DAT_RETURN accept(Cr &cr, Ep &ep, const void *pdata, std::size_t pdata_len) = 0;
    virtual DAT_RETURN reject(Cr &cr, const void *pdata, std::size_t pdata_len) = 0;
    virtual void cr_release(Cr &cr) = 0;

    // Posts a DTO whose segments the kit has validated. For a receive on an
    // EP that has no connection yet, the transport keeps it until it has one.
    // A kSend with `remote` is a send with invalidate of remote->rmr_context
    // (only when send_with_invalidate() says so); the peer's transport
    // reports it in the receive's Completion.
    virtual DAT_RETURN post(Ep &ep, PostKind kind, Op &op, const Segment *segs, int nsegs,
                            const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags) = 0;
    virtual bool send_with_invalidate() const { return false; }

    // Extended DTOs (dat_ib_extensions.h, core/ext.cpp): those ext_caps()
    // names are posted through post_ext() once the kit has checked them like
    // an RDMA write (kRdmaWriteImmed: `segs` the source, the immediate data
    // in op.immed) or like an RDMA read (atomics: one 8-byte segment that
    // receives the original value, op.operand the add or compare/swap
    // values, `remote` an 8-byte aligned target). The target's transport
    // reports a write with immediate data in the Completion of the receive
    // it consumed (Completion::immed).
    virtual ExtCaps ext_caps() const { return {}; }
    virtual DAT_RETURN post_ext(Ep &, Op &, const Segment *, int, const DAT_RMR_TRIPLET &, DAT_COMPLETION_FLAGS) {
        return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    }

    // Memory windows. rmr_open/rmr_close: the window's resources (rmr.tp)
    // for dat_rmr_create and dat_rmr_free. rmr_bind exposes [addr, addr +
    // len) of `lmr` for the remote `privileges` (DAT_MEM_PRIV_REMOTE_*)
    // under a new rmr.rmr_context, posted on `ep`, replacing any binding the
    // window has (on failure the old one stays). rmr_unbind withdraws the
    // binding; `ep` is null when the window is freed or invalidated by a
    // peer. Once either returns, the old rmr_context opens nothing. A
    // transport without windows keeps these defaults.
    virtual DAT_RETURN rmr_open(Rmr &) { return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0); }
    virtual void rmr_close(Rmr &) {}
    virtual DAT_RETURN rmr_bind(Rmr &, Ep &, const Lmr &, std::uintptr_t, DAT_VLEN, DAT_MEM_PRIV_FLAGS) {
        return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    }
    virtual DAT_RETURN rmr_unbind(Rmr &, Ep *) { return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0); }

    // Shared receive queues, offered when the transport sets ia.max_srq_recvs.
    // srq_open/srq_close: the queue (srq.tp); on close, receives still queued
    // are dropped without completions (the kit takes their records back).
    // srq_post queues a receive any EP of the SRQ may take. ep_open sees
    // ep.srq set for an EP that takes its receives from an SRQ; such a
    // receive completes on that EP's recv EVD, and cq_read sets op.ep to the
    // EP. A receive an EP took whose completion can no longer be reported
    // (ep_close) goes back through srq_drop().
    virtual DAT_RETURN srq_open(Srq &) { return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0); }
    virtual void srq_close(Srq &) {}
    virtual DAT_RETURN srq_post(Srq &, Op &, const Segment *, int) { return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0); }

    // Breaks the connection of a connected EP (dat_ep_set_watermark's hard
    // watermark) and reports it with on_disconnected(ep, true). The kit may
    // call it from inside on_established(): it must not block nor take a
    // lock the transport holds around its callbacks; the break may happen
    // later, from the transport's own thread.
    virtual DAT_RETURN ep_break(Ep &) { return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0); }
};

// Creates the transport of a new IA from the dat.conf entry's ia_params.
using TransportFactory = std::unique_ptr<Transport> (*)(Ia &ia, const std::string &ia_params,
                                                        DAT_RETURN &error);

// ---- the kit's side, called by transports -----------------------------------

// Connection events. The transport calls these from its CM thread.
void on_connection_request(Psp &psp, void *tp_request, const sockaddr *remote, const void *pdata,
                           std::size_t pdata_len);
void on_established(Ep &ep, const void *pdata, std::size_t pdata_len);
void on_connect_failed(Ep &ep, DAT_EVENT_NUMBER reason, const void *pdata, std::size_t pdata_len);
// The connection is gone (local or remote disconnect, peer death): completes
// every outstanding DTO (flushed) before the DISCONNECTED/BROKEN event.
void on_disconnected(Ep &ep, bool broken);
// An IA-level error for the async EVD.
void post_async(Ia &ia, DAT_EVENT_NUMBER number, DAT_HANDLE object, DAT_COUNT reason);
// dat_ia_open with a Consumer's async EVD: `ia` reports its asynchronous
// events there until async_evd_return (its dat_ia_close) or until the EVD
// itself goes away with its own IA.
void async_evd_borrow(Ia &ia, Evd &evd);
void async_evd_return(Ia &ia);
// Returns to its SRQ a receive record whose completion will never be
// reported (its EP is being closed); see Transport::srq_open.
void srq_drop(Op &op);

// Provider registration for a plugin's dat_provider_init/fini.
void provider_init(const DAT_PROVIDER_INFO *info, const char *ia_params, TransportFactory factory) noexcept;
void provider_fini(const DAT_PROVIDER_INFO *info) noexcept;

// ---- inside the kit ---------------------------------------------------------

// Enqueues a provider-generated event on an EVD (never lost) and wakes it.
void evd_push(Evd &evd, const DAT_EVENT &event);
// Moves completions from the EVD's queue into its ring; caller holds evd.mu.
void evd_fill_locked(Evd &evd);
// Every queued completion, whatever the room (spills past qlen); holds evd.mu.
void evd_drain_all_locked(Evd &evd);
void evd_wake(Evd &evd); // completions may have arrived
DAT_RETURN ia_handle_for_consumer(Ia *ia, DAT_IA_HANDLE *out);
void ia_track(Ia &ia, ObjectHeader *obj);
// The IA holds fewer than `max` objects of `type` (Ia::max_eps...).
bool ia_has_room(Ia &ia, DAT_HANDLE_TYPE type, DAT_COUNT max);
void ia_untrack(Ia &ia, ObjectHeader *obj);
void fill_provider_table(DAT_PROVIDER &p);

// Event construction.
DAT_EVENT dto_event(const Op &op, DAT_DTO_COMPLETION_STATUS status, std::uint32_t length);
// dto_event() built where it is wanted (an EVD's FIFO slot).
void fill_dto_event(DAT_EVENT &e, const Op &op, DAT_DTO_COMPLETION_STATUS status, std::uint32_t length);
// dto_event() of an extended DTO, or of a receive whose completion carries
// immediate data (core/ext.cpp): DAT_IB_DTO_EVENT with the
// DAT_IB_EXTENSION_EVENT_DATA of dat_ib_extensions.h.
void ext_event(DAT_EVENT &e, const Op &op, const Completion *c);
// dto_event() of a dat_rmr_bind's record: its DAT_RMR_BIND_COMPLETION_EVENT
// (core/rmr.cpp).
void rmr_bind_event(DAT_EVENT &e, const Op &op, DAT_DTO_COMPLETION_STATUS status);
// The extension's attributes in dat_ia_query (core/ext.cpp).
void ext_query(Ia &ia, DAT_IA_ATTR &ia_attr, DAT_PROVIDER_ATTR &provider_attr);

} // namespace dat2::kit
