// SPDX-License-Identifier: BSD-3-Clause
// The scale workload's outputs: its table, its JSON object, its chart.
#include "report.hpp"

#include "json_text.hpp"

#include <cmath>
#include <cstdio>
#include <string>

namespace datperf {

namespace {

bool measured(double v) { return std::isfinite(v); }

// `v` in a column of `width` with `prec` decimals; "-" when not measured.
std::string cell(double v, int width, int prec) {
    char buf[64];
    if (!measured(v))
        std::snprintf(buf, sizeof buf, "%*s", width, "-");
    else
        std::snprintf(buf, sizeof buf, "%*.*f", width, prec, v);
    return buf;
}

// A change with its sign: "+0", "-12".
std::string delta_cell(double v, int width) {
    char buf[64];
    if (!measured(v))
        std::snprintf(buf, sizeof buf, "%*s", width, "-");
    else
        std::snprintf(buf, sizeof buf, "%*s", width,
                      (v >= 0 ? "+" + std::to_string(std::llround(v)) : std::to_string(std::llround(v))).c_str());
    return buf;
}

double ratio(double a, double b) { return measured(a) && measured(b) && b > 0 ? a / b : NAN; }
double per_pair(double at, double none, double pairs) { return pairs > 0 ? (at - none) / pairs : NAN; }

std::string mib(double kib) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MiB", kib / 1024.0);
    return measured(kib) ? buf : "-";
}

// The rows of a combined scale result: the one with no pairs, the counts, the one after teardown.
struct Rows {
    const ScaleRow *none = nullptr, *after = nullptr;
    std::vector<const ScaleRow *> counts;
    explicit Rows(const std::vector<ScaleRow> &all) {
        for (const auto &row : all) {
            if (row.after > 0)
                after = &row;
            else if (row.pairs == 0)
                none = &row;
            else
                counts.push_back(&row);
        }
    }
    bool complete() const { return none && after && !counts.empty(); }
};

std::string threads_line(const std::vector<ThreadCpu> &threads, double total) {
    std::string s = cell(total, 0, 1) + "%";
    if (threads.empty())
        return s;
    s += ":";
    for (std::size_t i = 0; i < threads.size(); ++i) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "%s tid %d (%s%s) %.1f%%", i ? "," : "", static_cast<int>(threads[i].tid),
                      threads[i].name.c_str(), threads[i].main ? ", main" : "", threads[i].pct);
        s += buf;
    }
    return s;
}

std::string row_json(const ScaleRow &row, const ScaleRow *none) {
    std::string s = "{";
    bool first = true;
    for (const auto &f : scale_fields()) {
        s += std::string(first ? "" : ", ") + "\"" + f.name + "\": " + json_number(row.*f.member);
        first = false;
    }
    // What the table shows, derived from the row and the one with no pairs.
    if (none) {
        const bool counted = row.after == 0 && row.pairs > 0;
        auto derived = [&](const char *key, double v) { s += std::string(", \"") + key + "\": " + json_number(v); };
        derived("client_fds_per_pair", counted ? per_pair(row.client_fds, none->client_fds, row.pairs) : NAN);
        derived("server_fds_per_pair", counted ? per_pair(row.server_fds, none->server_fds, row.pairs) : NAN);
        derived("client_rss_kib_per_pair",
                counted ? per_pair(row.client_rss_kib, none->client_rss_kib, row.pairs) : NAN);
        derived("server_rss_kib_per_pair",
                counted ? per_pair(row.server_rss_kib, none->server_rss_kib, row.pairs) : NAN);
        derived("pp_over_no_pairs", ratio(row.pp_median_us, none->pp_median_us));
    }
    auto threads = [&](const char *key, const std::vector<ThreadCpu> &list) {
        s += std::string(", \"") + key + "\": [";
        for (std::size_t i = 0; i < list.size(); ++i)
            s += std::string(i ? ", " : "") + "{\"tid\": " + std::to_string(list[i].tid) +
                 ", \"name\": " + dat2::tools::json_quote(list[i].name) +
                 ", \"main\": " + (list[i].main ? "true" : "false") + ", \"cpu_pct\": " + json_number(list[i].pct) +
                 "}";
        s += "]";
    };
    threads("client_threads", row.client_threads);
    threads("server_threads", row.server_threads);
    return s + "}";
}

} // namespace

