#!/bin/sh
# lint.sh -- `make lint`: clang-tidy (checks in .clang-tidy) and cppcheck
# over the service's C sources, the file sizes, the layer rule and the
# cycles within a folder; exits 1 on any finding.
# Usage: scripts/lint.sh [FILE.c...]   (default: every layer's *.c and main.c)
# Needs clang-tidy and cppcheck (`make lint` installs them: deps.sh lint).
set -eu
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- lib/*.c core/*.c config/*.c options/*.c model/*.c codec/*.c api/*.c http/*.c grpc/*.c \
    main.c

# What the build compiles with, minus warnings and dependency files; the
# libmicrohttpd headers are build/mhd/'s when the system's are too old
# (scripts/mhd.sh), so that is built first, and so is the header protoc-c
# generates into build/gen/ (codec/ reads it).
make -s --no-print-directory mhd build/gen/grpc_service.pb-c.h
cflags="-std=gnu11 -fopenmp-simd -pthread -iquote . -Ibuild/gen $(pkg-config --cflags openblas 2>/dev/null || true)
        $(make -s --no-print-directory print-MHD_CFLAGS)"

status=0
echo "clang-tidy: $*"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# shellcheck disable=SC2086 # cflags is several words
printf '%s\n' "$@" | xargs -P 2 -I{} clang-tidy --quiet {} -- $cflags >"$log" 2>&1 || status=1
# clang counts the warnings it found in system headers (and then dropped)
grep -v '^[0-9]* warnings\? generated\.$' "$log" || true

# cppcheck's own exclusions, each with its reason:
#  invalidPointerCast: base64 tensors are little-endian float32 bytes, read
#    and written through a cast on purpose (the service is x86-64 only).
#  comparePointers: openapi_yaml_end - openapi_yaml, the two ends of one
#    object that api/embed.S links in, look to it like two arrays.
#  ctuuninitvar in codec/scan.c: scan_request() copies its caller's
#    pointer to a struct scan_tensors it has not initialised yet into its
#    cursor, then sets st->n = 0 before anything reads it; the cross-file
#    check counts the copy as a read.
#  missingIncludeSystem: it need not read the system headers.
echo "cppcheck: $*"
cppcheck --quiet --error-exitcode=1 --std=c11 -I. -Ibuild/gen \
    --enable=warning,style,performance,portability \
    --suppress=invalidPointerCast --suppress=comparePointers \
    --suppress=ctuuninitvar:codec/scan.c \
    --suppress=missingIncludeSystem \
    --template='{file}:{line}: {severity}: {message} [{id}]' "$@" || status=1

# One job per file: no source of the service or the web client over 600
# lines (split it by job).
echo "sizes: lib/ core/ config/ options/ model/ codec/ api/ http/ grpc/ web/ (600 lines at most)"
big=$(find lib core config options model codec api http grpc web -type f \( -name '*.c' -o -name '*.h' -o -name '*.js' \
      -o -name '*.css' -o -name '*.html' \) -exec wc -l {} + |
      awk '$2 != "total" && $1 > 600 { print "  " $2 ": " $1 " lines" }')
if [ -n "$big" ]; then
    echo "$big"
    status=1
fi

# The layer rule: which folder may include which, and no include cycle
# within a folder (scripts/layers.sh, from the text); no call cycle within
# a folder and no function in a leaf header (scripts/calls.sh, from the
# build's objects: it builds them first).
scripts/layers.sh || status=1
scripts/calls.sh || status=1

[ "$status" -eq 0 ] && echo "lint: clean"
exit "$status"
