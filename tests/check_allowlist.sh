#!/bin/sh
# check_allowlist.sh -- part of `make layers-check`: every file that
# tests/duplicates.allow names exists, and every entry gives a reason, so
# the allowlist cannot outlive the code it excuses.
set -eu
cd "$(dirname "$0")/.."
status=0
n=0
while IFS= read -r line; do
    case "$line" in '#'* | '') continue ;; esac
    n=$((n + 1))
    pair=${line%%|*}
    why=$(printf '%s' "$line" | awk -F'|' '{ gsub(/^ +| +$/, "", $3); print $3 }')
    for f in $(printf '%s' "$pair" | tr '~' ' '); do
        [ -f "$f" ] || { echo "tests/duplicates.allow: no such file: $f" >&2; status=1; }
    done
    [ -n "$why" ] || { echo "tests/duplicates.allow: no reason: $line" >&2; status=1; }
done < tests/duplicates.allow
[ "$status" -eq 0 ] && echo "check_allowlist: $n allowed pairs, each file present and each with its reason"
exit "$status"
