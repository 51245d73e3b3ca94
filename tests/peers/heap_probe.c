// SPDX-License-Identifier: BSD-3-Clause
// Preloaded into the soak's dapltest server (tests/peers/cases.sh,
// run_soak): while the file DAT2_HEAP_PROBE_REQUEST names exists, a thread
// of its own gives the free heap back (malloc_trim), prints glibc's
// malloc_stats on stderr and then removes the file, which tells the script
// the figures are complete. Not gdb's inferior calls: on CPUs with AMX,
// gdb 13 cannot restore the registers after the call and leaves the server
// broken. A plain thread may take the arena locks that malloc_stats needs;
// a signal handler could not.
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static const char *request;

static void *watch(void *unused) {
    (void)unused;
    const struct timespec tick = {0, 20 * 1000 * 1000};
    for (;;) {
        if (access(request, F_OK) == 0) {
            malloc_trim(0);
            malloc_stats();
            unlink(request);
        }
        nanosleep(&tick, NULL);
    }
    return NULL;
}

__attribute__((constructor)) static void start_watching(void) {
    request = getenv("DAT2_HEAP_PROBE_REQUEST");
    if (!request || !*request)
        return;
    pthread_attr_t attr;
    pthread_t thread;
    if (pthread_attr_init(&attr) != 0)
        return;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_create(&thread, &attr, watch, NULL);
    pthread_attr_destroy(&attr);
}
