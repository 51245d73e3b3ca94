// SPDX-License-Identifier: BSD-3-Clause
// Private data framing of the verbs plugin's CM messages. InfiniBand CM
// messages carry fixed-size private data (zero padded), so the consumer's
// length travels in a 2-byte header, which also tells a reject by the peer's
// consumer (kind "reject") from a refusal by the CM (no listener). What is
// parsed here comes from a remote peer: header-only and free of verbs calls,
// so that the libFuzzer target tests/fuzz/verbs_cm_data_fuzz.cpp runs
// exactly this code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dat2::verbs {

// kCmRefuse: the peer's provider refused the request (NON_PEER_REJECTED): a
// reject from user space always reads as the consumer's to rdma_cm.
enum CmKind : std::uint8_t { kCmConnect = 1, kCmAccept = 2, kCmReject = 3, kCmRefuse = 4 };
inline constexpr std::size_t kCmHeader = 2;
// Private data an IB/RoCE REQ carries in rdma_cm's TCP port space (92 bytes
// minus rdma_cm's own 36-byte header); REP and REJ carry more.
inline constexpr std::size_t kIbReqPrivateData = 56;

// Writes header + consumer data (len <= 255) into `out` (room for
// kCmHeader + len); returns the bytes to send.
inline std::size_t frame_cm_data(CmKind kind, const void *pdata, std::size_t len, unsigned char *out) {
    out[0] = static_cast<unsigned char>(0xD0 | kind);
    out[1] = static_cast<unsigned char>(len);
    if (len)
        std::memcpy(out + kCmHeader, pdata, len);
    return kCmHeader + len;
}

// The consumer data inside a received message of `kind` carrying our header;
// false for anything else (then `pdata` and `pdata_len` are not written).
inline bool unframe_cm_data(const void *data, std::size_t len, CmKind kind, const unsigned char *&pdata,
                            std::size_t &pdata_len) {
    const auto *p = static_cast<const unsigned char *>(data);
    if (!p || len < kCmHeader || p[0] != (0xD0 | kind) || p[1] > len - kCmHeader)
        return false;
    pdata = p + kCmHeader;
    pdata_len = p[1];
    return true;
}

} // namespace dat2::verbs
