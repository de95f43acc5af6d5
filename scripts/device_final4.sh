#!/bin/sh
# The closing H200 run of 2026-12-03's fourth session: one `run` call
# (about 6 minutes), outputs re-packed after every step.
#
#   scripts/device_final4.sh BEFORE AFTER
#
#  1. test_stream on the GPU twice (streamed jobs' bits, the resumed-dW
#     cases on coopmat_nv2, two accumulating jobs in flight), then
#     device_coopmat_check.sh coopmat_nv2 (its tile edges);
#  2. `vkgrad bench --kernels` 8192x4096x4096, 16384x8192x8192,
#     2048x1024x1024, bf16/f16/f32 (auto), torch_linear_backward.py, same
#     run, closing_table.py of the two;
#  3. device_sums.sh BEFORE AFTER (end to end, the two builds alternated
#     twice; resumed dW off; chunk sizes) and one job's steps at debug level;
#  4. tiny jobs, the two builds alternated twice (bench --compare: 1 client,
#     16 x 32 in flight), then device_datapath.sh BEFORE AFTER
#     (DATAPATH_KNOBS=0: 16 synchronous clients, torch_multiproc.py 1 16
#     with and without MPS).
# BEFORE: the session start's bundle (a0ef155), AFTER: the closing
# commit's; both with bin/vkgradd, bin/vkgrad, the torch anchors beside;
# AFTER also bin/test_stream. Outputs: $OUT/summary.txt, $OUT/final4.tar.gz.
set -u
BEFORE=${1:?usage: device_final4.sh BEFORE AFTER}
AFTER=${2:?usage: device_final4.sh BEFORE AFTER}
case $BEFORE in /*) ;; *) BEFORE=$PWD/$BEFORE ;; esac
case $AFTER in /*) ;; *) AFTER=$PWD/$AFTER ;; esac
O=${OUT:-/tmp/out}
W=$(mktemp -d)
S="$O/summary.txt"
: >"$S"
say() { echo "=== $* ($(date -u +%T))" | tee -a "$S"; }
. scripts/device_lib.sh
pack() { tar -C "$W" -czf "$O/final4.tar.gz" .; }
mkdir -p "$W/check" "$W/kernels" "$W/sums" "$W/tiny" "$W/datapath"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv 2>&1 | tee -a "$S"
for i in 1 2; do
	say "1. test_stream on the GPU ($i)"
	dev_test_stream "$AFTER" "$W/check/test_stream_$i.txt"
	echo "rc=$?" | tee -a "$S"
	grep -E "resumed dW|dW steps|two accumulating|PASSED|FAILED" "$W/check/test_stream_$i.txt" | tee -a "$S"
done
say "1. coopmat_nv2 tile-edge check"
(. "$AFTER/env.sh" && timeout 100 scripts/device_coopmat_check.sh "$AFTER/bin" coopmat_nv2) >"$W/check/nv2.log" 2>&1
echo "rc=$?" | tee -a "$S"; tail -1 "$W/check/nv2.log" | tee -a "$S"
pack
dev_kernels_table "$AFTER" "$W/kernels" "2."
pack
say "3. end to end, before/after (device_sums.sh)"
SUMS_TEST=0 OUT="$W/sums" timeout 150 sh scripts/device_sums.sh "$BEFORE" "$AFTER" 2>&1 | tail -40 | tee -a "$S"
D=$(mktemp -d) J="$W/sums/steps_bench.jsonl" LOG="$W/sums/steps_bench.err"
BENCH_ARGS="--reps 3" NO_STATS=1 DAEMON_LOG="$W/sums/steps_daemon.txt" \
	dev_run steps "$AFTER" bf16 8192,4096,4096 --log-level debug
rm -rf "$D"
dev_last_steps "$W/sums/steps_daemon.txt" | sed 's/^vkgradd: debug: //' | cut -c1-120 | tee -a "$S"
pack
say "4. tiny jobs, before/after alternated twice"
for r in 1 2; do for b in "$BEFORE" "$AFTER"; do
	[ "$b" = "$BEFORE" ] && w=before || w=after
	for sc in "tiny_latency" "tiny_throughput --clients 16"; do
		(. "$b/env.sh" && timeout 40 "$b/bin/vkgrad" bench --compare --json --scenario $sc) 2>/dev/null |
			tee -a "$W/tiny/tiny.jsonl" | python3 -c '
import json,sys
for l in sys.stdin:
    j=json.loads(l)
    if j.get("mode")=="ratio": continue
    print(sys.argv[1], j["scenario"], j["mode"], "clients", j["clients"], "p50", j["p50_us"], "p99", j["p99_us"], "jobs/s", j["jobs_per_s"])' "$w#$r" | tee -a "$S"
	done
done; done
pack
say "4. device_datapath.sh"
DATAPATH_KNOBS=0 OUT="$W/datapath" timeout 200 scripts/device_datapath.sh "$BEFORE" "$AFTER" 2>&1 | tail -30 | tee -a "$S"
pack
say "done"
