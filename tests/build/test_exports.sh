#!/bin/sh
# tests/build/test_exports.sh — libvkgrad.so's dynamic symbol table is its
# public header: it defines every function client/vkgrad.h declares and
# nothing else (no proto_* codec, no vkg_ref_* reference helpers; those stay
# in libvkgrad.a for the tests and the CLI).
# Prints cmocka-style counts for tests/run.sh.
#   BUILD=build tests/build/test_exports.sh
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
BUILD=${BUILD:-build}
pass=0 fail=0
ok() { echo "[       OK ] $1"; pass=$((pass + 1)); }
bad() { echo "[  FAILED  ] $1: $2"; fail=$((fail + 1)); }

so=$BUILD/libvkgrad.so
# function symbols only: the toolchain may add _init/_fini-like markers
# that are not ours, so every defined T/W symbol counts
defined=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TW]$/ { print $3 }' | sort)
declared=$(sed -n 's/^[A-Za-z_][A-Za-z0-9_ *]*[ *]\(vkg_[a-z0-9_]*\)(.*/\1/p' client/vkgrad.h | sort -u)
if [ -z "$declared" ]; then
	bad declared "no function found in client/vkgrad.h"
fi

extra=$(printf '%s\n' "$defined" | grep -v -x -F "$declared")
if [ -z "$extra" ]; then
	ok "only_declared_exported"
else
	bad "only_declared_exported" "$so defines $(printf '%s\n' "$extra" | wc -l) more: $(printf '%s ' $extra | cut -c1-300)"
fi

missing=$(printf '%s\n' "$declared" | grep -v -x -F "$defined")
if [ -z "$missing" ]; then
	ok "every_declared_exported"
else
	bad "every_declared_exported" "missing: $(printf '%s ' $missing)"
fi

echo "[==========] $((pass + fail)) test(s) run."
echo "[  PASSED  ] $pass test(s)."
[ "$fail" -eq 0 ] || echo "[  FAILED  ] $fail test(s)."
[ "$fail" -eq 0 ]
