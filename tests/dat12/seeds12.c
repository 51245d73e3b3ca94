/*
 * The seeds' rules (dat_lmr_create, dat_lmr_free, dat_rmr_free, dat_ep_free,
 * dat_ep_disconnect; reference/seeds) and the DAT 1.2 boundary, checked
 * through the DAT 1.2 API: a C program built against include/dat and linked
 * with -ldat (libdat.so.1), over a real connection between two open
 * instances of one IA (default ofi-tcp: libfabric tcp on 127.0.0.1).
 *
 *   seeds12 <case> [ia_name]     case: lmr rmr ep_free ep_disconnect dto handles
 *
 * Prints one line per failed check and "<case>: N checks, M failed"; exits 1
 * on any failure.
 */
#include <dat/udat.h>
#include <dat/dat_registry.h> /* the table-call macros (DAT_EP_GET_STATUS, ...) */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int checks, failures;
static char *ia_name = "ofi-tcp";

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        ++checks;                                                                                                      \
        if (!(cond)) {                                                                                                 \
            ++failures;                                                                                                \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                       \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
        }                                                                                                              \
    } while (0)

static const char *text(DAT_RETURN r) {
    static char buf[8][160];
    static int n;
    const char *major = "?", *minor = "?";
    char *b = buf[n++ % 8];
    if (dat_strerror(r, &major, &minor) != DAT_SUCCESS)
        major = "(dat_strerror refused it)", minor = "";
    snprintf(b, 160, "0x%08x %s %s", (unsigned)r, major, minor);
    return b;
}

