#!/bin/bash
# Every way an open can fail prints its own cause, on stderr, naming the
# dat.conf file and line where one is involved; datinfo shows the same.
set -u
probe=$1 datinfo=$2 libdir=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # name, file, pattern
    if grep -qE -- "$3" "$2"; then echo "ok: $1"; else echo "FAIL: $1: no /$3/ in:"; sed 's/^/    /' "$2"; fail=1; fi
}
run() { # conf-or-empty, ia name -> $tmp/out, $tmp/err
    DAT_OVERRIDE=$1 "$probe" ${2:-} >"$tmp/out" 2>"$tmp/err"
}

cat >"$tmp/dat.conf" <<CONF
good      u2.0 threadsafe    default $libdir/libdat2_test_provider.so test.2.0 "ok" ""
missing   u2.0 threadsafe    default $tmp/nope.so test.2.0 "" ""
noinit    u2.0 threadsafe    default $libdir/libdat2_test_noinit.so test.2.0 "" ""
old       u1.1 threadsafe    default $libdir/libdat2_test_provider.so test.2.0 "ok" ""
bad-api   x2.0 threadsafe    default $libdir/libdat2_test_provider.so test.2.0 "ok" ""
noreg     u2.0 threadsafe    default $libdir/libdat2_test_provider.so test.2.0 "noregister" ""
CONF
echo 'not a dat.conf line at all' >>"$tmp/dat.conf"
printf 'notalib u2.0 threadsafe default %s test.2.0 "" ""\n' "$tmp/dat.conf" >>"$tmp/dat.conf"

run "$tmp/dat.conf" good
check "good entry opens" "$tmp/out" "open good: ok"
check "malformed api_version named with file, line, field" "$tmp/err" "dat.conf:5: field 'api_version': expected \[u\|k\]MAJOR.MINOR"
check "short record named with file, line, missing field" "$tmp/err" "dat.conf:7: field 'ia_params': missing"
run "$tmp/dat.conf" missing
check "missing library: dlopen's reason" "$tmp/err" "dat.conf:2: cannot load $tmp/nope.so: $tmp/nope.so: cannot open shared object file: No such file or directory$"
if grep -qiE "boost|Bad file descriptor" "$tmp/err"; then echo "FAIL: the loader's error is wrapped or carries a stale errno:"; cat "$tmp/err"; fail=1
else echo "ok: the loader's error is dlerror's text alone"; fi
check "missing library: DAT code" "$tmp/out" "DAT_PROVIDER_NOT_FOUND DAT_NAME_NOT_REGISTERED"
run "$tmp/dat.conf" noinit
check "library without dat_provider_init" "$tmp/err" "dat.conf:3: .*is not a DAT provider: it has no dat_provider_init"
run "$tmp/dat.conf" old
check "version mismatch" "$tmp/err" "dat.conf:4: it implements DAT API 1.1, the application asks for 2.0"
check "version mismatch code" "$tmp/out" "DAT_PROVIDER_NOT_FOUND DAT_MAJOR_NOT_FOUND"
run "$tmp/dat.conf" noreg
check "provider that does not register" "$tmp/err" "dat.conf:6: .*did not register a provider named 'noreg'"
run "$tmp/dat.conf" notalib
check "a file that is not a shared object" "$tmp/err" "dat.conf:8: cannot load .*dat.conf"
run "$tmp/dat.conf" typo-name
check "unknown name lists the known ones" "$tmp/err" "no such provider.*known: good, missing, noinit, old, noreg, notalib"
run "$tmp/dat.conf" gdoo
check "a misspelled name: did you mean" "$tmp/err" "no such provider.*; did you mean 'good'\?"
run "$tmp/dat.conf" zzzzzzzz
if grep -q "did you mean" "$tmp/err"; then echo "FAIL: a suggestion for a name like none"; fail=1; else echo "ok: no suggestion for a name like none"; fi
run "$tmp/nonexistent.conf" good
check "unreadable DAT_OVERRIDE is reported" "$tmp/err" "cannot read dat.conf .*nonexistent.conf \(DAT_OVERRIDE\): No such file"
check "no fallback after an unreadable DAT_OVERRIDE" "$tmp/out" "DAT_PROVIDER_NOT_FOUND"
# dat_registry_list_providers(3DAT): DAT_INTERNAL_ERROR, "The DAT static
# registry is missing"; a directory named by DAT_OVERRIDE is no dat.conf.
run "$tmp/nonexistent.conf"
check "listing without a static registry: DAT_INTERNAL_ERROR" "$tmp/out" "^list: DAT_INTERNAL_ERROR"
mkdir "$tmp/confdir"
run "$tmp/confdir"
check "a directory as DAT_OVERRIDE is reported" "$tmp/err" "cannot read dat.conf .*confdir \(DAT_OVERRIDE\): it is a directory"
check "a directory as DAT_OVERRIDE: DAT_INTERNAL_ERROR" "$tmp/out" "^list: DAT_INTERNAL_ERROR"
# Out of file descriptors at the first call: dat_ia_open(3DAT)'s
# DAT_INSUFFICIENT_RESOURCES, and the dat.conf is read again once the
# process has descriptors (not "no such provider" for its lifetime).
# Not in a sanitizer build: at the limit, UBSan's own type check cannot read
# /proc/self/maps and reports an error of its own (as IaTest's case).
if ldd "$probe" | grep -qE 'lib(a|t|ub)san'; then
    echo "skip: out of descriptors at the first open: a sanitizer runtime in $probe needs descriptors of its own"
