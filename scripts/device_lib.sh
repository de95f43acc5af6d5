# scripts/device_lib.sh — sourced by the GPU-machine scripts (device_stream.sh,
# device_stream2.sh, device_sums.sh, device_sums2.sh, device_final4.sh,
# device_closing5.sh, device_f32sums.sh, device_datapath.sh, device_sync16.sh): one
# daemon per measured configuration, its `bench --kernels` lines, their summary.
#
# The caller sets O (output folder), J (the JSON lines file), LOG (stderr of
# the tools), D (a scratch folder: the daemon's socket D/s and cache D/c) and
# has a say() that prints a progress line.

# dev_daemon_start BUNDLE DAEMON_LOG [vkgradd args...]: a daemon of BUNDLE
# (BUNDLE/bin/vkgradd, BUNDLE/env.sh) on D/s, regions raised to fit large
# jobs, RUN_ENV in its environment, stderr appended to DAEMON_LOG; returns
# once it answers a ping (dev_pid set), 1 when it did not within 60 s.
dev_daemon_start() {
	dev_b=$1 dev_dlog=$2
	shift 2
	(. "$dev_b/env.sh" && exec env ${RUN_ENV:-} timeout 150 "$dev_b/bin/vkgradd" --socket "$D/s" \
		--cache-dir "$D/c" --max-region-bytes 4294967296 --max-total-region-bytes 17179869184 \
		--max-region-bytes-per-uid 17179869184 "$@") 2>>"$dev_dlog" &
	dev_pid=$!
	dev_i=0
	until (. "$dev_b/env.sh" && "$dev_b/bin/vkgrad" --socket "$D/s" ping) >/dev/null 2>&1; do
		dev_i=$((dev_i + 1))
		[ $dev_i -gt 600 ] && { kill $dev_pid; return 1; }
		sleep 0.1
	done
}

dev_daemon_stop() {
	kill -TERM $dev_pid
	wait $dev_pid
}

# dev_run LABEL BUNDLE DTYPES SHAPES [vkgradd args...]: a daemon
# (dev_daemon_start; stderr to DAEMON_LOG, default LOG), a {"run": LABEL}
# line then `vkgrad bench --kernels --json` (auto variants, BENCH_ARGS added)
# into J, and, unless NO_STATS is set, `vkgrad stats` into O/stats.txt.
dev_run() {
	dev_label=$1 dev_rb=$2 dev_dtypes=$3 dev_shapes=$4
	shift 4
	if ! dev_daemon_start "$dev_rb" "${DAEMON_LOG:-$LOG}" "$@"; then
		say "daemon ($dev_label) did not start"
		return
	fi
	say "$dev_label: bench --kernels $dev_shapes $dev_dtypes (daemon $*, env ${RUN_ENV:-})"
	echo "{\"run\":\"$dev_label\",\"daemon_args\":\"$*\",\"env\":\"${RUN_ENV:-}\"}" >>"$J"
	(. "$dev_rb/env.sh" && timeout 120 "$dev_rb/bin/vkgrad" --socket "$D/s" bench --kernels --json \
		--shapes "$dev_shapes" --dtypes "$dev_dtypes" --variants auto ${BENCH_ARGS:-}) >>"$J" 2>>"$LOG"
	if [ -z "${NO_STATS:-}" ]; then
		echo "--- $dev_label ($*, env ${RUN_ENV:-})" >>"$O/stats.txt"
		(. "$dev_rb/env.sh" && "$dev_rb/bin/vkgrad" --socket "$D/s" stats) >>"$O/stats.txt" 2>&1
	fi
	dev_daemon_stop
}

