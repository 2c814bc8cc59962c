#!/bin/sh
# check_run.sh -- `make run-check` (part of `make test`): what `make run`
# prints before the server's own lines says what it does, and keeps the
# compiler's command lines out of the way (in build/build.log, printed only
# when the build fails). $(BUILD)/main.o is removed first so that make run
# has something to build; ARGS=--help makes the server print its usage and
# exit. libmicrohttpd's one-time line (scripts/mhd.sh) is checked by hand:
# it needs a clean tree and a download.
set -eu
cd "$(dirname "$0")/.."
build=build
[ -z "${SANITIZE:-}" ] || build=build/san
rm -f "$build/main.o"
if ! out=$(make --no-print-directory run ARGS=--help SANITIZE="${SANITIZE:-}" 2>&1); then
    printf '%s\n' "$out"
    echo "check_run: make run ARGS=--help failed" >&2
    exit 1
fi
fail=0
want="make run: building $build/attention-server (log: $build/build.log)"
if ! printf '%s\n' "$out" | grep -qxF "$want"; then
    echo "check_run: make run does not say '$want'" >&2
    fail=1
fi
if printf '%s\n' "$out" | grep -E '^(cc|gcc|clang|make\[[0-9]+\]:) '; then
    echo "check_run: make run shows the compiler's lines (above): they belong in $build/build.log" >&2
    fail=1
fi
if ! grep -q -- "-c main.c" "$build/build.log" 2>/dev/null; then
    echo "check_run: $build/build.log does not hold the build's lines" >&2
    fail=1
fi
if ! printf '%s\n' "$out" | grep -q '^Usage: attention-server'; then
    echo "check_run: the server did not run after the build" >&2
    fail=1
fi
[ "$fail" -eq 0 ] || { printf -- '--- make run printed:\n%s\n' "$out" >&2; exit 1; }
echo "check_run: make run says what it builds, its compiler lines are in $build/build.log"
