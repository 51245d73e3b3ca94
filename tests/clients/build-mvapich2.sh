#!/bin/bash
# Builds MVAPICH2 1.9 (ch3:mrail, udapl, DAT 2.0), the OSU micro-benchmarks it
# carries and a few of its own test programs, against our headers and our
# libdat2, once per machine: the result is cached outside the clone, in
#
#   ${DAT2_CLIENT_CACHE:-/var/cache/dat2-clients}/mvapich2-1.9-<key>/
#
# where <key> hashes the tarball, the patch, this script (the build steps and
# the list of test programs below) and our DAT 2.0 headers (it is compiled
# against them). A prefix holding `.complete` is reused; anything else there
# (an interrupted build) is removed and built again. The binaries load
# libdat2.so.2 through the dynamic loader: at run time LD_LIBRARY_PATH picks
# our build's (the cache does not depend on which build linked it).
#
#   build-mvapich2.sh <lib dir holding libdat2.so>    prints the prefix last
#   build-mvapich2.sh --key                            prints the key only
#
# Sources: ${DAT2_CLIENTS_SRC:-<clone>/../shared/clients} (its README.md says
# how they were built here first). DAT2_CLIENT_JOBS (default 2) make jobs.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
src=${DAT2_CLIENTS_SRC:-$top/../shared/clients}
cache=${DAT2_CLIENT_CACHE:-/var/cache/dat2-clients}
jobs=${DAT2_CLIENT_JOBS:-2}
tarball=$src/mvapich2-1.9.tar.gz
patch=$src/mvapich2-1.9-gcc12-glibc236.patch
# MVAPICH2's own test programs (test/mpi/<dir>/<name>) to build; which of
# them run, and with how many ranks, is run-mvapich2.sh's choice.
test_programs=(pt2pt/sendrecv1 pt2pt/sendrecv3 pt2pt/pingping pt2pt/anyall pt2pt/sendall
    pt2pt/probe-unexp coll/allred coll/bcasttest coll/alltoall1 coll/reduce
    rma/putfence1 rma/getfence1)

tool=build-mvapich2
die() { echo "$tool: $*" >&2; exit 1; }
. "$here/client-cache.sh"
[ -r "$tarball" ] || die "no $tarball (set DAT2_CLIENTS_SRC to the directory holding it)"
[ -r "$patch" ] || die "no $patch"

key=$( (cd "$top" && sha256sum include/dat2/*.h) | sed 's/  include/ include/'
       sha256sum "$tarball" "$patch" "${BASH_SOURCE[0]}" "$here/client-cache.sh" | awk '{ print $1 }')
key=$(sha256sum <<<"$key" | cut -c1-16)
if [ "${1:-}" = --key ]; then echo "$key"; exit 0; fi

libdir=$(cd "${1:?usage: build-mvapich2.sh <lib dir holding libdat2.so>}" && pwd)
[ -e "$libdir/libdat2.so" ] || die "$libdir/libdat2.so missing (build the project first)"
client_cache_open mvapich2-1.9 "$key" 3600

step extract tar -xzf "$tarball" -C "$work"
cd "$work/mvapich2-1.9"
step patch patch -p1 -i "$patch"
# Today's automake warns about what 1.12 did not, and -Werror makes those fatal.
step no-werror sed -i -E '/AM_INIT_AUTOMAKE/ s/ -Werror//' \
    $(grep -rl --include=configure.ac AM_INIT_AUTOMAKE .)
# autogen runs perl scripts that `require` files from the current directory.
step autogen env PERL_USE_UNSAFE_INC=1 PERL5LIB=. ./autogen.sh
# --disable-registration-cache: without it MPI_Init fails ("Error initializing
# MVAPICH2 malloc library"). -fcommon: hydra defines its globals in several
# files, which gcc 10 and later refuse to link (-fno-common by default). The
# DAT headers are <include>/dat2/*.h, hence our include/ and not include/dat2.
step configure ./configure --prefix="$prefix" \
    --with-device=ch3:mrail --with-rdma=udapl --with-dapl-version=2.0 \
    --with-dapl-include="$top/include" --with-dapl-libpath="$libdir" \
    --disable-f77 --disable-fc --disable-cxx --disable-romio \
    --disable-registration-cache ac_cv_header_openacc_h=no CFLAGS=-fcommon
step make make -j"$jobs"
step install make install

# Its own test programs (test/mpi, configured by the top-level configure):
# the mtest utility library, then each program, installed as
# <prefix>/tests/<dir>/<name>.
step tests-util make -C test/mpi/util
for t in "${test_programs[@]}"; do
    step "test $t" make -C "test/mpi/${t%/*}" "${t#*/}"
    mkdir -p "$prefix/tests/${t%/*}"
    cp "test/mpi/$t" "$prefix/tests/$t"
done

{
    echo "MVAPICH2 1.9, built $(date -u +%FT%TZ) in $(( $(date +%s) - start )) s on $(hostname) ($(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end)"
    echo -n "$steps"
    echo "key $key"
    sha256sum "$tarball" "$patch"
    echo "linked against $libdir/libdat2.so, headers $top/include/dat2"
    gcc --version | head -1
} >"$prefix/build-info.txt"
cp "$log" "$prefix/build.log"
touch "$prefix/.complete"
echo "build-mvapich2: built in $(( $(date +%s) - start )) s"
echo "$prefix"
