/* SPDX-License-Identifier: BSD-3-Clause */
/* Build-time configuration of the user-level DAT API (version, extensions). */

#ifndef _UDAT_CONFIG_H_
#define _UDAT_CONFIG_H_

/* API revision an application is compiled against; see dat_ia_open(). */
#define DAT_VERSION_MAJOR   2
#define DAT_VERSION_MINOR   0

/*
 * Thread-safety level requested by dat_ia_open().  It is fixed here rather
 * than left to the application so that the value passed to providers is the
 * one every existing binary was built with.
 */
#define DAT_THREADSAFE      DAT_FALSE

/* Extension support is always compiled in on this platform. */
#ifndef DAT_EXTENSIONS
#define DAT_EXTENSIONS      1
#endif

#endif /* _UDAT_CONFIG_H_ */
