// SPDX-License-Identifier: BSD-3-Clause
// datinfo: what the DAT registry sees, and a health check. Every dat.conf
// entry with its file and line, whether its library loads and why not, and
// for each IA that opens the attributes dat_ia_query reports; -l for one line
// per entry; --probe for a loopback connection per entry in a child process.
// Like fi_info or ibv_devinfo, for DAT.
#include "dat2_version.h"
#include "datinfo_probe.hpp"
#include "json_text.hpp"
#include "names.hpp"
#include "static_config.hpp"
#include "tunables.hpp"

#include <dat2/udat.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <memory>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

// Exit statuses (datinfo(1)).
enum Exit : int {
    kHealthy = 0,   // the default IA (or the one named) opens
    kIaFails = 1,   // it does not open, or no entry has that name
    kUsage = 2,     // bad command line
    kNoConf = 3,    // no dat.conf found, or DAT_OVERRIDE's cannot be read
    kMalformed = 4, // a dat.conf has records that were skipped
};

struct Options {
    bool json = false;
    bool list = false;
    bool open = true;
    bool probe = false;
    int probe_timeout = 20;
    std::string only; // one IA name, or all
};

// Our report goes here: the real stdout. Whatever providers print while
// they load and open (OFED's print to stdout) goes to fd 1, which datinfo
// points at stderr, so the report (and --json) stays whole.
FILE *g_out = stdout;

void usage(FILE *out) {
    std::fprintf(out, "usage: datinfo [-l] [--json] [--no-open | --probe [--timeout SEC]] [IA_NAME]\n"
                      "       datinfo --version | --help\n"
                      "  Lists the dat.conf files libdat2 reads (or every path it searched when it\n"
                      "  found none), every entry with its file and line, whether its provider\n"
                      "  library loads (and why not), and the attributes of each IA that opens.\n"
                      "  -l, --list   one line per entry: name, library, ia_params, status\n"
                      "  --json       the same as JSON on stdout (providers' own output goes to stderr)\n"
                      "  --no-open    does not open the IAs\n"
                      "  --probe      opens each entry in a child process, connects two IAs of it on\n"
                      "               their own address, sends one message and one larger than its\n"
                      "               receive (a length error is due); a crash or a hang rules out\n"
                      "               that entry only; --timeout SEC per entry (default 20)\n"
                      "  --version    the version of datinfo and of the libdat2 it runs with\n"
                      "Exit status: 0 when the default IA (the first usable entry, or IA_NAME) opens\n"
                      "(and passes the probe with --probe); 1 when it does not or no entry has that\n"
                      "name; 2 bad usage; 3 no dat.conf found or DAT_OVERRIDE's cannot be read;\n"
                      "4 a dat.conf has malformed records. The reason goes to stderr.\n");
}

std::string quote(const std::string &s) { return dat2::tools::json_quote(s); }

// A provider's fixed-size name field, which it may not have terminated.
template <std::size_t N> std::string bounded(const char (&field)[N]) { return std::string(field, strnlen(field, N)); }

std::string dat_error_text(DAT_RETURN r) {
    const char *major = "", *minor = "";
    if (dat_strerror(r, &major, &minor) != DAT_SUCCESS)
        return "unknown DAT_RETURN";
    std::string s = major;
    if (minor && *minor)
        s += std::string(" ") + minor;
    return s;
}

std::string address_text(const DAT_IA_ADDRESS_PTR addr) {
    if (!addr)
        return "(none)";
    char buf[INET6_ADDRSTRLEN] = "";
    const sockaddr *sa = reinterpret_cast<const sockaddr *>(addr);
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in *>(sa)->sin_addr, buf, sizeof buf);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr, buf, sizeof buf);
    else
        return "family " + std::to_string(sa->sa_family);
    return buf;
}

// An ordered list of attribute name/value pairs; values are already JSON.
struct Attrs {
    std::vector<std::pair<std::string, std::string>> items;
    void num(const char *k, long long v) { items.emplace_back(k, std::to_string(v)); }
    void unum(const char *k, unsigned long long v) { items.emplace_back(k, std::to_string(v)); }
    void str(const char *k, const std::string &v) { items.emplace_back(k, quote(v)); }
    void boolean(const char *k, DAT_BOOLEAN v) { items.emplace_back(k, v ? "true" : "false"); }
};

