#!/usr/bin/env bash
# vkgrad on a GPU machine: named suites of benchmarks and checks, from a
# bundle of programs built here, into one output folder.
#
# Here (this Debian machine), once per build:
#   scripts/device-run.sh bundle [DIR]
#     make all and bin/test_stream, then DIR (default .device-bundle, which
#     git ignores) with bin/ (vkgradd, vkgrad, vkgrad-bench, test_stream,
#     libvkgrad.so.0), lib/, env.sh (../shared/device/bundle.sh), the PyTorch
#     anchors (../shared/anchors/*.py) and python/ (the package).
#     A second build for before/after: check it out elsewhere, bundle it into
#     .device-bundle-before, and set BEFORE_VKGRADD below.
# There (the GPU machine, the working tree copied, the bundle carried):
#   scripts/device-run.sh SUITE...
# Suites:
#   check    test_stream, test_dtypes and test_forward on this GPU; every
#            test shape `vkgrad run --check`
#            (all output subsets, overwrite and accumulate)
#   kernels  `bench --kernels` of three shapes x bf16/f16/f32 beside
#            torch_linear_backward.py (the table); the same shape with
#            streaming off; f32 on tensor cores (coopmat_khr_f32x3); narrow
#            layers from device memory; the pipelines' registers; `bench --peak`
#   e2e      end to end with stages, streamed and not, of large and mid-size
#            jobs (bf16, f32; BEFORE_VKGRADD beside, alternated); one
#            streamed job's steps
#   tiny     `bench --compare` (daemon against in-process); the same with
#            enough jobs for a steady state; 16 synchronous clients on a
#            private daemon, 6,000 jobs each, three times (and
#            BEFORE_VKGRADD's, alternated); torch_multiproc.py 1 16,
#            plain and under MPS
#   tenants  `bench --scenario mixed`: 8 synchronous tiny clients alone, then
#            beside one heavy bf16 client, heavy 8192x4096x4096 and
#            2048x1024x1024 (BEFORE_VKGRADD's daemon beside); torch_mixed.py
#            for both shapes and torch_multiproc.py 1 16, plain and under MPS
#   python   scripts/torch_train.py --dtype all: an MLP's training steps
#            three ways (CPU torch, vkgrad.torch, CUDA torch); `python -m
#            vkgrad bench` (Client.linear_backward on region views) beside
#            `bench --kernels`, $BIG f32 and bf16; `stats --prometheus`;
#            the GPU's SM clock during each way (nvidia-smi samples)
#   narrow   the narrow and split-K pipelines' registers (driver statistics);
#            issue 37's narrow set (1048576x64x64, 1048576x32x16,
#            4194304x64x64, 1048576x128x128, 262144x256x256), f32 and bf16,
#            dW+db and the full backward, auto, narrow, coopmat_khr_splitk
#            and coopmat_khr_f32_splitk forced (coopmat_khr_splitk: bf16,
#            its f32 lines are refusals; coopmat_khr_f32_splitk: f32, its
#            bf16 lines are refusals), kernels on
#            device memory (--stream-chunk-bytes off), each line's GB/s as a
#            fraction of `bench --peak`'s copy_gbps, beside
#            torch_narrow.py (cuBLAS, its copy bandwidth): the issue's table;
#            the mid-size f32 GEMM ($MID: auto, tiled, tiled128, splitk,
#            splitk128) beside torch_narrow.py on it (issue 37 item 3);
#            BEFORE_VKGRADD's auto on the narrow set, where set;
#            then auto against every family on `bench --kernels --shapes
#            grid` (f32, bf16)
#   train    scripts/train_bench.py: N = 1, 4, 16 processes each training an
#            MLP 512-2048-2048-512 for 6 s, resident vkgrad, CUDA torch and
#            CUDA torch under MPS, f32 and bf16 (steps/s, p50 step, GPU
#            memory, PCIe bytes per step); TRAIN_PROCS, TRAIN_SECONDS,
#            TRAIN_OPTIM (sgd|adam) change it (about 5-7 minutes)
#   all      kernels e2e tiny tenants python (torch_multiproc.py runs once;
#            train is not in all: run it on its own)
# Each suite takes about 1-5 minutes of device time, all about 9-10.
#
# Settings (environment):
#   OUT             output folder (default /tmp/vkgrad-device-run); it gets
#                   summary.txt, lines.jsonl (every `bench --kernels` line as
#                   it comes) and one SUITE.tar.gz of raw files per suite
#                   (at most 8 files: what the device tool brings back)
#   BUNDLE          the bundle (default .device-bundle)
#   BEFORE_VKGRADD  a second daemon binary (another build's bundle/bin/vkgradd):
#                   e2e, tiny and tenants run it beside this one, alternated
#   VKGRADD_ARGS    more arguments for every daemon this starts
#   VKGRADD_ENV     environment for those daemons (e.g. VKGRAD_NV2_TILE=...)
#   HEAVY           the tenants suite's heavy shapes (default "8192x4096x4096
#                   2048x1024x1024")
#   BUDGET_S        seconds after which the steps not yet begun are skipped
#                   (default 540: the device tool ends a command at 600)
#   PYTHON          the python3 with torch (default python3)
#   SKIP_ANCHORS=1  leave out the PyTorch anchors (torch_mixed, torch_multiproc)
#                   where an earlier run of the session has them
#   NSET            suite narrow's shapes (B,I,O;...; default issue 37's set)
#   NARROW_VARIANTS suite narrow's variants (default
#                   auto,narrow,coopmat_khr_splitk,coopmat_khr_f32_splitk)
#   NARROW_RESIDENT=1  suite narrow's set and grid on device tensors (bench
#                   --kernels --resident): no copies in or out around the
#                   kernels
#   NARROW_INFLIGHT, NARROW_WARMUP_MS, GRID_WARMUP_MS  the set's and the
#                   grid's --inflight (default 8) and --warmup-ms (default
#                   1000 for the set, 150 for the grid): the H100 idled down
#                   to 345 MHz from 1,980 between short lines measured one
#                   job at a time (NARROW_INFLIGHT=1 NARROW_WARMUP_MS=300:
#                   about the old way, but for its 50-job cap)
#   SETTLE_MS       --settle-ms of the set and the grid (default 1000; QUICK
#                   0): the first line of each shape and dtype warms up that
#                   long, after the float64 reference left the GPU idle
#   NARROW_GRID=0   suite narrow without its grid step (auto against every
#                   family), where device time is short
#   NARROW_TABLE=0  suite narrow with its grid step only (no set, mid-size
#                   GEMM, dX or tiled128 tilings, or torch_narrow.py)
#   NARROW_SET=0    suite narrow without the set, its cuBLAS side
#                   (torch_narrow.py) and the mid-size GEMM: the tiling
#                   steps below (and the grid) only
#   GSET            the grid step's shapes (default grid: `bench --kernels
#                   --shapes grid`; or "B,I,O;B,I,O...")
#   GRID_VARIANTS   the grid step's families (default all ten)
#   GRID_PRUNE      the grid step's --prune (default 3: a family whose first
#                   job takes more than 3x the shape's fastest so far gets no
#                   more; 0: every line in full)
#   NARROW_DX_TILES suite narrow's coopmat_khr tilings for a narrow layer's
#                   dX (entries VAR=value, joined by +; unset: the step is
#                   left out). The H100 run of 2026-12-06 (docs/performance.md)
#                   timed:
#                     VKGRAD_CMK_TILE=2x2x64x64x32x1
#                     VKGRAD_CMK_TILE=2x1x64x64x32x1
#                     VKGRAD_CMK_TILE=4x1x32x64x32x1
#                     VKGRAD_CMK_TILE=4x1x64x64x32x1
#                     VKGRAD_CMK_TILE=8x1x32x64x32x1
#                     VKGRAD_CMK_TILE=4x2x32x32x32x1
#                     VKGRAD_CMK_TILE=2x2x32x32x32x1
#                     VKGRAD_CMK_SMALL_BELOW=4294967295
#                     VKGRAD_CMK_SMALL_BELOW=4294967295+VKGRAD_CMK_TILE_SMALL=8x1x32x64x32x1
#   DX_TILE_SET     their shapes (default 1048576,64,64;1048576,128,128;
#                   262144,256,256, bf16)
#   NARROW_DXS      suite narrow's linear_coopmat_khr_dx_stream step (on by
#                   default in the daemon): VKGRAD_DXS_TILE values (e.g. "on
#                   8x16x2x8 4x8x2x16"), one daemon each, bf16 dX alone (auto,
#                   which takes it, and coopmat_khr forced, which does not)
#                   and auto's full backward over DX_TILE_SET; unset: left out
#   NARROW_T128_TILES  suite narrow's tiled128 tilings for the f32 layers
#                   of 128-256 features (VKGRAD_T128_TILE values, e.g.
#                   "128x128x8x8x16x2x0x8 128x128x8x8x16x1x0x8
#                   128x64x8x4x16x1x0x8"; unset: the step is left out):
#                   dW+db forced to splitk128 and dX forced to tiled128, a
#                   daemon per tiling and output (the default tiling's
#                   lines come from the first entry, if it names it)
#   T128_TILE_SET   their shapes (default 1048576,128,128;262144,256,256)
#   QUICK=1         small shapes, few jobs, short phases: to try the runner
#                   on a machine without a GPU (lavapipe)
# Exit status: 0, or 1 when a check failed or a step did not finish.
#
# On the device tool: run with carry [".device-bundle"] (and
# ".device-bundle-before"), e.g.
#   BEFORE_VKGRADD=.device-bundle-before/bin/vkgradd scripts/device-run.sh tenants
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
REPORT="python3 $HERE/device_report.py"

