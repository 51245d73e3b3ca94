#!/bin/bash
# A process of ours that gets the pid of a killed one still opens shm
# endpoints: libfabric's shm names an endpoint's region
# /dev/shm/<pid>:<domain>:<ep>, and a region left by a dtest server killed
# with SIGKILL names a live process (the new one) once its pid is reused,
# which shm refuses (fi_enable: EBUSY). The pid is reused on purpose
# (/proc/sys/kernel/ns_last_pid; root only, else skipped with exit 77).
# Then: the regions of a killed process whose pid nobody has are removed by
# the next process that opens shm (each holds 16 MiB until then).
set -u
libdir=$1
tmp=$(mktemp -d)
server=
cleanup() {
    [ -n "$server" ] && kill -9 "$server" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
command -v dtest >/dev/null || { echo "FAIL: dtest not installed (apt-get install dapl2-utils)"; exit 1; }
[ -w /proc/sys/kernel/ns_last_pid ] || { echo "SKIP: cannot choose the next pid (/proc/sys/kernel/ns_last_pid not writable: not root)"; exit 77; }
cat >"$tmp/dat.conf" <<CONF
ofi-shm u2.0 nonthreadsafe default libdat2_ofi.so dat2.2.0 "provider=shm" ""
CONF
export LD_LIBRARY_PATH=$libdir DAT_OVERRIDE=$tmp/dat.conf

# A server that made its endpoint, killed (output in $1): its regions stay.
# Sets dead (its pid) and regions.
kill_a_server() {
    dtest -P ofi-shm -s >"$1" 2>&1 &
    dead=$!
    for _ in $(seq 50); do
        ls /dev/shm | grep -q "^$dead:" && break
        sleep 0.1
    done
    kill -9 "$dead"
    wait "$dead" 2>/dev/null
    regions=$(ls /dev/shm | grep "^$dead:")
    [ -n "$regions" ] || { cat "$1"; echo "FAIL: the killed server left no region /dev/shm/$dead:*"; exit 1; }
    echo "the killed server (pid $dead) left: $regions"
}

# Until the server writing $1 waits for its client (or failed).
await_server() {
    for _ in $(seq 50); do
        grep -q "waiting for connect request\|FAILED" "$1" && break
        sleep 0.1
    done
}

kill_a_server "$tmp/dead.out"

# The next server gets its pid (other processes may take it first: retry).
for _ in $(seq 50); do
    echo $((dead - 1)) >/proc/sys/kernel/ns_last_pid
    dtest -P ofi-shm -s >"$tmp/server.out" 2>&1 &
    server=$!
    [ "$server" = "$dead" ] && break
    kill -9 "$server" 2>/dev/null
    wait "$server" 2>/dev/null
    server=
done
[ -n "$server" ] || { echo "FAIL: pid $dead was not given again in 50 tries"; exit 1; }
echo "a new server has pid $server"
await_server "$tmp/server.out"
timeout 30 dtest -P ofi-shm -h 127.0.0.1 >"$tmp/client.out" 2>&1
crc=$?
timeout 30 tail --pid="$server" -f /dev/null
wait "$server"
src=$?
server=
fail=0
grep -q "PASSED" "$tmp/client.out" && [ $crc = 0 ] && echo "ok: the client passed" \
    || { echo "FAIL: client exit $crc:"; tail -n 8 "$tmp/client.out"; fail=1; }
grep -q "PASSED" "$tmp/server.out" && [ $src = 0 ] && echo "ok: the server with the reused pid passed" \
    || { echo "FAIL: server exit $src:"; tail -n 8 "$tmp/server.out"; fail=1; }

kill_a_server "$tmp/dead2.out"
dtest -P ofi-shm -s >"$tmp/server2.out" 2>&1 &
server=$!
await_server "$tmp/server2.out"
left=$(ls /dev/shm | grep "^$dead:")
kill -9 "$server" 2>/dev/null
wait "$server" 2>/dev/null
server=
[ -z "$left" ] && echo "ok: the regions of killed pid $dead went when the next process opened shm" \
    || { echo "FAIL: /dev/shm still holds $left of killed pid $dead"; fail=1; }
exit $fail
