# cycles.awk -- the cycles of a directed graph, for scripts/layers.sh (the
# include cycles of a folder) and scripts/lint.sh (the call cycles of a
# folder's objects).
#
# Input: one edge a line, four fields separated by tabs:
#     FROM  TO  WHERE  STEP
# FROM and TO name nodes; WHERE says where the edge is written (e.g.
# "http/body.c:3: includes http/http.h"); STEP names it in a cycle (e.g.
# "http/body.c -> http/http.h"). The first edge of a pair is kept.
# Output: one line for each edge that closes a cycle in a depth-first walk
# (so every cycle has at least one line), as
#     WHERE: <what>: STEP -> STEP ...
# the closing edge's STEP first, then the path back to it. With collapse=1
# a STEP "a -> b" followed by "b -> c" is written "a -> b -> c".
# Variables: what (default "a cycle"), collapse (0 or 1).
BEGIN {
    FS = "\t"
    if (what == "") what = "a cycle"
    found = 0
}
!(($1 SUBSEP $2) in seen) && $1 != $2 {
    seen[$1, $2] = 1
    if (!($1 in isnode)) { isnode[$1] = 1; nodes[++nn] = $1 }
    if (!($2 in isnode)) { isnode[$2] = 1; nodes[++nn] = $2 }
    ne[$1]++
    to[$1, ne[$1]] = $2
    where[$1, ne[$1]] = $3
    step[$1, ne[$1]] = $4
}
function join(a, b,    n, last, i, parts) {
    if (!collapse || a == "") return a == "" ? b : a ", " b
    # "x -> y" then "y -> z": "x -> y -> z"
    n = split(a, parts, " -> ")
    last = parts[n]
    if (index(b, last " -> ") == 1) return a substr(b, length(last) + 1)
    return a " -> " b
}
function dfs(u,    k, v, i, line) {
    color[u] = 1
    sp++
    stack[sp] = u
    for (k = 1; k <= ne[u]; k++) {
        v = to[u, k]
        edge_u[sp] = u
        edge_k[sp] = k
        if (color[v] == 1) {
            # back edge u -> v: the cycle is v ... u on the stack, then v
            line = step[u, k]
            for (i = sp; i >= 1 && stack[i] != v; i--) ;
            for (; i < sp; i++) line = join(line, step[edge_u[i], edge_k[i]])
            print where[u, k] ": " what ": " line
            found = 1
        } else if (color[v] == 0) {
            dfs(v)
        }
    }
    sp--
    color[u] = 2
}
END {
    sp = 0
    for (n = 1; n <= nn; n++)
        if (color[nodes[n]] == 0) dfs(nodes[n])
    exit found
}