else
    (ulimit -n 64; PROBE_NO_FDS=1 run "$tmp/dat.conf" good)
    check "out of descriptors at the first open: DAT_INSUFFICIENT_RESOURCES" "$tmp/out" "^short: open good: DAT_INSUFFICIENT_RESOURCES"
    check "out of descriptors: the cause is logged" "$tmp/err" "cannot read dat.conf .*: Too many open files"
    check "descriptors back: the next open reads dat.conf and opens" "$tmp/out" "^open good: ok"
fi
run "$tmp/dat.conf"
if grep -q '^list:' "$tmp/out"; then echo "FAIL: listing a readable dat.conf failed"; fail=1; else echo "ok: listing a readable dat.conf"; fi

# Errors never go to stdout by default...
run "$tmp/dat.conf" missing
if grep -q '^dat2:' "$tmp/out"; then echo "FAIL: log lines on stdout"; fail=1; else echo "ok: log lines stay off stdout"; fi
# ...but do with DAT_DBG_DEST=1 (OFED's stdout), and DAT_DBG_TYPE=0 silences them.
DAT_DBG_DEST=1 DAT_OVERRIDE=$tmp/dat.conf "$probe" missing >"$tmp/out" 2>"$tmp/err"
check "DAT_DBG_DEST=1 sends the log to stdout" "$tmp/out" "^dat2: .*cannot load"
DAT_DBG_TYPE=0 DAT_OVERRIDE=$tmp/dat.conf "$probe" missing >"$tmp/out" 2>"$tmp/err"
if [ -s "$tmp/err" ]; then echo "FAIL: DAT_DBG_TYPE=0 still logs"; fail=1; else echo "ok: DAT_DBG_TYPE=0 silences the log"; fi
DAT_DBG_TYPE=0xff DAT_OVERRIDE=$tmp/dat.conf "$probe" good >"$tmp/out" 2>"$tmp/err"
check "DAT_DBG_TYPE=0xff traces the static registry" "$tmp/err" "static registry: dat_provider_init for good"

# Log lines have no length limit: "known: ..." naming 150 entries of 20
# characters each is over 3000 bytes, and the last name must be there.
for i in $(seq 1 150); do
    printf 'long-entry-name-%04d u2.0 threadsafe default %s/libdat2_test_provider.so test.2.0 "ok" ""\n' "$i" "$libdir"
