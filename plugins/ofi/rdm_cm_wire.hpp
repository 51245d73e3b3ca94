// SPDX-License-Identifier: BSD-3-Clause
// The wire format of the RDM transport's connection manager: the messages
// two IAs exchange over the TCP side channel of a connection (rdm_cm.cpp).
// Everything here reads bytes a remote peer chose: it is header-only, free of
// libfabric and socket calls, and is what the libFuzzer target
// tests/fuzz/rdm_cm_wire_fuzz.cpp runs.
//
// A message is a 32-byte header, then the sender's fabric address
// (`addr_len` bytes, what fi_getname gave), then the consumer's private data
// (`pdata_len` bytes). Integers are big-endian. Header: magic (4), version,
// kind, pdata_len (2), addr_len (2), the PZ tag of the sender's Endpoint
// (kRequest, kAccept; 0 elsewhere), five zero bytes, qualifier (8), tag (8).
#pragma once

#include <endian.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dat2::ofi::rdmwire {

inline constexpr char kMagic[4] = {'D', 'R', 'D', 'M'};
inline constexpr std::uint8_t kVersion = 1;
inline constexpr std::size_t kHeaderSize = 32;
inline constexpr std::size_t kMaxAddr = 256;  // fi_getname of every provider here is far smaller (shm ~40 B)
inline constexpr std::size_t kMaxPdata = 256; // the kit lets a consumer send 192
inline constexpr std::size_t kMaxMessage = kHeaderSize + kMaxAddr + kMaxPdata;
// The PZ tag of an Endpoint (its domain's, RdmDomain::tag): the high bits of
// every rmr_context the domain hands out, so that an initiator refuses an
// RDMA access with the context of another PZ of its peer's IA itself.
inline constexpr unsigned kPzTagBits = 4;
inline constexpr std::uint8_t kMaxPzTag = (1u << kPzTagBits) - 1;

enum Kind : std::uint8_t {
    kRequest = 1,    // active -> passive: qualifier, tag, address, private data
    kAccept = 2,     // passive -> active: tag, address, private data
    kReject = 3,     // passive -> active: the consumer refused (PEER_REJECTED), private data
    kNoListener = 4, // passive -> active: nobody listens on that qualifier (NON_PEER_REJECTED)
    kReady = 5,      // active -> passive: the accept arrived; the connection is established
    kDisconnect = 6, // either way: the connection ends (DISCONNECTED, not BROKEN)
    kNudge = 7,      // either way, connected: an operation of the sender waits for the receiver's progress
};

struct Message {
    Kind kind = kRequest;
    std::uint64_t conn_qual = 0; // kRequest: the qualifier asked for
    std::uint64_t tag = 0;       // kRequest, kAccept: what the sender's receives match
    std::uint8_t pz_tag = 0;     // kRequest, kAccept: the PZ tag of the sender's Endpoint (0: none)
    const unsigned char *addr = nullptr;
    std::size_t addr_len = 0;
    const unsigned char *pdata = nullptr;
    std::size_t pdata_len = 0;
};

// Whether a kind carries an address, and whether it may carry private data.
constexpr bool has_address(std::uint8_t k) { return k == kRequest || k == kAccept; }
constexpr bool may_carry_pdata(std::uint8_t k) { return k == kRequest || k == kAccept || k == kReject; }

// Writes `m` into `out` (room for kMaxMessage); returns its length, 0 when
// `m` breaks a limit above (nothing sensible to send).
inline std::size_t encode(const Message &m, unsigned char *out) {
    if (m.addr_len > kMaxAddr || m.pdata_len > kMaxPdata || (m.addr_len != 0) != has_address(m.kind) ||
        (m.pdata_len && !may_carry_pdata(m.kind)) || (m.addr_len && !m.addr) || (m.pdata_len && !m.pdata) ||
        m.pz_tag > kMaxPzTag || (m.pz_tag && !has_address(m.kind)))
        return 0;
    std::memcpy(out, kMagic, 4);
    out[4] = kVersion;
    out[5] = m.kind;
    const std::uint16_t plen = htobe16(static_cast<std::uint16_t>(m.pdata_len));
    const std::uint16_t alen = htobe16(static_cast<std::uint16_t>(m.addr_len));
    std::memcpy(out + 6, &plen, 2);
    std::memcpy(out + 8, &alen, 2);
    out[10] = m.pz_tag;
    std::memset(out + 11, 0, 5);
    const std::uint64_t qual = htobe64(m.conn_qual), tag = htobe64(m.tag);
    std::memcpy(out + 16, &qual, 8);
    std::memcpy(out + 24, &tag, 8);
    if (m.addr_len)
        std::memcpy(out + kHeaderSize, m.addr, m.addr_len);
    if (m.pdata_len)
        std::memcpy(out + kHeaderSize + m.addr_len, m.pdata, m.pdata_len);
    return kHeaderSize + m.addr_len + m.pdata_len;
}

enum class Parse { kNeedMore, kBad, kOk };

// Reads the first message of the `len` bytes at `buf` (what a stream has
// delivered so far). kOk: `out` points into `buf` and `*used` is its length;
// kNeedMore: a valid beginning, wait for more bytes; kBad: not one of our
// messages (wrong magic, version or kind, a length past a limit, an address
// or private data where the kind has none): the stream is dropped. Nothing is
// written unless kOk.
inline Parse decode(const unsigned char *buf, std::size_t len, Message &out, std::size_t *used) {
    // The fixed fields are judged as soon as they have arrived, so garbage is
    // refused at once rather than after kMaxMessage bytes.
    const std::size_t have = len < kHeaderSize ? len : kHeaderSize;
    if (std::memcmp(buf, kMagic, have < 4 ? have : 4) != 0)
        return Parse::kBad;
    if (have > 4 && buf[4] != kVersion)
        return Parse::kBad;
    if (have > 5 && (buf[5] < kRequest || buf[5] > kNudge))
        return Parse::kBad;
    if (have < kHeaderSize)
        return Parse::kNeedMore;
    std::uint16_t plen, alen;
    std::memcpy(&plen, buf + 6, 2);
    std::memcpy(&alen, buf + 8, 2);
    const std::size_t pdata_len = be16toh(plen), addr_len = be16toh(alen);
    const std::uint8_t kind = buf[5];
    if (pdata_len > kMaxPdata || addr_len > kMaxAddr || (addr_len != 0) != has_address(kind) ||
        (pdata_len && !may_carry_pdata(kind)))
        return Parse::kBad;
    if (buf[10] > kMaxPzTag || (buf[10] && !has_address(kind)))
        return Parse::kBad;
    for (std::size_t i = 11; i < 16; ++i)
        if (buf[i] != 0)
            return Parse::kBad;
    const std::size_t total = kHeaderSize + addr_len + pdata_len;
    if (len < total)
        return Parse::kNeedMore;
    std::uint64_t qual, tag;
    std::memcpy(&qual, buf + 16, 8);
    std::memcpy(&tag, buf + 24, 8);
    out.kind = static_cast<Kind>(kind);
    out.conn_qual = be64toh(qual);
    out.tag = be64toh(tag);
    out.pz_tag = buf[10];
    out.addr = addr_len ? buf + kHeaderSize : nullptr;
    out.addr_len = addr_len;
    out.pdata = pdata_len ? buf + kHeaderSize + addr_len : nullptr;
    out.pdata_len = pdata_len;
    *used = total;
    return Parse::kOk;
}

} // namespace dat2::ofi::rdmwire
