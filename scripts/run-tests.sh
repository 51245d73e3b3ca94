#!/bin/bash
# Every test on a fresh Debian 12 machine: install what is needed, build each
# configuration once (plain, ASan+UBSan, TSan, libFuzzer), run the suites,
# and print one closing line "N passed, N failed".
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=${DAT2_TEST_OUT:-$top/build-tests}
bash "$top/scripts/setup-deps.sh" || exit 1
mkdir -p "$out"
passed=0 failed=0 skips=0
declare -a failures=()

# ctest_in DIR LABEL [ctest args]: runs a suite, adds its counts.
ctest_in() {
  local dir=$1 label=$2; shift 2
  local log="$out/$label.ctest.log" t0=$SECONDS
  (cd "$dir" && ctest -j"${jobs:-$(nproc)}" --output-on-failure --timeout 600 "$@") >"$log" 2>&1
  local summary
  summary=$(grep -E "tests passed, [0-9]+ tests failed out of" "$log" | tail -1)
  local total fail
  total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$summary")
  fail=$(sed -E 's/.* ([0-9]+) tests failed.*/\1/' <<<"$summary")
  if [ -z "$summary" ]; then
    echo "[$label] no test ran; see $log"; tail -20 "$log"; failed=$((failed + 1)); failures+=("$label: no tests")
    return
  fi
  local skipped
  skipped=$(grep -cE "^\s+[0-9]+ - .*\(Skipped\)" "$log")
  passed=$((passed + total - fail - skipped)); failed=$((failed + fail)); skips=$((skips + skipped))
  echo "[$label] $summary ($skipped skipped; $((SECONDS - t0)) s)"
  if [ "$fail" != 0 ]; then
    grep -E "^\s+[0-9]+ - " "$log" | grep -vE "\((Disabled|Skipped)\)" | sed "s/^/[$label] FAILED /"
    sed -n '/The following tests FAILED/q;/\*\*\*Failed\|Failure\|FAIL:/,+15p' "$log" | head -80
    failures+=("$label")
  fi
}

build() { # dir label cmake-args...
  local dir=$1 label=$2 t0=$SECONDS; shift 2
  echo "[$label] building in $dir"
  if ! bash "$top/scripts/build.sh" "$dir" "$@" >"$out/$label.build.log" 2>&1; then
    echo "[$label] BUILD FAILED"; tail -30 "$out/$label.build.log"; failed=$((failed + 1)); failures+=("$label: build"); return 1
  fi
  grep -E "warning" "$out/$label.build.log" | head -20
  echo "[$label] built in $((SECONDS - t0)) s"
  return 0
}

start=$(date +%s)
# The conformance suites run over ofi-tcp, and over the RDM transport
# (conformance_*_ofi-shm, _ofi-rxm) in the plain build, _ofi-shm in ASan
# (tests/conformance/CMakeLists.txt says why not more).
# Three tests at once on two cores: the conformance suites wait on the
# network and on timers most of the time, and the peer programs, which
# share fixed ports, run one at a time beside them.
build "$out/plain" plain && jobs=3 ctest_in "$out/plain" plain
# The Debian packages (5-9 minutes: dpkg-buildpackage builds the tree once
# more), their file lists, lintian, and an install and removal in an overlay
# of this machine's root. Its own stage: too long for the plain ctest run.
echo "[package] Debian packages: build, file lists, lintian, install and removal (tests/packaging/deb_package.sh)"
t0=$SECONDS
if bash "$top/tests/packaging/deb_package.sh" "$top" >"$out/package.log" 2>&1; then
  passed=$((passed + 1)); grep -E "^package build:" "$out/package.log" | sed 's/^/[package] /'
  echo "[package] passed in $((SECONDS - t0)) s"
else
  failed=$((failed + 1)); failures+=("package"); grep -E "^(FAIL|skip)" "$out/package.log" | head -40; tail -n 20 "$out/package.log"
fi

