// SPDX-License-Identifier: BSD-3-Clause
// datperf: running other programs (comparison peers, gnuplot) with their
// output captured, bounded in time, and never outliving us.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace datperf {

// A started program whose stdout and stderr go to a scratch file.
class Process {
public:
    Process() = default;
    Process(const Process &) = delete;
    Process &operator=(const Process &) = delete;
    ~Process(); // stops it (TERM, then KILL) if it still runs; removes the file

    // execvp(argv[0]) with `env` ("NAME=value") added to ours, on CPU `cpu`
    // (-1: wherever). False with *error when it cannot start (fork failed,
    // no such program, a CPU it may not use).
    bool start(const std::vector<std::string> &argv, const std::vector<std::string> &env, int cpu, std::string *error);
    // Waits up to `timeout_s` for it to exit: true with *status (waitpid's).
    bool wait(double timeout_s, int *status);
    bool running();
    void stop();
    std::string output() const; // what it wrote so far
    pid_t pid() const { return pid_; }

private:
    pid_t pid_ = -1;
    std::string out_path_;
};

// "exit status 1", "killed by signal 9".
std::string status_text(int status);
// Searches PATH for an executable `name`.
bool find_program(const std::string &name, std::string *path);
// A TCP port free on this host right now (bind to port 0).
int free_tcp_port();
// Whether something listens on TCP `port` (/proc/net/tcp and tcp6).
bool tcp_port_listening(int port);
std::string shell_quote(const std::vector<std::string> &argv);
// A new file $TMPDIR/datperf-STEM.XXXXXX (default /tmp), open for writing:
// its descriptor, its name in *path; -1 with *error.
int make_temp_file(const std::string &stem, std::string *path, std::string *error);

} // namespace datperf
