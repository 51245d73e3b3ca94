// SPDX-License-Identifier: BSD-3-Clause
// datinfo: what the DAT registry sees. Every dat.conf entry with its file and
// line, whether its library loads and why not, and for each IA that opens the
// attributes dat_ia_query reports. Like fi_info or ibv_devinfo, for DAT.
#include "static_config.hpp"
#include "json_text.hpp"
#include "tunables.hpp"

#include <dat2/udat.h>

#include <arpa/inet.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace {

struct Options {
    bool json = false;
    bool open = true;
    std::string only; // one IA name, or all
};

void usage(FILE *out)
{
    std::fprintf(out,
                 "usage: datinfo [--json] [--no-open] [IA_NAME]\n"
                 "  Lists the dat.conf files libdat2 reads, every entry with its file and line,\n"
                 "  whether its provider library loads (and why not), and the attributes of\n"
                 "  each IA that opens. --no-open skips dat_ia_open. Exit status: 0 when every\n"
                 "  listed entry that is enabled opens, 1 otherwise, 2 on bad usage.\n");
}

std::string quote(const std::string &s) { return dat2::tools::json_quote(s); }

// A provider's fixed-size name field, which it may not have terminated.
template <std::size_t N>
std::string bounded(const char (&field)[N])
{
    return std::string(field, strnlen(field, N));
}

std::string dat_error_text(DAT_RETURN r)
{
    const char *major = "", *minor = "";
    if (dat_strerror(r, &major, &minor) != DAT_SUCCESS)
        return "unknown DAT_RETURN";
    std::string s = major;
    if (minor && *minor)
        s += std::string(" ") + minor;
    return s;
}

