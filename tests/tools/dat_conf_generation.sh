#!/bin/bash
# The generated dat.conf (issue 22): only entries that opened and passed a
# loopback connection at generation time, ofi-tcp first, and a comment that
# names each candidate left out with the reason.
#   dat_conf_generation.sh SOURCE_DIR BUILD_DIR TEST_LIB_DIR
set -u
src=$1 build=$2 testlib=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
has() { if grep -qE -- "$3" "$2"; then echo "ok: $1"; else echo "FAIL: $1: no /$3/ in:"; sed 's/^/    /' "$2"; fail=1; fi; }
hasnt() { if grep -qE -- "$3" "$2"; then echo "FAIL: $1: /$3/ in:"; sed 's/^/    /' "$2"; fail=1; else echo "ok: $1"; fi; }
records() { grep -vE '^[[:space:]]*(#|$)' "$1"; }

# The build's own file.
conf=$build/lib/dat.conf
[ "$(records "$conf" | head -1 | cut -d' ' -f1)" = ofi-tcp ] && echo "ok: ofi-tcp is the first (default) entry" \
    || { echo "FAIL: first entry is not ofi-tcp:"; cat "$conf"; fail=1; }
# libfabric's sockets provider crashes on a connection request in a plain
# build and passes under TSan (its timing changes): whichever the probe saw,
# the file must say it, and say it again when probed now.
if grep -q '^ofi-sockets ' "$build/dat.conf.candidates"; then
    if grep -q '^ofi-sockets ' "$conf"; then
        (cd "$tmp" && DAT_OVERRIDE=$build/dat.conf.candidates TSAN_OPTIONS=report_bugs=0:intercept_send=0 \
            ASAN_OPTIONS=detect_leaks=0:intercept_send=0 "$build/bin/datinfo" --probe --timeout 20 ofi-sockets >"$tmp/probe.out" 2>&1) \
            && echo "ok: ofi-sockets is an entry and passes the probe now" \
            || { echo "FAIL: ofi-sockets is an entry but fails the probe now:"; cat "$tmp/probe.out"; fail=1; }
    else
        has "ofi-sockets, left out, is named with the reason" "$conf" "^#   ofi-sockets: (crashed|failed|timed out) at "
    fi
fi
ls "$build"/datinfo.*.btr "$build"/lib/datinfo.*.btr >/dev/null 2>&1 \
    && { echo "FAIL: the probe left a crash's backtrace files in the build tree:"; ls "$build"/datinfo.*.btr "$build"/lib/datinfo.*.btr 2>/dev/null; fail=1; } \
    || echo "ok: the probe's crashes leave no files in the build tree"
records "$conf" | while read -r name _; do
    grep -q "^$name " "$build/dat.conf.candidates" || { echo "FAIL: $name is no candidate"; exit 1; }
done || fail=1

# The generator on candidates that fail each way, next to ofi-tcp.
cat >"$tmp/candidates" <<CONF
ofi-tcp u2.0 nonthreadsafe default libdat2_ofi.so dat2.2.0 "provider=tcp address=127.0.0.1" ""
crasher u2.0 threadsafe default $testlib/libdat2_test_provider.so test.2.0 "opencrash" ""
hanger u2.0 threadsafe default $testlib/libdat2_test_provider.so test.2.0 "openhang" ""
missing u2.0 threadsafe default $tmp/nope.so test.2.0 "" ""
CONF
echo "# header" >"$tmp/header"
cmake -DDATINFO="$build/bin/datinfo" -DCANDIDATES="$tmp/candidates" -DHEADER="$tmp/header" \
      -DOUTPUT="$tmp/dat.conf" -DDEFAULT_IA=ofi-tcp -DPROBE_TIMEOUT=3 \
      -P "$src/cmake/GenerateDatConf.cmake" >"$tmp/log" 2>&1 || { echo "FAIL: generator:"; cat "$tmp/log"; fail=1; }
[ "$(records "$tmp/dat.conf")" = "$(head -1 "$tmp/candidates")" ] && echo "ok: only ofi-tcp is kept" \
    || { echo "FAIL: kept records:"; cat "$tmp/dat.conf"; fail=1; }
has "a crash is named" "$tmp/dat.conf" "^#   crasher: crashed at dat_ia_open: signal 6 \(Aborted\)"
has "a hang is named" "$tmp/dat.conf" "^#   hanger: timed out at dat_ia_open"
has "a library that does not load is named, with the loader's reason" "$tmp/dat.conf" "^#   missing: failed at dat_ia_open: .*nope.so"
has "each left-out record is kept, commented" "$tmp/dat.conf" "^#     crasher u2.0 threadsafe default"
exit $fail
