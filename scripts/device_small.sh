#!/bin/sh
# coopmat_nv2's small layers' tiling (variant_nv2_small) on the GPU machine,
# from a bundle B (bin/vkgradd, bin/vkgrad, torch_linear_backward.py):
#   [OUT=DIR] scripts/device_small.sh B
# 1. a daemon at debug level: the tilings it took and the driver's
#    statistics of every nv2 pipeline (regs.log);
# 2. `bench --kernels` for 2048x1024x1024, 4096x1024x1024, 1536x1000x1040,
#    f16 and bf16: auto, coopmat_khr and coopmat_nv2
#    forced, each line checked against float64 (small.jsonl), twice;
# 3. device_coopmat_check.sh with variant auto over shapes where auto takes
#    the small tiling for dW, dX or both (each job checked against float64);
# 4. torch_linear_backward.py for the same-run ratio.
set -u
B=${1:?usage: device_small.sh BUNDLE}
case $B in /*) ;; *) B=$PWD/$B ;; esac
O=${OUT:-/tmp/small}
mkdir -p "$O"
: >"$O/small.jsonl"
say() { echo "=== $* ($(date -u +%T))"; }
d=$(mktemp -d)
"$B/bin/vkgradd" --socket "$d/s" --cache-dir "$d/c" --log-level debug 2>"$d/log" &
p=$!
for i in $(seq 1 600); do "$B/bin/vkgrad" --socket "$d/s" ping >/dev/null 2>&1 && break; sleep 0.1; done
grep -E "nv2|cooperative_matrix2" "$d/log" | grep -v "client pid" | sed 's/Binary Size=[0-9]*; //' | cut -c1-240 >"$O/regs.log"
say "1. the daemon's nv2 lines"
grep -E "tiling|small" "$O/regs.log" | cut -c1-200
for r in 1 2; do
	say "2. bench --kernels #$r"
	timeout 150 "$B/bin/vkgrad" --socket "$d/s" bench --kernels --json \
		--shapes "2048,1024,1024;4096,1024,1024;1536,1000,1040" --dtypes f16,bf16 \
		--variants auto,coopmat_khr,coopmat_nv2 2>&1 | python3 -c '
import json,sys
for l in sys.stdin:
    try: j=json.loads(l)
    except ValueError: print("  "+l.strip()[:200]); continue
    j["rep"]=int(sys.argv[1]); print(json.dumps(j), file=open(sys.argv[2],"a"))
    print("  %s %s %-12s gpu %s tf %s ok %s err %s" % (j.get("shape"), j.get("dtype"), j.get("variant"), j.get("gpu_us"), j.get("tflops"), j.get("ok"), j.get("max_rel_err")))
' "$r" "$O/small.jsonl"
done
kill $p; wait $p 2>/dev/null
say "3. tile-edge check, variant auto"
# (shapes whose float64 references stay cheap: dX with a short reduction,
# dW with a batch of 256)
COOPMAT_CHECK_SHAPES="2048x1024x64 2047x1023x72 256x1024x1024 257x1031x1033" \
	timeout 200 sh "$(dirname "$0")/device_coopmat_check.sh" "$B/bin" auto >"$O/check.log" 2>&1
echo "rc=$?"; tail -2 "$O/check.log"
say "4. torch_linear_backward.py"
(cd "$B" && timeout 150 python3 torch_linear_backward.py) >"$O/torch.jsonl" 2>"$O/torch.err"
echo "rc=$?"
grep -E '"B": 2048' "$O/torch.jsonl" | cut -c1-200
say done
