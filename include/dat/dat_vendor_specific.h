/* SPDX-License-Identifier: BSD-3-Clause */
/* Hook for vendor additions shared by the user and kernel DAT 1.2 APIs. */

#ifndef _DAT_VENDOR_SPECIFIC_H_
#define _DAT_VENDOR_SPECIFIC_H_

/* Empty: no vendor adds anything; kept because sources include it by name. */

#endif /* _DAT_VENDOR_SPECIFIC_H_ */
