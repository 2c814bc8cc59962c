#!/bin/sh
# browser-test.sh -- end-to-end tests of the web client (web/) in headless
# Chromium, driven by playwright-core, against a real attention-server.
# Usage: scripts/browser-test.sh   (from anywhere; works on the repo root)
#        scripts/browser-test.sh screenshot   (`make screenshot`: only
#        tests/browser/screenshot.mjs, which writes docs/screenshot.png
#        and docs/induction.png)
#
# On a fresh Debian 12 it installs what is missing (scripts/lib.sh): Debian's
# chromium (Playwright's own browser download is not used) and a font for the
# labels when /usr/bin/chromium is absent, and the npm packages pinned in
# package-lock.json (playwright-core). Then it runs tests/browser/web.test.mjs,
# variants.test.mjs, views.test.mjs, models.test.mjs, reduced.test.mjs and
# induction.test.mjs, layout.test.mjs and firstclick.test.mjs, each
# of which starts the server itself on a free port. Screenshots and the
# server's logs go to build/browser/; a
# sanitizer report in a log fails the test.
#
# ATTN_SERVER=path tests that server binary (`make browser-test` passes the
# one it built, build/san/attention-server under SANITIZE=...); without it
# this script builds and tests build/attention-server.
# CHROMIUM=/path/to/chromium overrides the browser.
set -eu
cd "$(dirname "$0")/.."
. scripts/lib.sh

[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || apt_install chromium fonts-dejavu-core
npm_ci playwright-core

if [ -z "${ATTN_SERVER:-}" ]; then
    scripts/deps.sh build
    make --no-print-directory build/attention-server
    ATTN_SERVER=build/attention-server
    export ATTN_SERVER
fi

if [ "${1:-}" = screenshot ]; then
    exec node tests/browser/screenshot.mjs
fi

status=0
node tests/browser/web.test.mjs || status=1
node tests/browser/variants.test.mjs || status=1
node tests/browser/views.test.mjs || status=1
node tests/browser/models.test.mjs || status=1
node tests/browser/reduced.test.mjs || status=1
node tests/browser/induction.test.mjs || status=1
node tests/browser/layout.test.mjs || status=1
node tests/browser/firstclick.test.mjs || status=1
# What a sanitizer finds only at exit (LeakSanitizer) does not fail a request:
# it is in the server's log.
if grep -n 'Sanitizer\|runtime error:' build/browser/server*.log >&2; then
    echo "browser-test.sh: the server's sanitizers reported the lines above" >&2
    exit 1
fi
exit $status
