#!/bin/sh
# scripts/shader-tools.sh — which shader compiler builds which kernels.
#
#   shader-tools.sh probe OUT.env [MODE]   decide, write OUT.env (make does this)
#   shader-tools.sh fetch                  fetch the newer tools (or reuse the
#                                          cached ones), print their folder
#   shader-tools.sh deps                   fetch them only if the system's
#                                          glslc lacks a feature and none are
#                                          cached (scripts/deps.sh); quiet
#                                          otherwise, never fails
#
# Most kernels compile with the system's glslc. A few need what older
# compilers lack — "features", each a one-line test shader in
# shaders/features/NAME.comp:
#   coopmat_khr  GL_KHR_cooperative_matrix (glslang 13+; Debian 12 has 11.13)
#   bfloat16     GL_EXT_bfloat16           (glslang 15.3+ / shaderc 2025.2+)
#   coopmat_nv2  GL_NV_cooperative_matrix2 (glslang 15+; SPIR-V 1.6)
# A shader says what it needs in its "// @build needs_DTYPE=FEATURE,..." line.
#
# Per feature, the way llama.cpp's Vulkan build decides: the system's glslc
# first; where it fails, Debian sid's glslc / glslang / SPIRV-Tools, fetched
# once into a private cache and reused by every later build; where that
# fails too (offline, say), the build goes on without the kernels that need
# the feature, and says so once. Fetching: `apt-get download` of glslang-tools,
# glslc, libshaderc1, spirv-tools and of sid's libc6, libstdc++6,
# libgcc-s1 (the tools need a newer C library than the system's), against a
# private apt state whose sources list names only sid (signatures checked
# with the system's Debian archive keyring), `dpkg -x` into
#   ${VKGRAD_SHADER_TOOLS_CACHE:-${XDG_CACHE_HOME:-~/.cache}/vkgrad/shader-tools}/sid-<versions>/
# and wrapper scripts in its bin/ that run each tool through that folder's
# own dynamic loader (ld-linux ... --library-path): nothing is installed, the
# system's libc is untouched, and only the build uses them (the daemon links
# against the system's libraries alone). About 12 MB of packages, ~10 s.
#
# MODE (VKGRAD_SHADER_TOOLS): auto (default) as above; system: never fetch
# (features the system's glslc lacks are left out); fetch: the fetched
# tools for every kernel that needs a feature, even where the system's
# glslc would do; none: build only the kernels that need no feature.
# VKGRAD_SHADER_TOOLS_MIRROR (default http://deb.debian.org/debian) is the
# archive; VKGRAD_SHADER_TOOLS_REFRESH=1 fetches again although a cached
# copy exists (the newest cached copy is used otherwise, offline too).
#
# OUT.env (sh syntax, read by shaders/compile.sh):
#   VKG_GLSLC_system, VKG_SPIRV_VAL_system     the system's tools
#   VKG_GLSLC_fetched, VKG_SPIRV_VAL_fetched   the fetched ones, or empty
#   VKG_HAS_<toolchain>_<feature>=1            what each compiles
#   VKG_PREFER                                 system, or fetched (MODE fetch)
set -eu

