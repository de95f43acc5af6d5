#!/bin/sh
# Submissions in flight (--inflight-batches, default 2) against the small-job
# path, on the GPU machine, from a bundle B (bin/vkgradd, bin/vkgrad):
#   [OUT=DIR] [NS="1 2 3 4 6"] [REPS=2] [JOBS=2000] scripts/device_inflight.sh B
# For each rep and each N in turn: a daemon with --inflight-batches N, then
# `vkgrad bench --socket` against it: tiny_latency with 1 and with 16
# synchronous clients (JOBS each), tiny_throughput with 16 clients x 32 in
# flight (JOBS/4 each); its stats' completion-wait line.
# Files in $OUT: inflight.jsonl (bench lines tagged "run": "n=N#REP"), log.txt;
# the summary (jobs/s, p50, p99, stages) on stdout.
set -u
B=${1:?usage: device_inflight.sh BUNDLE}
case $B in /*) ;; *) B=$PWD/$B ;; esac
O=${OUT:-/tmp/inflight}
NS=${NS:-1 2 3 4 6}
REPS=${REPS:-2}
JOBS=${JOBS:-2000}
mkdir -p "$O"
J="$O/inflight.jsonl" LOG="$O/log.txt" D=$(mktemp -d)
: >"$J"; : >"$LOG"
say() { echo "=== $* ($(date -u +%T))" | tee -a "$LOG"; }
. "$(dirname "$0")/device_lib.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv >>"$LOG" 2>&1
dev_flag_sweep "$B" --inflight-batches "$NS" "$REPS" "$JOBS" "1 16"
say summary
dev_tiny_summary "$J" | tee -a "$LOG"
say done
[ -f "$B/torch_multiproc.py" ] && [ -z "${NO_TORCH:-}" ] && { : >"$O/torch.jsonl"; dev_torch_mp "$B/torch_multiproc.py" "$O/torch.jsonl"; cat "$O/torch.jsonl"; }
