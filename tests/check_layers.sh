#!/bin/sh
# check_layers.sh -- `make layers-check` (part of `make test`; `make lint`
# runs scripts/layers.sh too): the tree keeps the layer rule, and the rule
# can fail: a copy of the tree's sources with includes that break it
# (http/ including the core, as a transport that knew the math would; the
# options table including codec/, a layer above it) must be refused, and so
# must an include cycle within a folder (response.c including http.h, whose
# http.c includes response.h).
set -eu
cd "$(dirname "$0")/.."
scripts/layers.sh

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for d in lib core config options model codec api http grpc; do
    mkdir -p "$tmp/$d"
    cp "$d"/*.[ch] "$tmp/$d/" 2>/dev/null || true
done
printf '#include "core/attention.h"\n' >>"$tmp/http/http.c"
printf '#include <model/repo.h>\n' >>"$tmp/codec/tensor.c" # the angle-bracket spelling too
printf '#include "codec/codec.h"\n' >>"$tmp/options/options.c" # the table sits below codec/
printf '#include "http/http.h"\n' >>"$tmp/http/response.c"
if scripts/layers.sh "$tmp" >"$tmp/out" 2>&1; then
    echo "check_layers: an include of core/ from http/ was not refused" >&2
    exit 1
fi
cycle='^http/response.c:[0-9]*: includes http/http.h: an include cycle: http/response.c -> http/http.h -> http/http.c -> http/response.h$'
grep -q '^http/http.c:[0-9]*: includes core/attention.h' "$tmp/out" &&
    grep -q '^codec/tensor.c:[0-9]*: includes model/repo.h' "$tmp/out" &&
    grep -q '^options/options.c:[0-9]*: includes codec/codec.h' "$tmp/out" &&
    grep -q "$cycle" "$tmp/out" || {
    echo "check_layers: the refusal does not name the include:" >&2
    cat "$tmp/out" >&2
    exit 1
}
echo "check_layers: a planted violation is refused ($(head -n 1 "$tmp/out"))"
echo "check_layers: a planted include cycle is refused ($(grep "$cycle" "$tmp/out"))"
