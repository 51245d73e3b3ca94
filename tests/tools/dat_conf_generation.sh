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
if grep -q '^ofi-sockets ' "$build/dat.conf.candidates"; then
    hasnt "ofi-sockets (crashes in libfabric on a connection request) is not an entry" "$conf" "^ofi-sockets "
    has "ofi-sockets is named as left out, with the reason" "$conf" "^#   ofi-sockets: crashed at connection request"
fi
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
