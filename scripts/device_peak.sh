#!/bin/sh
# The GPU-machine run of `vkgrad bench --peak` (bench/cli_bench_peak.c): the
# ceilings Vulkan gives this device, in well under a minute, given a bundle
# folder (BUNDLE/bin/vkgrad, BUNDLE/env.sh if any; ../shared/device/bundle.sh):
#   1. every line with the defaults: mma_regs and mma_smem (KHR cooperative-
#      matrix multiply-adds at subgroup scope, the device's shape, f16 and
#      bf16, 4/8/16 accumulators per subgroup; mma_smem_dw: the A tile
#      k-major), fma_f32 (4/8/16 vec4
#      chains) and fma_outer (the same FMAs as a 2x8/4x8/8x8 outer product,
#      a GEMM's thread tile), 16 workgroups per SM, each line's values
#      checked exactly against float64: peak.txt (table) and peak.jsonl
#   2. occupancy: bf16 mma_regs (8 accumulators), mma_smem and mma_smem_dw
#      (16, the GEMM's 4x4 fragments per subgroup; A as [m][k] as its dX
#      pass, as [k][m] as its dW pass) at 1, 2, 4 and 8 workgroups of 4
#      subgroups per SM -- linear_coopmat_khr_gemm runs 2 per SM (239
#      registers): what its inner loop can reach at its own occupancy:
#      peak_occupancy.jsonl
# stderr (the device's description, the driver's statistics) in peak_stderr.log;
# the SM clock and power every 200 ms throughout in clocks.csv (a line at a
# lower clock than another says so: FP32 FMA at full rate can hit the power
# limit).
# Exit status: 1 when any line failed its check or the bench failed.
#   OUT=dir scripts/device_peak.sh BUNDLE
set -u
B=${1:?usage: device_peak.sh BUNDLE}
O=${OUT:-/tmp}
[ -f "$B/env.sh" ] && . "$B/env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv 2>&1 | tail -1
rc=0
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 200 >"$O/clocks.csv" 2>&1 &
smi=$!
echo "=== bench --peak"
timeout 25 "$B/bin/vkgrad" bench --peak 2>"$O/peak_stderr.log" | tee "$O/peak.txt" || rc=1
grep -E "matrix extensions|using device" "$O/peak_stderr.log" | cut -c1-200
timeout 25 "$B/bin/vkgrad" bench --peak --json --reps 3 --ms 10 >"$O/peak.jsonl" 2>>"$O/peak_stderr.log" || rc=1
echo "=== occupancy (bf16): workgroups of 4 subgroups per SM"
: >"$O/peak_occupancy.jsonl"
for w in 1 2 4 8; do
	timeout 10 "$B/bin/vkgrad" bench --peak --json --only mma_regs --dtypes bf16 --accs 8 --wgs-per-sm $w \
		--ms 10 --reps 3 >>"$O/peak_occupancy.jsonl" 2>>"$O/peak_stderr.log" || rc=1
	timeout 10 "$B/bin/vkgrad" bench --peak --json --only mma_smem,mma_smem_dw --dtypes bf16 --accs 16 \
		--wgs-per-sm $w --ms 10 --reps 3 >>"$O/peak_occupancy.jsonl" 2>>"$O/peak_stderr.log" || rc=1
done
sed 's/.*"kernel":"\([a-z_0-9]*\)".*"accs":\([0-9]*\).*"workgroups":\([0-9]*\).*"tflops":\([0-9.e+]*\).*"registers":\([0-9a-z]*\).*"ok":\([a-z]*\).*/\1 accs \2: \3 workgroups, \4 TFLOP\/s, registers \5, ok \6/' \
	"$O/peak_occupancy.jsonl"
grep -c '"ok":true' "$O/peak.jsonl" "$O/peak_occupancy.jsonl"
if grep -q '"ok":false' "$O/peak.jsonl" "$O/peak_occupancy.jsonl"; then
	echo "device_peak: a check FAILED"
	rc=1
fi
kill $smi 2>/dev/null
wait $smi 2>/dev/null
echo "SM clock MHz over the run (min / max), power W (max):" $(sed 's/ MHz//; s/ W//' "$O/clocks.csv" |
	awk -F', ' '$2+0 > 0 {c = $2 + 0; p = $3 + 0; if (!n++ || c < lo) lo = c; if (c > hi) hi = c;
		if (p > pw) pw = p} END {print lo " / " hi ", " pw}')
echo "device_peak: rc=$rc"
exit $rc
