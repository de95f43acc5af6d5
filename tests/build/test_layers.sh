#!/bin/sh
# tests/build/test_layers.sh — every room (folder) of the build is layered:
# no loop between the files of one folder. File A depends on file B of the
# same folder when A's object leaves a symbol undefined that B's object
# defines (nm: what A calls or reads of B; static functions and inline
# helpers in headers are nobody's). A loop (engine.c → lanes.c → engine.c)
# means no file of it is on top; the part that calls back up takes a
# callback or a small ops table from its owner instead (../shared/STYLE.md).
# Rooms: the folders of $BUILD/obj holding objects of the daemon, proto,
# the client and the tools (not the tests' helpers, not generated code);
# an object whose source is gone is left out.
# Prints cmocka-style counts for tests/run.sh, and each loop found.
#   BUILD=build tests/build/test_layers.sh [ROOM...]
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
BUILD=${BUILD:-build}
pass=0 fail=0
ok() { echo "[       OK ] $1"; pass=$((pass + 1)); }
bad() { echo "[  FAILED  ] $1: $2"; fail=$((fail + 1)); }

if ! command -v nm >/dev/null 2>&1; then
	bad nm "nm (binutils) is not installed"
	exit 1
fi
if [ $# -gt 0 ]; then
	rooms=$*
else
	rooms=$(find "$BUILD/obj" -name '*.o' 2>/dev/null | sed "s|^$BUILD/obj/||; s|/[^/]*\$||" |
		grep -v -e '^tests' -e '^gen' | sort -u)
fi
if [ -z "$rooms" ]; then
	bad rooms "no objects under $BUILD/obj (run make all first)"
	exit 1
fi

# edges ROOM: "a.c b.c" for each file a.c of ROOM that uses a symbol b.c defines
edges() {
	for o in "$BUILD/obj/$1"/*.o; do
		f=$(basename "$o" .o).c
		[ -f "$1/$f" ] || continue
		nm -P --defined-only "$o" | awk -v f="$f" '$2 ~ /^[A-TV-Z]$/ { print "D", $1, f }'
		nm -P -u "$o" | awk -v f="$f" '{ print "U", $1, f }'
	done | awk '$1 == "D" { def[$2] = $3; next }
		    { use[++n] = $2; by[n] = $3 }
		    END { for (i = 1; i <= n; i++)
				if ((use[i] in def) && def[use[i]] != by[i]) print by[i], def[use[i]] }' |
		sort -u
}

# loops: from "a b" edges, one loop per set of files, as "a.c → b.c → a.c"
loops() {
	awk '{ out[$1] = out[$1] " " $2; e[NR] = $1 " " $2; n = NR }
	function path(from, to,    q, h, t, seen, prev, cur, k, m, nx, p) {
		# breadth first from `from`: the shortest way to `to`, or ""
		h = 1; t = 1; q[1] = from; seen[from] = 1
		while (h <= t) {
			cur = q[h++]
			if (cur == to) {
				p = cur
				while (cur != from) { cur = prev[cur]; p = cur " → " p }
				return p
			}
			m = split(out[cur], nx, " ")
			for (k = 1; k <= m; k++)
				if (!(nx[k] in seen)) { seen[nx[k]] = 1; prev[nx[k]] = cur; q[++t] = nx[k] }
		}
		return ""
	}
	END {
		for (i = 1; i <= n; i++) {
			split(e[i], ab, " ")
			p = path(ab[2], ab[1])
			if (p == "") continue
			m = split(p, parts, " → ")
			# one report per set of files
			key = ""
			for (k = 1; k <= m; k++) names[k] = parts[k]
			for (k = 1; k <= m; k++) for (j = k + 1; j <= m; j++)
				if (names[j] < names[k]) { x = names[k]; names[k] = names[j]; names[j] = x }
			for (k = 1; k <= m; k++) key = key " " names[k]
			if (key in done) continue
			done[key] = 1
			print ab[1] " → " p
		}
	}'
}

for room in $rooms; do
	if [ ! -d "$BUILD/obj/$room" ]; then
		bad "$room" "no objects in $BUILD/obj/$room"
		continue
	fi
	found=$(edges "$room" | loops)
	if [ -z "$found" ]; then
		ok "$room"
	else
		bad "$room" "$(printf '%s\n' "$found" | wc -l) loop(s) between its files"
		printf '%s\n' "$found" | sed "s|^|    $room: |"
	fi
done

echo "[==========] $((pass + fail)) test(s) run."
echo "[  PASSED  ] $pass test(s)."
[ "$fail" -eq 0 ] || echo "[  FAILED  ] $fail test(s)."
[ "$fail" -eq 0 ]
