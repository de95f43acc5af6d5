#!/bin/sh
# The reportable GPU-machine run for issue 14, from a bundle (bin/vkgradd,
# bin/vkgrad; beside this script: device_coopmat_check.sh, closing_table.py,
# torch_linear_backward.py): the coopmat_khr and coopmat_nv2 pipelines as
# compiled (debug log), the tile-edge check for coopmat_khr under both
# tilings (the small one, which those shapes get, and the large one, forced
# with VKGRAD_CMK_SMALL_BELOW=0) and for coopmat_nv2, then `vkgrad bench
# --kernels` over the issue's shapes with coopmat_khr, coopmat_nv2 and auto
# beside PyTorch in the same run, and the table with ratios. Outputs in $OUT.
B=$(dirname "$0"); O=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
echo "=== pipelines"
d=$(mktemp -d)
$B/bin/vkgradd --socket $d/s --cache-dir $d/c --log-level debug 2> $O/daemon_debug.log & p=$!
for i in $(seq 1 300); do $B/bin/vkgrad --socket $d/s ping >/dev/null 2>&1 && break; sleep 0.1; done
$B/bin/vkgrad --socket $d/s info | grep -E "device|driver|coopmat"
kill $p; wait $p
grep -E "matrix extensions|coopmat_khr|coopmat_nv2|warning" $O/daemon_debug.log | sed 's/Binary Size=[0-9]*; //; s/Local Memory Size=[0-9]*; //' | cut -c1-200
echo "=== tile-edge check: small tiling (default for these shapes), then large"
timeout 150 sh $B/device_coopmat_check.sh $B/bin > $O/check.log 2>&1; echo rc=$?; tail -1 $O/check.log
VKGRAD_CMK_SMALL_BELOW=0 timeout 150 sh $B/device_coopmat_check.sh $B/bin >> $O/check.log 2>&1; echo rc=$?; tail -1 $O/check.log
echo "=== tile-edge check: coopmat_nv2"
timeout 150 sh $B/device_coopmat_check.sh $B/bin coopmat_nv2 >> $O/check.log 2>&1; echo rc=$?; tail -1 $O/check.log
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,utilization.gpu --format=csv -lms 500 > $O/clocks.csv 2>&1 & np=$!
echo "=== bench --kernels"
timeout 200 $B/bin/vkgrad bench --kernels --json --shapes "8192,4096,4096;16384,8192,8192;2048,1024,1024" --dtypes f16,bf16 --variants coopmat_khr,coopmat_nv2,auto > $O/bench.jsonl 2>&1; echo rc=$?
timeout 120 $B/bin/vkgrad bench --kernels --json --shapes "8192,4096,4096;16384,8192,8192" --dtypes f32 --variants auto >> $O/bench.jsonl 2>&1; echo rc=$?
echo "=== PyTorch"
PYTHONUNBUFFERED=1 timeout 300 python3 $B/torch_linear_backward.py > $O/torch.jsonl 2>&1; echo rc=$?; tail -2 $O/torch.jsonl
kill $np
python3 $B/closing_table.py $O/bench.jsonl $O/torch.jsonl > $O/table.md; cat $O/table.md
