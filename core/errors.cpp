// SPDX-License-Identifier: BSD-3-Clause
// errno as DAT_RETURN, for every transport (libfabric's FI_E* codes are the
// errno values they are named after).
#include "transport.hpp"

#include <cerrno>

namespace dat2::kit {

DAT_RETURN errno_to_dat(int err, DAT_RETURN fallback) {
    switch (err < 0 ? -err : err) {
    case 0: return DAT_SUCCESS;
    case ENOMEM:
    case ENOSPC: return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    case EAGAIN:
    case EMFILE: // descriptors: dat_ia_open(3DAT)'s "resource limitations"
    case ENFILE:
    case ENOBUFS: return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
    case EADDRINUSE: return DAT_ERROR(DAT_CONN_QUAL_IN_USE, 0);
    case ENOTCONN: return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
    case EINVAL: return DAT_ERROR(DAT_INVALID_PARAMETER, 0);
    case EACCES:
    case EPERM: return DAT_ERROR(DAT_PRIVILEGES_VIOLATION, 0);
    case ENODATA:
    case ENOSYS:
    case EOPNOTSUPP: return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
    case ENODEV:
    case EADDRNOTAVAIL:
    case EHOSTUNREACH:
    case ENETUNREACH: return DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
    default: return fallback;
    }
}

} // namespace dat2::kit
