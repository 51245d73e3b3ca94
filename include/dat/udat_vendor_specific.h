/* SPDX-License-Identifier: BSD-3-Clause */
/* Hook for vendor additions to the user-level DAT 1.2 API. */

#ifndef _UDAT_VENDOR_SPECIFIC_H_
#define _UDAT_VENDOR_SPECIFIC_H_

#include <dat/dat_vendor_specific.h>

/* Empty; kept so that the include chain of udat.h is the one consumers know. */

#endif /* _UDAT_VENDOR_SPECIFIC_H_ */
