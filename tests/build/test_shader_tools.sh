#!/bin/sh
# tests/build/test_shader_tools.sh — the build's shader toolchain
# (scripts/shader-tools.sh, shaders/compile.sh), both ways:
#   - $BUILD itself: its kernel registry holds linear_coopmat_khr_gemm exactly
#     where the toolchain it chose compiles what that kernel needs (in CI: the
#     fetched Debian sid tools, or the system's where new enough);
#   - offline: a build into $BUILD/offline with an empty tools cache and an
#     unreachable archive still succeeds, says once that it goes without
#     those kernels, leaves them out of the registry, and its daemon starts,
#     serves jobs and refuses coopmat_khr as unsupported;
#   - every module goes through spirv-val (a failing one fails the build),
#     and VKGRAD_SHADER_TOOLS=none builds only the kernels needing nothing.
# Prints cmocka-style counts for tests/run.sh.
#   BUILD=build tests/build/test_shader_tools.sh
set -u
unset MAKEFLAGS MAKELEVEL MFLAGS VKGRAD_SHADER_TOOLS
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
BUILD=${BUILD:-build}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vkgrad-shader-tools.XXXXXX")
dpid=""
trap '[ -n "$dpid" ] && kill "$dpid" 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { echo "[       OK ] $1"; pass=$((pass + 1)); }
bad() { echo "[  FAILED  ] $1: $2"; fail=$((fail + 1)); }

# What can the system's tools compile? (no fetching)
./scripts/shader-tools.sh probe "$tmp/system.env" system >/dev/null 2>&1
sys_cm=$(grep -c '^VKG_HAS_system_coopmat_khr=1' "$tmp/system.env")
sys_bf=$(grep -c '^VKG_HAS_system_bfloat16=1' "$tmp/system.env")

# 1. $BUILD's registry matches the toolchain its build chose
env=$BUILD/gen/shader-tools.env
if [ ! -f "$env" ] || [ ! -x "$BUILD/vkgradd" ]; then
	bad registry_matches_toolchain "$BUILD is not built"
else
	has_cm=$(grep -c '^VKG_HAS_[a-z]*_coopmat_khr=1' "$env")
	has_bf=$(grep -c '^VKG_HAS_[a-z]*_bfloat16=1' "$env")
	reg=$("$BUILD/vkgradd" --list-kernels)
	in_f16=$(echo "$reg" | grep -c '^linear_coopmat_khr_gemm coopmat_khr f16 ')
	in_bf16=$(echo "$reg" | grep -c '^linear_coopmat_khr_gemm coopmat_khr bf16 ')
	want_f16=$([ "$has_cm" -gt 0 ] && echo 1 || echo 0)
	want_bf16=$([ "$has_cm" -gt 0 ] && [ "$has_bf" -gt 0 ] && echo 1 || echo 0)
	# coopmat_khr_f32x3 (f32 as bf16 pieces) needs what bf16 does
	in_f32x3=$(echo "$reg" | grep -c '^linear_coopmat_khr_f32x3_gemm coopmat_khr_f32x3 f32 ')
	# coopmat_khr_splitk (the same body, split-K) needs what coopmat_khr does
	sk_f16=$(echo "$reg" | grep -c '^linear_coopmat_khr_splitk_gemm coopmat_khr_splitk f16 ')
	sk_bf16=$(echo "$reg" | grep -c '^linear_coopmat_khr_splitk_gemm coopmat_khr_splitk bf16 ')
	# coopmat_khr_f32_splitk (f32x3's body, split-K) needs what coopmat_khr_f32x3 does
	sk_f32=$(echo "$reg" | grep -c '^linear_coopmat_khr_f32x3_splitk_gemm coopmat_khr_f32_splitk f32 ')
	if [ "$in_f16" = "$want_f16" ] && [ "$in_bf16" = "$want_bf16" ] && [ "$in_f32x3" = "$want_bf16" ] &&
		[ "$sk_f16" = "$want_f16" ] && [ "$sk_bf16" = "$want_bf16" ] && [ "$sk_f32" = "$want_bf16" ]; then
		ok "registry_matches_toolchain (coopmat_khr f16 $in_f16, bf16 $in_bf16; coopmat_khr_f32x3 f32 $in_f32x3; coopmat_khr_splitk f16 $sk_f16, bf16 $sk_bf16; coopmat_khr_f32_splitk f32 $sk_f32)"
	else
		bad registry_matches_toolchain "coopmat_khr f16 $in_f16 bf16 $in_bf16 f32x3 $in_f32x3 splitk $sk_f16 $sk_bf16 f32_splitk $sk_f32, toolchain says $want_f16 $want_bf16 $want_bf16"
	fi
fi

# 2. offline: empty cache, unreachable archive
off=$BUILD/offline
rm -rf "$off"
VKGRAD_SHADER_TOOLS_CACHE="$tmp/cache" VKGRAD_SHADER_TOOLS_MIRROR=http://127.0.0.1:9/debian \
	make --no-print-directory -j2 BUILD="$off" VKGRAD_SHADER_TOOLS=auto "$off/vkgradd" >"$tmp/offline.log" 2>&1
rc=$?
said=$(grep -c '^shader tools: ' "$tmp/offline.log")
if [ $rc != 0 ]; then
	tail -20 "$tmp/offline.log"
	bad offline_build_succeeds "make exited $rc"
elif [ "$said" != 1 ]; then
	bad offline_build_succeeds "'shader tools:' said $said times"
else
	ok "offline_build_succeeds ($(grep '^shader tools: ' "$tmp/offline.log" | cut -c1-100)...)"
fi
reg=$("$off/vkgradd" --list-kernels 2>/dev/null)
in_f16=$(echo "$reg" | grep -c '^linear_coopmat_khr_gemm coopmat_khr f16 ')
in_bf16=$(echo "$reg" | grep -c '^linear_coopmat_khr_gemm coopmat_khr bf16 ')
plain=$(echo "$reg" | grep -c '^linear_tiled_gemm [a-z0-9]* bf16 ')
left=$(grep -c '^left out: shaders/linear_coopmat_khr_gemm.comp' "$tmp/offline.log")
sk=$(echo "$reg" | grep -c '^linear_coopmat_khr_splitk_gemm ')
sk_left=$(grep -c '^left out: shaders/linear_coopmat_khr_splitk_gemm.comp' "$tmp/offline.log")
want_left=$((2 - sys_cm - (sys_cm && sys_bf ? 1 : 0)))
if [ "$in_f16" = "$sys_cm" ] && [ "$in_bf16" = "$((sys_cm && sys_bf ? 1 : 0))" ] && [ "$plain" = 1 ] &&
	[ "$left" = "$want_left" ] && [ "$sk" = "$((in_f16 + in_bf16))" ] && [ "$sk_left" = "$want_left" ]; then
	ok "offline_registry_has_what_the_system_compiles (coopmat_khr f16 $in_f16, bf16 $in_bf16; $left left out)"
else
	bad offline_registry_has_what_the_system_compiles "f16 $in_f16 bf16 $in_bf16 plain $plain left $left splitk $sk left $sk_left"
fi
# a second make: nothing to redo, nothing said again
VKGRAD_SHADER_TOOLS_CACHE="$tmp/cache" VKGRAD_SHADER_TOOLS_MIRROR=http://127.0.0.1:9/debian \
	make --no-print-directory -j2 BUILD="$off" VKGRAD_SHADER_TOOLS=auto "$off/vkgradd" >"$tmp/again.log" 2>&1
if [ $? = 0 ] && ! grep -q '^shader tools: \|^glslc ' "$tmp/again.log"; then
	ok offline_rebuild_is_quiet
else
	bad offline_rebuild_is_quiet "$(head -3 "$tmp/again.log")"
fi

# 3. the offline daemon starts and serves; coopmat_khr is refused
"$off/vkgradd" --socket "$tmp/s" --cache-dir "$tmp/c" 2>"$tmp/daemon.log" &
dpid=$!
i=0
until "$BUILD/vkgrad" --socket "$tmp/s" ping >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -gt 600 ] && break
	sleep 0.1
done
info=$("$BUILD/vkgrad" --socket "$tmp/s" info 2>&1)
job=$("$BUILD/vkgrad" --socket "$tmp/s" run --batch 33 --in 40 --out 24 --dtype bf16 --check 2>&1)
jrc=$?
cmk=$("$BUILD/vkgrad" --socket "$tmp/s" run --batch 64 --in 64 --out 64 --dtype bf16 \
	--variant coopmat_khr 2>&1)
crc=$?
if echo "$info" | grep -q 'linear_tiled_gemm' && ! echo "$info" | grep -q 'linear_coopmat_khr_gemm' &&
	[ $jrc = 0 ] && [ $crc != 0 ] && echo "$cmk" | grep -q "unsupported.*coopmat_khr' needs"; then
	ok "offline_daemon_serves ($(echo "$cmk" | tail -1 | cut -c1-110))"
else
	echo "$info" | head -20
	echo "$job" | tail -3
	echo "$cmk"
	bad offline_daemon_serves "job exit $jrc, coopmat_khr exit $crc"
fi
kill "$dpid" 2>/dev/null
wait "$dpid" 2>/dev/null
dpid=""

# 4. spirv-val is not optional: a validator that rejects fails the build
sed 's#^VKG_SPIRV_VAL_system=.*#VKG_SPIRV_VAL_system=/bin/false#' "$tmp/system.env" >"$tmp/reject.env"
if ./shaders/compile.sh "$tmp/reject.env" shaders/linear_tiled_gemm.comp f32 "$tmp/t.spv.inc" \
	>"$tmp/reject.log" 2>&1; then
	bad spirv_val_rejection_fails "compile.sh succeeded"
elif [ -s "$tmp/t.spv.inc" ]; then
	bad spirv_val_rejection_fails "output written"
else
	ok spirv_val_rejection_fails
fi

# 5. VKGRAD_SHADER_TOOLS=none: plain kernels yes, coopmat_khr no
./scripts/shader-tools.sh probe "$tmp/none.env" none >/dev/null 2>&1
./shaders/compile.sh "$tmp/none.env" shaders/linear_tiled_gemm.comp bf16 "$tmp/p.spv.inc" >/dev/null 2>&1
prc=$?
./shaders/compile.sh "$tmp/none.env" shaders/linear_coopmat_khr_gemm.comp f16 "$tmp/k.spv.inc" \
	>"$tmp/none.log" 2>&1
krc=$?
if [ $prc = 0 ] && [ -s "$tmp/p.spv.inc" ] && [ $krc = 0 ] && [ -f "$tmp/k.spv.inc" ] &&
	[ ! -s "$tmp/k.spv.inc" ] && grep -q 'left out: .*needs coopmat_khr' "$tmp/none.log" &&
	! grep -q '^VKG_HAS_' "$tmp/none.env"; then
	ok none_builds_only_plain_kernels
else
	bad none_builds_only_plain_kernels "plain exit $prc, coopmat_khr exit $krc: $(cat "$tmp/none.log")"
fi

echo "[==========] $((pass + fail)) test(s) run."
echo "[  PASSED  ] $pass test(s)."
[ $fail = 0 ] || { echo "[  FAILED  ] $fail test(s)"; exit 1; }
