#!/bin/sh
# Issue 15 part 3, second round, on the GPU machine: 8192x4096x4096 end to
# end from client memory with streaming off, on the first schedule
# (the default since closing3: equal chunks, dW in one step after all of X)
# and on schedule 2 (a first chunk a quarter of the others, dW in row
# blocks each downloaded while the next computes; daemon/stream.h), with
# each streamed job's GPU timeline (the reply's stream_us, medians over the
# reps; proto/README.md).
#
#   scripts/device_stream2.sh BUNDLE
#
# BUNDLE (../shared/device/bundle.sh) holds vkgradd and vkgrad of this
# branch, made here and carried (run's carry: [BUNDLE]):
#   make -j2 all test-build &&
#   ../shared/device/bundle.sh .device-bundle-stream2 build/vkgradd build/vkgrad build/tests/test_stream
# then on the device:  scripts/device_stream2.sh .device-bundle-stream2
# With bin/test_stream in the bundle it first runs that test on the GPU
# (the validation layer when the bundle has it, BUNDLE_VALIDATION=1; else
# VKGRAD_TEST_VALIDATION=0): streamed jobs on the transfer queues, both
# schedules, must give the unstreamed jobs' bits; STREAM2_TEST=0 skips it.
#
# Runs, each on a daemon of its own (regions raised to fit the job), each
# `vkgrad bench --kernels --json` (variant auto, outputs checked against the
# float64 reference, sampled) then `vkgrad stats`:
#   off         --stream-chunk-bytes off                 bf16, f16, f32
#   schedule1   auto chunks, schedule 1 (the default)     bf16, f16, f32
#   schedule2   auto chunks (16 MiB), --log-level debug  bf16, f16, f32
#               (every step's timestamps on log.txt)
#   s2_untimed  auto chunks, VKGRAD_STREAM_TIMESTAMPS=0  bf16, f32
#               (what the steps' timestamps cost: no timeline)
#   s2_chunk32  32 MiB chunks                            bf16, f32
#   s2_chunk8   8 MiB chunks                             bf16
# STREAM_SHAPE=B,I,O replaces the shape (a try on lavapipe with small ones).
# About 90 s on the H200 (test_stream included); every step has a time limit.
# Files in $OUT: test_stream.txt (when run), stream.jsonl (each group after a
# {"run": ...} line), stats.txt, log.txt (daemon logs with the steps,
# `vkgradd --list-devices` with the queue families); the summary is printed
# at the end: per run and dtype end_to_end_us, gpu_us (the kernels' span)
# and the timeline, then the round trip's stages (the traces' medians:
# where the time outside the GPU went).
set -u
B=${1:-}
SHAPE=${STREAM_SHAPE:-8192,4096,4096}
O=${OUT:-/tmp/vkgrad-stream2}
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

if [ -x "$B/bin/test_stream" ] && [ "${STREAM2_TEST:-1}" != 0 ]; then
	val=1
	[ -d "$B/layers" ] || val=0
	say "test_stream (validation layer: $val)"
	(. "$B/env.sh" && BUILD="$B/bin" VKGRAD_TEST_VALIDATION=$val timeout 150 "$B/bin/test_stream") \
		>"$O/test_stream.txt" 2>&1
	echo "test_stream: exit status $?" | tee -a "$LOG"
	grep -E "cases|dW steps|stream_queues|PASSED|FAILED|differs|timeline" "$O/test_stream.txt" | head -24
fi

D=$(mktemp -d)
. "$(dirname "$0")/device_lib.sh"
# run LABEL DTYPES DAEMON_ARGS...: a daemon with those arguments (and
# RUN_ENV in its environment), the bench, its stats
run() {
	label=$1 dtypes=$2
	shift 2
	dev_run "$label" "$B" "$dtypes" "$SHAPE" "$@"
}
run off bf16,f16,f32 --stream-chunk-bytes off
RUN_ENV=VKGRAD_STREAM_SCHEDULE=1 run schedule1 bf16,f16,f32 --stream-chunk-bytes auto
RUN_ENV=VKGRAD_STREAM_SCHEDULE=2 run schedule2 bf16,f16,f32 --stream-chunk-bytes auto --log-level debug
RUN_ENV="VKGRAD_STREAM_SCHEDULE=2 VKGRAD_STREAM_TIMESTAMPS=0" run s2_untimed bf16,f32 --stream-chunk-bytes auto
RUN_ENV=VKGRAD_STREAM_SCHEDULE=2 run s2_chunk32 bf16,f32 --stream-chunk-bytes 33554432
RUN_ENV=VKGRAD_STREAM_SCHEDULE=2 run s2_chunk8 bf16 --stream-chunk-bytes 8388608
run s1_chunk32 bf16,f32 --stream-chunk-bytes 33554432
rm -rf "$D"
say "done"
echo "--- per run and dtype: end_to_end_us (the client's round trip), gpu_us (kernels' span), the timeline (µs)"
STAGES=1 dev_summary "$J"
grep -E "stream_(chunk_bytes|jobs)|^---" "$O/stats.txt"
grep -E "steps; span" "$LOG" | tail -3
