#!/bin/sh
# Jobs per batch (--batch-jobs, default 256) against the small-job
# lines, on the GPU machine, from a bundle B (bin/vkgradd, bin/vkgrad):
#   [OUT=DIR] [NS="32 64 128 256"] [REPS=2] [JOBS=2000] scripts/device_batchjobs.sh B
# For each rep and each N in turn: a daemon with --batch-jobs N, then
# `vkgrad bench --socket` against it: tiny_latency with 16 synchronous
# clients (JOBS each) and tiny_throughput 16 x 32 in flight (JOBS/4 each).
# (device_lib.sh's dev_flag_sweep; device_inflight.sh sweeps
# --inflight-batches the same way.) Files in $OUT: batchjobs.jsonl (bench
# lines tagged "run": "n=N#REP"), log.txt (with each daemon's stats
# completion-wait line); the summary on stdout.
set -u
B=${1:?usage: device_batchjobs.sh BUNDLE}
case $B in /*) ;; *) B=$PWD/$B ;; esac
O=${OUT:-/tmp/batchjobs}
NS=${NS:-32 64 128 256}
REPS=${REPS:-2}
JOBS=${JOBS:-2000}
mkdir -p "$O"
J="$O/batchjobs.jsonl" LOG="$O/log.txt" D=$(mktemp -d)
: >"$J"; : >"$LOG"
say() { echo "=== $* ($(date -u +%T))" | tee -a "$LOG"; }
. "$(dirname "$0")/device_lib.sh"
dev_flag_sweep "$B" --batch-jobs "$NS" "$REPS" "$JOBS" 16
dev_tiny_summary "$J" | tee -a "$LOG"
