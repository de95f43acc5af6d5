#!/bin/sh
# f32 resumed on tiled128 (issue 15): one GPU-machine run.
#   [OUT=DIR] scripts/device_f32sums.sh BEFORE AFTER
# 1. device_sums.sh BEFORE AFTER (test_stream on the GPU with AFTER's
#    bin/test_stream; end to end 8192x4096x4096 bf16/f16/f32, the two
#    builds alternated twice; AFTER with resumed dW off; chunk sizes);
# 2. one f32 job's steps at debug level (AFTER);
# 3. torch_linear_backward.py (in AFTER) for PyTorch's e2e_host_us, same run.
# Files in $OUT: sums/ (device_sums.sh's), steps_f32.txt, torch.jsonl, summary.txt.
set -u
BEFORE=${1:?usage: device_f32sums.sh BEFORE AFTER}
AFTER=${2:?usage: device_f32sums.sh BEFORE AFTER}
case $BEFORE in /*) ;; *) BEFORE=$PWD/$BEFORE ;; esac
case $AFTER in /*) ;; *) AFTER=$PWD/$AFTER ;; esac
O=${OUT:-/tmp/f32sums}
mkdir -p "$O/sums"
S="$O/summary.txt"
: >"$S"
say() { echo "=== $* ($(date -u +%T))" | tee -a "$S"; }
say "1. device_sums.sh"
OUT="$O/sums" timeout 330 sh scripts/device_sums.sh "$BEFORE" "$AFTER" 2>&1 | tail -45 | tee -a "$S"
say "2. one f32 job's steps (AFTER)"
D=$(mktemp -d) J="$O/steps_bench.jsonl" LOG="$O/steps_bench.err"
. scripts/device_lib.sh
dev_steps "$AFTER" f32 8192,4096,4096 "$O/steps_f32.txt" | tee -a "$S"
say "3. torch_linear_backward.py"
(cd "$AFTER" && timeout 150 python3 torch_linear_backward.py) >"$O/torch.jsonl" 2>"$O/torch.err"
echo "rc=$?" | tee -a "$S"
grep -E '"dtype"' "$O/torch.jsonl" | grep 8192 | cut -c1-300 | tee -a "$S"
say done
