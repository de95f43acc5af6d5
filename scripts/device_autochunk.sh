#!/bin/sh
# --stream-chunk-bytes auto by dtype, on the GPU machine, from a bundle B:
# a daemon with the defaults, one 8192x4096x4096 job of each of bf16 and f32
# end to end; its log line on streaming and its stream counters (each job
# in 8 chunks of 1,024 rows: 8 MiB of bf16 dY, 16 MiB of f32).
#   scripts/device_autochunk.sh B
set -u
B=${1:?usage: device_autochunk.sh BUNDLE}
d=$(mktemp -d)
"$B/bin/vkgradd" --socket "$d/s" --cache-dir "$d/c" --max-region-bytes 4294967296 \
	--max-total-region-bytes 17179869184 --max-region-bytes-per-uid 17179869184 2>"$d/log" &
p=$!
for i in $(seq 1 600); do "$B/bin/vkgrad" --socket "$d/s" ping >/dev/null 2>&1 && break; sleep 0.1; done
grep "streamed jobs" "$d/log"
for dt in ${AUTOCHUNK_DTYPES:-bf16 f32}; do
	timeout 60 "$B/bin/vkgrad" --socket "$d/s" bench --kernels --json --shapes 8192,4096,4096 --dtypes $dt \
		--variants auto --reps 3 2>&1 | grep -o '"dtype":"[a-z0-9]*"\|"end_to_end_us":[0-9.]*\|"ok":[a-z]*' | tr '\n' ' '
	echo
	"$B/bin/vkgrad" --socket "$d/s" stats | grep -E "stream_jobs"
done
kill $p; wait $p 2>/dev/null
