#!/bin/sh
# The last H200 run of 2026-12-03's fifth session, on the final build (a
# bundle with bin/vkgradd, bin/vkgrad, bin/test_stream and the torch anchors):
#   [OUT=DIR] scripts/device_final5.sh AFTER
# 1. test_stream on the GPU; 2. `vkgrad bench --kernels` 8192x4096x4096,
# 16384x8192x8192, 2048x1024x1024, bf16/f16/f32 (auto), then
# torch_linear_backward.py, closing_table.py of the two; 3. 8192x4096x4096
# with streaming off (the kernels alone).
set -u
AFTER=${1:?usage: device_final5.sh AFTER}
case $AFTER in /*) ;; *) AFTER=$PWD/$AFTER ;; esac
O=${OUT:-/tmp/final5}
mkdir -p "$O"
S="$O/summary.txt"
: >"$S"
say() { echo "=== $* ($(date -u +%T))" | tee -a "$S"; }
. scripts/device_lib.sh
dev_closing_kernels "$AFTER" "$O"
say done
