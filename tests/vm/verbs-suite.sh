#!/bin/bash
# Everything the verbs plugin is tested with on a real RDMA device: the
# conformance suites with DAT2_CONFORMANCE_IAS naming a verbs IA, and the
# peer programs (tests/vm/verbs-peers.sh) with both registries. Meant for the
# Soft-RoCE VM:
#
#   tests/vm/rxe-vm.sh --rw <build dir> -- tests/vm/verbs-suite.sh <build dir> [part...]
#
# Parts: conformance, peers, peers-ofed (our plugin under OFED's libdat2),
# peers-ours-cma (OFED's cma provider under our libdat2), peers-ours-scm (its scm provider),
# peers-ofedconf (our plugin through OFED's own dat.conf lines for the device,
# "<netdev> 0" and "<device> 1", with only the library name changed),
# baseline (OFED's own cma provider, for the performance numbers), datperf
# (datperf with perftest and OFED dtest -W side by side), figures (dtest -W,
# dapltest -T P and perftest, ours against OFED's, medians of rounds); default
# conformance peers peers-ofed peers-ours-cma peers-ours-scm peers-ofedconf. Prints one line per test, the RESULT lines of
# the performance cases, and a summary; exits 0 only when every test passed.
# VERBS_SUITE_SUITES limits the conformance part to the suites it names;
# a sanitizer build's suites run the same way (ASAN_OPTIONS and the like
# pass through), and a sanitizer's report fails its suite (exit status > 1).
#
# A conformance test whose premise does not hold on verbs is listed below
# with the reason; it must fail (an unexpected pass is reported), and it does
# not fail the suite. Everything else must pass.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: verbs-suite.sh <build dir> [conformance|peers|peers-ofed|peers-ours-cma|peers-ours-scm|baseline|datperf|figures]...}
shift
build=$(cd "$build" && pwd) || exit 2
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(conformance peers peers-ofed peers-ours-cma peers-ours-scm peers-ofedconf)
ia=${VERBS_SUITE_IA:-verbs}
# The build's generated dat.conf lists only the entries that passed a
# loopback connection on the build machine, which has no RDMA device: the
# verbs entries are in its "Left out" comment. Here they are written back,
# after the generated ones (a DAT_OVERRIDE the caller set wins).
if [ -z "${DAT_OVERRIDE:-}" ]; then
    suite_conf=$(mktemp "${TMPDIR:-/tmp}/verbs-suite-conf.XXXXXX")
    trap 'rm -f "$suite_conf"' EXIT
    grep -v '^#' "$build/lib/dat.conf" >"$suite_conf"
    grep -q "^verbs " "$suite_conf" ||
        echo 'verbs u2.0 nonthreadsafe default libdat2_verbs.so dat2.2.0 "device=any" ""' >>"$suite_conf"
    export DAT_OVERRIDE=$suite_conf
fi

