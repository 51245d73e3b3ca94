/*
 * A DAT ping-pong built twice from this file: against include/dat with
 * -ldat (DAT 1.2, -DPP_DAT12) and against include/dat2 with -ldat2 (DAT
 * 2.0), to show that programs of both APIs run at once on the same IA names
 * and talk to each other (interop.sh).
 *
 *   pingpong server <ia> <qual> <rounds>
 *   pingpong client <ia> <qual> <rounds> <server ip>
 *
 * Each round the client RDMA-writes a pattern into the server's buffer and
 * sends a message; the server checks the pattern, writes one back and
 * answers. Prints "pingpong <api> <role>: <n> rounds verified" on success.
 */
#ifdef PP_DAT12
#include <dat/udat.h>
#define PP_API "1.2"
#else
#include <dat2/udat.h>
#define PP_API "2.0"
#endif

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF 65536
#define TIMEOUT 10000000

static const char *role;

static void die(const char *what, DAT_RETURN r) {
    const char *major = "", *minor = "";
    dat_strerror(r, &major, &minor);
    fprintf(stderr, "pingpong %s %s: %s: %s %s\n", PP_API, role, what, major, minor);
    exit(1);
}

#define TRY(call)                                                                                                      \
    do {                                                                                                               \
        DAT_RETURN r_ = (call);                                                                                        \
        if (r_ != DAT_SUCCESS)                                                                                         \
            die(#call, r_);                                                                                            \
    } while (0)

static DAT_IA_HANDLE ia;
static DAT_EVD_HANDLE recv_evd, req_evd, conn_evd, cr_evd;
static DAT_PZ_HANDLE pz;
static DAT_EP_HANDLE ep;
static unsigned char *data, *msg_in, *msg_out; /* data: the RDMA target; msgs: send/recv */
static DAT_LMR_CONTEXT lmr_context;
static DAT_RMR_CONTEXT rmr_context;

struct peer_info {
    DAT_UINT64 address;
    DAT_UINT32 rmr_context;
    DAT_UINT32 round;
};

static void register_memory(void) {
    DAT_REGION_DESCRIPTION region;
    DAT_LMR_HANDLE lmr;
    DAT_VLEN size;
    DAT_VADDR address;
    void *p = NULL;
    if (posix_memalign(&p, 4096, 2 * BUF))
        die("posix_memalign", DAT_INSUFFICIENT_RESOURCES);
    data = p;
    memset(data, 0, 2 * BUF);
    msg_in = data + BUF;
    msg_out = data + BUF + 4096;
    region.for_va = data;
#ifdef PP_DAT12
    TRY(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, 2 * BUF, pz, DAT_MEM_PRIV_ALL_FLAG, &lmr, &lmr_context,
                       &rmr_context, &size, &address));
#else
    TRY(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, 2 * BUF, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr,
                       &lmr_context, &rmr_context, &size, &address));
#endif
}

static DAT_LMR_TRIPLET seg(unsigned char *p, size_t len) {
    DAT_LMR_TRIPLET t;
    memset(&t, 0, sizeof t);
    t.lmr_context = lmr_context;
    t.virtual_address = (DAT_VADDR)(uintptr_t)p;
    t.segment_length = (DAT_VLEN)len;
    return t;
}

static DAT_EVENT next(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want) {
    DAT_EVENT ev;
    DAT_COUNT more;
    TRY(dat_evd_wait(evd, TIMEOUT, 1, &ev, &more));
    if (ev.event_number != want) {
        fprintf(stderr, "pingpong %s %s: event 0x%x, expected 0x%x\n", PP_API, role, ev.event_number, want);
        exit(1);
    }
    if (want == DAT_DTO_COMPLETION_EVENT && ev.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS) {
        fprintf(stderr, "pingpong %s %s: DTO failed, status %d\n", PP_API, role,
                ev.event_data.dto_completion_event_data.status);
        exit(1);
    }
    return ev;
}

static DAT_DTO_COOKIE cookie(DAT_UINT64 v) {
    DAT_DTO_COOKIE c;
    c.as_64 = v;
    return c;
}

static void post_recv(void) {
    DAT_LMR_TRIPLET t = seg(msg_in, sizeof(struct peer_info));
    TRY(dat_ep_post_recv(ep, 1, &t, cookie(1), DAT_COMPLETION_DEFAULT_FLAG));
}

static void send_info(DAT_UINT32 round) {
    struct peer_info info = {(DAT_UINT64)(uintptr_t)data, rmr_context, round};
    DAT_LMR_TRIPLET t = seg(msg_out, sizeof info);
    memcpy(msg_out, &info, sizeof info);
    TRY(dat_ep_post_send(ep, 1, &t, cookie(2), DAT_COMPLETION_DEFAULT_FLAG));
    next(req_evd, DAT_DTO_COMPLETION_EVENT);
}