# the test binaries a bundle carries: the older three (suite check runs them
# below) and GPU_TESTS_NEW, run first on the GPU, each alone
GPU_TESTS_NEW=${GPU_TESTS_NEW-"test_narrow test_activation test_optim test_tensors test_splitk128 test_auto_variant test_cmk_splitk test_f32x3_splitk test_cmks_dx test_dx_stream"}
GPU_TESTS="test_stream test_forward test_dtypes $GPU_TESTS_NEW"
# the Python tests (tests/python/NAME) suite check runs against the bundle
PY_TESTS=${PY_TESTS-"test_resident_run test_python_ops"}
# test_python's modules but test_operations (it needs Debian's prometheus and
# /usr/bin/python3 with numpy, which the GPU machine lacks: on the H200 of
# 2026-12-06 its 6 failures were those two)
PY_MODULES=${PY_MODULES-"test_vkgrad test_metrics test_tensors"}
usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

# ---- here: the bundle ------------------------------------------------------------

shared_dir() {
	for d in "${VKGRAD_SHARED:-}" "$ROOT/../shared" "$ROOT/../../shared" /work/shared; do
		[ -n "$d" ] && [ -x "$d/device/bundle.sh" ] && { echo "$d"; return; }
	done
	echo "device-run: ../shared/device/bundle.sh not found (set VKGRAD_SHARED)" >&2
	return 1
}

