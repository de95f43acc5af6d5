#!/bin/sh
# Compile one shader for one storage dtype, validate it, write the C array
# the kernel registry embeds (shaders/gen_registry.sh):
#   compile.sh TOOLS.env SHADER.comp DTYPE OUT.spv.inc
#
# TOOLS.env is what scripts/shader-tools.sh decided. A shader whose
# "// @build" line names features for this dtype (needs_DTYPE=F1,F2) is
# compiled by the first toolchain that has them all (the system's, or the
# fetched one; the fetched one first with VKGRAD_SHADER_TOOLS=fetch); with
# none, OUT is left empty and gen_registry.sh leaves that build out. Every
# module goes through spirv-val from the toolchain that compiled it.
# "spirv_opt=off" in the @build line compiles without -O (spirv-opt has
# mishandled cooperative-matrix and bf16 modules: llama.cpp issue 10734);
# "target=vulkan1.3" targets Vulkan 1.3 (SPIR-V 1.6) instead of 1.2.
set -eu
env=$1 src=$2 dt=$3 out=$4
. "$env"
# a dtype the shader's metadata does not list is not built (empty OUT)
dtypes=$(grep -m1 '^// @kernel ' "$src" | tr ' ' '\n' | sed -n 's/^dtype=//p')
case ",$dtypes," in *",$dt,"*) ;; *) mkdir -p "$(dirname "$out")"; : >"$out"; exit 0 ;; esac
build=$(grep -m1 '^// @build ' "$src" | sed 's#^// @build ##' || true)
get() { echo "$build" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
needs=$(get "needs_$dt" | tr ',' ' ')
opt=-O
[ "$(get spirv_opt)" = off ] && opt=""
te=$(get target)
te=${te:-vulkan1.2}
case $dt in
f16) def=-DVKG_DTYPE_F16 ;;
bf16) def=-DVKG_DTYPE_BF16 ;;
*) def="" ;;
esac

# has TOOLCHAIN: does it compile every feature in $needs?
has() {
	for f in $needs; do
		eval "v=\${VKG_HAS_$1_$f:-}"
		[ "$v" = 1 ] || return 1
	done
	eval "v=\${VKG_GLSLC_$1:-}"
	[ -n "$v" ]
}
tc=""
if [ -z "$needs" ]; then
	tc=system
else
	order="system fetched"
	[ "${VKG_PREFER:-system}" = fetched ] && order="fetched system"
	for t in $order; do
		if has "$t"; then tc=$t; break; fi
	done
fi
mkdir -p "$(dirname "$out")"
if [ -z "$tc" ]; then
	echo "left out: $src ($dt) needs$(echo " $needs" | sed 's/ /, /g; s/^,//'), which no shader compiler here has"
	: >"$out"
	exit 0
fi
eval "glslc=\$VKG_GLSLC_$tc val=\$VKG_SPIRV_VAL_$tc"
spv=${out%.inc}
echo "glslc ($tc) $src $dt"
"$glslc" $opt --target-env="$te" -Ishaders $def "$src" -o "$spv.tmp"
"$val" --target-env "$te" "$spv.tmp" || { rm -f "$spv.tmp"; echo "spirv-val rejected $src ($dt)" >&2; exit 1; }
mv "$spv.tmp" "$spv"
# the words as a C initialiser, as glslc -mfmt=c writes it
{
	echo "{"
	od -An -v -tx4 "$spv" | sed 's/ *\([0-9a-f]\{8\}\)/0x\1,/g'
	echo "}"
} >"$out.tmp"
mv "$out.tmp" "$out"
