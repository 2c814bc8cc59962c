#!/bin/sh
# differential.sh BASE -- old-vs-new: build attention-server at commit BASE
# in a temporary git worktree (build/mhd copied in, so libmicrohttpd is not
# built again), then run build/tests/differential with the old and this
# tree's build/attention-server on free loopback ports, both serving the
# test models (tests/models/repo and models/digits-reverse, linked into one
# temporary repository). Every golden body of both protocols, every
# invalid body of tests/cases and a script of sequence steps (with a second
# pair of servers started with small limits) is sent to both; any byte of
# status or body that differs is printed, and the exit status is 1. Run by
# `make differential BASE=<commit>`; not part of make test (it builds
# another commit, about a minute on 2 cores).
set -eu
cd "$(dirname "$0")/.."
BASE=${1:?usage: scripts/differential.sh BASE}
BUILD=${BUILD:-build}
NEW_SERVER=$BUILD/attention-server
TOOL=$BUILD/tests/differential
for f in "$NEW_SERVER" "$TOOL"; do
    [ -x "$f" ] || { echo "differential: $f is missing (make $f)" >&2; exit 2; }
done

TMP=$(mktemp -d /tmp/attn-differential.XXXXXX)
OLD=$TMP/old
cleanup() {
    git worktree remove --force "$OLD" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

git worktree add --detach --quiet "$OLD" "$BASE"
if [ -d build/mhd ]; then
    mkdir -p "$OLD/build"
    cp -a build/mhd "$OLD/build/"
    # newer than the fresh checkout's scripts/mhd.sh, so make keeps it
    find "$OLD/build/mhd" -exec touch {} +
fi
echo "differential: building $BASE ($(git rev-parse --short "$BASE")) in $OLD"
make -C "$OLD" -j2 build/attention-server >"$TMP/old-build.log" 2>&1 || {
    tail -n 30 "$TMP/old-build.log" >&2
    exit 2
}

REPO=$TMP/repo
mkdir "$REPO"
for d in "$PWD"/tests/models/repo/*/ "$PWD"/models/*/; do
    ln -s "${d%/}" "$REPO/$(basename "$d")"
done

"$TOOL" "$OLD/build/attention-server" "$NEW_SERVER" "$REPO"
