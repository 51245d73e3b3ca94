#!/bin/bash
# Builds synopsis.c as the seed pages' SYNOPSIS says (cc file.c -ldat, with
# our include/dat and libdat.so.1 found by -I/-L) and runs it. FLAGS: the
# build's sanitizer flags, if any (an instrumented libdat.so.1 needs them).
set -u
cc=$1 include=$2 libdir=$3 src=$4 flags=${5:-}
dir=$(mktemp -d) && trap 'rm -rf "$dir"' EXIT
"$cc" $flags -I"$include" "$src" -L"$libdir" -ldat -Wl,-rpath,"$libdir" -o "$dir/synopsis" || { echo "FAIL: cc ... -ldat"; exit 1; }
out=$("$dir/synopsis" ofi-tcp 2>&1); rc=$?
echo "$out"
[ $rc -eq 0 ] && [[ "$out" == *"as the pages say" ]] && [[ "$out" != *"not as"* ]]
