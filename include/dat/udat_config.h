/* SPDX-License-Identifier: BSD-3-Clause */
/* Build-time configuration of the user-level DAT 1.2 API. */

#ifndef _UDAT_CONFIG_H_
#define _UDAT_CONFIG_H_

/* API revision an application is compiled against; see dat_ia_open(). */
#define DAT_VERSION_MAJOR   1
#define DAT_VERSION_MINOR   2

/* Thread-safety level dat_ia_open() asks the registry for. */
#define DAT_THREADSAFE      DAT_FALSE

#endif /* _UDAT_CONFIG_H_ */
