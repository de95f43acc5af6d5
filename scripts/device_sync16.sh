#!/bin/sh
# Issue 15, 16 synchronous clients: why `bench --compare` lines and a bench
# against a running daemon differ (measurements/h200-2026-12-03-s4: 98,481
# against 139,723 jobs/s, same build, same run), and where the daemon's
# CPU goes. One GPU-machine run from a bundle B (bin/vkgradd, bin/vkgrad,
# torch_multiproc.py beside):
#   [OUT=DIR] [JOBS=2000] [REPS=2] scripts/device_sync16.sh B
# REPS times, in turn, tiny_latency with 16 synchronous clients:
#   compare:  bench --compare (a private daemon, and the direct mode's
#             helper process with its own device alive beside it);
#   private:  bench (a private daemon, no helper);
#   external: bench --socket against a daemon started here;
# while each runs, `top -H` samples every thread's CPU (top_*.txt). Then
# `perf` on the external daemon's 16-client line where perf exists, and
# torch_multiproc.py 1 16 with and without MPS.
# Files in $OUT: sync16.jsonl (bench lines, each with "how" and "rep"),
# top_*.txt, perf.txt, torch.jsonl, log.txt; the summary on stdout.
set -u
B=${1:?usage: device_sync16.sh BUNDLE}
case $B in /*) ;; *) B=$PWD/$B ;; esac
O=${OUT:-/tmp/sync16}
JOBS=${JOBS:-2000}
REPS=${REPS:-2}
mkdir -p "$O"
LOG="$O/log.txt"
: >"$LOG"; : >"$O/sync16.jsonl"
say() { echo "=== $* ($(date -u +%T))" | tee -a "$LOG"; }
. "$(dirname "$0")/device_lib.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv >>"$LOG" 2>&1
nproc >>"$LOG"
d=$(mktemp -d)
"$B/bin/vkgradd" --socket "$d/s" --cache-dir "$d/c" 2>"$d/log" &
dp=$!
for i in $(seq 1 600); do "$B/bin/vkgrad" --socket "$d/s" ping >/dev/null 2>&1 && break; sleep 0.1; done
# line HOW REP: one bench line, tagged, with top sampling beside it
line() {
	how=$1 rep=$2
	case $how in
	compare) args="--compare" ;;
	private) args="" ;;
	external) args="--socket $d/s" ;;
	esac
	say "$how #$rep"
	(command -v top >/dev/null && top -H -b -d 1 -n 4 -w 200 2>/dev/null | grep -E "^ *PID|vkgrad|python" | head -80) \
		>"$O/top_${how}_$rep.txt" 2>&1 &
	tp=$!
	timeout 120 "$B/bin/vkgrad" bench $args --json --scenario tiny_latency --clients 16 --jobs "$JOBS" 2>>"$LOG" |
		python3 -c '
import json,sys
for l in sys.stdin:
    try: j=json.loads(l)
    except ValueError: continue
    j["how"]=sys.argv[1]; j["rep"]=int(sys.argv[2]); print(json.dumps(j))
' "$how" "$rep" >>"$O/sync16.jsonl"
	wait $tp 2>/dev/null
}
for r in $(seq 1 "$REPS"); do
	line compare "$r"
	line private "$r"
	line external "$r"
done
if command -v perf >/dev/null 2>&1; then
	say "perf on the external daemon"
	(timeout 60 "$B/bin/vkgrad" bench --socket "$d/s" --json --scenario tiny_latency --clients 16 --jobs "$JOBS" >/dev/null 2>&1 &)
	sleep 1
	timeout 20 perf record -g -o "$d/perf.data" -p $dp -- sleep 4 >>"$LOG" 2>&1
	perf report -i "$d/perf.data" --stdio --no-children --percent-limit 0.7 2>/dev/null | head -250 >"$O/perf.txt"
	sleep 5
else
	say "no perf on this machine"
fi
"$B/bin/vkgrad" --socket "$d/s" stats >"$O/stats_external.txt" 2>&1
kill $dp; wait $dp 2>/dev/null
TORCH_MP=$B/torch_multiproc.py
: >"$O/torch.jsonl"
[ -f "$TORCH_MP" ] && dev_torch_mp "$TORCH_MP" "$O/torch.jsonl"
say "summary"
python3 - "$O" <<'PY' | tee -a "$LOG"
import json, os, sys
o = sys.argv[1]
def lines(n):
    r = []
    for l in open(os.path.join(o, n)):
        try: r.append(json.loads(l))
        except ValueError: pass
    return r
mps = [x for x in lines("torch.jsonl") if x.get("processes") == 16 and x.get("mps")]
mps = mps[-1]["jobs_per_s"] if mps else None
for x in lines("sync16.jsonl"):
    if x.get("mode") != "daemon": continue
    r = " = %.2fx MPS (%.0f)" % (x["jobs_per_s"] / mps, mps) if mps else ""
    print("%-8s #%d: p50 %.1f us, p99 %.1f us, %.0f jobs/s%s; stages %s" % (x["how"], x["rep"], x["p50_us"], x["p99_us"], x["jobs_per_s"], r, json.dumps(x.get("stages_us"))))
for x in lines("torch.jsonl"):
    print("torch processes=%s mps=%s: %s jobs/s, p50 %s us, p99 %s us" % (x.get("processes"), x.get("mps"), x.get("jobs_per_s"), x.get("p50_us"), x.get("p99_us")))
PY
