#!/bin/sh
# Issue 15 on the GPU machine: the data path before and after, with the
# stage breakdown, next to PyTorch processes with and without NVIDIA MPS.
#
#   scripts/device_datapath.sh BEFORE AFTER
#
# BEFORE and AFTER are bundles (../shared/device/bundle.sh) of vkgradd and
# vkgrad built from two commits (BEFORE: 288f7bb, AFTER: this branch),
# made here and carried (run's carry: [BEFORE, AFTER]):
#   git worktree add /tmp/before 288f7bb && make -C /tmp/before -j2 all
#   ../shared/device/bundle.sh .device-bundle-before /tmp/before/build/vkgradd /tmp/before/build/vkgrad
#   make -j2 all && ../shared/device/bundle.sh .device-bundle-after build/vkgradd build/vkgrad
#   cp ../shared/anchors/torch_multiproc.py .device-bundle-after/
# then on the device:  scripts/device_datapath.sh .device-bundle-before .device-bundle-after
#
# What it runs, in this order (about 3 minutes on the H200; each step has
# a time limit so the whole stays under 5):
#  1. for each bundle: `vkgrad bench --compare --json` (the default lines),
#     then tiny_latency (1 client, 1 in flight) with 2000 jobs and with 16
#     synchronous clients (the MPS comparison), each against a private
#     daemon the bench starts;
#  2. AFTER only: the same two tiny lines against daemons with the polling
#     knobs turned off one at a time (--loop-spin-us 0: no polling after a
#     request; --spin-us 0: no polling for the GPU), to show what each buys,
#     and `vkgrad stats` of the default daemon after the 16-client line
#     (its stage medians and completion-wait counters);
#  3. `python3 torch_multiproc.py 1 16` without MPS, then with MPS
#     (nvidia-cuda-mps-control -d with private pipe and log directories,
#     MPS=1 in the environment, which the script only prints; stopped with
#     `quit` afterwards).
# Files in $OUT (at most 8 come back): before.jsonl, after.jsonl,
# after_knobs.jsonl (each group after a {"run": ...} line), stats_after.txt,
# torch.jsonl, log.txt (with `vkgradd --list-devices`: the queue families);
# a summary is printed at the end.
# DATAPATH_JOBS (default 2000): jobs per client of the tiny lines (fewer
# for a try on lavapipe).
set -u
JOBS=${DATAPATH_JOBS:-2000}
BEFORE=${1:-}
AFTER=${2:-}
O=${OUT:-/tmp/vkgrad-datapath}
mkdir -p "$O"
LOG="$O/log.txt"
: >"$LOG"
for b in "$BEFORE" "$AFTER"; do
	[ -n "$b" ] && [ -x "$b/bin/vkgradd" ] && [ -x "$b/bin/vkgrad" ] || {
		echo "usage: $0 BEFORE_BUNDLE AFTER_BUNDLE (each with bin/vkgradd, bin/vkgrad, env.sh)" >&2
		exit 2
	}
done
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
BEFORE=$(abs "$BEFORE")
AFTER=$(abs "$AFTER")
TORCH_MP=${TORCH_MULTIPROC:-}
for f in "$AFTER/torch_multiproc.py" "$BEFORE/torch_multiproc.py" scripts/torch_multiproc.py; do
	[ -z "$TORCH_MP" ] && [ -f "$f" ] && TORCH_MP=$(abs "$f")
done
T0=$(date +%s)
say() { echo "=== $* (t+$(($(date +%s) - T0)) s)" | tee -a "$LOG"; }
. "$(dirname "$0")/device_lib.sh"

# Run the vkgrad of bundle $1 with its environment (a subshell: each
# bundle's env.sh points LD_LIBRARY_PATH at its own libraries).
vk() {
	b=$1
	shift
	(. "$b/env.sh" && timeout 120 "$b/bin/vkgrad" "$@") 2>>"$LOG"
}

{
	echo "host: $(uname -a)"
	nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv 2>&1
	echo "before: $BEFORE"
	echo "after: $AFTER"
	# the devices and their queue families (a transfer-only family is what
	# copies could overlap compute on)
	(. "$AFTER/env.sh" && timeout 60 "$AFTER/bin/vkgradd" --list-devices)
} >>"$LOG" 2>&1

# 1. both bundles, the same lines
for which in before after; do
	b=$BEFORE
	[ $which = after ] && b=$AFTER
	say "$which: bench --compare --json (default lines)"
	vk "$b" bench --compare --json >"$O/$which.jsonl"
	say "$which: tiny_latency, 1 client, $JOBS jobs"
	vk "$b" bench --compare --json --scenario tiny_latency --jobs $JOBS >>"$O/$which.jsonl"
	say "$which: tiny_latency, 16 synchronous clients, $JOBS jobs each"
	vk "$b" bench --compare --json --scenario tiny_latency --clients 16 --jobs $JOBS >>"$O/$which.jsonl"
done

