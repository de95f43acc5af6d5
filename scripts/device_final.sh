#!/bin/sh
# One H200 run for the closing note of 2026-12-03 (issues 14, 15, 16):
#  1. scripts/device_datapath.sh BEFORE AFTER (tiny-job path, daemon vs direct,
#     16 synchronous clients, torch_multiproc 1 16 with and without MPS);
#  2. end to end of 8192x4096x4096 (bf16, f16, f32; auto) from client memory
#     with `vkgrad bench --kernels`, beside torch_linear_backward.py
#     (its e2e_host_us) in the same run;
#  3. scripts/device_python.sh AFTER (MLP training, vkgrad.torch vs torch).
# Made here:
#   git archive 441f0cf | tar -x -C /tmp/before && make -C /tmp/before all
#   ../shared/device/bundle.sh .device-bundle-before /tmp/before/build/vkgradd /tmp/before/build/vkgrad
#   make all && ../shared/device/bundle.sh .device-bundle-after build/vkgradd build/vkgrad build/libvkgrad.so.0
#   cp ../shared/anchors/torch_*.py .device-bundle-after/
# Run with carry [".device-bundle-before", ".device-bundle-after"]:
#   scripts/device_final.sh .device-bundle-before .device-bundle-after
# Everything lands in $OUT/final.tar.gz, the summaries also in $OUT/summary.txt.
set -u
BEFORE=$1 AFTER=$2
O=${OUT:-/tmp/out}
W=$(mktemp -d)
mkdir -p "$W/datapath" "$W/kernels" "$W/python"
S="$O/summary.txt"
echo "=== 1. data path ($(date -u +%T))" | tee -a "$S"
OUT="$W/datapath" timeout 270 scripts/device_datapath.sh "$BEFORE" "$AFTER" 2>&1 | tail -40 | tee -a "$S"
echo "=== 2. end to end 8192x4096x4096 ($(date -u +%T))" | tee -a "$S"
(. "$AFTER/env.sh" && timeout 80 "$AFTER/bin/vkgrad" bench --kernels --json \
	--shapes "8192,4096,4096" --dtypes bf16,f16,f32 --variants auto) \
	>"$W/kernels/bench.jsonl" 2>"$W/kernels/bench.err"
cat "$W/kernels/bench.jsonl" | tee -a "$S"
(cd "$AFTER" && timeout 100 python3 torch_linear_backward.py) >"$W/kernels/torch.jsonl" 2>"$W/kernels/torch.err"
grep '"B": 8192, "I": 4096, "O": 4096' "$W/kernels/torch.jsonl" | tee -a "$S"
echo "=== 3. python MLP ($(date -u +%T))" | tee -a "$S"
OUT="$W/python" MLP_STEPS=${MLP_STEPS:-10} timeout 110 scripts/device_python.sh "$AFTER" 2>&1 | tail -40 | tee -a "$S"
echo "=== done ($(date -u +%T))" | tee -a "$S"
tar -C "$W" -czf "$O/final.tar.gz" .
