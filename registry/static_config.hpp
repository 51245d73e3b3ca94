// SPDX-License-Identifier: BSD-3-Clause
// Finding and reading the static registry (dat.conf files), and loading a
// provider library. Shared by libdat2 and datinfo; names no provider.
#pragma once

#include "dat_conf.hpp"

#include <dat2/udat.h>
#include <dat2/dat_registry.h>

#define BOOST_DLL_USE_STD_FS
#include <boost/dll/shared_library.hpp>

#include <memory>
#include <string>
#include <vector>

namespace dat2 {

struct ConfFileStatus {
    std::string path;
    // "DAT_OVERRIDE", "beside libdat2", "dat2's own", "sysconfdir", "system"
    std::string origin;
    bool read = false;
    std::string error; // why it was not read
    // Not read for want of descriptors or memory (EMFILE, ENFILE, ENOMEM):
    // the process's state, not the file's, so the registry reads it again
    // at its next call instead of keeping the failure for its lifetime.
    bool transient = false;
};

// A place where a dat.conf may be, in search order.
struct ConfCandidate {
    std::string path;
    std::string origin;
};

struct StaticConfig {
    std::vector<ConfCandidate> searched; // every path looked at, found or not
    std::vector<ConfFileStatus> files;   // those that exist (or DAT_OVERRIDE's)
    std::vector<ConfEntry> entries;      // in file order: earlier files first
    std::vector<ConfDiagnostic> diagnostics;
};

// The directory of the shared object (or executable) that contains `address`.
std::string object_directory(const void *address);

// Where libdat2 in `libdat2_dir` looks for dat.conf without DAT_OVERRIDE, in
// order: beside itself (a build tree), then, when it sits in an install
// tree's libdir, that tree's <sysconfdir>/dat2/dat.conf (dat2's own) and
// <sysconfdir>/dat.conf, and last the system's /etc/dat.conf (OFED's).
// The install tree is found from libdat2's own location, so an installed
// copy follows its prefix whatever it was configured with.
std::vector<ConfCandidate> conf_search_path(const std::string &libdat2_dir);

// Reads the static registry as libdat2 does: DAT_OVERRIDE alone when set
// (no fallback), otherwise every file of conf_search_path() that exists.
StaticConfig read_static_config(const std::string &libdat2_dir);

// The plugin directory of an installed libdat2: <libdir>/dat2.
std::string plugin_directory(const std::string &libdat2_dir);

// A provider library loaded with Boost.DLL, unloaded when destroyed.
// A provider library that exports this symbol promises that its DTO post
// slots and dat_evd_dequeue never let an exception out (registry.hpp,
// g_guarded_first). Our kit's plugins do (core/provider.cpp).
inline constexpr const char kGuardsDtoSlots[] = "dat2_provider_guards_dto_slots";

struct ProviderLibrary {
    boost::dll::shared_library library;
    DAT_PROVIDER_INIT_FUNC init = nullptr;
    DAT_PROVIDER_FINI_FUNC fini = nullptr;
    const void *guards_dto_slots = nullptr; // its kGuardsDtoSlots symbol, if it exports one
    std::string path;                       // the file actually loaded
};

// Loads a provider library and resolves dat_provider_init/fini. A relative
// name is looked up beside libdat2 first, then in its plugin directory
// (<libdir>/dat2), then (a bare name) on the dynamic loader's search path.
// On failure returns nullptr and sets `why` to a sentence for the user that
// carries dlerror()'s own text.
std::unique_ptr<ProviderLibrary> load_provider_library(const std::string &library, const std::string &libdat2_dir,
                                                       std::string &why);

// The DAT_PROVIDER_INFO an entry is registered and opened with.
DAT_PROVIDER_INFO provider_info_of(const ConfEntry &entry);

} // namespace dat2