done >"$tmp/long.conf"
DAT_OVERRIDE=$tmp/long.conf "$probe" absent >"$tmp/out" 2>"$tmp/err"
check "a log line over 1024 bytes is whole" "$tmp/err" "long-entry-name-0150\)$"
# DAT_DBG_PREFIX: pid and thread id on each line, to tell processes apart.
DAT_DBG_PREFIX=pid,tid DAT_OVERRIDE=$tmp/dat.conf "$probe" missing >"$tmp/out" 2>"$tmp/err"
check "DAT_DBG_PREFIX=pid,tid" "$tmp/err" "^dat2\[pid [0-9]+ tid [0-9]+\]: dat_ia_open\('missing'\)"
DAT_DBG_PREFIX=all DAT_OVERRIDE=$tmp/dat.conf "$probe" missing >"$tmp/out" 2>"$tmp/err"
check "DAT_DBG_PREFIX=all adds the time" "$tmp/err" "^dat2\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]+ pid [0-9]+ tid [0-9]+\]: "
# DAT_DBG_TYPE by name, beside OFED's number.
DAT_DBG_TYPE=debug DAT_OVERRIDE=$tmp/dat.conf "$probe" good >"$tmp/out" 2>"$tmp/err"
check "DAT_DBG_TYPE=debug traces the static registry" "$tmp/err" "static registry: dat_provider_init for good"
check "the static registry trace names libdat2's version" "$tmp/err" "static registry: libdat2 [0-9]+\.[0-9]+\.[0-9]+ \(dat2\)"
DAT_DBG_TYPE=error,dynamic DAT_OVERRIDE=$tmp/dat.conf "$probe" good >"$tmp/out" 2>"$tmp/err"
check "DAT_DBG_TYPE=error,dynamic traces the dynamic registry" "$tmp/err" "dynamic registry: added 'good'"
if grep -q "static registry:" "$tmp/err"; then echo "FAIL: DAT_DBG_TYPE=error,dynamic traces the static registry too"; fail=1
else echo "ok: DAT_DBG_TYPE=error,dynamic leaves the static registry out"; fi
DAT_DBG_TYPE=none DAT_OVERRIDE=$tmp/dat.conf "$probe" missing >"$tmp/out" 2>"$tmp/err"
if [ -s "$tmp/err" ]; then echo "FAIL: DAT_DBG_TYPE=none still logs"; fail=1; else echo "ok: DAT_DBG_TYPE=none silences the log"; fi
DAT_DBG_TYPE=loud DAT_OVERRIDE=$tmp/dat.conf "$probe" missing >"$tmp/out" 2>"$tmp/err"
check "an unknown DAT_DBG_TYPE is said, with the names" "$tmp/err" "DAT_DBG_TYPE='loud' is not understood.*warn, error, info, debug"
check "an unknown DAT_DBG_TYPE keeps the default (errors)" "$tmp/err" "cannot load"

# datinfo: the same causes, per entry, text and JSON.
DAT_OVERRIDE=$tmp/dat.conf "$datinfo" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 4 ] && echo "ok: datinfo exits 4: the file has malformed records" || { echo "FAIL: datinfo exit $rc"; fail=1; }
check "datinfo names the file" "$tmp/out" "$tmp/dat.conf \(DAT_OVERRIDE\): read"
check "datinfo shows diagnostics" "$tmp/out" "dat.conf:5: field 'api_version'"
check "datinfo shows the good entry's attributes" "$tmp/out" "adapter_name +good"
check "datinfo shows why a library does not load" "$tmp/out" "does not load: cannot load .*nope.so.*No such file"
check "datinfo shows a missing entry point" "$tmp/out" "does not load: .*no dat_provider_init"
DAT_OVERRIDE=$tmp/dat.conf "$datinfo" --json >"$tmp/json" 2>/dev/null
if python3 - "$tmp/json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
e = {x["ia_name"]: x for x in d["entries"]}
assert e["good"]["open"]["status"] == "DAT_SUCCESS", e["good"]
assert e["good"]["open"]["ia_attr"]["adapter_name"] == "good"
assert e["missing"]["library_loads"] is False and "No such file" in e["missing"]["library_error"]
assert e["old"]["open"]["status"] == "DAT_PROVIDER_NOT_FOUND DAT_MAJOR_NOT_FOUND"
assert len(d["diagnostics"]) == 2 and d["diagnostics"][0]["line"] == 5
assert any(t["name"] == "DAT_OVERRIDE" for t in d["tunables"])
PY
then echo "ok: datinfo --json is valid and complete"; else echo "FAIL: datinfo --json"; fail=1; fi
head -1 "$tmp/dat.conf" >"$tmp/good.conf"
DAT_OVERRIDE=$tmp/good.conf "$datinfo" good >"$tmp/out" 2>&1 && echo "ok: datinfo NAME exits 0 for a good entry" || { echo "FAIL: datinfo good"; fail=1; }
"$datinfo" --bogus >/dev/null 2>&1; [ $? = 2 ] && echo "ok: datinfo rejects bad usage" || { echo "FAIL: datinfo usage"; fail=1; }
exit $fail