# dev_summary FILE: per run, dtype and shape of FILE's bench lines:
# end_to_end_us, gpu_us, ok, the stream timeline (stream_us); with
# STAGES=1 also the traces' stages_us.
dev_summary() {
	awk -v stages="${STAGES:-0}" '/"run"/{r=$0; sub(/.*"run":"/,"",r); sub(/".*/,"",r)}
     /"end_to_end_us"/{dt=$0; sub(/.*"dtype":"/,"",dt); sub(/".*/,"",dt);
		sh=$0; sub(/.*"shape":\[/,"",sh); sub(/\].*/,"",sh);
		e=$0; sub(/.*"end_to_end_us":/,"",e); sub(/[,}].*/,"",e);
		k=$0; sub(/.*"gpu_us":/,"",k); sub(/[,}].*/,"",k);
		ok=$0; sub(/.*"ok":/,"",ok); sub(/[,}].*/,"",ok);
		t=""; if ($0 ~ /"stream_us"/) { t=$0; sub(/.*"stream_us":\{/,"",t); sub(/\}.*/,"",t);
			gsub(/"/,"",t); gsub(/_us:/,"=",t); gsub(/,/," ",t) }
		s=""; if (stages && $0 ~ /"stages_us"/) { s=$0; sub(/.*"stages_us":\{/,"",s); sub(/\}.*/,"",s);
			gsub(/"/,"",s); gsub(/:/,"=",s); gsub(/,/," ",s) }
		printf "%-13s %-5s %s e2e %8s gpu %8s ok %s %s\n", r, dt, sh, e, k, ok, t;
		if (s != "") printf "%-16s stages_us %s\n", "", s}' "$1"
}

# dev_last_steps DAEMON_LOG: the step lines (debug level) of the last
# streamed job in a daemon's log.
dev_last_steps() {
	dev_id=$(grep -E "stream job [0-9]+: .*steps; span" "$1" | tail -1 | sed 's/.*stream job \([0-9]*\):.*/\1/')
	[ -n "$dev_id" ] && grep -E "stream job $dev_id:" "$1"
}

# dev_steps BUNDLE DTYPE SHAPE OUTFILE: one streamed job of SHAPE (DTYPE)
# on a daemon of BUNDLE at debug level (dev_run, J and LOG as the caller
# set them), its step lines into OUTFILE, the last 12 on stdout.
dev_steps() {
	dev_sd=$(mktemp -d)
	BENCH_ARGS="--reps 3" NO_STATS=1 DAEMON_LOG="$dev_sd/daemon.txt" \
		dev_run steps "$1" "$2" "$3" --log-level debug
	dev_last_steps "$dev_sd/daemon.txt" | sed 's/^vkgradd: debug: //' | cut -c1-120 >"$4"
	tail -12 "$4"
	rm -rf "$dev_sd"
}

# dev_torch_mp TORCH_MP OUTFILE: torch_multiproc.py 1 16 (the script at
# TORCH_MP) without NVIDIA MPS, then under MPS (nvidia-cuda-mps-control -d
# with private pipe and log folders, MPS=1 in the environment, which the
# script only prints; stopped with `quit`); its JSON lines appended to
# OUTFILE, the tools' output to LOG.
dev_torch_mp() {
	say "torch_multiproc.py 1 16, no MPS"
	(cd "$(dirname "$1")" && timeout 100 python3 "$1" 1 16) >>"$2" 2>>"$LOG"
	dev_mpsctl=$(command -v nvidia-cuda-mps-control || ls /usr/local/nvidia/bin/nvidia-cuda-mps-control 2>/dev/null)
	if [ -z "$dev_mpsctl" ]; then
		say "nvidia-cuda-mps-control not found: no MPS run"
		return
	fi
	dev_m=$(mktemp -d)
	say "torch_multiproc.py 1 16 under MPS ($dev_mpsctl -d)"
	(
		export CUDA_MPS_PIPE_DIRECTORY="$dev_m/pipe" CUDA_MPS_LOG_DIRECTORY="$dev_m/log"
		mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
		"$dev_mpsctl" -d >>"$LOG" 2>&1
		sleep 1
		(cd "$(dirname "$1")" && MPS=1 timeout 100 python3 "$1" 1 16) >>"$2" 2>>"$LOG"
		echo quit | "$dev_mpsctl" >>"$LOG" 2>&1
		sleep 1
		cat "$CUDA_MPS_LOG_DIRECTORY"/control.log >>"$LOG" 2>/dev/null
	)
	rm -rf "$dev_m"
}

# dev_kernels_table BUNDLE DIR STEP: the closing runs' kernels beside
# PyTorch: `vkgrad bench --kernels` (8192x4096x4096, 16384x8192x8192,
# 2048x1024x1024; bf16, f16, f32; auto) into DIR/bench.jsonl, then
# torch_linear_backward.py (in BUNDLE) into DIR/torch.jsonl, and
# closing_table.py of the two; progress lines through say (STEP their
# prefix), the exit codes and the table also appended to S.
dev_kernels_table() {
	say "$3 bench --kernels (auto)"
	(. "$1/env.sh" && timeout 110 "$1/bin/vkgrad" bench --kernels --json \
		--shapes "8192,4096,4096;16384,8192,8192;2048,1024,1024" --dtypes bf16,f16,f32 --variants auto) \
		>"$2/bench.jsonl" 2>"$2/bench.err"
	echo "rc=$?" | tee -a "$S"
	say "$3 torch_linear_backward.py"
	(cd "$1" && timeout 110 python3 torch_linear_backward.py) >"$2/torch.jsonl" 2>"$2/torch.err"
	echo "rc=$?" | tee -a "$S"
	python3 scripts/closing_table.py "$2/bench.jsonl" "$2/torch.jsonl" 2>&1 | tee -a "$S"
}

# dev_test_stream BUNDLE OUTFILE [VALIDATION]: tests/integration's
# test_stream (BUNDLE/bin/test_stream) on this GPU against BUNDLE's
# daemon, its output into OUTFILE; VALIDATION (default 0: Debian 12's
# layer predates the H200's feature structs) as VKGRAD_TEST_VALIDATION.
# Returns the test's exit status.
dev_test_stream() {
	(. "$1/env.sh" && BUILD="$1/bin" VKGRAD_TEST_VALIDATION=${3:-0} timeout 200 "$1/bin/test_stream") \
		>"$2" 2>&1
}

# dev_closing_kernels BUNDLE DIR: the closing runs' first steps (S, say as
# the caller set them): nvidia-smi; 1. test_stream on the GPU
# (DIR/test_stream.txt); 2. dev_kernels_table into DIR; 3. 8192x4096x4096
# with streaming off, bf16/f16/f32 (DIR/off.jsonl, DIR/off.err; sets D, J
# and LOG), its dev_summary.
dev_closing_kernels() {
	nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv 2>&1 |
		tee -a "$S"
	say "1. test_stream on the GPU"
	dev_test_stream "$1" "$2/test_stream.txt"
	echo "rc=$?" | tee -a "$S"
	grep -E "resumed dW|dW steps|PASSED|FAILED" "$2/test_stream.txt" | tee -a "$S"
	dev_kernels_table "$1" "$2" "2."
	say "3. 8192x4096x4096, streaming off"
	D=$(mktemp -d) J="$2/off.jsonl" LOG="$2/off.err"
	: >"$J"
	NO_STATS=1 dev_run off "$1" bf16,f16,f32 8192,4096,4096 --stream-chunk-bytes off
	dev_summary "$J" | tee -a "$S"
}

# dev_tiny_summary FILE: one line per daemon-mode line of `vkgrad bench
# --json` in FILE, each tagged with a "run" key: jobs/s, p50, p99, stages.
dev_tiny_summary() {
	python3 - "$1" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if j.get("mode") != "daemon":
        continue
    st = j.get("stages_us", {})
    print("%-9s %-15s c=%-2d x%-2d %9.0f jobs/s p50 %7.1f p99 %7.1f  %s" % (
        j["run"], j["scenario"], j["clients"], j["inflight"], j.get("jobs_per_s", 0),
        j.get("p50_us", 0), j.get("p99_us", 0), " ".join("%s=%s" % (k, v) for k, v in st.items())))
PY
}

# dev_flag_sweep BUNDLE FLAG "NS" REPS JOBS "SYNC_CLIENTS": for each rep and
# each N of NS in turn, a daemon of BUNDLE with FLAG N (dev_daemon_start),
# then `vkgrad bench --socket` against it: tiny_latency with each count of
# SYNC_CLIENTS synchronous clients (JOBS each) and tiny_throughput 16 x 32
# in flight (JOBS/4 each), its lines tagged "run": "n=N#REP" into J; the
# daemon's completion-wait and batch lines of `stats` into LOG.
dev_flag_sweep() {
	for dev_r in $(seq 1 "$4"); do
		for dev_n in $3; do
			dev_daemon_start "$1" "$LOG" "$2" "$dev_n" || { say "daemon n=$dev_n did not start"; continue; }
			say "n=$dev_n rep $dev_r"
			for dev_c in $6; do
				(. "$1/env.sh" && timeout 100 "$1/bin/vkgrad" bench --socket "$D/s" --json \
					--scenario tiny_latency --clients "$dev_c" --jobs "$5") 2>>"$LOG" |
					sed "s/^{/{\"run\":\"n=$dev_n#$dev_r\",/" >>"$J"
			done
			(. "$1/env.sh" && timeout 100 "$1/bin/vkgrad" bench --socket "$D/s" --json \
				--scenario tiny_throughput --clients 16 --jobs $(($5 / 4))) 2>>"$LOG" |
				sed "s/^{/{\"run\":\"n=$dev_n#$dev_r\",/" >>"$J"
			(. "$1/env.sh" && "$1/bin/vkgrad" --socket "$D/s" stats) 2>&1 |
				grep -E "completion wait|jobs_per_batch" >>"$LOG"
			dev_daemon_stop
		done
	done
}
