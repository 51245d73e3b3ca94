// SPDX-License-Identifier: BSD-3-Clause
// IPv4/IPv6 socket addresses as DAT passes them (DAT_IA_ADDRESS_PTR): the
// port (a connection qualifier) and the size, in one place for the kit and
// every plugin.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "dat2/udat.h"
#include "log.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace dat2::kit {

inline std::uint16_t port_of(const sockaddr *sa) {
    if (sa->sa_family == AF_INET)
        return ntohs(reinterpret_cast<const sockaddr_in *>(sa)->sin_port);
    if (sa->sa_family == AF_INET6)
        return ntohs(reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_port);
    return 0;
}
inline std::uint16_t port_of(const sockaddr_storage &sa) { return port_of(reinterpret_cast<const sockaddr *>(&sa)); }

// The same IPv4 or IPv6 address and port (other families never match).
inline bool same_address(const sockaddr_storage &a, const sockaddr_storage &b) {
    if (a.ss_family != b.ss_family || port_of(a) != port_of(b))
        return false;
    if (a.ss_family == AF_INET)
        return reinterpret_cast<const sockaddr_in &>(a).sin_addr.s_addr ==
               reinterpret_cast<const sockaddr_in &>(b).sin_addr.s_addr;
    if (a.ss_family == AF_INET6)
        return std::memcmp(&reinterpret_cast<const sockaddr_in6 &>(a).sin6_addr,
                           &reinterpret_cast<const sockaddr_in6 &>(b).sin6_addr, sizeof(in6_addr)) == 0;
    return false;
}

inline void set_port(sockaddr_storage &sa, std::uint16_t port) {
    if (sa.ss_family == AF_INET)
        reinterpret_cast<sockaddr_in *>(&sa)->sin_port = htons(port);
    else if (sa.ss_family == AF_INET6)
        reinterpret_cast<sockaddr_in6 *>(&sa)->sin6_port = htons(port);
}

inline std::size_t sockaddr_size(const sockaddr *sa) {
    return sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

// DAT_CONN_QUAL has 64 bits, an IP port 16. The port a qualifier listens
// on and is connected to: up to 0xffff the qualifier itself (dtest's 45248
// is port 45248); above, folded onto 33534..65534 (`qual` % 32001 + 33534),
// which is what OFED's rdma_cm provider (openib_cma, SID_TO_PORT) does, so
// that a verbs peer running OFED's dapl and we meet on the same port for any
// qualifier. Different qualifiers may share a port: the kit refuses a second
// service point on a port one of this process holds (cm.cpp), and a
// transport that can carry the qualifier itself tells the others apart.
constexpr std::uint16_t port_of_qual(DAT_CONN_QUAL qual) {
    constexpr DAT_CONN_QUAL kFoldModulus = 32001;
    constexpr DAT_CONN_QUAL kFoldBase = 0xffff - kFoldModulus;
    return static_cast<std::uint16_t>(qual > 0xffff ? qual % kFoldModulus + kFoldBase : qual);
}
static_assert(port_of_qual(45248) == 45248 && port_of_qual(0x10000) == 35068 && port_of_qual(0xAffab1e) == 43414);

// `addr` (IPv4 or IPv6) with its port set to `port`.
inline sockaddr_storage with_port(const sockaddr *addr, std::uint16_t port) {
    sockaddr_storage out{};
    std::memcpy(&out, addr, sockaddr_size(addr));
    set_port(out, port);
    return out;
}

} // namespace dat2::kit
