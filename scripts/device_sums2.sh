#!/bin/sh
# Resumed dW, second round (daemon/stream.h), on the GPU machine:
#   scripts/device_sums2.sh BEFORE AFTER V1
# BEFORE: the session start's build, AFTER: this one, V1: the first resumed
# schedule (W first, each chunk's dX then dW after a barrier, equal
# chunks); bundles with bin/vkgradd, bin/vkgrad (BEFORE and AFTER also
# bin/test_stream). Runs test_stream of AFTER and of BEFORE on the GPU
# (VKGRAD_TEST_VALIDATION=0), kernel-only times (streaming off) of
# 8192/2048/1024 x 4096 x 4096 bf16 (what a chunk's GEMMs cost), each
# step's timestamps of one 8192x4096x4096 bf16 job on AFTER and V1
# (--log-level debug), then V1 and AFTER end to end alternated twice.
# Files in $OUT: test_stream_{after,before}.txt, sums2.jsonl, steps.txt,
# log.txt; the summary at the end. About 150 s.
set -u
BEF=${1:-} AFT=${2:-} V1=${3:-}
O=${OUT:-/tmp/vkgrad-sums2}
for b in "$BEF" "$AFT" "$V1"; do
	[ -n "$b" ] && [ -x "$b/bin/vkgradd" ] || { echo "usage: $0 BEFORE AFTER V1" >&2; exit 2; }
done
case $BEF in /*) ;; *) BEF=$PWD/$BEF ;; esac
case $AFT in /*) ;; *) AFT=$PWD/$AFT ;; esac
case $V1 in /*) ;; *) V1=$PWD/$V1 ;; esac
mkdir -p "$O"
LOG="$O/log.txt" J="$O/sums2.jsonl"
: >"$LOG"
: >"$J"
T0=$(date +%s)
say() { echo "=== $* (t+$(($(date +%s) - T0)) s)" | tee -a "$LOG"; }
for w in after before; do
	[ $w = after ] && b=$AFT || b=$BEF
	say "test_stream ($w) on the GPU"
	(. "$b/env.sh" && BUILD="$b/bin" VKGRAD_TEST_VALIDATION=0 timeout 200 "$b/bin/test_stream") \
		>"$O/test_stream_$w.txt" 2>&1
	echo "test_stream ($w): exit status $?" | tee -a "$LOG"
	grep -E "two accumulating|FAILED|differs" "$O/test_stream_$w.txt" | head -12
done
D=$(mktemp -d)
. "$(dirname "$0")/device_lib.sh"
: >"$O/stats.txt"
# run LABEL BUNDLE DTYPES SHAPES DAEMON_ARGS...: a daemon (its stderr in
# daemon_LABEL.txt), the bench
run() {
	label=$1
	DAEMON_LOG="$O/daemon_$label.txt" NO_STATS=1 dev_run "$@"
}
run kernels_off "$AFT" bf16 "8192,4096,4096;2048,4096,4096;1024,4096,4096" --stream-chunk-bytes off
BENCH_ARGS="--reps 3" run steps_after "$AFT" bf16 8192,4096,4096 --log-level debug
BENCH_ARGS="--reps 3" run steps_v1 "$V1" bf16 8192,4096,4096 --log-level debug
for f in steps_after steps_v1; do
	echo "--- $f: the last job's steps" >>"$O/steps.txt"
	dev_last_steps "$O/daemon_$f.txt" >>"$O/steps.txt"
done
run v1_1 "$V1" bf16,f16 8192,4096,4096
run after_1 "$AFT" bf16,f16 8192,4096,4096
run v1_2 "$V1" bf16,f16 8192,4096,4096
run after_2 "$AFT" bf16,f16 8192,4096,4096
rm -rf "$D"
say "done"
dev_summary "$J"
cat "$O/steps.txt" | cut -c1-150 | head -80
