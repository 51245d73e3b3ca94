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
# (conformance_*_ofi-shm, _ofi-rxm) in the plain, ASan and TSan builds.
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

# The clients' sources sit beside the project's clone (../shared/clients);
# a clone made elsewhere (a CI checkout) finds them where the project's is.
if [ -z "${DAT2_CLIENTS_SRC:-}" ] && [ ! -d "$top/../shared/clients" ] && [ -d /work/shared/clients ]; then
  export DAT2_CLIENTS_SRC=/work/shared/clients
fi
# client_cached LABEL NAME SCRIPT COLD: true when the client build SCRIPT
# makes is in the cache (or DAT2_BUILD_CLIENTS=1 lets the stage build it);
# otherwise the stage LABEL is skipped, saying why and how to build it.
client_cached() {
  local label=$1 name=$2 script=$3 cold=$4 key prefix
  key=$(bash "$top/tests/clients/$script" --key 2>"$out/$label-key.err")
  prefix=${DAT2_CLIENT_CACHE:-/var/cache/dat2-clients}/$name-$key
  if [ -z "$key" ]; then
    echo "[$label] SKIP: no $name sources: $(tail -n 1 "$out/$label-key.err")"
  elif [ ! -e "$prefix/.complete" ] && [ "${DAT2_BUILD_CLIENTS:-0}" != 1 ]; then
    echo "[$label] SKIP: $name is not built in $prefix (a cold build takes $cold on 2 cores);" \
         "build it once with: bash tests/clients/$script $out/plain/lib (or DAT2_BUILD_CLIENTS=1 here)"
  else
    return 0
  fi
  skips=$((skips + 1))
  return 1
}
# MPI over our uDAPL (tests/clients/README.md): MVAPICH2 1.9, built once per
# machine into DAT2_CLIENT_CACHE (default /var/cache/dat2-clients), runs the
# OSU benchmarks and its own test programs over ofi-tcp with the plain
# build's libdat2; each check counts. A cold build takes longer than this
# whole run may (tests/clients/README.md): without the cached build the
# stage is skipped, saying how to build it (or DAT2_BUILD_CLIENTS=1 builds
# it here). The 4-rank checks (a minute and more each: four polling ranks
# on two CPUs wait for time slices) are left to run-clients.sh alone.
if [ -e "$out/plain/lib/libdat2.so" ]; then
  if client_cached mpi mvapich2-1.9 build-mvapich2.sh "15 to 53 min"; then
    # mpi_run IA LOG CHECK...: the checks over IA, counted into the totals.
    mpi_run() {
      local ia=$1 log=$2 line n f s; shift 2
      DAT2_MPI_IA=$ia DAT2_CLIENT_LOGS="$out/$log" DAT2_CLIENT_RUN_BUDGET=${DAT2_CLIENT_RUN_BUDGET:-900} \
        bash "$top/tests/clients/run-clients.sh" "$out/plain/lib" "$@" >"$out/$log.log" 2>&1
      grep -E "^\[mpi\] (MVAPICH2|FAIL|SKIP|checks)|^\[mpi\]   " "$out/$log.log" | head -150
      line=$(grep -E "^mpi clients: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped" "$out/$log.log" | tail -1)
      if [ -n "$line" ]; then
        echo "[mpi] $ia: ${line#mpi clients: }"
        read -r n f s < <(sed -E 's/^mpi clients: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped.*/\1 \2 \3/' <<<"$line")
        passed=$((passed + n)); failed=$((failed + f)); skips=$((skips + s))
        [ "$f" = 0 ] || failures+=("$log")
      else
        failed=$((failed + 1)); failures+=("$log: no summary"); tail -n 40 "$out/$log.log"
      fi
    }
    echo "[mpi] MVAPICH2 1.9 over ofi-tcp, one host and two namespaces (tests/clients/run-clients.sh)"
    mpi_run ofi-tcp mpi-clients local2:wrong-ia local2:osu_latency local2:osu_bw local2:osu_bibw local2:osu_allreduce \
      local2:pt2pt/sendrecv1 local2:pt2pt/sendrecv3 local2:pt2pt/anyall local2:pt2pt/sendall \
      local2:pt2pt/probe-unexp local2:coll/allred local2:coll/bcasttest local2:coll/alltoall1 \
      local2:rma/putfence1 local2:rma/getfence1 \
      netns2:osu_latency netns2:osu_bw
    # The RDM transport's data path under MPI: RDMA writes into its polled
    # rings, both ranks polling (the shm provider executes RMA in the
    # target's progress).
    echo "[mpi] MVAPICH2 1.9 over ofi-shm, one host"
    mpi_run ofi-shm mpi-clients-shm local2:osu_latency local2:osu_bw local2:pt2pt/sendrecv1 local2:coll/allred \
      local2:rma/putfence1
    # And over rxm (tcp;ofi_rxm): the same rings, their bytes moved by
    # tcp only when someone drives rxm's progress.
    echo "[mpi] MVAPICH2 1.9 over ofi-rxm, one host"
    mpi_run ofi-rxm mpi-clients-rxm local2:osu_latency local2:osu_bw local2:pt2pt/sendrecv1 local2:coll/allred \
      local2:rma/putfence1
  fi