void print_scale(std::FILE *out, const Report &r, const WorkloadReport &w) {
    const ScaleConditions &c = r.scale;
    const Rows rows(w.scale);
    std::fprintf(out,
                 "\nscale: %s; one PSP, one connection EVD and one DTO EVD per side; up to %d connects or "
                 "disconnects outstanding; connection events by %s\n",
                 info(w.workload).title, w.window,
                 w.completion == Completion::Poll ? "busy-polling (dat_evd_dequeue)" : "waiting (dat_evd_wait)");
    if (c.self)
        std::fprintf(out, "--self: the client process holds both ends of every pair (2 endpoints a pair, connected "
                          "through its own PSP); the server holds only the data connection\n");
    else
        std::fprintf(out, "a pair: one endpoint in the client process, one in the server process\n");
    std::fprintf(out, "RLIMIT_NOFILE %s\n", c.fd_limit.c_str());
    std::fprintf(out, "setup, teardown: wall time of the batch that reached (left) the count, per pair (create + "
                      "connect/accept + ESTABLISHED; disconnect + free, both sides), us\n");
    if (c.idle_s > 0)
        std::fprintf(out, "idle: CPU time of each process, every thread, while both sleep %.0f s, in %% of one CPU\n",
                     c.idle_s);
    else
        std::fprintf(out, "idle: not measured (--idle 0)\n");
    std::fprintf(out,
                 "fds, RSS: per pair, above the process with no pairs; ping-pong: the data connection (its own "
                 "EVDs), %s, %llu iterations, %s, median one-way us; x: over the median with no pairs\n",
                 size_text(c.pingpong_size).c_str(), static_cast<unsigned long long>(c.pingpong_iters),
                 c.pingpong_completion == Completion::Poll ? "polled" : "waited for");
    if (r.runs > 1)
        std::fprintf(out, "median of %d runs\n", r.runs);
    if (!rows.complete()) {
        std::fprintf(out, "  (no complete result)\n");
        return;
    }
    const ScaleRow &none = *rows.none;
    std::fprintf(out, "%7s %6s %18s %15s %15s %15s %16s\n", "", "", "per pair, us", "idle CPU %", "fds/pair",
                 "RSS KiB/pair", "ping-pong");
    std::fprintf(out, "%7s %6s %9s %8s %7s %7s %7s %7s %7s %7s %9s %6s\n", "pairs", "batch", "setup", "teardown",
                 "client", "server", "client", "server", "client", "server", "median us", "x");
    std::fprintf(out, "%7d %6s %9s %8s %s %s %7s %7s %7s %7s %s %s\n", 0, "-", "-", "-",
                 cell(none.client_cpu_pct, 7, 1).c_str(), cell(none.server_cpu_pct, 7, 1).c_str(), "-", "-", "-", "-",
                 cell(none.pp_median_us, 9, 2).c_str(), cell(1.0, 6, 2).c_str());
    for (const ScaleRow *row : rows.counts)
        std::fprintf(out, "%7.0f %6.0f %s %s %s %s %s %s %s %s %s %s\n", row->pairs, row->batch,
                     cell(row->setup_us, 9, 1).c_str(), cell(row->teardown_us, 8, 1).c_str(),
                     cell(row->client_cpu_pct, 7, 1).c_str(), cell(row->server_cpu_pct, 7, 1).c_str(),
                     cell(per_pair(row->client_fds, none.client_fds, row->pairs), 7, 2).c_str(),
                     cell(per_pair(row->server_fds, none.server_fds, row->pairs), 7, 2).c_str(),
                     cell(per_pair(row->client_rss_kib, none.client_rss_kib, row->pairs), 7, 1).c_str(),
                     cell(per_pair(row->server_rss_kib, none.server_rss_kib, row->pairs), 7, 1).c_str(),
                     cell(row->pp_median_us, 9, 2).c_str(),
                     cell(ratio(row->pp_median_us, none.pp_median_us), 6, 2).c_str());
    const ScaleRow &after = *rows.after;
    std::fprintf(out, "%7s %6s %9s %8s %s %s %s %s %s %s %s %s\n", "after", "-", "-", "-",
                 cell(after.client_cpu_pct, 7, 1).c_str(), cell(after.server_cpu_pct, 7, 1).c_str(),
                 delta_cell(after.client_fds - none.client_fds, 7).c_str(),
                 delta_cell(after.server_fds - none.server_fds, 7).c_str(),
                 delta_cell(after.client_rss_kib - none.client_rss_kib, 7).c_str(),
                 delta_cell(after.server_rss_kib - none.server_rss_kib, 7).c_str(),
                 cell(after.pp_median_us, 9, 2).c_str(),
                 cell(ratio(after.pp_median_us, none.pp_median_us), 6, 2).c_str());
    std::fprintf(out, "after: every pair torn down; fds and RSS KiB: the change since the process had no pairs\n");

    // Descriptors and memory before, at the most, after.
    const ScaleRow &most = *rows.counts.back();
    auto fds_line = [&](const char *side, double before, double at, double left) {
        std::fprintf(out, "  %s: %.0f before the pairs, %.0f at %.0f pairs, %.0f after teardown: %s\n", side, before,
                     at, most.pairs, left,
                     left <= before ? "all returned"
                                    : (std::to_string(std::llround(left - before)) + " not returned").c_str());
    };
    std::fprintf(out, "descriptors:\n");
    fds_line("client", none.client_fds, most.client_fds, after.client_fds);
    fds_line("server", none.server_fds, most.server_fds, after.server_fds);
    auto rss_line = [&](const char *side, double before, double at, double left, double heap_before, double heap_left,
                        double kept_before, double kept_left, double trimmed) {
        std::fprintf(out,
                     "  %s: %s before the pairs, %s at %.0f pairs, %s after teardown (%+.0f KiB; malloc: in use "
                     "%+.0f KiB, free but kept %+.0f KiB), %s after malloc_trim\n",
                     side, mib(before).c_str(), mib(at).c_str(), most.pairs, mib(left).c_str(), left - before,
                     heap_left - heap_before, kept_left - kept_before, mib(trimmed).c_str());
    };
    std::fprintf(out, "resident memory:\n");
    rss_line("client", none.client_rss_kib, most.client_rss_kib, after.client_rss_kib, none.client_heap_kib,
             after.client_heap_kib, none.client_heap_free_kib, after.client_heap_free_kib,
             after.client_rss_trimmed_kib);
    rss_line("server", none.server_rss_kib, most.server_rss_kib, after.server_rss_kib, none.server_heap_kib,
             after.server_heap_kib, none.server_heap_free_kib, after.server_heap_free_kib,
             after.server_rss_trimmed_kib);
    if (c.idle_s > 0) {
        std::fprintf(out, "idle CPU by thread (busiest first):\n");
        for (const ScaleRow *row : {rows.none, &most, rows.after}) {
            const std::string at =
                row->after > 0 ? "after teardown" : "at " + std::to_string(std::llround(row->pairs)) + " pairs";
            std::fprintf(out, "  %s: client %s; server %s\n", at.c_str(),
                         threads_line(row->client_threads, row->client_cpu_pct).c_str(),
                         threads_line(row->server_threads, row->server_cpu_pct).c_str());
        }
    }
    std::fprintf(out,
                 "inside the calls, us per call over each batch (active: the connecting endpoints, the "
                 "client's; passive: those created for a request%s):\n",
                 c.self ? ", also the client's" : ", the server's");
    std::fprintf(out, "%7s %9s %9s %9s %9s %10s %9s %9s\n", "pairs", "create", "connect", "p.create", "accept",
                 "disconnect", "free", "p.free");
    for (const ScaleRow *row : rows.counts)
        std::fprintf(out, "%7.0f %s %s %s %s %s %s %s\n", row->pairs, cell(row->create_us, 9, 1).c_str(),
                     cell(row->connect_us, 9, 1).c_str(), cell(row->passive_create_us, 9, 1).c_str(),
                     cell(row->accept_us, 9, 1).c_str(), cell(row->disconnect_us, 10, 1).c_str(),
                     cell(row->free_us, 9, 1).c_str(), cell(row->passive_free_us, 9, 1).c_str());
}

