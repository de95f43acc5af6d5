#!/bin/sh
# Sixth session's first H200 run, from a bundle B (bin/vkgradd, bin/vkgrad):
#   [OUT=DIR] scripts/device_s6a.sh B
# 1. --stream-chunk-bytes auto per dtype (device_autochunk.sh: the chunk
#    counts of one 8192x4096x4096 job of each dtype);
# 2. where a streamed bf16 job's compute goes: its steps with the defaults
#    (resumed dW) and with VKGRAD_STREAM_SUMS=0 (dW in one step at the end);
# 3. the same kernels unstreamed: a whole job, and one chunk's shape
#    (1024x4096x4096), bf16, streaming off.
set -u
B=${1:?usage: device_s6a.sh BUNDLE}
case $B in /*) ;; *) B=$PWD/$B ;; esac
O=${OUT:-/tmp/s6a}
mkdir -p "$O"
S="$O/summary.txt" J="$O/bench.jsonl" LOG="$O/log.txt" D=$(mktemp -d)
: >"$S"; : >"$J"; : >"$LOG"
say() { echo "=== $* ($(date -u +%T))" | tee -a "$S"; }
. "$(dirname "$0")/device_lib.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv 2>&1 | tee -a "$S"
say "1. auto chunks per dtype"
(. "$B/env.sh" && AUTOCHUNK_DTYPES="bf16 f16 f32" sh "$(dirname "$0")/device_autochunk.sh" "$B") 2>&1 | tee -a "$S"
say "2. steps, bf16 8192x4096x4096, defaults"
dev_steps "$B" bf16 8192,4096,4096 "$O/steps_bf16.txt" | tee -a "$S"
say "2. steps, bf16 8192x4096x4096, VKGRAD_STREAM_SUMS=0"
RUN_ENV=VKGRAD_STREAM_SUMS=0 dev_steps "$B" bf16 8192,4096,4096 "$O/steps_bf16_nosums.txt" | tee -a "$S"
say "3. unstreamed kernels, bf16"
BENCH_ARGS="--reps 5" NO_STATS=1 dev_run off "$B" bf16 "8192,4096,4096;1024,4096,4096;2048,4096,4096" \
	--stream-chunk-bytes off
dev_summary "$J" | tee -a "$S"
say done
