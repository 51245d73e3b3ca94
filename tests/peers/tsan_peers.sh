#!/bin/bash
# A peer case (tests/peers/cases.sh) with Debian's unmodified dapltest or
# dtest loading our TSan-built libdat2 and plugin: the peer programs preload
# the TSan runtime (they are not instrumented; our libraries are), and every
# report TSan writes is judged afterwards.
#
#   tsan_peers.sh <TSan build lib dir> <case>
#
# A report with a frame in our libraries (libdat2*) fails the case. A report
# entirely inside the peer program (dapltest destroys a mutex its finished
# threads used, without joining them) is not ours: it is counted and shown,
# and does not fail the case.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
libdir=${1:?usage: tsan_peers.sh <TSan build lib dir> <case>}
case=${2:?usage: tsan_peers.sh <TSan build lib dir> <case>}

runtime=$(ldd "$libdir/libdat2_ofi.so" 2>/dev/null | awk '$1 ~ /^libtsan\.so/ { print $3 }')
if [ -z "$runtime" ] || [ ! -e "$runtime" ]; then
    echo "FAIL: $libdir/libdat2_ofi.so is not linked with the TSan runtime (configure with -DDAT2_SANITIZE=thread)"
    exit 1
fi
logs=$(mktemp -d /tmp/dat2-tsan-peers.XXXXXX) || exit 1
trap 'rm -rf "$logs"' EXIT

# Later options win: the peers go on after a report, so that the run ends
# and every report is collected; each process writes its own log.
export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}halt_on_error=0:exitcode=0:log_path=$logs/tsan"
export peer_preload=$runtime
# TSan slows the peers several times.
export client_limit=${client_limit:-120} line_wait=${line_wait:-30} exit_wait=${exit_wait:-40}
echo "TSan runtime $runtime preloaded by the peer programs; reports in $logs"

bash "$here/dapl_peers.sh" "$libdir" ours "$case"
rc=$?

ours=0 theirs=0
for log in "$logs"/tsan.*; do
    [ -e "$log" ] || continue
    # One report per block between the ===== separators.
    while IFS= read -r -d $'\f' report; do
        grep -q "WARNING: ThreadSanitizer" <<<"$report" || continue
        if grep -q "libdat2" <<<"$report"; then
            ours=$((ours + 1))
            echo "---- TSan report in our libraries ($(basename "$log")):"
            echo "$report"
        else
            theirs=$((theirs + 1))
            echo "---- TSan report inside the peer program only, not ours ($(basename "$log")):"
            grep -E "WARNING|#[0-9]" <<<"$report" | head -8
        fi
    done < <(sed 's/^==================$/\f/' "$log"; printf '\f')
done
echo "TSan: $ours report(s) with a frame in our libraries, $theirs inside the peer program only"
[ $rc -eq 0 ] || { echo "FAIL: $case under TSan: the case failed (exit $rc)"; exit 1; }
[ $ours -eq 0 ] || { echo "FAIL: $case under TSan: $ours report(s) in our libraries"; exit 1; }
echo "PASS: $case under TSan (peer programs with our TSan-built libraries)"