std::string scale_json(const Report &r, const WorkloadReport &w) {
    const ScaleConditions &c = r.scale;
    std::string s = "{\"fd_limit\": " + dat2::tools::json_quote(c.fd_limit) +
                    ", \"self\": " + (c.self ? "true" : "false") + ", \"idle_s\": " + json_number(c.idle_s) +
                    ", \"pingpong\": {\"size\": " + std::to_string(c.pingpong_size) +
                    ", \"iters\": " + std::to_string(c.pingpong_iters) +
                    ", \"completion\": " + dat2::tools::json_quote(completion_name(c.pingpong_completion)) +
                    "},\n       \"rows\": [";
    const Rows combined(w.scale);
    for (std::size_t i = 0; i < w.scale.size(); ++i)
        s += std::string(i ? "," : "") + "\n         " + row_json(w.scale[i], combined.none);
    s += "],\n       \"runs\": [";
    for (std::size_t k = 0; k < w.scale_runs.size(); ++k) {
        const Rows run(w.scale_runs[k]);
        s += std::string(k ? "," : "") + "\n         [";
        for (std::size_t i = 0; i < w.scale_runs[k].size(); ++i)
            s += std::string(i ? ",\n          " : "") + row_json(w.scale_runs[k][i], run.none);
        s += "]";
    }
    return s + "]}";
}

