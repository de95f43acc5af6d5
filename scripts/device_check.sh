#!/bin/sh
# Run on a machine with a GPU from a bundle (../shared/device/bundle.sh):
# start the daemon, print `vkgrad info`, run every test shape with --check
# (all output subsets, overwrite and accumulate), print stats, stop.
#   scripts/device_check.sh BIN_DIR
set -u
bin=${1:-build}
dir=$(mktemp -d)
sock=$dir/vkgrad.sock
"$bin/vkgradd" --socket "$sock" --cache-dir "$dir/cache" 2>"$dir/daemon.log" &
pid=$!
i=0
until "$bin/vkgrad" --socket "$sock" ping >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -gt 600 ] && { cat "$dir/daemon.log"; exit 1; }; sleep 0.1
done
head -5 "$dir/daemon.log"
"$bin/vkgrad" --socket "$sock" info
fail=0
for shape in 1x1x1 1x33x1 31x1x7 33x257x31 257x33x16 64x64x8 100x100x100 128x31x257 \
	4096x1024x16 8192x4096x32 2048x1024x1024 512x512x512 70000x64x8; do
	B=${shape%%x*}; r=${shape#*x}; I=${r%%x*}; O=${r#*x}
	for outs in dw db dx dw,db dw,db,dx; do
		for acc in "" --accumulate; do
			out=$("$bin/vkgrad" --socket "$sock" run --batch "$B" --in "$I" --out "$O" \
				--outputs "$outs" $acc --repeat 2 --check 2>&1)
			rc=$?
			echo "$out" | grep '^job 2/'
			[ $rc = 0 ] || { echo "$out"; echo "FAILED: $shape $outs $acc"; fail=1; }
		done
	done
done
"$bin/vkgrad" --socket "$sock" stats
kill -TERM $pid; wait $pid; echo "daemon exit $?"
tail -3 "$dir/daemon.log"
echo "device_check: $([ $fail = 0 ] && echo all shapes passed || echo FAILURES)"
exit $fail
