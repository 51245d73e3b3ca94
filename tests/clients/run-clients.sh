#!/bin/bash
# MPI over our uDAPL: builds MVAPICH2 1.9 once per machine (or finds it in the
# cache, build-mvapich2.sh), then runs each check of mvapich2.sh and ends with
# one line "mpi clients: N passed, N failed, N skipped".
#
#   run-clients.sh <build lib dir> [check...]
#
# Without checks, runs the list below. DAT2_CLIENT_BUILD_TIMEOUT (seconds,
# default 3600) limits a cold build, DAT2_CLIENT_RUN_BUDGET (seconds, default
# 1200) the checks together: those left when it is spent fail unrun. Logs go
# to DAT2_CLIENT_LOGS (default a scratch directory, named at the end).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
libdir=$(cd "${1:?usage: run-clients.sh <build lib dir> [check...]}" && pwd) || exit 1
shift
logs=${DAT2_CLIENT_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/mpi-clients.XXXXXX")}
mkdir -p "$logs"

# Point-to-point and a collective with 2 ranks, collectives and the test
# programs again with 4 (every rank then has three peers, and rank pairs
# connect in both directions at once), then the two-host pair.
# The test programs (MVAPICH2's test/mpi, each judged by " No Errors"; with
# the rank counts its testlist allows):
#   pt2pt/sendrecv1    blocking send/recv over many communicators, datatypes
#                      and counts: eager and rendezvous sizes
#   pt2pt/sendrecv3    nonblocking sends that fill the outgoing buffers
#                      (100 B to 100 kB), then the receives; 2 ranks only
#                      (with more, rank 1 sends to rank 2, which never receives)
#   pt2pt/anyall       MPI_ANY_SOURCE receives and Waitall
#   pt2pt/sendall      every rank sends to every other
#   pt2pt/probe-unexp  MPI_Probe while unexpected messages arrive
#   coll/allred        allreduce, every op and type
#   coll/bcasttest     bcast from every root
#   coll/alltoall1     alltoall
#   rma/putfence1, rma/getfence1  one-sided put and get with fences
# Built but not in the list: pt2pt/pingping (windows of messages both ways,
# over half a million messages: minutes under load) and coll/reduce; run
# them by name.
tests="pt2pt/sendrecv1 pt2pt/anyall pt2pt/sendall pt2pt/probe-unexp
       coll/allred coll/bcasttest coll/alltoall1 rma/putfence1 rma/getfence1"
checks=(local2:wrong-ia local2:osu_latency local2:osu_bw local2:osu_bibw local2:osu_allreduce)
for t in $tests pt2pt/sendrecv3; do checks+=("local2:$t"); done
checks+=(local4:osu_allreduce)
for t in $tests; do checks+=("local4:$t"); done
checks+=(netns2:osu_latency netns2:osu_bw)
[ $# -gt 0 ] && checks=("$@")

passed=0 failed=0 skipped=0
start=$(date +%s)
t=$(date +%s)
if ! prefix=$(timeout -k 10 "${DAT2_CLIENT_BUILD_TIMEOUT:-3600}" bash "$here/build-mvapich2.sh" "$libdir" 2>"$logs/build.err" | tee "$logs/build.out" | tail -n 1) ||
    [ ! -e "$prefix/.complete" ]; then
    echo "[mpi] FAIL: MVAPICH2 build (after $(( $(date +%s) - t )) s; timeout ${DAT2_CLIENT_BUILD_TIMEOUT:-3600} s)"
    cat "$logs/build.out" "$logs/build.err" | tail -n 40 | sed 's/^/[mpi]   /'
    echo "mpi clients: 0 passed, 1 failed, 0 skipped (logs: $logs)"
    exit 1
fi
echo "[mpi] MVAPICH2 $(grep -q '^build-mvapich2: cached' "$logs/build.out" && echo cached || echo built) in $prefix ($(( $(date +%s) - t )) s)"

budget=${DAT2_CLIENT_RUN_BUDGET:-1200}
checks_start=$(date +%s)
for c in "${checks[@]}"; do
    log=$logs/${c//[:\/]/-}.log
    t=$(date +%s)
    if [ $((t - checks_start)) -ge "$budget" ]; then
        echo "FAIL: $c not run: the checks' budget of $budget s is spent" >"$log"
        rc=1
    else
        bash "$here/mvapich2.sh" "$libdir" "$prefix" "$c" >"$log" 2>&1
        rc=$?
    fi
    s=$(( $(date +%s) - t ))
    case $rc in
    0) passed=$((passed + 1)); echo "[mpi] $(grep -m1 '^PASS:' "$log" | cut -c1-160) ($s s)" ;;
    77) skipped=$((skipped + 1)); echo "[mpi] SKIP: $c: $(grep -m1 '^SKIP:' "$log" | cut -c7-) ($s s)" ;;
    *) failed=$((failed + 1)); echo "[mpi] FAIL: $c ($s s), exit $rc:"; tail -n 45 "$log" | sed 's/^/[mpi]   /' ;;
    esac
done
echo "[mpi] checks took $(( $(date +%s) - start )) s in all"
echo "mpi clients: $passed passed, $failed failed, $skipped skipped (logs: $logs)"
[ "$failed" = 0 ]
