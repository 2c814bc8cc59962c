#!/usr/bin/env bash
# container-test.sh -- `make container-test`: build the image (Dockerfile) and
# the image with the test model repository baked in
# (deploy/image/Dockerfile.models), run the models image, exercise it, stop it
# with SIGTERM, and show that it wrote nothing outside /tmp, so that a
# read-only root filesystem (Kubernetes readOnlyRootFilesystem, docker run
# --read-only --tmpfs /tmp) holds. Prints the image sizes and the timings.
#
# Usage: scripts/container-test.sh [--keep]   (from anywhere)
#   --keep                keep the two images (tags below) instead of removing them
#   CONTAINER_TEST_PORT   the port the server listens on (default 18080)
#
# Not part of `make test`: it needs root, podman and buildah, a local
# debian:bookworm-slim image, and takes a few minutes. Made for a machine
# without a Docker engine or registry access, as ../shared/tools/container-check
# is (whose way it follows: podman build with chroot isolation, the image's own
# ENTRYPOINT, user and working directory started with `buildah run` on the host
# network). When the base image is missing it runs that tool once, which makes
# it with debootstrap.
#
# The server is run twice from the models image, and each run is exercised:
# GET /v2/health/ready, GET /v2/models, POST /v2/models/<m>/infer, POST
# /attention (examples/request.json), GET /metrics, then SIGTERM, exit 0.
#  1. `buildah run` in a working container; afterwards `podman diff` of the
#     container and the files of its overlay upper layer must show nothing
#     outside /tmp (every write to the container's filesystem lands there).
#  2. On that container's root filesystem bind-mounted read-only, with a tmpfs
#     on /tmp (as --read-only --tmpfs /tmp), chrooted and as the image's user:
#     a write outside /tmp would fail (EROFS), and `podman diff` stays empty.
# Both checks are first shown to catch a write (a control run that writes
# /var/tmp, writable by any user in the image), so an empty diff means
# something.
set -euo pipefail
cd "$(dirname "$0")/.."

