#!/bin/sh
# tests/fuzz/run.sh NAME BINARY SEED_DIR WORK_DIR SECONDS MAX_LEN
# Run one libFuzzer target for SECONDS on a fresh copy of its seed corpus
# (WORK_DIR/corpus/NAME, so the committed seeds stay as they are), keep the
# whole log in WORK_DIR/NAME.log and print libFuzzer's final figures. Exits
# non-zero when the target crashed, leaked, timed out or ran out of memory;
# the input that did it is saved under WORK_DIR/artifacts/.
set -u
name=$1 bin=$2 seeds=$3 work=$4 secs=$5 maxlen=$6
corpus=$work/corpus/$name
log=$work/$name.log
rm -rf "$corpus"
mkdir -p "$corpus" "$work/artifacts"
cp "$seeds"/* "$corpus"/
nseeds=$(ls "$corpus" | wc -l)
echo "fuzz $name: ${secs}s, $nseeds seeds from $seeds, log $log"
"$bin" -max_total_time="$secs" -malloc_limit_mb=64 -rss_limit_mb=512 \
	-max_len="$maxlen" -timeout=10 -print_final_stats=1 \
	-artifact_prefix="$work/artifacts/$name-" "$corpus" >"$log" 2>&1
rc=$?
grep -E '^#[0-9]+[[:space:]]+INITED' "$log" | sed "s/^/  $name: /"
grep -E '^#[0-9]+[[:space:]]' "$log" | tail -n 1 | sed "s/^/  $name: /"
grep -E '^stat::' "$log" | sed "s/^/  $name: /"
echo "  $name: corpus now $(ls "$corpus" | wc -l) inputs (from $nseeds seeds)"
if [ "$rc" -ne 0 ]; then
	echo "fuzz $name: FAILED (libFuzzer exit $rc); end of $log:" >&2
	tail -n 60 "$log" >&2
	ls -l "$work/artifacts" | grep -F "$name-" >&2
	exit 1
fi
echo "fuzz $name: no crash"
