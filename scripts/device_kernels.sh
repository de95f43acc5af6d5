#!/bin/sh
# Kernel timings on the GPU machine from a bundle: each shape through two
# daemons, one with the device-local path on (auto threshold) and one with it
# off (kernels read the client's memory), `vkgrad run --repeat`, f32 unless
# DTYPES says otherwise; --check on shapes small enough for the CPU reference.
B=$(dirname "$0")
set -u
SHAPES=${SHAPES:-"32x64x8 256x256x16 4096x1024x16 8192x4096x32 2048x1024x1024 8192x4096x4096"}
VARIANTS=${VARIANTS:-"auto tiled splitk"}
DTYPES=${DTYPES:-f32}
REPEAT=${REPEAT:-5}
d=$(mktemp -d)
"$B/bin/vkgradd" --socket "$d/on" --cache-dir "$d/c1" --log-level info 2>"$d/on.log" & p1=$!
"$B/bin/vkgradd" --socket "$d/off" --cache-dir "$d/c2" --devlocal-min-bytes off 2>"$d/off.log" & p2=$!
for i in $(seq 1 100); do [ -S "$d/on" ] && [ -S "$d/off" ] && break; sleep 0.1; done
sleep 1
grep -E "matrix extensions|device-local|using device" "$d/on.log"
for dt in $DTYPES; do
for shape in $SHAPES; do
	b=${shape%%x*}; r=${shape#*x}; i=${r%%x*}; o=${r#*x}
	chk=--check; [ $((b * i * o)) -gt 20000000000 ] && chk=
	for v in $VARIANTS; do
		for m in on off; do
			printf '%s %s %s %s: ' "$shape" "$dt" "$v" "$m"
			"$B/bin/vkgrad" --socket "$d/$m" run --batch "$b" --in "$i" --out "$o" --dtype "$dt" \
				--variant "$v" --repeat "$REPEAT" $chk 2>&1 | grep -E "^job $REPEAT/|mismatch|error" | sed 's/.*max_rel/max_rel/' | tr '\n' ' '
			echo
		done
	done
done
done
"$B/bin/vkgrad" --socket "$d/on" stats | grep -E "devlocal|splitk|dispatch|scratch|validation"
kill $p1 $p2; wait
