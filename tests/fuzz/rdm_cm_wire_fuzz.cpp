// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: the side-channel messages a remote peer sends the RDM
// transport's connection manager (plugins/ofi/rdm_cm_wire.hpp), as a stream
// delivers them: any bytes, cut anywhere. Whatever arrives, a message found
// lies inside what was received, its address and private data are within the
// limits and the header's lengths, it re-encodes to the same bytes, and a
// refusal is final (more bytes never make a bad stream good); a message we
// encode comes back unchanged.
#include "rdm_cm_wire.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace dat2::ofi::rdmwire;

namespace {

void check(bool ok) {
    if (!ok)
        std::abort();
}

void check_message(const unsigned char *buf, std::size_t len, const Message &m, std::size_t used) {
    check(used >= kHeaderSize && used <= len && used <= kMaxMessage);
    check(used == kHeaderSize + m.addr_len + m.pdata_len);
    check(m.addr_len <= kMaxAddr && m.pdata_len <= kMaxPdata);
    check((m.addr_len != 0) == has_address(m.kind));
    check(m.pz_tag <= kMaxPzTag && (m.pz_tag == 0 || has_address(m.kind)));
    check(m.pdata_len == 0 || may_carry_pdata(m.kind));
    check(!m.addr_len || (m.addr == buf + kHeaderSize));
    check(!m.pdata_len || (m.pdata == buf + kHeaderSize + m.addr_len));
    unsigned char again[kMaxMessage];
    check(encode(m, again) == used);
    check(std::memcmp(again, buf, used) == 0);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // 1. The bytes as a stream, decoded message by message as the CM does
    //    (its buffer holds kMaxMessage bytes; what does not parse is dropped).
    std::size_t off = 0;
    while (off < size) {
        const std::size_t avail = size - off < kMaxMessage ? size - off : kMaxMessage;
        Message m;
        std::size_t used = 0;
        const Parse p = decode(data + off, avail, m, &used);
        if (p != Parse::kOk) {
            // A stream that needs more never needs more than one message's
            // worth; a bad one stays bad however many bytes follow.
            if (p == Parse::kNeedMore)
                check(avail < kMaxMessage);
            if (p == Parse::kBad && avail > 1) {
                Message m2;
                std::size_t u2 = 0;
                check(decode(data + off, avail - 1, m2, &u2) != Parse::kOk);
            }
            break;
        }
        check_message(data + off, avail, m, used);
        // A prefix shorter than the message is never a message.
        Message m3;
        std::size_t u3 = 0;
        check(decode(data + off, used - 1, m3, &u3) == Parse::kNeedMore);
        off += used;
    }

    // 2. The bytes as what we encode: address and private data from the
    //    input, every kind.
    if (size >= 2) {
        Message m;
        m.kind = static_cast<Kind>(kRequest + data[0] % kNudge);
        const std::size_t rest = size - 2;
        m.addr_len = has_address(m.kind) ? 1 + (rest ? data[1] % (rest < kMaxAddr ? rest : kMaxAddr) : 0) : 0;
        if (m.addr_len > rest)
            m.addr_len = 0;
        m.addr = m.addr_len ? data + 2 : nullptr;
        const std::size_t left = rest - m.addr_len;
        m.pdata_len = may_carry_pdata(m.kind) ? (left < kMaxPdata ? left : kMaxPdata) : 0;
        m.pdata = m.pdata_len ? data + 2 + m.addr_len : nullptr;
        m.conn_qual = size;
        m.tag = ~static_cast<std::uint64_t>(size);
        m.pz_tag = has_address(m.kind) ? data[0] % (kMaxPzTag + 1) : 0;
        unsigned char out[kMaxMessage];
        const std::size_t n = encode(m, out);
        if (has_address(m.kind) && m.addr_len == 0) {
            check(n == 0);
        } else {
            check(n == kHeaderSize + m.addr_len + m.pdata_len);
            Message back;
            std::size_t used = 0;
            check(decode(out, n, back, &used) == Parse::kOk && used == n);
            check(back.kind == m.kind && back.conn_qual == m.conn_qual && back.tag == m.tag && back.pz_tag == m.pz_tag);
            check(back.addr_len == m.addr_len && (!m.addr_len || std::memcmp(back.addr, m.addr, m.addr_len) == 0));
            check(back.pdata_len == m.pdata_len &&
                  (!m.pdata_len || std::memcmp(back.pdata, m.pdata, m.pdata_len) == 0));
        }
    }
    return 0;
}