#define CHECK_OK(call)                                                                                                 \
    do {                                                                                                               \
        DAT_RETURN r_ = (call);                                                                                        \
        CHECK(r_ == DAT_SUCCESS, "%s -> %s", #call, text(r_));                                                         \
    } while (0)

#define CHECK_TYPE(call, type)                                                                                         \
    do {                                                                                                               \
        DAT_RETURN r_ = (call);                                                                                        \
        CHECK(DAT_GET_TYPE(r_) == (type), "%s -> %s, expected %s", #call, text(r_), #type);                            \
    } while (0)

#define REQUIRE(cond, ...)                                                                                             \
    do {                                                                                                               \
        const int ok_ = !!(cond);                                                                                      \
        CHECK(ok_, __VA_ARGS__);                                                                                       \
        if (!ok_)                                                                                                      \
            goto out;                                                                                                  \
    } while (0)

#define REQUIRE_OK(call)                                                                                               \
    do {                                                                                                               \
        DAT_RETURN r_ = (call);                                                                                        \
        REQUIRE(r_ == DAT_SUCCESS, "%s -> %s", #call, text(r_));                                                       \
    } while (0)

enum { kTimeout = 5000000, kQuiet = 300000 }; /* microseconds */

/* One open instance of the IA with an EVD per stream and one EP. */
struct side {
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async_evd, req_evd, recv_evd, conn_evd, cr_evd;
    DAT_PZ_HANDLE pz;
    DAT_EP_HANDLE ep;
    struct sockaddr_in addr;
};

static DAT_RETURN open_side(struct side *s) {
    DAT_RETURN r;
    DAT_IA_ATTR attr;
    memset(s, 0, sizeof *s);
    s->async_evd = DAT_HANDLE_NULL;
    if ((r = dat_ia_open(ia_name, 8, &s->async_evd, &s->ia)) != DAT_SUCCESS)
        return r;
    if ((r = dat_ia_query(s->ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &attr, 0, NULL)) != DAT_SUCCESS)
        return r;
    memcpy(&s->addr, attr.ia_address_ptr, sizeof s->addr);
    if ((r = dat_pz_create(s->ia, &s->pz)) ||
        (r = dat_evd_create(s->ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG, &s->req_evd)) ||
        (r = dat_evd_create(s->ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &s->recv_evd)) ||
        (r = dat_evd_create(s->ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &s->conn_evd)) ||
        (r = dat_evd_create(s->ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &s->cr_evd)))
        return r;
    return dat_ep_create(s->ia, s->pz, s->recv_evd, s->req_evd, s->conn_evd, NULL, &s->ep);
}

static void close_side(struct side *s) {
    if (s->ia)
        dat_ia_close(s->ia, DAT_CLOSE_ABRUPT_FLAG);
    s->ia = DAT_HANDLE_NULL;
}

static DAT_RETURN next_event(DAT_EVD_HANDLE evd, DAT_EVENT *ev, DAT_TIMEOUT timeout) {
    DAT_COUNT more = 0;
    return dat_evd_wait(evd, timeout, 1, ev, &more);
}

/* The next event of `evd` is `number`. */
static int expect_event(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER number, DAT_EVENT *ev, const char *what) {
    DAT_EVENT e;
    DAT_RETURN r = next_event(evd, &e, kTimeout);
    CHECK(r == DAT_SUCCESS, "%s: waiting for event 0x%x: %s", what, number, text(r));
    if (r != DAT_SUCCESS)
        return 0;
    CHECK(e.event_number == number, "%s: event 0x%x, expected 0x%x", what, e.event_number, number);
    CHECK(e.evd_handle == evd, "%s: the event names EVD %p, dequeued from %p", what, e.evd_handle, evd);
    if (ev)
        *ev = e;
    return e.event_number == number;
}

static int no_event(DAT_EVD_HANDLE evd) {
    DAT_EVENT e;
    return DAT_GET_TYPE(next_event(evd, &e, kQuiet)) == DAT_TIMEOUT_EXPIRED;
}

static DAT_EP_STATE ep_state(DAT_EP_HANDLE ep) {
    DAT_EP_STATE s = (DAT_EP_STATE)-1;
    DAT_BOOLEAN a, b;
    dat_ep_get_status(ep, &s, &a, &b);
    return s;
}

/* Client connects to a PSP of the server; both sides see ESTABLISHED. */
static int connect_pair(struct side *c, struct side *s) {
    DAT_CONN_QUAL qual = 0;
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    DAT_EVENT ev;
    int ok = 0;
    REQUIRE_OK(dat_psp_create_any(s->ia, &qual, s->cr_evd, DAT_PSP_CONSUMER_FLAG, &psp));
    REQUIRE_OK(dat_ep_connect(c->ep, (DAT_IA_ADDRESS_PTR)&s->addr, qual, kTimeout, 0, NULL, DAT_QOS_BEST_EFFORT,
                              DAT_CONNECT_DEFAULT_FLAG));
    REQUIRE(expect_event(s->cr_evd, DAT_CONNECTION_REQUEST_EVENT, &ev, "connect_pair"), "no request");
    CHECK(ev.event_data.cr_arrival_event_data.sp_handle.psp_handle == psp,
          "the request names service point %p, not the PSP %p",
          ev.event_data.cr_arrival_event_data.sp_handle.psp_handle, psp);
    CHECK(ev.event_data.cr_arrival_event_data.conn_qual == qual, "the request's qualifier");
    REQUIRE_OK(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, s->ep, 0, NULL));
    REQUIRE(expect_event(s->conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "server"), "server not connected");
    CHECK(ev.event_data.connect_event_data.ep_handle == s->ep, "ESTABLISHED names EP %p, not %p",
          ev.event_data.connect_event_data.ep_handle, s->ep);
    REQUIRE(expect_event(c->conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "client"), "client not connected");
    CHECK(ev.event_data.connect_event_data.ep_handle == c->ep, "client's ESTABLISHED names the wrong EP");
    ok = 1;
out:
    if (psp)
        dat_psp_free(psp);
    return ok;
}

/* A buffer registered with the 1.2 dat_lmr_create (eleven arguments). */
struct buffer {
    unsigned char *data;
    size_t size;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lmr_context;
    DAT_RMR_CONTEXT rmr_context;
    DAT_VLEN registered_size;
    DAT_VADDR registered_address;
};

/* Buffers come from static memory: nothing for a leak checker to report. */
static unsigned char pool[1 << 20] __attribute__((aligned(4096)));
static size_t pool_used;

static DAT_RETURN make_buffer(struct side *s, struct buffer *b, size_t size, DAT_MEM_PRIV_FLAGS priv) {
    DAT_REGION_DESCRIPTION region;
    memset(b, 0, sizeof *b);
    b->size = size;
    size = (size + 4095) & ~(size_t)4095;
    if (pool_used + size > sizeof pool)
        return DAT_INSUFFICIENT_RESOURCES;
    b->data = pool + pool_used;
    pool_used += size;
    memset(b->data, 0, b->size);
    region.for_va = b->data;
    return dat_lmr_create(s->ia, DAT_MEM_TYPE_VIRTUAL, region, size, s->pz, priv, &b->lmr, &b->lmr_context,
                          &b->rmr_context, &b->registered_size, &b->registered_address);
}

static DAT_LMR_TRIPLET local(const struct buffer *b, size_t off, size_t len) {
    DAT_LMR_TRIPLET t;
    t.lmr_context = b->lmr_context;
    t.pad = 0;
    t.virtual_address = (DAT_VADDR)(uintptr_t)(b->data + off);
    t.segment_length = len;
    return t;
}

static DAT_RMR_TRIPLET remote(DAT_RMR_CONTEXT context, const struct buffer *b, size_t off, size_t len) {
    DAT_RMR_TRIPLET t;
    t.rmr_context = context;
    t.pad = 0;
    t.target_address = (DAT_VADDR)(uintptr_t)(b->data + off);
    t.segment_length = len;
    return t;
}

static DAT_DTO_COOKIE cookie(DAT_UINT64 v) {
    DAT_DTO_COOKIE c;
    c.as_64 = v;
    return c;
}

/*
 * An RDMA write the target must refuse: refused when posted, or completed
 * in error and the connection broken (dat_lmr_free(3DAT), dat_rmr_free(3DAT):
 * "fails and reports a protection violation ... the connection is broken").
 */
static void expect_remote_write_refused(struct side *c, struct buffer *src, const DAT_RMR_TRIPLET *rem,
                                        const char *what) {
    DAT_EVENT ev;
    DAT_LMR_TRIPLET l = local(src, 0, (size_t)rem->segment_length);
    DAT_RETURN r = dat_ep_post_rdma_write(c->ep, 1, &l, cookie(0x5EED), rem, DAT_COMPLETION_DEFAULT_FLAG);
    if (r != DAT_SUCCESS) {
        CHECK(DAT_GET_TYPE(r) == DAT_PROTECTION_VIOLATION || DAT_GET_TYPE(r) == DAT_PRIVILEGES_VIOLATION,
              "%s: the write was refused with %s", what, text(r));
        return;
    }
    if (!expect_event(c->req_evd, DAT_DTO_COMPLETION_EVENT, &ev, what))
        return;
    CHECK(ev.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS,
          "%s: an RDMA write through a destroyed context completed successfully", what);
    CHECK(ev.event_data.dto_completion_event_data.user_cookie.as_64 == 0x5EED, "%s: the cookie", what);
    CHECK(ev.event_data.dto_completion_event_data.ep_handle == c->ep, "%s: the event's EP", what);
    if (next_event(c->conn_evd, &ev, kTimeout) == DAT_SUCCESS)
        CHECK(ev.event_number == DAT_CONNECTION_EVENT_BROKEN || ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED,
              "%s: connection event 0x%x, expected BROKEN or DISCONNECTED", what, ev.event_number);
    else
        CHECK(0, "%s: the connection did not break", what);
}

/* Binds `rmr` to [off, off+len) of `b` over the connected client EP. */
static int bind_window(struct side *c, DAT_RMR_HANDLE rmr, struct buffer *b, size_t off, size_t len,
                       DAT_RMR_CONTEXT *ctx) {
    DAT_EVENT ev;
    DAT_LMR_TRIPLET t = local(b, off, len);
    DAT_RMR_COOKIE ck;
    ck.as_64 = 0xB1D;
    DAT_RETURN r = dat_rmr_bind(rmr, &t, DAT_MEM_PRIV_ALL_FLAG, c->ep, ck, DAT_COMPLETION_DEFAULT_FLAG, ctx);
    CHECK(r == DAT_SUCCESS, "dat_rmr_bind -> %s", text(r));
    if (r != DAT_SUCCESS || !expect_event(c->req_evd, DAT_RMR_BIND_COMPLETION_EVENT, &ev, "bind"))
        return 0;
    CHECK(ev.event_data.rmr_completion_event_data.rmr_handle == rmr, "the bind event names RMR %p, not %p",
          ev.event_data.rmr_completion_event_data.rmr_handle, rmr);
    CHECK(ev.event_data.rmr_completion_event_data.status == DAT_RMR_BIND_SUCCESS, "the bind failed: %d",
          ev.event_data.rmr_completion_event_data.status);
    CHECK(ev.event_data.rmr_completion_event_data.user_cookie.as_64 == 0xB1D, "the bind cookie");
    return 1;
}

/* ---- dat_lmr_create(3DAT), dat_lmr_free(3DAT) ------------------------------------ */

static void case_lmr(void) {
    struct side c, s;
    struct buffer local_only, remote_rw, src, target;
    DAT_LMR_PARAM p;
    DAT_HANDLE_TYPE type;
    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
    DAT_RMR_CONTEXT ctx = 0;
    REQUIRE_OK(open_side(&c));
    REQUIRE_OK(open_side(&s));

    /* "If mem_privileges does not specify remote Read and Write privileges,
     * rmr_context is not generated and NULL is returned." */
    REQUIRE_OK(make_buffer(&c, &local_only, 8192, DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG));
    CHECK(local_only.rmr_context == 0, "local-only LMR got rmr_context 0x%x", local_only.rmr_context);
    CHECK(local_only.registered_address <= (DAT_VADDR)(uintptr_t)local_only.data &&
              local_only.registered_address + local_only.registered_size >=
                  (DAT_VADDR)(uintptr_t)local_only.data + local_only.size,
          "registered [0x%llx, +%llu) does not cover the buffer", (unsigned long long)local_only.registered_address,
          (unsigned long long)local_only.registered_size);
    REQUIRE_OK(make_buffer(&c, &remote_rw, 8192, DAT_MEM_PRIV_ALL_FLAG));
    CHECK(remote_rw.rmr_context != 0, "remote privileges asked, no rmr_context generated");

    /* The 1.2 DAT_LMR_PARAM and its mask (whose bits 6..9 are one lower
     * than DAT 2.0's). */
    memset(&p, 0xAB, sizeof p);
    REQUIRE_OK(dat_lmr_query(remote_rw.lmr, DAT_LMR_FIELD_ALL, &p));
    CHECK(p.ia_handle == c.ia, "lmr_query: ia_handle %p, not %p", p.ia_handle, c.ia);
    CHECK(p.pz_handle == c.pz, "lmr_query: pz_handle %p, not %p", p.pz_handle, c.pz);
    CHECK(p.mem_type == DAT_MEM_TYPE_VIRTUAL && p.region_desc.for_va == remote_rw.data, "lmr_query: region");
    CHECK(p.length == 8192, "lmr_query: length %llu", (unsigned long long)p.length);
    CHECK(p.mem_priv == DAT_MEM_PRIV_ALL_FLAG, "lmr_query: mem_priv 0x%x", p.mem_priv);
    CHECK(p.lmr_context == remote_rw.lmr_context && p.rmr_context == remote_rw.rmr_context, "lmr_query: contexts");
    CHECK(p.registered_size == remote_rw.registered_size && p.registered_address == remote_rw.registered_address,
          "lmr_query: registered range");
    CHECK_TYPE(dat_lmr_query(remote_rw.lmr, (DAT_LMR_PARAM_MASK)0x400, &p), DAT_INVALID_PARAMETER);

    /* "Use of the handle of the destroyed LMR in any subsequent operation
     * except for dat_lmr_free() fails." */
    REQUIRE_OK(dat_lmr_free(local_only.lmr));
    CHECK_TYPE(dat_lmr_query(local_only.lmr, DAT_LMR_FIELD_ALL, &p), DAT_INVALID_HANDLE);
    CHECK_TYPE(dat_get_handle_type(local_only.lmr, &type), DAT_INVALID_HANDLE);
    /* Argument positions are DAT 1.2's (2.0 has va_type seventh). */
    {
        DAT_REGION_DESCRIPTION region;
        DAT_LMR_CONTEXT lc;
        DAT_RMR_CONTEXT rc;
        DAT_VLEN rs;
        DAT_VADDR ra;
        DAT_RETURN r;
        region.for_va = remote_rw.data;
        r = dat_lmr_create(c.ia, DAT_MEM_TYPE_VIRTUAL, region, 4096, c.pz, DAT_MEM_PRIV_ALL_FLAG, NULL, &lc, &rc, &rs,
                           &ra);
        CHECK(r == (DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG7),
              "dat_lmr_create with no lmr_handle pointer: %s, expected DAT_INVALID_ARG7", text(r));
    }

    /* "The LMR cannot be destroyed if it is in use by an RMR." */
    REQUIRE(connect_pair(&c, &s), "not connected");
    REQUIRE_OK(dat_rmr_create(c.pz, &rmr));
    REQUIRE(bind_window(&c, rmr, &remote_rw, 0, 4096, &ctx), "bind");
    CHECK_TYPE(dat_lmr_free(remote_rw.lmr), DAT_INVALID_STATE);
    REQUIRE_OK(dat_rmr_free(rmr));
    rmr = DAT_HANDLE_NULL;

    /* "Any DTO operation that uses the destroyed LMR after the dat_lmr_free()
     * is completed shall fail and report a protection violation." */
    {
        DAT_LMR_TRIPLET t = local(&remote_rw, 0, 64);
        DAT_EVENT ev;
        DAT_RETURN r;
        REQUIRE_OK(dat_lmr_free(remote_rw.lmr));
        r = dat_ep_post_send(c.ep, 1, &t, cookie(0xF12EE), DAT_COMPLETION_DEFAULT_FLAG);
        if (r != DAT_SUCCESS)
            CHECK(DAT_GET_TYPE(r) == DAT_PROTECTION_VIOLATION || DAT_GET_TYPE(r) == DAT_PRIVILEGES_VIOLATION,
                  "send from a freed LMR refused with %s", text(r));
        else if (expect_event(c.req_evd, DAT_DTO_COMPLETION_EVENT, &ev, "send from a freed LMR"))
            CHECK(ev.event_data.dto_completion_event_data.status == DAT_DTO_ERR_LOCAL_PROTECTION,
                  "send from a freed LMR completed with status %d", ev.event_data.dto_completion_event_data.status);
    }

    /* "The use of rmr_context of the destroyed LMR by a remote peer for an
     * RDMA DTO results in an error and broken connection." A fresh pair: the
     * send above may have broken the first. */
    close_side(&c);
    close_side(&s);
    REQUIRE_OK(open_side(&c));
    REQUIRE_OK(open_side(&s));
    REQUIRE(connect_pair(&c, &s), "not connected");
    REQUIRE_OK(make_buffer(&c, &src, 4096, DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG));
    REQUIRE_OK(make_buffer(&s, &target, 4096, DAT_MEM_PRIV_ALL_FLAG));
    {
        DAT_RMR_TRIPLET rem = remote(target.rmr_context, &target, 0, 512);
        REQUIRE_OK(dat_lmr_free(target.lmr));
        expect_remote_write_refused(&c, &src, &rem, "RDMA write to a freed LMR");
    }
out:
    close_side(&c);
    close_side(&s);
}

/* ---- dat_rmr_free(3DAT) --------------------------------------------------------------- */

static void case_rmr(void) {
    struct side c, s;
    struct buffer src, target;
    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL, unbound = DAT_HANDLE_NULL;
    DAT_RMR_PARAM p;
    DAT_RMR_CONTEXT ctx = 0;
    REQUIRE_OK(open_side(&c));
    REQUIRE_OK(open_side(&s));
    REQUIRE(connect_pair(&c, &s), "not connected");
    REQUIRE_OK(make_buffer(&c, &src, 4096, DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG));
    REQUIRE_OK(make_buffer(&s, &target, 8192, DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG));

    /* "dat_rmr_free() is allowed on either bound or unbound RMR." */
    REQUIRE_OK(dat_rmr_create(s.pz, &unbound));
    CHECK_OK(dat_rmr_free(unbound));
    CHECK_TYPE(dat_rmr_query(unbound, DAT_RMR_FIELD_ALL, &p), DAT_INVALID_HANDLE);

    REQUIRE_OK(dat_rmr_create(s.pz, &rmr));
    /* Argument positions are DAT 1.2's (2.0 has lmr_handle second, va_type fifth). */
    {
        DAT_LMR_TRIPLET t = local(&target, 4096, 1024);
        DAT_RMR_COOKIE ck;
        DAT_RETURN r;
        ck.as_64 = 0;
        r = dat_rmr_bind(rmr, &t, (DAT_MEM_PRIV_FLAGS)0x400, s.ep, ck, DAT_COMPLETION_DEFAULT_FLAG, &ctx);
        CHECK(r == (DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG3),
              "dat_rmr_bind with undefined privileges: %s, expected DAT_INVALID_ARG3", text(r));
        r = dat_rmr_bind(rmr, &t, DAT_MEM_PRIV_ALL_FLAG, s.ep, ck, DAT_COMPLETION_DEFAULT_FLAG, NULL);
        CHECK(r == (DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG7),
              "dat_rmr_bind with no context pointer: %s, expected DAT_INVALID_ARG7", text(r));
    }
    REQUIRE(bind_window(&s, rmr, &target, 4096, 1024, &ctx), "bind");
    REQUIRE_OK(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &p));
    CHECK(p.ia_handle == s.ia && p.pz_handle == s.pz, "rmr_query: handles");
    CHECK(p.rmr_context == ctx, "rmr_query: context 0x%x, bound 0x%x", p.rmr_context, ctx);
    CHECK(p.lmr_triplet.lmr_context == target.lmr_context &&
              p.lmr_triplet.virtual_address == (DAT_VADDR)(uintptr_t)(target.data + 4096) &&
              p.lmr_triplet.segment_length == 1024,
          "rmr_query: the bound triplet");
    /* A write through the bound window lands. */
    {
        DAT_LMR_TRIPLET l = local(&src, 0, 256);
        DAT_RMR_TRIPLET rem = remote(ctx, &target, 4096 + 128, 256);
        DAT_EVENT ev;
        memset(src.data, 0x7A, 256);
        REQUIRE_OK(dat_ep_post_rdma_write(c.ep, 1, &l, cookie(1), &rem, DAT_COMPLETION_DEFAULT_FLAG));
        if (expect_event(c.req_evd, DAT_DTO_COMPLETION_EVENT, &ev, "RDMA write through the window"))
            CHECK(ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS &&
                      ev.event_data.dto_completion_event_data.transfered_length == 256,
                  "RDMA write through the window: status %d, %llu bytes",
                  ev.event_data.dto_completion_event_data.status,
                  (unsigned long long)ev.event_data.dto_completion_event_data.transfered_length);
        CHECK(target.data[4096 + 128] == 0x7A && target.data[4096 + 383] == 0x7A && target.data[4096 + 384] == 0,
              "the written bytes did not land where the triplet's target_address says");
    }
    /* "If RMR is bound, dat_rmr_free() unbinds ... and then free RMR." Any
     * later remote use of its context fails and breaks the connection. */
    CHECK_OK(dat_rmr_free(rmr));
    CHECK_TYPE(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &p), DAT_INVALID_HANDLE);
    {
        DAT_RMR_TRIPLET rem = remote(ctx, &target, 4096, 512);
        expect_remote_write_refused(&c, &src, &rem, "RDMA write through a freed RMR");
    }
out:
    close_side(&c);
    close_side(&s);
}

