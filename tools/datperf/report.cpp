// SPDX-License-Identifier: BSD-3-Clause
// datperf's outputs: the table, JSON, CSV and the gnuplot chart.
#include "report.hpp"

#include "proc.hpp"
#include "json_text.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>

namespace datperf {

void add_run(Report *report, const std::vector<TestResult> &tests) {
    ++report->runs;
    for (const auto &t : tests) {
        WorkloadReport *w = nullptr;
        for (auto &existing : report->tests)
            if (existing.workload == t.workload)
                w = &existing;
        if (!w) {
            report->tests.emplace_back();
            w = &report->tests.back();
            w->workload = t.workload;
            w->completion = t.completion;
            w->window = t.window;
        }
        w->runs.push_back(t.points);
        if (t.workload == Workload::Scale)
            w->scale_runs.push_back(t.scale);
    }
}

void combine(Report *report) {
    for (auto &w : report->tests) {
        w.combined.clear();
        if (w.runs.empty())
            continue;
        for (std::size_t i = 0; i < w.runs.front().size(); ++i) {
            std::vector<Point> same;
            for (const auto &run : w.runs)
                if (i < run.size())
                    same.push_back(run[i]);
            w.combined.push_back(combine_runs(same));
        }
        w.scale.clear();
        for (std::size_t i = 0; !w.scale_runs.empty() && i < w.scale_runs.front().size(); ++i) {
            std::vector<ScaleRow> same;
            for (const auto &run : w.scale_runs)
                if (i < run.size())
                    same.push_back(run[i]);
            w.scale.push_back(combine_scale_runs(same));
        }
    }
}

namespace {

// ---- ratios ---------------------------------------------------------------------------------

struct Ratio {
    bool ok = false;
    double median = 0, p99 = 0, min = 0, avg = 0, mb_s = 0;
};

// Ours over the peer's median (latency: >1 means we are slower); for
// bandwidth, ours over theirs (<1 means we are slower).
Ratio ratio_of(const Point &ours, const PeerPoint &peer, bool latency) {
    Ratio r;
    if (!peer.ok)
        return r;
    if (latency && peer.median_us > 0 && ours.has_latency) {
        r.ok = true;
        r.median = ours.median_us / peer.median_us;
        r.p99 = ours.p99_us / peer.median_us;
        r.min = ours.min_us / peer.median_us;
        r.avg = ours.avg_us / peer.median_us;
        r.mb_s = peer.mb_s > 0 ? ours.mb_s / peer.mb_s : 0;
    } else if (!latency && peer.mb_s > 0) {
        r.ok = true;
        r.mb_s = ours.mb_s / peer.mb_s;
    }
    return r;
}

const Point *ours_at(const WorkloadReport &w, std::uint64_t size) {
    for (const auto &p : w.combined)
        if (p.size == size)
            return &p;
    return nullptr;
}

std::string completion_text(Completion c) {
    return c == Completion::Poll ? "completions by busy-polling (dat_evd_dequeue)"
                                 : "completions by waiting (dat_evd_wait)";
}

// ---- table ------------------------------------------------------------------------------------

void table_header(std::FILE *out, const Report &r, const WorkloadReport &w) {
    const WorkloadInfo &wi = info(w.workload);
    std::fprintf(out, "\n%s: %s", wi.name, wi.title);
    if (w.workload == Workload::ConnRate)
        std::fprintf(out, "; %d connects outstanding", w.window);
    else if (!wi.latency)
        std::fprintf(out, "; %d outstanding", w.window);
    std::fprintf(out, "; %s\n",
                 w.workload == Workload::WriteLat ? "memory polled, own completions dequeued"
                                                  : completion_text(w.completion).c_str());
    if (wi.latency)
        std::fprintf(out, "latency one-way = round trip / 2, in us; MB/s = size / median (10^6 B/s)");
    else if (w.workload == Workload::ConnRate)
        std::fprintf(out, "setup = dat_ep_connect to ESTABLISHED, per connection, in us");
    else
        std::fprintf(out, "MB/s = 10^6 B/s, at the initiator, from the first post to the last completion");
    if (r.runs > 1)
        std::fprintf(out, "; median of %d runs (min: the least)", r.runs);
    std::fprintf(out, "\n");
}

void print_workload(std::FILE *out, const Report &r, const WorkloadReport &w) {
    const WorkloadInfo &wi = info(w.workload);
    if (w.workload == Workload::Scale) {
        print_scale(out, r, w);
        return;
    }
    table_header(out, r, w);
    if (wi.latency) {
        std::fprintf(out, "%8s %9s %10s %10s %10s %10s %10s\n", "size", "iters", "median", "p99", "min", "MB/s",
                     "msg/s");
        for (const auto &p : w.combined)
            std::fprintf(out, "%8s %9llu %10.2f %10.2f %10.2f %10.2f %10.0f\n", size_text(p.size).c_str(),
                         static_cast<unsigned long long>(p.iters), p.median_us, p.p99_us, p.min_us, p.mb_s, p.msg_s);
    } else if (w.workload == Workload::ConnRate) {
        std::fprintf(out, "%9s %10s %10s %10s %10s %10s\n", "endpoints", "time ms", "conn/s", "median", "p99", "min");
        for (const auto &p : w.combined)
            std::fprintf(out, "%9llu %10.1f %10.0f %10.1f %10.1f %10.1f\n", static_cast<unsigned long long>(p.size),
                         p.seconds * 1e3, p.msg_s, p.median_us, p.p99_us, p.min_us);
    } else {
        std::fprintf(out, "%8s %9s %10s %10s %10s\n", "size", "iters", "time ms", "MB/s", "msg/s");
        for (const auto &p : w.combined)
            std::fprintf(out, "%8s %9llu %10.2f %10.2f %10.0f\n", size_text(p.size).c_str(),
                         static_cast<unsigned long long>(p.iters), p.seconds * 1e3, p.mb_s, p.msg_s);
    }
    for (const auto &peer : w.peers) {
        std::fprintf(out, "vs %s (%s; median of its runs); ours / peer:\n", peer.peer.c_str(), peer.figure.c_str());
        if (!peer.error.empty()) {
            std::fprintf(out, "  not run: %s\n", peer.error.c_str());
            continue;
        }
        if (wi.latency)
            std::fprintf(out, "%8s %9s %10s %10s %10s %10s %10s\n", "size", "runs", "peer us", "median x", "p99 x",
                         "min x", "avg x");
        else
            std::fprintf(out, "%8s %9s %10s %10s\n", "size", "runs", "peer MB/s", "MB/s x");
        for (const auto &pp : peer.points) {
            const Point *ours = ours_at(w, pp.size);
            if (!pp.ok || !ours) {
                std::fprintf(out, "%8s   failed: %s\n", size_text(pp.size).c_str(), pp.error.c_str());
                continue;
            }
            Ratio q = ratio_of(*ours, pp, wi.latency);
            if (wi.latency)
                std::fprintf(out, "%8s %9zu %10.2f %10.3g %10.3g %10.3g %10.3g\n", size_text(pp.size).c_str(),
                             pp.samples.size(), pp.median_us, q.median, q.p99, q.min, q.avg);
            else
                std::fprintf(out, "%8s %9zu %10.2f %10.3g\n", size_text(pp.size).c_str(), pp.samples.size(), pp.mb_s,
                             q.mb_s);
        }
        if (!peer.command.empty())
            std::fprintf(out, "  peer command: %s\n", peer.command.c_str());
    }
}

// ---- JSON -------------------------------------------------------------------------------------

std::string json_string(const std::string &s) { return dat2::tools::json_quote(s); }

} // namespace

std::string json_number(double v) {
    if (!std::isfinite(v))
        return "null";
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
}

namespace {

std::string json_point(const Point &p, Workload w) {
    std::string s = "{";
    if (w == Workload::ConnRate)
        s += "\"endpoints\": " + std::to_string(p.size);
    else
        s += "\"size\": " + std::to_string(p.size);
    s += ", \"iters\": " + std::to_string(p.iters);
    auto lat = [&](const char *k, double v) {
        s += std::string(", \"") + k + "\": " + (p.has_latency ? json_number(v) : "null");
    };
    lat("median_us", p.median_us);
    lat("p99_us", p.p99_us);
    lat("min_us", p.min_us);
    lat("max_us", p.max_us);
    lat("avg_us", p.avg_us);
    if (w == Workload::ConnRate) {
        s += ", \"conn_s\": " + json_number(p.msg_s);
    } else {
        s += ", \"mb_s\": " + json_number(p.mb_s);
        s += ", \"msg_s\": " + json_number(p.msg_s);
    }
    s += ", \"seconds\": " + json_number(p.seconds) + "}";
    return s;
}

} // namespace

void print_table(std::FILE *out, const Report &r) {
    std::fprintf(out, "datperf: IA %s (%s) at %s, server %s; %s; %d run%s; timer %s\n", r.info.ia_name.c_str(),
                 r.info.vendor.c_str(), r.info.ia_address.c_str(), r.info.server_address.c_str(), r.mode.c_str(),
                 r.runs, r.runs == 1 ? "" : "s", r.info.timer.c_str());
    for (const auto &w : r.tests)
        print_workload(out, r, w);
}

void write_json(std::FILE *out, const Report &r) {
    std::fprintf(out, "{\n  \"tool\": \"datperf\",\n");
    std::fprintf(out, "  \"ia\": {\"name\": %s, \"vendor\": %s, \"address\": %s},\n",
                 json_string(r.info.ia_name).c_str(), json_string(r.info.vendor).c_str(),
                 json_string(r.info.ia_address).c_str());
    std::fprintf(out, "  \"server_address\": %s,\n  \"mode\": %s,\n  \"runs\": %d,\n  \"timer\": %s,\n",
                 json_string(r.info.server_address).c_str(), json_string(r.mode).c_str(), r.runs,
                 json_string(r.info.timer).c_str());
    std::fprintf(out, "  \"units\": {\"latency\": \"microseconds; ping-pongs: one-way = round trip / 2; conn-rate: "
                      "dat_ep_connect to ESTABLISHED\", \"mb_s\": \"10^6 bytes per second\"},\n");
    std::fprintf(out, "  \"tests\": [");
    for (std::size_t t = 0; t < r.tests.size(); ++t) {
        const auto &w = r.tests[t];
        const WorkloadInfo &wi = info(w.workload);
        std::fprintf(out, "%s\n    {\"workload\": %s, \"title\": %s, \"completion\": %s, \"window\": %d,\n",
                     t ? "," : "", json_string(wi.name).c_str(), json_string(wi.title).c_str(),
                     json_string(completion_name(w.completion)).c_str(), w.window);
        std::fprintf(out, "     \"results\": [");
        for (std::size_t i = 0; i < w.combined.size(); ++i)
            std::fprintf(out, "%s\n       %s", i ? "," : "", json_point(w.combined[i], w.workload).c_str());
        if (w.workload == Workload::Scale)
            std::fprintf(out, "\n     ],\n     \"scale\": %s,\n     \"runs\": [", scale_json(r, w).c_str());
        else
            std::fprintf(out, "\n     ],\n     \"runs\": [");
        for (std::size_t k = 0; k < w.runs.size(); ++k) {
            std::fprintf(out, "%s\n       [", k ? "," : "");
            for (std::size_t i = 0; i < w.runs[k].size(); ++i)
                std::fprintf(out, "%s%s", i ? ", " : "", json_point(w.runs[k][i], w.workload).c_str());
            std::fprintf(out, "]");
        }
        std::fprintf(out, "\n     ],\n     \"peers\": [");
        for (std::size_t k = 0; k < w.peers.size(); ++k) {
            const auto &peer = w.peers[k];
            std::fprintf(
                out, "%s\n       {\"name\": %s, \"figure\": %s, \"command\": %s, \"error\": %s, \"results\": [",
                k ? "," : "", json_string(peer.peer).c_str(), json_string(peer.figure).c_str(),
                json_string(peer.command).c_str(), peer.error.empty() ? "null" : json_string(peer.error).c_str());
            for (std::size_t i = 0; i < peer.points.size(); ++i) {
                const auto &pp = peer.points[i];
                std::string samples;
                for (double v : pp.samples)
                    samples += (samples.empty() ? "" : ", ") + json_number(v);
                std::fprintf(out,
                             "%s\n         {\"size\": %llu, \"iters\": %llu, \"ok\": %s, \"median_us\": %s, "
                             "\"mb_s\": %s, \"samples\": [%s], \"error\": %s}",
                             i ? "," : "", static_cast<unsigned long long>(pp.size),
                             static_cast<unsigned long long>(pp.iters), pp.ok ? "true" : "false",
                             pp.ok && wi.latency ? json_number(pp.median_us).c_str() : "null",
                             pp.ok ? json_number(pp.mb_s).c_str() : "null", samples.c_str(),
                             pp.error.empty() ? "null" : json_string(pp.error).c_str());
            }
            std::fprintf(out, "\n       ]}");
        }
        std::fprintf(out, "\n     ],\n     \"ratios\": [");
        bool first = true;
        for (const auto &peer : w.peers)
            for (const auto &pp : peer.points) {
                const Point *ours = ours_at(w, pp.size);
                if (!ours)
                    continue;
                Ratio q = ratio_of(*ours, pp, wi.latency);
                if (!q.ok)
                    continue;
                std::fprintf(out, "%s\n       {\"peer\": %s, \"size\": %llu", first ? "" : ",",
                             json_string(peer.peer).c_str(), static_cast<unsigned long long>(pp.size));
                if (wi.latency)
                    std::fprintf(out, ", \"median\": %s, \"p99\": %s, \"min\": %s, \"avg\": %s",
                                 json_number(q.median).c_str(), json_number(q.p99).c_str(), json_number(q.min).c_str(),
                                 json_number(q.avg).c_str());
                std::fprintf(out, ", \"mb_s\": %s}", json_number(q.mb_s).c_str());
                first = false;
            }
        std::fprintf(out, "\n     ]}");
    }
    std::fprintf(out, "\n  ]\n}\n");
}

void write_csv(std::FILE *out, const Report &r) {
    std::vector<std::string> peers;
    for (const auto &w : r.tests)
        for (const auto &p : w.peers)
            if (std::find(peers.begin(), peers.end(), p.peer) == peers.end())
                peers.push_back(p.peer);
    std::fprintf(out, "workload,source,run,size,iters,median_us,p99_us,min_us,max_us,avg_us,mb_s,msg_s,seconds");
    for (const auto &p : peers)
        std::fprintf(out, ",ratio_%s_median,ratio_%s_p99,ratio_%s_min,ratio_%s_mb_s", p.c_str(), p.c_str(), p.c_str(),
                     p.c_str());
    std::fprintf(out, "\n");
    auto num = [](double v, bool present) { return present ? json_number(v) : std::string(); };
    auto row = [&](const WorkloadReport &w, const std::string &source, const std::string &run, const Point &p,
                   bool ratios) {
        std::fprintf(out, "%s,%s,%s,%llu,%llu,%s,%s,%s,%s,%s,%s,%s,%s", info(w.workload).name, source.c_str(),
                     run.c_str(), static_cast<unsigned long long>(p.size), static_cast<unsigned long long>(p.iters),
                     num(p.median_us, p.has_latency).c_str(), num(p.p99_us, p.has_latency).c_str(),
                     num(p.min_us, p.has_latency).c_str(), num(p.max_us, p.has_latency).c_str(),
                     num(p.avg_us, p.has_latency).c_str(), num(p.mb_s, w.workload != Workload::ConnRate).c_str(),
                     num(p.msg_s, true).c_str(), num(p.seconds, true).c_str());
        for (const auto &name : peers) {
            Ratio q;
            if (ratios)
                for (const auto &peer : w.peers)
                    if (peer.peer == name)
                        for (const auto &pp : peer.points)
                            if (pp.size == p.size)
                                q = ratio_of(p, pp, info(w.workload).latency);
            bool lat = q.ok && info(w.workload).latency;
            std::fprintf(out, ",%s,%s,%s,%s", num(q.median, lat).c_str(), num(q.p99, lat).c_str(),
                         num(q.min, lat).c_str(), num(q.mb_s, q.ok).c_str());
        }
        std::fprintf(out, "\n");
    };
    for (const auto &w : r.tests) {
        for (std::size_t k = 0; k < w.runs.size(); ++k)
            for (const auto &p : w.runs[k])
                row(w, "datperf", std::to_string(k + 1), p, false);
        for (const auto &p : w.combined)
            row(w, "datperf", "all", p, true);
        for (const auto &peer : w.peers)
            for (const auto &pp : peer.points) {
                if (!pp.ok)
                    continue;
                Point p;
                p.size = pp.size;
                p.iters = pp.iters;
                p.has_latency = info(w.workload).latency;
                p.median_us = p.p99_us = p.min_us = p.max_us = p.avg_us = pp.median_us;
                p.mb_s = pp.mb_s;
                p.msg_s = pp.median_us > 0 ? 1e6 / pp.median_us : 0;
                std::fprintf(out, "%s,%s,all,%llu,%llu,%s,,,,,%s,%s,", info(w.workload).name, peer.peer.c_str(),
                             static_cast<unsigned long long>(p.size), static_cast<unsigned long long>(p.iters),
                             num(p.median_us, p.has_latency).c_str(), num(p.mb_s, true).c_str(),
                             num(p.msg_s, p.has_latency).c_str());
                for (std::size_t i = 0; i < peers.size(); ++i)
                    std::fprintf(out, ",,,,");
                std::fprintf(out, "\n");
            }
    }
}

bool run_gnuplot(const std::string &script, std::string *error) {
    std::string script_path;
    int fd = make_temp_file("plot", &script_path, error);
    if (fd < 0)
        return false;
    bool written = write(fd, script.data(), script.size()) == static_cast<ssize_t>(script.size());
    close(fd);
    if (!written) {
        unlink(script_path.c_str());
        *error = "cannot write the gnuplot script";
        return false;
    }
    Process gp;
    bool ok = gp.start({"gnuplot", script_path}, {}, -1, error);
    int status = 0;
    if (ok && !gp.wait(60, &status)) {
        *error = "gnuplot still runs after 60 s";
        ok = false;
    } else if (ok && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
        *error = "gnuplot failed (" + status_text(status) + "): " + gp.output();
        ok = false;
    }
    unlink(script_path.c_str());
    if (!ok && error->find("not found") != std::string::npos)
        *error += " (Debian package gnuplot-nox)";
    return ok;
}

std::string scale_plot_path(const std::string &path) {
    const auto slash = path.rfind('/');
    const auto dot = path.rfind('.');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
        return path + "-scale";
    return path.substr(0, dot) + "-scale" + path.substr(dot);
}

bool write_plot(const std::string &path, const Report &r, std::string *error) {
    const bool scale = std::any_of(r.tests.begin(), r.tests.end(),
                                   [](const WorkloadReport &w) { return w.workload == Workload::Scale; });
    const bool sized =
        std::any_of(r.tests.begin(), r.tests.end(), [](const WorkloadReport &w) { return info(w.workload).sized; });
    if (scale && !write_scale_plot(sized ? scale_plot_path(path) : path, r, error))
        return false;
    if (scale && !sized)
        return true;
    return write_size_plot(path, r, error);
}

bool write_size_plot(const std::string &path, const Report &r, std::string *error) {
    struct Series {
        std::string title, data; // data: "size value" lines
        bool peer = false;
    };
    std::vector<Series> latency, bandwidth;
    auto add = [](std::vector<Series> &to, std::string title, bool peer) -> Series & {
        to.push_back(Series{std::move(title), "", peer});
        return to.back();
    };
    auto line = [](std::uint64_t size, double v) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%llu %.6g\n", static_cast<unsigned long long>(size), v);
        return std::string(buf);
    };
    for (const auto &w : r.tests) {
        const WorkloadInfo &wi = info(w.workload);
        if (!wi.sized)
            continue;
        for (std::size_t k = 0; k < w.runs.size(); ++k) {
            std::string title = std::string(wi.name) + (w.runs.size() > 1 ? " run " + std::to_string(k + 1) : "");
            if (wi.latency) {
                Series &s = add(latency, title, false);
                for (const auto &p : w.runs[k])
                    if (p.has_latency && p.median_us > 0)
                        s.data += line(p.size, p.median_us);
            }
            Series &b = add(bandwidth, title, false);
            for (const auto &p : w.runs[k])
                if (p.mb_s > 0)
                    b.data += line(p.size, p.mb_s);
        }
        for (const auto &peer : w.peers) {
            std::string title = peer.peer + " (vs " + wi.name + ")";
            Series *s = wi.latency ? &add(latency, title, true) : nullptr;
            Series &b = add(bandwidth, title, true);
            for (const auto &pp : peer.points) {
                if (!pp.ok)
                    continue;
                if (s)
                    s->data += line(pp.size, pp.median_us);
                if (pp.mb_s > 0)
                    b.data += line(pp.size, pp.mb_s);
            }
        }
    }
    auto drop_empty = [](std::vector<Series> &v) {
        v.erase(std::remove_if(v.begin(), v.end(), [](const Series &s) { return s.data.empty(); }), v.end());
    };
    drop_empty(latency);
    drop_empty(bandwidth);
    if (latency.empty() && bandwidth.empty()) {
        *error = "nothing to plot (conn-rate has no message sizes)";
        return false;
    }

