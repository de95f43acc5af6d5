#!/bin/sh
# Instructions per job on the daemon's loop thread (callgrind, lavapipe).
#
#   scripts/loop_instr.sh [BUILD_DIR]      (default: build)
#
# Starts BUILD_DIR/vkgradd under callgrind (--separate-threads=yes) on a
# private socket with --spin-us 0 and --no-cost-model (its probes at start
# take minutes under callgrind), runs a warm-up bench, zeroes the
# counters, runs
# `vkgrad bench --scenario tiny_throughput --clients 16 --jobs 100`
# (1600 jobs of 32x64x8 dw,db,dx, 32 in flight per client), dumps and stops.
# What it counts: every instruction the daemon's main thread (the libuv
# loop: reading frames, decoding, admitting, recording and submitting
# batches, completion handling, replies) executes, in vkgradd's own code and
# in every library it calls there (libc, libuv, msgpack-c, the Vulkan loader,
# lavapipe's vkCmd* recording and vkQueueSubmit entry). Not counted: the
# other threads (the completion thread, lavapipe's queue and llvmpipe worker
# threads that execute the shaders). Prints the loop thread's total Ir / 1600
# and the top functions (inclusive) per job. Files: $OUTDIR (default
# /tmp/loop_instr.$$). LOOP_CLIENTS, LOOP_JOBS (per client), LOOP_INFLIGHT
# change the bench (LOOP_CLIENTS=1 LOOP_INFLIGHT=1: the synchronous client,
# a batch per job).
set -eu
B=${1:-build}
OUT=${OUTDIR:-/tmp/loop_instr.$$}
JOBS=${LOOP_JOBS:-100}
CLIENTS=${LOOP_CLIENTS:-16}
INFL=${LOOP_INFLIGHT:+--inflight $LOOP_INFLIGHT}  # default: the scenario's 32
mkdir -p "$OUT"
SOCK=$OUT/sock
rm -f "$SOCK" "$OUT"/callgrind.out*
valgrind --tool=callgrind --separate-threads=yes \
    --callgrind-out-file="$OUT/callgrind.out" \
    "$B/vkgradd" --socket "$SOCK" --cache-dir "$OUT/cache" --spin-us 0 --no-cost-model \
    --log-level warn >"$OUT/daemon.log" 2>&1 &
VPID=$!
i=0
while [ ! -S "$SOCK" ]; do
    sleep 1; i=$((i + 1))
    [ $i -lt 300 ] || { echo "daemon did not start" >&2; kill $VPID; exit 1; }
done
"$B/vkgrad" --socket "$SOCK" bench --scenario tiny_throughput --clients "$CLIENTS" \
    --jobs 20 --warmup 5 $INFL --json >"$OUT/warm.json"
callgrind_control -z $VPID >/dev/null
"$B/vkgrad" --socket "$SOCK" bench --scenario tiny_throughput --clients "$CLIENTS" \
    --jobs "$JOBS" --warmup 0 $INFL --json >"$OUT/bench.json"
callgrind_control -d $VPID >/dev/null
kill -TERM $VPID
wait $VPID || true
N=$((JOBS * CLIENTS))
F=$OUT/callgrind.out.1-01 # dump 1 (the bench), thread 1 (the loop)
TOT=$(callgrind_annotate "$F" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}')
echo "file $F"
echo "bench: $(grep -o '"avg_batch_jobs":[0-9.]*' "$OUT/bench.json" | head -1) $(grep -o '"jobs":[0-9]*' "$OUT/bench.json" | head -1)"
echo "loop thread: $TOT Ir / $N jobs = $((TOT / N)) Ir/job"
perjob() {
    awk -v n=$N '$1 ~ /^[0-9,]+$/ && $2 ~ /^\(/ {v=$1; gsub(",","",v); sub(/^[^)]*\) +/, ""); printf "%8d  %s\n", v/n, $0}' |
        sed 's|'"$PWD"'/||; s|/usr/lib/x86_64-linux-gnu/||' | head -${TOP:-40}
}
echo "-- inclusive Ir/job"
callgrind_annotate --inclusive=yes --threshold=100 --auto=no "$F" 2>/dev/null | sed -n '/file:function/,$p' | perjob
echo "-- self Ir/job"
callgrind_annotate --threshold=100 --auto=no "$F" 2>/dev/null | sed -n '/file:function/,$p' | perjob
