#!/bin/sh
# calls.sh -- what scripts/layers.sh cannot see in the text, read from the
# build's objects (part of `make lint`; it builds first):
#
#  - no two files of a folder call each other, directly or round a cycle:
#    file a calls file b when a.o has an undefined symbol that b.o of the
#    same folder defines (nm). A cycle is printed as
#        FILE.c: calls SYM...: a call cycle: a.c -> b.c (SYM...), b.c -> a.c (SYM...)
#  - a header with no .c of its stem (a leaf: types, macros, constants,
#    static inline functions, shared by the folder's files) declares no
#    function of the folder's .c files: a call goes through the callee's
#    own header, so that layers.sh's include cycles are the call cycles.
#        HEADER.h: declares SYM, a function of FILE.c (a leaf declares none)
#
# Usage: scripts/calls.sh [FOLDER...]   (default: lib core config options model codec api http grpc)
# Exits 1 when it prints one.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
[ $# -gt 0 ] || set -- lib core config options model codec api http grpc
make -s --no-print-directory -j2 all

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for d in "$@"; do
    : >"$tmp/defs"
    : >"$tmp/uses"
    for o in build/"$d"/*.o; do
        [ -f "$o" ] || continue
        stem=${o##*/}
        f=$d/${stem%.o}.c
        [ -f "$f" ] || continue
        # what f defines for other files (functions, data, GNU ifuncs), and uses
        nm --defined-only "$o" | awk -v f="$f" '$2 ~ /^[TDBRVWi]$/ { print $3, f }' >>"$tmp/defs"
        nm -u "$o" | awk -v f="$f" '{ print f, $2 }' >>"$tmp/uses"
    done

    # a -> b with the symbols, one edge a line for cycles.awk
    awk 'NR == FNR { def[$1] = $2; next }
         ($2 in def) && def[$2] != $1 {
             k = $1 SUBSEP def[$2]
             if (!(k in syms)) { order[++n] = k; syms[k] = $2 }
             else syms[k] = syms[k] ", " $2
         }
         END {
             for (i = 1; i <= n; i++) {
                 split(order[i], ab, SUBSEP)
                 printf "%s\t%s\t%s: calls %s\t%s -> %s (%s)\n", ab[1], ab[2], ab[1], syms[order[i]],
                        ab[1], ab[2], syms[order[i]]
             }
         }' "$tmp/defs" "$tmp/uses" >"$tmp/edges"
    awk -v what="a call cycle" -f "$here/cycles.awk" "$tmp/edges" || status=1

    # the leaves: the names a header declares or calls as NAME(, outside
    # comments and the bodies of its static inline functions
    for h in "$d"/*.h; do
        if [ ! -f "$h" ] || [ -f "${h%.h}.c" ]; then continue; fi
        awk '{ text = text $0 "\n" }
             END {
                 while ((i = index(text, "/*")) > 0) {
                     j = index(substr(text, i + 2), "*/")
                     text = substr(text, 1, i - 1) " " substr(text, i + j + 3)
                 }
                 while (match(text, /static[ \t\n]+(inline|__inline__)[^{;]*[{]/)) {
                     pre = substr(text, 1, RSTART - 1)
                     rest = substr(text, RSTART + RLENGTH)
                     depth = 1
                     for (k = 1; depth > 0 && k <= length(rest); k++) {
                         c = substr(rest, k, 1)
                         if (c == "{") depth++
                         else if (c == "}") depth--
                     }
                     text = pre substr(rest, k)
                 }
                 while (match(text, /[A-Za-z_][A-Za-z0-9_]*[ \t\n]*[(]/)) {
                     name = substr(text, RSTART, RLENGTH)
                     sub(/[ \t\n]*[(]$/, "", name)
                     print name
                     text = substr(text, RSTART + RLENGTH)
                 }
             }' "$h" | sort -u >"$tmp/names"
        awk -v h="$h" 'NR == FNR { def[$1] = $2; next }
            ($1 in def) { printf "%s: declares %s, a function of %s (a header without a .c declares none)\n", h, $1, def[$1]; bad = 1 }
            END { exit bad }' "$tmp/defs" "$tmp/names" || status=1
    done
done

if [ "$status" -eq 0 ]; then
    echo "calls: no folder's files call round a cycle, and its leaf headers declare no function (scripts/calls.sh)"
else
    echo "calls: the calls and declarations above go round a cycle or through a leaf header (scripts/calls.sh)"
fi
exit "$status"
