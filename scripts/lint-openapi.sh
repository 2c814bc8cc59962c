#!/bin/sh
# lint-openapi.sh -- lint openapi.yaml with Redocly CLI (a real OpenAPI 3.1
# validator), pinned in package.json / package-lock.json.
# Usage: scripts/lint-openapi.sh   (from anywhere; works on the repo root)
# Installs Debian's nodejs and npm (as root, or through sudo) when npm is
# missing, and runs `npm ci` only when node_modules is missing or older than
# package-lock.json. The rules are in redocly.yaml; any finding fails.
set -eu
cd "$(dirname "$0")/.."

if ! command -v npm >/dev/null 2>&1; then
    echo "lint-openapi.sh: installing nodejs npm" >&2
    if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

# npm ci writes node_modules/.package-lock.json last, so it marks a complete
# install of the lockfile it was made from.
stamp=node_modules/.package-lock.json
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
    npm ci --no-audit --no-fund
fi

exec npx --no-install redocly lint openapi.yaml
