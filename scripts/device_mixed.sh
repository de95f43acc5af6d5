#!/bin/sh
# Issue 24's measure on the GPU machine: `vkgrad bench --scenario mixed`
# (8 synchronous tiny clients alone, beside one heavy bf16 client with 4 jobs
# in flight, the heavy one alone) for each heavy shape, alternated REPS
# times, then ../shared/anchors/torch_mixed.py for the same shapes, plain and
# under MPS (when torch sees a GPU and nvidia-cuda-mps-control is there),
# from a bundle B (bin/vkgradd, bin/vkgrad, env.sh):
#   make -j2 all && ../shared/device/bundle.sh .device-bundle build/vkgradd build/vkgrad
#   cp ../shared/anchors/torch_mixed.py .device-bundle/
# then on the device:
#   [OUT=DIR] [REPS=2] [SECS=5] [TINY=8] [SHAPES="8192x4096x4096 2048x1024x1024"]
#   [ANCHOR=path/to/torch_mixed.py] scripts/device_mixed.sh .device-bundle
# Files in $OUT: mixed.jsonl (vkgrad's lines, tagged "run"), torch.jsonl,
# log.txt; a summary on stdout.
set -u
B=${1:?usage: device_mixed.sh BUNDLE}
case $B in /*) ;; *) B=$PWD/$B ;; esac
O=${OUT:-/tmp/mixed}
REPS=${REPS:-2} SECS=${SECS:-5} TINY=${TINY:-8}
SHAPES=${SHAPES:-8192x4096x4096 2048x1024x1024}
ANCHOR=${ANCHOR:-$B/torch_mixed.py}
mkdir -p "$O"
J="$O/mixed.jsonl" T="$O/torch.jsonl" LOG="$O/log.txt"
: >"$J"; : >"$T"; : >"$LOG"
say() { echo "=== $* ($(date -u +%T))" | tee -a "$LOG"; }
for r in $(seq 1 "$REPS"); do
	for s in $SHAPES; do
		say "vkgrad mixed $s bf16, $TINY tiny, ${SECS}s per phase, #$r"
		(. "$B/env.sh" && timeout 300 "$B/bin/vkgrad" bench --scenario mixed --json \
			--tiny-clients "$TINY" --heavy-shape "$s" --heavy-dtype bf16 --heavy-inflight 4 \
			--seconds "$SECS") 2>>"$LOG" | sed "s/^{/{\"run\":\"#$r\",/" >>"$J"
	done
done
if [ -f "$ANCHOR" ] && python3 -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' \
	2>>"$LOG"; then
	MPSCTL=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
	for s in $SHAPES; do
		ts=$(echo "$s" | tr x ,)
		say "torch_mixed $TINY $ts plain"
		timeout 300 python3 "$ANCHOR" "$TINY" "$ts" "$SECS" 2>>"$LOG" >>"$T"
		if [ -x "$MPSCTL" ]; then
			M=$(mktemp -d)
			export CUDA_MPS_PIPE_DIRECTORY=$M/p CUDA_MPS_LOG_DIRECTORY=$M/l
			mkdir -p "$M/p" "$M/l"
			"$MPSCTL" -d && sleep 1
			say "torch_mixed $TINY $ts MPS"
			MPS=1 timeout 300 python3 "$ANCHOR" "$TINY" "$ts" "$SECS" 2>>"$LOG" >>"$T"
			echo quit | "$MPSCTL"
			unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
			sleep 1
			rm -rf "$M"
		fi
	done
else
	say "torch_mixed skipped (no $ANCHOR, or torch sees no GPU)"
fi
python3 - "$J" "$T" <<'PY' | tee -a "$LOG"
import json, sys
def f(v, fmt):
    return "-" if v is None else fmt % v
for l in open(sys.argv[1]):
    j = json.loads(l)
    shape = "x".join(str(v) for v in j["heavy_shape"])
    if j["phase"] == "summary":
        print("%-3s vkgrad %-15s ratio beside/alone: tiny p50 %sx, heavy jobs/s %sx, check %s" % (
            j["run"], shape, f(j["tiny_p50_ratio"], "%.2f"), f(j["heavy_jobs_per_s_ratio"], "%.3f"),
            j["check"]))
    else:
        print("%-3s vkgrad %-15s %-11s tiny p50 %9s p99 %9s us %9s jobs/s  heavy %8s jobs/s" % (
            j["run"], shape, j["phase"], f(j["tiny_p50_us"], "%.1f"), f(j["tiny_p99_us"], "%.1f"),
            f(j["tiny_jobs_per_s"], "%.0f"), f(j["heavy_jobs_per_s"], "%.2f")))
for l in open(sys.argv[2]):
    j = json.loads(l)
    print("torch%s %-15s heavy=%-5s tiny p50 %9s p99 %9s us %9s jobs/s  heavy %8s jobs/s" % (
        "+MPS" if j["mps"] else "    ", "x".join(str(v) for v in j.get("heavy_shape") or []),
        j["heavy"], f(j["tiny_p50_us"], "%.1f"), f(j["tiny_p99_us"], "%.1f"),
        f(j["tiny_jobs_per_s"], "%.0f"), f(j["heavy_jobs_per_s"], "%.2f")))
PY
