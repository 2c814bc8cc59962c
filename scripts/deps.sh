#!/bin/sh
# deps.sh -- install the Debian packages a target needs, only if missing.
# Usage: scripts/deps.sh build|test|bench
# Runs apt-get (as root, or through sudo) only when something is absent, so
# `make run` and `make test` work on a brand-new Debian 12 machine.
set -eu

build="gcc make pkg-config libc6-dev libmicrohttpd-dev libjansson-dev libopenblas-dev"
case "${1:-build}" in
build) pkgs="$build" ;;
test)  pkgs="$build libcurl4-openssl-dev libcriterion-dev" ;;
bench) pkgs="$build libcurl4-openssl-dev python3-torch python3-numpy gnuplot-nox wrk curl bc" ;;
*) echo "deps.sh: unknown target '$1' (build, test or bench)" >&2; exit 2 ;;
esac

missing=""
for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

echo "deps.sh: installing:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
