#!/bin/sh
# One GPU-machine run from a bundle (vkgradd, vkgrad, test_dtypes), as made
# for measurements/h200-2026-12-02/: f16/bf16 correctness including the
# cooperative-matrix kernel, the coopmat lines, the default bench-kernels
# table (auto), narrow shapes from device memory, and the tiny-job
# daemon-vs-direct comparison, with the SM clock sampled throughout.
# Outputs go to $OUT.
B=$(dirname "$0"); O=${OUT:-/tmp}
sum() { python3 -c '
import json,sys
for l in open(sys.argv[1]):
    try: j=json.loads(l)
    except Exception: print(l.strip()[:200]); continue
    if "gpu_us" in j: print(j["shape"],j["dtype"],j["variant"],j["outputs"],"reps",j["reps"],"gpu",j["gpu_us"],"kern",j["kernel_us_measured"],"tf",j["tflops"],"gbps",j["gbps"],"e2e",j["end_to_end_us"],"ok",j["ok"],j["max_rel_err"],j["check"])
    else: print(j.get("shape"),j.get("dtype"),j.get("variant"),str(j.get("error",j.get("skipped")))[:80])
' "$1"; }
echo "=== test_dtypes"; BUILD=$B/bin timeout 150 $B/bin/test_dtypes > $O/test_dtypes.log 2>&1; echo rc=$?; grep -E "f16:|bf16:|FAIL|ERROR|coopmat|PASSED" $O/test_dtypes.log | head
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu --format=csv -lms 250 > $O/clocks.csv 2>&1 & np=$!
echo "=== coopmat"
timeout 100 $B/bin/vkgrad bench --kernels --json --shapes "2048,1024,1024;8192,4096,4096;1000,999,1001" --dtypes f16 --variants coopmat > $O/cm.jsonl 2>&1; echo rc=$?; sum $O/cm.jsonl
echo "=== table auto"
timeout 200 $B/bin/vkgrad bench --kernels --json --variants auto > $O/table.jsonl 2>&1; echo rc=$?; sum $O/table.jsonl
echo "=== narrow + 2048, device-local"
d=$(mktemp -d)
$B/bin/vkgradd --socket $d/s --cache-dir $d/c --devlocal-min-bytes 1 --max-region-bytes 8589934592 --max-total-region-bytes 68719476736 2> $O/daemon.log & p=$!
for i in $(seq 1 100); do [ -S $d/s ] && break; sleep 0.1; done
timeout 100 $B/bin/vkgrad --socket $d/s bench --kernels --json --shapes "4096,1024,16;8192,4096,32;2048,1024,1024" --dtypes f32 --variants auto,splitk,tiled > $O/narrow.jsonl 2>&1; sum $O/narrow.jsonl
kill $p; wait $p
kill $np
echo "=== bench --compare tiny, 2000 jobs per client"
for s in tiny_latency tiny_throughput; do timeout 120 $B/bin/vkgrad bench --compare --json --scenario $s --jobs 2000 2>&1; done > $O/bench_tiny.jsonl; cut -c1-300 $O/bench_tiny.jsonl
