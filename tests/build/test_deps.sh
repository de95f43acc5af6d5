#!/bin/sh
# tests/build/test_deps.sh — scripts/deps.sh's groups of packages (issue 38):
# `make demo` installs the build+runtime group only (no PyTorch, no
# Prometheus), `make test` adds the python group and the test extras; an
# install prints one line per group and keeps apt-get's output in a log
# that is named when it fails. The installs run against stubs (dpkg-query,
# apt-get, id on PATH; a copy of deps.sh beside a stub shader-tools.sh):
# nothing is installed.
# Prints cmocka-style counts for tests/run.sh.
#   tests/build/test_deps.sh
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
pass=0 fail=0
ok() { echo "[       OK ] $1"; pass=$((pass + 1)); }
bad() { echo "[  FAILED  ] $1: $2"; fail=$((fail + 1)); }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vkgrad-test-deps.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# the arguments `make -n TARGET` gives scripts/deps.sh (the Makefile's own
# recipe, whatever it says), as one line
deps_args() {
	line=$(env -u MAKEFLAGS -u MAKELEVEL make --no-print-directory -n "$1" 2>/dev/null |
		grep -m1 'scripts/deps\.sh')
	[ -n "$line" ] || return 1
	echo "${line#*scripts/deps.sh}"
}
# in_list PKG LIST: PKG is a line of LIST
in_list() { printf '%s\n' "$2" | grep -qx -- "$1"; }

# ---- what `make demo` and `make test` install ------------------------------
demo_list="" test_list=""
# (deps_args' words are deps.sh's arguments: split on purpose)
# shellcheck disable=SC2086
if ! a=$(deps_args demo); then
	bad demo_list "make -n demo runs no scripts/deps.sh"
elif ! demo_list=$(./scripts/deps.sh --list $a) || [ -z "$demo_list" ]; then
	bad demo_list "scripts/deps.sh --list$a failed or listed nothing"
else
	extras=$(printf '%s\n' "$demo_list" | grep -i -e torch -e prometheus | tr '\n' ' ')
	if [ -n "$extras" ]; then
		bad demo_list_no_test_extras "make demo (deps.sh$a) would install: $extras"
	else
		ok demo_list_no_test_extras
	fi
	need=""
	for p in make gcc libvulkan-dev glslc spirv-tools libmsgpack-dev mesa-vulkan-drivers; do
		in_list "$p" "$demo_list" || need="$need $p"
	done
	if [ -n "$need" ]; then bad demo_list_builds "missing:$need"; else ok demo_list_builds; fi
fi

# shellcheck disable=SC2086
if ! a=$(deps_args test); then
	bad test_list "make -n test runs no scripts/deps.sh"
elif ! test_list=$(./scripts/deps.sh --list $a) || [ -z "$test_list" ]; then
	bad test_list "scripts/deps.sh --list$a failed or listed nothing"
else
	need=""
	for p in python3-torch prometheus libcmocka-dev vulkan-validationlayers python3-venv $demo_list; do
		in_list "$p" "$test_list" || need="$need $p"
	done
	if [ -n "$need" ]; then bad test_list_adds_extras "missing:$need"; else ok test_list_adds_extras; fi
fi

# ---- bad usage: status 2 and the word named --------------------------------
out=$(./scripts/deps.sh --list tset 2>&1)
rc=$?
case "$rc:$out" in
2:*"unknown target 'tset'"*) ok bad_target ;;
*) bad bad_target "status $rc: $out" ;;
esac
out=$(./scripts/deps.sh --list demo --verbose 2>&1)
rc=$?
case "$rc:$out" in
2:*"'--verbose' is not a Debian package name"*) ok bad_package ;;
*) bad bad_package "status $rc: $out" ;;
esac