declare -A known_failure=(
    [Ia/IaTest.QueryAttributesAreSane]=pdata
    [Ia/CmTest.ConnectionRequestCarriesClientPrivateDataIntact]=pdata
    [Ia/CmTest.PrivateDataOfMaxSizeDeliveredIntactBothWays]=pdata
    [Ia/CmTest.ConnectPrivateDataLargerThanMaxIsInvalidParameter]=pdata
    [Ia/CmTest.AcceptPrivateDataLargerThanMaxIsInvalidParameterAndLeavesRequestPending]=pdata
    [Ia/DtoStoppedPeerTest.PostingMoreRequestsThanMaxRequestDtosIsInsufficientResources]=stopped
    [Ia/RmrConnectedTest.RdmaWriteStraddlingTheEndOfTheWindow]=rxe-mw
    [Ia/RmrConnectedTest.RdmaWriteStraddlingTheStartOfTheWindow]=rxe-mw
    [Ia/RmrConnectedTest.RdmaWriteWhollyOutsideTheWindowInsideTheLmr]=rxe-mw
    [Ia/RmrConnectedTest.RdmaReadStraddlingTheEndOfTheWindow]=rxe-mw
    [Ia/RmrConnectedTest.RdmaReadWhollyOutsideTheWindowInsideTheLmr]=rxe-mw
    [Ia/RmrInvalidateTest.InvalidatingAContextThatIsNoWindowDeliversAPlainReceive]=inv
    [Ia/QualTest.ConnectToAnotherQualifierOfAListenersPortIsNonPeerRejected]=fold
    [Ia/PeerDeathTest.ServerKilledHoldingTheRequest]=rej
)
declare -A reason=(
    [pdata]="an InfiniBand/RoCE CM request carries 56 bytes of private data with IP addressing (rdma_cm's own header takes 36 of 92); max_private_data_size is 54, below the 64 dat_ia_query(3DAT) asks for"
    [stopped]="a SIGSTOPped peer's RDMA device still answers RDMA Reads, so the test's requests do not stay outstanding"
    [rxe-mw]="Soft-RoCE checks an access through a memory window against the memory region under it, not against the window (drivers/infiniband/sw/rxe/rxe_resp.c check_rkey); RDMA hardware checks the window"
    [fold]="rdma_cm's private data has no room for a 64-bit qualifier: a connect reaches whatever listens on the qualifier's port (kit::port_of_qual), as with OFED's cma provider (plugins/verbs/README.md)"
    [inv]="on InfiniBand/RoCE a send with invalidate naming no valid window of the receiver completes in error at the receiver and breaks the connection; it cannot be delivered as a plain receive"
    [rej]="the kernel's CM answers a request whose listener died with a REJ as a consumer's reject is answered, without private data: the verbs plugin reports it at once, as DAT_CONNECTION_EVENT_PEER_REJECTED, not NON_PEER_REJECTED"
)

passed=0 failed=0 skipped=0 xfailed=0
failures=()
note() { echo "$*"; }

# What a test printed between its RUN line and its verdict.
test_output() {
    awk -v t="$1/" 'index($0, "[ RUN      ] " t) == 1 { on = 1; next } on && /^\[ +(OK|FAILED|SKIPPED) +\]/ { exit } on' "$2"
}

