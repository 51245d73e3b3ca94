#!/bin/bash
# Open MPI 1.6.5 (../shared/clients), its udapl BTL unmodified, built against
# our include/dat and libdat.so.1 (a DAT 1.2 consumer), outside the
# repository; then ring_c, osu_latency and osu_bw over an IA through it.
#
#   openmpi-1.6.5-udapl.sh <cmake build dir> [ia_name] [work dir]
#
# Needs autoconf2.69, automake, libtool, libltdl-dev and flex
# (scripts/setup-deps.sh). Builds once per tarball in
# <work dir>/openmpi-1.6.5-<sha256 prefix> (default /work/cache); prints
# the commands it runs and the programs' output.
set -euo pipefail
build=$(cd "$1" && pwd) ia=${2:-ofi-tcp} work=${3:-/work/cache}
top=$(cd "$(dirname "$0")/../.." && pwd)
clients=${DAT2_CLIENTS:-$top/../shared/clients}
[ -d "$clients" ] || clients=/work/shared/clients
tarball=$clients/openmpi-1.6.5.tar.gz
sha=$(sha256sum "$tarball" | cut -c1-12)
dir=$work/openmpi-1.6.5-$sha
dat=$dir/dat            # our install: include/dat, lib/libdat.so.1, plugins
mpi=$dir/install
run() { echo "+ $*" >&2; "$@"; }

run cmake --install "$build" --prefix "$dat" >/dev/null
cat >"$dat/dat.conf" <<CONF
$ia u2.0 nonthreadsafe default $dat/lib/libdat2_ofi.so dat2.2.0 "provider=tcp address=127.0.0.1" ""
CONF
if [ ! -x "$mpi/bin/mpicc" ]; then
    mkdir -p "$dir/ac269"
    for t in autoconf autoheader autom4te autoreconf; do ln -sf "/usr/bin/${t}2.69" "$dir/ac269/$t"; done
    [ -d "$dir/openmpi-1.6.5" ] || run tar -xzf "$tarball" -C "$dir"
    (cd "$dir/openmpi-1.6.5" && [ -x configure ] || PATH=$dir/ac269:$PATH run ./autogen.sh >"$dir/autogen.log" 2>&1)
    mkdir -p "$dir/build"
    (cd "$dir/build" && run ../openmpi-1.6.5/configure --prefix="$mpi" --with-udapl="$dat" \
        --without-memory-manager --disable-dlopen --disable-vt --disable-mpi-f77 --disable-mpi-f90 \
        --disable-mpi-cxx --disable-io-romio CFLAGS=-fcommon >"$dir/configure.log" 2>&1)
    # libmpi needs libdat.so.1 (a DT_NEEDED without a path) when its tools link.
    (cd "$dir/build" && export LD_LIBRARY_PATH=$dat/lib && run make -j"$(nproc)" >"$dir/make.log" 2>&1 &&
        run make install >"$dir/install.log" 2>&1)
fi
tar -xzf "$clients/mvapich2-1.9.tar.gz" -C "$dir" mvapich2-1.9/osu_benchmarks/osu_latency.c mvapich2-1.9/osu_benchmarks/osu_bw.c
for p in "$dir/openmpi-1.6.5/examples/ring_c.c" "$dir"/mvapich2-1.9/osu_benchmarks/osu_{latency,bw}.c; do
    run "$mpi/bin/mpicc" -O2 "$p" -o "$dir/$(basename "$p" .c)"
done
export LD_LIBRARY_PATH=$mpi/lib:$dat/lib DAT_OVERRIDE=$dat/dat.conf
mpirun=("$mpi/bin/mpirun" -np 2 --mca btl udapl,self --mca btl_udapl_if_include "$ia")
ldd "$mpi/lib/libmpi.so" | grep -E "libdat" >&2   # the BTL is in libmpi (--disable-dlopen)
for prog in ring_c osu_latency osu_bw; do
    run "${mpirun[@]}" "$dir/$prog"
done
