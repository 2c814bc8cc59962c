#!/bin/sh
# lint-openapi.sh -- lint openapi.yaml with Redocly CLI (a real OpenAPI 3.1
# validator), pinned in package.json / package-lock.json.
# Usage: scripts/lint-openapi.sh   (from anywhere; works on the repo root)
# Installs nodejs, npm and the npm packages when missing (scripts/lib.sh).
# The rules are in redocly.yaml; any finding fails.
set -eu
cd "$(dirname "$0")/.."
. scripts/lib.sh

npm_ci @redocly/cli
exec npx --no-install redocly lint openapi.yaml
