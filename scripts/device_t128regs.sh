#!/bin/sh
# tiled128's f32 pipeline on the GPU machine, bundle by bundle: the
# driver's statistics for it (registers, local and shared memory: debug
# log) and `bench --kernels` 8192x4096x4096 f32 with streaming off (kernel
# time alone), each bundle twice, alternated.
#   [OUT=DIR] scripts/device_t128regs.sh BUNDLE...
set -u
O=${OUT:-/tmp/t128regs}
mkdir -p "$O"
: >"$O/t128.jsonl"
LIM="--max-region-bytes 8589934592 --max-total-region-bytes 68719476736 --max-region-bytes-per-uid 68719476736"
for r in 1 2; do
	for b in "$@"; do
		case $b in /*) ;; *) b=$PWD/$b ;; esac
		d=$(mktemp -d)
		(. "$b/env.sh" && exec "$b/bin/vkgradd" --socket "$d/s" --cache-dir "$d/c" --log-level debug \
			--stream-chunk-bytes off $LIM) 2>"$d/log" &
		p=$!
		for i in $(seq 1 600); do
			(. "$b/env.sh" && "$b/bin/vkgrad" --socket "$d/s" ping) >/dev/null 2>&1 && break
			sleep 0.1
		done
		echo "== $(basename "$b") #$r"
		grep -E "tiled128" "$d/log" | grep -E "Register|tiling" | sed 's/Binary Size=[0-9]*; //' | cut -c1-230
		(. "$b/env.sh" && timeout 100 "$b/bin/vkgrad" --socket "$d/s" bench --kernels --json \
			--shapes "8192,4096,4096" --dtypes f32 --variants auto) 2>&1 |
			python3 -c '
import json,sys
for l in sys.stdin:
    try: j=json.loads(l)
    except ValueError: print("  "+l.strip()[:200]); continue
    j["bundle"]=sys.argv[1]; print(json.dumps(j), file=open(sys.argv[2],"a"))
    print("  %s %s %s gpu %s tf %s ok %s %s" % (sys.argv[1], j.get("shape"), j.get("variant"), j.get("gpu_us"), j.get("tflops"), j.get("ok"), j.get("max_rel_err")))
' "$(basename "$b")" "$O/t128.jsonl"
		kill $p; wait $p 2>/dev/null
		rm -rf "$d"
	done
done
