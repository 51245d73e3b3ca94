#!/bin/bash
# Runs datperf once with small counts and judges what it printed: the table
# (present, a row per size, figures above zero), the --json file (parses with
# python3 -m json.tool, every figure above zero), stderr (no error lines, no
# sanitizer report). Exit 0 pass, 1 fail, 77 skip (a peer program missing).
#
#   datperf_check.sh DATPERF CASE [PLUGIN]
#
# CASE: pingpong, pingpong-wait, write-lat, write, read, send, ring, conn-rate,
# compare (fi_pingpong ratios), compare-fi-bw (streaming over ofi-shm against
# datperf-fi-bw), plot (gnuplot PNG), two-hosts (--server and
# --connect on a free port), ofed-libdat2 (OFED's libdat2 with our PLUGIN),
# bad-provider (unknown name; entry whose library does not load), pin (--pin),
# timer (--timer), scale and scale-self (the scale workload, a few pairs).
set -u
datperf=$1 case=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/datperf-check.XXXXXX") || exit 1
server_pid=
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null
        sleep 1
        kill -KILL "$server_pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp" || exit 1

fail() { echo "FAIL: $*"; for f in out err; do [ -s "$tmp/$f" ] && { echo "---- $f:"; tail -n 40 "$tmp/$f"; }; done; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

# Lines that must never appear on stderr.
bad_stderr='AddressSanitizer|LeakSanitizer|runtime error:|Segmentation|Aborted|^dat2:'

# run ARGS...: datperf with --json=out.json and a deadline; out, err, rc.
run() {
    timeout 100 "$datperf" --no-progress --timeout 20 --json="$tmp/out.json" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}

# judge_table TITLE COLUMNS COUNT FIRST_POSITIVE...: the table after the line
# that starts with TITLE ("pingpong:") has a header and COUNT rows of
# COLUMNS fields; the fields numbered FIRST_POSITIVE... (1-based) are > 0.
judge_table() {
    local title=$1 columns=$2 count=$3
    shift 3
    awk -v title="$title" -v columns="$columns" -v count="$count" -v positive="$*" '
        BEGIN { n = split(positive, pos, " ") }
        index($0, title) == 1 { in_table = 1; header = 0; next }
        in_table && !header { if ($1 == "size" || $1 == "endpoints") header = 1; next }
        in_table && header {
            if (NF != columns || $2 !~ /^[0-9.]+$/) { in_table = 0; next }
            rows++
            for (i = 1; i <= n; i++)
                if (!($(pos[i]) + 0 > 0)) { printf "row %s: column %d is %s, not > 0\n", $1, pos[i], $(pos[i]); bad = 1 }
        }
        END {
            if (!header) { print "no table after \"" title "\""; exit 1 }
            if (rows != count) { printf "%d rows in the %s table, expected %d\n", rows, title, count; exit 1 }
            exit bad
        }' "$tmp/out" || fail "the $title table"
}

# judge_json WORKLOAD COUNT: out.json parses; WORKLOAD has COUNT results,
# every figure in them > 0.
judge_json() {
    python3 -m json.tool "$tmp/out.json" >/dev/null || fail "--json output does not parse"
    python3 - "$tmp/out.json" "$1" "$2" <<'PY' || fail "--json figures"
import json, sys
doc = json.load(open(sys.argv[1]))
tests = [t for t in doc["tests"] if t["workload"] == sys.argv[2]]
assert tests, "no test %s in the JSON" % sys.argv[2]
results = tests[0]["results"]
assert len(results) == int(sys.argv[3]), "%d results, expected %s" % (len(results), sys.argv[3])
for r in results:
    for key, value in r.items():
        if value is not None and not value > 0:
            raise SystemExit("%s: %s = %s, not > 0" % (sys.argv[2], key, value))
print("ok: json %s: %d results, every figure > 0" % (sys.argv[2], len(results)))
PY
}

judge_stderr() {
    if grep -qE "$bad_stderr" "$tmp/err"; then
        fail "stderr has error lines: $(grep -E "$bad_stderr" "$tmp/err" | head -3)"
    fi
}

expect_ok() {
    [ "$rc" = 0 ] || fail "datperf $* exited with $rc"
    judge_stderr
}

case $case in
pingpong)
    run pingpong --sizes 1,4k,64k -n 200 --csv="$tmp/out.csv"
    expect_ok
    grep -q "one-way = round trip / 2" "$tmp/out" || fail "the table does not say what its latency is"
    judge_table "pingpong:" 7 3 2 3 4 5 7
    judge_json pingpong 3
    head -1 "$tmp/out.csv" | grep -q "^workload,source,run,size,iters,median_us" || fail "--csv header"
    [ "$(grep -c '^pingpong,datperf,' "$tmp/out.csv")" = 6 ] || fail "--csv rows (3 sizes, per run and combined)"
    ;;
