#!/bin/bash
# Instruction counts of the polling ping-pong: how many instructions one
# post + completion costs inside DAT (libdat2 + the plugin: registry, kit
# and transport code) and inside the transport underneath (libfabric, or
# libibverbs and its device provider), measured with callgrind.
#
#   tools/datperf-callgrind.sh [--build DIR] [-P IA] [--address A] [--size BYTES] [--iters N] [--keep DIR]
#
# --address: where the client connects (default 127.0.0.1; a verbs IA
# needs its device's address: in the rxe VM, $DAT2_VM_ADDR), e.g.
#   tests/vm/rxe-vm.sh -- tools/datperf-callgrind.sh -P verbs --address 10.0.0.1 --size 1
#
# The client of `datperf --connect` runs under callgrind, collecting only
# inside its measured loop (--toggle-collect=*client_pingpong*, main
# thread only); the server is a plain `datperf --server` on a free port.
# Each iteration of that loop is 1 send + 1 receive posted and 1
# successful dat_evd_dequeue call (the pong: the send is suppressed, as
# ib_send_lat's are unsignalled; over libfabric its completion is still
# read, silently, on verbs it has none), plus however many empty polls
# happen while the pong is on its way; those are timing, not work, and
# every one of them calls into the provider too. So the client is measured
# twice: against a native server, then against a server under valgrind
# --tool=none, which changes how many polls come up empty. Per object, the
# two runs give two equations, cost = N x (work per iteration) + E x (cost
# of an empty poll), solved for both (E is counted: dequeue calls - N).
# "Per post + completion" is the work per iteration / 2. A third run
# collects only inside dat_ep_post_send and dat_ep_post_recv, which have no
# empty polls: the exact cost of a post; the iteration's work less its two
# posts is the cost of the dequeued completion. The last line sets ours
# against issue 20's budget (verbs: 300 a post, 200 a dequeued completion;
# otherwise 350 a post + completion). The cost of a call into libc
# (mutexes, syscall wrappers), libstdc++ or the loader is charged to the
# object that made it. The CM thread (tcp progress every ms) is not
# collected.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build ia=ofi-tcp size=64 iters=2000 keep= address=${DAT2_VM_ADDR:-127.0.0.1}
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    -P | --provider) ia=$2; shift 2 ;;
    --address) address=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h | --help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "datperf-callgrind: unknown argument '$1' (--help)" >&2; exit 2 ;;
    esac
