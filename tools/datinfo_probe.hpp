// SPDX-License-Identifier: BSD-3-Clause
// datinfo --probe: whether an IA works, not only opens. Two IAs of the entry
// connect to each other on their own address, accept, and exchange one
// message, in a child process, so that a provider that crashes or hangs
// rules out its entry and nothing else. The build uses it to write only
// working entries into the generated dat.conf.
#pragma once

#include <string>

namespace datinfo {

struct ProbeResult {
    enum Kind { Ok, Failed, Crashed, TimedOut };
    Kind kind = Failed;
    std::string stage;  // the last step begun: "dat_ia_open", "connect", ...
    std::string detail; // the DAT error, the signal, or what was wrong
    std::string log;    // what the child printed (libdat2's log, the provider's output)

    // The first line of the log from dat2 ("dat2: ..."), which says why an
    // open failed; else the first line the child printed; else "".
    std::string first_log_line() const;

    // One line: "ok", "failed at connect: DAT_TIMEOUT_EXPIRED", "crashed at
    // connection request: signal 11 (Segmentation fault)", ...
    std::string text() const;
    const char *kind_name() const;
};

// Runs the loopback check of `ia_name` in a child process and waits at most
// `timeout_s` seconds for it (then kills it). What the child prints on its
// stdout and stderr is kept in `log` and passed on to the caller's stderr.
ProbeResult probe_in_child(const std::string &ia_name, int timeout_s);

} // namespace datinfo
