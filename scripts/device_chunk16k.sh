#!/bin/sh
# Chunk rows of a compute-bound streamed job, on the GPU machine, from a
# bundle B (bin/vkgradd, bin/vkgrad): 16384x8192x8192 bf16 end to end with
# --stream-chunk-bytes 16, 32 and 64 MiB (1,024, 2,048 and 4,096 rows of
# bf16 dY at out = 8192), alternated twice:
#   [OUT=DIR] scripts/device_chunk16k.sh B
# Files in $OUT: chunk.jsonl, stats.txt, log.txt; the summary on stdout.
set -u
B=${1:?usage: device_chunk16k.sh BUNDLE}
case $B in /*) ;; *) B=$PWD/$B ;; esac
O=${OUT:-/tmp/chunk16k}
mkdir -p "$O"
J="$O/chunk.jsonl" LOG="$O/log.txt" D=$(mktemp -d)
: >"$J"; : >"$LOG"; : >"$O/stats.txt"
say() { echo "=== $* ($(date -u +%T))" | tee -a "$LOG"; }
. "$(dirname "$0")/device_lib.sh"
for r in 1 2; do
	for mib in 16 32 64; do
		dev_run "${mib}MiB#$r" "$B" bf16 16384,8192,8192 --stream-chunk-bytes $((mib << 20))
	done
done
dev_summary "$J" | cut -c1-150
grep -E "^---|stream_jobs" "$O/stats.txt"
