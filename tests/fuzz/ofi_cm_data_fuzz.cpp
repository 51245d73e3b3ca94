// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: the CM messages a remote peer sends the libfabric plugin
// (connection request, accept and reject private data, as the event queue
// delivers them) go through plugins/ofi/ofi_cm_data.hpp. Whatever the bytes
// and whatever length the queue reports, the consumer data and the qualifier
// found lie inside what was received, are what the header says, and survive
// a re-framing; consumer data and qualifiers framed by us come back unchanged.
#include "ofi_cm_data.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace dat2::ofi;

namespace {

void check(bool ok) {
    if (!ok)
        std::abort();
}

// Found data lies in [data + header, data + len) and has the header's length;
// the qualifier is the header's.
void check_found(const unsigned char *data, std::size_t len, std::uint8_t kind, const unsigned char *pdata,
                 std::size_t pdata_len, std::uint64_t conn_qual) {
    CmHeader h;
    std::memcpy(&h, data, sizeof h);
    check(len >= sizeof h && std::memcmp(h.magic, "DAT2", 4) == 0 && h.version == kCmVersion);
    check(kind == 0 || h.kind == kind);
    check(pdata == data + sizeof h && pdata_len == h.length && pdata_len <= len - sizeof h);
    check(conn_qual == be64toh(h.conn_qual_be));
    // Re-framed, it is the same message, byte for byte.
    std::vector<unsigned char> again(sizeof h + pdata_len);
    check(frame_cm_data(static_cast<CmKind>(h.kind), pdata, pdata_len, again.data(), conn_qual) == again.size());
    check(std::memcmp(again.data(), data, again.size()) == 0);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // 1. The bytes as a CM message of every kind (0: any kind, as the CM
    //    thread reads connect and accept data).
    for (std::uint8_t kind = 0; kind <= 4; ++kind) {
        const unsigned char *pdata = nullptr;
        std::size_t pdata_len = 0;
        std::uint64_t conn_qual = 0x5a5a;
        if (unframe_cm_data(data, size, kind, pdata, pdata_len, &conn_qual))
            check_found(data, size, kind, pdata, pdata_len, conn_qual);
        else
            check(pdata == nullptr && pdata_len == 0 && conn_qual == 0x5a5a);
    }

    // 2. The bytes after a fi_eq_cm_entry, with the length fi_eq_read would
    //    report: the true one, or (first byte odd) any shorter one, even one
    //    that does not cover the entry itself.
    std::vector<unsigned char> event(sizeof(fi_eq_cm_entry) + size);
    if (size)
        std::memcpy(event.data() + sizeof(fi_eq_cm_entry), data, size);
    ssize_t len = static_cast<ssize_t>(event.size());
    if (size >= 2 && (data[0] & 1))
        len = static_cast<ssize_t>(data[1] % (event.size() + 1)) - 1;
    const auto *entry = reinterpret_cast<const fi_eq_cm_entry *>(event.data());
    const unsigned char *pdata = nullptr;
    std::size_t pdata_len = 0;
    std::uint64_t conn_qual = 0;
    if (cm_event_pdata(entry, len, 0, pdata, pdata_len, &conn_qual)) {
        const std::size_t data_len = static_cast<std::size_t>(len) - sizeof(fi_eq_cm_entry);
        check(len > static_cast<ssize_t>(sizeof(fi_eq_cm_entry)));
        check_found(entry->data, data_len, 0, pdata, pdata_len, conn_qual);
    }

    // 3. The bytes as consumer data we frame (at most what the kit lets a
    //    consumer send fits the 256 bytes of tcp's CM data with the header),
    //    with a qualifier from the first 8 bytes.
    const std::size_t n = size > 256 - sizeof(CmHeader) ? 256 - sizeof(CmHeader) : size;
    unsigned char framed[256];
    const auto kind = static_cast<CmKind>(1 + (size ? data[0] % 3 : 0));
    std::uint64_t qual = 0;
    if (size)
        std::memcpy(&qual, data, size < sizeof qual ? size : sizeof qual);
    const std::size_t total = frame_cm_data(kind, data, n, framed, qual);
    check(total == sizeof(CmHeader) + n);
    pdata = nullptr;
    pdata_len = 0;
    conn_qual = ~qual;
    check(unframe_cm_data(framed, total, kind, pdata, pdata_len, &conn_qual));
    check(pdata_len == n && (n == 0 || std::memcmp(pdata, data, n) == 0) && conn_qual == qual);
    // A different kind is refused.
    check(!unframe_cm_data(framed, total, static_cast<std::uint8_t>(kind % 3 + 1), pdata, pdata_len));
    return 0;
}
