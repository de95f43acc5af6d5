#!/bin/sh
# f16/bf16 auto chunks of at least 1,024 rows, on the GPU machine: bundles
# BEFORE (auto = 4 Mi elements of dY: 512 rows at out = 8192) and AFTER
# (at least 1,024 rows for 16-bit) alternated twice, 16384x8192x8192 bf16
# and f16 and 8192x4096x4096 bf16 end to end (the latter 1,024 rows
# either way); then the small-job line 16 clients x 32 in flight against
# a daemon of each, alternated twice:
#   [OUT=DIR] scripts/device_rows16.sh BEFORE AFTER
# Files in $OUT: rows16.jsonl, tiny.jsonl, stats.txt, log.txt; summaries
# on stdout.
set -u
BEFORE=${1:?usage: device_rows16.sh BEFORE AFTER}
AFTER=${2:?usage: device_rows16.sh BEFORE AFTER}
case $BEFORE in /*) ;; *) BEFORE=$PWD/$BEFORE ;; esac
case $AFTER in /*) ;; *) AFTER=$PWD/$AFTER ;; esac
O=${OUT:-/tmp/rows16}
mkdir -p "$O"
J="$O/rows16.jsonl" T="$O/tiny.jsonl" LOG="$O/log.txt" D=$(mktemp -d)
: >"$J"; : >"$T"; : >"$LOG"; : >"$O/stats.txt"
say() { echo "=== $* ($(date -u +%T))" | tee -a "$LOG"; }
. "$(dirname "$0")/device_lib.sh"
for r in 1 2; do
	for w in before after; do
		b=$BEFORE; [ $w = after ] && b=$AFTER
		dev_run "$w#$r" "$b" bf16,f16 "16384,8192,8192"
		dev_run "$w#$r" "$b" bf16 "8192,4096,4096"
	done
done
for r in 1 2; do
	for w in before after; do
		b=$BEFORE; [ $w = after ] && b=$AFTER
		(. "$b/env.sh" && timeout 100 "$b/bin/vkgrad" bench --json --scenario tiny_throughput \
			--clients 16 --jobs 500) 2>>"$LOG" | sed "s/^{/{\"run\":\"$w#$r\",/" >>"$T"
	done
done
dev_summary "$J" | cut -c1-120
grep -E "^---|stream_jobs" "$O/stats.txt"
python3 - "$T" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if j.get("mode") == "daemon":
        print("%-9s %s c=%d x%d: %.0f jobs/s p50 %.1f p99 %.1f" % (j["run"], j["scenario"], j["clients"],
              j["inflight"], j["jobs_per_s"], j["p50_us"], j["p99_us"]))
PY
