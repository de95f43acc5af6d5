#!/bin/sh
# Install the Debian packages `make fuzz` needs, only those missing. Same
# style as deps.sh (kept apart so the fuzz toolchain is not pulled in by
# `make test`). clang's libFuzzer runtime (libclang_rt.fuzzer) is in
# libclang-rt-14-dev on Debian 12, which clang only recommends, so it is
# named here; then a probe build checks that -fsanitize=fuzzer links.
set -eu
PKGS="make clang libclang-rt-14-dev pkg-config libmsgpack-dev"
missing=""
for p in $PKGS; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$st" = installed ] || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "fuzz-deps: installing$missing"
	SUDO=""
	[ "$(id -u)" = 0 ] || SUDO="sudo"
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends $missing
fi
CC=${FUZZ_CC:-clang}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$dir/probe.c"
if ! "$CC" -fsanitize=fuzzer,address,undefined "$dir/probe.c" -o "$dir/probe" 2>"$dir/err"; then
	echo "fuzz-deps: $CC cannot build a libFuzzer target:" >&2
	cat "$dir/err" >&2
	exit 1
fi
