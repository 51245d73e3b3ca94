/* SPDX-License-Identifier: BSD-3-Clause */
/* Hook for vendor-defined additions to the user-level DAT API. */

#ifndef _UDAT_VENDOR_SPECIFIC_H_
#define _UDAT_VENDOR_SPECIFIC_H_

#include <dat2/dat_vendor_specific.h>

/* Intentionally empty; kept so that the include chain of udat.h is stable. */

#endif /* _UDAT_VENDOR_SPECIFIC_H_ */