Attrs ia_attrs(const DAT_IA_ATTR &a) {
    Attrs r;
    r.str("adapter_name", bounded(a.adapter_name));
    r.str("vendor_name", bounded(a.vendor_name));
    r.str("hardware_version",
          std::to_string(a.hardware_version_major) + "." + std::to_string(a.hardware_version_minor));
    r.str("firmware_version",
          std::to_string(a.firmware_version_major) + "." + std::to_string(a.firmware_version_minor));
    r.str("ia_address", address_text(a.ia_address_ptr));
    r.num("max_eps", a.max_eps);
    r.num("max_dto_per_ep", a.max_dto_per_ep);
    r.num("max_rdma_read_per_ep_in", a.max_rdma_read_per_ep_in);
    r.num("max_rdma_read_per_ep_out", a.max_rdma_read_per_ep_out);
    r.num("max_evds", a.max_evds);
    r.num("max_evd_qlen", a.max_evd_qlen);
    r.num("max_iov_segments_per_dto", a.max_iov_segments_per_dto);
    r.num("max_lmrs", a.max_lmrs);
    r.unum("max_lmr_block_size", a.max_lmr_block_size);
    r.unum("max_lmr_virtual_address", a.max_lmr_virtual_address);
    r.num("max_pzs", a.max_pzs);
    r.unum("max_message_size", a.max_message_size);
    r.unum("max_rdma_size", a.max_rdma_size);
    r.num("max_rmrs", a.max_rmrs);
    r.unum("max_rmr_target_address", a.max_rmr_target_address);
    r.num("max_srqs", a.max_srqs);
    r.num("max_ep_per_srq", a.max_ep_per_srq);
    r.num("max_recv_per_srq", a.max_recv_per_srq);
    r.num("max_iov_segments_per_rdma_read", a.max_iov_segments_per_rdma_read);
    r.num("max_iov_segments_per_rdma_write", a.max_iov_segments_per_rdma_write);
    r.num("max_rdma_read_in", a.max_rdma_read_in);
    r.num("max_rdma_read_out", a.max_rdma_read_out);
    r.boolean("max_rdma_read_per_ep_in_guaranteed", a.max_rdma_read_per_ep_in_guaranteed);
    r.boolean("max_rdma_read_per_ep_out_guaranteed", a.max_rdma_read_per_ep_out_guaranteed);
    r.boolean("zb_supported", a.zb_supported);
    r.num("extension_supported", a.extension_supported);
    r.num("extension_version", a.extension_version);
    for (DAT_COUNT i = 0; a.transport_attr && i < a.num_transport_attr; ++i)
        r.str((std::string("transport.") + (a.transport_attr[i].name ? a.transport_attr[i].name : "?")).c_str(),
              a.transport_attr[i].value ? a.transport_attr[i].value : "");
    for (DAT_COUNT i = 0; a.vendor_attr && i < a.num_vendor_attr; ++i)
        r.str((std::string("vendor.") + (a.vendor_attr[i].name ? a.vendor_attr[i].name : "?")).c_str(),
              a.vendor_attr[i].value ? a.vendor_attr[i].value : "");
    return r;
}