make_bundle() {
	local dir=${1:-.device-bundle} sh progs=()
	sh=$(shared_dir) || exit 1
	make -C "$ROOT" -j2 all $(printf 'build/tests/%s ' $GPU_TESTS) || exit 1
	for p in vkgradd vkgrad vkgrad-bench $(printf 'tests/%s ' $GPU_TESTS); do
		[ -x "$ROOT/build/$p" ] && progs+=("$ROOT/build/$p")
	done
	"$sh/device/bundle.sh" "$dir" "${progs[@]}" || exit 1
	cp -L "$ROOT"/build/libvkgrad.so.0 "$dir/bin/"
	cp "$sh"/anchors/*.py "$dir/" 2>/dev/null
	git -C "$ROOT" describe --always --dirty >"$dir/COMMIT"
	echo "bundle: $dir ($(git -C "$ROOT" describe --always --dirty)); run there with carry [\"$dir\"]"
}

# ---- there: steps, daemons, reports ----------------------------------------------

say() { echo "=== $* ($(date -u +%T), ${SECONDS}s)" | tee -a "$S"; }
note() { echo "$*" | tee -a "$S"; }
fail() { note "FAILED: $*"; RC=1; }
# in_budget STEP: 0 while the budget lasts, else notes STEP as skipped
in_budget() {
	[ "$SECONDS" -lt "$BUDGET_S" ] && return 0
	note "skipped (budget of ${BUDGET_S}s spent): $1"
	return 1
}
# vk [ARGS]: vkgrad of the bundle; bench goes through it to bin/vkgrad-bench
vk() { (. "$B/env.sh" && exec "$B/bin/vkgrad" "$@"); }

# daemon_start BINARY LOG [ARGS]: a daemon on $D/s with regions raised for
# large jobs (8 GiB a region: the grid's 4,194,304x128x128 f32 is 6.4 GB),
# VKGRADD_ARGS and VKGRADD_ENV added; waits until it answers ping
# (daemon_pid), 1 when it did not within 60 s.
daemon_start() {
	local bin=$1 log=$2 i=0
	shift 2
	rm -rf "$D/s" "$D/c"
	# shellcheck disable=SC2086
	(. "$B/env.sh" && exec env ${VKGRADD_ENV:-} timeout 300 "$bin" --socket "$D/s" --cache-dir "$D/c" \
		--max-region-bytes 8589934592 --max-total-region-bytes 34359738368 \
		--max-region-bytes-per-uid 34359738368 ${VKGRADD_ARGS:-} "$@") 2>>"$log" &
	daemon_pid=$!
	until vk --socket "$D/s" ping >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -gt 600 ] || ! kill -0 $daemon_pid 2>/dev/null; then
			kill $daemon_pid 2>/dev/null
			tail -5 "$log" | tee -a "$S"
			return 1
		fi
		sleep 0.1
	done
}
daemon_stop() {
	kill -TERM $daemon_pid 2>/dev/null
	wait $daemon_pid
}

# builds: "after" (the bundle's daemon) and, with BEFORE_VKGRADD, "before"
builds() { [ -n "${BEFORE_VKGRADD:-}" ] && echo "before after" || echo "after"; }
daemon_of() { [ "$1" = before ] && echo "$BEFORE_VKGRADD" || echo "$B/bin/vkgradd"; }

# tag LABEL: every JSON line on stdin gets "run": LABEL first
tag() { sed "s/^{/{\"run\":\"$1\",/"; }

# mps_on / mps_off: NVIDIA MPS with private folders (../shared/anchors/README.md)
mps_on() {
	MPSCTL=$(command -v nvidia-cuda-mps-control || ls /usr/local/nvidia/bin/nvidia-cuda-mps-control 2>/dev/null)
	[ -n "$MPSCTL" ] || { note "nvidia-cuda-mps-control not found: no MPS run"; return 1; }
	MPSDIR=$(mktemp -d)
	export CUDA_MPS_PIPE_DIRECTORY=$MPSDIR/p CUDA_MPS_LOG_DIRECTORY=$MPSDIR/l
	mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
	"$MPSCTL" -d >>"$R/mps.log" 2>&1 || { note "MPS did not start"; return 1; }
	sleep 1
}
mps_off() {
	echo quit | "$MPSCTL" >>"$R/mps.log" 2>&1
	sleep 1
	cat "$CUDA_MPS_LOG_DIRECTORY"/control.log >>"$R/mps.log" 2>/dev/null
	unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
	rm -rf "$MPSDIR"
}
# anchor SECONDS OUTFILE SCRIPT ARGS...: a PyTorch anchor of the bundle, plain
# then under MPS (MPS=1 labels its lines), JSON lines into OUTFILE
anchor() {
	local secs=$1 out=$2 script=$3
	shift 3
	[ -f "$B/$script" ] || { note "no $script in the bundle: skipped"; return; }
	[ -n "$HAVE_NVIDIA" ] || { note "no NVIDIA GPU here: $script skipped"; return; }
	in_budget "$script $*" || return
	say "$script $* (plain)"
	(cd "$B" && timeout "$secs" "$PY" "$script" "$@") >>"$out" 2>>"$R/torch.err" || note "$script rc=$?"
	in_budget "$script $* under MPS" || return
	mps_on || return
	say "$script $* (MPS)"
	(cd "$B" && MPS=1 timeout "$secs" "$PY" "$script" "$@") >>"$out" 2>>"$R/torch.err" || note "$script (MPS) rc=$?"
	mps_off
}
torch_multiproc() {
	[ -n "${TORCH_MP_DONE:-}${SKIP_ANCHORS:-}" ] && return
	TORCH_MP_DONE=1
	anchor 120 "$R/torch_mp.jsonl" torch_multiproc.py 1 16
	$REPORT torch "$R/torch_mp.jsonl" | tee -a "$S"
}

# kernel_lines LABEL DAEMON FILE SHAPES DTYPES [bench args]: a daemon
# (daemon_start with DAEMON_ARGS), `bench --kernels --json` against it into
# FILE, each line tagged LABEL
kernel_lines() {
	local label=$1 bin=$2 file=$3 shapes=$4 dtypes=$5
	shift 5
	in_budget "$label: bench --kernels $shapes $dtypes" || return
	# shellcheck disable=SC2086
	daemon_start "$bin" "$R/daemon.log" ${DAEMON_ARGS:-} || { fail "$label: daemon did not start"; return; }
	say "$label: bench --kernels $shapes $dtypes (daemon ${DAEMON_ARGS:-})"
	# every line also to $OUT/lines.jsonl as it comes: a run cut short keeps what it measured
	vk --socket "$D/s" bench --kernels --json --shapes "$shapes" --dtypes "$dtypes" "$@" \
		2>>"$R/bench.err" | tag "$label" | tee -a "$OUT/lines.jsonl" >>"$file"
	vk --socket "$D/s" stats >>"$R/stats.txt" 2>&1
	daemon_stop
}

# HAVE_NVIDIA: set where nvidia-smi sees a GPU (the PyTorch anchors need CUDA)
gpu_line() {
	HAVE_NVIDIA=
	if nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader \
		>"$D/gpu.txt" 2>&1; then
		HAVE_NVIDIA=1
		tee -a "$S" <"$D/gpu.txt"
	else
		note "nvidia-smi: no NVIDIA GPU here (the PyTorch anchors are skipped)"
	fi
}

# ---- the suites ------------------------------------------------------------------

suite_check() {
	local t
	for t in $GPU_TESTS_NEW; do
		[ -x "$B/bin/$t" ] || continue
		in_budget "$t" || return
		say "$t on this GPU"
		(. "$B/env.sh" && BUILD="$B/bin" VKGRAD_TEST_VALIDATION=0 timeout 150 "$B/bin/$t") \
			>"$R/$t.txt" 2>&1 || fail "$t"
		grep -E "PASSED|FAILED|ERROR|ratio" "$R/$t.txt" | head -20 | tee -a "$S"
	done
	for t in $PY_TESTS; do
		in_budget "$t" || return
		say "tests/python/$t on this GPU"
		(. "$B/env.sh" && BUILD="$B/bin" VKGRAD_TEST_VALIDATION=0 VKGRAD_TEST_SYNC_VALIDATION=0 \
			PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" timeout 150 "$PY" "$ROOT/tests/python/$t") \
			>"$R/$t.txt" 2>&1 || fail "$t"
		grep -E "PASSED|FAILED|ERROR|Error|ok$" "$R/$t.txt" | tail -8 | tee -a "$S"
	done
	if [ -n "$PY_MODULES" ] && in_budget "tests/python: $PY_MODULES"; then
		say "tests/python: $PY_MODULES on this GPU"
		# shellcheck disable=SC2086
		(. "$B/env.sh" && cd "$ROOT/tests/python" && BUILD="$B/bin" VKGRAD_TEST_VALIDATION=0 \
			VKGRAD_TEST_SYNC_VALIDATION=0 PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" \
			timeout 150 "$PY" -c 'import sys, runner; runner.main(*sys.argv[1:])' $PY_MODULES) \
			>"$R/py_modules.txt" 2>&1 || fail "tests/python: $PY_MODULES"
		grep -E "PASSED|FAILED|ERROR|Error|ok$" "$R/py_modules.txt" | tail -8 | tee -a "$S"
	fi
	if [ -x "$B/bin/test_stream" ] && in_budget "test_stream"; then
		say "test_stream on this GPU"
		(. "$B/env.sh" && BUILD="$B/bin" VKGRAD_TEST_VALIDATION=0 timeout 200 "$B/bin/test_stream") \
			>"$R/test_stream.txt" 2>&1 || fail "test_stream"
		grep -E "resumed dW|dW steps|PASSED|FAILED" "$R/test_stream.txt" | tee -a "$S"
	fi
	if [ -x "$B/bin/test_dtypes" ] && in_budget "test_dtypes"; then
		say "test_dtypes on this GPU (f16, bf16: every family, rounded to nearest)"
		(. "$B/env.sh" && BUILD="$B/bin" VKGRAD_TEST_VALIDATION=0 timeout 200 "$B/bin/test_dtypes") \
			>"$R/test_dtypes.txt" 2>&1 || fail "test_dtypes"
		grep -E "cases|elements|PASSED|FAILED" "$R/test_dtypes.txt" | tee -a "$S"
	fi
	if [ -x "$B/bin/test_forward" ] && in_budget "test_forward"; then
		say "test_forward on this GPU (every family hello lists)"
		(. "$B/env.sh" && BUILD="$B/bin" VKGRAD_TEST_VALIDATION=0 timeout 200 "$B/bin/test_forward") \
			>"$R/test_forward.txt" 2>&1 || fail "test_forward"
		grep -E "cases|PASSED|FAILED" "$R/test_forward.txt" | tee -a "$S"
	fi
	in_budget "the test shapes, checked" || return
	daemon_start "$B/bin/vkgradd" "$R/daemon.log" || { fail "daemon did not start"; return; }
	say "every test shape, checked against float64"
	vk --socket "$D/s" info >"$R/info.txt" 2>&1
	local n=0 bad=0 shape b r i o outs acc
	for shape in $CHECK_SHAPES; do
		b=${shape%%x*} r=${shape#*x}
		i=${r%%x*} o=${r#*x}
		for outs in dw db dx dw,db dw,db,dx; do
			for acc in "" --accumulate; do
				n=$((n + 1))
				# shellcheck disable=SC2086
				vk --socket "$D/s" run --batch "$b" --in "$i" --out "$o" --outputs "$outs" $acc \
					--repeat 2 --check >>"$R/check.txt" 2>&1 || { bad=$((bad + 1)); note "check failed: $shape $outs $acc"; }
			done
		done
	done
	note "checked: $n jobs over $(echo $CHECK_SHAPES | wc -w) shapes, $bad failed"
	[ $bad = 0 ] || RC=1
	daemon_stop
}

suite_kernels() {
	if in_budget "bench --kernels beside torch_linear_backward.py"; then
		say "bench --kernels (auto, private daemon) $KSHAPES"
		vk bench --kernels --json --shapes "$KSHAPES" --dtypes bf16,f16,f32 --variants auto \
			>"$R/bench.jsonl" 2>>"$R/bench.err" || fail "bench --kernels"
		if [ -f "$B/torch_linear_backward.py" ] && [ -n "$HAVE_NVIDIA" ] && in_budget torch_linear_backward.py; then
			say "torch_linear_backward.py"
			(cd "$B" && timeout 150 "$PY" torch_linear_backward.py) >"$R/torch.jsonl" 2>>"$R/torch.err" ||
				note "torch_linear_backward.py rc=$?"
		fi
		$REPORT kernels "$R/bench.jsonl" "$R/torch.jsonl" | tee -a "$S"
	fi
	: >"$R/off.jsonl"
	DAEMON_ARGS="--stream-chunk-bytes off" kernel_lines off "$B/bin/vkgradd" "$R/off.jsonl" \
		"$BIG" bf16,f16,f32 --variants auto
	DAEMON_ARGS="--stream-chunk-bytes off" kernel_lines f32x3 "$B/bin/vkgradd" "$R/off.jsonl" \
		"$BIG;$MID" f32 --variants coopmat_khr_f32x3
	DAEMON_ARGS="--devlocal-min-bytes 1" kernel_lines narrow "$B/bin/vkgradd" "$R/off.jsonl" \
		"$NARROW" f32 --variants auto
	$REPORT lines "$R/off.jsonl" | tee -a "$S"
	if in_budget "the pipelines' registers"; then
		say "the pipelines' driver statistics"
		daemon_start "$B/bin/vkgradd" "$R/debug.log" --log-level debug && daemon_stop
		grep -E "Register Count|default tiling" "$R/debug.log" | sed 's/Binary Size=[0-9]*; //' |
			cut -c1-200 >"$R/regs.log"
		grep -c "Register Count" "$R/regs.log" | sed 's/^/pipelines with statistics: /' | tee -a "$S"
	fi
	if in_budget "bench --peak"; then
		say "bench --peak"
		(. "$B/env.sh" && timeout 60 "$B/bin/vkgrad" bench --peak --json --reps 3 --ms 10) \
			>"$R/peak.jsonl" 2>"$R/peak.err" || note "bench --peak rc=$? (no cooperative matrices here?)"
		$REPORT peak "$R/peak.jsonl" | tee -a "$S"
	fi
}

# suite narrow with the GPU's SM clock sampled every 250 ms throughout
# (nvidia-smi, where there is one): a histogram in the summary, since an
# idle H100 fell to 345 MHz between short lines (docs/performance.md)
suite_narrow() {
	local smi=
	if [ -n "$HAVE_NVIDIA" ]; then
		nvidia-smi --query-gpu=timestamp,clocks.sm --format=csv,noheader -lms 250 >"$R/narrow_clocks.csv" 2>&1 &
		smi=$!
	fi
	narrow_steps
	if [ -n "$smi" ]; then
		kill "$smi"
		$REPORT clockhist "$R/narrow_clocks.csv" | tee -a "$S"
	fi
}

narrow_steps() {
	if in_budget "bench --peak --only copy"; then
		say "bench --peak --only copy"
		(. "$B/env.sh" && timeout 60 "$B/bin/vkgrad" bench --peak --only copy --json) \
			>"$R/peak_copy.jsonl" 2>>"$R/bench.err" || fail "bench --peak --only copy"
		$REPORT peak "$R/peak_copy.jsonl" | tee -a "$S"
	fi
	local copy
	copy=$(sed -n 's/.*"copy_gbps":\([0-9.]*\).*/\1/p' "$R/peak_copy.jsonl" 2>/dev/null | head -1)
	# the narrow and split-K pipelines' registers and the like (what limits how many
	# workgroups share an SM): the driver's statistics at --log-level debug
	if in_budget "the narrow pipelines' registers"; then
		say "the narrow pipelines' driver statistics"
		daemon_start "$B/bin/vkgradd" "$R/debug.log" --log-level debug && daemon_stop
		grep -E "Register Count" "$R/debug.log" | grep -E "narrow|splitk|coopmat_khr" |
			sed 's/^.*vkgradd: debug: //; s/Binary Size=[0-9]*; //' | cut -c1-220 | tee -a "$S"
		# and dx_stream's under each NARROW_DXS tiling
		local t n=0
		for t in ${NARROW_DXS:-}; do
			n=$((n + 1))
			VKGRADD_ENV="VKGRAD_DXS_TILE=$t" daemon_start "$B/bin/vkgradd" "$R/debug-dxs$n.log" \
				--log-level debug && daemon_stop
			note "VKGRAD_DXS_TILE=$t (debug-dxs$n.log):"
			grep -E "Register Count" "$R/debug-dxs$n.log" | grep -E "dx_stream" |
				sed 's/^.*vkgradd: debug: //; s/Binary Size=[0-9]*; //' | cut -c1-220 | tee -a "$S"
		done
	fi
	local set=1
	[ "${NARROW_SET:-1}" = 0 ] && set= && note "NARROW_SET=0: the set, torch_narrow.py and the mid-size GEMM left out"
	if [ -n "$set" ] && [ "${NARROW_TABLE:-1}" != 0 ] && [ -f "$B/torch_narrow.py" ] && [ -n "$HAVE_NVIDIA" ] && in_budget torch_narrow.py; then
		say "torch_narrow.py"
		(cd "$B" && timeout 240 "$PY" torch_narrow.py "$NSET" f32,bf16 &&
			timeout 60 "$PY" torch_narrow.py "$MID" f32) >"$R/torch_narrow.jsonl" \
			2>>"$R/torch.err" || note "torch_narrow.py rc=$?"
		cat "$R/torch_narrow.jsonl" >>"$OUT/lines.jsonl"
	fi
	: >"$R/narrow.jsonl"
	# (the GPU busy while measured: bench --kernels --inflight, --warmup-ms)
	local busy="${NARROW_RESIDENT:+--resident} --inflight ${NARROW_INFLIGHT:-8} --settle-ms ${SETTLE_MS:-1000}"
	NX="$busy --warmup-ms ${NARROW_WARMUP_MS:-1000}"
	GX="$busy --warmup-ms ${GRID_WARMUP_MS:-150}"
	if [ "${NARROW_TABLE:-1}" = 0 ]; then
		note "NARROW_TABLE=0: the set, the mid-size GEMM, the dX and the tiled128 tilings left out"
		narrow_grid "$copy"
		return
	fi
	[ -n "$set" ] && narrow_set "$copy"
	narrow_tilings "$copy"
	narrow_grid "$copy"
}

