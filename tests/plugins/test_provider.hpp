// SPDX-License-Identifier: BSD-3-Clause
// What the test provider records, shared by the provider and the tests that
// load it. Test-only: real plugins export nothing but init/fini.
#pragma once

#include <cstddef>
#include <cstring>

struct TestProviderCall {
    std::size_t slot_offset; // offsetof(DAT_PROVIDER, <slot>)
    const void *first;       // the handle the provider received
    unsigned nargs;
    unsigned char bytes[512]; // every argument, each padded to 8 bytes
    std::size_t len;
};

struct TestProviderCounters {
    int init_calls;
    int fini_calls;
    int open_calls;
    int close_calls;
    int open_ias;
    int live_registrations; // registered and not yet finalized
};

// Packs arguments the way the provider records them.
template <class... A> inline void test_provider_pack(TestProviderCall &c, const A &...args) {
    c.nargs = sizeof...(A);
    c.len = 0;
    auto one = [&c](const auto &a) {
        std::size_t n = (sizeof a + 7) & ~std::size_t(7);
        if (c.len + n > sizeof c.bytes)
            return;
        std::memset(c.bytes + c.len, 0, n);
        std::memcpy(c.bytes + c.len, &a, sizeof a);
        c.len += n;
    };
    (one(args), ...);
}

extern "C" {
typedef const TestProviderCall *(*TestProviderLastCallFn)(void);
typedef const TestProviderCounters *(*TestProviderCountersFn)(void);
}