pingpong-wait)
    run pingpong --wait --sweep 1:256 -n 100
    expect_ok
    grep -q "dat_evd_wait" "$tmp/out" || fail "the table does not say the completions were waited for"
    judge_table "pingpong:" 7 9 2 3 4 5 7
    judge_json pingpong 9
    ;;
write-lat)
    run write-lat --sizes 1,4k,1m -n 100
    expect_ok
    judge_table "write-lat:" 7 3 2 3 4 5 7
    judge_json write-lat 3
    ;;
write | read | send)
    run "$case" --sizes 1,4k,1m -n 200 --window 16
    expect_ok
    grep -q "16 outstanding" "$tmp/out" || fail "the table does not show the window"
    judge_table "$case:" 5 3 2 5
    judge_json "$case" 3
    ;;
ring)
    # Every message found in the target's ring by its last byte, slots handed
    # back by credit writes: a lost write or credit ends in datperf's timeout.
    run ring --sizes 1,4k,64k -n 300 --window 16
    expect_ok
    grep -q "16 outstanding" "$tmp/out" || fail "the table does not show the ring's slots"
    judge_table "ring:" 5 3 2 5
    judge_json ring 3
    run ring --wait --sizes 1 -n 10
    [ "$rc" = 2 ] && grep -q "ring polls memory" "$tmp/err" || fail "ring --wait was not refused (exit $rc)"
    ;;
conn-rate)
    run conn-rate --endpoints 20 --window 8
    expect_ok
    judge_table "conn-rate:" 6 1 1 3 4 5 6
    judge_json conn-rate 1
    ;;
compare)
    command -v fi_pingpong >/dev/null || skip "fi_pingpong not installed (Debian package libfabric-bin)"
    run pingpong --sizes 1,4k -n 200 --compare --peer-repeats 2
    expect_ok
    judge_table "pingpong:" 7 2 2 3 4 5 7
    # vs fi_pingpong: size, runs, peer us, median x, p99 x, min x, avg x
    awk '/^vs fi_pingpong/ { t = 1; next } t && $1 == "size" { h = 1; next }
         t && h && NF == 7 { rows++; for (i = 3; i <= 7; i++) if (!($i + 0 > 0)) bad = 1 }
         t && h && NF != 7 { t = 0 }
         END { exit !(rows == 2 && !bad) }' "$tmp/out" || fail "no fi_pingpong ratios for both sizes"
    python3 - "$tmp/out.json" <<'PY' || fail "--json ratios"
import json, sys
doc = json.load(open(sys.argv[1]))
ratios = doc["tests"][0]["ratios"]
assert len(ratios) == 2 and all(r["peer"] == "fi_pingpong" and r["median"] > 0 for r in ratios), ratios
print("ok: json has fi_pingpong ratios")
PY
    ;;