Attrs provider_attrs(const DAT_PROVIDER_ATTR &p) {
    Attrs r;
    r.str("provider_name", bounded(p.provider_name));
    r.str("provider_version",
          std::to_string(p.provider_version_major) + "." + std::to_string(p.provider_version_minor));
    r.str("dapl_version", std::to_string(p.dapl_version_major) + "." + std::to_string(p.dapl_version_minor));
    r.num("lmr_mem_types_supported", p.lmr_mem_types_supported);
    r.num("iov_ownership_on_return", p.iov_ownership_on_return);
    r.num("dat_qos_supported", p.dat_qos_supported);
    r.num("completion_flags_supported", p.completion_flags_supported);
    r.boolean("is_thread_safe", p.is_thread_safe);
    r.num("max_private_data_size", p.max_private_data_size);
    r.boolean("supports_multipath", p.supports_multipath);
    r.num("ep_creator", p.ep_creator);
    r.num("pz_support", p.pz_support);
    r.unum("optimal_buffer_alignment", p.optimal_buffer_alignment);
    r.boolean("srq_supported", p.srq_supported);
    r.num("srq_watermarks_supported", p.srq_watermarks_supported);
    r.boolean("srq_ep_pz_difference_supported", p.srq_ep_pz_difference_supported);
    r.num("srq_info_supported", p.srq_info_supported);
    r.num("ep_recv_info_supported", p.ep_recv_info_supported);
    r.boolean("lmr_sync_req", p.lmr_sync_req);
    r.boolean("dto_async_return_guaranteed", p.dto_async_return_guaranteed);
    r.boolean("rdma_write_for_rdma_read_req", p.rdma_write_for_rdma_read_req);
    r.boolean("rdma_read_lmr_rmr_context_exposure", p.rdma_read_lmr_rmr_context_exposure);
    r.num("rmr_scope_supported", p.rmr_scope_supported);
    r.boolean("is_signal_safe", p.is_signal_safe);
    r.boolean("ha_supported", p.ha_supported);
    r.num("ha_loadbalancing", p.ha_loadbalancing);
    for (DAT_COUNT i = 0; p.provider_specific_attr && i < p.num_provider_specific_attr; ++i)
        r.str((std::string("specific.") + (p.provider_specific_attr[i].name ? p.provider_specific_attr[i].name : "?"))
                  .c_str(),
              p.provider_specific_attr[i].value ? p.provider_specific_attr[i].value : "");
    return r;
}

struct OpenResult {
    bool attempted = false;
    DAT_RETURN status = DAT_SUCCESS;
    std::string error;
    Attrs ia, provider;
};

OpenResult try_open(const std::string &name) {
    OpenResult res;
    res.attempted = true;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
    res.status = dat_ia_open(const_cast<char *>(name.c_str()), 8, &async_evd, &ia);
    if (res.status != DAT_SUCCESS) {
        res.error = dat_error_text(res.status);
        return res;
    }
    DAT_IA_ATTR ia_attr;
    std::memset(&ia_attr, 0, sizeof ia_attr);
    // DAT_PROVIDER_ATTR has a const member: it cannot be default-constructed in C++.
    std::unique_ptr<DAT_PROVIDER_ATTR, decltype(&std::free)> pattr(
        static_cast<DAT_PROVIDER_ATTR *>(std::calloc(1, sizeof(DAT_PROVIDER_ATTR))), &std::free);
    DAT_RETURN q = dat_ia_query(ia, nullptr, DAT_IA_FIELD_ALL, &ia_attr, DAT_PROVIDER_FIELD_ALL, pattr.get());
    if (q != DAT_SUCCESS) {
        res.status = q;
        res.error = "dat_ia_query: " + dat_error_text(q);
    } else {
        res.ia = ia_attrs(ia_attr);
        res.provider = provider_attrs(*pattr);
    }
    DAT_RETURN c = dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    if (c != DAT_SUCCESS && res.status == DAT_SUCCESS) {
        res.status = c;
        res.error = "dat_ia_close: " + dat_error_text(c);
    }
    return res;
}

struct EntryReport {
    const dat2::ConfEntry *entry;
    bool library_loads = false;
    std::string library_path, library_error;
    bool failover = false; // a later entry of a name already opened
    OpenResult open;
    bool probed = false;
    datinfo::ProbeResult probe;

    bool works() const {
        if (probed)
            return probe.kind == datinfo::ProbeResult::Ok;
        return open.attempted && open.status == DAT_SUCCESS;
    }

    // The status column of -l and the "status" of --json.
    std::string status(bool opening) const {
        const auto &e = *entry;
        if (e.api_kind != 'u')
            return "not used: an entry for kernel consumers";
        if (!e.is_default)
            return "not used: marked nondefault";
        if (failover)
            return "fail-over entry of the one above";
        if (probed)
            return probe.kind == datinfo::ProbeResult::Ok ? "ok, loopback connection passed" : probe.text();
        if (!library_loads)
            return "does not load: " + library_error;
        if (!opening)
            return "loads (not opened)";
        if (open.status == DAT_SUCCESS)
            return "ok";
        return "does not open: " + open.error;
    }
};

