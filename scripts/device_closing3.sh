#!/bin/sh
# The closing H200 run of 2026-12-03's third session: one `run` call
# (about 6 minutes), outputs re-packed after every step so that a run cut
# short still brings back what it did.
#
#   scripts/device_closing3.sh BEFORE AFTER
#
#  1. correctness: device_coopmat_check.sh for coopmat_nv2 (its default
#     tiling, which `auto` now takes for large f16/bf16 GEMMs) and
#     coopmat_khr (22 tile-edge shapes x f16/bf16 x 7 output subsets x
#     overwrite/accumulate), device_check.sh (plain kernels), float64 refs;
#  2. `vkgrad bench --kernels` 8192x4096x4096, 16384x8192x8192,
#     2048x1024x1024 for bf16, f16, f32 (auto; GPU time and end to end from
#     client memory), then torch_linear_backward.py, same run, and
#     closing_table.py of the two;
#  3. device_datapath.sh BEFORE AFTER with DATAPATH_KNOBS=0 (bench
#     --compare --json, 1 and 16 synchronous clients, torch_multiproc.py 1
#     16 with and without MPS);
#  3b. with ILV=bundle set: tiny_throughput 16 x 32 on AFTER and on ILV
#     (h19-interleave: a batch recorded interleaved by connection), twice;
#  4. device_stream2.sh AFTER (streamed large jobs: the timeline);
#  5. `vkgrad bench --peak --json` (the ceilings).
#
# BEFORE: bundle of the session's start (9b9cc1a); AFTER: the closing
# commit's (bin/vkgradd, bin/vkgrad, the torch anchors copied beside).
# Outputs: $OUT/summary.txt and $OUT/closing3.tar.gz.
set -u
BEFORE=${1:?usage: device_closing3.sh BEFORE AFTER}
AFTER=${2:?usage: device_closing3.sh BEFORE AFTER}
O=${OUT:-/tmp/out}
W=$(mktemp -d)
S="$O/summary.txt"
: >"$S"
say() { echo "=== $* ($(date -u +%T))" | tee -a "$S"; }
. scripts/device_lib.sh
pack() { tar -C "$W" -czf "$O/closing3.tar.gz" .; }
mkdir -p "$W/check" "$W/kernels" "$W/datapath" "$W/stream" "$W/peak"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv 2>&1 | tee -a "$S"
for v in coopmat_nv2 coopmat_khr; do
	say "1. $v tile-edge check (default tiling)"
	(. "$AFTER/env.sh" && timeout 100 scripts/device_coopmat_check.sh "$AFTER/bin" "$v") >"$W/check/$v.log" 2>&1
	echo "rc=$?" | tee -a "$S"; tail -1 "$W/check/$v.log" | tee -a "$S"
done
say "1. plain kernels (device_check.sh)"
(. "$AFTER/env.sh" && timeout 120 scripts/device_check.sh "$AFTER/bin") >"$W/check/check.log" 2>&1
echo "rc=$?" | tee -a "$S"; tail -1 "$W/check/check.log" | tee -a "$S"
pack
dev_kernels_table "$AFTER" "$W/kernels" "2."
pack
say "3. data path"
DATAPATH_KNOBS=0 OUT="$W/datapath" timeout 200 scripts/device_datapath.sh "$BEFORE" "$AFTER" 2>&1 | tail -30 | tee -a "$S"
pack
if [ -n "${ILV:-}" ]; then
	say "3b. tiny_throughput 16 x 32: AFTER against ILV (batches recorded interleaved by connection), twice each"
	for r in 1 2; do for b in "$AFTER" "$ILV"; do
		echo "{\"run\":\"$b#$r\"}" >>"$W/datapath/interleave.jsonl"
		(. "$b/env.sh" && timeout 60 "$b/bin/vkgrad" bench --compare --json --scenario tiny_throughput --clients 16) \
			>>"$W/datapath/interleave.jsonl" 2>>"$W/datapath/interleave.err"
		python3 -c 'import json,sys
for l in open(sys.argv[1]).read().splitlines()[-3:]:
    try: j=json.loads(l)
    except Exception: continue
    print(sys.argv[2], j.get("mode"), "jobs/s", j.get("jobs_per_s", j.get("jobs_per_s_ratio")), "p50", j.get("p50_us"), "p99", j.get("p99_us"), "gpu", (j.get("stages_us") or {}).get("gpu"))' "$W/datapath/interleave.jsonl" "$b#$r" | tee -a "$S"
	done; done
	pack
fi
say "4. streamed jobs (device_stream2.sh)"
OUT="$W/stream" timeout 150 sh scripts/device_stream2.sh "$AFTER" 2>&1 | tail -40 | tee -a "$S"
pack
say "5. bench --peak"
(. "$AFTER/env.sh" && timeout 40 "$AFTER/bin/vkgrad" bench --peak --json) >"$W/peak/peak.jsonl" 2>"$W/peak/peak.err"
echo "rc=$?" | tee -a "$S"
say "done"
pack
