#!/bin/sh
# nv2 tilings and coopmat_khr with streaming off (gpu_us = kernels only)
B=$(dirname "$0"); O=${OUT:-/tmp}
for t in ref 128x128x32x128x1x4 256x128x32x256x1x4x1 128x128x64x256x1x8x1 128x256x64x256x1x8x1 128x256x32x256x1x4 128x128x64x256x1x8 128x128x32x256; do
  d=$(mktemp -d)
  if [ $t = ref ]; then v=coopmat_khr; else v=coopmat_nv2; export VKGRAD_NV2_TILE=$t; fi
  timeout 120 $B/bin/vkgradd --socket $d/s --cache-dir $O/cache --stream-chunk-bytes off --max-region-bytes 8589934592 --max-total-region-bytes 68719476736 --max-region-bytes-per-uid 68719476736 2> $d/log & p=$!
  for i in $(seq 1 300); do $B/bin/vkgrad --socket $d/s ping >/dev/null 2>&1 && break; sleep 0.1; done
  timeout 60 $B/bin/vkgrad --socket $d/s bench --kernels --json --shapes "8192,4096,4096;16384,8192,8192" --dtypes f16,bf16 --variants $v > $d/b.jsonl 2>&1
  python3 -c '
import json,sys
for l in open(sys.argv[1]):
    try: j=json.loads(l)
    except Exception: print(l.strip()[:200]); continue
    print(sys.argv[2], j.get("shape"), j.get("dtype"), "gpu", j.get("gpu_us"), "e2e", j.get("end_to_end_us"), "tf", j.get("tflops"), "ok", j.get("ok"), j.get("max_rel_err"), str(j.get("error",""))[:100])
' $d/b.jsonl $t | tee -a $O/unstreamed.txt
  kill $p; wait $p; unset VKGRAD_NV2_TILE
done
