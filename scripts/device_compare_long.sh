#!/bin/sh
# `vkgrad bench --compare` with enough jobs for steady state (the default
# lines are short: tiny_throughput 16 x 32 measures 64 jobs per client), on
# the GPU machine, from a bundle B (bin/vkgradd, bin/vkgrad), alternated
# REPS times (default 2):
#   [OUT=DIR] [REPS=2] scripts/device_compare_long.sh B
# tiny_latency 1 client x 4000 jobs, tiny_latency 16 clients x 2000,
# tiny_throughput 16 x 32 in flight x 1000 jobs per client.
# Files in $OUT: compare.jsonl (tagged "run"), log.txt; summary on stdout.
set -u
B=${1:?usage: device_compare_long.sh BUNDLE}
case $B in /*) ;; *) B=$PWD/$B ;; esac
O=${OUT:-/tmp/compare_long}
REPS=${REPS:-2}
mkdir -p "$O"
J="$O/compare.jsonl" LOG="$O/log.txt"
: >"$J"; : >"$LOG"
say() { echo "=== $* ($(date -u +%T))" | tee -a "$LOG"; }
. "$(dirname "$0")/device_lib.sh"
for r in $(seq 1 "$REPS"); do
	for a in "tiny_latency 1 4000" "tiny_latency 16 2000" "tiny_throughput 16 1000"; do
		set -- $a
		say "$1 x$2, $3 jobs each, #$r"
		(. "$B/env.sh" && timeout 150 "$B/bin/vkgrad" bench --compare --json --scenario "$1" \
			--clients "$2" --jobs "$3") 2>>"$LOG" | sed "s/^{/{\"run\":\"#$r\",/" >>"$J"
	done
done
python3 - "$J" <<'PY' | tee -a "$LOG"
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if j.get("mode") == "ratio":
        print("%-3s %-15s c=%-2d x%-2d ratio daemon/direct: jobs/s %.3f, p50 %.3f" % (
            j["run"], j["scenario"], j["clients"], j["inflight"], j["jobs_per_s_ratio"], j["p50_ratio"]))
    else:
        print("%-3s %-15s c=%-2d x%-2d %-6s %9.0f jobs/s p50 %7.1f p99 %7.1f" % (
            j["run"], j["scenario"], j["clients"], j["inflight"], j["mode"], j["jobs_per_s"],
            j["p50_us"], j["p99_us"]))
PY
