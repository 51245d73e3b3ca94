#!/bin/bash
# The Debian packages, built from the tree (dpkg-buildpackage on a copy of
# the tracked files) and judged: each package's file list against
# tests/packaging/<package>.contents, the relations with OFED's packages,
# lintian (errors and warnings fail), and a real install and removal on
# this machine's own system seen through an overlay in a private mount
# namespace (nothing reaches the real root): libdat2-2 diverts libdapl2's
# libdat2.so.2, our registry then serves ofi-tcp and still loads OFED's
# providers from /etc/dat.conf, a program builds with pkg-config, and
# removing the packages gives OFED's library back.
# Takes about 5 minutes on two idle cores, 9 on busy ones (the build):
# run-tests.sh runs it as its own stage.   deb_package.sh SOURCE_DIR
set -u
src=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
for tool in dpkg-buildpackage dh; do
    command -v $tool >/dev/null || { echo "FAIL: $tool missing (scripts/setup-deps.sh installs it)"; exit 1; }
done
version=$(sed -nE 's/^project\(dat2 VERSION ([0-9.]+).*/\1/p' "$src/CMakeLists.txt")
arch=$(dpkg --print-architecture) multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
[ "$(cd "$src" && dpkg-parsechangelog -SVersion)" = "$version" ] && ok "debian/changelog carries project()'s version $version" \
    || bad "debian/changelog's version is not project()'s $version"