done
datperf=$build/bin/datperf
[ -x "$datperf" ] || { echo "datperf-callgrind: no $datperf (build first: scripts/build.sh $build)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "datperf-callgrind: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/datperf-callgrind.XXXXXX")
server_pid=
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        sleep 1
        kill -KILL "$server_pid" 2>/dev/null || true
    fi
    if [ -n "$keep" ]; then mkdir -p "$keep" && cp "$tmp"/* "$keep"/ 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# measure NAME COLLECT [server wrapper...]: one client run under callgrind,
# collecting inside the functions COLLECT names (a space-separated list of
# patterns), against a server started with the wrapper (none: native).
measure() {
    local name=$1 collect=() port f
    for f in $2; do collect+=(--toggle-collect="$f"); done
    shift 2
    port=$(free_port)
    "$@" "$datperf" --server --port "$port" -P "$ia" --timeout 300 >"$tmp/$name.server" 2>&1 &
    server_pid=$!
    for _ in $(seq 300); do
        grep -q "waiting for a client" "$tmp/$name.server" 2>/dev/null && break
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    grep -q "waiting for a client" "$tmp/$name.server" || { cat "$tmp/$name.server" >&2; echo "datperf-callgrind: the server did not start" >&2; exit 1; }
    valgrind --tool=callgrind --separate-threads=yes "${collect[@]}" \
        --callgrind-out-file="$tmp/$name.out.%p" \
        "$datperf" --connect "$address" --port "$port" -P "$ia" --no-progress --timeout 300 \
        pingpong --poll --sizes "$size" -n "$iters" --warmup 0 >"$tmp/$name.client" 2>"$tmp/$name.valgrind" \
        || { tail -20 "$tmp/$name.valgrind" "$tmp/$name.client" >&2; echo "datperf-callgrind: the client failed" >&2; exit 1; }
    wait "$server_pid" || true
    server_pid=
    # The main thread's file (part -01) holds the measured loop.
    ls "$tmp/$name".out.*-01 >/dev/null 2>&1 || { echo "datperf-callgrind: callgrind wrote no per-thread file" >&2; exit 1; }
}

echo "datperf-callgrind: $ia, $size-byte polling ping-pong, $iters iterations; client under callgrind" >&2
measure fast '*client_pingpong*'
echo "datperf-callgrind: again against a server under valgrind --tool=none (another count of empty polls)" >&2
measure slow '*client_pingpong*' valgrind --tool=none -q
echo "datperf-callgrind: once more, collecting inside the post calls only" >&2
measure posts 'dat_ep_post_send dat_ep_post_recv'

python3 - "$iters" "$size" "$ia" "$tmp"/fast.out.*-01 "$tmp"/slow.out.*-01 "$tmp"/posts.out.*-01 <<'PY'
import re, sys

iters, size, ia = int(sys.argv[1]), sys.argv[2], sys.argv[3]
files = {"fast": sys.argv[4], "slow": sys.argv[5], "posts": sys.argv[6]}

SYSTEM = re.compile(r"/(libc|ld-linux[^/]*|libstdc\+\+|libm|libgcc_s|libpthread)[.-][^/]*$|vdso|^\?\?\?$|^$")


def category(obj):
    base = obj.rsplit("/", 1)[-1]
    if base.startswith("libdat2_"):
        return base.split(".")[0]  # the plugin: libdat2_ofi, libdat2_verbs
    if base.startswith("libdat2"):
        return "libdat2"
    if base.startswith("libfabric"):
        return "libfabric"
    if "/libibverbs/" in obj or base.startswith(("libibverbs", "librdmacm")):
        return "verbs"  # libibverbs and its device provider (librxe, libmlx5...)
    if base.startswith("datperf"):
        return "datperf"
    return "system" if SYSTEM.search(obj) else "other:" + base


def parse(path):
    """Self cost per object, the calls from each object into system
    libraries (charged to the caller), and call counts of DAT entry points."""
    names = {"ob": {}, "fn": {}}
    fn_object = {}
    self_cost, charged, calls_to = {}, {}, {}
    ob = fn = None
    pending_call = None  # (callee fn, callee object or None, count)
    callee_ob = None

    def name(kind, text):
        m = re.match(r"\((\d+)\)(?: (.*))?$", text)
        if not m:
            return text
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), text)

    edges = []
    for line in open(path):
        line = line.rstrip("\n")
        if not line or line[0] == "#":
            continue
        key, _, value = line.partition("=")
        if key == "ob":
            ob = name("ob", value)
        elif key == "fn":
            fn = name("fn", value)
            fn_object.setdefault(fn, ob)
            callee_ob = None
        elif key == "cob":
            callee_ob = name("ob", value)
        elif key == "cfn" or key == "cfi" or key == "cfl":
            if key == "cfn":
                pending_call = [name("fn", value), callee_ob, 0]
        elif key == "calls":
            pending_call[2] = int(value.split()[0])
        elif line[0] in "0123456789+-*":
            cost = int(line.split()[-1])
            if pending_call and pending_call[2]:
                edges.append((ob, fn, pending_call[0], pending_call[1], pending_call[2], cost))
                pending_call = None
                callee_ob = None
            else:
                self_cost[ob] = self_cost.get(ob, 0) + cost
        # fl=, fi=, fe=, totals:, summary:, events: ... carry no cost here
    def target(edge):
        return edge[3] or fn_object.get(edge[2], edge[0])

    # A system function "escapes" when it calls, directly or not, back into
    # a non-system object (__libc_start_main calls main): its inclusive cost
    # is not the system's, so calls to it are not charged.
    escapes = set()
    changed = True
    while changed:
        changed = False
        for e in edges:
            caller_fn, callee = e[1], e[2]
            if caller_fn in escapes or category(fn_object.get(caller_fn, e[0])) != "system":
                continue
            if category(target(e)) != "system" or callee in escapes:
                escapes.add(caller_fn)
                changed = True
    for e in edges:
        caller_ob, callee, count, cost = e[0], e[2], e[4], e[5]
        calls_to[callee] = calls_to.get(callee, 0) + count
        if category(target(e)) == "system" and category(caller_ob) != "system" and callee not in escapes:
            charged[caller_ob] = charged.get(caller_ob, 0) + cost
    per_cat = {}
    for obj, cost in list(self_cost.items()) + list(charged.items()):
        c = category(obj)
        if c == "system":
            continue
        per_cat[c] = per_cat.get(c, 0) + cost
    system_self = sum(v for o, v in self_cost.items() if category(o) == "system")
    per_cat["system (uncharged)"] = system_self - sum(charged.values())
    total = sum(self_cost.values())
    return per_cat, calls_to, total


runs = {k: parse(v) for k, v in files.items()}
post_run = runs.pop("posts")
dequeues = {k: r[1].get("dat_evd_dequeue", 0) for k, r in runs.items()}
posts = {k: r[1].get("dat_ep_post_send", 0) + r[1].get("dat_ep_post_recv", 0) for k, r in runs.items()}
empty = {k: dequeues[k] - iters for k in runs}

found = {c for r in runs.values() for c in r[0]}
plugins = sorted(c for c in found if c.startswith("libdat2_"))
transports = [c for c in ("libfabric", "verbs") if c in found]
cats = ["libdat2"] + plugins + transports + ["datperf", "system (uncharged)"]
cats += sorted(c for c in found if c not in cats)
print(f"datperf-callgrind: {ia}, {size}-byte send/recv ping-pong, busy-polling, {iters} iterations "
      f"(client side; its measured loop, main thread)")
print(f"dat_evd_dequeue calls per iteration: {dequeues['fast'] / iters:.1f} (native server), "
      f"{dequeues['slow'] / iters:.1f} (server under valgrind); 1 of them returns the pong")
print()
print("instructions per iteration as measured (1 suppressed send + 1 receive posted, the pong dequeued, "
      "the empty polls):")
print(f"  {'object':22} {'native server':>14} {'valgrind srv':>14}")
for c in cats:
    a, b = runs["fast"][0].get(c, 0) / iters, runs["slow"][0].get(c, 0) / iters
    if a or b:
        print(f"  {c:22} {a:14.0f} {b:14.0f}")
print(f"  {'total':22} {runs['fast'][2] / iters:14.0f} {runs['slow'][2] / iters:14.0f}")
print()
# The posts alone, counted exactly (no empty poll inside a post): every
# iteration posts one send and one receive. What is left of the iteration's
# work is the pong's dequeue (on libfabric, the suppressed send's completion
# is read silently in it too).
post_ours = sum(post_run[0].get(c, 0) for c in ["libdat2"] + plugins) / (2 * iters)
post_under = sum(post_run[0].get(c, 0) for c in transports) / (2 * iters)
ours, under = " + ".join(["libdat2"] + plugins), " + ".join(transports)
silent = "" if "libdat2_verbs" in plugins else "; it also reads the suppressed send's completion"


def budget(post, dequeue, pair):
    # Issue 20's budgets, ours only (the transport library's own excluded).
    if "libdat2_verbs" in plugins:
        verdict = "met" if post <= 300 and dequeue <= 200 else "missed"
        print(f"budget: at most 300 per post ({post:.0f}) and 200 per dequeued completion ({dequeue:.0f}): {verdict}")
    else:
        print(f"budget: at most 350 per post + completion ({pair:.0f}): {'met' if pair <= 350 else 'missed'}")


de = empty["slow"] - empty["fast"]
if abs(de) < iters // 4:
    print("both runs had about as many empty polls: work and polling cannot be told apart; "
          "the figures above include the empty polls (run again)")
    # The native run's iteration less its posts still bounds the dequeue.
    measured = sum(runs["fast"][0].get(c, 0) for c in ["libdat2"] + plugins) / iters
    print(f"per post (exact):      {ours} {post_ours:.0f} instructions, {under} {post_under:.0f} instructions "
          f"(a send and a receive, averaged)")
    print(f"per dequeued completion: {ours} at most {measured - 2 * post_ours:.0f} instructions (the native run's "
          f"iteration less its two posts, with its {empty['fast'] / iters:.2f} empty polls an iteration{silent})")
    print()
    budget(post_ours, measured - 2 * post_ours, measured / 2)
    sys.exit(0)
print("solved per object from the two runs: cost = iterations x work + E x (cost of an empty poll)")
print(f"  {'object':22} {'per iteration':>14} {'per post+compl':>15} {'per empty poll':>15}")
sums = {"dat": [0, 0], "fab": [0, 0]}
for c in cats:
    a, b = runs["fast"][0].get(c, 0), runs["slow"][0].get(c, 0)
    e_cost = (b - a) / de
    work = (a - empty["fast"] * e_cost) / iters
    if not (a or b):
        continue
    print(f"  {c:22} {work:14.0f} {work / 2:15.0f} {e_cost:15.0f}")
    if c == "libdat2" or c in plugins:
        sums["dat"][0] += work / 2
        sums["dat"][1] += e_cost
    elif c in transports:
        sums["fab"][0] += work / 2
        sums["fab"][1] += e_cost
print()
print(f"per post + completion: {ours} {sums['dat'][0]:.0f} instructions, {under} {sums['fab'][0]:.0f} instructions")
print(f"per empty poll:        {ours} {sums['dat'][1]:.0f} instructions, {under} {sums['fab'][1]:.0f} instructions")

dequeue_ours = 2 * sums["dat"][0] - 2 * post_ours
print(f"per post (exact):      {ours} {post_ours:.0f} instructions, {under} {post_under:.0f} instructions "
      f"(a send and a receive, averaged)")
print(f"per dequeued completion: {ours} {dequeue_ours:.0f} instructions (the iteration's work less its two "
      f"posts{silent})")
print()
budget(post_ours, dequeue_ours, sums["dat"][0])
PY
