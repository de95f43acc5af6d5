#!/bin/sh
# Install the Debian packages vkgrad needs, only those missing. Idempotent and
# non-interactive; used by `make deps` (and so by `make demo` / `make test`).
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
systemd util-linux python3-numpy python3-torch"
# extra packages a target needs beyond `make test` (test-valgrind: valgrind)
PKGS="$PKGS $*"
missing=""
for p in $PKGS; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$st" = installed ] || missing="$missing $p"
done
if [ -z "$missing" ]; then
	"$(dirname "$0")/shader-tools.sh" deps
	exit 0
fi
echo "deps: installing$missing"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing
"$(dirname "$0")/shader-tools.sh" deps
