// SPDX-License-Identifier: BSD-3-Clause
// Private data framing of the libfabric plugin's CM messages. Everything
// here reads bytes a remote peer chose (connection requests, accepts,
// rejects): it is header-only and free of libfabric calls so that the
// libFuzzer target tests/fuzz/ofi_cm_data_fuzz.cpp runs exactly this code.
#pragma once

#include <rdma/fi_eq.h>

#include <endian.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dat2::ofi {

// Every CM message carries this header so that a peer's reject (with or
// without consumer data) can be told apart from a refusal by the network
// (no listener), and so that a connection request names the full 64-bit
// qualifier: qualifiers above 65535 share ports (kit::port_of_qual), and the
// listener refuses a request meant for another qualifier on its port.
struct CmHeader {
    char magic[4];              // "DAT2"
    std::uint8_t version;       // kCmVersion; messages of other versions are not ours
    std::uint8_t kind;          // 1 connect, 2 accept, 3 reject
    std::uint16_t length;       // of the consumer data that follows
    std::uint64_t conn_qual_be; // connect: the qualifier asked for, big-endian; 0 otherwise
};
static_assert(sizeof(CmHeader) == 16);
inline constexpr std::uint8_t kCmVersion = 2; // 1 had no conn_qual (8 bytes)
enum CmKind : std::uint8_t { kCmConnect = 1, kCmAccept = 2, kCmReject = 3 };

// Writes header + consumer data into `out` (room for sizeof(CmHeader) + len);
// returns the bytes to send. `conn_qual`: what a connect asks for.
inline std::size_t frame_cm_data(CmKind kind, const void *pdata, std::size_t len, unsigned char *out,
                                 std::uint64_t conn_qual = 0) {
    CmHeader h;
    std::memcpy(h.magic, "DAT2", 4);
    h.version = kCmVersion;
    h.kind = kind;
    h.length = static_cast<std::uint16_t>(len);
    h.conn_qual_be = htobe64(conn_qual);
    std::memcpy(out, &h, sizeof h);
    if (len)
        std::memcpy(out + sizeof h, pdata, len);
    return sizeof h + len;
}

// The consumer data inside a received CM message, when it carries our header
// (and, when `kind` is not 0, that kind), and the qualifier it names into
// `*conn_qual` when asked. False for anything else; then nothing is written.
inline bool unframe_cm_data(const void *data, std::size_t len, std::uint8_t kind, const unsigned char *&pdata,
                            std::size_t &pdata_len, std::uint64_t *conn_qual = nullptr) {
    CmHeader h;
    if (!data || len < sizeof h)
        return false;
    std::memcpy(&h, data, sizeof h);
    if (std::memcmp(h.magic, "DAT2", 4) != 0 || h.version != kCmVersion || (kind && h.kind != kind) ||
        h.length > len - sizeof h)
        return false;
    pdata = static_cast<const unsigned char *>(data) + sizeof h;
    pdata_len = h.length;
    if (conn_qual)
        *conn_qual = be64toh(h.conn_qual_be);
    return true;
}

// The consumer data of an event-queue entry of `len` bytes as fi_eq_read
// returned it: a fi_eq_cm_entry, then the CM data the peer sent.
inline bool cm_event_pdata(const fi_eq_cm_entry *entry, ssize_t len, std::uint8_t kind, const unsigned char *&pdata,
                           std::size_t &pdata_len, std::uint64_t *conn_qual = nullptr) {
    const std::size_t data_len =
        len > static_cast<ssize_t>(sizeof *entry) ? static_cast<std::size_t>(len) - sizeof *entry : 0;
    return unframe_cm_data(entry->data, data_len, kind, pdata, pdata_len, conn_qual);
}

} // namespace dat2::ofi
