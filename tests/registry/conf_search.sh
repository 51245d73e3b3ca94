#!/bin/bash
# Where libdat2 looks for dat.conf without DAT_OVERRIDE, and where relative
# library names resolve: beside libdat2 first.
set -u
probe=$1 datinfo=$2 libdir=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
# A private copy of libdat2 with its own dat.conf and a provider named by a
# bare file name, found beside libdat2 and not on any search path.
cp -a "$libdir"/libdat2.so* "$tmp"/
cp "$libdir/../tests/lib/libdat2_test_provider.so" "$tmp/libbeside_provider.so"
echo 'beside u2.0 threadsafe default libbeside_provider.so test.2.0 "ok" ""' >"$tmp/dat.conf"
out=$(env -u DAT_OVERRIDE LD_LIBRARY_PATH="$tmp" "$probe" beside 2>&1)
if [[ $out == *"open beside: ok"* ]]; then echo "ok: dat.conf beside libdat2 is read, bare library name resolves beside it"
else echo "FAIL: beside: $out"; fail=1; fi
out=$(env -u DAT_OVERRIDE LD_LIBRARY_PATH="$tmp" "$datinfo" --no-open 2>&1)
if [[ $out == *"$tmp/dat.conf (beside libdat2): read"* ]]; then echo "ok: datinfo reports the file beside libdat2"
else echo "FAIL: datinfo: $out"; fail=1; fi
# DAT_OVERRIDE replaces every other file.
echo 'other u2.0 threadsafe default libbeside_provider.so test.2.0 "ok" ""' >"$tmp/other.conf"
out=$(DAT_OVERRIDE="$tmp/other.conf" LD_LIBRARY_PATH="$tmp" "$probe" beside 2>&1)
if [[ $out == *"DAT_PROVIDER_NOT_FOUND"* ]]; then echo "ok: DAT_OVERRIDE hides the other files"
else echo "FAIL: override: $out"; fail=1; fi
out=$(DAT_OVERRIDE="$tmp/other.conf" LD_LIBRARY_PATH="$tmp" "$probe" other 2>&1)
if [[ $out == *"open other: ok"* ]]; then echo "ok: DAT_OVERRIDE entries resolve beside libdat2 too"
else echo "FAIL: override other: $out"; fail=1; fi
# A bare name not beside libdat2 goes to the loader's search path.
mkdir "$tmp/elsewhere"; mv "$tmp/libbeside_provider.so" "$tmp/elsewhere/"
out=$(env -u DAT_OVERRIDE LD_LIBRARY_PATH="$tmp:$tmp/elsewhere" "$probe" beside 2>&1)
if [[ $out == *"open beside: ok"* ]]; then echo "ok: bare library names fall back to the search path"
else echo "FAIL: search path: $out"; fail=1; fi
exit $fail
