#!/bin/sh
# The Python client on the GPU machine: a small MLP trained with
# vkgrad.torch's backward on vkgradd next to plain torch (CPU, and CUDA where
# the machine's python3 has it), as a table (scripts/device_python.py), then
# a `vkgrad stats --prometheus` sample of the daemon that served it.
#
# Made here (the package travels with the working tree, python/):
#   make && ../shared/device/bundle.sh .device-bundle-py build/vkgradd build/vkgrad build/libvkgrad.so.0
# On the device (run with carry [".device-bundle-py"]):
#   scripts/device_python.sh .device-bundle-py
# Settings: MLP_SIZES, MLP_BATCH, MLP_STEPS, MLP_WARMUP, MLP_DTYPES
# (scripts/device_python.py); PYTHON (default python3). Files go to $OUT.
set -u
B=${1:-.device-bundle-py}
O=${OUT:-/tmp}
PY=${PYTHON:-python3}
[ -x "$B/bin/vkgradd" ] && [ -e "$B/bin/libvkgrad.so.0" ] || {
	echo "usage: $0 BUNDLE (with bin/vkgradd, bin/vkgrad, bin/libvkgrad.so.0; see the header)" >&2
	exit 2
}
. "$B/env.sh"
d=$(mktemp -d)
"$B/bin/vkgradd" --socket "$d/s" --cache-dir "$d/c" 2>"$O/daemon.log" &
pid=$!
i=0
until "$B/bin/vkgrad" --socket "$d/s" ping >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -gt 600 ] && { tail -20 "$O/daemon.log"; kill $pid; exit 1; }
	sleep 0.1
done
grep -m1 "using device" "$O/daemon.log"
export VKGRAD_SOCKET="$d/s" VKGRAD_LIBRARY="$PWD/$B/bin/libvkgrad.so.0" PYTHONPATH="$PWD/python"
case $B in /*) VKGRAD_LIBRARY="$B/bin/libvkgrad.so.0" ;; esac
echo "=== MLP training: vkgrad.torch backward vs plain torch"
timeout 500 "$PY" scripts/device_python.py >"$O/mlp.txt" 2>&1
rc=$?
cat "$O/mlp.txt"
echo "=== vkgrad stats --prometheus (after the runs)"
"$B/bin/vkgrad" --socket "$d/s" stats --prometheus > "$O/stats.prom"
grep -E '^vkgrad_(up|info|jobs_done_total|batches_total|job_latency_seconds_(count|sum)|batch_gpu_seconds_(count|sum))' "$O/stats.prom"
"$B/bin/vkgrad" --socket "$d/s" stats | tail -4
kill -TERM $pid; wait $pid; echo "daemon exit $?"
rm -rf "$d"
exit $rc
