// SPDX-License-Identifier: BSD-3-Clause
// Whether the process is at, or within a few descriptors of, its file
// descriptor limit. Libraries report running out in their own ways (libfabric
// tcp: EIO; librdmacm: ENODEV; a failed dlopen), and open several at once
// while they look for devices, so they fail with some still free; the
// caller asks at the failure, before it gives any of its own back, and
// answers DAT_INSUFFICIENT_RESOURCES (dat_ia_open(3DAT): "resource
// limitations"). Header-only: libdat2 and every plugin's kit call it.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

namespace dat2 {

inline bool out_of_descriptors() {
    constexpr int kFew = 64;
    int fds[kFew];
    int made = 0, err = 0;
    for (; made < kFew; ++made) {
        fds[made] = ::eventfd(0, EFD_CLOEXEC);
        if (fds[made] < 0) {
            err = errno;
            break;
        }
    }
    for (int i = 0; i < made; ++i)
        ::close(fds[i]);
    return made < kFew && (err == EMFILE || err == ENFILE);
}

} // namespace dat2
