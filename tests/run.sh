#!/bin/sh
# tests/run.sh — run test binaries, several at once, and summarise.
#   BUILD=build [TEST_JOBS=N] ./tests/run.sh BIN...
# TEST_JOBS binaries run at a time (default: the number of cores, nproc),
# each under `timeout` (TEST_TIMEOUT seconds, default 600) with its output
# kept in its own log. Each log is printed whole as soon as its binary has
# finished, so one binary's output never interleaves with another's; the
# summary lists the binaries in the order given. The queue starts with the
# binaries that took longest last time ($BUILD/tests/.run-times, written at
# the end of every run that finished; without it, those listed in
# tests/slow-first.list), so the slowest does not start last. The binaries
# of tests/alone.list (those that compare speeds: a neighbour's load skews
# them) run last, one at a time, once every other binary has finished.
# Afterwards: one line per binary (in the order given), a table of the
# binaries by wall time, slowest first, with the CPU time each used (with
# the daemons it started: on a shared machine wall time says little), the
# failing binaries again with their failed tests and error lines (a log
# read by its tail still names them), then the totals of binaries
# passed/failed and of cmocka's "[  PASSED  ] N test(s)." /
# "[  FAILED  ] N test(s)" counts, and the run's wall time with the load.
# Exits 1 when any binary failed (non-zero exit, crash, timeout) or is
# missing, 2 on bad usage.
set -u