# suite narrow's set (dW+db and full backward, BEFORE_VKGRADD's beside where
# set) and the mid-size GEMM, beside torch_narrow.py (copy_gbps $1)
narrow_set() {
	local copy=$1
	# shellcheck disable=SC2086
	DAEMON_ARGS="--stream-chunk-bytes off" kernel_lines param "$B/bin/vkgradd" "$R/narrow.jsonl" \
		"$NSET" f32,bf16 --variants "${NARROW_VARIANTS:-auto,narrow,coopmat_khr_splitk,coopmat_khr_f32_splitk}" --outputs dw,db ${copy:+--copy-gbps $copy} $NX
	# shellcheck disable=SC2086
	DAEMON_ARGS="--stream-chunk-bytes off" kernel_lines full "$B/bin/vkgradd" "$R/narrow.jsonl" \
		"$NSET" f32,bf16 --variants "${NARROW_VARIANTS:-auto,narrow,coopmat_khr_splitk,coopmat_khr_f32_splitk}" ${copy:+--copy-gbps $copy} $NX
	# BEFORE_VKGRADD's auto on the same set (dW+db and full), for a before/after in one run,
	# measured the same way ($NX: device tensors, jobs in flight, warm-up)
	if [ -n "${BEFORE_VKGRADD:-}" ]; then
		: >"$R/narrow_before.jsonl"
		# shellcheck disable=SC2086
		DAEMON_ARGS="--stream-chunk-bytes off" kernel_lines param-before "$BEFORE_VKGRADD" \
			"$R/narrow_before.jsonl" "$NSET" f32,bf16 --variants auto --outputs dw,db ${copy:+--copy-gbps $copy} $NX
		# shellcheck disable=SC2086
		DAEMON_ARGS="--stream-chunk-bytes off" kernel_lines full-before "$BEFORE_VKGRADD" \
			"$R/narrow_before.jsonl" "$NSET" f32,bf16 --variants auto ${copy:+--copy-gbps $copy} $NX
		$REPORT lines "$R/narrow_before.jsonl" | tee -a "$S"
	fi
	# issue 37 item 3: the mid-size f32 GEMM, auto and each family that can take it,
	# its tensors in device memory (below the default --devlocal-min-bytes they
	# stay in host memory: the H100 run of 2026-12-06 02:17 got ~1,030 us for
	# every family that way, 4.7x cuBLAS, against 258 the session before)
	DAEMON_ARGS="--stream-chunk-bytes off --devlocal-min-bytes 1" kernel_lines mid "$B/bin/vkgradd" "$R/narrow.jsonl" \
		"$MID" f32 --variants auto,tiled,tiled128,splitk,splitk128 ${copy:+--copy-gbps $copy}
	$REPORT narrow "$R/narrow.jsonl" "$R/torch_narrow.jsonl" | tee -a "$S"
}

