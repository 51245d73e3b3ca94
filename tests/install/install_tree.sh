#!/bin/bash
# cmake --install into a temporary prefix gives a tree that works with no
# environment variable (no LD_LIBRARY_PATH, no DAT_OVERRIDE, no
# PKG_CONFIG_PATH at run time): its file list, the RUNPATH of the tools,
# one version everywhere, a C program built with pkg-config and another
# with find_package(dat2) (examples/, as README.md says), both opening
# ofi-tcp, the installed datinfo and datperf, and a moved tree.
#   install_tree.sh SOURCE_DIR BUILD_DIR VERSION LIBDIR BUILD_TYPE
set -u
src=$1 build=$2 version=$3 libdir=$4 config=$5
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
has() { if grep -qE -- "$3" "$2"; then ok "$1"; else bad "$1: no /$3/ in:"; sed 's/^/    /' "$2"; fi; }
# A shell with nothing but PATH: what a new user's program runs with.
clean() { env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$tmp" "$@"; }
prefix=$tmp/prefix
start=$(date +%s%N)

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; bad "cmake --install"; exit 1; }
(cd "$prefix" && find . \( -type f -o -type l \) | sed 's|^\./||' | sort) >"$tmp/tree"
config_lower=$(tr '[:upper:]' '[:lower:]' <<<"$config")
sed -e "s|@LIBDIR@|$libdir|g" -e "s|@VERSION@|$version|g" -e "s|@CONFIG@|$config_lower|g" \
    "$src/tests/install/expected_tree.txt" | grep -v '^#' | sort >"$tmp/expected"
if diff -u "$tmp/expected" "$tmp/tree" >"$tmp/tree.diff"; then ok "the installed files are the expected ones"
else bad "installed files differ from tests/install/expected_tree.txt:"; cat "$tmp/tree.diff"; fi

# The tools find the installed libdat2, not the system's (OFED's).
readelf -d "$prefix/bin/datinfo" >"$tmp/dyn"
has "datinfo has a RUNPATH relative to itself" "$tmp/dyn" "RUNPATH.*\[\\\$ORIGIN/\.\./$libdir\]"
clean ldd "$prefix/bin/datperf" >"$tmp/ldd"
has "datperf resolves libdat2.so.2 in the prefix" "$tmp/ldd" "libdat2.so.2 => $prefix/bin/../$libdir/libdat2.so.2"

# One version: the tools, the library file, dat2.pc, the CMake package, the man pages.
clean "$prefix/bin/datinfo" --version >"$tmp/v" 2>&1
has "datinfo --version" "$tmp/v" "^datinfo $version \(dat2\)$"
has "datinfo --version names the installed libdat2, dat2's" "$tmp/v" "^libdat2 $prefix/$libdir/libdat2.so.$version: dat2's$"
clean "$prefix/bin/datperf" --version >"$tmp/v" 2>&1
has "datperf --version" "$tmp/v" "^datperf $version \(dat2\)$"
[ "$(clean PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" pkg-config --modversion dat2)" = "$version" ] \
    && ok "pkg-config --modversion dat2 is $version" || bad "pkg-config --modversion dat2"
has "the CMake package's version" "$prefix/$libdir/cmake/dat2/dat2ConfigVersion.cmake" "PACKAGE_VERSION \"$version\""
has "datinfo(1) carries the version" "$prefix/share/man/man1/datinfo.1" "^\.TH DATINFO 1 .*dat2 $version"
has "dat.conf(5) carries the version" "$prefix/share/man/man5/dat.conf.5" "^\.TH DAT.CONF 5 .*dat2 $version"
if command -v man >/dev/null; then
    clean MANWIDTH=80 man -l "$prefix/share/man/man1/datinfo.1" >"$tmp/man" 2>&1
    has "datinfo(1) renders" "$tmp/man" "EXIT STATUS"
fi

# A program built with pkg-config, run with no environment variable.
clean PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" sh -c \
    'cc -o "$1/hello_pc" "$2/examples/hello_dat.c" $(pkg-config --cflags --libs dat2)' sh "$tmp" "$src" \
    >"$tmp/cc.log" 2>&1 || { cat "$tmp/cc.log"; bad "cc with pkg-config"; }