BUILD=${BUILD:-build}
TEST_TIMEOUT=${TEST_TIMEOUT:-600}
TEST_JOBS=${TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
CMOCKA_MESSAGE_OUTPUT=stdout
export BUILD CMOCKA_MESSAGE_OUTPUT

if [ $# -eq 0 ]; then
	echo "usage: BUILD=build [TEST_JOBS=N] $0 TEST_BINARY..." >&2
	exit 2
fi
case $TEST_JOBS in
'' | *[!0-9]* | 0)
	echo "run.sh: TEST_JOBS must be a positive integer, not '$TEST_JOBS'" >&2
	exit 2
	;;
esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vkgrad-tests.XXXXXX") || exit 2
times_file=$BUILD/tests/.run-times
now() { date +%s.%N; }
t_start=$(now)

# The binaries by index 1..n: $tmp/bin.I holds the path.
n=0
for bin in "$@"; do
	n=$((n + 1))
	printf '%s\n' "$bin" >"$tmp/bin.$n"
done

# The queue: indices, those with the longest recorded time first, the rest
# (never timed) after them in the order given. Without a record (a fresh
# build), the binaries of tests/slow-first.list first, in its order.
slow_list=$(dirname "$0")/slow-first.list
{
	i=0
	for bin in "$@"; do
		i=$((i + 1))
		t=""
		if [ -r "$times_file" ]; then
			t=$(awk -v b="$(basename "$bin")" '$1 == b { print $2; exit }' "$times_file")
		elif [ -r "$slow_list" ]; then
			t=$(awk -v b="$(basename "$bin")" '!/^#/ && NF { n++ } $1 == b { print 100000 - n; exit }' \
				"$slow_list")
		fi
		printf '%s %s\n' "${t:--1}" "$i"
	done
} | sort -s -k1,1 -g -r | awk '{ print $2 }' >"$tmp/queue.all"

# Those of tests/alone.list into $tmp/alone, the rest stay in the queue.
alone_list=$(dirname "$0")/alone.list
: >"$tmp/queue"
: >"$tmp/alone"
while read -r i; do
	name=$(basename "$(cat "$tmp/bin.$i")")
	if [ -r "$alone_list" ] && grep -v '^#' "$alone_list" | grep -qx "$name"; then
		echo "$i" >>"$tmp/alone"
	else
		echo "$i" >>"$tmp/queue"
	fi
done <"$tmp/queue.all"

# CPU seconds (user + system) of this shell's children that have ended,
# from `times` run in this shell (not a subshell's) into file $1.
cpu_children() {
	awk 'NR == 2 { split($1, u, "m"); split($2, s, "m"); printf "%.2f\n", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$1"
}

# run_one I: run binary I under timeout; its log in $tmp/log.I, then its
# wall time and CPU time (itself and every process it waited for: its
# daemons) in $tmp/time.I and, last, its exit status in $tmp/rc.I.
run_one() {
	bin=$(cat "$tmp/bin.$1")
	t0=$(now)
	times >"$tmp/cpu0.$1"
	if [ ! -x "$bin" ]; then
		echo "run.sh: $bin: not found or not executable" >"$tmp/log.$1"
		rc=127
	else
		timeout -k 10 "$TEST_TIMEOUT" "$bin" >"$tmp/log.$1" 2>&1 </dev/null &
		echo $! >"$tmp/pid.$1"
		wait $!
		rc=$?
		rm -f "$tmp/pid.$1"
	fi
	times >"$tmp/cpu1.$1"
	echo "$t0 $(now) $(cpu_children "$tmp/cpu0.$1") $(cpu_children "$tmp/cpu1.$1")" | awk '{ printf "%.1f %.1f\n", $2 - $1, $4 - $3 }' \
		>"$tmp/time.$1"
	echo "$rc" >"$tmp/rc.tmp.$1" && mv "$tmp/rc.tmp.$1" "$tmp/rc.$1"
}

# A worker takes the next index nobody has claimed (mkdir is atomic) until
# the queue is empty or the run is stopped.
worker() {
	while read -r i; do
		[ -e "$tmp/stop" ] && break
		mkdir "$tmp/claim.$i" 2>/dev/null || continue
		run_one "$i"
	done <"$tmp/queue"
}

workers=""
# On ^C or TERM: no new binary starts; each running one's `timeout` gets
# TERM, which it forwards to the test's whole process group (the daemons
# it started too).
interrupted() {
	: >"$tmp/stop"
	for f in "$tmp"/pid.*; do
		[ -e "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null
	done
	for w in $workers; do
		wait "$w" 2>/dev/null
	done
	echo "run.sh: interrupted" >&2
	exit "$1"
}
trap 'rm -rf "$tmp"' EXIT
trap 'interrupted 130' INT
trap 'interrupted 143' TERM

# One cost model for the run: a daemon started once on a cache directory of
# its own times the kernels and saves its model there, and each test
# daemon's fresh cache directory starts with a copy (VKGRAD_TEST_MODEL_DIR,
# tests/common/daemon_proc.h) instead of timing them again at every start
# (about a second of CPU on lavapipe, several on a loaded machine). Set
# VKGRAD_TEST_MODEL_DIR (empty: none) to skip this.
seed_model() {
	[ -x "$BUILD/vkgradd" ] && [ -x "$BUILD/vkgrad" ] || return 0
	"$BUILD/vkgradd" --socket "$tmp/model.sock" --cache-dir "$tmp/model" >"$tmp/model.log" 2>&1 &
	mpid=$!
	tries=0
	until "$BUILD/vkgrad" --socket "$tmp/model.sock" ping >/dev/null 2>&1; do
		tries=$((tries + 1))
		if [ "$tries" -gt 1200 ] || ! kill -0 "$mpid" 2>/dev/null; then
			break
		fi
		sleep 0.1
	done
	kill -TERM "$mpid" 2>/dev/null
	wait "$mpid" 2>/dev/null
	if ls "$tmp/model"/costmodel-*.txt >/dev/null 2>&1; then
		VKGRAD_TEST_MODEL_DIR=$tmp/model
		export VKGRAD_TEST_MODEL_DIR
	else
		echo "run.sh: no cost model measured for the run (each test daemon measures its own):" >&2
		tail -5 "$tmp/model.log" >&2
	fi
}
[ -z "${VKGRAD_TEST_MODEL_DIR+set}" ] && seed_model

w=0
while [ "$w" -lt "$TEST_JOBS" ] && [ "$w" -lt "$n" ]; do
	worker &
	workers="$workers $!"
	w=$((w + 1))
done
# The alone ones: once every queued binary has its status, one at a time.
if [ -s "$tmp/alone" ]; then
	(
		while ! [ -e "$tmp/stop" ]; do
			left=0
			while read -r i; do
				[ -e "$tmp/rc.$i" ] || left=1
			done <"$tmp/queue"
			[ "$left" -eq 0 ] && break
			sleep 0.2
		done
		while read -r i; do
			[ -e "$tmp/stop" ] && break
			run_one "$i"
		done <"$tmp/alone"
	) &
	workers="$workers $!"
fi

bins_pass=0
bins_fail=0
tests_pass=0
tests_fail=0

# sum_counts LOG TAG: the sum of N over lines "[  TAG  ] N test(s)".
sum_counts() {
	sed -n "s/^.*\[  $2  \] \([0-9][0-9]*\) test(s).*$/\1/p" "$1" |
		awk '{ s += $1 } END { print s + 0 }'
}

describe_rc() {
	case $1 in
	0) echo "ok" ;;
	124) echo "TIMEOUT after ${TEST_TIMEOUT}s" ;;
	125 | 126 | 127) echo "could not run (exit $1)" ;;
	137) echo "KILLED (timeout, SIGKILL)" ;;
	*)
		if [ "$1" -gt 128 ]; then
			sig=$(kill -l "$(($1 - 128))" 2>/dev/null || echo "$(($1 - 128))")
			echo "CRASHED (signal $sig)"
		else
			echo "FAILED (exit $1)"
		fi
		;;
	esac
}