# One suite binary: its output in $2/<name>.log, its exit status in
# $2/<name>.rc and its time in seconds in $2/<name>.time.
run_suite_binary() {
    local bin=$1 dir=$2 name=${1##*/} t0=$SECONDS
    DAT2_CONFORMANCE_IAS=$ia timeout 600 "$bin" --gtest_color=no >"$dir/$name.log" 2>&1
    echo $? >"$dir/$name.rc"
    echo "$((SECONDS - t0))" >"$dir/$name.time"
}

# The suite binaries to run: every one, or those VERBS_SUITE_SUITES names
# (e.g. "dto disconnect" for conformance_dto_test and conformance_disconnect_test).
suite_binaries() {
    local bin name
    for bin in "$build"/bin/conformance_*_test; do
        name=${bin##*/conformance_}
        name=${name%_test}
        [ -z "${VERBS_SUITE_SUITES:-}" ] || [[ " $VERBS_SUITE_SUITES " == *" $name "* ]] || continue
        echo "$bin"
    done
}

run_conformance() {
    local bin name line status test out rc running=0 bins=()
    out=$(mktemp -d "${TMPDIR:-/tmp}/verbs-suite.XXXXXX")
    # (No process substitution: the guest has no /dev/fd.)
    for bin in $(suite_binaries); do bins+=("$bin"); done
    if [ ${#bins[@]} -eq 0 ]; then
        failures+=("no conformance suite in $build/bin (VERBS_SUITE_SUITES='${VERBS_SUITE_SUITES:-}')")
        failed=$((failed + 1))
        return
    fi
    # VERBS_SUITE_JOBS binaries at a time (default 2, one per vCPU): the
    # suites listen on qualifiers of dat_psp_create_any, as ctest -j3 runs
    # them side by side on the host, and wait on the CM and on timers for
    # much of their time.
    for bin in "${bins[@]}"; do
        if [ "$running" -ge "${VERBS_SUITE_JOBS:-2}" ]; then
            wait -n
            running=$((running - 1))
        fi
        run_suite_binary "$bin" "$out" &
        running=$((running + 1))
    done
    wait
    for bin in "${bins[@]}"; do
        name=${bin##*/}
        rc=$(cat "$out/$name.rc" 2>/dev/null || echo 255)
        note "time  $name: $(cat "$out/$name.time" 2>/dev/null) s"
        # 0: all passed, 1: some failed (counted below); anything else is a
        # crash, a sanitizer's report or the watchdog.
        if [ "$rc" -gt 1 ]; then
            failures+=("$name: exit status $rc")
            failed=$((failed + 1))
            note "FAIL  $name: exit status $rc"
            grep -vE '^\[ +(OK|RUN) +\]' "$out/$name.log" | tail -n 30 | sed 's/^/        /'
        fi
        while IFS= read -r line; do
            # "[       OK ] Suite/Test.Name/verbs (12 ms)" and the like; the
            # summary at the end repeats names without the time.
            [[ $line =~ ^\[\ +(OK|FAILED|SKIPPED)\ +\]\ ([^ ,]+)(,.*)?\ \(([0-9]+)\ ms\)$ ]] || continue
            status=${BASH_REMATCH[1]} test=${BASH_REMATCH[2]%/*}
            if [ -n "${known_failure[$test]:-}" ]; then
                if [ "$status" = FAILED ]; then
                    note "XFAIL $test: ${reason[${known_failure[$test]}]}"
                    xfailed=$((xfailed + 1))
                else
                    note "FAIL  $test: expected to fail on verbs, but $status (remove it from the known failures)"
                    failures+=("$test: unexpected $status")
                    failed=$((failed + 1))
                fi
                continue
            fi
            case $status in
            OK) passed=$((passed + 1)); note "ok    $test" ;;
            SKIPPED)
                skipped=$((skipped + 1))
                note "SKIP  $test: $(test_output "$test" "$out/$name.log" | awk 'skip { print; exit } /: Skipped$/ { skip = 1 }')"
                ;;
            FAILED)
                failed=$((failed + 1)); failures+=("$test")
                note "FAIL  $test"
                test_output "$test" "$out/$name.log" | head -n 20 | sed 's/^/        /'
                ;;
            esac
        done <"$out/$name.log"
    done
    rm -rf "$out"
}

all_peer_cases="dtest dtest-p dtest-c dtest-W dtest-D dtestcm dtestsrq dtestx dapltest-T-SR dapltest-T-RR dapltest-T-RW
    dapltest-T-V dapltest-T-V8 dapltest-P-RW dapltest-P-RR dapltest-L-ia dapltest-L-pz dapltest-L-cno dapltest-L-evd
    dapltest-L-ep dapltest-L-rsp dapltest-L-psp dapltest-L-lmr dapltest-L-rpost dapltest-F-queryinfo dapltest-F-pz
    dapltest-F-mem dapltest-F-endpoint dapltest-F-hwconn dapltest-F-connmgt dapltest-Q"
# run_peers PAIRING [CASES]: each case (default all) judged.
run_peers() {
    local pairing=$1 c log
    log=$(mktemp "${TMPDIR:-/tmp}/verbs-peer.XXXXXX")
    for c in ${2:-$all_peer_cases}; do
        local t0=$SECONDS
        if bash "$here/verbs-peers.sh" "$build/lib" "$pairing" "$c" >"$log" 2>&1; then
            passed=$((passed + 1))
            note "ok    peer $pairing $c ($((SECONDS - t0)) s)"
            grep '^RESULT ' "$log" | sed "s/^RESULT /RESULT $pairing /"
        else
            failed=$((failed + 1)); failures+=("peer $pairing $c")
            note "FAIL  peer $pairing $c"
            sed 's/^/        /' "$log" | tail -n 40
        fi
    done
    rm -f "$log"
}

# The performance numbers of OFED's own cma provider on the same device, for
# comparison (not judged).
run_baseline() {
    local c log
    log=$(mktemp "${TMPDIR:-/tmp}/verbs-peer.XXXXXX")
    for c in dtest-W dapltest-P-RW; do
        if bash "$here/verbs-peers.sh" "$build/lib" ofed-cma "$c" >"$log" 2>&1; then
            grep '^RESULT ' "$log" | sed "s/^RESULT /RESULT ofed-cma /"
        else
            note "note: baseline $c with OFED's cma provider failed:"
            tail -n 10 "$log" | sed 's/^/        /'
        fi
    done
    rm -f "$log"
}

# datperf on the verbs IA with its RDMA peers side by side (perftest on the
# same device, OFED dtest -W through OFED's cma provider), all pinned: the
# table, JSON and plot land in the build directory (shared with the host by --rw).
# Judged: datperf exits 0 and every peer ran (a peer that failed shows as
# "failed" in the table).
run_datperf() {
    local out=$build/datperf-verbs
    local dev
    dev=$(ls /sys/class/infiniband 2>/dev/null | head -n 1)
    # Pinned, server on vCPU 0 and client on vCPU 1, the peers likewise:
    # as perftest is run (vm-smoke.sh) and dtest -W (figures).
    local pin=
    [ "$(nproc)" -ge 2 ] && pin="--pin 0,1"
    if "$build/bin/datperf" -P "$ia" --no-progress --runs 3 --peer-repeats 3 $pin \
        --compare=ib_send_lat,ib_write_lat,ib_write_bw,dtest ${dev:+--peer-device "$dev"} --peer-gid 1 \
        --sizes 1,64,4k,64k pingpong,write-lat,write \
        --json="$out.json" --plot "$out.png" >"$out.txt" 2>"$out.err"; then
        if grep -qE "failed:|not run:" "$out.txt"; then
            failed=$((failed + 1)); failures+=("datperf: a peer failed (see $out.txt)")
        else
            passed=$((passed + 1))
        fi
    else
        failed=$((failed + 1)); failures+=("datperf exited $? ($(tail -n 1 "$out.err"))")
    fi
    cat "$out.txt"
}

# The figures of one boot, side by side: OFED dtest -W (a 1-byte RDMA-write
# ping-pong) and dapltest -T P (RDMA write, 64 KiB x 2, 16 deep) over our
# plugin and over OFED's cma provider, the same cases with the same options
# (tests/peers/cases.sh), and perftest's ib_write_lat/ib_send_lat
# (vm-smoke.sh) on the same device, interleaved, $VERBS_FIGURES_RUNS rounds
# (default 5). Prints each sample and a table of medians with the ratio of
# ours to OFED's. Judged: every run of every program passed.
median_of() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
run_figures() {
    local runs=${VERBS_FIGURES_RUNS:-5} r c pairing log samples
    log=$(mktemp "${TMPDIR:-/tmp}/verbs-figures.XXXXXX") samples=$(mktemp "${TMPDIR:-/tmp}/verbs-samples.XXXXXX")
    for r in $(seq 1 "$runs"); do
        local before
        before=$(wc -l <"$samples")
        for c in dtest-W dapltest-P-RW; do
            for pairing in ours ofed-cma; do
                if bash "$here/verbs-peers.sh" "$build/lib" "$pairing" "$c" >"$log" 2>&1 \
                    && grep -q "^RESULT $c " "$log"; then
                    passed=$((passed + 1))
                    awk -v p="$pairing" -v c="$c" '$1 == "RESULT" && $2 == c { print p, c, $3, $4 }' "$log" >>"$samples"
                else
                    failed=$((failed + 1)); failures+=("figures: round $r, $pairing $c")
                    note "FAIL  figures round $r: $pairing $c"
                    tail -n 20 "$log" | sed 's/^/        /'
                fi
            done
        done
        if bash "$here/vm-smoke.sh" write-lat send-lat >"$log" 2>&1; then
            passed=$((passed + 1))
            awk '$1 == "RESULT" { print "perftest", $2, $3, $4 }' "$log" >>"$samples"
        else
            failed=$((failed + 1)); failures+=("figures: round $r, perftest")
            note "FAIL  figures round $r: perftest"
            tail -n 20 "$log" | sed 's/^/        /'
        fi
        note "figures round $r/$runs: $(tail -n +$((before + 1)) "$samples" | awk '{ printf "%s%s %s %s %s", sep, $1, $2, $3, $4; sep = "; " } END { print "" }')"
    done
    note "figures: medians of $runs rounds in one boot ($(uname -r), $(nproc) vCPUs)"
    printf '%-14s %-12s %10s %10s %10s %6s\n' case who median min max ratio
    local who med ours_med unit vals
    for c in dtest-W dapltest-P-RW write-lat send-lat; do
        ours_med=
        for who in ours ofed-cma perftest; do
            vals=$(awk -v w="$who" -v c="$c" '$1 == w && $2 == c { print $3 }' "$samples")
            [ -n "$vals" ] || continue
            unit=$(awk -v w="$who" -v c="$c" '$1 == w && $2 == c { print $4; exit }' "$samples")
            med=$(median_of <<<"$vals")
            [ "$who" = ours ] && ours_med=$med
            printf '%-14s %-12s %10s %10s %10s %6s %s\n' "$c" "$who" "$med" "$(sort -n <<<"$vals" | head -n 1)" \
                "$(sort -n <<<"$vals" | tail -n 1)" \
                "$([ "$who" = ofed-cma ] && [ -n "$ours_med" ] && awk -v a="$ours_med" -v b="$med" 'BEGIN { if (b > 0) printf "%.2f", a / b }')" "$unit"
        done
    done
    note "(ratio: ours / OFED's cma provider; dtest-W is a latency, lower is better; dapltest-P-RW a bandwidth)"
    rm -f "$log" "$samples"
}

for part in "${parts[@]}"; do
    part_t0=$SECONDS
    case $part in
    conformance) note "---- conformance suites on IA '$ia'"; run_conformance ;;
    peers) note "---- peer programs, our libdat2"; run_peers ours ;;
    # OFED's libdat2 hosting our plugin: the hosting itself runs every case
    # over ofi-tcp (the plain build's peer_ofed_* tests); here, one case of
    # each kind for the verbs plugin under it.
    peers-ofed) note "---- peer programs, OFED's libdat2"
        run_peers ofed "dtest dtest-W dtest-c dtestcm dtestsrq dtestx dapltest-T-SR dapltest-T-V8 dapltest-L-ep
            dapltest-F-connmgt dapltest-Q" ;;
    # OFED's own provider under our registry: a few cases prove the hosting.
    peers-ours-cma) note "---- peer programs, our libdat2 with OFED's cma provider"
        run_peers ours-cma "dtest dtest-W dtestcm dapltest-T-SR dapltest-Q" ;;
    peers-ours-scm) note "---- peer programs, our libdat2 with OFED's scm provider"
        run_peers ours-scm "dtest dtest-W dapltest-T-SR dapltest-Q" ;;
    peers-ofedconf) note "---- peer programs, our plugin through OFED's dat.conf lines for the device"
        run_peers ofedconf-cma "dtest dtest-W dapltest-T-SR dapltest-Q"
        run_peers ofedconf-scm "dtest dtest-W dapltest-T-SR dapltest-Q" ;;
    baseline) note "---- baseline: OFED's cma provider"; run_baseline ;;
    datperf) note "---- datperf on '$ia' with perftest and OFED dtest side by side"; run_datperf ;;
    figures) note "---- one boot's figures: ours and OFED's cma provider, perftest"; run_figures ;;
    *) echo "verbs-suite: unknown part '$part'" >&2; exit 2 ;;
    esac
    note "---- $part: $((SECONDS - part_t0)) s"
done

echo "---- verbs suite: $passed passed, $failed failed, $skipped skipped, $xfailed known failures"
for f in "${failures[@]}"; do
    echo "failed: $f"
done
[ "$failed" -eq 0 ]
