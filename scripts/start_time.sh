#!/bin/sh
# Cold and warm start time of the daemon.
#   usage: scripts/start_time.sh BIN_DIR     (BIN_DIR holds vkgradd and vkgrad)
# Cold: an empty --cache-dir, so every pipeline is compiled. Warm: the same
# directory again, so the pipelines come from the saved VkPipelineCache.
# Each start is timed from the exec of vkgradd until its socket answers
# `vkgrad ping` (polled about every 5 ms, so that is the resolution), 3 runs
# each; prints every run, the median, and the daemon's log line saying how
# many pipelines were built and how many came from the cache. (Mesa's
# lavapipe keeps no pipelines in its cache: its file is a 32-byte header and
# warm starts show 0 hits there.)
# Exit status: 0, or 1 when a daemon failed to start or to stop cleanly.
set -u

BIN=${1:-}
if [ -z "$BIN" ] || [ ! -x "$BIN/vkgradd" ] || [ ! -x "$BIN/vkgrad" ]; then
	echo "usage: $0 BIN_DIR   (BIN_DIR/vkgradd and BIN_DIR/vkgrad must exist; run 'make')" >&2
	exit 2
fi
VKGRADD="$BIN/vkgradd"
VKGRAD="$BIN/vkgrad"
RUNS=3
TIMEOUT_S=120

TMP=$(mktemp -d "${TMPDIR:-/tmp}/vkgrad-start.XXXXXX") || exit 2
DAEMON_PID=""
# shellcheck disable=SC2317 # called through the EXIT trap
cleanup() {
	if [ -n "$DAEMON_PID" ]; then
		kill -KILL "$DAEMON_PID" 2>/dev/null
		wait "$DAEMON_PID" 2>/dev/null
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_ns() {
	date +%s%N
}

# start_once CACHE_DIR LOG: sets MS to the milliseconds until ping answered;
# stops the daemon with SIGTERM and checks it exits 0. Runs in this shell
# (no command substitution), so the EXIT trap knows DAEMON_PID.
start_once() {
	sock="$TMP/sock"
	t0=$(now_ns)
	"$VKGRADD" --socket "$sock" --cache-dir "$1" --log-level info 2>"$2" &
	DAEMON_PID=$!
	until "$VKGRAD" --socket "$sock" ping >/dev/null 2>&1; do
		if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
			wait "$DAEMON_PID"
			echo "start_time: the daemon exited (status $?) before it answered; its log:" >&2
			sed 's/^/  /' "$2" >&2
			DAEMON_PID=""
			return 1
		fi
		if [ $(( ($(now_ns) - t0) / 1000000000 )) -ge "$TIMEOUT_S" ]; then
			echo "start_time: no answer on $sock within ${TIMEOUT_S} s; log:" >&2
			sed 's/^/  /' "$2" >&2
			return 1
		fi
		sleep 0.005
	done
	t1=$(now_ns)
	kill -TERM "$DAEMON_PID"
	wait "$DAEMON_PID"
	st=$?
	DAEMON_PID=""
	if [ "$st" -ne 0 ]; then
		echo "start_time: the daemon exited with status $st after SIGTERM; log:" >&2
		sed 's/^/  /' "$2" >&2
		return 1
	fi
	MS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e6 }')
}

median() {
	printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { printf "%.1f", v[int((NR + 1) / 2)] }'
}

# the log lines on the pipeline cache: loaded (warm) and pipelines built/hit
pipelines_lines() {
	grep -E 'pipeline cache loaded|pipelines: ' "$1" || echo "(no 'pipelines:' line in $1)"
}

echo "start_time: $VKGRADD, $RUNS runs each, from exec until the socket answers ping"
status=0

cold=""
for i in $(seq 1 "$RUNS"); do
	start_once "$TMP/cache-cold-$i" "$TMP/cold-$i.log" || { status=1; break; }
	cold="$cold $MS"
done
if [ "$status" -eq 0 ]; then
	# shellcheck disable=SC2086 # word splitting wanted
	printf 'cold (empty --cache-dir):  runs%s ms  median %s ms\n' \
		"$(printf ' %s' $cold)" "$(median $cold)"
	pipelines_lines "$TMP/cold-$RUNS.log" | sed 's/^/  /'
fi

warm=""
if [ "$status" -eq 0 ]; then
	for i in $(seq 1 "$RUNS"); do
		# the directory the first cold run filled
		start_once "$TMP/cache-cold-1" "$TMP/warm-$i.log" || { status=1; break; }
		warm="$warm $MS"
	done
fi
if [ "$status" -eq 0 ]; then
	# shellcheck disable=SC2086
	printf 'warm (same --cache-dir):   runs%s ms  median %s ms\n' \
		"$(printf ' %s' $warm)" "$(median $warm)"
	pipelines_lines "$TMP/warm-$RUNS.log" | sed 's/^/  /'
fi
exit "$status"
