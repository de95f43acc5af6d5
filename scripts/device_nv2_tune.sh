#!/bin/sh
# One GPU-machine run from a bundle (bin/vkgradd, bin/vkgrad, this script and
# device_coopmat_check.sh beside it) for tuning linear_coopmat_nv2_gemm
# (VKGRAD_NV2_TILE="BMxBNxBKxTHREADS[xUNCLAMP[xUNROLL[xDBAPART]]]", daemon/nv2_tile.h).
# For each tiling: a daemon with it at debug level (what the device lists
# for workgroup-scope matrices, the tiling it took or why it refused, and
# the compiler's registers and shared memory per nv2 pipeline), then
# `bench --kernels` against that daemon for a large and a small layer, f16
# and bf16; then the tile-edge check (device_coopmat_check.sh, variant
# coopmat_nv2) under the tilings in $CHECK, and 16384x8192x8192 under those
# in $BIG; last, the lines side by side, fastest first (with coopmat_khr's,
# timed by the first tiling's daemon, as "ref:coopmat_khr").
#   [CHECK="T..."] [BIG="T..."] [OUT=DIR] device_nv2_tune.sh [TILING...]
# Files in $OUT (five): tilings.jsonl (bench lines, each with its "tiling"),
# big.jsonl, regs.log (the daemons' nv2 lines), checks.log, clocks.csv.
#
# The default tilings (18; device_cmk_tune.sh took about 8 s a tiling on
# the H200, 2.5 min in all with its checks, so about 4 min here) suit what
# the H200 lists (measurements/h200-2026-12-03/nv2-flexible-dims.txt: 256
# invocations at most, 32x32x16 granularity at 256, 32x16x16 at 128): the
# kernel as first measured, then one change at a time -- unclamped interior
# loads, unrolled k loops, BK 64, llama.cpp's coopmat2 tiles (ggml-vulkan.cpp
# for coopmat2: 256 threads with 128x128 and 128x256, 128 threads with
# 64x64, all BK 64, 8 k steps per trip of its unclamped loop) clamped and
# unclamped, db in workgroups of its own (DBAPART: dW's tiles without the
# row-sum accumulator), their transpose 256x128, BK 128 and BK 16, 128
# threads, and 64x128 tiles (more workgroups for 2048x1024x1024, whose dW
# has 64 tiles of 128x128 for 132 SMs). The checks cover both db paths,
# unroll 4 and 8, BN 256 and BK 64.
B=$(dirname "$0"); O=${OUT:-/tmp}
TILINGS=${*:-"128x128x32x256 128x128x32x256x1x1 128x128x32x256x1x4 128x128x32x256x1x4x1
128x128x64x256x1x8 128x128x64x256x1x8x1 128x256x64x256x0x1 128x256x64x256x1x8 128x256x64x256x1x8x1
128x256x32x256x1x4 256x128x64x256x1x8 256x128x64x256x1x8x1 256x128x32x256x1x4x1 128x128x128x256x1x2
128x128x16x256x1x8 128x128x32x128x1x4 64x128x64x128x1x8 64x64x64x128x1x8"}
CHECK=${CHECK-"128x128x32x256x1x4x1 128x256x64x256x1x8"}
BIG=${BIG-"128x128x32x256 128x256x64x256x1x8x1"}
C=$(mktemp -d) # one pipeline cache for every daemon: only the nv2 pipelines compile again
# what `bench --kernels` raises for its private daemon (any of these shapes fits)
LIM="--max-region-bytes 8589934592 --max-total-region-bytes 68719476736 --max-region-bytes-per-uid 68719476736"
: > $O/tilings.jsonl; : > $O/big.jsonl; : > $O/regs.log; : > $O/checks.log
sum() { python3 -c '
import json,sys
for l in open(sys.argv[1]):
    try: j=json.loads(l)
    except Exception: print("  "+l.strip()[:200]); continue
    if "gpu_us" in j: print(" ",j["shape"],j["dtype"],j["variant"],"gpu",j["gpu_us"],"tf",j["tflops"],"ok",j["ok"],j["max_rel_err"])
    else: print(" ",j.get("shape"),j.get("dtype"),j.get("variant"),str(j.get("error",j.get("skipped")))[:200])
' "$1" 2>/dev/null || cat "$1"; }
# up T: a daemon with tiling T at debug level ($d, $p); 0 once it answers
up() {
	d=$(mktemp -d)
	VKGRAD_NV2_TILE=$1 timeout 300 $B/bin/vkgradd --socket $d/s --cache-dir $C --log-level debug $LIM 2> $d/log & p=$!
	for i in $(seq 1 600); do
		$B/bin/vkgrad --socket $d/s ping >/dev/null 2>&1 && return 0
		kill -0 $p 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
down() { kill $p 2>/dev/null; wait $p 2>/dev/null; }
# the daemon's nv2 lines: the device's list, the tiling, refusals, registers
nv2lines() {
	grep -E "cooperative_matrix2|NV2_TILE|coopmat_nv2|nv2_gemm" $d/log | grep -v "client pid" |
		sed 's/^vkgradd: //; s/Binary Size=[0-9]*; //; s/Local Memory Size=[0-9]*; //; s/Stack Size=[0-9]*; //'
}
# bench T FILE SHAPES [VARIANTS]: bench --kernels lines of tiling T against
# daemon $d, each tagged with T (another variant's lines: with "ref:VARIANT")
bench() {
	timeout 120 $B/bin/vkgrad --socket $d/s bench --kernels --json --shapes "$3" --dtypes f16,bf16 \
		--variants ${4:-coopmat_nv2} > $d/b.jsonl 2>&1
	echo "  bench rc=$?"
	sum $d/b.jsonl
	python3 -c '
import json,sys
for l in open(sys.argv[1]):
    try: j=json.loads(l); v=j.get("variant","coopmat_nv2"); j["tiling"]=sys.argv[2] if v=="coopmat_nv2" else "ref:"+v; print(json.dumps(j))
    except Exception: print(json.dumps({"tiling":sys.argv[2],"error":l.strip()[:300]}))
' $d/b.jsonl "$1" >> "$2" 2>/dev/null || cat $d/b.jsonl >> "$2"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,utilization.gpu --format=csv -lms 500 > $O/clocks.csv 2>&1 & np=$!
first=1
for t in $TILINGS; do
	echo "=== tiling $t"
	if up $t; then
		echo "=== tiling $t" >> $O/regs.log; nv2lines >> $O/regs.log
		if [ $first = 1 ]; then nv2lines | grep "for f16\|for bf16\|matrix extensions" | cut -c1-400; first=0; fi
		nv2lines | grep -E "pipeline linear_coopmat_nv2|VKGRAD_NV2_TILE" | cut -c1-220
		# the first tiling's daemon also times coopmat_khr, for reference in the same run
		bench $t $O/tilings.jsonl "8192,4096,4096;2048,1024,1024" coopmat_nv2${ref-,coopmat_khr}; ref=""
	else
		echo "  daemon did not start:"; grep -E "error|NV2|nv2" $d/log | tail -3 | cut -c1-600
		echo "=== tiling $t (no daemon)" >> $O/regs.log; tail -5 $d/log >> $O/regs.log
		echo "{\"tiling\":\"$t\",\"error\":\"daemon did not start: $(grep -E 'error' $d/log | tail -1 | tr -d '"\\' | cut -c1-300)\"}" >> $O/tilings.jsonl
	fi
	down; rm -rf $d
done
for t in $CHECK; do
	echo "=== tile-edge check, tiling $t"
	echo "=== tiling $t" >> $O/checks.log
	VKGRAD_NV2_TILE=$t timeout 200 sh $B/device_coopmat_check.sh $B/bin coopmat_nv2 >> $O/checks.log 2>&1
	echo "  rc=$?"; tail -2 $O/checks.log
done
for t in $BIG; do
	echo "=== 16384x8192x8192, tiling $t"
	if up $t; then bench $t $O/big.jsonl "16384,8192,8192"; else echo "  daemon did not start"; fi
	down; rm -rf $d
done
kill $np 2>/dev/null
echo "=== side by side (gpu_us; fastest 8192x4096x4096 bf16 first)"
python3 -c '
import json,sys
rows={}
cols=["8192x4096x4096 f16","8192x4096x4096 bf16","2048x1024x1024 f16","2048x1024x1024 bf16","16384x8192x8192 f16","16384x8192x8192 bf16"]
for f in sys.argv[1:]:
    for l in open(f):
        try: j=json.loads(l)
        except Exception: continue
        t=j.get("tiling","?"); r=rows.setdefault(t,{})
        if "shape" not in j: r.update({c:"refused" for c in cols}); continue
        sh=j.get("shape"); sh="x".join(map(str,sh)) if isinstance(sh,list) else str(sh)
        k=sh+" "+str(j.get("dtype",""))
        r[k]=("%.0f"%j["gpu_us"]+("" if j.get("ok") else "!")) if "gpu_us" in j else "err"
def key(t):
    v=rows[t].get(cols[1],"err").rstrip("!")
    return float(v) if v.replace(".","").isdigit() else 1e18
print("%-24s"%"tiling"+"".join("%22s"%c for c in cols))
for t in sorted(rows,key=key): print("%-24s"%t+"".join("%22s"%rows[t].get(c,"-") for c in cols))
' $O/tilings.jsonl $O/big.jsonl 2>/dev/null
rm -rf $C
