#!/bin/sh
# The closing H200 run of 2026-12-03's sixth session (issues 14 and 15),
# from bundles BEFORE15 (the daemon before issue 15's work: 1d53289, bin/
# vkgradd and bin/vkgrad), PREV (this session's start, 03fc432) and AFTER
# (the final build: bin/vkgradd, bin/vkgrad, bin/test_stream, the torch
# anchors beside):
#   [OUT=DIR] scripts/device_final6.sh BEFORE15 PREV AFTER
# 1. test_stream on the GPU (AFTER);
# 2. `vkgrad bench --kernels` 8192x4096x4096, 16384x8192x8192,
#    2048x1024x1024 x bf16/f16/f32 (auto) beside torch_linear_backward.py,
#    the table with GPU and end-to-end ratios (closing_table.py);
# 3. 8192x4096x4096 with streaming off (the kernels alone; steps 1-3 are
#    device_lib.sh's dev_closing_kernels), and f32 forced to
#    coopmat_khr_f32x3 (f32 on tensor cores), AFTER;
# 4. the pipelines' driver statistics (registers, shared memory) at debug;
# 5. `vkgrad bench --compare --json` BEFORE15, AFTER, BEFORE15, AFTER;
# 6. 16 synchronous clients (tiny_latency --clients 16 --jobs 2000,
#    private daemon) PREV, AFTER, PREV, AFTER; then torch_multiproc.py 1 16
#    without and with MPS;
# Files in $OUT: summary.txt and raw.tar.gz (everything else).
set -u
B15=${1:?usage: device_final6.sh BEFORE15 PREV AFTER}
PREV=${2:?usage: device_final6.sh BEFORE15 PREV AFTER}
AFTER=${3:?usage: device_final6.sh BEFORE15 PREV AFTER}
for v in B15 PREV AFTER; do
	eval "p=\$$v"
	case $p in /*) ;; *) eval "$v=\$PWD/\$p" ;; esac
done
O=${OUT:-/tmp/final6}
R=$(mktemp -d)/raw
mkdir -p "$O" "$R"
S="$O/summary.txt"
: >"$S"
say() { echo "=== $* ($(date -u +%T))" | tee -a "$S"; }
. scripts/device_lib.sh
dev_closing_kernels "$AFTER" "$R"
say "3. f32 on tensor cores (coopmat_khr_f32x3)"
J="$R/f32x3.jsonl"
: >"$J"
NO_STATS=1 BENCH_ARGS="--variants coopmat_khr_f32x3" dev_run f32x3 "$AFTER" f32 \
	"8192,4096,4096;2048,1024,1024" --stream-chunk-bytes off
dev_summary "$J" | tee -a "$S"
say "4. the pipelines' driver statistics"
dev_daemon_start "$AFTER" "$R/debug.log" --log-level debug && dev_daemon_stop
grep -E "Register Count|default tiling" "$R/debug.log" | sed 's/Binary Size=[0-9]*; //' |
	grep -E "nv2|tiled128|coopmat_khr|default tiling" | cut -c1-220 | tee "$R/regs.log" | tee -a "$S"
say "5. bench --compare --json, before issue 15 (1d53289) and after"
for r in 1 2; do
	for w in before15 after; do
		b=$B15; [ $w = after ] && b=$AFTER
		say "5. $w #$r"
		(. "$b/env.sh" && timeout 150 "$b/bin/vkgrad" bench --compare --json) 2>>"$R/compare.err" |
			sed "s/^{/{\"build\":\"$w\",\"rep\":$r,/" >>"$R/compare.jsonl"
	done
done
say "6. 16 synchronous clients (private daemon), this session's start and after"
for r in 1 2; do
	for w in prev after; do
		b=$PREV; [ $w = after ] && b=$AFTER
		(. "$b/env.sh" && timeout 100 "$b/bin/vkgrad" bench --json --scenario tiny_latency \
			--clients 16 --jobs 2000) 2>>"$R/sync16.err" |
			sed "s/^{/{\"build\":\"$w\",\"rep\":$r,/" >>"$R/sync16.jsonl"
	done
done
LOG="$R/torch_mp.err"
dev_torch_mp "$AFTER/torch_multiproc.py" "$R/torch_mp.jsonl"
say "summary"
python3 - "$R" <<'PY' | tee -a "$S"
import json, os, sys
r = sys.argv[1]
def lines(name):
    p = os.path.join(r, name)
    if not os.path.exists(p):
        return []
    out = []
    for l in open(p):
        try: out.append(json.loads(l))
        except ValueError: pass
    return out
print("-- bench --compare (daemon and direct lines; ratio lines)")
for j in lines("compare.jsonl"):
    if j.get("mode") == "ratio":
        print("%-8s #%d %-15s c=%-2d k=%-2d ratio %s" % (j["build"], j["rep"], j["scenario"], j["clients"],
              j["inflight"], {k: v for k, v in j.items() if k.endswith("ratio") or k.startswith("p")}))
    else:
        print("%-8s #%d %-15s c=%-2d k=%-2d %-6s %9.0f jobs/s p50 %8.1f p99 %8.1f %s" % (
            j["build"], j["rep"], j["scenario"], j["clients"], j["inflight"], j.get("mode"),
            j.get("jobs_per_s", 0), j.get("p50_us", 0), j.get("p99_us", 0),
            json.dumps(j.get("stages_us", {}))))
mps = [t for t in lines("torch_mp.jsonl") if t.get("processes") == 16]
print("-- 16 synchronous clients")
for t in lines("torch_mp.jsonl"):
    print("torch processes=%d mps=%s: %d jobs/s, p50 %.1f us, p99 %.1f us" % (
        t["processes"], t["mps"], t["jobs_per_s"], t["p50_us"], t["p99_us"]))
m = [t["jobs_per_s"] for t in mps if t["mps"]]
for j in lines("sync16.jsonl"):
    if j.get("mode") != "daemon":
        continue
    ratio = " = %.2fx MPS" % (j["jobs_per_s"] / m[0]) if m else ""
    print("%-6s #%d: %9.0f jobs/s%s, p50 %.1f us, p99 %.1f us %s" % (j["build"], j["rep"], j["jobs_per_s"],
          ratio, j["p50_us"], j["p99_us"], json.dumps(j.get("stages_us", {}))))
PY
say done
tar czf "$O/raw.tar.gz" -C "$(dirname "$R")" raw