// The libdat2 this process runs with, and whether it is ours: OFED's never
// exported dat_cno_fd_create (README, "Differences from OFED's").
struct LoadedLibdat2 {
    std::string path, dir;
    bool ours = false;
};

LoadedLibdat2 loaded_libdat2() {
    LoadedLibdat2 l;
    Dl_info info;
    if (::dladdr(reinterpret_cast<const void *>(&dat_ia_openv), &info) && info.dli_fname) {
        l.path = info.dli_fname;
        if (char *real = ::realpath(info.dli_fname, nullptr)) {
            l.path = real;
            std::free(real);
        }
    }
    l.dir = dat2::object_directory(reinterpret_cast<const void *>(&dat_ia_openv));
    l.ours = ::dlsym(RTLD_DEFAULT, "dat_cno_fd_create") != nullptr;
    return l;
}

void print_attrs_text(const char *title, const Attrs &a) {
    std::fprintf(g_out, "      %s:\n", title);
    for (auto &kv : a.items) {
        std::string v = kv.second;
        if (v.size() >= 2 && v.front() == '"')
            v = v.substr(1, v.size() - 2);
        std::fprintf(g_out, "        %-38s %s\n", kv.first.c_str(), v.c_str());
    }
}

std::string attrs_json(const Attrs &a) {
    std::string s = "{";
    for (std::size_t i = 0; i < a.items.size(); ++i)
        s += (i ? ", " : "") + quote(a.items[i].first) + ": " + a.items[i].second;
    return s + "}";
}

void print_list(const std::vector<EntryReport> &reports, bool opening) {
    std::size_t wn = 0, wl = 0, wp = 0;
    for (const auto &r : reports) {
        wn = std::max(wn, r.entry->ia_name.size());
        wl = std::max(wl, r.entry->library.size());
        wp = std::max(wp, r.entry->ia_params.size() + 2);
    }
    for (const auto &r : reports) {
        std::string params = "\"" + r.entry->ia_params + "\"";
        std::fprintf(g_out, "%-*s  %-*s  %-*s  %s\n", static_cast<int>(wn), r.entry->ia_name.c_str(),
                     static_cast<int>(wl), r.entry->library.c_str(), static_cast<int>(wp), params.c_str(),
                     r.status(opening).c_str());
    }
}

