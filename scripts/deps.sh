#!/bin/sh
# Install the Debian packages vkgrad needs, only those missing. Idempotent;
# used by `make deps` (and so by `make demo` / `make test`).
#   scripts/deps.sh [EXTRA_PACKAGE...]
# Nothing missing: no apt-get, as any user, without sudo.
# Something missing:
#   - as root: apt-get installs it;
#   - otherwise through sudo: `sudo -n` (no password asked) when that is
#     allowed, plain `sudo` (which may ask) only on a terminal;
#   - no sudo, or sudo would need a password nobody can type (CI, a pipe):
#     prints the command to run as root and exits 1.
# VKGRAD_SKIP_DEPS=1 skips everything here (a system that is not
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
PKGS="make gcc pkg-config libvulkan-dev glslc libshaderc-dev libuv1-dev libmsgpack-dev
libcmocka-dev mesa-vulkan-drivers libsystemd-dev vulkan-validationlayers
systemd util-linux python3-numpy python3-torch prometheus
python3-msgpack python3-setuptools python3-wheel python3-venv python3-pip"
# prometheus: its promtool checks `vkgrad stats --prometheus`
# (tests/python/test_operations.py); the package's own service is not
# started by the tests (and policy-rc.d stops it in containers).
# extra packages a target needs beyond `make test` (test-valgrind: valgrind)
PKGS="$PKGS $*"

[ "${VKGRAD_SKIP_DEPS:-0}" = 1 ] && exit 0

if ! command -v dpkg-query >/dev/null 2>&1; then
	echo "deps: dpkg-query not found: this is not a Debian-like system." >&2
	echo "deps: install the equivalents of:" $PKGS >&2
	echo "deps: then run again with VKGRAD_SKIP_DEPS=1" >&2
	exit 1
fi

missing=""
for p in $PKGS; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$st" = installed ] || missing="$missing $p"
done
if [ -z "$missing" ]; then
	"$(dirname "$0")/shader-tools.sh" deps
	exit 0
fi

# tell_root: what to run as root, and fail
tell_root() {
	echo "deps: missing:$missing" >&2
	echo "deps: $1; as root, run:" >&2
	echo "    apt-get update && apt-get install -y --no-install-recommends$missing" >&2
	exit 1
}

SUDO=""
if [ "$(id -u)" != 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		tell_root "not root and no sudo"
	elif sudo -n true 2>/dev/null; then
		SUDO="sudo -n"
	elif [ -t 0 ]; then
		echo "deps: missing:$missing; sudo may ask for your password" >&2
		SUDO="sudo"
	else
		tell_root "not root, sudo needs a password and there is no terminal to type it"
	fi
fi
echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
# sudo drops the environment: pass DEBIAN_FRONTEND explicitly
if [ -n "$SUDO" ]; then
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
else
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends $missing
fi
"$(dirname "$0")/shader-tools.sh" deps
