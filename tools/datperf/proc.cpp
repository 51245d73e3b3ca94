// SPDX-License-Identifier: BSD-3-Clause
// datperf: running other programs.
#include "proc.hpp"

#include "datperf.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace datperf {

Process::~Process() {
    stop();
    if (!out_path_.empty())
        unlink(out_path_.c_str());
}

bool Process::start(const std::vector<std::string> &argv, const std::vector<std::string> &env, int cpu,
                    std::string *error) {
    std::string path;
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    if (cpu >= 0) {
        // Checked here, where it can be said: the child only applies it.
        if (!cpu_usable(cpu, error))
            return false;
        CPU_SET(cpu, &cpus);
    }
    if (argv.empty() || !find_program(argv[0], &path)) {
        *error = (argv.empty() ? std::string("nothing") : argv[0]) + " not found on PATH";
        return false;
    }
    int fd = make_temp_file("out", &out_path_, error);
    if (fd < 0)
        return false;
    // Everything the child needs, built before fork (no allocation after it).
    std::vector<char *> args;
    for (const auto &a : argv)
        args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char **e = environ; *e; ++e) {
        std::string cur = *e;
        bool replaced = false;
        for (const auto &add : env)
            replaced |= cur.compare(0, add.find('=') + 1, add, 0, add.find('=') + 1) == 0;
        if (!replaced)
            env_strings.push_back(cur);
    }
    for (const auto &e : env)
        env_strings.push_back(e);
    std::vector<char *> envp;
    for (auto &e : env_strings)
        envp.push_back(const_cast<char *>(e.c_str()));
    envp.push_back(nullptr);
    const pid_t parent = getpid();
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        *error = std::string("fork: ") + std::strerror(errno);
        close(fd);
        return false;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); // never outlive datperf
        if (getppid() != parent)
            _exit(127);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        if (cpu >= 0 && sched_setaffinity(0, sizeof cpus, &cpus) != 0)
            _exit(126);
        execve(path.c_str(), args.data(), envp.data());
        _exit(127);
    }
    close(fd);
    pid_ = pid;
    return true;
}

bool Process::wait(double timeout_s, int *status) {
    if (pid_ < 0)
        return false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
        pid_t r = waitpid(pid_, status, WNOHANG);
        if (r == pid_) {
            pid_ = -1;
            return true;
        }
        if (r < 0 && errno != EINTR) {
            pid_ = -1;
            *status = 0;
            return true;
        }
        if (std::chrono::steady_clock::now() > deadline)
            return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

bool Process::running() {
    if (pid_ < 0)
        return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
    }
    return true;
}

void Process::stop() {
    if (pid_ < 0)
        return;
    int status = 0;
    kill(pid_, SIGTERM);
    if (wait(2.0, &status))
        return;
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = -1;
}

std::string Process::output() const {
    std::ifstream in(out_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string status_text(int status) {
    if (WIFEXITED(status))
        return "exit status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status))
        return "killed by signal " + std::to_string(WTERMSIG(status));
    return "status " + std::to_string(status);
}

bool find_program(const std::string &name, std::string *path) {
    if (name.find('/') != std::string::npos) {
        *path = name;
        return access(name.c_str(), X_OK) == 0;
    }
    const char *env = std::getenv("PATH");
    std::string dirs = env ? env : "/usr/local/bin:/usr/bin:/bin";
    std::size_t start = 0;
    while (start <= dirs.size()) {
        std::size_t end = dirs.find(':', start);
        if (end == std::string::npos)
            end = dirs.size();
        std::string dir = dirs.substr(start, end - start);
        std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
        struct stat st;
        if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0) {
            *path = candidate;
            return true;
        }
        start = end + 1;
    }
    return false;
}

int make_temp_file(const std::string &stem, std::string *path, std::string *error) {
    const char *tmpdir = std::getenv("TMPDIR");
    std::string templ = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/datperf-" + stem + ".XXXXXX";
    std::vector<char> name(templ.begin(), templ.end());
    name.push_back('\0');
    int fd = mkstemp(name.data());
    if (fd < 0) {
        *error = "cannot create " + templ + ": " + std::strerror(errno);
        return -1;
    }
    *path = name.data();
    return fd;
}

int free_tcp_port() {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(s, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0 &&
        getsockname(s, reinterpret_cast<sockaddr *>(&a), &len) == 0)
        port = ntohs(a.sin_port);
    close(s);
    return port;
}

bool tcp_port_listening(int port) {
    for (const char *file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        std::ifstream in(file);
        std::string line;
        std::getline(in, line); // header
        while (std::getline(in, line)) {
            std::istringstream ls(line);
            std::string slot, local, remote, state;
            if (!(ls >> slot >> local >> remote >> state))
                continue;
            auto colon = local.rfind(':');
            if (colon == std::string::npos)
                continue;
            if (state == "0A" && std::strtol(local.c_str() + colon + 1, nullptr, 16) == port)
                return true;
        }
    }
    return false;
}

std::string shell_quote(const std::vector<std::string> &argv) {
    std::string out;
    for (const auto &a : argv) {
        if (!out.empty())
            out += ' ';
        bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                       "0123456789_-./:=,") == std::string::npos;
        if (plain) {
            out += a;
        } else {
            out += '\'';
            for (char c : a)
                out += c == '\'' ? std::string("'\\''") : std::string(1, c);
            out += '\'';
        }
    }
    return out;
}

} // namespace datperf
