#!/bin/sh
# One GPU-machine run from a bundle (bin/vkgradd, bin/vkgrad, this script and
# device_coopmat_check.sh beside it) for tuning linear_coopmat_khr_gemm: for
# each tiling (VKGRAD_CMK_TILE="WMxWNxwmxwnxBKxDEPTH", see daemon/pipelines.c)
# the compiler's registers (daemon log at debug level) and `bench --kernels`
# lines for a large and a small layer; the tile-edge check under the tilings
# named in CHECK; the families side by side. Outputs in $OUT.
#   device_cmk_tune.sh [TILING...]
B=$(dirname "$0"); O=${OUT:-/tmp}
sum() { python3 -c '
import json,sys
for l in open(sys.argv[1]):
    try: j=json.loads(l)
    except Exception: print(l.strip()[:160]); continue
    if "gpu_us" in j: print(j["shape"],j["dtype"],j["variant"],j["outputs"],"gpu",j["gpu_us"],"tf",j["tflops"],"ok",j["ok"],j["max_rel_err"])
    else: print(j.get("shape"),j.get("dtype"),j.get("variant"),str(j.get("error",j.get("skipped")))[:150])
' "$1"; }
regs() { # the registers of each coopmat_khr pipeline under tiling $1
	d=$(mktemp -d)
	VKGRAD_CMK_TILE=$1 $B/bin/vkgradd --socket $d/s --cache-dir $d/c --log-level debug 2> $d/log & p=$!
	for i in $(seq 1 300); do $B/bin/vkgrad --socket $d/s ping >/dev/null 2>&1 && break; sleep 0.1; done
	kill $p; wait $p
	grep -E "coopmat_khr" $d/log | sed 's/.*pipeline //; s/Binary Size=[0-9]*; //; s/Local Memory Size=[0-9]*; //' | cut -c1-160
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,utilization.gpu --format=csv -lms 500 > $O/clocks.csv 2>&1 & np=$!
for t in "$@"; do
	echo "=== tiling $t"
	regs $t
	VKGRAD_CMK_TILE=$t timeout 60 $B/bin/vkgrad bench --kernels --json --shapes "8192,4096,4096;2048,1024,1024" --dtypes f16,bf16 --variants coopmat_khr >> $O/tilings.jsonl 2>&1
	tail -4 $O/tilings.jsonl > $O/t.jsonl; sum $O/t.jsonl
done
for t in $CHECK; do
	echo "=== tile-edge check, tiling $t"
	VKGRAD_CMK_TILE=$t timeout 150 sh $B/device_coopmat_check.sh $B/bin > $O/check_$t.log 2>&1; echo rc=$?; tail -2 $O/check_$t.log
done
for t in $BIG; do
	echo "=== 16384x8192x8192, tiling $t"
	VKGRAD_CMK_TILE=$t timeout 60 $B/bin/vkgrad bench --kernels --json --shapes "16384,8192,8192" --dtypes f16,bf16 --variants coopmat_khr >> $O/big.jsonl 2>&1
	tail -2 $O/big.jsonl > $O/t.jsonl; sum $O/t.jsonl
done
rm -f $O/t.jsonl
kill $np
