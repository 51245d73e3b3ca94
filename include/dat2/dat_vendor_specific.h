/* SPDX-License-Identifier: BSD-3-Clause */
/* Hook for vendor-defined additions shared by the user and kernel DAT APIs. */

#ifndef _DAT_VENDOR_SPECIFIC_H_
#define _DAT_VENDOR_SPECIFIC_H_

/*
 * Intentionally empty: no vendor adds anything here.  The file exists
 * because applications and udat_vendor_specific.h include it by name.
 */

#endif /* _DAT_VENDOR_SPECIFIC_H_ */
