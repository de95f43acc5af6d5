#!/bin/sh
# Issue 15 part 3 on the GPU machine: large jobs end to end from client
# memory with streaming off and on (copies overlapped with kernels on the
# transfer queues, daemon/stream.h).
#
#   scripts/device_stream.sh BUNDLE
#
# BUNDLE (../shared/device/bundle.sh) holds vkgradd and vkgrad of this
# branch, made here and carried (run's carry: [BUNDLE]):
#   make -j2 all && ../shared/device/bundle.sh .device-bundle-stream build/vkgradd build/vkgrad
# then on the device:  scripts/device_stream.sh .device-bundle-stream
# With build/tests/test_stream in the bundle it first runs that test on the
# GPU (with the validation layer when the bundle has it, BUNDLE_VALIDATION=1;
# else VKGRAD_TEST_VALIDATION=0): streamed jobs on the transfer queues must
# give the unstreamed jobs' bits.
#
# For each daemon setting (--stream-chunk-bytes off, auto, then 4, 8 and
# 32 MiB for bf16 alone, then 16 MiB chunks with VKGRAD_NO_TRANSFER_QUEUE=1,
# the same schedule on the compute queue alone, bf16 and f32) a daemon of its own (regions raised to fit the
# job), `vkgrad bench --kernels --json` over 8192x4096x4096 (bf16, f16,
# f32; variant auto; each line's outputs checked against the float64
# reference, sampled), whose end_to_end_us is the client's round trip: the job
# goes through the daemon's device-local path (copies in, kernels, copies
# out; streamed or not), then `vkgrad stats` (stream_jobs, stream_chunks,
# stream_queues). STREAM_SHAPE=B,I,O replaces the shape (a try on
# lavapipe with small ones). About 2 minutes on the H200; every step has a time limit.
# Files in $OUT: test_stream.txt (when run), stream.jsonl (each group after a {"run": ...} line),
# stats.txt, log.txt (daemon logs, `vkgradd --list-devices` with the queue
# families); the e2e lines are printed at the end.
set -u
B=${1:-}
SHAPE=${STREAM_SHAPE:-8192,4096,4096}
O=${OUT:-/tmp/vkgrad-stream}
[ -n "$B" ] && [ -x "$B/bin/vkgradd" ] && [ -x "$B/bin/vkgrad" ] || {
	echo "usage: $0 BUNDLE (with bin/vkgradd, bin/vkgrad, env.sh)" >&2
	exit 2
}
case $B in /*) ;; *) B=$PWD/$B ;; esac
mkdir -p "$O"
LOG="$O/log.txt"
J="$O/stream.jsonl"
: >"$LOG"
: >"$J"
: >"$O/stats.txt"
T0=$(date +%s)
say() { echo "=== $* (t+$(($(date +%s) - T0)) s)" | tee -a "$LOG"; }
{
	echo "host: $(uname -a)"
	nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1
	(. "$B/env.sh" && timeout 60 "$B/bin/vkgradd" --list-devices)
} >>"$LOG" 2>&1

. "$(dirname "$0")/device_lib.sh"
# the bit-for-bit check on this GPU, when the bundle carries it: streamed
# (transfer queues) vs unstreamed, every dtype, output subset, accumulate
if [ -x "$B/bin/test_stream" ]; then
	# the test asks for the validation layer; a bundle made without it
	# (BUNDLE_VALIDATION=0) runs the test without it
	val=1
	[ -d "$B/layers" ] || val=0
	say "test_stream (validation layer: $val)"
	dev_test_stream "$B" "$O/test_stream.txt" $val
	echo "test_stream: exit status $?" | tee -a "$LOG"
	grep -E "cases|stream_queues|PASSED|FAILED|differs" "$O/test_stream.txt" | head -20
fi

D=$(mktemp -d)
# run LABEL DTYPES DAEMON_ARGS...: a daemon with those arguments (and
# RUN_ENV in its environment), the bench, its stats
run() {
	label=$1 dtypes=$2
	shift 2
	dev_run "$label" "$B" "$dtypes" "$SHAPE" "$@"
}
run off bf16,f16,f32 --stream-chunk-bytes off
run auto bf16,f16,f32 --stream-chunk-bytes auto
run chunk_4MiB bf16 --stream-chunk-bytes 4194304
run chunk_8MiB bf16 --stream-chunk-bytes 8388608
run chunk_32MiB bf16 --stream-chunk-bytes 33554432
# the same schedule on the compute queue alone: what the transfer queues buy
RUN_ENV=VKGRAD_NO_TRANSFER_QUEUE=1 run compute_queue_only bf16,f32 --stream-chunk-bytes 16777216
rm -rf "$D"
say "done"
echo "--- end_to_end_us (the client's round trip) per run and dtype"
STAGES=1 dev_summary "$J"
grep -E "stream_(chunk_bytes|jobs)|^---" "$O/stats.txt"