# MPI over our uDAPL (tests/clients/README.md): MVAPICH2 1.9, built once per
# machine into DAT2_CLIENT_CACHE (default /var/cache/dat2-clients), runs the
# OSU benchmarks and its own test programs over ofi-tcp with the plain
# build's libdat2; each check counts. A cold build takes longer than this
# whole run may (tests/clients/README.md): without the cached build the
# stage is skipped, saying how to build it (or DAT2_BUILD_CLIENTS=1 builds
# it here). The 4-rank test programs, minutes each, are left to
# run-clients.sh alone.
if [ -e "$out/plain/lib/libdat2.so" ]; then
  mv2_key=$(bash "$top/tests/clients/build-mvapich2.sh" --key 2>"$out/mpi-key.err")
  mv2_prefix=${DAT2_CLIENT_CACHE:-/var/cache/dat2-clients}/mvapich2-1.9-$mv2_key
  if [ -z "$mv2_key" ]; then
    echo "[mpi] SKIP: no MVAPICH2 sources: $(tail -n 1 "$out/mpi-key.err")"
    skips=$((skips + 1))
  elif [ ! -e "$mv2_prefix/.complete" ] && [ "${DAT2_BUILD_CLIENTS:-0}" != 1 ]; then
    echo "[mpi] SKIP: MVAPICH2 1.9 is not built in $mv2_prefix (a cold build takes ~53 min on 2 cores);" \
         "build it once with: bash tests/clients/build-mvapich2.sh $out/plain/lib (or DAT2_BUILD_CLIENTS=1 here)"
    skips=$((skips + 1))
  else
    echo "[mpi] MVAPICH2 1.9 over ofi-tcp, one host and two namespaces (tests/clients/run-clients.sh)"
    mpi_checks=(local2:wrong-ia local2:osu_latency local2:osu_bw local2:osu_bibw local2:osu_allreduce
                local2:pt2pt/sendrecv1 local2:pt2pt/sendrecv3 local2:pt2pt/anyall local2:pt2pt/sendall
                local2:pt2pt/probe-unexp local2:coll/allred local2:coll/bcasttest local2:coll/alltoall1
                local2:rma/putfence1 local2:rma/getfence1 local4:osu_allreduce
                netns2:osu_latency netns2:osu_bw)
    DAT2_CLIENT_LOGS="$out/mpi-clients" DAT2_CLIENT_RUN_BUDGET=${DAT2_CLIENT_RUN_BUDGET:-900} \
      bash "$top/tests/clients/run-clients.sh" "$out/plain/lib" "${mpi_checks[@]}" >"$out/mpi-clients.log" 2>&1
    grep -E "^\[mpi\] (MVAPICH2|FAIL|SKIP|checks)|^\[mpi\]   " "$out/mpi-clients.log" | head -150
    line=$(grep -E "^mpi clients: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped" "$out/mpi-clients.log" | tail -1)
    if [ -n "$line" ]; then
      echo "[mpi] ${line#mpi clients: }"
      read -r n f s < <(sed -E 's/^mpi clients: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped.*/\1 \2 \3/' <<<"$line")
      passed=$((passed + n)); failed=$((failed + f)); skips=$((skips + s))
      [ "$f" = 0 ] || failures+=("mpi-clients")
    else
      failed=$((failed + 1)); failures+=("mpi-clients: no summary"); tail -n 40 "$out/mpi-clients.log"
    fi
  fi
fi
# intercept_send=0 (ASan and TSan): the sanitizer checks a sendmsg buffer after the call returned; by
# then the peer IA in the same process has the data and the test may have
# freed the buffer (a false use-after-free; the data was sent intact).
build "$out/asan" asan -DDAT2_SANITIZE=address,undefined -DDAT2_PEER_TESTS=OFF \
  && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_send=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     LSAN_OPTIONS=suppressions=$top/tests/lsan.supp \
     jobs=3 ctest_in "$out/asan" asan-conformance -L conformance \
  && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_send=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     LSAN_OPTIONS=suppressions=$top/tests/lsan.supp \
     ctest_in "$out/asan" asan -LE conformance
