#!/bin/sh
# check_readme.sh -- `make readme-check` (part of `make test`): the README
# against the tree, so that it does not drift.
#   1. The Layout table names every folder of the repository down to depth 2
#      (tests/browser/, docs/bench/, ...), and every folder it names exists.
#      The folders are git's tracked ones (build/ and node_modules/ are not),
#      or, outside a git checkout, what find sees minus those two.
#   2. It refers to no issue or pull-request numbers ("issue 5", "#8"): it
#      has to stand on its own.
# Prints every mismatch and exits 1 if there is one.
set -eu
cd "$(dirname "$0")/.."
export LC_ALL=C # one sort order for comm

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Folders named in the first column of the table under "## Layout".
# shellcheck disable=SC2016 # backquotes to match, not an expansion
awk '/^## / { on = ($0 == "## Layout") } on && /^\| `/' README.md |
    sed -E 's/^\| `([^`]*)`.*/\1/; s,/*$,/,' | sort -u > "$tmp/listed"

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files
else
    find . -type f ! -path './.git/*' ! -path './build/*' ! -path './node_modules/*' |
        sed 's,^\./,,'
fi | awk -F/ 'NF > 1 { print $1 "/" } NF > 2 { print $1 "/" $2 "/" }' | sort -u > "$tmp/tree"

status=0
comm -13 "$tmp/listed" "$tmp/tree" | sed 's/^/README.md Layout: no row for /' >&2
comm -23 "$tmp/listed" "$tmp/tree" | sed 's/^/README.md Layout: no such folder: /' >&2
cmp -s "$tmp/listed" "$tmp/tree" || status=1

if grep -nEi '\bissues? #?[0-9]+|(^|[^&[:alnum:]])#[0-9]+\b' README.md >&2; then
    echo "README.md: refers to issue numbers (lines above); say what is meant instead" >&2
    status=1
fi

[ "$status" -eq 0 ] && echo "README.md: layout table matches the tree; no issue numbers"
exit "$status"