fi
# Open MPI 1.6.5's udapl BTL (DAT 1.2, through our libdat.so.1) over each
# transport's IA, with its own tcp BTL in the same run for the ratio table
# (tests/clients/openmpi-1.6.5-udapl.sh); cached like MVAPICH2.
if [ -e "$out/plain/lib/libdat.so" ]; then
  if client_cached openmpi openmpi-1.6.5 build-openmpi.sh "about 20 min"; then
    # ofi-tcp also between two network namespaces (root only).
    for run in ofi-tcp:local ofi-shm:local ofi-rxm:local ofi-tcp:netns; do
      ia=${run%:*} where=${run#*:}
      log=$out/openmpi-${ia#ofi-}.log
      [ "$where" = netns ] && log=$out/openmpi-netns.log
      echo "[openmpi] Open MPI 1.6.5, btl udapl over $ia beside btl tcp, $where (tests/clients/openmpi-1.6.5-udapl.sh)"
      t0=$SECONDS
      DAT2_MPI_TIMEOUT=${DAT2_MPI_TIMEOUT:-300} bash "$top/tests/clients/openmpi-1.6.5-udapl.sh" "$out/plain/lib" "$ia" \
        "$where" >"$log" 2>&1
      grep -E "^(PASS|FAIL|SKIP):|^# size|[|]|^peer:" "$log" | sed 's/^/[openmpi] /'
      n=$(grep -c "^PASS:" "$log"); f=$(grep -c "^FAIL:" "$log")
      if grep -q "^SKIP:" "$log" && [ "$f" = 0 ]; then
        skips=$((skips + 1))
        continue
      fi
      if [ "$n" = 0 ] && [ "$f" = 0 ]; then f=1; tail -n 40 "$log"; fi
      passed=$((passed + n)); failed=$((failed + f))
      [ "$f" = 0 ] || failures+=("openmpi $ia $where")
      echo "[openmpi] $ia $where: $n passed, $f failed in $((SECONDS - t0)) s"
    done
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

# The same conformance suites over verbs, built with ASan and UBSan (the
# asan stage's build): the host's sanitizer stages never load the verbs plugin.
echo "[vm] verbs plugin on rxe0 under ASan and UBSan: conformance suites (tests/vm/verbs-suite.sh)"
if [ -x "$out/asan/bin/conformance_ia_test" ] &&
   bash "$top/tests/vm/rxe-vm.sh" "${rw[@]}" -- env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_send=0 \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 LSAN_OPTIONS=suppressions=$top/tests/lsan.supp \
     bash "$top/tests/vm/verbs-suite.sh" "$out/asan" conformance >"$out/verbs-suite-asan.log" 2>&1; then
  line=$(grep -E "^---- verbs suite:" "$out/verbs-suite-asan.log" | tail -1)
  echo "[vm] asan: ${line#---- }"
  n=$(sed -nE 's/.* ([0-9]+) passed.*/\1/p' <<<"$line"); s=$(sed -nE 's/.* ([0-9]+) skipped.*/\1/p' <<<"$line")
  passed=$((passed + ${n:-0})); skips=$((skips + ${s:-0}))
else
  failed=$((failed + 1)); failures+=("verbs-suite-asan"); tail -n 60 "$out/verbs-suite-asan.log" 2>/dev/null
fi

echo "total time: $(( $(date +%s) - start )) s"
[ ${#failures[@]} -gt 0 ] && echo "failing: ${failures[*]}"
echo "$passed passed, $failed failed, $skips skipped (each skip prints its reason in the logs)"
[ "$failed" = 0 ]
