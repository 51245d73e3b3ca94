#!/bin/bash
# datinfo as a health check: every exit status with its reason on stderr,
# -l, --json that stays JSON while a provider prints to stdout, "did you
# mean", the paths searched when no dat.conf is found, and --probe telling
# a provider that fails from one that crashes or hangs.
#   datinfo_status.sh DATINFO TEST_LIB_DIR LIBDAT2_DIR
set -u
datinfo=$1 testlib=$2 libdir=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
expect() { # what, wanted status, got status
    if [ "$2" = "$3" ]; then echo "ok: $1 (exit $3)"; else echo "FAIL: $1: exit $3, wanted $2"; sed 's/^/    /' "$tmp/err"; fail=1; fi
}
has() { # what, file, pattern
    if grep -qE -- "$3" "$2"; then echo "ok: $1"; else echo "FAIL: $1: no /$3/ in:"; sed 's/^/    /' "$2"; fail=1; fi
}
provider=$testlib/libdat2_test_provider.so
entry() { printf '%s u2.0 threadsafe default %s test.2.0 "%s" ""\n' "$1" "${3:-$provider}" "$2"; }

# 0: the default IA (the first entry) opens, even when a later one does not.
{ entry first ok; entry broken ok "$tmp/nope.so"; } >"$tmp/good.conf"
DAT_OVERRIDE=$tmp/good.conf "$datinfo" >"$tmp/out" 2>"$tmp/err"; expect "default IA opens, a later entry does not" 0 $?
DAT_OVERRIDE=$tmp/good.conf "$datinfo" -l >"$tmp/out" 2>"$tmp/err"; expect "-l" 0 $?
has "-l: one line per entry, the default first, ok" "$tmp/out" "^first +$provider +\"ok\" +ok$"
has "-l: the broken one with the loader's reason" "$tmp/out" "^broken .* does not load: cannot load $tmp/nope.so: .*No such file or directory"
[ "$(wc -l <"$tmp/out")" = 2 ] && echo "ok: -l prints one line per entry" || { echo "FAIL: -l line count"; cat "$tmp/out"; fail=1; }

# 1: the default IA does not open; the reason is said.
{ entry first openfail; entry second ok; } >"$tmp/bad.conf"
DAT_OVERRIDE=$tmp/bad.conf "$datinfo" >"$tmp/out" 2>"$tmp/err"; expect "default IA does not open" 1 $?
has "the reason names the default IA and its file" "$tmp/err" "^datinfo: the default IA 'first' \($tmp/bad.conf:1\): does not open: DAT_INSUFFICIENT_RESOURCES"
# 1: a name that is not there, with "did you mean".
DAT_OVERRIDE=$tmp/good.conf "$datinfo" frist >"$tmp/out" 2>"$tmp/err"; expect "unknown IA name" 1 $?
has "did you mean" "$tmp/err" "^datinfo: no dat.conf entry named 'frist'; did you mean 'first'\?"
# IA_NAME picks the entry that decides.
DAT_OVERRIDE=$tmp/bad.conf "$datinfo" second >"$tmp/out" 2>"$tmp/err"; expect "IA_NAME that opens while the default does not" 0 $?

# 2: bad usage.
"$datinfo" --bogus >"$tmp/out" 2>"$tmp/err"; expect "unknown option" 2 $?
"$datinfo" --probe --no-open >"$tmp/out" 2>"$tmp/err"; expect "--probe with --no-open" 2 $?

# 3: DAT_OVERRIDE names a missing file.
DAT_OVERRIDE=$tmp/missing.conf "$datinfo" >"$tmp/out" 2>"$tmp/err"; expect "DAT_OVERRIDE names a missing file" 3 $?
has "the missing file is named" "$tmp/err" "^datinfo: cannot read $tmp/missing.conf \(DAT_OVERRIDE\): No such file or directory"
# 3: no dat.conf anywhere: a private copy of libdat2 (nothing beside it) in
# a mount namespace where /etc/dat.conf is not a regular file.
mkdir "$tmp/lonely"; cp -a "$libdir"/libdat2.so* "$tmp/lonely/"
if [ -e /etc/dat.conf ]; then
    hide=(unshare --mount sh -c 'mount --bind /dev/null /etc/dat.conf && exec "$@"' sh)
    "${hide[@]}" true 2>/dev/null || hide=()
else
    hide=(env)