# suite narrow's tiling steps, each left out where its setting is unset
# (copy_gbps $1)
narrow_tilings() {
	local copy=$1
	# a narrow layer's 16-bit dX on coopmat_khr under other tilings
	# (VKGRAD_CMK_TILE, _TILE_SMALL: WMxWNxwmxwnxBKxDEPTH; the large default
	# 2x2x64x64x32x1 is 128x128 per workgroup, half of it padding where in
	# is 64; VKGRAD_CMK_SMALL_BELOW=4294967295 puts every GEMM on the small
	# pipeline): the full backward forced to coopmat_khr_splitk, whose dW/db
	# pipeline these leave alone, so only dX changes. Entries: assignments
	# joined by "+"
	local tile
	: >"$R/dxtile.jsonl"
	for tile in ${NARROW_DX_TILES:-}; do
		# shellcheck disable=SC2086
		VKGRADD_ENV="${tile//+/ }" DAEMON_ARGS="--stream-chunk-bytes off" kernel_lines "dxtile-${tile//VKGRAD_CMK_/}" \
			"$B/bin/vkgradd" "$R/dxtile.jsonl" "${DX_TILE_SET:-1048576,64,64;1048576,128,128;262144,256,256}" bf16 \
			--variants coopmat_khr_splitk --reps 5 ${copy:+--copy-gbps $copy}
	done
	[ -s "$R/dxtile.jsonl" ] && $REPORT lines "$R/dxtile.jsonl" | tee -a "$S"
	# a narrow layer's 16-bit dX on linear_coopmat_khr_dx_stream
	# (VKGRAD_DXS_TILE: on, or NWxTKxRTxSTRIPS for every class of out)
	: >"$R/dxs.jsonl"
	for tile in ${NARROW_DXS:-}; do
		# shellcheck disable=SC2086
		VKGRADD_ENV="VKGRAD_DXS_TILE=$tile" DAEMON_ARGS="--stream-chunk-bytes off --devlocal-min-bytes 1" \
			kernel_lines "dxs-$tile" "$B/bin/vkgradd" "$R/dxs.jsonl" \
			"${DX_TILE_SET:-1048576,64,64;1048576,128,128;262144,256,256}" bf16 \
			--variants auto,coopmat_khr --outputs dx ${copy:+--copy-gbps $copy} $NX
		# shellcheck disable=SC2086
		VKGRADD_ENV="VKGRAD_DXS_TILE=$tile" DAEMON_ARGS="--stream-chunk-bytes off --devlocal-min-bytes 1" \
			kernel_lines "dxs-full-$tile" "$B/bin/vkgradd" "$R/dxs.jsonl" \
			"${DX_TILE_SET:-1048576,64,64;1048576,128,128;262144,256,256}" bf16 \
			--variants auto ${copy:+--copy-gbps $copy} $NX
	done
	[ -s "$R/dxs.jsonl" ] && $REPORT lines "$R/dxs.jsonl" | tee -a "$S"
	# f32 layers of 128-256 features on other tiled128 tilings
	# (VKGRAD_T128_TILE: BMxBNxTMxTNxBK[xSPLIT[xPAD[xWX]]], one daemon per
	# tiling and output): dW+db forced to splitk128, dX forced to tiled128
	local vo
	: >"$R/t128tile.jsonl"
	for tile in ${NARROW_T128_TILES:-}; do
		for vo in splitk128:dw,db tiled128:dx; do
			# shellcheck disable=SC2086
			VKGRADD_ENV="VKGRAD_T128_TILE=$tile" DAEMON_ARGS="--stream-chunk-bytes off" kernel_lines "t128-$tile" \
				"$B/bin/vkgradd" "$R/t128tile.jsonl" "$T128_TILE_SET" f32 --variants "${vo%%:*}" \
				--outputs "${vo#*:}" --reps 5 ${copy:+--copy-gbps $copy} $NX
		done
	done
	[ -s "$R/t128tile.jsonl" ] && $REPORT lines "$R/t128tile.jsonl" | tee -a "$S"
}