# 2. AFTER with each polling knob off, and its daemon's own stats
d=$(mktemp -d)
BENCH_ARGS=
knob_run() {
	label=$1
	shift
	(. "$AFTER/env.sh" && exec "$AFTER/bin/vkgradd" --socket "$d/s" --cache-dir "$d/c" "$@") \
		2>>"$LOG" &
	pid=$!
	i=0
	until vk "$AFTER" --socket "$d/s" ping >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -gt 600 ] && { echo "daemon ($label) did not start" >>"$LOG"; kill $pid; return; }
		sleep 0.1
	done
	echo "{\"run\":\"$label\",\"daemon_args\":\"$*\",\"bench_args\":\"$BENCH_ARGS\"}" >>"$O/after_knobs.jsonl"
	vk "$AFTER" bench --socket "$d/s" --json --scenario tiny_latency --jobs "$JOBS" $BENCH_ARGS \
		>>"$O/after_knobs.jsonl"
	vk "$AFTER" bench --socket "$d/s" --json --scenario tiny_latency --clients 16 --jobs "$JOBS" $BENCH_ARGS \
		>>"$O/after_knobs.jsonl"
	if [ "$label" = default ]; then
		vk "$AFTER" --socket "$d/s" stats >"$O/stats_after.txt"
	fi
	kill -TERM $pid
	wait $pid
	rm -rf "$d/c"
}
: >"$O/after_knobs.jsonl"
say "after: a daemon with the defaults (then its stats)"
knob_run default
# DATAPATH_KNOBS=0: the default daemon only (a shorter run)
if [ "${DATAPATH_KNOBS:-1}" = 1 ]; then
say "after: --loop-spin-us 0 (no polling after a request)"
knob_run loop_spin_off --loop-spin-us 0
say "after: --spin-us 0 (no polling for the GPU)"
knob_run gpu_spin_off --spin-us 0
say "after: both off (blocking waits only, like before)"
knob_run both_off --loop-spin-us 0 --spin-us 0
# the client library's wait spin (vkg_set_wait_spin), where the bench has it
if vk "$AFTER" bench --help 2>/dev/null | grep -q client-spin-us; then
	BENCH_ARGS="--client-spin-us 50"
	say "after: clients spin 50 us before sleeping"
	knob_run client_spin_50
	say "after: clients spin 50 us, daemon --loop-spin-us 0"
	knob_run client_spin_50_loop_spin_off --loop-spin-us 0
	BENCH_ARGS="--client-spin-us 200"
	say "after: clients spin 200 us before sleeping"
	knob_run client_spin_200
	BENCH_ARGS=
fi
fi
rm -rf "$d"

# 3. PyTorch processes, without and with MPS
: >"$O/torch.jsonl"
if [ -z "$TORCH_MP" ]; then
	say "torch_multiproc.py not found (copy it into the AFTER bundle); skipped"
else
	dev_torch_mp "$TORCH_MP" "$O/torch.jsonl"
fi

say "summary"
python3 - "$O" "$JOBS" <<'PY' 2>&1 | tee -a "$LOG"
import json, os, sys
o, jobs = sys.argv[1], int(sys.argv[2])
def lines(name):
    out = []
    try:
        for l in open(os.path.join(o, name)):
            l = l.strip()
            if l.startswith("{"):
                try: out.append(json.loads(l))
                except ValueError: pass
    except OSError: pass
    return out
def pick(ls, scen, mode, clients, inflight, jobs=None):
    r = [x for x in ls if x.get("scenario") == scen and x.get("mode") == mode
         and x.get("clients") == clients and x.get("inflight") == inflight
         and (jobs is None or x.get("jobs") == jobs)]
    return r[-1] if r else None
def fmt(x):
    if not x: return "-"
    s = "p50 %.1f us, p99 %.1f us, %.0f jobs/s" % (x["p50_us"], x["p99_us"], x["jobs_per_s"])
    return s
b, a = lines("before.jsonl"), lines("after.jsonl")
rows = [("tiny_latency 1 client", "tiny_latency", 1, 1, jobs),
        ("tiny_latency 16 sync clients", "tiny_latency", 16, 1, 16 * jobs),
        ("tiny_throughput 16 x 32 in flight", "tiny_throughput", 16, 32, None),
        ("narrow 4 clients", "narrow", 4, 4, None)]
for label, scen, cl, infl, nj in rows:
    for mode in ("daemon", "direct"):
        xb, xa = pick(b, scen, mode, cl, infl, nj), pick(a, scen, mode, cl, infl, nj)
        print("%-36s %-6s before: %s" % (label, mode, fmt(xb)))
        print("%-36s %-6s after:  %s" % ("", mode, fmt(xa)))
        if xa and xa.get("stages_us"):
            print("%-36s %-6s stages_us: %s, untraced_us %s" % ("", "", json.dumps(xa["stages_us"]), xa.get("untraced_us")))
    xd, xx = pick(a, scen, "daemon", cl, infl, nj), pick(a, scen, "direct", cl, infl, nj)
    if xd and xx:
        print("%-36s after: daemon p50 - direct p50 = %+.1f us; jobs/s daemon/direct %.2f" % (
            "", xd["p50_us"] - xx["p50_us"], xd["jobs_per_s"] / xx["jobs_per_s"] if xx["jobs_per_s"] else 0))
k = [x for x in lines("after_knobs.jsonl")]
run = "?"
for x in k:
    if "run" in x: run = x["run"]; continue
    print("knobs %-14s %s %2d clients: %s" % (run, x["scenario"], x["clients"], fmt(x)))
t = lines("torch.jsonl")
for x in t:
    print("torch processes=%d mps=%s: %s jobs/s, p50 %s us, p99 %s us" % (x["processes"], x["mps"], x["jobs_per_s"], x["p50_us"], x["p99_us"]))
mps16 = [x for x in t if x["processes"] == 16 and x["mps"]]
a16 = pick(a, "tiny_latency", "daemon", 16, 1, 16 * jobs)
if mps16 and a16:
    print("16 synchronous clients: vkgrad after %.0f jobs/s = %.2fx MPS (%d jobs/s); p99 %.1f us" % (
        a16["jobs_per_s"], a16["jobs_per_s"] / mps16[-1]["jobs_per_s"], mps16[-1]["jobs_per_s"], a16["p99_us"]))
PY
say "done"
