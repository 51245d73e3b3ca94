/* SPDX-License-Identifier: BSD-3-Clause */
/* Host-dependent base types of the DAT 1.2 API; Linux user space only. */

#ifndef _DAT_PLATFORM_SPECIFIC_H_
#define _DAT_PLATFORM_SPECIFIC_H_

#if !defined(__linux__)
#error "dat/dat_platform_specific.h: this DAT implementation targets Linux only"
#endif

/* Buffer alignment (bytes) the adapter prefers; overridable when building. */
#ifndef DAT_OPTIMAL_ALIGNMENT
#define DAT_OPTIMAL_ALIGNMENT   256
#endif

#include <sys/types.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef u_int32_t           DAT_UINT32;     /* host byte order */
typedef u_int64_t           DAT_UINT64;     /* host byte order */
typedef unsigned long long  DAT_UVERYLONG;
typedef void *              DAT_PVOID;
typedef int                 DAT_COUNT;
typedef DAT_UINT64          DAT_PADDR;

/* The 64-bit mask constants use UINT64_C(); <stdint.h>'s wins if present. */
#ifndef UINT64_C
#define UINT64_C(c)     c ## ULL
#endif

/* IA addresses are socket addresses of the family the IA uses. */
typedef struct sockaddr     DAT_SOCK_ADDR;
typedef struct sockaddr_in6 DAT_SOCK_ADDR6;

#define DAT_AF_INET     AF_INET
#define DAT_AF_INET6    AF_INET6

/* Parameter direction markers of the prototypes. */
#ifndef IN
#define IN
#endif
#ifndef OUT
#define OUT
#endif
#ifndef INOUT
#define INOUT
#endif

#ifdef __cplusplus
}
#endif

#endif /* _DAT_PLATFORM_SPECIFIC_H_ */
