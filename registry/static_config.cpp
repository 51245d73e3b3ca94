// SPDX-License-Identifier: BSD-3-Clause
#include "static_config.hpp"

#include "log.hpp"
#include "tunables.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

// The install layout libdat2 was configured with (CMAKE_INSTALL_LIBDIR,
// CMAKE_INSTALL_SYSCONFDIR): relative to the prefix, or absolute.
#ifndef DAT2_INSTALL_LIBDIR
#define DAT2_INSTALL_LIBDIR "lib"
#endif
#ifndef DAT2_INSTALL_SYSCONFDIR
#define DAT2_INSTALL_SYSCONFDIR "etc"
#endif
// dat2's own directory under the libdir (plugins) and the sysconfdir (dat.conf).
#define DAT2_SUBDIR "dat2"

namespace dat2 {

namespace {

bool regular_file_exists(const std::string &path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Reads a whole file; on failure returns false with a reason, and whether
// the failure is the process's rather than the file's (ConfFileStatus::transient).
bool read_file(const std::string &path, std::string &out, std::string &why, bool &transient) {
    // A directory opens and reads as an empty file.
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        why = "it is a directory";
        return false;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        const int err = errno;
        why = std::strerror(err);
        transient = err == EMFILE || err == ENFILE || err == ENOMEM;
        return false;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) {
        why = "read error";
        return false;
    }
    out = ss.str();
    return true;
}

void read_one(StaticConfig &cfg, const std::string &path, const char *origin) {
    ConfFileStatus status{path, origin, false, "", false};
    std::string text;
    if (read_file(path, text, status.error, status.transient)) {
        status.read = true;
        ConfParseResult parsed = parse_dat_conf(text, path);
        for (auto &d : parsed.diagnostics) {
            DAT2_ERR("%s", d.to_string().c_str());
            cfg.diagnostics.push_back(std::move(d));
        }
        DAT2_LOG(log::kStaticRegistry, "static registry: %zu entries from %s (%s)", parsed.entries.size(), path.c_str(),
                 origin);
        for (auto &e : parsed.entries)
            cfg.entries.push_back(std::move(e));
    } else {
        DAT2_ERR("cannot read dat.conf %s (%s): %s", path.c_str(), origin, status.error.c_str());
    }
    cfg.files.push_back(std::move(status));
}

} // namespace

std::string object_directory(const void *address) {
    Dl_info info;
    if (::dladdr(address, &info) == 0 || !info.dli_fname)
        return ".";
    std::string path = info.dli_fname;
    if (path.find('/') == std::string::npos) {
        // The main program's path as given to exec; resolve through /proc.
        char buf[4096];
        ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
        if (n <= 0)
            return ".";
        path.assign(buf, static_cast<std::size_t>(n));
    }
    std::size_t slash = path.rfind('/');
    std::string dir = slash == 0 ? "/" : path.substr(0, slash);
    // Canonical, so that <prefix>/bin/../lib (a RUNPATH of $ORIGIN/../lib)
    // or /lib/<multiarch> (a merged /usr) are recognised as the libdir.
    if (char *real = ::realpath(dir.c_str(), nullptr)) {
        dir = real;
        std::free(real);
    }
    return dir;
}

namespace {

// The install prefix of a libdat2 in `libdat2_dir`, when that directory is
// <prefix>/<libdir>; empty otherwise (a build tree, or a copy elsewhere).
std::string install_prefix_of(const std::string &libdat2_dir) {
    const std::string libdir = DAT2_INSTALL_LIBDIR;
    if (libdir.empty() || libdir[0] == '/')
        return libdat2_dir == libdir ? std::string("/") : std::string();
    const std::string suffix = "/" + libdir;
    if (libdat2_dir.size() < suffix.size() ||
        libdat2_dir.compare(libdat2_dir.size() - suffix.size(), suffix.size(), suffix) != 0)
        return "";
    std::string prefix = libdat2_dir.substr(0, libdat2_dir.size() - suffix.size());
    return prefix.empty() ? "/" : prefix;
}

std::string join(const std::string &dir, const std::string &name) { return dir == "/" ? "/" + name : dir + "/" + name; }

} // namespace

std::vector<ConfCandidate> conf_search_path(const std::string &libdat2_dir) {
    std::vector<ConfCandidate> path;
    auto add = [&](std::string p, const char *origin) {
        for (const auto &c : path)
            if (c.path == p)
                return;
        path.push_back({std::move(p), origin});
    };
    add(join(libdat2_dir, "dat.conf"), "beside libdat2");
    const std::string prefix = install_prefix_of(libdat2_dir);
    if (!prefix.empty()) {
        const std::string sysconfdir = DAT2_INSTALL_SYSCONFDIR;
        const std::string etc = sysconfdir[0] == '/' ? sysconfdir : join(prefix, sysconfdir);
        add(join(etc, DAT2_SUBDIR "/dat.conf"), "dat2's own");
        add(join(etc, "dat.conf"), "sysconfdir");
    }
    add("/etc/dat.conf", "system");
    return path;
}

StaticConfig read_static_config(const std::string &libdat2_dir) {
    StaticConfig cfg;
    if (const char *override_path = tunable_value("DAT_OVERRIDE")) {
        cfg.searched.push_back({override_path, "DAT_OVERRIDE"});
        read_one(cfg, override_path, "DAT_OVERRIDE");
        return cfg;
    }
    cfg.searched = conf_search_path(libdat2_dir);
    std::string looked;
    for (const auto &c : cfg.searched) {
        looked += (looked.empty() ? "" : ", ") + c.path;
        if (regular_file_exists(c.path))
            read_one(cfg, c.path, c.origin.c_str());
    }
    if (cfg.files.empty())
        DAT2_ERR("no dat.conf found (looked for %s; set DAT_OVERRIDE to name one)", looked.c_str());
    return cfg;
}

std::string plugin_directory(const std::string &libdat2_dir) { return join(libdat2_dir, DAT2_SUBDIR); }

namespace {

// The loader's own reason out of Boost.DLL's message for a failed load,
// "<what failed> (dlerror system message: <dlerror text>): <errno text>";
// the errno part is noise (a missing file reads "Bad file descriptor").
std::string loader_reason(const std::string &what) {
    static const std::string open = "(dlerror system message: ";
    const std::size_t a = what.find(open);
    const std::size_t b = what.rfind("): ");
    if (a == std::string::npos || b == std::string::npos || b < a + open.size())
        return what;
    return what.substr(a + open.size(), b - a - open.size());
}

} // namespace

std::unique_ptr<ProviderLibrary> load_provider_library(const std::string &library, const std::string &libdat2_dir,
                                                       std::string &why) {
    auto lib = std::make_unique<ProviderLibrary>();
    // Resolve: absolute as is; relative beside libdat2 if it exists there,
    // else in its plugin directory; otherwise as given, so that a bare name
    // goes to the dynamic loader's search path.
    std::string path = library;
    bool searched_beside = false;
    if (library[0] != '/') {
        searched_beside = true;
        for (const std::string &dir : {libdat2_dir, plugin_directory(libdat2_dir)}) {
            std::string candidate = join(dir, library);
            if (regular_file_exists(candidate)) {
                path = candidate;
                break;
            }
        }
    }
    namespace dll = boost::dll;
    dll::load_mode::type mode = dll::load_mode::rtld_now | dll::load_mode::rtld_global;
    // Boost.DLL opens a relative name as ./name unless told to search.
    if (path == library && library.find('/') == std::string::npos)
        mode = mode | dll::load_mode::search_system_folders;
    try {
        // The throwing overload: its error_code twin loses dlerror()'s text.
        lib->library.load(dll::fs::path(path), mode);
    } catch (const std::exception &e) {
        why = "cannot load " + path + ": " + loader_reason(e.what());
        if (searched_beside && path == library)
            why += " (looked beside libdat2 in " + libdat2_dir + ", in " + plugin_directory(libdat2_dir) +
                   " and on the library search path)";
        return nullptr;
    }
    for (const char *symbol : {DAT_PROVIDER_INIT_FUNC_STR, DAT_PROVIDER_FINI_FUNC_STR})
        if (!lib->library.has(symbol)) {
            why = path + " is not a DAT provider: it has no " + symbol + " symbol";
            return nullptr;
        }
    lib->init = &lib->library.get<void(const DAT_PROVIDER_INFO *, const char *)>(DAT_PROVIDER_INIT_FUNC_STR);
    lib->fini = &lib->library.get<void(const DAT_PROVIDER_INFO *)>(DAT_PROVIDER_FINI_FUNC_STR);
    if (lib->library.has(kGuardsDtoSlots))
        lib->guards_dto_slots = &lib->library.get<const int>(kGuardsDtoSlots);
    lib->path = path;
    return lib;
}

DAT_PROVIDER_INFO provider_info_of(const ConfEntry &entry) {
    DAT_PROVIDER_INFO info;
    std::memset(&info, 0, sizeof info);
    std::strncpy(info.ia_name, entry.ia_name.c_str(), DAT_NAME_MAX_LENGTH - 1);
    info.dapl_version_major = entry.api_major;
    info.dapl_version_minor = entry.api_minor;
    info.is_thread_safe = entry.thread_safe ? DAT_TRUE : DAT_FALSE;
    return info;
}

} // namespace dat2
