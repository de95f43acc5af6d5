#!/bin/sh
# The closing H200 runs of 2026-12-03's second session, in two parts that
# each fit one `run` call (under 10 minutes), the machine kept warm between:
#
#   scripts/device_closing.sh a BEFORE AFTER   (~6 min)
#     1. correctness after the refactors: device_coopmat_check.sh coopmat_khr
#        (22 tile-edge shapes x f16/bf16 x 7 output subsets x overwrite/
#        accumulate) and device_check.sh (13 shapes, f32 auto), float64 refs;
#     2. device_datapath.sh BEFORE AFTER: `bench --compare --json` both
#        bundles, tiny lines with 1 and 16 synchronous clients, the polling
#        knobs and the client wait spin, torch_multiproc.py 1 16 with and
#        without MPS;
#     3. `vkgrad bench --kernels` 8192x4096x4096, 16384x8192x8192 and
#        2048x1024x1024 for bf16, f16, f32 (variant auto; GPU time and end to
#        end from client memory), then torch_linear_backward.py, same run.
#   scripts/device_closing.sh b BEFORE AFTER   (~3 min)
#     4. device_stream.sh AFTER (streamed jobs off/auto/chunk sizes; its
#        test_stream on the GPU when the bundle has it);
#     5. device_f32_tune.sh AFTER $F32_TILINGS (f32 tilings of tiled128);
#     6. the other cooperative-matrix families' tile-edge checks.
#
# BEFORE: bundle of f532916 (this session's start); AFTER: bundle of the
# closing commit (bin/vkgradd, bin/vkgrad, bin/test_stream, the torch
# anchors copied beside). Outputs: $OUT/closing_<part>.tar.gz and
# $OUT/summary_<part>.txt.
set -u
PART=${1:?usage: device_closing.sh a|b BEFORE AFTER}
BEFORE=$2 AFTER=$3
O=${OUT:-/tmp/out}
W=$(mktemp -d)
S="$O/summary_$PART.txt"
: >"$S"
say() { echo "=== $* ($(date -u +%T))" | tee -a "$S"; }
. scripts/device_lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv 2>&1 | tee -a "$S"
if [ "$PART" = a ]; then
	mkdir -p "$W/check" "$W/datapath" "$W/kernels"
	say "1. coopmat_khr tile-edge check"
	(. "$AFTER/env.sh" && timeout 100 scripts/device_coopmat_check.sh "$AFTER/bin" coopmat_khr) \
		>"$W/check/coopmat_khr.log" 2>&1
	echo "rc=$?" | tee -a "$S"; tail -1 "$W/check/coopmat_khr.log" | tee -a "$S"
	say "1. plain kernels (device_check.sh)"
	(. "$AFTER/env.sh" && timeout 120 scripts/device_check.sh "$AFTER/bin") >"$W/check/check.log" 2>&1
	echo "rc=$?" | tee -a "$S"; tail -1 "$W/check/check.log" | tee -a "$S"
	say "2. data path"
	OUT="$W/datapath" timeout 250 scripts/device_datapath.sh "$BEFORE" "$AFTER" 2>&1 | tail -45 | tee -a "$S"
	dev_kernels_table "$AFTER" "$W/kernels" "3."
else
	mkdir -p "$W/stream" "$W/f32" "$W/check"
	say "4. streamed jobs"
	OUT="$W/stream" timeout 200 sh scripts/device_stream.sh "$AFTER" 2>&1 | tail -30 | tee -a "$S"
	say "5. f32 tilings: ${F32_TILINGS:-default list}"
	OUT="$W/f32" timeout 150 sh scripts/device_f32_tune.sh "$AFTER" ${F32_TILINGS:-} 2>&1 | tail -12 | tee -a "$S"
	for v in coopmat_nv2 coopmat; do
		dts="f16 bf16"; [ "$v" = coopmat ] && dts=f16
		say "6. $v tile-edge check ($dts)"
		(. "$AFTER/env.sh" && timeout 60 scripts/device_coopmat_check.sh "$AFTER/bin" "$v" "$dts") \
			>"$W/check/$v.log" 2>&1
		echo "rc=$?" | tee -a "$S"; tail -1 "$W/check/$v.log" | tee -a "$S"
	done
fi
say "done"
tar -C "$W" -czf "$O/closing_$PART.tar.gz" .
