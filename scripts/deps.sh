#!/bin/sh
# Install the Debian packages vkgrad needs, only those missing. Idempotent;
# used by `make deps`, `make demo`, `make test` and the other targets.
#   scripts/deps.sh [TARGET [EXTRA_PACKAGE...]]         install what is missing
#   scripts/deps.sh --list [TARGET [EXTRA_PACKAGE...]]  print the packages, one a line
# TARGET picks the groups of packages (none given: test):
#   demo    build+runtime: compile everything and run the daemon, the CLI and
#           `make demo` on lavapipe (what `make`, `make demo`, `make bench` need)
#   python  demo's, and python: the Python package's runtime and
#           `pip install ./python` (docs/python.md)
#   test    python's, and test extras: what `make test` adds (cmocka, the
#           validation layer, systemd-socket-activate, setpriv, PyTorch,
#           promtool)
# EXTRA_PACKAGEs form a group of their own (test-valgrind: valgrind).
#
# Nothing missing: nothing printed, no apt-get, as any user, without sudo.
# Something missing: one line per group (its missing packages, then done or
# failed); apt-get's own output goes to a log file, removed when all went
# well, its path (and its last lines) printed when something failed.
#   - as root: apt-get installs it;
#   - otherwise through sudo: `sudo -n` (no password asked) when that is
#     allowed, plain `sudo` (which may ask) only on a terminal;
#   - no sudo, or sudo would need a password nobody can type (CI, a pipe):
#     prints the command to run as root and exits 1.
# VKGRAD_SKIP_DEPS=1 skips everything here but --list (a system that is not
# Debian-like, with the equivalents installed by other means).
#
# Then the shader compiler for the tensor-core kernels: Debian 12's glslc
# (shaderc 2023.2, glslang 11.13) compiles neither GL_KHR_cooperative_matrix
# nor GL_EXT_bfloat16, which linear_coopmat_khr_gemm needs. Where the
# system's glslc lacks them and no copy is cached yet, scripts/shader-tools.sh
# fetches Debian sid's glslang-tools, glslc, libshaderc1, spirv-tools and
# the libc6, libstdc++6, libgcc-s1 they run on (about 12 MB, from
# deb.debian.org with `apt-get download` against a private apt state naming
# only sid, signatures checked with the system's Debian keyring) and unpacks
# them with `dpkg -x` into ~/.cache/vkgrad/shader-tools/ — nothing is
# installed and the system's libraries are untouched; only the build runs
# them (through their own dynamic loader). Offline, the build goes on
# without those kernels. The build does the same by itself when needed;
# doing it here prepares a machine that will build offline later.
set -eu

# build+runtime: the compiler and libraries the build links, the shader
# compiler and validator (glslc, spirv-val), lavapipe for a machine without
# a GPU
G_BUILD="make gcc pkg-config libvulkan-dev glslc spirv-tools libuv1-dev libmsgpack-dev"
G_BUILD="$G_BUILD libsystemd-dev mesa-vulkan-drivers"
# python: the package's runtime (numpy, msgpack) and what `pip install
# ./python` builds it with, offline (setuptools, wheel; venv and pip)
G_PYTHON="python3-numpy python3-msgpack python3-setuptools python3-wheel python3-venv python3-pip"
# test extras: cmocka (the C tests), the Khronos validation layer (every
# test daemon runs under it), systemd (systemd-socket-activate, systemd-analyze
# for test_service), util-linux (setpriv), PyTorch (vkgrad.torch's tests),
# prometheus (its promtool checks `vkgrad stats --prometheus`,
# tests/python/test_operations.py; the package's own service is not started
# by the tests, and policy-rc.d stops it in containers)
G_TEST="libcmocka-dev vulkan-validationlayers systemd util-linux python3-torch prometheus"

usage() {
	echo "usage: $0 [--list] [demo|python|test [EXTRA_PACKAGE...]]" >&2
	exit 2
}

list=0
if [ "${1:-}" = --list ]; then
	list=1
	shift