mkdir "$tmp/src"
(cd "$src" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$tmp/src"
start=$(date +%s)
(cd "$tmp/src" && DEB_BUILD_OPTIONS="parallel=$(nproc) nocheck" dpkg-buildpackage -b -us -uc) >"$tmp/build.log" 2>&1 \
    || { tail -40 "$tmp/build.log"; echo "FAIL: dpkg-buildpackage"; exit 1; }
echo "package build: $(( $(date +%s) - start )) s"

for pkg in libdat2-2 libdat2-dev dat2-tools libdat1 libdat-dev; do
    deb=$tmp/${pkg}_${version}_${arch}.deb
    [ -f "$deb" ] || { bad "$pkg: no $deb"; continue; }
    dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|; s|/$||' | grep -v '^$' | sort >"$tmp/$pkg.got"
    sed -e "s|@MULTIARCH@|$multiarch|g" "$src/tests/packaging/$pkg.contents" | sort >"$tmp/$pkg.want"
    if diff -u "$tmp/$pkg.want" "$tmp/$pkg.got" >"$tmp/$pkg.diff"; then ok "$pkg: the expected files"
    else bad "$pkg: files differ from tests/packaging/$pkg.contents:"; cat "$tmp/$pkg.diff"; fi
done
dev=$tmp/libdat2-dev_${version}_${arch}.deb
[ "$(dpkg-deb -f "$dev" Conflicts)" = libdapl-dev ] && [ "$(dpkg-deb -f "$dev" Replaces)" = libdapl-dev ] \
    && ok "libdat2-dev conflicts with and replaces libdapl-dev" || bad "libdat2-dev relations"
dpkg-deb -e "$tmp/libdat2-2_${version}_${arch}.deb" "$tmp/ctl"
grep -q "libdir=/usr/lib/$multiarch$" "$tmp/ctl/preinst" && grep -q "dpkg-divert --package libdat2-2 --add" "$tmp/ctl/preinst" \
    && ok "libdat2-2's preinst diverts in /usr/lib/$multiarch" || bad "libdat2-2 preinst"
grep -q "^/etc/dat2/dat.conf$" "$tmp/ctl/conffiles" && ok "/etc/dat2/dat.conf is a conffile" || bad "conffiles"
dpkg-deb --fsys-tarfile "$tmp/libdat2-2_${version}_${arch}.deb" | tar -xOf - ./etc/dat2/dat.conf >"$tmp/dat.conf"
grep -vE '^\s*(#|$)' "$tmp/dat.conf" | head -1 | grep -q '^ofi-tcp ' && ok "the packaged dat.conf starts with ofi-tcp" \
    || { bad "the packaged dat.conf:"; cat "$tmp/dat.conf"; }

if command -v lintian >/dev/null; then
    if lintian --fail-on error,warning "$tmp"/*.changes >"$tmp/lintian" 2>&1; then
        ok "lintian: no error or warning"; sed 's/^/    /' "$tmp/lintian"
    else bad "lintian:"; cat "$tmp/lintian"; fi
else
    echo "skip: lintian not installed"
fi

# Install, use and remove, in an overlay of / in a private mount namespace.
cat >"$tmp/in_overlay.sh" <<'INNER'
set -u
w=$1 version=$2 arch=$3 multiarch=$4
mkdir -p "$w/upper" "$w/work" "$w/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$w/upper,workdir=$w/work" "$w/root" || exit 77
mount --bind /proc "$w/root/proc" && mount --bind /dev "$w/root/dev" && mount -t tmpfs tmpfs "$w/root/tmp" || exit 77
cp "$w"/../*.deb "$w/../check.sh" "$w/../synopsis.c" "$w/root/tmp/"
chroot "$w/root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin bash /tmp/check.sh "$version" "$arch" "$multiarch"
INNER
cat >"$tmp/check.sh" <<'CHECK'
set -u
version=$1 arch=$2 multiarch=$3
lib=/usr/lib/$multiarch
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
ofed_before=$(md5sum "$lib/libdat2.so.2" 2>/dev/null | cut -d' ' -f1)
dpkg -r libdapl-dev >/dev/null 2>&1   # libdat2-dev replaces it
dpkg -i /tmp/libdat2-2_${version}_${arch}.deb /tmp/libdat2-dev_${version}_${arch}.deb /tmp/dat2-tools_${version}_${arch}.deb \
    /tmp/libdat1_${version}_${arch}.deb /tmp/libdat-dev_${version}_${arch}.deb >/tmp/dpkg.log 2>&1 \
    && ok "dpkg -i of the five packages" || { bad "dpkg -i:"; cat /tmp/dpkg.log; }
if [ -n "$ofed_before" ]; then
    dpkg-divert --list | grep -q "diversion of $lib/libdat2.so.2.0.0 to $lib/libdat2-ofed/libdat2.so.2.0.0 by libdat2-2" \
        && ok "libdapl2's libdat2.so.2.0.0 is diverted" || bad "no diversion"
    [ "$(md5sum "$lib/libdat2-ofed/libdat2.so.2" | cut -d' ' -f1)" = "$ofed_before" ] && ok "OFED's library is kept in libdat2-ofed/" || bad "OFED's library not kept"
    dpkg -s libdapl2 2>/dev/null | grep -q "^Status: install ok installed" && ok "libdapl2 stays installed" || bad "libdapl2 removed"
fi
datinfo --version >/tmp/v 2>&1
grep -q "^libdat2 $lib/libdat2.so.$version: dat2's$" /tmp/v && ok "datinfo runs with our libdat2" || { bad "datinfo --version:"; cat /tmp/v; }
datinfo -l >/tmp/l 2>/dev/null; rc=$?
[ $rc = 0 ] && ok "datinfo exits 0: the default IA opens" || bad "datinfo exits $rc"
head -1 /tmp/l | grep -qE '^ofi-tcp .* ok$' && ok "ofi-tcp is first and opens" || { bad "datinfo -l:"; cat /tmp/l; }
if [ -e /etc/dat.conf ] && grep -q '^ofa-v2-ib0 ' /etc/dat.conf; then
    datinfo --no-open ofa-v2-ib0 >/tmp/o 2>&1
    grep -q "library:  loads (.*libdaplofa.so.2)" /tmp/o && ok "OFED's entries are still read and their providers load under ours" \
        || { bad "OFED's provider under ours:"; cat /tmp/o; }
fi
[ "$(pkg-config --modversion dat2)" = "$version" ] && ok "pkg-config dat2 is $version" || bad "pkg-config"
printf '#include <dat2/udat.h>\n#include <stdio.h>\nint main(void){DAT_IA_HANDLE ia; DAT_EVD_HANDLE e = DAT_HANDLE_NULL; DAT_RETURN r = dat_ia_open("ofi-tcp", 8, &e, &ia); printf("open %%s\\n", r == DAT_SUCCESS ? "ok" : "failed"); return r != DAT_SUCCESS;}\n' >/tmp/p.c
cc -o /tmp/p /tmp/p.c $(pkg-config --cflags --libs dat2) && /tmp/p | grep -q "open ok" \
    && ok "a program built with pkg-config opens ofi-tcp" || bad "pkg-config program"
# A DAT 1.2 program (the seed pages' synopses) as its pages build it, and
# with pkg-config dat: libdat.so.1 over the packaged libdat2 and ofi-tcp.
cc -o /tmp/s /tmp/synopsis.c -ldat && /tmp/s ofi-tcp | grep -qE "^synopsis: all [0-9]+ calls as the pages say$" \
    && ok "a DAT 1.2 program built with cc ... -ldat runs on ofi-tcp" || { bad "DAT 1.2 program:"; /tmp/s ofi-tcp; }
# (pkg-config ends its output with a space.)
pkg-config --libs dat | grep -qxE -- '-ldat *' && ok "pkg-config --libs dat is -ldat" || bad "pkg-config dat: '$(pkg-config --libs dat)'"
man -w dat.conf 2>/dev/null | grep -q "man5/dat.conf.5" && ok "dat.conf(5) is dat2's" || true
dpkg -P libdat-dev libdat1 dat2-tools libdat2-dev libdat2-2 >/tmp/dpkg.log 2>&1 && ok "dpkg -P of the five packages" || { bad "dpkg -P:"; cat /tmp/dpkg.log; }
if [ -n "$ofed_before" ]; then
    [ "$(md5sum "$lib/libdat2.so.2" | cut -d' ' -f1)" = "$ofed_before" ] && ok "OFED's libdat2.so.2 is back" || bad "OFED's library not restored"
    dpkg-divert --list | grep -q libdat2-2 && bad "diversions left behind" || ok "no diversion left"
fi
exit $fail
CHECK
cp "$src/tests/dat12/synopsis.c" "$tmp/"
mkdir "$tmp/ovl"
unshare --mount --propagation private bash "$tmp/in_overlay.sh" "$tmp/ovl" "$version" "$arch" "$multiarch"
case $? in
0) ;;
77) echo "skip: install check (no overlay mount here: needs root and overlayfs)" ;;
*) fail=1 ;;
esac
exit $fail
