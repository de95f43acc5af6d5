#!/bin/sh
# tiny jobs, two bundles alternated twice (here .device-bundle-before = 9b9cc1a and
# .device-bundle-final = the closing commit): bench --compare (daemon and direct)
for r in 1 2; do for b in .device-bundle-before .device-bundle-final; do
  for sc in "tiny_latency" "tiny_throughput --clients 16"; do
    (. $b/env.sh && timeout 30 $b/bin/vkgrad bench --compare --json --scenario $sc) 2>/dev/null | python3 -c '
import json,sys
for l in sys.stdin:
    j=json.loads(l)
    if j.get("mode")=="ratio": continue
    print(sys.argv[1], j["scenario"], j["mode"], "c", j["clients"], "p50", j["p50_us"], "p99", j["p99_us"], "jobs/s", j["jobs_per_s"], "gpu", j["stages_us"].get("gpu"))' "$b#$r"
  done
done; done