fi
target="test"
case ${1:-} in
demo | python | test) target=$1; shift ;;
"") ;;
*) echo "deps: unknown target '$1': demo, python or test (extra packages after it)" >&2; usage ;;
esac
# EXTRA_PACKAGEs: Debian package names
for p in "$@"; do
	case $p in
	[a-z0-9]*) ;;
	*) echo "deps: '$p' is not a Debian package name" >&2; usage ;;
	esac
done
EXTRA=$*

# the groups of TARGET, as "name|packages" lines
groups() {
	echo "build+runtime|$G_BUILD"
	case $target in
	python | test) echo "python|$G_PYTHON" ;;
	esac
	case $target in
	test) echo "test extras|$G_TEST" ;;
	esac
	[ -z "$EXTRA" ] || echo "extra|$EXTRA"
}

if [ "$list" = 1 ]; then
	groups | while IFS='|' read -r _ pkgs; do
		for p in $pkgs; do echo "$p"; done
	done
	exit 0
fi

[ "${VKGRAD_SKIP_DEPS:-0}" = 1 ] && exit 0

if ! command -v dpkg-query >/dev/null 2>&1; then
	echo "deps: dpkg-query not found: this is not a Debian-like system." >&2
	echo "deps: install the equivalents of: $(groups | cut -d'|' -f2 | tr '\n' ' ')" >&2
	echo "deps: then run again with VKGRAD_SKIP_DEPS=1" >&2
	exit 1
fi

missing_of() {
	m=""
	for p in $1; do
		st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
		[ "$st" = installed ] || m="$m $p"
	done
	echo "${m# }"
}

TAB=$(printf '\t')
plan=$(groups | while IFS='|' read -r name pkgs; do
	printf '%s\t%s\t%s\n' "$name" "$(echo "$pkgs" | wc -w)" "$(missing_of "$pkgs")"
done)
missing=$(echo "$plan" | cut -f3 | tr '\n' ' ' | tr -s ' ')
missing=${missing% }
missing=${missing# }
if [ -z "$missing" ]; then
	"$(dirname "$0")/shader-tools.sh" deps
	exit 0
fi

# tell_root: what to run as root, and fail
tell_root() {
	echo "deps: missing: $missing" >&2
	echo "deps: $1; as root, run:" >&2
	echo "    apt-get update && apt-get install -y --no-install-recommends $missing" >&2
	exit 1
}

SUDO=""
if [ "$(id -u)" != 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		tell_root "not root and no sudo"
	elif sudo -n true 2>/dev/null; then
		SUDO="sudo -n"
	elif [ -t 0 ]; then
		echo "deps: missing: $missing; sudo may ask for your password" >&2
		# asked here, on the terminal, before apt-get's output goes to the log
		sudo -v || tell_root "sudo refused"
		SUDO="sudo"
	else
		tell_root "not root, sudo needs a password and there is no terminal to type it"
	fi
fi

LOG=$(mktemp "${TMPDIR:-/tmp}/vkgrad-deps.XXXXXX")
# failed WHAT: the log's path and its end, and exit 1
failed() {
	echo " failed"
	echo "deps: $1 failed; apt-get's output is in $LOG; its last lines:" >&2
	tail -n 15 "$LOG" | sed 's/^/    /' >&2
	exit 1
}
# sudo drops the environment: pass DEBIAN_FRONTEND explicitly
apt() {
	echo "+ apt-get $*" >>"$LOG"
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get "$@" >>"$LOG" 2>&1 </dev/null
}

updated=0
echo "$plan" | {
	while IFS="$TAB" read -r name n miss; do
		if [ -z "$miss" ]; then
			echo "deps: $name: all $n packages present"
			continue
		fi
		printf 'deps: %s: installing %s of %s: %s ...' "$name" "$(echo "$miss" | wc -w)" "$n" "$miss"
		if [ "$updated" = 0 ]; then
			apt update || failed "apt-get update"
			updated=1
		fi
		# shellcheck disable=SC2086 # a list of package names
		apt install -y --no-install-recommends $miss || failed "apt-get install (group $name)"
		echo " done"
	done
} || exit 1
rm -f "$LOG"
"$(dirname "$0")/shader-tools.sh" deps
