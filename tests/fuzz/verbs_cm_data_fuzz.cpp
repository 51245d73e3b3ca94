// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: the private data a remote peer sends the verbs plugin
// (connection request, accept, reject, as rdma_cm delivers them: up to 255
// bytes, zero padded by the CM) goes through plugins/verbs/verbs_cm_data.hpp.
// Whatever the bytes, the consumer data found lies inside what was
// received, has the length the header says, and re-framed gives back the
// same message; consumer data framed by us comes back unchanged.
#include "verbs_cm_data.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace dat2::verbs;

namespace {

void check(bool ok) {
    if (!ok)
        std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // rdma_cm reports private_data_len in a byte.
    if (size > 255)
        size = 255;
    // 1. The bytes as a received message of every kind (and of no kind).
    for (unsigned k = 0; k <= 4; ++k) {
        const auto kind = static_cast<CmKind>(k);
        const unsigned char *pdata = nullptr;
        std::size_t pdata_len = 0;
        if (unframe_cm_data(size ? data : nullptr, size, kind, pdata, pdata_len)) {
            check(size >= kCmHeader && data[0] == (0xD0 | k));
            check(pdata == data + kCmHeader && pdata_len == data[1] && pdata_len <= size - kCmHeader);
            std::vector<unsigned char> again(kCmHeader + pdata_len);
            check(frame_cm_data(kind, pdata, pdata_len, again.data()) == again.size());
            check(std::memcmp(again.data(), data, again.size()) == 0);
        } else {
            check(pdata == nullptr && pdata_len == 0);
        }
    }
    // 2. The bytes as consumer data we frame, padded as the CM pads a REQ:
    //    found again intact under the kind framed, under no other.
    const std::size_t len = size > kIbReqPrivateData - kCmHeader ? kIbReqPrivateData - kCmHeader : size;
    unsigned char wire[kIbReqPrivateData] = {};
    const std::size_t n = frame_cm_data(kCmConnect, data, len, wire);
    check(n == kCmHeader + len && n <= sizeof wire);
    const unsigned char *pdata = nullptr;
    std::size_t pdata_len = 0;
    check(unframe_cm_data(wire, sizeof wire, kCmConnect, pdata, pdata_len));
    check(pdata_len == len && (len == 0 || std::memcmp(pdata, data, len) == 0));
    check(!unframe_cm_data(wire, sizeof wire, kCmAccept, pdata, pdata_len));
    return 0;
}