void print_json(const Options &opt, const LoadedLibdat2 &lib, const dat2::StaticConfig &cfg,
                const std::vector<EntryReport> &reports, const std::string &default_ia, int exit_code,
                const std::vector<std::string> &problems) {
    FILE *o = g_out;
    std::fprintf(o, "{\n  \"version\": %s,\n  \"libdat2\": {\"path\": %s, \"dir\": %s, \"dat2\": %s},\n",
                 quote(DAT2_VERSION).c_str(), quote(lib.path).c_str(), quote(lib.dir).c_str(),
                 lib.ours ? "true" : "false");
    std::fprintf(o, "  \"libdat2_dir\": %s,\n  \"searched\": [", quote(lib.dir).c_str());
    for (std::size_t i = 0; i < cfg.searched.size(); ++i)
        std::fprintf(o, "%s\n    {\"path\": %s, \"origin\": %s}", i ? "," : "", quote(cfg.searched[i].path).c_str(),
                     quote(cfg.searched[i].origin).c_str());
    std::fprintf(o, "\n  ],\n  \"conf_files\": [");
    for (std::size_t i = 0; i < cfg.files.size(); ++i) {
        const auto &f = cfg.files[i];
        std::fprintf(o, "%s\n    {\"path\": %s, \"origin\": %s, \"read\": %s, \"error\": %s}", i ? "," : "",
                     quote(f.path).c_str(), quote(f.origin).c_str(), f.read ? "true" : "false", quote(f.error).c_str());
    }
    std::fprintf(o, "\n  ],\n  \"diagnostics\": [");
    for (std::size_t i = 0; i < cfg.diagnostics.size(); ++i) {
        const auto &d = cfg.diagnostics[i];
        std::fprintf(o, "%s\n    {\"file\": %s, \"line\": %u, \"field\": %s, \"message\": %s}", i ? "," : "",
                     quote(d.file).c_str(), d.line, quote(d.field).c_str(), quote(d.message).c_str());
    }
    std::fprintf(o, "\n  ],\n  \"tunables\": [");
    bool first = true;
    for (const dat2::Tunable *t = dat2::tunables(); t->name; ++t, first = false) {
        const char *v = std::getenv(t->name);
        std::fprintf(o, "%s\n    {\"name\": %s, \"value\": %s, \"default\": %s, \"help\": %s}", first ? "" : ",",
                     quote(t->name).c_str(), v ? quote(v).c_str() : "null",
                     t->default_value ? quote(t->default_value).c_str() : "null", quote(t->help).c_str());
    }
    std::fprintf(o, "\n  ],\n  \"default_ia\": %s,\n  \"entries\": [",
                 default_ia.empty() ? "null" : quote(default_ia).c_str());
    for (std::size_t i = 0; i < reports.size(); ++i) {
        const auto &r = reports[i];
        const auto &e = *r.entry;
        std::fprintf(
            o,
            "%s\n    {\"ia_name\": %s, \"file\": %s, \"line\": %u, \"api_version\": %s, "
            "\"thread_safe\": %s, \"default\": %s, \"library\": %s, \"provider_version\": %s, "
            "\"ia_params\": %s, \"platform_params\": %s, \"status\": %s",
            i ? "," : "", quote(e.ia_name).c_str(), quote(e.file).c_str(), e.line,
            quote(std::string(1, e.api_kind) + std::to_string(e.api_major) + "." + std::to_string(e.api_minor)).c_str(),
            e.thread_safe ? "true" : "false", e.is_default ? "true" : "false", quote(e.library).c_str(),
            quote(e.provider_id + "." + std::to_string(e.provider_major) + "." + std::to_string(e.provider_minor))
                .c_str(),
            quote(e.ia_params).c_str(), quote(e.platform_params).c_str(), quote(r.status(opt.open)).c_str());
        if (!r.probed)
            std::fprintf(o, ",\n     \"library_loads\": %s, \"library_path\": %s, \"library_error\": %s",
                         r.library_loads ? "true" : "false", quote(r.library_path).c_str(),
                         quote(r.library_error).c_str());
        if (r.probed)
            std::fprintf(o, ",\n     \"probe\": {\"result\": %s, \"stage\": %s, \"detail\": %s, \"log\": %s}",
                         quote(r.probe.kind_name()).c_str(), quote(r.probe.stage).c_str(),
                         quote(r.probe.detail).c_str(), quote(r.probe.first_log_line()).c_str());
        if (r.open.attempted) {
            std::fprintf(o, ",\n     \"open\": {\"status\": %s, \"error\": %s",
                         quote(dat_error_text(r.open.status)).c_str(), quote(r.open.error).c_str());
            if (r.open.status == DAT_SUCCESS)
                std::fprintf(o, ",\n       \"ia_attr\": %s,\n       \"provider_attr\": %s",
                             attrs_json(r.open.ia).c_str(), attrs_json(r.open.provider).c_str());
            std::fprintf(o, "}");
        }
        std::fprintf(o, "}");
    }
    std::fprintf(o, "\n  ],\n  \"problems\": [");
    for (std::size_t i = 0; i < problems.size(); ++i)
        std::fprintf(o, "%s\n    %s", i ? "," : "", quote(problems[i]).c_str());
    std::fprintf(o, "\n  ],\n  \"exit_status\": %d\n}\n", exit_code);
}

