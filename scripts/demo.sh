#!/bin/sh
# Run the vkgrad multi-client demo against a private daemon.
#   usage: scripts/demo.sh BUILD_DIR      (what `make demo` runs)
# Starts BUILD_DIR/vkgradd on a socket in a fresh temporary directory, waits
# until it answers, shows what it offers, lets several client processes run
# checked jobs at once, prints the daemon's counters and stops it again.
# Exit status: the demo's (0 when every job matched the CPU reference).
set -u

BUILD=${1:-build}
VKGRADD="$BUILD/vkgradd"
VKGRAD="$BUILD/vkgrad"
for f in "$VKGRADD" "$VKGRAD"; do
	if [ ! -x "$f" ]; then
		echo "demo: $f is missing; run 'make' first" >&2
		exit 2
	fi
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/vkgrad-demo.XXXXXX") || exit 2
SOCK="$TMP/vkgrad.sock"
LOG="$TMP/vkgradd.log"
DAEMON_PID=""

stop_daemon() {
	if [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
		kill -TERM "$DAEMON_PID" 2>/dev/null
		wait "$DAEMON_PID" 2>/dev/null
		echo "daemon stopped (exit status $?)"
	fi
	DAEMON_PID=""
}
show_log() {
	echo "daemon log ($LOG):"
	sed 's/^/  vkgradd| /' "$LOG"
}
# shellcheck disable=SC2317 # called through the EXIT trap
cleanup() {
	stop_daemon >/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

section() {
	printf '\n=== %s\n' "$1"
}

cat <<INTRO
vkgrad demo
-----------
vkgradd is a daemon that owns the GPU and computes the backward pass of
linear layers (dW = dYᵀ·X, db = Σ dY, dX = dY·W) for any number of client
processes. Clients talk to it over a Unix socket and share their tensors
with it through shared memory, so no tensor data is copied over the socket.

This script will:
  1. start a private daemon on $SOCK
     (its log goes to $LOG and is shown at the end),
  2. ask it what it is ('vkgrad info'),
  3. run 'vkgrad demo': 4 client processes submit 4 jobs each at the same
     time, and every result is checked against a CPU reference,
  4. print the daemon's counters ('vkgrad stats') and stop the daemon.
INTRO

section "1. starting the daemon"
echo "\$ $VKGRADD --socket $SOCK --cache-dir $TMP/cache &"
"$VKGRADD" --socket "$SOCK" --cache-dir "$TMP/cache" >"$LOG" 2>&1 &
DAEMON_PID=$!

# The first start compiles the GPU pipelines, which can take a while on a
# CPU Vulkan driver: poll with ping for up to about 60 s.
tries=0
until "$VKGRAD" --socket "$SOCK" ping >/dev/null 2>&1; do
	if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
		wait "$DAEMON_PID"
		echo "demo: the daemon exited (status $?) before it answered" >&2
		DAEMON_PID=""
		show_log >&2
		exit 3
	fi
	tries=$((tries + 1))
	if [ "$tries" -ge 240 ]; then
		echo "demo: the daemon did not answer on $SOCK within 60 s" >&2
		show_log >&2
		exit 3
	fi
	sleep 0.25
done
echo "daemon running (pid $DAEMON_PID) and answering:"
"$VKGRAD" --socket "$SOCK" ping

section "2. what the daemon offers: vkgrad info"
if ! "$VKGRAD" --socket "$SOCK" info; then
	show_log >&2
	exit 3
fi

section "3. four clients at once: vkgrad demo --clients 4 --jobs 4"
"$VKGRAD" --socket "$SOCK" demo --clients 4 --jobs 4
status=$?

section "4. the daemon's counters: vkgrad stats"
"$VKGRAD" --socket "$SOCK" stats

section "5. stopping the daemon (SIGTERM)"
stop_daemon
show_log

echo
case $status in
0) echo "demo: PASS: every job matched the float64 CPU reference" ;;
1) echo "demo: FAIL: some results did not match the reference (see MISMATCH above)" ;;
*) echo "demo: FAIL: a daemon or connection error stopped some jobs (status $status)" ;;
esac
exit "$status"
