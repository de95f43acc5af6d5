#!/bin/sh
# The GPU-machine run of `vkgrad bench --peak`'s workgroup-scope lines
# (VK_NV_cooperative_matrix2; bench/cli_bench_peak.c,
# shaders/bench_peak_nv2.comp): does linear_coopmat_nv2_gemm lose its time in
# the multiply itself or in its tensor-layout loads? Given a bundle folder
# (BUNDLE/bin/vkgrad, BUNDLE/env.sh if any; ../shared/device/bundle.sh):
#   1. nv2_regs (A and B loaded once: the workgroup-scope multiply-adds
#      alone), nv2_load (each step's A and B through unclamped tensor layouts
#      from small L2-resident buffers, A as [m][k]: the GEMM's dX loop) and
#      nv2_load_dw (A stored [k][m], read transposed: its dW loop), f16 and
#      bf16, on the GEMM's default tiling (128x256x64, 256 threads):
#      nv2peak.jsonl
#   2. nv2_smem (the same loads from one k-slice in shared memory; 48 KiB of
#      the workgroup's own beside what the driver reserves for its matrices,
#      which the driver may refuse -- hence a run of its own):
#      nv2peak_smem.jsonl
#   3. bf16 nv2_regs and nv2_load on the second-best measured tiling
#      (VKGRAD_NV2_TILE=128x128x32x128): nv2peak_tile128.jsonl
# 8 workgroups per SM (1,056 on an H200: whole waves at 1, 2, 4 or 8
# resident per SM; each line reads back 132 MiB), 10 ms per dispatch, 3 reps;
# every line's whole output checked exactly against float64. About 15 s.
# stderr in nv2peak_stderr.log. Exit status: 1 when any line failed its
# check or a run failed.
#   OUT=dir scripts/device_nv2peak.sh BUNDLE
set -u
B=${1:?usage: device_nv2peak.sh BUNDLE}
O=${OUT:-/tmp}
[ -f "$B/env.sh" ] && . "$B/env.sh"
rc=0
run() { # OUTFILE SECONDS ARGS...
	f=$1 t=$2
	shift 2
	timeout "$t" "$B/bin/vkgrad" bench --peak --json --wgs-per-sm 8 --ms 10 --reps 3 "$@" >"$O/$f" \
		2>>"$O/nv2peak_stderr.log" || { echo "device_nv2peak: $f: exit $?"; rc=1; }
}
: >"$O/nv2peak_stderr.log"
echo "=== 1. nv2_regs, nv2_load, nv2_load_dw (default tiling)"
run nv2peak.jsonl 40 --only nv2_regs,nv2_load,nv2_load_dw
echo "=== 2. nv2_smem"
run nv2peak_smem.jsonl 20 --only nv2_smem
echo "=== 3. bf16 on 128x128x32x128"
VKGRAD_NV2_TILE=128x128x32x128 run nv2peak_tile128.jsonl 20 --only nv2_regs,nv2_load --dtypes bf16
for f in nv2peak.jsonl nv2peak_smem.jsonl nv2peak_tile128.jsonl; do
	sed -n 's/.*"kernel":"\([a-z_0-9]*\)","dtype":"\([a-z0-9]*\)".*"shape":\(\[[0-9,]*\]\).*"workgroups":\([0-9]*\),"threads":\([0-9]*\).*"tflops":\([0-9.e+]*\),"tflops_best":\([0-9.e+]*\),"registers":\([0-9a-z]*\).*"ok":\([a-z]*\).*/\1 \2 \3 x\5: \4 workgroups, \6 TFLOP\/s (best \7), registers \8, ok \9/p; s/.*"kernel":"\([a-z_0-9]*\)","dtype":"\([a-z0-9]*\)","unsupported":"\([^"]*\)".*/\1 \2 unsupported: \3/p' \
		"$O/$f"
done
grep -c '"ok":true' "$O/nv2peak.jsonl" "$O/nv2peak_smem.jsonl" "$O/nv2peak_tile128.jsonl"
if grep -q '"ok":false' "$O/nv2peak.jsonl" "$O/nv2peak_smem.jsonl" "$O/nv2peak_tile128.jsonl"; then
	echo "device_nv2peak: a check FAILED"
	rc=1
fi
grep -E "matrix extensions|bench --peak" "$O/nv2peak_stderr.log" | cut -c1-300 | sort -u
echo "device_nv2peak: rc=$rc"
exit $rc
