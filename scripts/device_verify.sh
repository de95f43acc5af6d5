#!/bin/sh
# After the day's refactors (named push constants, interface checks) and the
# f32 split variant: the correctness sweeps on the H200, one run.
#   scripts/device_verify.sh BUNDLE      (bundle of build/vkgradd build/vkgrad)
# (in this order: coopmat_khr, the f32 split, plain kernels, the other
# cooperative-matrix variants, so a short run still covers the first)
# 1. device_check.sh: 13 shapes x every output subset x overwrite/accumulate,
#    f32, auto (plain kernels), each against float64;
# 2. device_coopmat_check.sh for coopmat_khr, coopmat (NV, f16) and
#    coopmat_nv2: 22 tile-edge shapes x f16/bf16 x 7 output subsets x
#    overwrite/accumulate;
# 3. scripts/device_f32x3.sh where present (the f32 tensor-core split).
# Prints rc and summary lines; outputs under $OUT.
set -u
B=$1
O=${OUT:-/tmp/out}
. "$B/env.sh"
bin=$B/bin
for v in coopmat_khr; do
	echo "=== device_coopmat_check.sh $v ($(date -u +%T))"
	timeout 100 scripts/device_coopmat_check.sh "$bin" "$v" >"$O/coopmat_$v.log" 2>&1; echo "rc=$?"
	tail -3 "$O/coopmat_$v.log"
done
if [ -x scripts/device_f32x3.sh ]; then
	echo "=== device_f32x3.sh ($(date -u +%T))"
	timeout 150 scripts/device_f32x3.sh "$B" >"$O/f32x3.log" 2>&1; echo "rc=$?"
	tail -30 "$O/f32x3.log"
fi
echo "=== device_check.sh ($(date -u +%T))"
timeout 150 scripts/device_check.sh "$bin" >"$O/check.log" 2>&1; echo "rc=$?"
grep -E "FAILED|worst|checked|kernels" "$O/check.log" | tail -8
for v in coopmat coopmat_nv2; do
	# VK_NV_cooperative_matrix (variant coopmat) has f16 only
	dts="f16 bf16"; [ "$v" = coopmat ] && dts=f16
	echo "=== device_coopmat_check.sh $v $dts ($(date -u +%T))"
	timeout 100 scripts/device_coopmat_check.sh "$bin" "$v" "$dts" >"$O/coopmat_$v.log" 2>&1; echo "rc=$?"
	tail -3 "$O/coopmat_$v.log"
done
echo "=== done ($(date -u +%T))"