bool write_scale_plot(const std::string &path, const Report &r, std::string *error) {
    const WorkloadReport *w = nullptr;
    for (const auto &t : r.tests)
        if (t.workload == Workload::Scale)
            w = &t;
    const Rows rows(w ? w->scale : std::vector<ScaleRow>{});
    if (!w || !rows.complete()) {
        *error = "the scale workload has nothing to plot";
        return false;
    }
    const ScaleRow &none = *rows.none;
    // One data block: pairs, then the columns named below.
    std::string data = "$scale << EOD\n";
    for (const ScaleRow *row : rows.counts) {
        const double v[] = {row->pairs,
                            row->setup_us,
                            row->teardown_us,
                            row->client_cpu_pct,
                            row->server_cpu_pct,
                            per_pair(row->client_rss_kib, none.client_rss_kib, row->pairs),
                            per_pair(row->server_rss_kib, none.server_rss_kib, row->pairs),
                            per_pair(row->client_fds, none.client_fds, row->pairs),
                            per_pair(row->server_fds, none.server_fds, row->pairs),
                            row->pp_median_us};
        for (double x : v) {
            char buf[40];
            std::snprintf(buf, sizeof buf, "%.6g ", measured(x) ? x : 0.0);
            data += measured(x) ? buf : "NaN ";
        }
        data += "\n";
    }
    data += "EOD\n";
    std::string tics;
    for (const ScaleRow *row : rows.counts)
        tics += (tics.empty() ? "" : ", ") + std::to_string(std::llround(row->pairs));
    auto num = [](double v) {
        char buf[40];
        std::snprintf(buf, sizeof buf, "%.6g", measured(v) ? v : 0.0);
        return std::string(buf);
    };
    std::string title = "datperf scale: " + r.info.ia_name + " (" + r.info.vendor + ")" +
                        (r.scale.self ? ", both ends in one process" : ", client and server processes");
    for (auto &ch : title)
        if (ch == '\'')
            ch = '"';
    std::string s = "set terminal pngcairo size 1400,1000 noenhanced font ',10'\n";
    s += "set output '" + path + "'\n" + data;
    s += "set multiplot layout 2,2 title '" + title + "'\n";
    s += "set logscale x 2\nset xtics (" + tics + ")\nset grid\nset key top left\nset xlabel 'connected pairs'\n";
    s += "set datafile missing 'NaN'\n";
    s += "set ylabel 'per pair, us (batch wall time / pairs)'\nset logscale y\n";
    s += "plot $scale using 1:2 with linespoints title 'setup', $scale using 1:3 with linespoints title 'teardown'\n";
    s += "unset logscale y\nset yrange [0:*]\n";
    s += "set ylabel 'idle CPU, % of one CPU (" + num(r.scale.idle_s) + " s asleep)'\n";
    s += "plot $scale using 1:4 with linespoints title 'client', $scale using 1:5 with linespoints title 'server', " +
         num(none.client_cpu_pct) + " with lines dashtype 2 title 'client, no pairs'\n";
    s += "set ylabel 'RSS per pair, KiB'\nset y2label 'fds per pair'\nset y2tics\nset y2range [0:*]\n";
    s += "plot $scale using 1:6 with linespoints title 'RSS, client', $scale using 1:7 with linespoints title "
         "'RSS, server', $scale using 1:8 axes x1y2 with linespoints dashtype 2 title 'fds, client', $scale using "
         "1:9 axes x1y2 with linespoints dashtype 2 title 'fds, server'\n";
    s += "unset y2label\nunset y2tics\n";
    s += "set ylabel 'ping-pong " + size_text(r.scale.pingpong_size) + ", median one-way, us'\n";
    s += "plot $scale using 1:10 with linespoints title 'among the pairs', " + num(none.pp_median_us) +
         " with lines dashtype 2 title 'no pairs', " + num(rows.after->pp_median_us) +
         " with lines dashtype 3 title 'after teardown'\n";
    s += "unset multiplot\n";
    return run_gnuplot(s, error);
}

} // namespace datperf
