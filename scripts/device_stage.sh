#!/bin/sh
# coopmat_nv2 with STAGE (whole k steps through shared memory, daemon/nv2_tile.h)
# against the direct tensor loads, on the GPU machine, from a bundle B
# (bin/vkgradd, bin/vkgrad, bin/test_stream):
#   [OUT=DIR] scripts/device_stage.sh B [TILING...]
# 1. for each tiling (the first: the direct-load default): a daemon with it
#    (streaming off, debug log: registers and shared memory per pipeline),
#    `bench --kernels` 8192x4096x4096 and 2048x1024x1024, f16 and bf16,
#    each line checked against float64 (ok, max_rel_err);
# 2. device_coopmat_check.sh coopmat_nv2 (tile edges) with the first staged
#    tiling, then test_stream on the GPU with it (resumed dW through staging).
# Files in $OUT: stage.jsonl (bench lines with their "tiling"), regs.log,
# check.log, test_stream.txt; the summary on stdout.
set -u
B=${1:?usage: device_stage.sh BUNDLE [TILING...]}
shift
case $B in /*) ;; *) B=$PWD/$B ;; esac
O=${OUT:-/tmp/stage}
mkdir -p "$O"
TILINGS=${*:-"128x256x64x0x1x8x1 128x256x64x0x1x8x1x1 128x256x32x0x1x8x1x1 128x128x64x0x1x8x1x1 128x128x32x0x1x8x1x1 256x128x64x0x1x8x1x1"}
C=$(mktemp -d)
LIM="--max-region-bytes 8589934592 --max-total-region-bytes 68719476736 --max-region-bytes-per-uid 68719476736"
: >"$O/stage.jsonl"; : >"$O/regs.log"
say() { echo "=== $* ($(date -u +%T))"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv 2>&1
staged=
for t in $TILINGS; do
	case $t in *x*x*x*x*x*x*x1) [ -z "$staged" ] && staged=$t ;; esac
	say "tiling $t"
	d=$(mktemp -d)
	VKGRAD_NV2_TILE=$t timeout 200 "$B/bin/vkgradd" --socket "$d/s" --cache-dir "$C" --log-level debug \
		--stream-chunk-bytes off $LIM 2>"$d/log" &
	p=$!
	for i in $(seq 1 600); do
		"$B/bin/vkgrad" --socket "$d/s" ping >/dev/null 2>&1 && break
		kill -0 $p 2>/dev/null || break
		sleep 0.1
	done
	{ echo "## $t"; grep -E "NV2_TILE|nv2_gemm|cooperative_matrix2" "$d/log" | grep -v "client pid" | head -20; } >>"$O/regs.log"
	timeout 100 "$B/bin/vkgrad" --socket "$d/s" bench --kernels --json \
		--shapes "8192,4096,4096;2048,1024,1024" --dtypes f16,bf16 --variants coopmat_nv2 >"$d/b.jsonl" 2>&1
	echo "bench rc=$?"
	python3 -c '
import json,sys
for l in open(sys.argv[1]):
    try: j=json.loads(l)
    except Exception: print("  "+l.strip()[:200]); continue
    j["tiling"]=sys.argv[2]; print(json.dumps(j), file=open(sys.argv[3],"a"))
    print("  %s %s %s gpu %s tf %s ok %s err %s %s" % (sys.argv[2], j.get("shape"), j.get("dtype"), j.get("gpu_us"), j.get("tflops"), j.get("ok"), j.get("max_rel_err"), str(j.get("error",""))[:120]))
' "$d/b.jsonl" "$t" "$O/stage.jsonl"
	kill $p 2>/dev/null; wait $p 2>/dev/null
done
if [ -n "$staged" ]; then
	say "tile-edge check, VKGRAD_NV2_TILE=$staged"
	VKGRAD_NV2_TILE=$staged timeout 150 sh "$(dirname "$0")/device_coopmat_check.sh" "$B/bin" coopmat_nv2 >"$O/check.log" 2>&1
	echo "rc=$?"; tail -3 "$O/check.log"
	if [ -x "$B/bin/test_stream" ]; then
		say "test_stream on the GPU, VKGRAD_NV2_TILE=$staged"
		VKGRAD_NV2_TILE=$staged BUILD="$B/bin" VKGRAD_TEST_VALIDATION=0 timeout 150 "$B/bin/test_stream" >"$O/test_stream.txt" 2>&1
		echo "rc=$?"; grep -E "PASSED|FAILED|resumed dW" "$O/test_stream.txt" | tail -8
	fi
fi
say done