build "$out/tsan" tsan -DDAT2_SANITIZE=thread -DDAT2_PEER_TESTS=OFF \
  && echo "[tsan] PeerDeathTest, DtoStoppedPeerTest and ForkTest run in plain and asan only: they fork a process after threads exist, which TSan cannot follow" \
  && TSAN_OPTIONS=halt_on_error=1:intercept_send=0:suppressions=$top/tests/tsan.supp \
     jobs=3 ctest_in "$out/tsan" tsan-conformance -L conformance -E "PeerDeathTest|DtoStoppedPeerTest|ForkTest" \
  && TSAN_OPTIONS=halt_on_error=1:intercept_send=0:suppressions=$top/tests/tsan.supp \
     ctest_in "$out/tsan" tsan -LE conformance -E "PeerDeathTest|DtoStoppedPeerTest|ForkTest"
build "$out/fuzz" fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DDAT2_BUILD_TESTS=OFF -DDAT2_BUILD_FUZZERS=ON -DDAT2_FUZZ_SECONDS="${DAT2_FUZZ_SECONDS:-30}" \
  && ctest_in "$out/fuzz" fuzz -V
grep -hE "stat::number_of_executed_units|Done [0-9]+ runs" "$out"/fuzz.ctest.log 2>/dev/null | sed 's/^/[fuzz] /' | head -4

# Real verbs: Soft-RoCE (rdma_rxe) in a qemu VM the harness boots; a VM that
# cannot boot fails the run (tests/vm/README.md).
echo "[vm] rxe0 smoke: perftest, rping, OFED dtest/dapltest (tests/vm/vm-smoke.sh)"
# --rw: the checkout may live under /tmp, which the guest has its own of.
if bash "$top/tests/vm/rxe-vm.sh" --rw "$top" -- bash "$top/tests/vm/vm-smoke.sh" >"$out/vm-smoke.log" 2>&1; then
  passed=$((passed + 1)); grep -E "^vm-smoke:" "$out/vm-smoke.log" | tail -1 | sed 's/^/[vm] /'
  grep -E "^rxe-vm: .* in all" "$out/vm-smoke.log" | tail -1 | sed 's/^/[vm] /'
else
  failed=$((failed + 1)); failures+=("vm-smoke"); tail -n 60 "$out/vm-smoke.log"
fi

# The verbs plugin on rxe0: the same conformance suites (DAT2_CONFORMANCE_IAS=verbs)
# and the peer programs, inside the VM, against the plain build.
echo "[vm] verbs plugin on rxe0: conformance suites and peer programs (tests/vm/verbs-suite.sh)"
rw=(--rw "$top")
case "$out/" in "$top"/*) ;; *) rw+=(--rw "$out") ;; esac
if [ -x "$out/plain/bin/conformance_ia_test" ] &&
   bash "$top/tests/vm/rxe-vm.sh" "${rw[@]}" -- bash "$top/tests/vm/verbs-suite.sh" "$out/plain" >"$out/verbs-suite.log" 2>&1; then
  line=$(grep -E "^---- verbs suite:" "$out/verbs-suite.log" | tail -1)
  echo "[vm] ${line#---- }"
  grep -E "^rxe-vm: .* in all" "$out/verbs-suite.log" | tail -1 | sed 's/^/[vm] /'
  n=$(sed -nE 's/.* ([0-9]+) passed.*/\1/p' <<<"$line"); s=$(sed -nE 's/.* ([0-9]+) skipped.*/\1/p' <<<"$line")
  passed=$((passed + ${n:-0})); skips=$((skips + ${s:-0}))
else
  failed=$((failed + 1)); failures+=("verbs-suite"); tail -n 60 "$out/verbs-suite.log" 2>/dev/null
fi

echo "total time: $(( $(date +%s) - start )) s"
[ ${#failures[@]} -gt 0 ] && echo "failing: ${failures[*]}"
echo "$passed passed, $failed failed, $skips skipped (each skip prints its reason in the logs)"
[ "$failed" = 0 ]