void print_text(const Options &opt, const LoadedLibdat2 &lib, const dat2::StaticConfig &cfg,
                const std::vector<EntryReport> &reports) {
    FILE *o = g_out;
    std::fprintf(o, "dat.conf files (libdat2 in %s):\n", lib.dir.c_str());
    bool any_read = false;
    for (const auto &f : cfg.files) {
        any_read |= f.read;
        std::fprintf(o, "  %s (%s): %s\n", f.path.c_str(), f.origin.c_str(),
                     f.read ? "read" : ("not read: " + f.error).c_str());
    }
    if (cfg.files.empty())
        std::fprintf(o, "  none found\n");
    if (!any_read) {
        std::fprintf(o, "searched:\n");
        for (const auto &c : cfg.searched)
            std::fprintf(o, "  %s (%s)\n", c.path.c_str(), c.origin.c_str());
    }
    if (!cfg.diagnostics.empty()) {
        std::fprintf(o, "diagnostics (these records were skipped):\n");
        for (const auto &d : cfg.diagnostics)
            std::fprintf(o, "  %s\n", d.to_string().c_str());
    }
    std::fprintf(o, "tunables:\n");
    for (const dat2::Tunable *t = dat2::tunables(); t->name; ++t) {
        const char *v = std::getenv(t->name);
        std::fprintf(o, "  %-14s = %-10s %s\n", t->name,
                     v ? v : (t->default_value ? (std::string("(") + t->default_value + ")").c_str() : "(unset)"),
                     t->help);
    }
    std::fprintf(o, "entries:\n");
    for (const auto &r : reports) {
        const auto &e = *r.entry;
        std::fprintf(o, "  %s\n    source:   %s:%u\n    record:   %c%u.%u %s %s %s %s.%u.%u \"%s\" \"%s\"\n",
                     e.ia_name.c_str(), e.file.c_str(), e.line, e.api_kind, e.api_major, e.api_minor,
                     e.thread_safe ? "threadsafe" : "nonthreadsafe", e.is_default ? "default" : "nondefault",
                     e.library.c_str(), e.provider_id.c_str(), e.provider_major, e.provider_minor, e.ia_params.c_str(),
                     e.platform_params.c_str());
        if (!r.probed) {
            if (r.library_loads)
                std::fprintf(o, "    library:  loads (%s)\n", r.library_path.c_str());
            else
                std::fprintf(o, "    library:  does not load: %s\n", r.library_error.c_str());
        }
        if (!e.loadable())
            std::fprintf(o, "    open:     not tried: entry is %s\n",
                         e.api_kind != 'u' ? "for kernel consumers" : "nondefault (disabled)");
        else if (r.probed)
            std::fprintf(o, "    probe:    %s\n", r.status(opt.open).c_str());
        else if (r.open.attempted) {
            if (r.open.status == DAT_SUCCESS) {
                std::fprintf(o, "    open:     ok\n");
                print_attrs_text("ia_attr", r.open.ia);
                print_attrs_text("provider_attr", r.open.provider);
            } else {
                std::fprintf(o, "    open:     failed: %s%s\n", r.open.error.c_str(),
                             r.library_loads ? " (the library loads: its dat_provider_init or ia_open refused "
                                               "this entry; see the log line above)"
                                             : "");
            }
        } else if (r.failover)
            std::fprintf(o, "    open:     fail-over entry: tried when the one above fails\n");
    }
    if (reports.empty())
        std::fprintf(o, "  none\n");
}

} // namespace

