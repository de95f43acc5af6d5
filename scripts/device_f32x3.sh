#!/bin/sh
# The GPU-machine run for coopmat_khr_f32x3 (f32 on the bf16 tensor cores,
# shaders/linear_coopmat_khr_f32x3_gemm.comp), given a bundle folder
# (BUNDLE/bin/vkgradd, BUNDLE/bin/vkgrad, BUNDLE/env.sh if any; beside this
# script: device_coopmat_check.sh), in under two minutes: whether its pipelines were built (debug log: linear_coopmat_khr_
# f32x3_gemm, registers and shared memory), the tile-edge check for f32
# forced to it (every shape of device_coopmat_check.sh, every output subset,
# overwrite and accumulate, each against float64 at f32's 1e-4 normwise),
# then `vkgrad bench --kernels` over three shapes with coopmat_khr_f32x3
# and auto (f32 on the FP32 units), every line checked against float64: its
# max_rel_err on every shape is what decides whether auto may ever take it
# (only at <= 1e-5 everywhere: variant.h). Outputs in $OUT.
#   OUT=dir scripts/device_f32x3.sh BUNDLE
set -u
S=$(dirname "$0"); B=${1:?usage: device_f32x3.sh BUNDLE}; O=${OUT:-/tmp}
[ -f "$B/env.sh" ] && . "$B/env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv 2>&1 | tail -1
echo "=== pipelines"
d=$(mktemp -d)
$B/bin/vkgradd --socket $d/s --cache-dir $d/c --log-level debug 2> $O/daemon_debug.log & p=$!
for i in $(seq 1 300); do $B/bin/vkgrad --socket $d/s ping >/dev/null 2>&1 && break; sleep 0.1; done
$B/bin/vkgrad --socket $d/s info | grep -E "device|driver|f32x3"
kill $p; wait $p
grep -E "f32x3|matrix extensions|warning" $O/daemon_debug.log | sed 's/Binary Size=[0-9]*; //' | cut -c1-220 | head -12
echo "=== tile-edge check: coopmat_khr_f32x3, f32"
timeout 50 sh $S/device_coopmat_check.sh $B/bin coopmat_khr_f32x3 f32 > $O/check_f32x3.log 2>&1; echo rc=$?
grep -E "FAILED|done|device_coopmat_check" $O/check_f32x3.log | head -12
echo "=== bench --kernels (f32: coopmat_khr_f32x3, auto)"
timeout 55 $B/bin/vkgrad bench --kernels --json --shapes "8192,4096,4096;2048,1024,1024;4096,1024,16" \
	--dtypes f32 --variants coopmat_khr_f32x3,auto > $O/bench_f32x3.jsonl 2>&1; echo rc=$?
python3 - $O/bench_f32x3.jsonl <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        print(line.rstrip()[:200]); continue
    print("%-18s %-16s %-6s gpu_us=%-10s tflops=%-8s max_rel_err=%-9s ok=%s %s" % (
        "x".join(map(str, r.get("shape", []))), r.get("variant"), r.get("dtype"), r.get("gpu_us"),
        r.get("tflops"), r.get("max_rel_err"), r.get("ok"), r.get("error", r.get("skipped", ""))))
PY