# ---- installs against stubs ------------------------------------------------
mkdir -p "$tmp/scripts" "$tmp/bin" "$tmp/t"
cp scripts/deps.sh "$tmp/scripts/"
printf '#!/bin/sh\nexit 0\n' >"$tmp/scripts/shader-tools.sh"
# dpkg-query -W -f=... PKG: installed unless PKG is in $STUB_MISSING
cat >"$tmp/bin/dpkg-query" <<'STUB'
#!/bin/sh
for a; do p=$a; done
case " $STUB_MISSING " in *" $p "*) exit 1 ;; esac
printf installed
STUB
# apt-get: its arguments to $STUB_CALLS, screens of progress, and the
# status $STUB_APT_FAIL for an install
cat >"$tmp/bin/apt-get" <<'STUB'
#!/bin/sh
echo "$*" >>"$STUB_CALLS"
i=0
while [ $i -lt 200 ]; do echo "Get:$i http://deb.example/ APT-NOISE [$i kB]"; i=$((i + 1)); done
[ "$1" = install ] && exit "${STUB_APT_FAIL:-0}"
exit 0
STUB
printf '#!/bin/sh\necho 0\n' >"$tmp/bin/id"
chmod +x "$tmp/scripts/"*.sh "$tmp/bin/"*

# stub_run TARGET MISSING FAIL: runs the copy; $out, $err, $rc, $calls
stub_run() {
	rm -f "$tmp/calls" "$tmp/t/"*
	env PATH="$tmp/bin:$PATH" TMPDIR="$tmp/t" STUB_CALLS="$tmp/calls" STUB_MISSING="$2" \
		STUB_APT_FAIL="$3" sh "$tmp/scripts/deps.sh" "$1" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	out=$(cat "$tmp/out")
	err=$(cat "$tmp/err")
	calls=$(cat "$tmp/calls" 2>/dev/null)
}

stub_run test "" 0
if [ $rc = 0 ] && [ -z "$out$err$calls" ]; then
	ok nothing_missing_silent
else
	bad nothing_missing_silent "status $rc, out '$out', err '$err', apt-get '$calls'"
fi

stub_run test "gcc python3-torch prometheus" 0
want="deps: build+runtime: installing 1 of 10: gcc ... done
deps: python: all 6 packages present
deps: test extras: installing 2 of 6: python3-torch prometheus ... done"
if [ $rc = 0 ] && [ "$out" = "$want" ] && [ -z "$err" ] && [ -z "$(ls "$tmp/t")" ]; then
	ok test_one_line_per_group
else
	bad test_one_line_per_group "status $rc, out:
$out
err: $err; left in TMPDIR: $(ls "$tmp/t")"
fi
want_calls="update
install -y --no-install-recommends gcc
install -y --no-install-recommends python3-torch prometheus"
if [ "$calls" = "$want_calls" ]; then
	ok test_apt_per_group
else
	bad test_apt_per_group "apt-get calls:
$calls"
fi

stub_run demo "gcc python3-torch prometheus" 0
if [ $rc = 0 ] && [ "$out" = "deps: build+runtime: installing 1 of 10: gcc ... done" ] &&
	[ "$calls" = "update
install -y --no-install-recommends gcc" ]; then
	ok demo_installs_build_runtime_only
else
	bad demo_installs_build_runtime_only "status $rc, out '$out', apt-get:
$calls"
fi

stub_run demo "gcc" 100
log=$(printf '%s\n' "$err" | sed -n "s/.*apt-get's output is in \([^;]*\);.*/\1/p")
if [ $rc = 1 ] && [ "$out" = "deps: build+runtime: installing 1 of 10: gcc ... failed" ] &&
	[ -n "$log" ] && grep -q APT-NOISE "$log" 2>/dev/null &&
	[ "$(printf '%s\n' "$err" | grep -c APT-NOISE)" -le 15 ]; then
	ok failure_names_log
else
	bad failure_names_log "status $rc, out '$out', log '$log', err:
$err"
fi

echo "[==========] $((pass + fail)) test(s) run."
echo "[  PASSED  ] $pass test(s)."
[ $fail = 0 ] || { echo "[  FAILED  ] $fail test(s)"; exit 1; }