# suite narrow's last step: auto against every family on the grid (copy_gbps $1)
narrow_grid() {
	local copy=$1
	[ "${NARROW_GRID:-1}" = 0 ] && { note "NARROW_GRID=0: the grid step left out"; return; }
	: >"$R/grid.jsonl"
	# shellcheck disable=SC2086
	DAEMON_ARGS="--stream-chunk-bytes off" kernel_lines grid "$B/bin/vkgradd" "$R/grid.jsonl" \
		"$GSET" f32,bf16 --variants "${GRID_VARIANTS:-auto,generic,tiled,tiled128,splitk,splitk128,narrow,coopmat_khr,coopmat_khr_splitk,coopmat_nv2}" \
		--reps "$GREPS" --prune "${GRID_PRUNE:-3}" ${copy:+--copy-gbps $copy} $GX
	$REPORT auto "$R/grid.jsonl" | tee -a "$S"
}

suite_e2e() {
	local rep w
	: >"$R/e2e.jsonl"
	for rep in $(seq 1 "$REPS"); do
		for w in $(builds); do
			kernel_lines "$w#$rep" "$(daemon_of "$w")" "$R/e2e.jsonl" "$BIG;$MID;$WIDE" bf16,f32 \
				--variants auto --reps "$E2E_REPS"
			DAEMON_ARGS="--stream-chunk-bytes off" kernel_lines "$w-off#$rep" "$(daemon_of "$w")" \
				"$R/e2e.jsonl" "$BIG" bf16,f32 --variants auto --reps "$E2E_REPS"
		done
	done
	STAGES=1 $REPORT lines "$R/e2e.jsonl" | tee -a "$S"
	if in_budget "one streamed job's steps"; then
		say "one streamed bf16 $BIG job's steps"
		DAEMON_ARGS="--log-level debug" kernel_lines steps "$B/bin/vkgradd" "$R/steps.jsonl" "$BIG" bf16 \
			--variants auto --reps 3 2>/dev/null
		grep -E "stream job [0-9]+:" "$R/daemon.log" | sed 's/^vkgradd: debug: //' | cut -c1-140 \
			>"$R/steps.txt"
		tail -6 "$R/steps.txt" | tee -a "$S"
	fi
}

suite_tiny() {
	local rep w
	if in_budget "bench --compare"; then
		say "bench --compare --json (the default lines)"
		# shellcheck disable=SC2086
		vk bench --compare --json $COMPARE_ARGS 2>>"$R/bench.err" | tag "default" >"$R/compare.jsonl" ||
			fail "bench --compare"
	fi
	local line
	for rep in $(seq 1 "$REPS"); do
		in_budget "bench --compare, steady state #$rep" || break
		say "bench --compare, steady state #$rep"
		for line in "tiny_latency 1 $((TJOBS * 2))" "tiny_latency 16 $TJOBS" "tiny_throughput 16 $((TJOBS / 2))"; do
			set -- $line
			vk bench --compare --json --scenario "$1" --clients "$2" --jobs "$3" 2>>"$R/bench.err" |
				tag "long#$rep" >>"$R/compare.jsonl"
		done
	done
	$REPORT tiny "$R/compare.jsonl" | tee -a "$S"
	: >"$R/sync16.jsonl"
	for rep in $(seq 1 "$SYNC_REPS"); do
		for w in $(builds); do
			in_budget "16 synchronous clients ($w #$rep)" || break 2
			say "16 synchronous clients, $w #$rep"
			vk bench --json --daemon "$(daemon_of "$w")" --scenario tiny_latency --clients 16 --jobs "$SYNC_JOBS" \
				2>>"$R/bench.err" | tag "$w#$rep" >>"$R/sync16.jsonl"
		done
	done
	torch_multiproc
	$REPORT sync16 "$R/sync16.jsonl" "$R/torch_mp.jsonl" | tee -a "$S"
}

suite_tenants() {
	local shape w
	: >"$R/mixed.txt"
	local rep
	for shape in $HEAVY; do
		for rep in $(seq 1 "${TENANT_REPS:-2}"); do
		for w in $(builds); do
			in_budget "mixed $shape ($w #$rep)" || break 3
			daemon_start "$(daemon_of "$w")" "$R/daemon.log" || { fail "daemon ($w) did not start"; continue; }
			say "bench --scenario mixed: $TENANTS tiny clients, heavy $shape bf16, $HEAVY_INFLIGHT in flight ($w #$rep)"
			echo "--- $w #$rep heavy $shape" >>"$R/mixed.txt"
			# shellcheck disable=SC2086
			vk --socket "$D/s" bench --scenario mixed --tiny-clients "$TENANTS" --heavy-shape "$shape" \
				--heavy-dtype bf16 --heavy-inflight "$HEAVY_INFLIGHT" --seconds "$MIXED_S" ${MIXED_ARGS:-} \
				>>"$R/mixed.txt" 2>>"$R/bench.err" ||
				fail "bench --scenario mixed ($w, $shape): $(grep -v '^(run' "$R/bench.err" | tail -1)"
			vk --socket "$D/s" stats >>"$R/stats.txt" 2>&1
			vk --socket "$D/s" stats --prometheus 2>&1 | grep -E "^vkgrad_sched" >>"$R/mixed.txt"
			daemon_stop
		done
		done
	done
	grep -v '^{' "$R/mixed.txt" | tee -a "$S"
	[ -n "${SKIP_ANCHORS:-}" ] && return
	for shape in $HEAVY; do
		anchor 150 "$R/torch_mixed.jsonl" torch_mixed.py "$TENANTS" "${shape//x/,}" "$MIXED_S"
	done
	$REPORT torch "$R/torch_mixed.jsonl" | tee -a "$S"
	torch_multiproc
}