fi
if [ ${#hide[@]} -gt 0 ]; then
    env -u DAT_OVERRIDE LD_LIBRARY_PATH="$tmp/lonely" "${hide[@]}" "$datinfo" >"$tmp/out" 2>"$tmp/err"
    expect "no dat.conf found" 3 $?
    has "the paths searched are said" "$tmp/err" "^datinfo: no dat.conf found; searched $tmp/lonely/dat.conf \(beside libdat2\), .*/etc/dat.conf \(system\)"
    has "the paths searched are in the report" "$tmp/out" "^searched:"
    env -u DAT_OVERRIDE LD_LIBRARY_PATH="$tmp/lonely" "${hide[@]}" "$datinfo" --json >"$tmp/out" 2>"$tmp/err"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["exit_status"] == 3 and d["conf_files"] == [] and len(d["searched"]) >= 2, d' "$tmp/out" \
        && echo "ok: --json says where it looked" || { echo "FAIL: --json without dat.conf"; fail=1; }
else
    echo "skip: no dat.conf found (cannot hide /etc/dat.conf: unshare --mount needs root)"
fi

# 4: malformed records (the good ones still work).
{ entry first ok; echo 'this is not a record'; } >"$tmp/malformed.conf"
DAT_OVERRIDE=$tmp/malformed.conf "$datinfo" >"$tmp/out" 2>"$tmp/err"; expect "malformed record" 4 $?
has "the malformed record is named" "$tmp/err" "^datinfo: 1 malformed dat.conf record\(s\) skipped, the first $tmp/malformed.conf:2"

# --json stays JSON while the provider prints to stdout (through stdio and write(1)).
{ entry chatty print; entry first ok; } >"$tmp/print.conf"
DAT_OVERRIDE=$tmp/print.conf "$datinfo" --json >"$tmp/json" 2>"$tmp/err"; expect "--json with a provider that prints" 0 $?
if python3 -m json.tool "$tmp/json" >/dev/null; then echo "ok: --json | python3 -m json.tool"; else echo "FAIL: not JSON:"; head -c 600 "$tmp/json"; fail=1; fi
has "the provider's output went to stderr" "$tmp/err" "vm:TEST: ia_open chatty says hello"
has "the provider's write(1) went to stderr" "$tmp/err" "vm:TEST: and once more through write\(1\)"
python3 - "$tmp/json" <<'PY' && echo "ok: --json has the verdict" || { echo "FAIL: --json content"; fail=1; }
import json, sys
d = json.load(open(sys.argv[1]))
assert d["default_ia"] == "chatty" and d["exit_status"] == 0 and d["problems"] == [], d
assert d["entries"][0]["status"] == "ok" and d["libdat2"]["dat2"] is True
PY
DAT_OVERRIDE=$tmp/print.conf "$datinfo" -l >"$tmp/out" 2>"$tmp/err"
if grep -q "vm:TEST" "$tmp/out"; then echo "FAIL: provider output in -l"; fail=1; else echo "ok: -l stays clean too"; fi

# --probe: a child process per entry; a crash and a hang rule out their own
# entry only and are told apart from a failure.
{ entry crasher opencrash; entry hanger openhang; entry missing ok "$tmp/nope.so"; entry plain ok; } >"$tmp/probe.conf"
DAT_OVERRIDE=$tmp/probe.conf "$datinfo" --probe --timeout 3 -l >"$tmp/out" 2>"$tmp/err"; expect "--probe, default IA crashes" 1 $?
has "a crash is a crash, with its stage" "$tmp/out" "^crasher .* crashed at dat_ia_open: signal 6 \(Aborted\)$"
has "a hang is a timeout" "$tmp/out" "^hanger .* timed out at dat_ia_open: no answer in 3 s$"
has "a library that does not load fails, with the registry's reason" "$tmp/out" "^missing .* failed at dat_ia_open: .*DAT_PROVIDER_NOT_FOUND.*cannot load $tmp/nope.so"
has "an IA that opens but cannot connect fails later" "$tmp/out" "^plain .* failed at (listen|connect)"

# Run with OFED's libdat2 (LD_LIBRARY_PATH before datinfo's RUNPATH), datinfo says so.
ofed=/usr/lib/x86_64-linux-gnu/libdat2.so.2
if [ -e "$ofed" ] && ! nm -D --defined-only "$ofed" | grep -q ' dat_cno_fd_create$'; then
    LD_LIBRARY_PATH=${ofed%/*} "$datinfo" --version >"$tmp/out" 2>&1
    has "--version tells OFED's libdat2 from ours" "$tmp/out" "^libdat2 .*: not dat2's"
    DAT_OVERRIDE=$tmp/good.conf LD_LIBRARY_PATH=${ofed%/*} "$datinfo" -l >"$tmp/out" 2>"$tmp/err"
    has "a report made with OFED's libdat2 says so first" "$tmp/err" "^datinfo: the libdat2 this runs with \(.*\) is not dat2's"
fi
exit $fail
