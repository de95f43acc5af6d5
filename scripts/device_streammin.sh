#!/bin/sh
# Which device-local jobs should stream (--stream-min-bytes, default auto:
# 64 MiB of tensors), on the GPU machine, from a bundle B (bin/vkgradd,
# bin/vkgrad): mid-size bf16 jobs end to end with the default, 16 MiB and
# 4 MiB, alternated twice:
#   [OUT=DIR] scripts/device_streammin.sh B
# Files in $OUT: streammin.jsonl, stats.txt, log.txt; the summary on stdout.
set -u
B=${1:?usage: device_streammin.sh BUNDLE}
case $B in /*) ;; *) B=$PWD/$B ;; esac
O=${OUT:-/tmp/streammin}
mkdir -p "$O"
J="$O/streammin.jsonl" LOG="$O/log.txt" D=$(mktemp -d)
: >"$J"; : >"$LOG"; : >"$O/stats.txt"
say() { echo "=== $* ($(date -u +%T))" | tee -a "$LOG"; }
. "$(dirname "$0")/device_lib.sh"
SHAPES="2048,1024,1024;4096,1024,1024;1024,4096,4096;4096,2048,2048"
for r in 1 2; do
	dev_run "default#$r" "$B" bf16 "$SHAPES"
	dev_run "16MiB#$r" "$B" bf16 "$SHAPES" --stream-min-bytes 16777216
	dev_run "4MiB#$r" "$B" bf16 "$SHAPES" --stream-min-bytes 4194304
done
dev_summary "$J" | cut -c1-72
grep -E "^---|stream_jobs|devlocal_jobs" "$O/stats.txt"