int main(int argc, char **argv) {
    Options opt;
    bool version = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--json")
            opt.json = true;
        else if (a == "-l" || a == "--list")
            opt.list = true;
        else if (a == "--no-open")
            opt.open = false;
        else if (a == "--probe")
            opt.probe = true;
        else if (a == "--timeout" && i + 1 < argc && std::atoi(argv[i + 1]) > 0)
            opt.probe_timeout = std::atoi(argv[++i]);
        else if (a == "--version")
            version = true;
        else if (a == "-h" || a == "--help") {
            usage(stdout);
            return kHealthy;
        } else if (!a.empty() && a[0] != '-' && opt.only.empty())
            opt.only = a;
        else {
            std::fprintf(stderr, "datinfo: unknown argument '%s'\n", a.c_str());
            usage(stderr);
            return kUsage;
        }
    }
    if (opt.probe && !opt.open) {
        std::fprintf(stderr, "datinfo: --probe opens the IAs; it cannot go with --no-open\n");
        return kUsage;
    }
    const LoadedLibdat2 lib = loaded_libdat2();
    if (version) {
        std::printf("datinfo %s (dat2)\nlibdat2 %s: %s\n", DAT2_VERSION, lib.path.c_str(),
                    lib.ours ? "dat2's" : "not dat2's (OFED's or another registry)");
        return kHealthy;
    }

    // The report keeps the real stdout; fd 1 becomes stderr for everything
    // else in this process (providers that print, DAT_DBG_DEST=1).
    std::fflush(stdout);
    int report_fd = ::dup(1);
    if (report_fd >= 0 && ::dup2(2, 1) >= 0)
        if (FILE *f = ::fdopen(report_fd, "w"))
            g_out = f;
    if (!lib.ours)
        std::fprintf(stderr,
                     "datinfo: the libdat2 this runs with (%s) is not dat2's (OFED's or another): what it "
                     "does may differ from what follows (install dat2's, or check the RUNPATH and "
                     "LD_LIBRARY_PATH)\n",
                     lib.path.c_str());

    // libdat2's own directory decides which dat.conf it reads and where
    // relative library names resolve.
    const dat2::StaticConfig cfg = dat2::read_static_config(lib.dir);
    std::string default_ia;
    std::vector<std::string> names;
    for (const auto &e : cfg.entries)
        if (e.loadable()) {
            if (default_ia.empty())
                default_ia = e.ia_name;
            names.push_back(e.ia_name);
        }

    std::vector<EntryReport> reports;
    std::set<std::string> opened;
    for (const auto &e : cfg.entries) {
        if (!opt.only.empty() && e.ia_name != opt.only)
            continue;
        EntryReport r;
        r.entry = &e;
        const bool first_of_name = e.loadable() && opened.insert(e.ia_name).second;
        r.failover = e.loadable() && !first_of_name;
        if (opt.probe) {
            // No provider code in this process: the child loads and opens.
            if (first_of_name) {
                r.probed = true;
                r.probe = datinfo::probe_in_child(e.ia_name, opt.probe_timeout);
            }
        } else {
            std::string why;
            auto library = dat2::load_provider_library(e.library, lib.dir, why);
            r.library_loads = library != nullptr;
            r.library_path = library ? library->path : "";
            r.library_error = why;
            library.reset();
            if (opt.open && first_of_name)
                r.open = try_open(e.ia_name);
        }
        reports.push_back(std::move(r));
    }

    // The verdict, most fundamental problem first.
    std::vector<std::string> problems;
    int exit_code = kHealthy;
    auto problem = [&](int code, const std::string &text) {
        problems.push_back(text);
        if (exit_code == kHealthy)
            exit_code = code;
    };
    bool any_read = false;
    for (const auto &f : cfg.files) {
        any_read |= f.read;
        if (!f.read)
            problem(kNoConf, "cannot read " + f.path + " (" + f.origin + "): " + f.error);
    }
    if (cfg.files.empty()) {
        std::string looked;
        for (const auto &c : cfg.searched)
            looked += (looked.empty() ? "" : ", ") + c.path + " (" + c.origin + ")";
        problem(kNoConf, "no dat.conf found; searched " + looked + "; DAT_OVERRIDE may name one");
    }
    const std::string target = opt.only.empty() ? default_ia : opt.only;
    if (any_read && target.empty())
        problem(kIaFails, "no usable entry in dat.conf (none is a 'u' entry marked default)");
    if (!opt.only.empty() && reports.empty()) {
        const std::string guess = dat2::closest_name(opt.only, names);
        problem(kIaFails, "no dat.conf entry named '" + opt.only + "'" +
                              (guess.empty() ? "" : "; did you mean '" + guess + "'?"));
    } else if (!target.empty() && opt.open) {
        for (const auto &r : reports)
            if (r.entry->ia_name == target && !r.failover) {
                if (!r.works())
                    problem(kIaFails, std::string(opt.only.empty() ? "the default IA" : "IA") + " '" + target + "' (" +
                                          r.entry->file + ":" + std::to_string(r.entry->line) +
                                          "): " + r.status(opt.open));
                break;
            }
    }
    if (!cfg.diagnostics.empty())
        problem(kMalformed, std::to_string(cfg.diagnostics.size()) +
                                " malformed dat.conf record(s) skipped, the first " +
                                cfg.diagnostics.front().to_string());

    if (opt.json)
        print_json(opt, lib, cfg, reports, default_ia, exit_code, problems);
    else if (opt.list)
        print_list(reports, opt.open);
    else
        print_text(opt, lib, cfg, reports);
    std::fflush(g_out);
    for (const auto &p : problems)
        std::fprintf(stderr, "datinfo: %s\n", p.c_str());
    return exit_code;
}