clean "$tmp/hello_pc" >"$tmp/run" 2>&1
has "the pkg-config program opens ofi-tcp" "$tmp/run" "^ofi-tcp: adapter ofi-tcp, vendor libfabric tcp, provider ofi-tcp ${version%.*}, DAT API 2.0$"
# A DAT 1.2 program (written from the seed pages' synopses) built with
# pkg-config dat: libdat.so.1 from the prefix, and through it the prefix's
# libdat2, not the system's.
readelf -d "$prefix/$libdir/libdat.so.1" >"$tmp/dyn12"
has "libdat.so.1 has soname libdat.so.1" "$tmp/dyn12" "SONAME.*\[libdat\.so\.1\]"
has "libdat.so.1 finds the libdat2 beside it (RUNPATH \$ORIGIN)" "$tmp/dyn12" "RUNPATH.*\[\\\$ORIGIN\]"
clean PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" sh -c \
    'cc -o "$1/synopsis_pc" "$2/tests/dat12/synopsis.c" $(pkg-config --cflags --libs dat)' sh "$tmp" "$src" \
    >"$tmp/cc12.log" 2>&1 || { cat "$tmp/cc12.log"; bad "cc with pkg-config dat"; }
clean ldd "$tmp/synopsis_pc" >"$tmp/ldd12"
has "the DAT 1.2 program loads the prefix's libdat.so.1" "$tmp/ldd12" "libdat.so.1 => $prefix/$libdir/libdat.so.1"
has "and through it the prefix's libdat2.so.2" "$tmp/ldd12" "libdat2.so.2 => $prefix/$libdir/libdat2.so.2"
clean "$tmp/synopsis_pc" ofi-tcp >"$tmp/run12" 2>&1
has "the DAT 1.2 program's calls on ofi-tcp are as the pages say" "$tmp/run12" "^synopsis: all [0-9]+ calls as the pages say$"
# And one built with find_package(dat2).
clean cmake -S "$src/examples" -B "$tmp/hello_cmake" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/cmake.log" 2>&1 \
    && clean cmake --build "$tmp/hello_cmake" >>"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; bad "find_package(dat2) build"; }
clean "$tmp/hello_cmake/hello_dat" >"$tmp/run" 2>&1
has "the find_package program opens ofi-tcp" "$tmp/run" "^ofi-tcp: adapter ofi-tcp"
# Installed, it keeps the prefix's libdat2 (not the system's, OFED's).
clean cmake --install "$tmp/hello_cmake" --prefix "$tmp/consumer" >>"$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log"; bad "installing the find_package program"; }
clean ldd "$tmp/consumer/bin/hello_dat" >"$tmp/ldd_consumer"
has "the installed find_package program loads the prefix's libdat2.so.2" "$tmp/ldd_consumer" \
    "libdat2.so.2 => $prefix/$libdir/libdat2.so.2"

# The installed datinfo: healthy, reading the installed dat.conf first.
clean "$prefix/bin/datinfo" -l >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] && ok "installed datinfo exits 0" || { bad "installed datinfo exits $rc"; cat "$tmp/err"; }
has "installed datinfo: ofi-tcp first and ok" "$tmp/out" "^ofi-tcp +libdat2_ofi.so +\"provider=tcp address=127.0.0.1\" +ok$"
clean "$prefix/bin/datinfo" --json >"$tmp/json" 2>/dev/null
python3 - "$tmp/json" "$prefix" <<'PY' && ok "installed datinfo reads <prefix>/etc/dat2/dat.conf first, the plugin from <libdir>/dat2" || bad "installed datinfo --json"
import json, sys
d, prefix = json.load(open(sys.argv[1])), sys.argv[2]
assert d["conf_files"][0]["path"] == prefix + "/etc/dat2/dat.conf", d["conf_files"]
tcp = [e for e in d["entries"] if e["ia_name"] == "ofi-tcp"][0]
assert tcp["library_path"].startswith(prefix + "/") and "/dat2/libdat2_ofi.so" in tcp["library_path"], tcp
PY
# The installed datperf, a quick run.
clean timeout 120 "$prefix/bin/datperf" --sizes 1 -n 10 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] && ok "installed datperf --sizes 1 -n 10 exits 0" || { bad "installed datperf exits $rc"; cat "$tmp/err"; }
has "installed datperf measured size 1" "$tmp/out" "^ +1 +10 +[0-9.]+ "

# A moved tree still works: nothing in it depends on the configured prefix.
mv "$prefix" "$tmp/moved"
clean "$tmp/moved/bin/datinfo" -l >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] && has "a moved tree: datinfo finds its dat.conf and plugins" "$tmp/out" "^ofi-tcp .* ok$" \
    || { bad "a moved tree: datinfo exits $rc"; cat "$tmp/err"; }
echo "install test: $(( ($(date +%s%N) - start) / 1000000 )) ms"
exit $fail