std::string address_text(const DAT_IA_ADDRESS_PTR addr)
{
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

Attrs ia_attrs(const DAT_IA_ATTR &a)
{
    Attrs r;
    r.str("adapter_name", bounded(a.adapter_name));
    r.str("vendor_name", bounded(a.vendor_name));
    r.str("hardware_version", std::to_string(a.hardware_version_major) + "." + std::to_string(a.hardware_version_minor));
    r.str("firmware_version", std::to_string(a.firmware_version_major) + "." + std::to_string(a.firmware_version_minor));
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

Attrs provider_attrs(const DAT_PROVIDER_ATTR &p)
{
    Attrs r;
    r.str("provider_name", bounded(p.provider_name));
    r.str("provider_version", std::to_string(p.provider_version_major) + "." + std::to_string(p.provider_version_minor));
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
        r.str((std::string("specific.") + (p.provider_specific_attr[i].name ? p.provider_specific_attr[i].name : "?")).c_str(),
              p.provider_specific_attr[i].value ? p.provider_specific_attr[i].value : "");
    return r;
}

struct OpenResult {
    bool attempted = false;
    DAT_RETURN status = DAT_SUCCESS;
    std::string error;
    Attrs ia, provider;
};

OpenResult try_open(const std::string &name)
{
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
    OpenResult open;
};

void print_attrs_text(const char *title, const Attrs &a)
{
    std::printf("      %s:\n", title);
    for (auto &kv : a.items) {
        std::string v = kv.second;
        if (v.size() >= 2 && v.front() == '"')
            v = v.substr(1, v.size() - 2);
        std::printf("        %-38s %s\n", kv.first.c_str(), v.c_str());
    }
}

std::string attrs_json(const Attrs &a)
{
    std::string s = "{";
    for (std::size_t i = 0; i < a.items.size(); ++i)
        s += (i ? ", " : "") + quote(a.items[i].first) + ": " + a.items[i].second;
    return s + "}";
}

} // namespace

int main(int argc, char **argv)
{
    Options opt;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--json")
            opt.json = true;
        else if (a == "--no-open")
            opt.open = false;
        else if (a == "-h" || a == "--help") {
            usage(stdout);
            return 0;
        } else if (!a.empty() && a[0] != '-' && opt.only.empty())
            opt.only = a;
        else {
            std::fprintf(stderr, "datinfo: unknown argument '%s'\n", a.c_str());
            usage(stderr);
            return 2;
        }
    }

    // libdat2's own directory decides which dat.conf it reads and where
    // relative library names resolve: ask with an address inside libdat2.
    const std::string libdir = dat2::object_directory(reinterpret_cast<const void *>(&dat_ia_openv));
    const dat2::StaticConfig cfg = dat2::read_static_config(libdir);

    std::vector<EntryReport> reports;
    std::set<std::string> opened;
    bool all_ok = true;
    for (const auto &e : cfg.entries) {
        if (!opt.only.empty() && e.ia_name != opt.only)
            continue;
        EntryReport r;
        r.entry = &e;
        std::string why;
        auto lib = dat2::load_provider_library(e.library, libdir, why);
        r.library_loads = lib != nullptr;
        r.library_path = lib ? lib->path : "";
        r.library_error = why;
        lib.reset();
        if (opt.open && e.loadable() && opened.insert(e.ia_name).second) {
            r.open = try_open(e.ia_name);
            if (r.open.status != DAT_SUCCESS)
                all_ok = false;
        }
        reports.push_back(std::move(r));
    }
    if (!opt.only.empty() && reports.empty()) {
        std::fprintf(stderr, "datinfo: no dat.conf entry named '%s'\n", opt.only.c_str());
        all_ok = false;
    }

    if (opt.json) {
        std::printf("{\n  \"libdat2_dir\": %s,\n  \"conf_files\": [", quote(libdir).c_str());
        for (std::size_t i = 0; i < cfg.files.size(); ++i) {
            const auto &f = cfg.files[i];
            std::printf("%s\n    {\"path\": %s, \"origin\": %s, \"read\": %s, \"error\": %s}", i ? "," : "",
                        quote(f.path).c_str(), quote(f.origin).c_str(), f.read ? "true" : "false",
                        quote(f.error).c_str());
        }
        std::printf("\n  ],\n  \"diagnostics\": [");
        for (std::size_t i = 0; i < cfg.diagnostics.size(); ++i) {
            const auto &d = cfg.diagnostics[i];
            std::printf("%s\n    {\"file\": %s, \"line\": %u, \"field\": %s, \"message\": %s}", i ? "," : "",
                        quote(d.file).c_str(), d.line, quote(d.field).c_str(), quote(d.message).c_str());
        }
        std::printf("\n  ],\n  \"tunables\": [");
        bool first = true;
        for (const dat2::Tunable *t = dat2::tunables(); t->name; ++t, first = false) {
            const char *v = std::getenv(t->name);
            std::printf("%s\n    {\"name\": %s, \"value\": %s, \"default\": %s, \"help\": %s}", first ? "" : ",",
                        quote(t->name).c_str(), v ? quote(v).c_str() : "null",
                        t->default_value ? quote(t->default_value).c_str() : "null", quote(t->help).c_str());
        }
        std::printf("\n  ],\n  \"entries\": [");
        for (std::size_t i = 0; i < reports.size(); ++i) {
            const auto &r = reports[i];
            const auto &e = *r.entry;
            std::printf("%s\n    {\"ia_name\": %s, \"file\": %s, \"line\": %u, \"api_version\": %s, "
                        "\"thread_safe\": %s, \"default\": %s, \"library\": %s, \"provider_version\": %s, "
                        "\"ia_params\": %s, \"platform_params\": %s,\n     \"library_loads\": %s, "
                        "\"library_path\": %s, \"library_error\": %s",
                        i ? "," : "", quote(e.ia_name).c_str(), quote(e.file).c_str(), e.line,
                        quote(std::string(1, e.api_kind) + std::to_string(e.api_major) + "." + std::to_string(e.api_minor)).c_str(),
                        e.thread_safe ? "true" : "false", e.is_default ? "true" : "false", quote(e.library).c_str(),
                        quote(e.provider_id + "." + std::to_string(e.provider_major) + "." + std::to_string(e.provider_minor)).c_str(),
                        quote(e.ia_params).c_str(), quote(e.platform_params).c_str(), r.library_loads ? "true" : "false",
                        quote(r.library_path).c_str(), quote(r.library_error).c_str());
            if (r.open.attempted) {
                std::printf(",\n     \"open\": {\"status\": %s, \"error\": %s", quote(dat_error_text(r.open.status)).c_str(),
                            quote(r.open.error).c_str());
                if (r.open.status == DAT_SUCCESS)
                    std::printf(",\n       \"ia_attr\": %s,\n       \"provider_attr\": %s", attrs_json(r.open.ia).c_str(),
                                attrs_json(r.open.provider).c_str());
                std::printf("}");
            }
            std::printf("}");
        }
        std::printf("\n  ]\n}\n");
        return all_ok ? 0 : 1;
    }

    std::printf("dat.conf files (libdat2 in %s):\n", libdir.c_str());
    if (cfg.files.empty())
        std::printf("  none found\n");
    for (const auto &f : cfg.files)
        std::printf("  %s (%s): %s\n", f.path.c_str(), f.origin.c_str(),
                    f.read ? "read" : ("not read: " + f.error).c_str());
    if (!cfg.diagnostics.empty()) {
        std::printf("diagnostics (these records were skipped):\n");
        for (const auto &d : cfg.diagnostics)
            std::printf("  %s\n", d.to_string().c_str());
    }
    std::printf("tunables:\n");
    for (const dat2::Tunable *t = dat2::tunables(); t->name; ++t) {
        const char *v = std::getenv(t->name);
        std::printf("  %-14s = %-10s %s\n", t->name,
                    v ? v : (t->default_value ? (std::string("(") + t->default_value + ")").c_str() : "(unset)"),
                    t->help);
    }
    std::printf("entries:\n");
    for (const auto &r : reports) {
        const auto &e = *r.entry;
        std::printf("  %s\n    source:   %s:%u\n    record:   %c%u.%u %s %s %s %s.%u.%u \"%s\" \"%s\"\n",
                    e.ia_name.c_str(), e.file.c_str(), e.line, e.api_kind, e.api_major, e.api_minor,
                    e.thread_safe ? "threadsafe" : "nonthreadsafe", e.is_default ? "default" : "nondefault",
                    e.library.c_str(), e.provider_id.c_str(), e.provider_major, e.provider_minor,
                    e.ia_params.c_str(), e.platform_params.c_str());
        if (r.library_loads)
            std::printf("    library:  loads (%s)\n", r.library_path.c_str());
        else
            std::printf("    library:  does not load: %s\n", r.library_error.c_str());
        if (!e.loadable())
            std::printf("    open:     not tried: entry is %s\n",
                        e.api_kind != 'u' ? "for kernel consumers" : "nondefault (disabled)");
        else if (r.open.attempted) {
            if (r.open.status == DAT_SUCCESS) {
                std::printf("    open:     ok\n");
                print_attrs_text("ia_attr", r.open.ia);
                print_attrs_text("provider_attr", r.open.provider);
            } else {
                std::printf("    open:     failed: %s%s\n", r.open.error.c_str(),
                            r.library_loads ? " (the library loads: its dat_provider_init or ia_open refused "
                                              "this entry; see the log line above)"
                                            : "");
            }
        }
    }
    if (reports.empty())
        std::printf("  none\n");
    return all_ok ? 0 : 1;
}
