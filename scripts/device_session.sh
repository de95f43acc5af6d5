#!/bin/sh
# One GPU-machine session from a bundle (../shared/device/bundle.sh) holding
# vkgradd, vkgrad, device_check.sh, start_time.sh and the PyTorch anchors:
# correctness of the test shapes, bench (daemon vs direct), start times,
# kernel timings per variant, and the anchors, all in one run. Files go to $OUT.
B=$(dirname "$0")
OUT=${OUT:-/tmp}
set -u
echo "=== device_check"; "$B/device_check.sh" "$B/bin" > "$OUT/check.log" 2>&1; echo "device_check rc=$?"
grep -E "^server|^device|^  (type|vendor|driver|vulkan)|^kernels|linear_|device_check:|FAILED" "$OUT/check.log" | head -24
echo "=== max rel err per shape (max over output subsets, overwrite and accumulate)"
awk '/^job 2\//{split($3,a,"=");split($5,b,"=");if(b[2]+0>m[a[2]])m[a[2]]=b[2]+0}END{for(k in m)printf "%s %.2g\n",k,m[k]}' "$OUT/check.log" | sort
echo "=== start times"; "$B/start_time.sh" "$B/bin" 2>&1 | tail -12
echo "=== bench --compare (default jobs)"; "$B/bin/vkgrad" bench --compare --json 2>&1 | tee "$OUT/bench_default.jsonl"
echo "=== bench tiny scenarios, 2000 jobs per client"
for s in tiny_latency tiny_throughput; do "$B/bin/vkgrad" bench --compare --json --scenario $s --jobs 2000 2>&1; done | tee "$OUT/bench_tiny.jsonl"
echo "=== narrow, 200 jobs per client"; "$B/bin/vkgrad" bench --compare --json --scenario narrow --jobs 200 2>&1 | tee "$OUT/bench_narrow.jsonl"
echo "=== kernel timings (full backward, f32, client memory imported; 5th of 5 runs)"
d=$(mktemp -d); "$B/bin/vkgradd" --socket "$d/s" --cache-dir "$d/c" 2>"$d/log" & p=$!; sleep 2
for shape in 32x64x8 256x256x16 4096x1024x16 8192x4096x32 2048x1024x1024 8192x4096x4096; do
	b=${shape%%x*}; r=${shape#*x}; i=${r%%x*}; o=${r#*x}
	for v in generic tiled auto; do
		[ "$shape" = 8192x4096x4096 ] && [ $v = generic ] && continue
		printf '%s %s: ' $shape $v
		"$B/bin/vkgrad" --socket "$d/s" run --batch "$b" --in "$i" --out "$o" --variant $v --repeat 5 2>&1 | grep '^job 5/' | sed 's/.*queued/queued/'
	done
done
kill $p; wait $p
echo "=== torch anchors"; cd "$B" && timeout 200 python3 torch_linear_backward.py 2>&1 | tail -20; timeout 150 python3 torch_multiproc.py 1 16 2>&1 | tail -8
