// SPDX-License-Identifier: BSD-3-Clause
// What the kit's files share among themselves and no transport calls.
#pragma once

#include "transport.hpp"

namespace dat2::kit {

// Every DAT_COMPLETION_FLAGS bit the kit knows.
inline constexpr DAT_COMPLETION_FLAGS kValidCompletionFlags = static_cast<DAT_COMPLETION_FLAGS>(
    DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG |
    DAT_COMPLETION_BARRIER_FENCE_FLAG | DAT_COMPLETION_EVD_THRESHOLD_FLAG);
// Whether `qos` is made of DAT_QOS values only (DAT_QOS_BEST_EFFORT is 0).
inline bool qos_known(DAT_QOS qos) {
    constexpr unsigned kKnown = DAT_QOS_HIGH_THROUGHPUT | DAT_QOS_LOW_LATENCY | DAT_QOS_ECONOMY | DAT_QOS_PREMIUM;
    return (static_cast<unsigned>(qos) & ~kKnown) == 0;
}
// The flags a receive cannot carry (dat_ep_modify(3DAT), dat_ep_post_recv(3DAT)).
inline constexpr DAT_COMPLETION_FLAGS kNotForReceives =
    static_cast<DAT_COMPLETION_FLAGS>(DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_BARRIER_FENCE_FLAG);

// The length of a ring that holds at least `n` entries: a power of two, so
// that an index wraps with a mask (no division on the post and poll paths).
inline std::size_t ring_length(std::size_t n) {
    std::size_t len = 1;
    while (len < n)
        len <<= 1;
    return len;
}

// ---- evd.cpp ----
// Enqueues a provider-generated event on an EVD (never lost) and wakes it.
void evd_push(Evd &evd, const DAT_EVENT &event);
// Moves completions from the EVD's queue into its ring; caller holds evd.mu.
void evd_fill_locked(Evd &evd);
// Every queued completion, whatever the room (spills past qlen); holds evd.mu.
void evd_drain_all_locked(Evd &evd);
// dat_ia_open with a Consumer's async EVD: `ia` reports its asynchronous
// events there until async_evd_return (its dat_ia_close) or until the EVD
// itself goes away with its own IA.
void async_evd_borrow(Ia &ia, Evd &evd);
void async_evd_return(Ia &ia);
// Connection EVDs of another IA of the same provider (dat_ep_create lets an
// EP report there): ep.connect_evd is set and counted in its users;
// remember it when foreign, and forget it when the EP lets go of it.
void register_connect_evd(Ep &ep);
void release_connect_evd(Ep &ep);
// Posts `e` on the EP's connection EVD, foreign or not.
void post_connection_evd(Ep &ep, const DAT_EVENT &e);
// A connection EVD for an EP of `ia`: one of any IA of the same provider.
DAT_RETURN connect_evd_cast(const Ia &ia, DAT_EVD_HANDLE h, Evd *&out);

// ---- ia.cpp ----
DAT_RETURN ia_handle_for_consumer(Ia *ia, DAT_IA_HANDLE *out);
void ia_track(Ia &ia, ObjectHeader *obj);
// The IA holds fewer than `max` objects of `type` (Capabilities::max_eps...).
bool ia_has_room(Ia &ia, DAT_HANDLE_TYPE type, DAT_COUNT max);
void ia_untrack(Ia &ia, ObjectHeader *obj);

// ---- provider.cpp ----
void fill_provider_table(DAT_PROVIDER &p);

// ---- dto.cpp: event construction ----
DAT_EVENT dto_event(const Op &op, DAT_DTO_COMPLETION_STATUS status, std::uint32_t length);
// dto_event() built where it is wanted (an EVD's FIFO slot).
void fill_dto_event(DAT_EVENT &e, const Op &op, DAT_DTO_COMPLETION_STATUS status, std::uint32_t length);

// ---- ext.cpp ----
// dto_event() of an extended DTO, or of a receive whose completion carries
// immediate data: DAT_IB_DTO_EVENT with the DAT_IB_EXTENSION_EVENT_DATA of
// dat_ib_extensions.h.
void ext_event(DAT_EVENT &e, const Op &op, const Completion *c);
// The extension's attributes in dat_ia_query, and the provider-specific
// attributes (made once by make_provider_attrs, after the transport opened).
void ext_query(Ia &ia, DAT_IA_ATTR &ia_attr, DAT_PROVIDER_ATTR &provider_attr);
void make_provider_attrs(Ia &ia);

// ---- rmr.cpp ----
// dto_event() of a dat_rmr_bind's record: its DAT_RMR_BIND_COMPLETION_EVENT.
void rmr_bind_event(DAT_EVENT &e, const Op &op, DAT_DTO_COMPLETION_STATUS status);

} // namespace dat2::kit