FEATURES="coopmat_khr bfloat16 coopmat_nv2"
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${VKGRAD_SHADER_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vkgrad/shader-tools}
mirror=${VKGRAD_SHADER_TOOLS_MIRROR:-http://deb.debian.org/debian}
PKGS="glslang-tools glslc libshaderc1 spirv-tools libc6 libstdc++6 libgcc-s1"

# Does glslc $1 compile feature $2's test shader? (spirv-val $3 must accept
# it; its "// @target" line names the Vulkan version, else 1.2)
compiles() {
	t=$(mktemp "${TMPDIR:-/tmp}/vkgrad-feature.XXXXXX")
	ok=1
	te=$(sed -n 's#^// @target ##p' "$here/shaders/features/$2.comp")
	te=${te:-vulkan1.2}
	"$1" --target-env="$te" -fshader-stage=compute "$here/shaders/features/$2.comp" \
		-o "$t" >/dev/null 2>&1 && "$3" --target-env "$te" "$t" >/dev/null 2>&1 || ok=0
	rm -f "$t"
	[ $ok = 1 ]
}

# The newest complete fetched copy in the cache whose glslc runs, or nothing.
cached() {
	[ -d "$cache" ] || return 0
	for d in $(ls -1td "$cache"/sid-* 2>/dev/null); do
		if [ -x "$d/bin/glslc" ] && "$d/bin/glslc" --version >/dev/null 2>&1; then
			echo "$d"
			return 0
		fi
	done
}

# Fetch into a temporary folder of the cache, then rename it into place
# (a complete copy or none: a build interrupted here leaves only .fetch-*).
do_fetch() {
	command -v apt-get >/dev/null && command -v dpkg >/dev/null ||
		{ echo "apt-get and dpkg are needed to fetch"; return 1; }
	arch=$(dpkg --print-architecture)
	mkdir -p "$cache"
	w=$(mktemp -d "$cache/.fetch-XXXXXX")
	trap 'rm -rf "$w"' EXIT
	mkdir -p "$w/apt/lists/partial" "$w/apt/cache/archives/partial" "$w/debs" "$w/root" "$w/bin"
	echo "deb $mirror sid main" >"$w/apt/sources.list"
	set -- -o Dir::Etc::sourcelist="$w/apt/sources.list" -o Dir::Etc::sourceparts=- \
		-o Dir::State::Lists="$w/apt/lists" -o Dir::Cache="$w/apt/cache" \
		-o Debug::NoLocking=1 -o APT::Architecture="$arch" -o APT::Architectures="$arch" \
		-o Acquire::Languages=none -o Acquire::Retries=1 -o Acquire::http::Timeout=20 \
		-o APT::Sandbox::User="$(id -un)"
	apt-get "$@" -qq update >"$w/log" 2>&1 || { tail -3 "$w/log"; return 1; }
	# (apt-get update succeeds without any list when the archive is unreachable)
	ls "$w/apt/lists/"*Packages* >/dev/null 2>&1 ||
		{ echo "no package list from $mirror:" $(grep -v '^ *$' "$w/log" | tail -2); return 1; }
	want=""
	for p in $PKGS; do want="$want $p/sid"; done
	(cd "$w/debs" && apt-get "$@" -qq download $want) >>"$w/log" 2>&1 || { tail -3 "$w/log"; return 1; }
	for f in "$w"/debs/*.deb; do
		dpkg -x "$f" "$w/root" || return 1
		echo "$(dpkg-deb -f "$f" Package) $(dpkg-deb -f "$f" Version)" >>"$w/VERSIONS"
	done
	rm -rf "$w/debs" "$w/apt" "$w/root/usr/share" "$w/root/usr/lib"/*/gconv
	ldso=$(cd "$w/root" && ls usr/lib/*/ld-linux*.so.* 2>/dev/null | head -1)
	[ -n "$ldso" ] || { echo "no dynamic loader in sid's libc6"; return 1; }
	for t in glslc glslangValidator spirv-val spirv-opt spirv-dis; do
		cat >"$w/bin/$t" <<EOF
#!/bin/sh
# $t from Debian sid, run with sid's own loader and libraries (scripts/shader-tools.sh)
r=\$(cd "\$(dirname "\$0")/../root" && pwd)
exec "\$r/$ldso" --library-path "\$r/$(dirname "$ldso")" "\$r/usr/bin/$t" "\$@"
EOF
		chmod +x "$w/bin/$t"
	done
	"$w/bin/glslc" --version >/dev/null 2>&1 || { echo "the fetched glslc does not run"; return 1; }
	v() { sed -n "s/^$1 //p" "$w/VERSIONS" | tr '~:' '__'; }
	dest="$cache/sid-glslc_$(v glslc)-glslang_$(v glslang-tools)-spirv-tools_$(v spirv-tools)"
	if [ -d "$dest" ]; then
		rm -rf "$w"
	else
		mv "$w" "$dest"
	fi
	trap - EXIT
	echo "$dest"
}

# The fetched tools' folder: cached, else fetched now; a reason on failure.
fetched() {
	if [ "${VKGRAD_SHADER_TOOLS_REFRESH:-0}" != 1 ]; then
		d=$(cached)
		[ -n "$d" ] && { echo "$d"; return 0; }
	fi
	r=$(do_fetch 2>&1) && { echo "$r" | tail -1; return 0; }
	echo "fetching Debian sid's shader tools from $mirror failed: $(echo "$r" | tr '\n' ' ')" >&2
	return 1
}

probe() {
	out=$1
	mode=${2:-auto}
	case $mode in auto | system | fetch | none) ;; *)
		echo "shader-tools: VKGRAD_SHADER_TOOLS is auto, system, fetch or none (got '$mode')" >&2
		exit 2 ;;
	esac
	sys_glslc=$(command -v glslc || true)
	sys_val=$(command -v spirv-val || true)
	[ -n "$sys_glslc" ] && [ -n "$sys_val" ] ||
		{ echo "shader-tools: glslc and spirv-val are needed (make deps)" >&2; exit 1; }
	tmp=$out.tmp
	{
		echo "# written by scripts/shader-tools.sh probe (mode $mode)"
		echo "VKG_GLSLC_system=$sys_glslc"
		echo "VKG_SPIRV_VAL_system=$sys_val"
	} >"$tmp"
	lack=""
	for f in $FEATURES; do
		if [ "$mode" != none ] && compiles "$sys_glslc" "$f" "$sys_val"; then
			echo "VKG_HAS_system_$f=1" >>"$tmp"
		else
			lack="$lack $f"
		fi
	done
	fdir=""
	why=""
	if [ "$mode" = fetch ] || { [ "$mode" = auto ] && [ -n "$lack" ]; }; then
		fdir=$(fetched 2>"$out.why") || fdir=""
		why=$(cat "$out.why")
	fi
	rm -f "$out.why"
	flack=""
	if [ -n "$fdir" ]; then
		echo "VKG_GLSLC_fetched=$fdir/bin/glslc" >>"$tmp"
		echo "VKG_SPIRV_VAL_fetched=$fdir/bin/spirv-val" >>"$tmp"
		for f in $FEATURES; do
			if compiles "$fdir/bin/glslc" "$f" "$fdir/bin/spirv-val"; then
				echo "VKG_HAS_fetched_$f=1" >>"$tmp"
			else
				flack="$flack $f"
			fi
		done
	fi
	echo "VKG_PREFER=$([ "$mode" = fetch ] && echo fetched || echo system)" >>"$tmp"
	mv "$tmp" "$out"
	# say once (this runs when the decision may have changed) what was decided
	sysv=$("$sys_glslc" --version 2>/dev/null | head -1)
	if [ -z "$lack" ] && [ "$mode" != fetch ]; then
		echo "shader tools: the system's glslc ($sysv) compiles every kernel"
	elif [ -n "$fdir" ]; then
		echo "shader tools: the system's glslc ($sysv) lacks${lack:- nothing}; kernels that need" \
			"it are built with Debian sid's tools from $fdir${flack:+ (which lack$flack: kernels needing that are left out)}"
	else
		reason=${why:-VKGRAD_SHADER_TOOLS=$mode}
		echo "shader tools: no compiler for${lack} ($reason); building without the kernels that" \
			"need it (the daemon serves the rest)" >&2
	fi
}

# For `make deps`: the fetch a build would do, ahead of time.
deps() {
	sys_glslc=$(command -v glslc || true)
	sys_val=$(command -v spirv-val || true)
	[ -n "$sys_glslc" ] && [ -n "$sys_val" ] || return 0
	for f in $FEATURES; do
		compiles "$sys_glslc" "$f" "$sys_val" && continue
		[ -n "$(cached)" ] && return 0
		if d=$(fetched 2>"${TMPDIR:-/tmp}/vkgrad-fetch.$$"); then
			echo "deps: the system's glslc lacks $f: fetched Debian sid's shader tools into $d"
		else
			echo "deps: $(cat "${TMPDIR:-/tmp}/vkgrad-fetch.$$"); the build will go without the kernels that need $f"
		fi
		rm -f "${TMPDIR:-/tmp}/vkgrad-fetch.$$"
		return 0
	done
}

case ${1:-} in
probe) shift; probe "$@" ;;
fetch) fetched ;;
deps) deps ;;
*) echo "usage: $0 probe OUT.env [auto|system|fetch|none] | fetch | deps" >&2; exit 2 ;;
esac
