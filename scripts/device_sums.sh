#!/bin/sh
# Issue 15, resumed dW (daemon/stream.h): on the GPU machine, end to end
# from client memory for 8192x4096x4096 (STREAM_SHAPE) with the session
# start's build against this one, alternated twice, and this one with
# VKGRAD_STREAM_SUMS=0 (the same build, dW after all of X) and two other
# chunk sizes; first test_stream on the GPU (coopmat_nv2's resumed chunks
# must give the unstreamed bits there).
#
#   scripts/device_sums.sh BEFORE AFTER
#
# BEFORE and AFTER are bundles (../shared/device/bundle.sh) with bin/vkgradd
# and bin/vkgrad; AFTER's bin/test_stream, when there, runs first
# (VKGRAD_TEST_VALIDATION=0: Debian 12's layer predates the H200's feature
# structs). Each run: a daemon of its own, `vkgrad bench --kernels --json`
# (variant auto, outputs checked against float64, sampled), its stats.
# Files in $OUT: test_stream.txt, sums.jsonl, stats.txt, log.txt; the
# summary (per run and dtype: end_to_end_us, gpu_us, ok, the timeline)
# at the end. About 150 s on the H200.
set -u
BEF=${1:-} AFT=${2:-}
SHAPE=${STREAM_SHAPE:-8192,4096,4096}
O=${OUT:-/tmp/vkgrad-sums}
for b in "$BEF" "$AFT"; do
	[ -n "$b" ] && [ -x "$b/bin/vkgradd" ] && [ -x "$b/bin/vkgrad" ] || {
		echo "usage: $0 BEFORE AFTER (bundles with bin/vkgradd, bin/vkgrad, env.sh)" >&2
		exit 2
	}
done
case $BEF in /*) ;; *) BEF=$PWD/$BEF ;; esac
case $AFT in /*) ;; *) AFT=$PWD/$AFT ;; esac
mkdir -p "$O"
LOG="$O/log.txt" J="$O/sums.jsonl"
: >"$LOG"
: >"$J"
: >"$O/stats.txt"
T0=$(date +%s)
say() { echo "=== $* (t+$(($(date +%s) - T0)) s)" | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >>"$LOG" 2>&1

. "$(dirname "$0")/device_lib.sh"
if [ -x "$AFT/bin/test_stream" ] && [ "${SUMS_TEST:-1}" != 0 ]; then
	say "test_stream on the GPU"
	dev_test_stream "$AFT" "$O/test_stream.txt"
	echo "test_stream: exit status $?" | tee -a "$LOG"
	grep -E "cases|dW steps|skipped|PASSED|FAILED|differs|over tol" "$O/test_stream.txt" | head -30
fi

D=$(mktemp -d)
# run LABEL BUNDLE DTYPES DAEMON_ARGS...: a daemon of BUNDLE with those
# arguments (RUN_ENV in its environment), the bench, its stats
run() {
	label=$1 b=$2 dtypes=$3
	shift 3
	dev_run "$label" "$b" "$dtypes" "$SHAPE" "$@"
}
run before1 "$BEF" bf16,f16,f32
run after1 "$AFT" bf16,f16,f32
run before2 "$BEF" bf16,f16,f32
run after2 "$AFT" bf16,f16,f32
RUN_ENV=VKGRAD_STREAM_SUMS=0 run after_nosums "$AFT" bf16,f32
run after_chunk32 "$AFT" bf16,f32 --stream-chunk-bytes 33554432
run after_chunk8 "$AFT" bf16 --stream-chunk-bytes 8388608
run after_chunk4 "$AFT" bf16 --stream-chunk-bytes 4194304
run after_off "$AFT" bf16 --stream-chunk-bytes off
rm -rf "$D"
say "done"
echo "--- per run and dtype: end_to_end_us (the client's round trip), gpu_us (kernels' span), the timeline (µs)"
dev_summary "$J"
grep -E "stream_(chunks|jobs|dw_blocks)|^---" "$O/stats.txt" | head -40
