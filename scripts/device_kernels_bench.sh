#!/bin/sh
# One GPU-machine run from a bundle (vkgradd, vkgrad, test_dtypes,
# test_lifecycle): f16/bf16 correctness including cooperative matrices, the
# bench-kernels table with the device-local path on (auto) and off, forced
# f16 variants, and test_lifecycle. Full outputs go to $OUT.
B=$(dirname "$0")
O=${OUT:-/tmp}
echo "=== test_dtypes"; BUILD=$B/bin timeout 150 $B/bin/test_dtypes > $O/test_dtypes.log 2>&1; echo rc=$?; grep -E "f16:|bf16:|FAIL|ERROR|coopmat" $O/test_dtypes.log | head
SH="32,64,8;256,256,16;4096,1024,16;8192,4096,32;2048,1024,1024;8192,4096,4096;16384,8192,8192"
echo "=== bench-kernels, device-local auto"
timeout 240 $B/bin/vkgrad bench --kernels --json --shapes "$SH" --variants auto > $O/kernels_on.jsonl 2>&1; echo rc=$?
echo "=== forced variants"
timeout 120 $B/bin/vkgrad bench --kernels --json --shapes "4096,1024,16;8192,4096,32;2048,1024,1024;8192,4096,4096" --dtypes f32,f16 --variants coopmat,tiled,splitk,generic > $O/kernels_forced.jsonl 2>&1; echo rc=$?
echo "=== bench-kernels, device-local off"
d=$(mktemp -d)
$B/bin/vkgradd --socket $d/s --cache-dir $d/c --devlocal-min-bytes off --max-region-bytes 8589934592 --max-total-region-bytes 68719476736 2> $d/log & p=$!
for i in $(seq 1 100); do [ -S $d/s ] && break; sleep 0.1; done
timeout 150 $B/bin/vkgrad --socket $d/s bench --kernels --json --shapes "$SH" --variants auto --dtypes f32,f16 > $O/kernels_off.jsonl 2>&1; echo rc=$?
kill $p; wait $p
echo "=== test_lifecycle"; BUILD=$B/bin timeout 150 $B/bin/test_lifecycle > $O/test_lifecycle.log 2>&1; echo rc=$?; grep -E "OK|FAIL|ERROR" $O/test_lifecycle.log | tail -20
