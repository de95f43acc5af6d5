#!/bin/sh
# The small-job lines, bundles BEFORE and AFTER (bin/vkgradd, bin/vkgrad)
# alternated twice, each `vkgrad bench --json` with a private daemon:
# tiny_latency 1 client x 4000 jobs, 16 clients x 2000, tiny_throughput
# 16 x 32 in flight x 1000 jobs per client.
#   [OUT=DIR] scripts/device_pumpab.sh BEFORE AFTER   (absolute paths)
# Files in $OUT: ab.jsonl (tagged "run"), log.txt; the summary on stdout.
set -u
BEFORE=$1 AFTER=$2
O=${OUT:-/tmp/pumpab}
mkdir -p "$O"
J="$O/ab.jsonl"; : >"$J"
for r in 1 2; do
	for w in before after; do
		b=$BEFORE; [ $w = after ] && b=$AFTER
		for a in "tiny_latency 1 4000" "tiny_latency 16 2000" "tiny_throughput 16 1000"; do
			set -- $a
			(. "$b/env.sh" && timeout 150 "$b/bin/vkgrad" bench --json --scenario "$1" \
				--clients "$2" --jobs "$3") 2>>"$O/log.txt" | sed "s/^{/{\"run\":\"$w#$r\",/" >>"$J"
		done
	done
done
. scripts/device_lib.sh
dev_tiny_summary "$J"
