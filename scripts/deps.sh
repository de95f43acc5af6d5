#!/bin/sh
# Install the Debian packages vkgrad needs, only those missing. Idempotent and
# non-interactive; used by `make deps` (and so by `make demo` / `make test`).
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
[ -z "$missing" ] && exit 0
echo "deps: installing$missing"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing
