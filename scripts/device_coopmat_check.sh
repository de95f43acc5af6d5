#!/bin/sh
# Run on a machine with a GPU from a bundle (../shared/device/bundle.sh): the
# cooperative-matrix kernels (variant coopmat_khr by default) over shapes at
# every edge of their tiles (128×128 of C per workgroup, k steps of 32,
# 16×16×16 matrices): ±1 around the tile sizes, one row, one column, K not a
# multiple of 16, sizes that are and are not multiples of 8 (the 16-byte
# vector path and the element path), for f16 and bf16, every subset of the
# outputs, overwrite and accumulate; each job checked against the float64
# reference (`vkgrad run --check`: f16 2e-3, bf16 1e-2, normwise).
#   scripts/device_coopmat_check.sh BIN_DIR [VARIANT [DTYPES]]
# DTYPES: space-separated, default "f16 bf16" ("f32" for coopmat_khr_f32x3,
# checked at f32's 1e-4). COOPMAT_CHECK_SHAPES: other BxIxO shapes.
# Prints one line per failure and a summary; exits 1 on any failure, 2 when
# the daemon does not serve VARIANT for a dtype (hello lacks the kernel).
set -u
bin=${1:-build}
variant=${2:-coopmat_khr}
dtypes=${3:-f16 bf16}
dir=$(mktemp -d)
sock=$dir/vkgrad.sock
"$bin/vkgradd" --socket "$sock" --cache-dir "$dir/cache" 2>"$dir/daemon.log" &
pid=$!
i=0
until "$bin/vkgrad" --socket "$sock" ping >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -gt 600 ] && { cat "$dir/daemon.log"; exit 1; }; sleep 0.1
done
# B x I x O: dW is (O x I) over K = B, dX is (B x I) over K = O
shapes=${COOPMAT_CHECK_SHAPES:-"1x1x1 1x129x127 1x128x128 128x1x128 127x128x1 2x1x1 17x8x8
127x127x127 128x128x128 129x129x129 129x127x128 128x129x127 127x129x129
33x64x64 255x257x33 256x256x256 257x255x31 264x200x136 300x520x1032
200x999x301 2048x136x72 640x384x128"}
fail=0 runs=0
for dt in $dtypes; do
	for shape in $shapes; do
		B=${shape%%x*}; r=${shape#*x}; I=${r%%x*}; O=${r#*x}
		for outs in dw db dx dw,db dw,dx db,dx dw,db,dx; do
			for acc in "" --accumulate; do
				runs=$((runs + 1))
				out=$("$bin/vkgrad" --socket "$sock" run --batch "$B" --in "$I" --out "$O" \
					--dtype "$dt" --variant "$variant" --outputs "$outs" $acc --repeat 2 \
					--seed "$runs" --check 2>&1)
				rc=$?
				if [ $rc != 0 ]; then
					echo "$out" | tail -4
					echo "FAILED: $dt $shape $outs ${acc:-overwrite} (exit $rc)"
					fail=$((fail + 1))
					echo "$out" | grep -q unsupported && { kill -TERM $pid; exit 2; }
				fi
			done
		done
	done
	echo "$dt: $(echo $shapes | wc -w) shapes done, $fail failures so far"
done
"$bin/vkgrad" --socket "$sock" stats | grep -E "jobs|dispatches" | head -4
kill -TERM $pid; wait $pid
grep -E "error|warning|coopmat" "$dir/daemon.log" | head -5
echo "device_coopmat_check ($variant): $runs jobs (x2 repeats), $fail failed"
[ $fail = 0 ]