suite_python() {
	in_budget "python" || return
	daemon_start "$B/bin/vkgradd" "$R/daemon.log" || { fail "daemon did not start"; return; }
	local lib="$B/bin/libvkgrad.so.0"
	case $lib in /*) ;; *) lib=$PWD/$lib ;; esac
	local smi=
	if [ -n "$HAVE_NVIDIA" ]; then
		nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw --format=csv,noheader -lms 50 \
			>"$R/clocks.csv" 2>&1 &
		smi=$!
	fi
	(
		. "$B/env.sh"
		export VKGRAD_SOCKET="$D/s" VKGRAD_LIBRARY="$lib" PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
		say "scripts/torch_train.py --dtype all --steps ${TRAIN_STEPS:-10} --warmup-s 2 --profile"
		exec timeout 300 "$PY" "$ROOT/scripts/torch_train.py" --socket "$D/s" --dtype all \
			--steps "${TRAIN_STEPS:-10}" --warmup-s "${QUICK:-2}" --profile --json ${QUICK:+--smoke}
	) >"$R/train.txt" 2>&1 || fail "the training benchmark"
	[ -n "$smi" ] && kill "$smi"
	grep -v '^{' "$R/train.txt" | grep -v -E 'UserWarning|st = ' | tail -40 | tee -a "$S"
	[ -n "$smi" ] && $REPORT clocks "$R/train.txt" "$R/clocks.csv" | tee -a "$S"
	if in_budget "Client.linear_backward on region views beside bench --kernels"; then
		say "python -m vkgrad bench beside vkgrad bench --kernels, $BIG f32 and bf16"
		local dt
		for dt in f32 bf16; do
			(
				. "$B/env.sh"
				export VKGRAD_LIBRARY="$lib" PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
				exec timeout 120 "$PY" -m vkgrad bench --socket "$D/s" --shape "$BIG" --dtype $dt \
					--reps "$E2E_REPS" --json
			) >>"$R/pybench.jsonl" 2>>"$R/train.txt" || fail "python -m vkgrad bench $dt"
			vk --socket "$D/s" bench --kernels --json --shapes "$BIG" --dtypes $dt --variants auto \
				--reps "$E2E_REPS" 2>>"$R/bench.err" >>"$R/pybench.jsonl" || fail "bench --kernels $dt"
		done
		$REPORT pybench "$R/pybench.jsonl" | tee -a "$S"
	fi
	vk --socket "$D/s" stats --prometheus >"$R/stats.prom" 2>&1
	grep -E '^vkgrad_(jobs_done_total|batches_total)' "$R/stats.prom" | tee -a "$S"
	daemon_stop
}

suite_train() {
	in_budget "train" || return
	daemon_start "$B/bin/vkgradd" "$R/daemon.log" || { fail "daemon did not start"; return; }
	local lib="$B/bin/libvkgrad.so.0"
	case $lib in /*) ;; *) lib=$PWD/$lib ;; esac
	local left=$((BUDGET_S - SECONDS))
	say "scripts/train_bench.py --procs ${TRAIN_PROCS:-1,4,16} --seconds ${TRAIN_SECONDS:-6}${QUICK:+ --smoke}"
	(
		. "$B/env.sh"
		export VKGRAD_SOCKET="$D/s" VKGRAD_LIBRARY="$lib" PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
		exec timeout "$left" "$PY" "$ROOT/scripts/train_bench.py" --socket "$D/s" --json \
			--procs "${TRAIN_PROCS:-1,4,16}" --seconds "${TRAIN_SECONDS:-6}" --optim "${TRAIN_OPTIM:-sgd}" \
			${QUICK:+--smoke}
	) >"$R/train_bench.txt" 2>"$R/train_bench.err" || fail "the training benchmark (scripts/train_bench.py)"
	grep -v '^{' "$R/train_bench.txt" | tee -a "$S"
	tail -5 "$R/train_bench.err" | tee -a "$S"
	vk --socket "$D/s" stats >"$R/stats.txt" 2>&1
	daemon_stop
}

# run_suite NAME: the suite's raw files in a folder of their own, then
# NAME.tar.gz in $OUT
run_suite() {
	R=$(mktemp -d)/$1
	mkdir -p "$R"
	say "suite $1"
	"suite_$1"
	tar czf "$OUT/$1.tar.gz" -C "$(dirname "$R")" "$1"
	rm -rf "$(dirname "$R")"
}

# ---- main ------------------------------------------------------------------------

[ $# -ge 1 ] || usage
case $1 in
-h | --help | help) usage ;;
bundle) make_bundle "${2:-}"; exit ;;
esac
suites=()
for a in "$@"; do
	case $a in
	all) suites+=(kernels e2e tiny tenants python) ;;
	check | kernels | narrow | e2e | tiny | tenants | python | train) suites+=("$a") ;;
	*) echo "device-run: unknown suite '$a' (check kernels narrow e2e tiny tenants python train all)" >&2; exit 2 ;;
	esac
done
B=${BUNDLE:-.device-bundle}
case $B in /*) ;; *) B=$PWD/$B ;; esac
[ -x "$B/bin/vkgradd" ] && [ -x "$B/bin/vkgrad" ] && [ -f "$B/env.sh" ] || {
	echo "device-run: no bundle at $B (make one here: scripts/device-run.sh bundle)" >&2
	exit 2
}
if [ -n "${BEFORE_VKGRADD:-}" ]; then
	case $BEFORE_VKGRADD in /*) ;; *) BEFORE_VKGRADD=$PWD/$BEFORE_VKGRADD ;; esac
	[ -x "$BEFORE_VKGRADD" ] || { echo "device-run: BEFORE_VKGRADD=$BEFORE_VKGRADD is not a program" >&2; exit 2; }
fi
OUT=${OUT:-/tmp/vkgrad-device-run}
mkdir -p "$OUT"
S=$OUT/summary.txt
: >"$S"
D=$(mktemp -d)
BUDGET_S=${BUDGET_S:-540}
RC=0
QUICK=${QUICK:-}
PY=${PYTHON:-python3}
if [ -n "$QUICK" ]; then
	KSHAPES="64,64,32;96,64,48" BIG=128,64,64 MID=64,32,32 WIDE=32,64,64 NARROW=256,64,8
	NSET="16384,64,64;16384,32,16" DX_TILE_SET=${DX_TILE_SET:-16384,64,64} T128_TILE_SET=${T128_TILE_SET:-4096,128,128} GSET="1024,3,5;16384,16,8;256,64,64" GREPS=2
	# (one job in flight: lavapipe has no kernel timestamps, and a line's
	# gpu_us is then its batch's time, several jobs' with more in flight)
	NARROW_INFLIGHT=${NARROW_INFLIGHT:-1} NARROW_WARMUP_MS=${NARROW_WARMUP_MS:-50} GRID_WARMUP_MS=${GRID_WARMUP_MS:-20} SETTLE_MS=${SETTLE_MS:-0}
	HEAVY="256x128x128" TENANTS=2 MIXED_S=1 HEAVY_INFLIGHT=2 TENANT_REPS=1 REPS=1 E2E_REPS=2 TJOBS=100 SYNC_REPS=1 SYNC_JOBS=100
	CHECK_SHAPES="1x1x1 33x257x31 64x64x8" COMPARE_ARGS="--scenario tiny_latency --jobs 50"
	export MLP_SIZES=${MLP_SIZES:-64,128,32} MLP_BATCH=${MLP_BATCH:-32} MLP_STEPS=${MLP_STEPS:-3} MLP_WARMUP=${MLP_WARMUP:-1}
else
	KSHAPES="8192,4096,4096;16384,8192,8192;2048,1024,1024" BIG=8192,4096,4096 MID=2048,1024,1024
	WIDE=1024,4096,4096 NARROW="4096,1024,16;8192,4096,32"
	NSET=${NSET:-"1048576,64,64;1048576,32,16;4194304,64,64;1048576,128,128;262144,256,256"} GSET=${GSET:-grid} GREPS=${GREPS:-5}
	T128_TILE_SET=${T128_TILE_SET:-"1048576,128,128;262144,256,256"}
	HEAVY=${HEAVY:-8192x4096x4096 2048x1024x1024} TENANTS=8 MIXED_S=5 HEAVY_INFLIGHT=4 TENANT_REPS=2 REPS=2 E2E_REPS=10 TJOBS=2000 SYNC_REPS=3 SYNC_JOBS=6000
	CHECK_SHAPES="1x1x1 1x33x1 31x1x7 33x257x31 257x33x16 64x64x8 100x100x100 128x31x257
		4096x1024x16 8192x4096x32 2048x1024x1024 512x512x512 70000x64x8" COMPARE_ARGS=
fi
note "device-run: ${suites[*]} from $B ($(cat "$B/COMMIT" 2>/dev/null || echo "build unknown"))${BEFORE_VKGRADD:+, before: $BEFORE_VKGRADD}"
gpu_line
for s in "${suites[@]}"; do
	run_suite "$s"
done
say "done, status $RC"
rm -rf "$D"
exit $RC
