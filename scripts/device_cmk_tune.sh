#!/bin/sh
# One GPU-machine run from a bundle (bin/vkgradd, bin/vkgrad, this script and
# device_coopmat_check.sh beside it) while bringing up linear_coopmat_khr_gemm:
# what the driver offers and compiled (debug log: registers per pipeline),
# the tile-edge correctness check, then bench --kernels lines for several
# tilings (VKGRAD_CMK_TILE) and the families side by side. Outputs in $OUT.
B=$(dirname "$0"); O=${OUT:-/tmp}
sum() { python3 -c '
import json,sys
for l in open(sys.argv[1]):
    try: j=json.loads(l)
    except Exception: print(l.strip()[:160]); continue
    if "gpu_us" in j: print(j["shape"],j["dtype"],j["variant"],j["outputs"],"gpu",j["gpu_us"],"tf",j["tflops"],"ok",j["ok"],j["max_rel_err"])
    else: print(j.get("shape"),j.get("dtype"),j.get("variant"),str(j.get("error",j.get("skipped")))[:150])
' "$1"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
echo "=== daemon at debug level"
d=$(mktemp -d)
$B/bin/vkgradd --socket $d/s --cache-dir $d/c --log-level debug 2> $O/daemon_debug.log & p=$!
for i in $(seq 1 300); do $B/bin/vkgrad --socket $d/s ping >/dev/null 2>&1 && break; sleep 0.1; done
$B/bin/vkgrad --socket $d/s info | grep -i "coopmat\|device\|driver"
kill $p; wait $p
grep -E "matrix extensions|coopmat|not served" $O/daemon_debug.log | cut -c1-400
echo "=== tile-edge check"
timeout 300 sh $B/device_coopmat_check.sh $B/bin > $O/check.log 2>&1; echo rc=$?; tail -5 $O/check.log
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,utilization.gpu --format=csv -lms 500 > $O/clocks.csv 2>&1 & np=$!
for t in 2x2x64x64 2x4x64x32 4x2x32x64 1x2x64x64 2x2x32x64; do
	echo "=== tile $t"
	VKGRAD_CMK_TILE=$t timeout 90 $B/bin/vkgrad bench --kernels --json --shapes "8192,4096,4096;2048,1024,1024" --dtypes f16,bf16 --variants coopmat_khr > $O/tile_$t.jsonl 2>&1; sum $O/tile_$t.jsonl
done
echo "=== per output, default tile"
for o in dw dx; do timeout 60 $B/bin/vkgrad bench --kernels --json --shapes "8192,4096,4096" --dtypes f16,bf16 --variants coopmat_khr,coopmat --outputs $o; done > $O/per_output.jsonl 2>&1; sum $O/per_output.jsonl
echo "=== families"
timeout 150 $B/bin/vkgrad bench --kernels --json --shapes "8192,4096,4096;16384,8192,8192;2048,1024,1024" --dtypes f16,bf16 --variants coopmat_khr,coopmat,auto > $O/families.jsonl 2>&1; sum $O/families.jsonl
kill $np
