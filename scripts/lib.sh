# shellcheck shell=dash
# lib.sh -- what the scripts share for installing their tools; sourced, not run:
#   . scripts/lib.sh   (sh: dash or bash; the caller is at the repository root)
#
#   apt_install PKG...   installs those of the Debian packages PKG that are not
#                        installed yet (dpkg-query), as root or through sudo;
#                        nothing at all when every one is there.
#   npm_ci [MODULE...]   nodejs and npm from Debian when npm is missing, then
#                        `npm ci` when node_modules is missing, older than
#                        package-lock.json, or lacks one of MODULE.
#
# Both are quiet when there is nothing to do, and say on stderr what they
# install when there is.

apt_install() {
    local missing="" p sudo
    for p in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
            missing="$missing $p"
        fi
    done
    [ -n "$missing" ] || return 0
    echo "${0##*/}: installing:$missing" >&2
    if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -qq
    # shellcheck disable=SC2086
    $sudo env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

npm_ci() {
    local stamp=node_modules/.package-lock.json stale="" m
    command -v npm >/dev/null 2>&1 || apt_install nodejs npm
    # npm ci writes node_modules/.package-lock.json last, so it marks a
    # complete install of the lockfile it was made from.
    [ -f "$stamp" ] && [ ! package-lock.json -nt "$stamp" ] || stale=1
    for m in "$@"; do
        [ -d "node_modules/$m" ] || stale=1
    done
    [ -z "$stale" ] || npm ci --no-audit --no-fund
}