keep=0
case "${1:-}" in
--keep) keep=1 ;;
"") ;;
*) echo "container-test: unknown argument $1 (--keep)" >&2; exit 2 ;;
esac
port=${CONTAINER_TEST_PORT:-18080}
base_tag=localhost/attention-service:container-test
models_tag=localhost/attention-service-models:container-test
logs=$(mktemp -d -t container-test.XXXXXX)
say() { echo "container-test: $*"; }
fail() { echo "container-test: FAIL: $*" >&2; echo "container-test: logs in $logs" >&2; exit 1; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

[ "$(id -u)" -eq 0 ] || fail "needs root (podman and buildah with chroot isolation, mount)"
. scripts/lib.sh
apt_install podman buildah curl iproute2 # only those missing (ss is iproute2's)
if curl -s -o /dev/null "http://127.0.0.1:$port/"; then
    fail "something already listens on port $port (set CONTAINER_TEST_PORT)"
fi

# ---- build ------------------------------------------------------------------
if ! podman image exists debian:bookworm-slim; then
    tool=../shared/tools/container-check
    [ -x "$tool" ] || fail "no local debian:bookworm-slim image, and no $tool to make it"
    say "no debian:bookworm-slim yet: $tool makes it (debootstrap, several minutes)"
    "$tool" --port "$port" --env "ATTN_PORT=$port"
fi
# --layers=false: no cached intermediate images (each build starts afresh and
# leaves only the tagged image, removed at the end).
build() { # LOG ARGS...: podman build as container-check builds
    local log=$1; shift
    podman build --isolation=chroot --network=host --pull=never --layers=false "$@" >"$logs/$log" 2>&1 \
        || { tail -n 30 "$logs/$log"; fail "podman build $* (log $logs/$log)"; }
}
mib() { podman image inspect "$1" --format '{{.Size}}' | awk '{ printf "%.1f MiB", $1 / 1048576 }'; }
t0=$(now)
build build-base.log -t "$base_tag" .
t1=$(now)
build build-models.log -f deploy/image/Dockerfile.models --build-arg "BASE=$base_tag" -t "$models_tag" .
t2=$(now)
say "built $base_tag in $(secs "$t0" "$t1") s: $(mib "$base_tag")"
say "built $models_tag in $(secs "$t1" "$t2") s: $(mib "$models_tag")"

ctrs=()
srv_pid="" run_pid="" ro=""
cleanup() {
    # The server, then what started it (buildah run kills its process when
    # killed, unshare --kill-child too).
    if [ -n "$srv_pid" ]; then kill -KILL "$srv_pid" 2>/dev/null || true; fi
    if [ -n "$run_pid" ]; then
        kill -TERM "$run_pid" 2>/dev/null || true
        wait "$run_pid" 2>/dev/null || true
    fi
    if [ -n "$ro" ]; then rmdir "$ro" 2>/dev/null || true; fi
    for c in "${ctrs[@]}"; do
        buildah umount "$c" >/dev/null 2>&1 || true
        buildah rm "$c" >/dev/null 2>&1 || true
    done
    if [ "$keep" = 0 ]; then
        podman rmi "$models_tag" "$base_tag" >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT
new_ctr() { # IMAGE: a working container of IMAGE in $ctr, removed on exit
    ctr=$(buildah from --pull=never "$1")
    ctrs+=("$ctr")
}

# ---- the images' configuration ----------------------------------------------
inspect() { podman image inspect "$models_tag" --format "$1"; }
mapfile -t cmd < <(inspect '{{range .Config.Entrypoint}}{{println .}}{{end}}{{range .Config.Cmd}}{{println .}}{{end}}' | sed '/^$/d')
mapfile -t envs < <(inspect '{{range .Config.Env}}{{println .}}{{end}}' | sed '/^$/d')
user=$(inspect '{{.Config.User}}')
workdir=$(inspect '{{.Config.WorkingDir}}')
say "image: entrypoint ${cmd[*]}, user $user, workdir $workdir, env ${envs[*]}"
[ "${cmd[*]}" = /app/attention-server ] || fail "entrypoint is not /app/attention-server"
[ "$user" = attention:attention ] || fail "user is '$user', not attention:attention"
printf '%s\n' "${envs[@]}" | grep -qx 'ATTN_MODEL_REPOSITORY=/models' || fail "no ENV ATTN_MODEL_REPOSITORY=/models"

# The plain image's /models: the trained models of models/, root's, mode 0755.
new_ctr "$base_tag"; c=$ctr
root=$(buildah mount "$c")
[ "$(stat -c '%U:%G %a' "$root/models")" = "root:root 755" ] || fail "/models in $base_tag is not root:root 0755"
trained="digits-reverse induction-l0 induction-l1"
[ "$(ls -A "$root/models" | xargs)" = "$trained" ] || fail "/models in $base_tag is not just $trained: $(ls -A "$root/models" | xargs)"
for m in $trained; do
    diff -r "models/$m" "$root/models/$m" >/dev/null || fail "/models/$m differs from models/$m"
done
bad=$(find "$root/models" \( ! -user root -o ! -group root -o -perm /022 \) -printf '%u:%g %m %P\n')
[ -z "$bad" ] || fail "files in /models of $base_tag writable by others than root: $bad"
uid=$(awk -F: '$1 == "attention" { print $3 ":" $4 }' "$root/etc/passwd")
[ "$uid" = 10001:10001 ] || fail "user attention is '$uid', not 10001:10001"
say "$base_tag: /models holds $trained, root's; attention is $uid"

# The models image's /models: the repository, everything root's, 0644 / 0755.
models_src=tests/models/repo
new_ctr "$models_tag"; c=$ctr
root=$(buildah mount "$c")
bad=$(find "$root/models" \( ! -user root -o ! -group root \
         -o \( -type f ! -perm 0644 \) -o \( -type d ! -perm 0755 \) \) -printf '%u:%g %m %P\n')
[ -z "$bad" ] || fail "files in /models not root's with 0644/0755: $bad"
diff -r "$models_src" "$root/models" >/dev/null || fail "/models differs from $models_src"
say "$models_tag: /models is $models_src ($(find "$root/models" -type f | wc -l) files), root:root, 0644/0755"

# ---- the write checks -------------------------------------------------------
upper_of() { # the overlay upper directory of a mounted working container
    local m; m=$(buildah mount "$1")
    findmnt -n -o OPTIONS --target "$m" | tr , '\n' | sed -n 's/^upperdir=//p'
}
writes() { # CONTAINER: what it changed outside /tmp, by podman diff and by its upper layer
    local c=$1 up
    podman diff "$c" | grep -Ev '^[ACD] /tmp(/|$)' || true
    up=$(upper_of "$c")
    if [ -z "$up" ] || [ ! -d "$up" ]; then echo "no upper directory for $c"; return; fi
    # Folders are copied up when something under them is; only what is not a
    # folder (a file, a link, a whiteout) is a change.
    (cd "$up" && find . ! -type d ! -path './tmp/*' -printf 'upper: %y %P\n')
}
check_no_writes() { # CONTAINER WHAT
    local w d
    w=$(writes "$1")
    [ -z "$w" ] || { echo "$w" >&2; fail "$2 wrote outside /tmp"; }
    d=$(podman diff "$1" | tr '\n' ' ')
    say "$2: no change outside /tmp (podman diff, /tmp included: ${d:-nothing})"
}

# ---- exercising a running server ---------------------------------------------
url="http://127.0.0.1:$port"
get() { curl -sS -o "$logs/body" -w '%{http_code} %{time_total}' "$url$1"; }
post() { curl -sS -o "$logs/body" -w '%{http_code} %{time_total}' -H 'Content-Type: application/json' --data-binary "$2" "$url$1"; }
expect() { # WHAT CODE "CODE TIME"
    # shellcheck disable=SC2086 # "CODE TIME" into two words
    set -- "$1" "$2" $3
    [ "$3" = "$2" ] || { head -c 400 "$logs/body" >&2; echo >&2; fail "$1 answered $3, not $2"; }
    say "  $1 -> $3 in $(awk -v t="$4" 'BEGIN { printf "%.1f", t * 1000 }') ms"
}
infer='{"id":"ct-1","inputs":[{"name":"query","shape":[2,3,16],"datatype":"FP32","data":['
infer+=$(seq -s, 1 96 | awk -F, '{ for (i = 1; i <= NF; i++) printf "%s%.3f", (i > 1 ? "," : ""), ($i % 7) / 7 - 0.4 }')
infer+=']}]}'
serve_model=mha_f32
[ -f "$models_src/$serve_model/model.safetensors" ] || fail "no $models_src/$serve_model"

wait_ready() { # PID: until GET /v2/health/ready answers 200 (every model load finished)
    for _ in $(seq 1 300); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/v2/health/ready")" = 200 ] && return 0
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}
exercise() { # LOG
    local log=$1 m n_ready=0 n_not=0
    expect "GET /v2/health/ready" 200 "$(get /v2/health/ready)"
    expect "GET /v2/models" 200 "$(get /v2/models)"
    for m in "$models_src"/*/; do
        m=$(basename "$m")
        grep -q "\"$m\"" "$logs/body" || fail "GET /v2/models does not list $m: $(cat "$logs/body")"
    done
    for m in "$models_src"/*/; do
        m=$(basename "$m")
        if [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/v2/models/$m/ready")" = 200 ]; then
            n_ready=$((n_ready + 1))
        else
            n_not=$((n_not + 1))
            [ -f "$models_src/$m/model.safetensors" ] && fail "model $m, with its model.safetensors, is not ready"
        fi
    done
    say "  GET /v2/models lists the $((n_ready + n_not)) folders: $n_ready ready, $n_not not" \
        "(their config.json names a checkpoint outside the repository)"
    expect "POST /v2/models/$serve_model/infer" 200 "$(post "/v2/models/$serve_model/infer" "$infer")"
    if ! grep -q '"model_name":"'"$serve_model"'"' "$logs/body" || ! grep -q '"shape":\[2,3,16\]' "$logs/body"; then
        fail "infer answer: $(head -c 300 "$logs/body")"
    fi
    expect "POST /attention examples/request.json" 200 "$(post /attention @examples/request.json)"
    grep -q '"output"' "$logs/body" || fail "POST /attention answer: $(head -c 300 "$logs/body")"
    expect "GET /metrics" 200 "$(get /metrics)"
    grep -q '^attention_' "$logs/body" || fail "GET /metrics has no attention_ metric"
    grep -q ' 200 ' "$logs/$log" || fail "no access log line in $logs/$log"
}
stop() { # SERVER_PID WAIT_PID LOG: SIGTERM, then the exit status must be 0
    local t rc=0
    t=$(now)
    kill -TERM "$1"
    wait "$2" || rc=$?
    srv_pid="" run_pid=""
    grep -q 'stopped' "$logs/$3" || { tail -n 5 "$logs/$3" >&2; fail "no 'stopped' line after SIGTERM"; }
    [ "$rc" = 0 ] || { tail -n 5 "$logs/$3" >&2; fail "exit status $rc after SIGTERM"; }
    say "  SIGTERM: stopped in $(secs "$t" "$(now)") s, exit 0 ($(tail -n 1 "$logs/$3"))"
}
server_pid() { # ROOT_PID: the process below it that listens on the port
    local p q
    for _ in $(seq 1 200); do
        for p in $(ss -Hltnp "sport = :$port" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
            # a descendant of ROOT_PID (no pid namespace: the host's pids)
            q=$p
            while [ "$q" -gt 1 ] && [ "$q" != "$1" ]; do q=$(ps -o ppid= -p "$q" | tr -d ' '); q=${q:-0}; done
            [ "$q" = "$1" ] && { echo "$p"; return; }
        done
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.05
    done
}

# ---- run 1: buildah run, then the container's changes ------------------------
envargs=(--env "ATTN_PORT=$port")
new_ctr "$models_tag"; c1=$ctr
say "run 1: buildah run (chroot isolation, host network) in $c1"
# The control: the same kind of run, writing /var/tmp as the image's user.
new_ctr "$models_tag"; cc=$ctr
buildah run --isolation chroot --network host --user "$user" "$cc" -- \
    /bin/sh -c 'echo x >/var/tmp/control && echo y >/tmp/control'
[ -n "$(writes "$cc")" ] || fail "the write check missed the control's /var/tmp/control"
say "  control: the check catches a write: $(writes "$cc" | tr '\n' ' ')"
t=$(now)
buildah run --isolation chroot --network host --user "$user" --workingdir "$workdir" "${envargs[@]}" \
    "$c1" -- "${cmd[@]}" >"$logs/run1.log" 2>&1 &
run_pid=$!
srv_pid=$(server_pid "$run_pid")
[ -n "$srv_pid" ] || { cat "$logs/run1.log"; fail "run 1: no server process"; }
wait_ready "$srv_pid" || { cat "$logs/run1.log"; fail "run 1: not ready"; }
say "  ready $(secs "$t" "$(now)") s after the start"
exercise run1.log
stop "$srv_pid" "$run_pid" run1.log
check_no_writes "$c1" "run 1"

# ---- run 2: read-only root filesystem, tmpfs on /tmp ---------------------------
new_ctr "$models_tag"; c2=$ctr
root2=$(buildah mount "$c2")
ro=$(mktemp -d -t container-test-root.XXXXXX)
uid=$(awk -F: -v u="${user%%:*}" '$1 == u { print $3 }' "$root2/etc/passwd")
gid=$(awk -F: -v g="${user##*:}" '$1 == g { print $3 }' "$root2/etc/group")
say "run 2: read-only root (a read-only bind of $c2's root, tmpfs /tmp), uid $uid gid $gid"
# In a private mount namespace: the root read-only, then tmpfs on /tmp, proc,
# and a /dev of the four character devices a process may open. The bash that
# writes its pid becomes, by exec, the server (through env and unshare, which
# chroots, changes directory, sets the ids and drops root's capabilities).
run_ro() { # PIDFILE COMMAND...
    local pidfile=$1; shift
    # shellcheck disable=SC2016 # expanded by the inner bash
    unshare --mount --propagation private --fork --kill-child -- bash -c '
        set -e
        src=$1 ro=$2 pidfile=$3 uid=$4 gid=$5 wd=$6 nenv=$7; shift 7
        env=("${@:1:nenv}"); shift "$nenv"
        mount --bind "$src" "$ro"
        mount -o remount,bind,ro "$ro"
        mount -t tmpfs -o mode=1777,size=64m tmpfs "$ro/tmp"
        mount -t proc -o ro proc "$ro/proc"
        mount -t tmpfs -o mode=0755,size=64k tmpfs "$ro/dev"
        for d in null zero random urandom; do touch "$ro/dev/$d"; mount --bind "/dev/$d" "$ro/dev/$d"; done
        echo $$ >"$pidfile"
        exec /usr/bin/env -i "${env[@]}" /usr/bin/unshare --root="$ro" --wd="$wd" \
            --setgid="$gid" --setuid="$uid" -- "$@"
    ' bash "$root2" "$ro" "$pidfile" "$uid" "$gid" "$workdir" \
        $((${#envs[@]} + 1)) "${envs[@]}" "ATTN_PORT=$port" "$@"
}
# The control: a write outside /tmp fails, one to /tmp does not.
if run_ro "$logs/ctl.pid" /bin/sh -c 'id && echo y >/tmp/control && echo x >/var/tmp/control' \
        >"$logs/control2.log" 2>&1; then
    fail "the read-only root let the control write /var/tmp/control"
fi
grep -q 'Read-only file system' "$logs/control2.log" || { cat "$logs/control2.log"; fail "the control failed otherwise"; }
say "  control: $(head -n 1 "$logs/control2.log"): $(grep -m1 'Read-only' "$logs/control2.log")"
t=$(now)
run_ro "$logs/run2.pid" "${cmd[@]}" >"$logs/run2.log" 2>&1 &
run_pid=$!
for _ in $(seq 1 100); do [ -s "$logs/run2.pid" ] && break; sleep 0.05; done
srv_pid=$(cat "$logs/run2.pid" 2>/dev/null || true)
[ -n "$srv_pid" ] || { cat "$logs/run2.log"; fail "run 2: no server process"; }
wait_ready "$srv_pid" || { cat "$logs/run2.log"; fail "run 2: not ready"; }
say "  ready $(secs "$t" "$(now)") s after the start"
exercise run2.log
stop "$srv_pid" "$run_pid" run2.log
# A write that failed there, if the server logged it, is one it would do.
if grep -i 'read-only file system' "$logs/run2.log" >&2; then
    fail "run 2: a write failed on the read-only root"
fi
check_no_writes "$c2" "run 2"

rm -rf "$logs"
say "OK: $base_tag $(mib "$base_tag"), $models_tag $(mib "$models_tag");" \
    "builds $(secs "$t0" "$t1") s and $(secs "$t1" "$t2") s; total $(secs "$t0" "$(now)") s"
