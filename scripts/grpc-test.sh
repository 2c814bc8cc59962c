#!/bin/sh
# grpc-test.sh -- the gRPC side of attention-server tested with a client
# nobody here wrote: Node's @grpc/grpc-js and @grpc/proto-loader, which
# read proto/grpc_service.proto at run time (tests/grpc/*.test.mjs under
# node:test). Every RPC against the HTTP answers of the same server, every
# golden case over ModelInfer against HTTP v2 bit for bit, sequences over
# ModelStreamInfer, each status code, the hostile HTTP/2 cases, metrics,
# the access log and TLS. Each file starts its own servers on free loopback
# ports; their logs go to build/grpc/.
# Usage: scripts/grpc-test.sh [FILE.test.mjs...]   (default: all of tests/grpc/)
#
# On a fresh Debian 12 it installs what is missing (scripts/lib.sh): the
# npm packages pinned in package-lock.json, and openssl (the TLS test's
# certificate).
#
# ATTN_SERVER=path tests that server binary (`make grpc-test` passes the
# one it built, build/san/attention-server under SANITIZE=...); without it
# this script builds and tests build/attention-server. Each test has 180 s,
# the whole run 600 s.
set -eu
cd "$(dirname "$0")/.."
. scripts/lib.sh

command -v openssl >/dev/null 2>&1 || apt_install openssl
npm_ci @grpc/grpc-js @grpc/proto-loader

if [ -z "${ATTN_SERVER:-}" ]; then
    scripts/deps.sh build
    make --no-print-directory build/attention-server
    ATTN_SERVER=build/attention-server
    export ATTN_SERVER
fi

mkdir -p build/grpc
rm -f build/grpc/*.log
if [ $# -eq 0 ]; then
    set -- tests/grpc/*.test.mjs
fi
status=0
timeout -k 10 600 node --test --test-concurrency=1 --test-timeout=180000 "$@" || status=1
# What a sanitizer finds only at exit (LeakSanitizer) fails no call: it is
# in the server's log.
if grep -n 'Sanitizer\|runtime error:' build/grpc/*.log >&2; then
    echo "grpc-test.sh: the server's sanitizers reported the lines above" >&2
    exit 1
fi
exit $status
