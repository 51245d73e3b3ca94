// SPDX-License-Identifier: BSD-3-Clause
#include "static_config.hpp"

#include "log.hpp"
#include "tunables.hpp"

#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#ifndef DAT2_SYSCONF_DAT_CONF
#define DAT2_SYSCONF_DAT_CONF "/usr/local/etc/dat.conf"
#endif

namespace dat2 {

namespace {

bool regular_file_exists(const std::string &path)
{
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Reads a whole file; on failure returns false with a reason.
bool read_file(const std::string &path, std::string &out, std::string &why)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        why = std::strerror(errno);
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

void read_one(StaticConfig &cfg, const std::string &path, const char *origin)
{
    ConfFileStatus status{path, origin, false, ""};
    std::string text;
    if (read_file(path, text, status.error)) {
        status.read = true;
        ConfParseResult parsed = parse_dat_conf(text, path);
        for (auto &d : parsed.diagnostics) {
            DAT2_ERR("%s", d.to_string().c_str());
            cfg.diagnostics.push_back(std::move(d));
        }
        DAT2_LOG(log::kStaticRegistry, "static registry: %zu entries from %s (%s)",
                 parsed.entries.size(), path.c_str(), origin);
        for (auto &e : parsed.entries)
            cfg.entries.push_back(std::move(e));
    } else {
        DAT2_ERR("cannot read dat.conf %s (%s): %s", path.c_str(), origin, status.error.c_str());
    }
    cfg.files.push_back(std::move(status));
}

} // namespace

std::string object_directory(const void *address)
{
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
    return slash == 0 ? "/" : path.substr(0, slash);
}

StaticConfig read_static_config(const std::string &libdat2_dir)
{
    StaticConfig cfg;
    if (const char *override_path = tunable_value("DAT_OVERRIDE")) {
        read_one(cfg, override_path, "DAT_OVERRIDE");
        return cfg;
    }
    std::string beside = libdat2_dir + "/dat.conf";
    if (regular_file_exists(beside))
        read_one(cfg, beside, "beside libdat2");
    if (regular_file_exists(DAT2_SYSCONF_DAT_CONF))
        read_one(cfg, DAT2_SYSCONF_DAT_CONF, "sysconfdir");
    else if (regular_file_exists("/etc/dat.conf") && std::string(DAT2_SYSCONF_DAT_CONF) != "/etc/dat.conf")
        read_one(cfg, "/etc/dat.conf", "/etc");
    if (cfg.files.empty())
        DAT2_LOG(log::kStaticRegistry,
                 "static registry: no dat.conf found (looked for %s, %s, /etc/dat.conf)",
                 beside.c_str(), DAT2_SYSCONF_DAT_CONF);
    return cfg;
}

std::unique_ptr<ProviderLibrary> load_provider_library(const std::string &library,
                                                       const std::string &libdat2_dir,
                                                       std::string &why)
{
    namespace dll = boost::dll;
    auto lib = std::make_unique<ProviderLibrary>();
    // Resolve: absolute as is; relative beside libdat2 if it exists there;
    // otherwise a bare name goes to the dynamic loader's search path.
    std::string path = library;
    dll::load_mode::type mode = dll::load_mode::rtld_now | dll::load_mode::rtld_global;
    if (library[0] != '/') {
        std::string beside = libdat2_dir + "/" + library;
        if (regular_file_exists(beside))
            path = beside;
        else if (library.find('/') == std::string::npos)
            mode = mode | dll::load_mode::search_system_folders;
    }
    try {
        // The throwing overload keeps dlerror()'s text; the error_code one
        // reduces a missing file to "Bad file descriptor".
        lib->library.load(dll::fs::path(path), mode);
    } catch (const std::exception &e) {
        why = std::string("cannot load ") + path + ": " + e.what();
        if (library[0] != '/' && path == library)
            why += " (looked beside libdat2 in " + libdat2_dir + " and on the library search path)";
        return nullptr;
    }
    if (!lib->library.has(DAT_PROVIDER_INIT_FUNC_STR)) {
        why = path + " is not a DAT provider: it has no " DAT_PROVIDER_INIT_FUNC_STR " symbol";
        return nullptr;
    }
    lib->init = lib->library.get<void(const DAT_PROVIDER_INFO *, const char *)>(DAT_PROVIDER_INIT_FUNC_STR);
    if (lib->library.has(DAT_PROVIDER_FINI_FUNC_STR))
        lib->fini = lib->library.get<void(const DAT_PROVIDER_INFO *)>(DAT_PROVIDER_FINI_FUNC_STR);
    else {
        why = path + " is not a DAT provider: it has no " DAT_PROVIDER_FINI_FUNC_STR " symbol";
        return nullptr;
    }
    lib->path = path;
    return lib;
}

DAT_PROVIDER_INFO provider_info_of(const ConfEntry &entry)
{
    DAT_PROVIDER_INFO info;
    std::memset(&info, 0, sizeof info);
    std::strncpy(info.ia_name, entry.ia_name.c_str(), DAT_NAME_MAX_LENGTH - 1);
    info.dapl_version_major = entry.api_major;
    info.dapl_version_minor = entry.api_minor;
    info.is_thread_safe = entry.thread_safe ? DAT_TRUE : DAT_FALSE;
    return info;
}

} // namespace dat2