    std::string script = "set terminal pngcairo size " +
                         std::string(latency.empty() || bandwidth.empty() ? "800" : "1500") +
                         ",600 noenhanced font ',10'\n";
    script += "set output '" + path + "'\n";
    int index = 0;
    auto blocks = [&](const std::vector<Series> &v) {
        std::string s;
        for (const auto &series : v)
            s += "$d" + std::to_string(index++) + " << EOD\n" + series.data + "EOD\n";
        return s;
    };
    const int lat_base = index;
    script += blocks(latency);
    const int bw_base = index;
    script += blocks(bandwidth);
    std::string title = "datperf: " + r.info.ia_name + " (" + r.info.vendor + ")";
    if (!latency.empty() && !bandwidth.empty())
        script += "set multiplot layout 1,2 title '" + title + "'\n";
    else
        script += "set title '" + title + "'\n";
    // Ticks at the measured sizes, labelled as the table does ("4k").
    std::set<std::uint64_t> sizes;
    for (const auto &w : r.tests)
        if (info(w.workload).sized)
            for (const auto &p : w.combined)
                sizes.insert(p.size);
    const std::size_t step = (sizes.size() + 10) / 11;
    std::string tics;
    std::size_t k = 0;
    for (auto size : sizes)
        if (k++ % step == 0)
            tics += (tics.empty() ? "" : ", ") + ("'" + size_text(size) + "' " + std::to_string(size));
    script += "set logscale x 2\nset xtics (" + tics + ")\nset grid\nset key top left\n";
    script += "set xlabel 'message size (bytes; k = 1024)'\n";
    auto plot = [&](const std::vector<Series> &v, int base, const std::string &ylabel, bool log_y) {
        std::string s = "set ylabel '" + ylabel + "'\n";
        s += log_y ? "set logscale y\n" : "unset logscale y\n";
        s += "plot ";
        for (std::size_t i = 0; i < v.size(); ++i) {
            std::string t = v[i].title;
            for (auto &c : t)
                if (c == '\'')
                    c = '"';
            s += (i ? ", " : "") + std::string("$d") + std::to_string(base + static_cast<int>(i)) +
                 " using 1:2 with linespoints" + (v[i].peer ? " dashtype 2" : "") + " title '" + t + "'";
        }
        return s + "\n";
    };
    if (!latency.empty())
        script += plot(latency, lat_base, "one-way latency, median (us)", true);
    if (!bandwidth.empty())
        script += plot(bandwidth, bw_base, "bandwidth (MB/s = 10^6 B/s)", true);
    if (!latency.empty() && !bandwidth.empty())
        script += "unset multiplot\n";

    return run_gnuplot(script, error);
}

} // namespace datperf
