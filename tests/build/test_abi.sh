#!/bin/sh
# tests/build/test_abi.sh — a program built against libvkgrad 0.1's header
# (tests/abi/v0.1.0/vkgrad.h, saved as it was) runs against today's
# libvkgrad.so and a daemon: tests/abi/client.c, built twice, against that
# header and against today's (with the _sized forms and vkg_version), each
# must print "abi client: ok". Also: the header's VKGRAD_VERSION_* match
# the Makefile's library version.
# Prints cmocka-style counts for tests/run.sh.
#   BUILD=build tests/build/test_abi.sh
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
BUILD=${BUILD:-build}
pass=0 fail=0
ok() { echo "[       OK ] $1"; pass=$((pass + 1)); }
bad() { echo "[  FAILED  ] $1: $2"; fail=$((fail + 1)); }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vkgrad-abi.XXXXXX") || exit 1
dpid=""
cleanup() {
	[ -n "$dpid" ] && kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

lib=$(cd "$BUILD" && pwd)
mk=$(sed -n 's/^VERSION *:= *//p' Makefile)
hv=$(sed -n 's/^#define VKGRAD_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' client/vkgrad.h | paste -sd.)
if [ "$mk" = "$hv" ]; then
	ok "header_version_is_the_library_version"
else
	bad "header_version_is_the_library_version" "Makefile VERSION $mk, client/vkgrad.h $hv"
fi

build() { # name include-dir extra-flags
	if cc -std=c17 -Wall -Wextra -Werror $3 -I"$2" -o "$tmp/$1" tests/abi/client.c \
		-L"$lib" -lvkgrad -Wl,-rpath,"$lib" -lm >"$tmp/$1.log" 2>&1; then
		ok "build_$1"
	else
		bad "build_$1" "$(head -c 600 "$tmp/$1.log")"
	fi
}
build client_0_1 tests/abi/v0.1.0 ""
build client_now client -DVKG_ABI_NOW

"$BUILD/vkgradd" --socket "$tmp/sock" --cache-dir "$tmp/cache" >"$tmp/daemon.log" 2>&1 &
dpid=$!
i=0
while [ ! -S "$tmp/sock" ] && [ $i -lt 600 ]; do
	sleep 0.1
	i=$((i + 1))
done
for b in client_0_1 client_now; do
	[ -x "$tmp/$b" ] || continue
	out=$("$tmp/$b" "$tmp/sock" 2>&1)
	if [ "$out" = "abi client: ok" ]; then
		ok "run_$b"
	else
		bad "run_$b" "$out; daemon log: $(tail -3 "$tmp/daemon.log")"
	fi
done
# the daemon still serves
if "$BUILD/vkgrad" --socket "$tmp/sock" ping >/dev/null 2>&1; then
	ok "daemon_serves_after"
else
	bad "daemon_serves_after" "ping failed"
fi

echo "[==========] $((pass + fail)) test(s) run."
echo "[  PASSED  ] $pass test(s)."
[ "$fail" -eq 0 ] || echo "[  FAILED  ] $fail test(s)."
[ "$fail" -eq 0 ]
