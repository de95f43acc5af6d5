#!/bin/sh
# Resumed dW, second round (daemon/stream.h), on the GPU machine:
#   scripts/device_sums2.sh BEFORE AFTER V1
# BEFORE: the session start's build, AFTER: this one, V1: the first resumed
# schedule (W first, each chunk's dX then dW after a barrier, equal
# chunks); bundles with bin/vkgradd, bin/vkgrad (BEFORE and AFTER also
# bin/test_stream). Runs test_stream of AFTER and of BEFORE on the GPU
# (VKGRAD_TEST_VALIDATION=0), kernel-only times (streaming off) of
# 8192/2048/1024 x 4096 x 4096 bf16 (what a chunk's GEMMs cost), each
# step's timestamps of one 8192x4096x4096 bf16 job on AFTER and V1
# (--log-level debug), then V1 and AFTER end to end alternated twice.
# Files in $OUT: test_stream_{after,before}.txt, sums2.jsonl, steps.txt,
# log.txt; the summary at the end. About 150 s.
set -u
BEF=${1:-} AFT=${2:-} V1=${3:-}
O=${OUT:-/tmp/vkgrad-sums2}
for b in "$BEF" "$AFT" "$V1"; do
	[ -n "$b" ] && [ -x "$b/bin/vkgradd" ] || { echo "usage: $0 BEFORE AFTER V1" >&2; exit 2; }
done
case $BEF in /*) ;; *) BEF=$PWD/$BEF ;; esac
case $AFT in /*) ;; *) AFT=$PWD/$AFT ;; esac
case $V1 in /*) ;; *) V1=$PWD/$V1 ;; esac
mkdir -p "$O"
LOG="$O/log.txt" J="$O/sums2.jsonl"
: >"$LOG"
: >"$J"
T0=$(date +%s)
say() { echo "=== $* (t+$(($(date +%s) - T0)) s)" | tee -a "$LOG"; }
for w in after before; do
	[ $w = after ] && b=$AFT || b=$BEF
	say "test_stream ($w) on the GPU"
	(. "$b/env.sh" && BUILD="$b/bin" VKGRAD_TEST_VALIDATION=0 timeout 200 "$b/bin/test_stream") \
		>"$O/test_stream_$w.txt" 2>&1
	echo "test_stream ($w): exit status $?" | tee -a "$LOG"
	grep -E "two accumulating|FAILED|differs" "$O/test_stream_$w.txt" | head -12
done
d=$(mktemp -d)
run() {
	label=$1 b=$2 dtypes=$3 shapes=$4
	shift 4
	(. "$b/env.sh" && exec timeout 150 "$b/bin/vkgradd" --socket "$d/s" --cache-dir "$d/c" \
		--max-region-bytes 4294967296 --max-total-region-bytes 17179869184 \
		--max-region-bytes-per-uid 17179869184 "$@") 2>"$O/daemon_$label.txt" &
	pid=$!
	i=0
	until (. "$b/env.sh" && "$b/bin/vkgrad" --socket "$d/s" ping) >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -gt 600 ] && { say "daemon ($label) did not start"; kill $pid; return; }
		sleep 0.1
	done
	say "$label: bench --kernels $shapes $dtypes (daemon $*)"
	echo "{\"run\":\"$label\",\"daemon_args\":\"$*\"}" >>"$J"
	(. "$b/env.sh" && timeout 120 "$b/bin/vkgrad" --socket "$d/s" bench --kernels --json --shapes "$shapes" \
		--dtypes "$dtypes" --variants auto ${BENCH_ARGS:-}) >>"$J" 2>>"$LOG"
	kill -TERM $pid
	wait $pid
}
run kernels_off "$AFT" bf16 "8192,4096,4096;2048,4096,4096;1024,4096,4096" --stream-chunk-bytes off
BENCH_ARGS="--reps 3" run steps_after "$AFT" bf16 8192,4096,4096 --log-level debug
BENCH_ARGS="--reps 3" run steps_v1 "$V1" bf16 8192,4096,4096 --log-level debug
for f in steps_after steps_v1; do
	echo "--- $f: the last job's steps" >>"$O/steps.txt"
	id=$(grep -E "stream job [0-9]+: .*steps; span" "$O/daemon_$f.txt" | tail -1 | sed 's/.*stream job \([0-9]*\):.*/\1/')
	grep -E "stream job $id:" "$O/daemon_$f.txt" >>"$O/steps.txt"
done
run v1_1 "$V1" bf16,f16 8192,4096,4096
run after_1 "$AFT" bf16,f16 8192,4096,4096
run v1_2 "$V1" bf16,f16 8192,4096,4096
run after_2 "$AFT" bf16,f16 8192,4096,4096
rm -rf "$d"
say "done"
awk '/"run"/{r=$0; sub(/.*"run":"/,"",r); sub(/".*/,"",r)}
     /"end_to_end_us"/{dt=$0; sub(/.*"dtype":"/,"",dt); sub(/".*/,"",dt);
		sh=$0; sub(/.*"shape":\[/,"",sh); sub(/\].*/,"",sh);
		e=$0; sub(/.*"end_to_end_us":/,"",e); sub(/[,}].*/,"",e);
		k=$0; sub(/.*"gpu_us":/,"",k); sub(/[,}].*/,"",k);
		ok=$0; sub(/.*"ok":/,"",ok); sub(/[,}].*/,"",ok);
		t=""; if ($0 ~ /"stream_us"/) { t=$0; sub(/.*"stream_us":\{/,"",t); sub(/\}.*/,"",t);
			gsub(/"/,"",t); gsub(/_us:/,"=",t); gsub(/,/," ",t) }
		printf "%-12s %-5s %s e2e %8s gpu %8s ok %s %s\n", r, dt, sh, e, k, ok, t}' "$J"
cat "$O/steps.txt" | cut -c1-150 | head -80
