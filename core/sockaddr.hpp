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

inline void set_port(sockaddr_storage &sa, std::uint16_t port) {
    if (sa.ss_family == AF_INET)
        reinterpret_cast<sockaddr_in *>(&sa)->sin_port = htons(port);
    else if (sa.ss_family == AF_INET6)
        reinterpret_cast<sockaddr_in6 *>(&sa)->sin6_port = htons(port);
}

inline std::size_t sockaddr_size(const sockaddr *sa) {
    return sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

// IP transports use the connection qualifier as the port: one that does not
// fit is DAT_INVALID_PARAMETER (DAT_INVALID_ARG`arg`), logged for IA `ia`.
inline DAT_RETURN qual_to_port(const std::string &ia, DAT_CONN_QUAL qual, DAT_RETURN arg, std::uint16_t &port) {
    if (qual > 0xffff) {
        DAT2_ERR("%s: connection qualifier %llu is not a port (0..65535)\n", ia.c_str(),
                 static_cast<unsigned long long>(qual));
        return DAT_ERROR(DAT_INVALID_PARAMETER, arg);
    }
    port = static_cast<std::uint16_t>(qual);
    return DAT_SUCCESS;
}

// `addr` (IPv4 or IPv6) with its port set to `port`.
inline sockaddr_storage with_port(const sockaddr *addr, std::uint16_t port) {
    sockaddr_storage out{};
    std::memcpy(&out, addr, sockaddr_size(addr));
    set_port(out, port);
    return out;
}

} // namespace dat2::kit
