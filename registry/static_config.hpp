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
    std::string origin; // "DAT_OVERRIDE", "beside libdat2", "sysconfdir", "/etc"
    bool read = false;
    std::string error; // why it was not read
};

struct StaticConfig {
    std::vector<ConfFileStatus> files;
    std::vector<ConfEntry> entries; // in file order: earlier files first
    std::vector<ConfDiagnostic> diagnostics;
};

// The directory of the shared object (or executable) that contains `address`.
std::string object_directory(const void *address);

// Reads the static registry as libdat2 does: DAT_OVERRIDE alone when set
// (no fallback), otherwise the dat.conf beside libdat2 (a build tree's) and
// then the first of <sysconfdir>/dat.conf and /etc/dat.conf that exists.
StaticConfig read_static_config(const std::string &libdat2_dir);

struct ProviderLibrary {
    boost::dll::shared_library library;
    DAT_PROVIDER_INIT_FUNC init = nullptr;
    DAT_PROVIDER_FINI_FUNC fini = nullptr;
    std::string path; // the file actually loaded
};

// Loads a provider library and resolves dat_provider_init/fini. A relative
// name is looked up beside libdat2 first, then on the normal search path.
// On failure returns nullptr and sets `why` to a sentence for the user.
std::unique_ptr<ProviderLibrary> load_provider_library(const std::string &library,
                                                       const std::string &libdat2_dir,
                                                       std::string &why);

// The DAT_PROVIDER_INFO an entry is registered and opened with.
DAT_PROVIDER_INFO provider_info_of(const ConfEntry &entry);

} // namespace dat2
