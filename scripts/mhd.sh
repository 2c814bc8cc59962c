#!/bin/sh
# shellcheck shell=dash
# mhd.sh -- libmicrohttpd >= 1.0 for the build: the system's when it is new
# enough (pkg-config), else one built once from Debian's source package into
# build/mhd/ and linked statically (the binary does not need it installed).
# Debian 12 has 0.9.75, whose request parser lets malformed framing through
# (docs/operations.md, Malformed requests); 1.0 rewrote it for RFC 9110/9112. The
# build applies scripts/mhd-chunk-size.patch: no 1.0.x release refuses a
# chunk size of 2^64-1, it waits for the bytes (docs/operations.md, Malformed
# requests).
#
#   scripts/mhd.sh cflags     compiler flags  } the Makefile reads these three
#   scripts/mhd.sh libs       linker flags    } (MHD_CFLAGS, MHD_LIBS, MHD_DEP);
#   scripts/mhd.sh dep        the file to make first (build/mhd/lib/
#                             libmicrohttpd.a), nothing with the system's
#   scripts/mhd.sh build      make that file, when it is missing or older than
#                             this script or the patch: download the source
#                             with apt-get (a private sources list under
#                             build/, the archive the machine's apt already
#                             uses; its configuration is left alone), patch,
#                             ./configure && make
#   scripts/mhd.sh packages   libmicrohttpd-dev when apt's candidate is >= 1.0
#                             (Debian 13), else nothing: deps.sh installs it
#
# MHD_SUITE picks the Debian suite the source comes from (trixie: 1.0.1;
# unstable: 1.0.2). The build takes about 40 s on 2 free cores (two minutes
# on a busy machine), once: build/mhd/
# survives everything but `make clean` (rm -rf build), after which the next
# build downloads and builds it again.
set -eu
cd "$(dirname "$0")/.."

MIN=1.0.0
DIR=build/mhd
LIB=$DIR/lib/libmicrohttpd.a
SUITE=${MHD_SUITE:-trixie}
PATCH=scripts/mhd-chunk-size.patch
BUILD_DEPS="gcc make pkg-config libc6-dev libgnutls28-dev patch"

system_ok() {
    pkg-config --atleast-version="$MIN" libmicrohttpd 2>/dev/null
}

