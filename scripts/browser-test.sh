#!/bin/sh
# browser-test.sh -- end-to-end tests of the web client (web/) in headless
# Chromium, driven by playwright-core, against a real attention-server.
# Usage: scripts/browser-test.sh   (from anywhere; works on the repo root)
#
# On a fresh Debian 12 it installs what is missing, as root or through sudo:
# Debian's chromium (Playwright's own browser download is not used) and a
# font for the labels when /usr/bin/chromium is absent, nodejs and npm when
# npm is absent; `npm ci` only when node_modules is missing or older than
# package-lock.json (playwright-core is pinned there). Then it builds the
# server if needed and runs tests/browser/web.test.mjs, which starts the
# server itself on a free port. Screenshots go to build/browser/.
# CHROMIUM=/path/to/chromium overrides the browser.
set -eu
cd "$(dirname "$0")/.."

if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

pkgs=""
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || pkgs="$pkgs chromium fonts-dejavu-core"
command -v npm >/dev/null 2>&1 || pkgs="$pkgs nodejs npm"
if [ -n "$pkgs" ]; then
    echo "browser-test.sh: installing$pkgs" >&2
    $sudo apt-get update -qq
    # shellcheck disable=SC2086
    $sudo apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
fi

# npm ci writes node_modules/.package-lock.json last, so it marks a complete
# install of the lockfile it was made from.
stamp=node_modules/.package-lock.json
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ] || [ ! -d node_modules/playwright-core ]; then
    npm ci --no-audit --no-fund
fi

scripts/deps.sh build
make --no-print-directory build/attention-server

exec node tests/browser/web.test.mjs
