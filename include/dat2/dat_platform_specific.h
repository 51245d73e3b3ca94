/* SPDX-License-Identifier: BSD-3-Clause */
/* Host-dependent base types of the DAT 2.0 API; Linux user space only. */

#ifndef _DAT_PLATFORM_SPECIFIC_H_
#define _DAT_PLATFORM_SPECIFIC_H_

#if !defined(__linux__)
#error "dat2/dat_platform_specific.h: this DAT implementation targets Linux only"
#endif

/*
 * Buffer alignment (bytes) that gives the adapter its best DMA throughput.
 * Overridable from the build line, hence the guard.
 */
#ifndef DAT_OPTIMAL_ALIGNMENT
#define DAT_OPTIMAL_ALIGNMENT   256
#endif

/*
 * <stdio.h> is not needed by the declarations below, but existing DAT
 * consumers have always received it through this header and some of them
 * depend on that.
 */
#include <sys/types.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>

typedef u_int32_t           DAT_UINT32;     /* host byte order */
typedef u_int64_t           DAT_UINT64;     /* host byte order */
typedef unsigned long long  DAT_UVERYLONG;  /* widest unsigned integer */
typedef void *              DAT_PVOID;
typedef int                 DAT_COUNT;
typedef DAT_UINT64          DAT_PADDR;

/*
 * The 64-bit mask constants are spelled with UINT64_C().  <stdint.h> is
 * deliberately not pulled in; if the application already has it, its
 * definition is used.
 */
#ifndef UINT64_C
#define UINT64_C(c)     c ## ULL
#endif

#define DAT_IA_HANDLE_TO_UL(a)  (unsigned long)(a)
#define DAT_UL_TO_IA_HANDLE(a)  (DAT_IA_HANDLE)(a)

/* Socket triple describing a communicator (used by CSPs and EPs). */
typedef struct dat_comm {
    int     domain;
    int     type;
    int     protocol;
} DAT_COMM;

typedef int DAT_FD;                         /* wakeup descriptor of a CNO */

/*
 * IA addresses are ordinary socket addresses; callers allocate storage
 * large enough for the family they use and cast it to DAT_IA_ADDRESS_PTR.
 */
typedef struct sockaddr     DAT_SOCK_ADDR;
typedef struct sockaddr_in6 DAT_SOCK_ADDR6;

#define DAT_AF_INET     AF_INET
#define DAT_AF_INET6    AF_INET6

/* Calling convention and export decoration: nothing special on Linux. */
#define DAT_API
#define DAT_EXPORT      extern

/* Parameter direction markers used throughout the prototypes. */
#ifndef IN
#define IN
#endif
#ifndef OUT
#define OUT
#endif
#ifndef INOUT
#define INOUT
#endif

#endif /* _DAT_PLATFORM_SPECIFIC_H_ */
