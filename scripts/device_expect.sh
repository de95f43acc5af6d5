#!/bin/sh
# Expected ends (daemon/spin.h) on the GPU machine: bundles BEFORE and
# AFTER (bin/vkgradd, bin/vkgrad) alternated REPS times (default 2):
#   [OUT=DIR] [REPS=2] [JOBS=2000] scripts/device_expect.sh BEFORE AFTER
# each time, per bundle: a daemon, `vkgrad bench --kernels` end to end
# (8192x4096x4096, 2048x1024x1024, 1024x4096x4096; bf16 and f32) with its
# stages, then the small-job lines against the same build's daemon
# (tiny_latency with 1 and 16 synchronous clients, tiny_throughput 16x32),
# each daemon's stats (spin_expected, time polled) into stats.txt.
# Files in $OUT: kernels.jsonl, tiny.jsonl, stats.txt, log.txt; the
# summaries on stdout.
set -u
BEFORE=${1:?usage: device_expect.sh BEFORE AFTER}
AFTER=${2:?usage: device_expect.sh BEFORE AFTER}
case $BEFORE in /*) ;; *) BEFORE=$PWD/$BEFORE ;; esac
case $AFTER in /*) ;; *) AFTER=$PWD/$AFTER ;; esac
O=${OUT:-/tmp/expect}
REPS=${REPS:-2}
JOBS=${JOBS:-2000}
mkdir -p "$O"
J="$O/kernels.jsonl" T="$O/tiny.jsonl" LOG="$O/log.txt" D=$(mktemp -d)
: >"$J"; : >"$T"; : >"$LOG"; : >"$O/stats.txt"
say() { echo "=== $* ($(date -u +%T))" | tee -a "$LOG"; }
. "$(dirname "$0")/device_lib.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv >>"$LOG" 2>&1
tiny() { # LABEL BUNDLE
	dev_daemon_start "$2" "$LOG" || { say "daemon ($1) did not start"; return; }
	say "$1: small-job lines"
	for a in "tiny_latency 1 $JOBS" "tiny_latency 16 $JOBS" "tiny_throughput 16 $((JOBS / 4))"; do
		set -- "$1" "$2" $a
		(. "$2/env.sh" && timeout 100 "$2/bin/vkgrad" bench --socket "$D/s" --json --scenario "$3" \
			--clients "$4" --jobs "$5") 2>>"$LOG" |
			sed "s/^{/{\"run\":\"$1\",/" >>"$T"
	done
	echo "--- $1 (small jobs)" >>"$O/stats.txt"
	(. "$2/env.sh" && "$2/bin/vkgrad" --socket "$D/s" stats) 2>&1 | grep -E "completion|batches" >>"$O/stats.txt"
	dev_daemon_stop
}
for r in $(seq 1 "$REPS"); do
	for w in before after; do
		b=$BEFORE; [ $w = after ] && b=$AFTER
		dev_run "$w#$r" "$b" bf16,f32 "8192,4096,4096;2048,1024,1024;1024,4096,4096"
		tiny "$w#$r" "$b"
	done
done
say summary
STAGES=1 dev_summary "$J" | tee -a "$LOG"
dev_tiny_summary "$T" | tee -a "$LOG"
grep -E "^---|completion" "$O/stats.txt"
say done