compare-fi-bw)
    # Streaming over ofi-shm beside datperf-fi-bw (built beside datperf).
    plugin=${3:-}
    conf=${plugin%/*}/dat.conf
    [ -n "$plugin" ] && grep -q '^ofi-shm ' "$conf" 2>/dev/null || skip "no ofi-shm entry in $conf"
    [ -x "${datperf%/*}/datperf-fi-bw" ] || skip "no datperf-fi-bw beside datperf (built only with libfabric)"
    run write,read,send -P ofi-shm --sizes 4k,64k -n 200 --compare=fi_bw --peer-repeats 1
    expect_ok
    # vs fi_bw: size, runs, peer MB/s, MB/s x; one table per workload
    awk '/^vs fi_bw/ { t = 1; h = 0; next } t && $1 == "size" { h = 1; next }
         t && h && NF == 4 { rows++; for (i = 3; i <= 4; i++) if (!($i + 0 > 0)) bad = 1; next }
         t && h { t = 0 }
         END { exit !(rows == 6 && !bad) }' "$tmp/out" || fail "no fi_bw ratios for 3 workloads x 2 sizes"
    ;;
plot)
    command -v gnuplot >/dev/null || skip "gnuplot not installed (Debian package gnuplot-nox)"
    run pingpong,write --sizes 1,4k,64k -n 100 --runs 2 --plot "$tmp/chart.png"
    expect_ok
    [ "$(head -c 8 "$tmp/chart.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "--plot wrote no PNG"
    grep -q "median of 2 runs" "$tmp/out" || fail "the table does not say it combines 2 runs"
    judge_json pingpong 3
    ;;
two-hosts)
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    timeout 100 "$datperf" --server --port "$port" --timeout 20 >"$tmp/server.out" 2>"$tmp/server.err" &
    server_pid=$!
    for _ in $(seq 100); do grep -q "waiting for a client" "$tmp/server.out" && break; sleep 0.1; done
    grep -q "waiting for a client" "$tmp/server.out" || { cat "$tmp/server.out" "$tmp/server.err"; fail "the server does not listen"; }
    run --connect 127.0.0.1 --port "$port" pingpong,read --sizes 1,64k -n 100
    expect_ok
    wait "$server_pid"
    src=$?
    server_pid=
    [ "$src" = 0 ] || { cat "$tmp/server.err"; fail "the server exited with $src"; }
    grep -q "two hosts" "$tmp/out" || fail "the table does not name the mode"
    judge_table "pingpong:" 7 2 2 3 4 5 7
    judge_table "read:" 5 2 2 5
    judge_json read 2
    ;;
ofed-libdat2)
    # OFED's libdat2 (Debian libdapl2) hosts our plugin: datperf uses only
    # the public API, so it runs there unchanged.
    plugin=${3:-}
    ofed=/usr/lib/x86_64-linux-gnu/libdat2.so.2
    [ -e "$ofed" ] || skip "$ofed missing (Debian package libdapl2)"
    [ -e "$plugin" ] || fail "no plugin given (third argument) or '$plugin' missing"
    # OFED's registry wants an absolute library path and nonthreadsafe.
    echo "ofi-tcp u2.0 nonthreadsafe default $plugin dat2.2.0 \"provider=tcp address=127.0.0.1\" \"\"" >"$tmp/dat.conf"
    resolved=$(LD_LIBRARY_PATH=${ofed%/*} ldd "$datperf" | awk '$1 == "libdat2.so.2" { print $3 }')
    [ "$(readlink -f "$resolved")" = "$(readlink -f "$ofed")" ] || fail "datperf resolves libdat2.so.2 to '$resolved', not OFED's"
    # OFED's registry dlcloses the plugin at dat_provider_fini: whatever the
    # plugin still holds from its statics (its object arenas) then looks
    # leaked to LeakSanitizer. Memory errors are still caught.
    ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 LD_LIBRARY_PATH=${ofed%/*} DAT_OVERRIDE=$tmp/dat.conf \
        run pingpong,write,conn-rate --sizes 1,64k -n 100 --endpoints 10
    expect_ok
    judge_table "pingpong:" 7 2 2 3 4 5 7
    judge_table "write:" 5 2 2 5
    judge_table "conn-rate:" 6 1 1 3 4 5 6
    judge_json pingpong 2
    ;;
pin)
    # --server --pin N: the waiting server runs on CPU N only (read back
    # from /proc), then serves a pinned client.
    ncpu=$(nproc)
    last=$((ncpu - 1))
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    timeout 100 "$datperf" --server --port "$port" --timeout 20 --pin "$last" >"$tmp/server.out" 2>"$tmp/server.err" &
    server_pid=$!
    for _ in $(seq 100); do grep -q "waiting for a client" "$tmp/server.out" && break; sleep 0.1; done
    grep -q "waiting for a client" "$tmp/server.out" || { cat "$tmp/server.out" "$tmp/server.err"; fail "the server does not listen"; }
    dp=$(cat "/proc/$server_pid/task/$server_pid/children" 2>/dev/null | awk '{ print $1 }') # timeout's child
    [ -n "$dp" ] || fail "cannot find the datperf server under timeout (pid $server_pid)"
    allowed=$(awk '$1 == "Cpus_allowed_list:" { print $2 }' "/proc/$dp/status")
    [ "$allowed" = "$last" ] || fail "datperf --server --pin $last runs on CPUs '$allowed'"
    echo "ok: --server --pin $last: Cpus_allowed_list $allowed"
    run --connect 127.0.0.1 --port "$port" --pin 0 pingpong --sizes 1 -n 100
    expect_ok
    wait "$server_pid"; server_pid=
    grep -q "this client on CPU 0" "$tmp/out" || fail "the table does not say the client was pinned"
    # One-command mode, peers included when fi_pingpong is here.
    compare=
    command -v fi_pingpong >/dev/null && compare="--compare --peer-repeats 1"
    run pingpong --sizes 1,4k -n 200 --pin 0,"$last" $compare
    expect_ok
    grep -q "server in a child process on CPU 0, client on CPU $last" "$tmp/out" || fail "the table does not say how it was pinned"
    judge_table "pingpong:" 7 2 2 3 4 5 7
    if [ -n "$compare" ]; then
        grep -q "^vs fi_pingpong" "$tmp/out" || fail "no fi_pingpong figures with --pin"
        grep -qi "fail" "$tmp/out" && fail "a pinned peer failed"
    fi
    # Bad CPUs: not a number is usage (2); a CPU this host lacks fails (1) saying so.
    run --pin 0,x
    [ "$rc" = 2 ] || fail "--pin 0,x: exit status $rc, expected 2"
    run pingpong --sizes 1 -n 10 --pin 0,"$ncpu"
    [ "$rc" = 1 ] || fail "--pin 0,$ncpu (no such CPU): exit status $rc, expected 1"
    grep -q "cannot run on CPU $ncpu" "$tmp/err" || fail "--pin 0,$ncpu: no clear message: $(head -3 "$tmp/err")"
    echo "ok: --pin: pinned runs, a bad CPU refused"
    ;;
timer)
    # --timer tsc: the heading and the JSON say so, and the ticks were
    # converted at the right rate. Checked against clocks outside datperf,
    # so that the machine's load cannot fail it: the measured seconds of all
    # sizes fit in the command's own run time (ticks taken for longer units
    # would not), and no one-way median is below 0.1 us (nor would shorter
    # ones). --timer clock and auto name their clock; a bad value is refused.
    [ "$(uname -m)" = x86_64 ] || skip "--timer tsc reads the x86-64 time-stamp counter; this is $(uname -m)"
    began=$(date +%s%N)
    run pingpong,write-lat --sizes 1,4k -n 300 --timer tsc
    ended=$(date +%s%N)
    expect_ok
    grep -q "; timer TSC (clock_gettime costs [0-9]* ns a call here)" "$tmp/out" || fail "--timer tsc: the heading does not say so"
    judge_table "pingpong:" 7 2 2 3 4 5 7
    judge_table "write-lat:" 7 2 2 3 4 5 7
    judge_json pingpong 2
    python3 - "$tmp/out.json" $(( (ended - began) / 1000 )) <<'PY' || fail "--timer tsc: the figures are not in microseconds"
import json, sys
doc = json.load(open(sys.argv[1]))
wall_us = int(sys.argv[2])
assert doc["timer"].startswith("TSC"), doc["timer"]
measured_us = 0
for t in doc["tests"]:
    for r in t["results"]:
        assert r["median_us"] >= 0.1, "%s %d B: median %.4f us" % (t["workload"], r["size"], r["median_us"])
        measured_us += r["seconds"] * 1e6
        print("ok: %s %d B: median %.2f us, %.0f us measured" % (t["workload"], r["size"], r["median_us"], r["seconds"] * 1e6))
assert measured_us < wall_us, "%.0f us measured in a command that ran %d us" % (measured_us, wall_us)
print("ok: %.0f us measured within the command's %d us" % (measured_us, wall_us))
PY
    run pingpong --sizes 1 -n 50 --timer clock
    expect_ok
    grep -q "; timer clock_gettime (" "$tmp/out" || fail "--timer clock: the heading does not say so"
    python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["timer"]; assert t.startswith("clock_gettime"), t' \
        "$tmp/out.json" || fail "--timer clock: the JSON does not say so"
    run pingpong --sizes 1 -n 50
    expect_ok
    grep -qE "; timer (TSC|clock_gettime) \(clock_gettime costs [0-9]+ ns a call here\)" "$tmp/out" || fail "--timer auto: the heading does not name the clock"
    run --timer sundial
    [ "$rc" = 2 ] || fail "--timer sundial: exit status $rc, expected 2"
    grep -q "none of auto, clock, tsc" "$tmp/err" || fail "--timer sundial: no clear message"
    echo "ok: --timer: TSC figures in microseconds, the heading and the JSON name the clock, a bad value refused"
    ;;
scale | scale-self)
    # A few pairs in two batches: the table has its rows (none, 4, 8,
    # after), the JSON the same with sane figures, every descriptor comes
    # back, and the chart is drawn. Not a timed test: no figure is compared
    # with a bound but for what cannot be otherwise (CPU within what the
    # CPUs can give, counts of descriptors).
    self=
    [ "$case" = scale-self ] && self=--self
    plot=
    command -v gnuplot >/dev/null && plot="--plot $tmp/chart.png"
    run scale $self --pairs 4,8 --window 3 --idle 1 -n 100 $plot
    expect_ok
    grep -q "^RLIMIT_NOFILE " "$tmp/out" || fail "the table does not say what became of RLIMIT_NOFILE"
    # pairs, batch, setup, teardown, idle client, idle server, fds/pair x2, RSS/pair x2, median, x
    awk '/^scale: / { t = 1; next }
         t && $1 == "pairs" { h = 1; next }
         t && h && NF == 12 && ($1 == "4" || $1 == "8") {
             rows++
             for (i = 3; i <= 4; i++) if (!($i + 0 > 0)) { print "row " $1 ": column " i " is " $i; bad = 1 }
             if (!($11 + 0 > 0)) { print "row " $1 ": no ping-pong median"; bad = 1 }
         }
         t && h && ($1 == "0" || $1 == "after") && NF == 12 { ends++ }
         END { exit !(rows == 2 && ends == 2 && !bad) }' "$tmp/out" || fail "the scale table (rows 0, 4, 8, after)"
    grep -qE "^  client: [0-9]+ before the pairs, [0-9]+ at 8 pairs, [0-9]+ after teardown: all returned" "$tmp/out" ||
        fail "the client's descriptors are not all returned after teardown"
    python3 - "$tmp/out.json" "$(nproc)" "$self" <<'PY' || fail "--json scale figures"
import json, math, sys
doc = json.load(open(sys.argv[1]))
ncpu, self_mode = int(sys.argv[2]), sys.argv[3] == "--self"
tests = [t for t in doc["tests"] if t["workload"] == "scale"]
assert tests, "no scale test in the JSON"
s = tests[0]["scale"]
assert s["self"] == self_mode and s["idle_s"] == 1 and s["pingpong"]["iters"] == 100, s
rows = s["rows"]
assert [(r["pairs"], r["after"]) for r in rows] == [(0, 0), (4, 0), (8, 0), (0, 1)], [(r["pairs"], r["after"]) for r in rows]
none, after = rows[0], rows[-1]
for r in rows:
    for side in ("client", "server"):
        cpu = r[side + "_cpu_pct"]
        assert 0 <= cpu <= 100 * ncpu, "%s CPU %s%% at %d pairs" % (side, cpu, r["pairs"])
        assert r[side + "_threads"] and sum(t["main"] for t in r[side + "_threads"]) <= 1, r[side + "_threads"]
        assert r[side + "_fds"] > 0 and r[side + "_rss_kib"] > 0, r
    assert r["pp_median_us"] > 0 and r["pp_min_us"] <= r["pp_median_us"] <= r["pp_p99_us"], r
for r in rows[1:3]:
    for key in ("setup_us", "teardown_us", "create_us", "connect_us", "passive_create_us", "accept_us",
                "disconnect_us", "free_us", "passive_free_us"):
        assert r[key] is not None and r[key] > 0, "%s = %s at %d pairs" % (key, r[key], r["pairs"])
    assert r["batch"] == 4, r
    # Every pair holds its descriptors (none on some transports) in the
    # process that holds its ends; with --self the server holds none.
    assert r["client_fds"] >= none["client_fds"], r
    if self_mode:
        assert r["server_fds"] == none["server_fds"], "the server holds no pair, yet its descriptors changed"
for side in ("client", "server"):
    assert after[side + "_fds"] == none[side + "_fds"], "%s: %d descriptors before, %d after teardown" % (
        side, none[side + "_fds"], after[side + "_fds"])
    assert after[side + "_rss_trimmed_kib"] > 0, "%s: no RSS after malloc_trim" % side
print("ok: json scale: rows 0, 4, 8, after; descriptors returned; CPU within 0..%d%%" % (100 * ncpu))
PY
    if [ -n "$plot" ]; then
        [ "$(head -c 8 "$tmp/chart.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "--plot wrote no PNG"
    fi
    # Usage: --self belongs to scale; scale has no CSV.
    run pingpong --self
    [ "$rc" = 2 ] || fail "--self without scale: exit status $rc, expected 2"
    run scale --csv
    [ "$rc" = 2 ] || fail "scale --csv: exit status $rc, expected 2"
    ;;
bad-provider)
    run -P no-such-ia
    [ "$rc" = 1 ] || fail "an unknown IA name: exit status $rc, expected 1"
    grep -q "no provider named 'no-such-ia'.*dat.conf entries: " "$tmp/err" || fail "an unknown IA name: no clear message"
    judge_stderr
    [ -s "$tmp/out" ] && fail "an unknown IA name printed a table"
    echo "ok: an unknown IA name: exit 1, '$(head -c 100 "$tmp/err")...'"
    # An entry that exists but whose library does not load: the open fails.
    echo "broken u2.0 nonthreadsafe default $tmp/no-such-provider.so dat2.2.0 \"\" \"\"" >"$tmp/dat.conf"
    DAT_OVERRIDE=$tmp/dat.conf run -P broken
    [ "$rc" = 1 ] || fail "an entry whose library does not load: exit status $rc, expected 1"
    grep -q "cannot open IA 'broken': DAT_PROVIDER_NOT_FOUND" "$tmp/err" || fail "an entry whose library does not load: no clear message"
    grep -qE 'AddressSanitizer|runtime error:|Segmentation|Aborted' "$tmp/err" && fail "a crash"
    echo "ok: a broken entry: exit 1, '$(grep "cannot open IA" "$tmp/err")'"
    # Bad usage is exit 2.
    run --sizes 0
    [ "$rc" = 2 ] || fail "--sizes 0: exit status $rc, expected 2"
    ;;
*)
    echo "usage: $0 DATPERF CASE"; exit 2 ;;
esac
echo "PASS: datperf $case"
exit 0
