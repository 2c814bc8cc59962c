#!/bin/sh
# layers.sh -- the layer rule (part of `make lint` and `make test`): which
# folder's C files may include which folder's headers. The request path
# reads in one direction, HTTP (or gRPC) -> api -> codec -> core -> codec ->
# HTTP (or gRPC), and no layer reaches around the one below it:
#
#   folder   what it owns                                may include
#   lib/     leaf utilities: base64, JSON numbers,       lib
#            UTF-8, the pool, "did you mean", errors
#   core/    the attention math                          core
#   config/  the settings table and its sources          config lib
#   options/ the request options table: one row per      options core lib
#            option of a request, which model/,
#            codec/ and api/ read
#   model/   safetensors, model configs, the registry    model options core lib
#   codec/   the two protocols' bodies                   codec model options core lib
#            (never the registry: model/repo.h)
#   api/     routes and handlers; the only caller of     api codec model options core config lib
#            the registry                                and http/route.h, grpc/grpc_route.h,
#                                                        the transports' interfaces
#   http/    the transport on libmicrohttpd: knows no    http lib config
#            protocol, model or core
#   grpc/    the transport on gRPC's C core: knows no    grpc lib config
#            protocol message, model or core (its
#            <grpc/...> includes are gRPC's own headers)
#   main.c   the composition root                        anything
#
# Within a folder the includes go one way too: a module is a file's stem
# (x.c and x.h), and module A depends on module B when A.c includes
# "folder/B.h" (or "B.h"). A cycle of that graph (A -> B -> ... -> A) is
# refused. What two modules share goes in a header of its own with no .c
# (a leaf: types, macros, constants, static inline functions), which is
# why a header's own includes are no edge: they name the types its
# declarations need. scripts/lint.sh checks with the build's objects that a
# leaf declares no function of the folder's .c files, and that no two of a
# folder's files call each other round a cycle.
#
# Usage: scripts/layers.sh [ROOT]   (default: the repository)
# Prints every include that breaks the rule, as FILE:LINE: the include and
# the rule, and every include cycle, as FILE:LINE: the include that closes
# it and the cycle file by file; exits 1 if there is one.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "${1:-$here/..}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

allowed() { # folder -> the folders its files may include
    case "$1" in
    lib) echo "lib" ;;
    core) echo "core" ;;
    config) echo "config lib" ;;
    options) echo "options core lib" ;;
    model) echo "model options core lib" ;;
    codec) echo "codec model options core lib" ;;
    api) echo "api codec model options core config lib" ;;
    http) echo "http lib config" ;;
    grpc) echo "grpc lib config" ;;
    esac
}

# The exceptions, one header each: the registry belongs to model/ and is
# called from api/ only; api/ reaches each transport only through its
# interface.
exception() { # folder header -> 0 if allowed although its folder is not
    [ "$1" = api ] && { [ "$2" = http/route.h ] || [ "$2" = grpc/grpc_route.h ]; }
}
forbidden() { # folder header -> 0 if refused although its folder is allowed
    [ "$2" = model/repo.h ] && [ "$1" != model ] && [ "$1" != api ]
}

status=0
n=0
for layer in lib core config options model codec api http grpc; do
    [ -d "$layer" ] || continue
    ok=$(allowed "$layer")
    for f in "$layer"/*.c "$layer"/*.h; do
        [ -f "$f" ] || continue
        n=$((n + 1))
        # "folder/file.h", and <folder/file.h> of a folder of ours (a
        # spelling the build's -iquote does not find, refused all the same);
        # other <system> headers are not ours, nor gRPC's <grpc/...>
        grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]' "$f" |
            sed -E 's/^([0-9]+):[^"<]*(["<])([^">]+)[">].*/\1 \2 \3/' >"$tmp/includes" || true
        while read -r line kind inc; do
            [ "$kind" = "<" ] && [ "${inc%%/*}" = grpc ] && continue
            dir=${inc%%/*}
            case "$inc" in
            */*) ;;
            *.h) [ -f "$layer/$inc" ] && dir=$layer inc=$layer/$inc ;; # "x.h" beside f
            esac
            [ "$dir" != "$inc" ] || continue # <stdio.h>
            case "$dir" in lib | core | config | options | model | codec | api | http | grpc) ;; *) continue ;; esac
            if forbidden "$layer" "$inc"; then
                echo "$f:$line: includes $inc: only model/ and api/ may use the registry"
                status=1
            elif exception "$layer" "$inc"; then
                :
            elif ! printf '%s\n' $ok | grep -qx "$dir"; then
                echo "$f:$line: includes $inc: $layer/ may include only $ok"
                status=1
            fi
            if [ "$dir" = "$layer" ] && [ "${f%.c}" != "$f" ]; then # an edge between modules
                stem=${f##*/}
                to=${inc##*/}
                printf '%s\t%s\t%s\t%s\n' "$layer/${stem%.*}" "$layer/${to%.h}" \
                    "$f:$line: includes $inc" "$f -> $inc" >>"$tmp/edges"
            fi
        done <"$tmp/includes"
    done
done

cycles=0
if [ -f "$tmp/edges" ] && ! awk -v what="an include cycle" -v collapse=1 \
    -f "$here/cycles.awk" "$tmp/edges"; then
    cycles=1
    status=1
fi

if [ "$status" -eq 0 ]; then
    echo "layers: $n files keep the layer rule, and no folder's includes make a cycle (scripts/layers.sh)"
elif [ "$cycles" -eq 0 ]; then
    echo "layers: the includes above break the layer rule (scripts/layers.sh says who may include whom)"
else
    echo "layers: the includes above break the layer rule or make a cycle (scripts/layers.sh says who may include whom)"
fi
exit "$status"
