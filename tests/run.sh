#!/bin/sh
# tests/run.sh — run test binaries one after another and summarise.
#   BUILD=build ./tests/run.sh BIN...
# Each binary runs under `timeout` (TEST_TIMEOUT seconds, default 600) with
# its output streamed as it comes. Afterwards: one line per binary, then the
# totals of binaries passed/failed and of cmocka's
# "[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s)" counts.
# Exits 1 when any binary failed (non-zero exit, crash, timeout) or is
# missing, 2 on bad usage.
set -u

BUILD=${BUILD:-build}
TEST_TIMEOUT=${TEST_TIMEOUT:-600}
CMOCKA_MESSAGE_OUTPUT=stdout
export BUILD CMOCKA_MESSAGE_OUTPUT

if [ $# -eq 0 ]; then
	echo "usage: BUILD=build $0 TEST_BINARY..." >&2
	exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vkgrad-tests.XXXXXX") || exit 2
pid=""
# On ^C or TERM, pass the signal to the running test's `timeout`, which
# forwards it to the test's whole process group (daemons it started too).
interrupted() {
	if [ -n "$pid" ]; then
		kill -TERM "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	echo "run.sh: interrupted" >&2
	exit "$1"
}
trap 'rm -rf "$tmp"' EXIT
trap 'interrupted 130' INT
trap 'interrupted 143' TERM

bins_pass=0
bins_fail=0
tests_pass=0
tests_fail=0
lines=""

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

for bin in "$@"; do
	name=$(basename "$bin")
	log="$tmp/$name.log"
	echo "==== $name"
	if [ ! -x "$bin" ]; then
		echo "run.sh: $bin: not found or not executable" | tee "$log"
		rc=127
	else
		# Stream through tee from a FIFO, so that both the exit status and
		# the pid (for the signal traps) of `timeout` are at hand.
		rm -f "$tmp/fifo"
		mkfifo "$tmp/fifo" || exit 2
		tee "$log" <"$tmp/fifo" &
		teepid=$!
		timeout -k 10 "$TEST_TIMEOUT" "$bin" >"$tmp/fifo" 2>&1 </dev/null &
		pid=$!
		wait "$pid"
		rc=$?
		pid=""
		wait "$teepid"
	fi
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
	line=$(printf '%-4s %-32s %4d passed %4d failed  %s' "$mark" "$name" "$p" "$f" "$status")
	echo "$line"
	lines="$lines$line
"
done

echo
echo "==== summary ($BUILD)"
printf '%s' "$lines"
echo "binaries: $bins_pass passed, $bins_fail failed, $# total"
echo "tests:    $tests_pass passed, $tests_fail failed"
[ "$bins_fail" -eq 0 ]