/* ---- dat_ep_free(3DAT) ------------------------------------------------------------------ */

/* An RSP on a qualifier of its own. A qualifier is a TCP port here, and one
 * in the kernel's ephemeral range (32768 and up by default) may be held by
 * another test's connection or PSP: the tries stay below 10000, and a
 * qualifier in use is passed over. */
static DAT_RETURN rsp_create_on_a_free_qual(struct side *s, DAT_CONN_QUAL *qual, DAT_RSP_HANDLE *rsp) {
    DAT_RETURN r = DAT_CONN_QUAL_IN_USE;
    for (unsigned i = 0; i < 64 && DAT_GET_TYPE(r) == DAT_CONN_QUAL_IN_USE; ++i) {
        *qual = 2000 + ((unsigned)getpid() + 4099u * i) % 8000u;
        r = dat_rsp_create(s->ia, *qual, s->ep, s->cr_evd, rsp);
    }
    return r;
}

static void case_ep_free(void) {
    struct side c, s;
    DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
    DAT_CONN_QUAL qual = 0;
    DAT_EVENT ev;
    DAT_CR_PARAM crp;
    DAT_RSP_PARAM rp;
    REQUIRE_OK(open_side(&c));
    REQUIRE_OK(open_side(&s));

    /* Reserved: "the Consumer shall first destroy the associated Reserved
     * Service Point that transitions the Endpoint into the Unconnected state
     * where the Endpoint can be destroyed." */
    REQUIRE_OK(rsp_create_on_a_free_qual(&s, &qual, &rsp));
    REQUIRE_OK(dat_rsp_query(rsp, DAT_RSP_FIELD_ALL, &rp));
    CHECK(rp.ia_handle == s.ia && rp.ep_handle == s.ep && rp.evd_handle == s.cr_evd && rp.conn_qual == qual,
          "rsp_query: the parameters it was created with");
    CHECK(ep_state(s.ep) == DAT_EP_STATE_RESERVED, "state %d, expected RESERVED", ep_state(s.ep));
    CHECK_TYPE(dat_ep_free(s.ep), DAT_INVALID_STATE);
    REQUIRE_OK(dat_rsp_free(rsp));
    rsp = DAT_HANDLE_NULL;
    CHECK(ep_state(s.ep) == DAT_EP_STATE_UNCONNECTED, "state %d after rsp_free", ep_state(s.ep));
    CHECK_OK(dat_ep_free(s.ep));
    CHECK_TYPE(dat_ep_query(s.ep, DAT_EP_FIELD_ALL, NULL), DAT_INVALID_HANDLE);
    REQUIRE_OK(dat_ep_create(s.ia, s.pz, s.recv_evd, s.req_evd, s.conn_evd, NULL, &s.ep));

    /* Passive Connection Pending: "the Consumer shall first reject the
     * associated Connection Request" -- with DAT 1.2's one-argument reject. */
    REQUIRE_OK(dat_rsp_create(s.ia, qual, s.ep, s.cr_evd, &rsp));
    REQUIRE_OK(dat_ep_connect(c.ep, (DAT_IA_ADDRESS_PTR)&s.addr, qual, kTimeout, 0, NULL, DAT_QOS_BEST_EFFORT,
                              DAT_CONNECT_DEFAULT_FLAG));
    REQUIRE(expect_event(s.cr_evd, DAT_CONNECTION_REQUEST_EVENT, &ev, "request at the RSP"), "no request");
    CHECK(ev.event_data.cr_arrival_event_data.sp_handle.rsp_handle == rsp ||
              ev.event_data.cr_arrival_event_data.sp_handle.rsp_handle == DAT_HANDLE_NULL,
          "the request names service point %p, not the RSP %p",
          ev.event_data.cr_arrival_event_data.sp_handle.rsp_handle, rsp);
    REQUIRE_OK(dat_cr_query(ev.event_data.cr_arrival_event_data.cr_handle, DAT_CR_FIELD_ALL, &crp));
    CHECK(crp.local_ep_handle == s.ep, "cr_query: local_ep_handle %p, not the RSP's EP %p", crp.local_ep_handle, s.ep);
    CHECK(ep_state(s.ep) == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING, "state %d, expected PASSIVE_CONNECTION_PENDING",
          ep_state(s.ep));
    CHECK_TYPE(dat_ep_free(s.ep), DAT_INVALID_STATE);
    REQUIRE_OK(dat_cr_reject(ev.event_data.cr_arrival_event_data.cr_handle));
    CHECK_TYPE(dat_cr_query(ev.event_data.cr_arrival_event_data.cr_handle, DAT_CR_FIELD_ALL, &crp), DAT_INVALID_HANDLE);
    {
        DAT_HANDLE_TYPE type;
        CHECK_TYPE(dat_get_handle_type(ev.event_data.cr_arrival_event_data.cr_handle, &type), DAT_INVALID_HANDLE);
    }
    CHECK(ep_state(s.ep) == DAT_EP_STATE_UNCONNECTED, "state %d after the reject", ep_state(s.ep));
    CHECK(expect_event(c.conn_evd, DAT_CONNECTION_EVENT_PEER_REJECTED, &ev, "client of the rejected request"),
          "client not told of the reject");
    CHECK_OK(dat_ep_free(s.ep));
    CHECK_OK(dat_rsp_free(rsp));
    rsp = DAT_HANDLE_NULL;

    /* Connected: free without disconnecting (as Open MPI's udapl BTL does);
     * the peer's connection ends. */
    REQUIRE_OK(dat_ep_create(s.ia, s.pz, s.recv_evd, s.req_evd, s.conn_evd, NULL, &s.ep));
    REQUIRE_OK(dat_ep_reset(c.ep));
    REQUIRE(connect_pair(&c, &s), "not connected");
    {
        struct buffer rb;
        DAT_LMR_TRIPLET t;
        DAT_HANDLE_TYPE type;
        REQUIRE_OK(make_buffer(&c, &rb, 4096, DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG));
        t = local(&rb, 0, 64);
        REQUIRE_OK(dat_ep_post_recv(c.ep, 1, &t, cookie(0xDEAD), DAT_COMPLETION_DEFAULT_FLAG));
        CHECK_OK(dat_ep_free(c.ep));
        /* A completion of the freed EP may still be dequeued ("The Consumer
         * must be ready for all completions that are not dequeued yet"): it
         * must not name a live handle. */
        while (next_event(c.recv_evd, &ev, kQuiet) == DAT_SUCCESS)
            CHECK(dat_get_handle_type(ev.event_data.dto_completion_event_data.ep_handle, &type) != DAT_SUCCESS,
                  "a completion of a freed EP names a live handle %p",
                  ev.event_data.dto_completion_event_data.ep_handle);
    }
    CHECK_TYPE(dat_ep_disconnect(c.ep, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_HANDLE);
    if (next_event(s.conn_evd, &ev, kTimeout) == DAT_SUCCESS)
        CHECK(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED || ev.event_number == DAT_CONNECTION_EVENT_BROKEN,
              "peer of a freed EP: event 0x%x", ev.event_number);
    else
        CHECK(0, "the peer of a freed connected EP saw no end of its connection");
out:
    if (rsp)
        dat_rsp_free(rsp);
    close_side(&c);
    close_side(&s);
}

/* ---- dat_ep_disconnect(3DAT) -------------------------------------------------------- */

static void case_ep_disconnect(void) {
    struct side c, s;
    struct buffer rb;
    DAT_EVENT ev;
    int round;
    REQUIRE_OK(open_side(&c));
    REQUIRE_OK(open_side(&s));
    /* "Disconnecting an Endpoint in DAT_EP_STATE_UNCONNECTED ... is disallowed." */
    CHECK_TYPE(dat_ep_disconnect(c.ep, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_STATE);
    CHECK_TYPE(dat_ep_disconnect(c.ep, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_STATE);
    CHECK(no_event(c.conn_evd), "an event after a refused disconnect");
    REQUIRE_OK(make_buffer(&c, &rb, 4096, DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG));

    for (round = 0; round < 2; ++round) {
        const DAT_CLOSE_FLAGS how = round ? DAT_CLOSE_ABRUPT_FLAG : DAT_CLOSE_GRACEFUL_FLAG;
        const char *name = round ? "abrupt" : "graceful";
        DAT_LMR_TRIPLET t[2];
        t[0] = local(&rb, 0, 100);
        t[1] = local(&rb, 1000, 100);
        if (round) {
            REQUIRE_OK(dat_ep_reset(c.ep));
            REQUIRE_OK(dat_ep_reset(s.ep));
        }
        REQUIRE(connect_pair(&c, &s), "not connected");
        REQUIRE_OK(dat_ep_post_recv(c.ep, 2, t, cookie(0xF1 + round), DAT_COMPLETION_DEFAULT_FLAG));
        CHECK_TYPE(dat_ep_disconnect(c.ep, (DAT_CLOSE_FLAGS)7), DAT_INVALID_PARAMETER);
        CHECK_OK(dat_ep_disconnect(c.ep, how));
        /* "The successful completion of the disconnect is reported ... through a
         * DAT_CONNECTION_EVENT_DISCONNECTED event on connect_evd_handle." */
        if (expect_event(c.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED, &ev, name))
            CHECK(ev.event_data.connect_event_data.ep_handle == c.ep, "%s: DISCONNECTED names the wrong EP", name);
        CHECK(ep_state(c.ep) == DAT_EP_STATE_DISCONNECTED, "%s: state %d", name, ep_state(c.ep));
        /* "For abrupt disconnect, all outstanding DTOs ... are completed
         * unsuccessfully": the posted receive is flushed. */
        if (expect_event(c.recv_evd, DAT_DTO_COMPLETION_EVENT, &ev, name)) {
            CHECK(ev.event_data.dto_completion_event_data.status == DAT_DTO_ERR_FLUSHED,
                  "%s: the receive completed with status %d", name, ev.event_data.dto_completion_event_data.status);
            CHECK(ev.event_data.dto_completion_event_data.user_cookie.as_64 == 0xF1u + round, "%s: cookie", name);
        }
        /* "Disconnecting an unconnected Disconnected Endpoint is no-op." */
        CHECK_OK(dat_ep_disconnect(c.ep, DAT_CLOSE_GRACEFUL_FLAG));
        CHECK_OK(dat_ep_disconnect(c.ep, DAT_CLOSE_ABRUPT_FLAG));
        CHECK(no_event(c.conn_evd), "%s: an event after a no-op disconnect", name);
        {
            /* A subtype past DAT 2.0's inserted DAT_INVALID_HANDLE_CSP is 1.2's. */
            DAT_RETURN r = dat_ep_connect(c.ep, (DAT_IA_ADDRESS_PTR)&s.addr, 1, kTimeout, 0, NULL, DAT_QOS_BEST_EFFORT,
                                          DAT_CONNECT_DEFAULT_FLAG);
            CHECK(r == (DAT_CLASS_ERROR | DAT_INVALID_STATE | DAT_INVALID_STATE_EP_DISCONNECTED),
                  "%s: connect of a disconnected EP: %s", name, text(r));
        }
        if (next_event(s.conn_evd, &ev, kTimeout) == DAT_SUCCESS)
            CHECK(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED, "%s: server event 0x%x", name, ev.event_number);
        else
            CHECK(0, "%s: the server's connection did not end", name);
    }
out:
    close_side(&c);
    close_side(&s);
}

/* ---- data transfer through the 1.2 structures --------------------------------------------- */

static void case_dto(void) {
    struct side c, s;
    struct buffer cb, sb;
    DAT_EVENT ev;
    DAT_LMR_TRIPLET t[2];
    DAT_EP_PARAM ep;
    DAT_IA_ATTR ia;
    DAT_PROVIDER_ATTR pa;
    size_t i;
    REQUIRE_OK(open_side(&c));
    REQUIRE_OK(open_side(&s));
    REQUIRE_OK(dat_ia_query(c.ia, NULL, DAT_IA_ALL, &ia, DAT_PROVIDER_FIELD_ALL, &pa));
    CHECK(ia.max_message_size >= 65536 && ia.max_iov_segments_per_dto >= 2 && ia.max_evd_qlen > 0,
          "ia_query: max_message_size %llu, max_iov_segments_per_dto %d", (unsigned long long)ia.max_message_size,
          ia.max_iov_segments_per_dto);
    CHECK(pa.dapl_version_major == 1 && pa.dapl_version_minor == 2, "provider attr: DAT API %u.%u",
          pa.dapl_version_major, pa.dapl_version_minor);
    REQUIRE(connect_pair(&c, &s), "not connected");
    REQUIRE_OK(dat_ep_query(c.ep, DAT_EP_FIELD_ALL, &ep));
    CHECK(ep.ia_handle == c.ia && ep.pz_handle == c.pz && ep.recv_evd_handle == c.recv_evd &&
              ep.request_evd_handle == c.req_evd && ep.connect_evd_handle == c.conn_evd && ep.srq_handle == NULL,
          "ep_query: the handles are not the 1.2 ones");
    CHECK(ep.ep_state == DAT_EP_STATE_CONNECTED, "ep_query: state %d", ep.ep_state);
    CHECK(ep.remote_ia_address_ptr && ep.remote_ia_address_ptr->sa_family == AF_INET, "ep_query: remote address");
    /* DAT 1.2's EP mask bits 2..10 are DAT 2.0's 3..11: one field asked for. */
    memset(&ep, 0, sizeof ep);
    REQUIRE_OK(dat_ep_query(c.ep, DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR | DAT_EP_FIELD_CONNECT_EVD_HANDLE, &ep));
    CHECK(ep.remote_ia_address_ptr && ep.remote_ia_address_ptr->sa_family == AF_INET,
          "ep_query(DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR): no remote address");
    CHECK(ep.connect_evd_handle == c.conn_evd, "ep_query(DAT_EP_FIELD_CONNECT_EVD_HANDLE): %p, not %p",
          ep.connect_evd_handle, c.conn_evd);

    REQUIRE_OK(make_buffer(&c, &cb, 65536, DAT_MEM_PRIV_ALL_FLAG));
    REQUIRE_OK(make_buffer(&s, &sb, 65536, DAT_MEM_PRIV_ALL_FLAG));
    for (i = 0; i < cb.size; ++i)
        cb.data[i] = (unsigned char)(i * 7 + 3);
    /* A two-segment receive and a two-segment send: 24-byte 1.2 triplets. */
    t[0] = local(&sb, 100, 1000);
    t[1] = local(&sb, 5000, 3000);
    REQUIRE_OK(dat_ep_post_recv(s.ep, 2, t, cookie(0xAA), DAT_COMPLETION_DEFAULT_FLAG));
    t[0] = local(&cb, 0, 600);
    t[1] = local(&cb, 600, 1400);
    REQUIRE_OK(dat_ep_post_send(c.ep, 2, t, cookie(0xBB), DAT_COMPLETION_DEFAULT_FLAG));
    if (expect_event(c.req_evd, DAT_DTO_COMPLETION_EVENT, &ev, "send")) {
        CHECK(ev.event_data.dto_completion_event_data.user_cookie.as_64 == 0xBB, "send cookie");
        CHECK(ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS, "send status");
        CHECK(ev.event_data.dto_completion_event_data.ep_handle == c.ep, "send: the event's EP");
    }
    if (expect_event(s.recv_evd, DAT_DTO_COMPLETION_EVENT, &ev, "receive")) {
        CHECK(ev.event_data.dto_completion_event_data.user_cookie.as_64 == 0xAA, "receive cookie");
        CHECK(ev.event_data.dto_completion_event_data.transfered_length == 2000, "received %llu bytes",
              (unsigned long long)ev.event_data.dto_completion_event_data.transfered_length);
        CHECK(ev.event_data.dto_completion_event_data.ep_handle == s.ep, "receive: the event's EP");
    }
    CHECK(memcmp(sb.data + 100, cb.data, 1000) == 0 && memcmp(sb.data + 5000, cb.data + 1000, 1000) == 0,
          "the received bytes are not the sent ones, scattered as posted");

    /* RDMA write and read with DAT_RMR_TRIPLET's target_address. */
    {
        DAT_RMR_TRIPLET rem = remote(sb.rmr_context, &sb, 20000, 8192);
        t[0] = local(&cb, 4096, 8192);
        REQUIRE_OK(dat_ep_post_rdma_write(c.ep, 1, t, cookie(0xCC), &rem, DAT_COMPLETION_DEFAULT_FLAG));
        if (expect_event(c.req_evd, DAT_DTO_COMPLETION_EVENT, &ev, "RDMA write"))
            CHECK(ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS &&
                      ev.event_data.dto_completion_event_data.user_cookie.as_64 == 0xCC,
                  "RDMA write completion");
        CHECK(memcmp(sb.data + 20000, cb.data + 4096, 8192) == 0, "the RDMA-written bytes");
        memset(cb.data + 40000, 0, 4096);
        rem = remote(sb.rmr_context, &sb, 100, 4096);
        t[0] = local(&cb, 40000, 4096);
        REQUIRE_OK(dat_ep_post_rdma_read(c.ep, 1, t, cookie(0xDD), &rem, DAT_COMPLETION_DEFAULT_FLAG));
        if (expect_event(c.req_evd, DAT_DTO_COMPLETION_EVENT, &ev, "RDMA read"))
            CHECK(ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS &&
                      ev.event_data.dto_completion_event_data.transfered_length == 4096,
                  "RDMA read completion");
        CHECK(memcmp(cb.data + 40000, sb.data + 100, 4096) == 0, "the RDMA-read bytes");
        /* A 1.2 segment longer than DAT 2.0 lengths can say is refused. */
        t[0] = local(&cb, 0, 64);
        t[0].segment_length = (DAT_VLEN)1 << 33;
        CHECK_TYPE(dat_ep_post_send(c.ep, 1, t, cookie(0xEE), DAT_COMPLETION_DEFAULT_FLAG), DAT_INVALID_PARAMETER);
    }
    /* A CNO reports the 1.2 handle of the EVD that triggered it. */
    {
        DAT_CNO_HANDLE cno;
        DAT_EVD_HANDLE evd, which = DAT_HANDLE_NULL;
        DAT_EVD_PARAM ep_;
        DAT_CNO_PARAM cp;
        DAT_EVENT se;
        memset(&se, 0, sizeof se);
        se.event_number = DAT_SOFTWARE_EVENT;
        REQUIRE_OK(dat_cno_create(c.ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno));
        REQUIRE_OK(dat_evd_create(c.ia, 4, cno, DAT_EVD_SOFTWARE_FLAG, &evd));
        REQUIRE_OK(dat_evd_query(evd, DAT_EVD_FIELD_ALL, &ep_));
        CHECK(ep_.cno_handle == cno && ep_.ia_handle == c.ia && ep_.evd_flags == DAT_EVD_SOFTWARE_FLAG,
              "evd_query: cno %p (not %p), flags 0x%x", ep_.cno_handle, cno, ep_.evd_flags);
        REQUIRE_OK(dat_cno_query(cno, DAT_CNO_FIELD_ALL, &cp));
        CHECK(cp.ia_handle == c.ia && cp.agent.proxy_agent_func == NULL, "cno_query");
        REQUIRE_OK(dat_evd_post_se(evd, &se));
        CHECK_OK(dat_cno_wait(cno, kTimeout, &which));
        CHECK(which == evd, "cno_wait: EVD %p, not %p", which, evd);
        CHECK_OK(dat_evd_free(evd));
        CHECK_OK(dat_cno_free(cno));
        CHECK_TYPE(dat_cno_free(cno), DAT_INVALID_HANDLE);
    }
    /* A software event makes the round trip through the 1.2 DAT_EVENT. */
    {
        DAT_EVENT se;
        memset(&se, 0, sizeof se);
        se.event_number = DAT_SOFTWARE_EVENT;
        se.event_data.software_event_data.pointer = &ia;
        DAT_EVD_HANDLE evd;
        REQUIRE_OK(dat_evd_create(c.ia, 4, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd));
        REQUIRE_OK(dat_evd_post_se(evd, &se));
        REQUIRE_OK(dat_evd_dequeue(evd, &ev));
        CHECK(ev.event_number == DAT_SOFTWARE_EVENT && ev.evd_handle == evd &&
                  ev.event_data.software_event_data.pointer == &ia,
              "software event");
        CHECK_TYPE(dat_evd_dequeue(evd, &ev), DAT_QUEUE_EMPTY);
        CHECK_OK(dat_evd_free(evd));
    }
out:
    close_side(&c);
    close_side(&s);
}

/* ---- hostile and stale handles; the provider table at the handle's first word -------- */

static void case_handles(void) {
    struct side c;
    DAT_EP_STATE st;
    DAT_BOOLEAN a, b;
    DAT_CONTEXT ctx;
    DAT_HANDLE_TYPE type;
    DAT_PZ_HANDLE pz;
    const char *major, *minor;
    void *garbage = calloc(1, 256);
    REQUIRE_OK(open_side(&c));

    /* The DAT 1.2 provider table is the first word of every handle: a program
     * built against headers whose dat_* calls are macros calls through it. */
    REQUIRE(DAT_HANDLE_TO_PROVIDER(c.ep) == DAT_HANDLE_TO_PROVIDER(c.ia), "handles of one IA, two tables");
    CHECK_OK(DAT_EP_GET_STATUS(c.ep, &st, &a, &b));
    CHECK(st == DAT_EP_STATE_UNCONNECTED, "state through the table: %d", st);
    CHECK_OK(DAT_PZ_CREATE(c.ia, &pz));
    CHECK_OK(DAT_PZ_FREE(pz));

    /* Freed, foreign, garbage and wrong-type handles: DAT_INVALID_HANDLE. */
    CHECK_TYPE(dat_pz_free(pz), DAT_INVALID_HANDLE);
    CHECK_TYPE(dat_ep_free(garbage), DAT_INVALID_HANDLE);
    CHECK_TYPE(dat_ep_free(NULL), DAT_INVALID_HANDLE);
    CHECK_TYPE(dat_ep_free((DAT_EP_HANDLE)(uintptr_t)3), DAT_INVALID_HANDLE);
    CHECK_TYPE(dat_ep_free(c.pz), DAT_INVALID_HANDLE);
    CHECK_TYPE(dat_evd_dequeue(c.ep, NULL), DAT_INVALID_HANDLE);
    CHECK_TYPE(dat_ia_close(c.pz, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_HANDLE);
    CHECK_TYPE(dat_ep_create(c.ia, garbage, c.recv_evd, c.req_evd, c.conn_evd, NULL, &c.ep), DAT_INVALID_HANDLE);

    /* Contexts and types live in the 1.2 handle. */
    ctx.as_64 = 0x1234567890ull;
    CHECK_OK(dat_set_consumer_context(c.ep, ctx));
    ctx.as_64 = 0;
    CHECK_OK(dat_get_consumer_context(c.ep, &ctx));
    CHECK(ctx.as_64 == 0x1234567890ull, "context 0x%llx", (unsigned long long)ctx.as_64);
    CHECK_OK(dat_get_handle_type(c.recv_evd, &type));
    CHECK(type == DAT_HANDLE_TYPE_EVD, "handle type %d", type);
    CHECK_OK(dat_get_handle_type(c.async_evd, &type));
    CHECK(type == DAT_HANDLE_TYPE_EVD, "the async EVD's handle type %d", type);

    /* DAT 1.2's codes: DAT_NOT_IMPLEMENTED is 0xFFFF0000 (Linux's value). */
    CHECK_OK(dat_strerror(DAT_NOT_IMPLEMENTED, &major, &minor));
    CHECK(strcmp(major, "DAT_NOT_IMPLEMENTED") == 0, "strerror(DAT_NOT_IMPLEMENTED) = %s", major);
    CHECK_OK(dat_strerror(DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_RO_COOKIE, &major, &minor));
    CHECK(strcmp(minor, "DAT_INVALID_RO_COOKIE") == 0, "strerror minor = %s", minor);
    CHECK_OK(dat_strerror(DAT_CLASS_ERROR | DAT_INVALID_STATE | DAT_INVALID_STATE_SRQ_IN_USE, &major, &minor));
    CHECK(strcmp(minor, "DAT_INVALID_STATE_SRQ_IN_USE") == 0, "strerror minor = %s", minor);
    CHECK_TYPE(dat_strerror(0x00150000, &major, &minor), DAT_INVALID_PARAMETER);

    CHECK_OK(dat_ia_close(c.ia, DAT_CLOSE_ABRUPT_FLAG));
    /* Everything of a closed IA is gone with it. */
    CHECK_TYPE(dat_ep_free(c.ep), DAT_INVALID_HANDLE);
    CHECK_TYPE(dat_get_handle_type(c.ep, &type), DAT_INVALID_HANDLE);
    CHECK_TYPE(dat_get_consumer_context(c.async_evd, &ctx), DAT_INVALID_HANDLE);
    CHECK_TYPE(dat_evd_free(c.recv_evd), DAT_INVALID_HANDLE);
    CHECK_TYPE(dat_ia_close(c.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_HANDLE);
    c.ia = DAT_HANDLE_NULL;
out:
    free(garbage);
    close_side(&c);
}

/* dat_registry_list_providers(3DAT): "an IA can be opened successfully as long as at least one
 * Provider entry returned by dat_registry_list_providers() matches the ia_name,
 * dapl_version_major, and is_thread_safe fields exactly, and has a dapl_version_minor that is equal
 * to or greater than the version requested". This library serves DAT 1.2: its list says so, and it
 * opens nothing for another major version or a newer minor one. */
static void case_registry(void) {
    static DAT_PROVIDER_INFO infos[256];
    DAT_PROVIDER_INFO *list[256];
    DAT_COUNT n = 0, i;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    int listed = 0;
    for (i = 0; i < 256; ++i)
        list[i] = &infos[i];
    REQUIRE_OK(dat_registry_list_providers(256, &n, list));
    REQUIRE(n > 0 && n <= 256, "%d entries", (int)n);
    for (i = 0; i < n; ++i) {
        CHECK(list[i]->dapl_version_major == DAT_VERSION_MAJOR && list[i]->dapl_version_minor == DAT_VERSION_MINOR,
              "entry %s: DAT API %u.%u", list[i]->ia_name, list[i]->dapl_version_major, list[i]->dapl_version_minor);
        listed |= strcmp(list[i]->ia_name, ia_name) == 0;
    }
    CHECK(listed, "%s is not listed", ia_name);
    CHECK_TYPE(dat_ia_openv(ia_name, 8, &async, &ia, 2, 0, DAT_FALSE), DAT_PROVIDER_NOT_FOUND);
    CHECK_TYPE(dat_ia_openv(ia_name, 8, &async, &ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR + 1, DAT_FALSE),
               DAT_PROVIDER_NOT_FOUND);
    CHECK(ia == DAT_HANDLE_NULL, "a refused open wrote the IA handle");
    CHECK_OK(dat_ia_openv(ia_name, 8, &async, &ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR - 1, DAT_FALSE));
    if (ia != DAT_HANDLE_NULL)
        CHECK_OK(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG));
out:;
}

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        void (*run)(void);
    } cases[] = {
        {"lmr", case_lmr}, {"rmr", case_rmr},         {"ep_free", case_ep_free},  {"ep_disconnect", case_ep_disconnect},
        {"dto", case_dto}, {"handles", case_handles}, {"registry", case_registry}};
    size_t i;
    if (argc < 2) {
        fprintf(stderr, "usage: %s <case> [ia_name]\n", argv[0]);
        return 2;
    }
    if (argc > 2)
        ia_name = argv[2];
    for (i = 0; i < sizeof cases / sizeof cases[0]; ++i)
        if (strcmp(argv[1], cases[i].name) == 0) {
            cases[i].run();
            printf("%s: %d checks, %d failed\n", argv[1], checks, failures);
            return failures || !checks ? 1 : 0;
        }
    fprintf(stderr, "%s: no case %s\n", argv[0], argv[1]);
    return 2;
}