: >"$tmp/times"
# report I: binary I's log and its line (also kept in $tmp/line.I).
report() {
	i=$1
	bin=$(cat "$tmp/bin.$i")
	name=$(basename "$bin")
	rc=$(cat "$tmp/rc.$i")
	read -r secs cpu <"$tmp/time.$i"
	log="$tmp/log.$i"
	echo "==== $name"
	cat "$log"
	p=$(sum_counts "$log" "PASSED")
	f=$(sum_counts "$log" "FAILED")
	tests_pass=$((tests_pass + p))
	tests_fail=$((tests_fail + f))
	# A binary that exits 0 yet reports failed tests still fails.
	if [ "$rc" -eq 0 ] && [ "$f" -gt 0 ]; then
		rc=1
	fi
	status=$(describe_rc "$rc")
	if [ "$rc" -eq 0 ]; then
		bins_pass=$((bins_pass + 1))
		mark="PASS"
	else
		bins_fail=$((bins_fail + 1))
		mark="FAIL"
	fi
	printf '%-4s %-32s %4d passed %4d failed %7.1f s  %s\n' "$mark" "$name" "$p" "$f" \
		"$secs" "$status" | tee "$tmp/line.$i"
	printf '%s %s %s %s\n' "$name" "$secs" "$mark" "$cpu" >>"$tmp/times"
}

# Each binary's log as soon as it has finished, whole (in the order they
# finish); the summary below lists them in the order given.
done_n=0
while [ "$done_n" -lt "$n" ]; do
	i=0
	found=0
	while [ "$i" -lt "$n" ]; do
		i=$((i + 1))
		if [ -e "$tmp/rc.$i" ] && [ ! -e "$tmp/line.$i" ]; then
			report "$i"
			done_n=$((done_n + 1))
			found=1
		fi
	done
	[ "$found" -eq 1 ] || sleep 0.2
done
for w in $workers; do
	wait "$w"
done
wall=$(echo "$t_start $(now)" | awk '{ printf "%.0f", $2 - $1 }')
if [ -d "$BUILD/tests" ]; then
	cp "$tmp/times" "$times_file.tmp" 2>/dev/null && mv "$times_file.tmp" "$times_file"
fi

echo
echo "==== summary ($BUILD, $TEST_JOBS at a time)"
i=0
while [ "$i" -lt "$n" ]; do
	i=$((i + 1))
	cat "$tmp/line.$i"
done
echo
echo "==== time per binary, slowest first: wall, and CPU (the binary and its daemons)"
sort -k2,2 -g -r "$tmp/times" | awk '{ printf "%8.1f s %8.1f s CPU  %-4s %s\n", $2, $4, $3, $1; s += $2; c += $4 }
	END { printf "%8.1f s %8.1f s CPU  in all (the sums; the run took less, %s at a time)\n", s, c, jobs }' \
	jobs="$TEST_JOBS"
# The failures again, last, where a log shown only by its tail still has
# them: each failing binary's line, its failed tests and its error lines.
if [ "$bins_fail" -gt 0 ]; then
	echo
	echo "==== failures"
	i=0
	while [ "$i" -lt "$n" ]; do
		i=$((i + 1))
		grep -q '^FAIL' "$tmp/line.$i" || continue
		cat "$tmp/line.$i"
		grep -E 'ERROR|FAIL|error:|Assertion|runtime error|Sanitizer' "$tmp/log.$i" |
			grep -v '^\[  FAILED  \] [0-9]' | awk '!seen[$0]++' | head -n 12 | sed 's/^/    /'
	done
fi
echo
echo "binaries: $bins_pass passed, $bins_fail failed, $n total"
echo "tests:    $tests_pass passed, $tests_fail failed"
echo "wall:     ${wall} s, $TEST_JOBS at a time; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
[ "$bins_fail" -eq 0 ]
