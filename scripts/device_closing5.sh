#!/bin/sh
# The closing H200 run of 2026-12-03's fifth session: device_final4.sh
# BEFORE AFTER (test_stream twice, nv2 tile edges, kernels beside PyTorch,
# end to end alternated, one bf16 job's steps, tiny jobs alternated, data
# path with MPS), then one f32 job's steps on AFTER (dW in quarter blocks).
#   [OUT=DIR] scripts/device_closing5.sh BEFORE AFTER
set -u
BEFORE=${1:?usage: device_closing5.sh BEFORE AFTER}
AFTER=${2:?usage: device_closing5.sh BEFORE AFTER}
case $AFTER in /*) ;; *) AFTER=$PWD/$AFTER ;; esac
O=${OUT:-/tmp/out}
mkdir -p "$O"
OUT="$O" sh scripts/device_final4.sh "$BEFORE" "$AFTER"
S="$O/summary.txt"
say() { echo "=== $* ($(date -u +%T))" | tee -a "$S"; }
say "5. one f32 job's steps (AFTER)"
D=$(mktemp -d) J="$O/steps_f32.jsonl" LOG="$O/steps_f32.err"
. scripts/device_lib.sh
dev_steps "$AFTER" f32 8192,4096,4096 "$O/steps_f32.txt" | tee -a "$S"
say done
