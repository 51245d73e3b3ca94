#!/bin/bash
# Builds Open MPI 1.6.5 (../shared/clients; the last release with a udapl
# BTL, written to DAT 1.2) with that BTL unmodified against our include/dat
# and libdat.so.1, plus ring_c and the OSU osu_latency and osu_bw (Open MPI
# carries no OSU benchmarks: their sources come from the MVAPICH2 1.9
# tarball beside it), once per machine: the result is cached outside the
# clone, in
#
#   ${DAT2_CLIENT_CACHE:-/var/cache/dat2-clients}/openmpi-1.6.5-<key>/
#
# where <key> hashes the Open MPI and MVAPICH2 tarballs, this script (the
# build steps) and our DAT 1.2 headers (the BTL is compiled against them),
# as tests/clients/build-mvapich2.sh does for MVAPICH2. A prefix holding
# `.complete` is reused; anything else there (an interrupted build) is
# removed and built again. libmpi loads libdat.so.1 through the dynamic
# loader (DT_NEEDED without a path): at run time LD_LIBRARY_PATH picks our
# build's, so the cache does not depend on which build of ours linked it.
#
#   build-openmpi.sh <lib dir holding libdat.so>   prints the prefix last
#   build-openmpi.sh --key                          prints the key only
#
# Sources: ${DAT2_CLIENTS_SRC:-<clone>/../shared/clients}. DAT2_CLIENT_JOBS
# (default 2) make jobs. Needs autoconf2.69, automake, libtool, libltdl-dev
# and flex (scripts/setup-deps.sh).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
src=${DAT2_CLIENTS_SRC:-$top/../shared/clients}
[ -d "$src" ] || src=/work/shared/clients
cache=${DAT2_CLIENT_CACHE:-/var/cache/dat2-clients}
jobs=${DAT2_CLIENT_JOBS:-2}
tarball=$src/openmpi-1.6.5.tar.gz
osu_tarball=$src/mvapich2-1.9.tar.gz

tool=build-openmpi
die() { echo "$tool: $*" >&2; exit 1; }
. "$here/client-cache.sh"
[ -r "$tarball" ] || die "no $tarball (set DAT2_CLIENTS_SRC to the directory holding it)"
[ -r "$osu_tarball" ] || die "no $osu_tarball (the OSU benchmarks' sources)"

key=$( (cd "$top" && sha256sum include/dat/*.h) | sed 's/  include/ include/'
       sha256sum "$tarball" "$osu_tarball" "${BASH_SOURCE[0]}" "$here/client-cache.sh" | awk '{ print $1 }')
key=$(sha256sum <<<"$key" | cut -c1-16)
if [ "${1:-}" = --key ]; then echo "$key"; exit 0; fi

libdir=$(cd "${1:?usage: build-openmpi.sh <lib dir holding libdat.so>}" && pwd)
[ -e "$libdir/libdat.so" ] || die "$libdir/libdat.so missing (build the project first)"
client_cache_open openmpi-1.6.5 "$key" 7200

# What --with-udapl=DIR wants: DIR/include/dat/udat.h and DIR/lib/libdat.so.
# Kept in the prefix: Open MPI's wrapper data may name it. libdat2.so.2 is
# there for the linker to resolve libdat.so.1's own DT_NEEDED.
dat=$prefix/dat
mkdir -p "$dat/include" "$dat/lib"
cp -r "$top/include/dat" "$dat/include/"
cp -P "$libdir"/libdat.so* "$libdir"/libdat2.so* "$dat/lib/"

step extract tar -xzf "$tarball" -C "$work"
tar -xzf "$osu_tarball" -C "$work" mvapich2-1.9/osu_benchmarks/osu_latency.c mvapich2-1.9/osu_benchmarks/osu_bw.c
cd "$work/openmpi-1.6.5"
# A git archive has no configure; Open MPI 1.6.5's autogen wants autoconf
# 2.69 (Debian's default is newer), under its plain names.
mkdir -p "$work/ac269"
for t in autoconf autoheader autom4te autoreconf; do ln -sf "/usr/bin/${t}2.69" "$work/ac269/$t"; done
step autogen env PATH="$work/ac269:$PATH" ./autogen.sh
# --with-udapl: its m4 skips udapl on Linux unless told where. -fcommon:
# 1.6.5 defines globals in several files, which gcc 10 and later refuse to
# link. --disable-dlopen puts the BTLs into libmpi (no plugins to find).
# The components left out are those for fabrics and batch systems this
# test never uses; they are most of the build's time.
no_build=btl-openib,btl-ofud,btl-sctp,btl-mx,btl-elan,btl-portals,btl-wv,btl-template
no_build+=,mtl,pml-cm,pml-csum,pml-crcpw,pml-v,pml-example,pml-bfo,coll-fca,coll-demo,coll-sm2,coll-hierarch
no_build+=,plm-slurm,plm-tm,plm-lsf,plm-alps,plm-ccp,plm-submit,plm-process
no_build+=,ess-slurm,ess-slurmd,ess-tm,ess-lsf,ess-alps,ess-cnos,ess-portals_utcp,ess-pmi
no_build+=,notifier-command,notifier-ftb,notifier-smtp,notifier-twitter
mkdir "$work/build"
cd "$work/build"
step configure ../openmpi-1.6.5/configure --prefix="$prefix" --with-udapl="$dat" \
    --without-memory-manager --disable-dlopen --disable-vt --disable-mpi-f77 --disable-mpi-f90 \
    --disable-mpi-cxx --disable-io-romio --enable-mca-no-build="$no_build" CFLAGS=-fcommon
grep -q '^checking for dat/udat.h... yes' "$log" || die "configure did not find our dat/udat.h (log: $log)"
# libmpi needs libdat.so.1 when Open MPI's own tools link against it.
step make env LD_LIBRARY_PATH="$dat/lib" make -j"$jobs"
step install env LD_LIBRARY_PATH="$dat/lib" make install
[ -e "$prefix/lib/libmpi.so" ] && readelf -d "$prefix/lib/libmpi.so" | grep -q 'NEEDED.*\[libdat\.so\.1\]' ||
    die "libmpi does not need libdat.so.1: the udapl BTL was not built (log: $log)"

mkdir -p "$prefix/tests"
for p in "$work/openmpi-1.6.5/examples/ring_c.c" "$work"/mvapich2-1.9/osu_benchmarks/osu_{latency,bw}.c; do
    step "$(basename "$p" .c)" env LD_LIBRARY_PATH="$dat/lib" "$prefix/bin/mpicc" -O2 "$p" \
        -o "$prefix/tests/$(basename "$p" .c)"
done

{
    echo "Open MPI 1.6.5, built $(date -u +%FT%TZ) in $(( $(date +%s) - start )) s on $(hostname) ($(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end)"
    echo -n "$steps"
    echo "key $key"
    sha256sum "$tarball" "$osu_tarball"
    echo "linked against $libdir/libdat.so, headers $top/include/dat"
    gcc --version | head -1
} >"$prefix/build-info.txt"
cp "$log" "$prefix/build.log"
touch "$prefix/.complete"
echo "build-openmpi: built in $(( $(date +%s) - start )) s"
echo "$prefix"
