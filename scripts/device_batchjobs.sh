#!/bin/sh
# Jobs per batch (--batch-jobs, default 256) against the small-job
# lines, on the GPU machine, from a bundle B (bin/vkgradd, bin/vkgrad):
#   [OUT=DIR] [NS="32 64 128 256"] [REPS=2] [JOBS=2000] scripts/device_batchjobs.sh B
# For each rep and each N in turn: a daemon with --batch-jobs N, then
# `vkgrad bench --socket` against it: tiny_latency with 16 synchronous
# clients (JOBS each) and tiny_throughput 16 x 32 in flight (JOBS/4 each).
# Files in $OUT: batchjobs.jsonl (bench lines tagged "run": "n=N#REP"),
# log.txt; the summary on stdout.
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
for r in $(seq 1 "$REPS"); do
	for n in $NS; do
		dev_daemon_start "$B" "$LOG" --batch-jobs "$n" || { say "daemon n=$n did not start"; continue; }
		say "n=$n rep $r"
		for a in "tiny_latency $JOBS" "tiny_throughput $((JOBS / 4))"; do
			set -- $a
			(. "$B/env.sh" && timeout 100 "$B/bin/vkgrad" bench --socket "$D/s" --json --scenario "$1" \
				--clients 16 --jobs "$2") 2>>"$LOG" | sed "s/^{/{\"run\":\"n=$n#$r\",/" >>"$J"
		done
		dev_daemon_stop
	done
done
dev_tiny_summary "$J" | tee -a "$LOG"