static struct peer_info recv_info(void) {
    struct peer_info info;
    DAT_EVENT ev = next(recv_evd, DAT_DTO_COMPLETION_EVENT);
    if (ev.event_data.dto_completion_event_data.user_cookie.as_64 != 1) {
        fprintf(stderr, "pingpong %s %s: a completion of cookie %llu, expected the receive\n", PP_API, role,
                (unsigned long long)ev.event_data.dto_completion_event_data.user_cookie.as_64);
        exit(1);
    }
    memcpy(&info, msg_in, sizeof info);
    post_recv();
    return info;
}

static unsigned char pattern(DAT_UINT32 round, size_t i, int from_client) {
    return (unsigned char)(i * 131 + round * 7 + from_client * 77);
}

static void rdma_write(const struct peer_info *peer, DAT_UINT32 round, int from_client) {
    DAT_RMR_TRIPLET remote;
    size_t i, len = 1024 + (round * 61) % 8192;
    DAT_LMR_TRIPLET t = seg(data + BUF / 2, len);
    for (i = 0; i < len; ++i)
        data[BUF / 2 + i] = pattern(round, i, from_client);
    memset(&remote, 0, sizeof remote);
    remote.rmr_context = peer->rmr_context;
#ifdef PP_DAT12
    remote.target_address = peer->address;
#else
    remote.virtual_address = peer->address;
#endif
    remote.segment_length = (DAT_VLEN)len;
    TRY(dat_ep_post_rdma_write(ep, 1, &t, cookie(3), &remote, DAT_COMPLETION_DEFAULT_FLAG));
    next(req_evd, DAT_DTO_COMPLETION_EVENT);
}

static void check(DAT_UINT32 round, int from_client) {
    size_t i, len = 1024 + (round * 61) % 8192;
    for (i = 0; i < len; ++i)
        if (data[i] != pattern(round, i, from_client)) {
            fprintf(stderr, "pingpong %s %s: round %u: byte %zu is wrong\n", PP_API, role, round, i);
            exit(1);
        }
}

int main(int argc, char **argv) {
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_CONN_QUAL qual;
    DAT_UINT32 rounds, r;
    struct peer_info peer;
    DAT_EVENT ev;
    int server;
    if (argc < 5 || (strcmp(argv[1], "server") && (strcmp(argv[1], "client") || argc < 6))) {
        fprintf(stderr, "usage: %s server|client <ia> <qual> <rounds> [server ip]\n", argv[0]);
        return 2;
    }
    role = argv[1];
    server = strcmp(role, "server") == 0;
    qual = strtoull(argv[3], NULL, 0);
    rounds = (DAT_UINT32)strtoul(argv[4], NULL, 0);
    TRY(dat_ia_open(argv[2], 8, &async, &ia));
    TRY(dat_pz_create(ia, &pz));
    TRY(dat_evd_create(ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &recv_evd));
    TRY(dat_evd_create(ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &req_evd));
    TRY(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_evd));
    TRY(dat_ep_create(ia, pz, recv_evd, req_evd, conn_evd, NULL, &ep));
    register_memory();
    post_recv();
    if (server) {
        DAT_PSP_HANDLE psp;
        TRY(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd));
        TRY(dat_psp_create(ia, qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp));
        printf("pingpong %s server: listening\n", PP_API);
        fflush(stdout);
        ev = next(cr_evd, DAT_CONNECTION_REQUEST_EVENT);
        TRY(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, ep, 0, NULL));
        next(conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        TRY(dat_psp_free(psp));
        peer = recv_info();
        send_info(0);
        for (r = 1; r <= rounds; ++r) {
            if (recv_info().round != r) {
                fprintf(stderr, "pingpong %s server: out of step at round %u\n", PP_API, r);
                return 1;
            }
            check(r, 1);
            rdma_write(&peer, r, 0);
            send_info(r);
        }
        next(conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
    } else {
        struct sockaddr_in sin;
        memset(&sin, 0, sizeof sin);
        sin.sin_family = AF_INET;
        inet_pton(AF_INET, argv[5], &sin.sin_addr);
        TRY(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&sin, qual, TIMEOUT, 0, NULL, DAT_QOS_BEST_EFFORT,
                           DAT_CONNECT_DEFAULT_FLAG));
        next(conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
        send_info(0);
        peer = recv_info();
        for (r = 1; r <= rounds; ++r) {
            rdma_write(&peer, r, 1);
            send_info(r);
            if (recv_info().round != r) {
                fprintf(stderr, "pingpong %s client: out of step at round %u\n", PP_API, r);
                return 1;
            }
            check(r, 0);
        }
        TRY(dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG));
        next(conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
    }
    TRY(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG));
    free(data);
    printf("pingpong %s %s: %u rounds verified\n", PP_API, role, rounds);
    return 0;
}
