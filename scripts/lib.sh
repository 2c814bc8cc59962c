# shellcheck shell=dash
# lib.sh -- what the scripts share for installing their tools; sourced, not run:
#   . scripts/lib.sh   (sh: dash or bash; the caller is at the repository root)
#
#   pkgs_missing PKG...  prints those of the Debian packages PKG that are not
#                        installed (" a b"), nothing when all are.
#   apt_install PKG...   installs those of the Debian packages PKG that are not
#                        installed yet (dpkg-query), as root or through sudo;
#                        nothing at all when every one is there.
#   npm_ci [MODULE...]   nodejs and npm from Debian when npm is missing, then
#                        `npm ci` when node_modules is missing, older than
#                        package-lock.json, or lacks one of MODULE.
#
#   no_service_start CMD...   runs CMD (an apt_install) while Debian's
#                        policy-rc.d tells package scripts that no service may
#                        start, unless the machine has a policy-rc.d already.
#
# apt_install and npm_ci are quiet when there is nothing to do, and say on
# stderr what they install when there is.

pkgs_missing() {
    local p
    for p in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
            printf ' %s' "$p"
        fi
    done
}

apt_install() {
    local missing sudo
    missing=$(pkgs_missing "$@")
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

# nginx's postinst starts the system's nginx on port 80 when nothing listens
# there, and fails the install when that start fails (without IPv6, say, for
# the default site's [::]:80). The tests run nginx of their own and need no
# service: /usr/sbin/policy-rc.d exiting 101 is Debian's way of saying so
# (invoke-rc.d and deb-systemd-invoke both ask it). It is removed afterwards.
no_service_start() {
    local rc=0 sudo policy=/usr/sbin/policy-rc.d
    if [ -e "$policy" ]; then
        "$@"
        return
    fi
    if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo sh -c "printf '#!/bin/sh\\nexit 101\\n' > $policy && chmod 755 $policy"
    "$@" || rc=$?
    $sudo rm -f "$policy"
    return "$rc"
}