# The archive URI, and its keyring when named, of the machine's own Debian
# sources: the entry for its release's main suite (not -security, -updates),
# from sources.list (one-line) or sources.list.d/*.sources (deb822). Prints
# "URI KEYRING" (KEYRING may be empty).
archive() {
    local codename f
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    {
        for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
            [ -r "$f" ] || continue
            # deb [signed-by=K arch=...] URI SUITE COMPONENTS...
            sed -n 's/^[[:space:]]*deb\(-src\)\{0,1\}[[:space:]]\{1,\}//p' "$f" | awk -v c="$codename" '{
                key = ""
                if (match($0, /^\[[^]]*\]/)) {
                    n = split(substr($0, 2, RLENGTH - 2), o, /[ \t]+/)
                    for (i = 1; i <= n; i++)
                        if (o[i] ~ /^signed-by=/)
                            key = substr(o[i], 11)
                    $0 = substr($0, RLENGTH + 1)
                }
                if ($2 == c) print $1, key
            }'
        done
        for f in /etc/apt/sources.list.d/*.sources; do
            [ -r "$f" ] || continue
            awk -v c="$codename" '
                function flush() {
                    if (uri != "" && enabled != "no" && (" " suites " ") ~ (" " c " "))
                        print uri, key
                    uri = ""; suites = ""; key = ""; enabled = ""
                }
                /^[[:space:]]*$/ { flush(); next }
                tolower($1) == "uris:" { uri = $2 }
                tolower($1) == "suites:" { $1 = ""; suites = $0 }
                tolower($1) == "signed-by:" && $2 ~ /^\// { key = $2 }
                tolower($1) == "enabled:" { enabled = tolower($2) }
                END { flush() }' "$f"
        done
    } | grep -v '^cdrom:' | head -n 1
}

# Whether build/mhd/ is there and newer than what it was made by.
built() {
    [ -f "$LIB" ] && [ ! "$PATCH" -nt "$LIB" ] && [ ! scripts/mhd.sh -nt "$LIB" ]
}

build() {
    local t0 w uri key opts orig="" ver prefix have f
    built && return 0
    mkdir -p build
    exec 9>build/.mhd.lock # one build at a time (make run and make test, say)
    flock 9
    built && return 0
    t0=$(date +%s)
    . scripts/lib.sh
    # shellcheck disable=SC2086
    apt_install $BUILD_DEPS
    # shellcheck disable=SC2046 # "URI KEYRING": two words
    set -- $(archive)
    uri=${1:-}
    key=${2:-}
    if [ -z "$uri" ]; then
        echo "mhd.sh: found no Debian archive in /etc/apt/sources.list{,.d/} to fetch" \
             "libmicrohttpd's source from; install libmicrohttpd-dev >= 1.0 instead" >&2
        exit 1
    fi
    have="no libmicrohttpd on the system"
    if pkg-config --exists libmicrohttpd 2>/dev/null; then
        have="the system's libmicrohttpd $(pkg-config --modversion libmicrohttpd) is older than $MIN"
    fi
    # one line while it runs (make run shows it; the compiler's lines go
    # to the log), one when it is done
    echo "mhd.sh: building libmicrohttpd $MIN+ into $DIR/ once, about a minute ($have;" \
         "Debian $SUITE's source from $uri; log: build/mhd.work/build.log)" >&2
    w=$(pwd)/build/mhd.work
    rm -rf "$w" "$DIR"
    mkdir -p "$w/lists/partial" "$w/cache/archives/partial" "$w/src"
    echo "deb-src ${key:+[signed-by=$key] }$uri $SUITE main" > "$w/sources.list"
    opts="-q -o Dir::Etc::SourceList=$w/sources.list -o Dir::Etc::SourceParts=/dev/null
          -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
          -o Dir::State::Lists=$w/lists -o Dir::Cache=$w/cache"
    # as root, apt hands downloads to its _apt user, which cannot write here
    [ "$(id -u)" -ne 0 ] || opts="$opts -o APT::Sandbox::User=root"
    # shellcheck disable=SC2086
    apt-get $opts update >"$w/apt.log" 2>&1 || { cat "$w/apt.log" >&2; exit 1; }
    # --download-only: the signed index's hashes are checked; unpacking with
    # dpkg-source is not needed (the upstream tarball is built as it is)
    # shellcheck disable=SC2086
    (cd "$w/src" && apt-get $opts source --download-only libmicrohttpd) >>"$w/apt.log" 2>&1 ||
        { cat "$w/apt.log" >&2; exit 1; }
    for f in "$w"/src/libmicrohttpd_*.orig.tar.*; do
        case "$f" in *.asc) ;; *) orig=$f ;; esac
    done
    ver=${orig##*/libmicrohttpd_}
    ver=${ver%%.orig.tar.*}
    if ! dpkg --compare-versions "$ver" ge "$MIN"; then
        echo "mhd.sh: Debian $SUITE has libmicrohttpd $ver, older than $MIN (MHD_SUITE=unstable?)" >&2
        exit 1
    fi
    tar -xf "$orig" -C "$w/src"
    patch -d "$w/src/libmicrohttpd-$ver" -p1 < "$PATCH" >"$w/build.log" 2>&1 ||
        { cat "$w/build.log" >&2; echo "mhd.sh: $PATCH does not apply to $ver" >&2; exit 1; }
    prefix=$(cd build && pwd -P)/mhd
    # static and position-independent (the binaries are PIE); HTTPS with
    # GnuTLS (http/tls.c), required rather than dropped when it is missing
    (cd "$w/src/libmicrohttpd-$ver" &&
        ./configure --prefix="$prefix" --enable-static --disable-shared --with-pic \
            --enable-https --disable-doc --disable-examples --disable-tools --disable-curl &&
        make -j2 && make install DESTDIR="$w/dest") >>"$w/build.log" 2>&1 ||
        { tail -n 30 "$w/build.log" >&2; echo "mhd.sh: the build failed; log: $w/build.log" >&2; exit 1; }
    # the finished tree appears in one rename: an interrupted build leaves no
    # half a library for the next make to take for done
    mv "$w/dest$prefix" "$DIR"
    printf 'libmicrohttpd %s from Debian %s (%s) with %s, built %s in %d s\n' "$ver" "$SUITE" "$uri" "$PATCH" \
        "$(date -u +%FT%TZ)" "$(($(date +%s) - t0))" > "$DIR/SOURCE"
    cp "$w/build.log" "$DIR/build.log"
    rm -rf "$w"
    echo "mhd.sh: $(cat "$DIR/SOURCE")" >&2
}

case "${1:-}" in
# ATTN_MHD_CHUNK_PATCH: the library refuses oversized chunk sizes (the server
# says which library it runs on at start-up; the hostile-framing test reads it)
cflags) if system_ok; then pkg-config --cflags libmicrohttpd
        else echo "-isystem $DIR/include -DATTN_MHD_CHUNK_PATCH=1"; fi ;;
# GnuTLS is the static library's only dependency (besides pthread)
libs) if system_ok; then pkg-config --libs libmicrohttpd; else echo "$LIB -lgnutls"; fi ;;
dep) system_ok || echo "$LIB" ;;
build) system_ok || build ;;
packages)
    cand=$(apt-cache policy libmicrohttpd-dev 2>/dev/null | awk '/Candidate:/ { print $2 }')
    if system_ok || { [ -n "$cand" ] && [ "$cand" != "(none)" ] &&
                      dpkg --compare-versions "$cand" ge "$MIN"; }; then
        echo libmicrohttpd-dev
    fi ;;
*) echo "usage: scripts/mhd.sh cflags|libs|dep|build|packages" >&2; exit 2 ;;
esac
