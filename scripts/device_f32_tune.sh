#!/bin/sh
# One GPU-machine run for tuning linear_tiled128_gemm's f32 path (issue 14's
# "f32 on the FP32 units" target), given a bundle folder (BUNDLE/bin/vkgradd,
# BUNDLE/bin/vkgrad, BUNDLE/env.sh). For each tiling (VKGRAD_T128_TILE=
# "BMxBNxTMxTNxBK[xSPLIT[xPAD[xWX]]]", daemon/t128_tile.h; "fixed": the fixed kernel,
# today's kernel) one daemon at debug level (each with its own pipeline
# cache, so that every pipeline is compiled and reported): the driver's registers
# and shared memory for linear_tiled128_gemm f32, then
# `vkgrad bench --kernels` f32 tiled128 on 8192x4096x4096 and 2048x1024x1024
# (every line checked against float64, sampled) and an edge shape
# 257x131x129 (checked in full); then a table. Under about 4 minutes: a
# tiling is skipped once 210 s have passed. Outputs in $OUT (summary.txt,
# bench.jsonl, regs.txt, clocks.csv, logs.tar.gz).
#   OUT=dir scripts/device_f32_tune.sh BUNDLE [TILING...]
# Made here:
#   make all && ../shared/device/bundle.sh .device-bundle build/vkgradd build/vkgrad
# Run with carry [".device-bundle"]:
#   scripts/device_f32_tune.sh .device-bundle
# SHAPES="B,I,O;..." replaces the two large shapes (a quick run on lavapipe).
set -u
B=${1:?usage: device_f32_tune.sh BUNDLE [TILING...]}; shift
O=${OUT:-/tmp/out}
mkdir -p "$O"
[ -f "$B/env.sh" ] && . "$B/env.sh"
# the candidates, most telling first (the 210 s guard cuts from the end)
TILINGS=${*:-"fixed 128x128x8x8x16 128x128x8x8x16x2 64x128x8x8x16x2 128x64x8x4x16 128x128x8x8x16x4
 128x128x8x8x8x2 128x128x8x8x16x2x0x8 64x128x8x8x16x2x0x8 128x64x8x8x16x2 64x128x4x8x16
 128x128x8x8x16x2x1x8 128x128x8x8x8 256x128x16x8x8"}
SHAPES=${SHAPES:-"8192,4096,4096;2048,1024,1024"}
W=$(mktemp -d)
mkdir -p "$W/logs"
t0=$(date +%s)
S="$O/summary.txt"
: > "$S"
: > "$O/bench.jsonl"
: > "$O/regs.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv 2>&1 | tee -a "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,utilization.gpu --format=csv -lms 500 \
	> "$O/clocks.csv" 2>&1 & np=$!

one() { # tiling $1: daemon, registers, bench
	t=$1
	d=$(mktemp -d)
	export VKGRAD_T128_TILE=$t # "fixed": the fixed kernel (unset would be the default tiling)
	"$B/bin/vkgradd" --socket "$d/s" --cache-dir "$d/c" --log-level debug --max-region-bytes 4294967296 \
		--max-total-region-bytes 68719476736 --max-region-bytes-per-uid 68719476736 \
		2> "$W/logs/daemon_$t.log" & p=$!
	i=0
	until "$B/bin/vkgrad" --socket "$d/s" ping >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -gt 600 ] || ! kill -0 $p 2>/dev/null; then
			echo "$t: the daemon did not start:" | tee -a "$S"
			tail -3 "$W/logs/daemon_$t.log" | cut -c1-300 | tee -a "$S"
			kill $p 2>/dev/null; wait $p 2>/dev/null
			unset VKGRAD_T128_TILE
			rm -rf "$d"
			return
		fi
		sleep 0.1
	done
	r=$(grep "pipeline linear_tiled128_gemm f32" "$W/logs/daemon_$t.log" | head -1 |
		sed 's/.*executable //; s/Binary Size=[0-9]*; //')
	echo "$t: ${r:-no statistics}" >> "$O/regs.txt"
	timeout 75 "$B/bin/vkgrad" --socket "$d/s" bench --kernels --json --shapes "$SHAPES;257,131,129" \
		--dtypes f32 --variants tiled128 > "$W/bench_$t.jsonl" 2> "$W/logs/bench_$t.err"
	echo "rc=$?" >> "$W/logs/bench_$t.err"
	kill $p; wait $p
	unset VKGRAD_T128_TILE
	rm -rf "$d"
	python3 - "$t" "$W/bench_$t.jsonl" >> "$O/bench.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[2]):
    try:
        j = json.loads(line)
    except ValueError:
        j = {"raw": line.strip()[:300]}
    j["tile"] = sys.argv[1]
    print(json.dumps(j))
PY
}

for t in $TILINGS; do
	if [ $(( $(date +%s) - t0 )) -gt 210 ]; then
		echo "$t: skipped (210 s passed)" | tee -a "$S"
		continue
	fi
	echo "=== $t ($(( $(date +%s) - t0 )) s)" >&2
	one "$t"
done
kill $np 2>/dev/null

python3 - "$O/bench.jsonl" "$O/regs.txt" "$SHAPES" >> "$S" <<'PY'
import json, re, sys
regs = {}
for l in open(sys.argv[2]):
    t, _, rest = l.partition(": ")
    rc = re.search(r"Register Count=(\d+)", rest)
    sm = re.search(r"Shared Memory Size=(\d+)", rest)
    regs[t] = (rc.group(1) if rc else "?", sm.group(1) if sm else "?")
shapes = [tuple(int(x) for x in s.split(",")) for s in sys.argv[3].split(";")]
rows, order = {}, []
for l in open(sys.argv[1]):
    j = json.loads(l)
    t = j["tile"]
    if t not in rows:
        rows[t] = {}
        order.append(t)
    if "shape" in j:
        rows[t][tuple(j["shape"])] = j
    elif "raw" in j:
        rows[t].setdefault("raw", j["raw"])
def cell(j):
    if j is None:
        return "-"
    if "gpu_us" not in j:
        return str(j.get("error", j.get("skipped", "?")))[:40]
    return "%9.1f %6.2f" % (j["gpu_us"], j["tflops"])
base = rows.get("fixed", {}).get(shapes[0], {}).get("gpu_us")
head = "%-24s %5s %6s" % ("tiling", "regs", "smem")
for s in shapes:
    head += " | %-16s" % ("x".join(map(str, s)) + " us TF")
head += " | %7s | %s" % ("vs fixed", "checks vs float64 (max_rel_err)")
print(head)
for t in order:
    r = rows[t]
    line = "%-24s %5s %6s" % (t, regs.get(t, ("?", "?"))[0], regs.get(t, ("?", "?"))[1])
    for s in shapes:
        line += " | %-16s" % cell(r.get(s))
    g = r.get(shapes[0], {}).get("gpu_us")
    line += " | %7s" % ("%.3f" % (g / base) if g and base else "-")
    oks = ["%s %s%s" % ("x".join(map(str, k)), "ok" if v.get("ok") else "FAIL",
                        " %.1e" % v["max_rel_err"] if "max_rel_err" in v else "")
           for k, v in r.items() if k != "raw"]
    line += " | " + ", ".join(oks) + ((" " + r["raw"][:60]) if "raw" in r else "")
    print(line)
PY
cat "$S"
cp "$O/regs.txt" "$W/logs/" 2>/dev/null
tar -czf "$O/logs.tar.gz" -C "$W" logs
rm -rf "$W"
