#!/bin/sh
# deps.sh -- install the Debian packages a target needs, only if missing.
# Usage: scripts/deps.sh build|run|test|scale|bench|fuzz|lint
# Runs apt-get (as root, or through sudo) only when something is absent, so
# `make run`, `make test` and the rest work on a brand-new Debian 12 machine.
set -eu
cd "$(dirname "$0")/.."
. scripts/lib.sh

# libmicrohttpd >= 1.0: Debian's package where it is new enough, else none
# (the Makefile has scripts/mhd.sh build it, once, from these packages;
# http/tls.c uses GnuTLS itself)
# gRPC's C core and protobuf-c (protoc-c): the gRPC transport (grpc/) and
# its messages (proto/grpc_service.proto)
build="gcc make pkg-config libc6-dev libgnutls28-dev $(scripts/mhd.sh packages) libjansson-dev zlib1g-dev libopenblas-dev libgrpc-dev libprotobuf-c-dev protobuf-c-compiler"
# nginx, wrk, curl: scale-test.sh (curl: soak.sh too). Debian 12's nginx
# package holds the binary (nginx-light only adds a module to it).
scale="nginx wrk curl"
case "${1:-build}" in
build) pkgs="$build" ;;
# make run: curl and python3 for the documented examples (the example
# client uses Python's standard library only)
run)   pkgs="$build curl python3" ;;
# openssl: the HTTPS test makes a self-signed certificate with it;
# python3: tests/check_docs.py and the examples it runs; python3-torch and
# python3-numpy: the offload example's decoder (tests/check_offload.py)
test)  pkgs="$build libcurl4-openssl-dev libcriterion-dev openssl $scale python3 python3-torch python3-numpy" ;;
scale) pkgs="$build $scale" ;;
# nginx: bench/round_trip.py's fixed answer
bench) pkgs="$build libcurl4-openssl-dev python3-torch python3-numpy gnuplot-nox wrk curl bc nginx" ;;
# libFuzzer's runtime is only a Recommends of clang in Debian 12
fuzz)  pkgs="$build clang libclang-rt-14-dev" ;;
lint)  pkgs="$build clang-tidy cppcheck" ;;
*) echo "deps.sh: unknown target '$1' (build, run, test, scale, bench, fuzz or lint)" >&2; exit 2 ;;
esac

# shellcheck disable=SC2086
case " $(pkgs_missing $pkgs) " in
*" nginx "*) no_service_start apt_install $pkgs ;; # see lib.sh
*) apt_install $pkgs ;;
esac
