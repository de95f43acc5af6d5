#!/bin/sh
# Streamed chunk size on the GPU machine: 8192x4096x4096 end to end with
# the default (16 MiB of dY per chunk) and with 8 MiB, alternated three
# times, bf16, f16 and f32, from a bundle B (bin/vkgradd, bin/vkgrad):
#   [OUT=DIR] scripts/device_chunk8.sh B
# Files in $OUT: chunk.jsonl, log.txt; the summary (dev_summary) on stdout.
set -u
B=${1:?usage: device_chunk8.sh BUNDLE}
case $B in /*) ;; *) B=$PWD/$B ;; esac
O=${OUT:-/tmp/chunk8}
mkdir -p "$O"
J="$O/chunk.jsonl" LOG="$O/log.txt" D=$(mktemp -d)
: >"$J"; : >"$LOG"
say() { echo "=== $* ($(date -u +%T))" | tee -a "$LOG"; }
. "$(dirname "$0")/device_lib.sh"
for r in 1 2 3; do
	NO_STATS=1 dev_run "default#$r" "$B" bf16,f16,f32 8192,4096,4096
	NO_STATS=1 dev_run "chunk8#$r" "$B" bf16,f16,f32 8192,4096,4096 --stream-chunk-bytes 8388608
done
dev_summary "$J" | cut -c1-60
