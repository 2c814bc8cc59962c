#!/bin/bash
# scale-test.sh -- `make scale-test`: three replicas of the server behind
# Debian's nginx, all on loopback, under a steady wrk load; a rolling
# restart (each replica in turn: SIGTERM, drain, exit 0, start again, ready)
# must not cost a single request. `make test` runs the short version.
#
#   scripts/scale-test.sh [SHORT]
#
#   SHORT (SHORT=1 or the argument): one roll of the three replicas under
#       load, a steady period of the same length, 11 sequences stepped
#       through nginx (each step must land where its cache is), then a
#       drain while nginx holds idle connections to the replica, at a
#       trickle (about 35 s).
#   Otherwise, also: the same load for SCALE_SECONDS (20) each against 1, 2
#       and 3 replicas behind nginx, and their requests a second; twice:
#       with the small request (HTTP and proxying cost more than the
#       attention) and with one that computes for ~2 ms (L 512, E 32, 4
#       heads, base64 in and out, no weights; an 87 KB body and answer).
#
# Settings (environment):
#   ATTN_SERVER          the server binary (build/attention-server)
#   SCALE_SECONDS        seconds of each throughput run (20)
#   SCALE_ROLLS          rolls of the three replicas, one after the other (1)
#   SCALE_CONNECTIONS    wrk's connections (16); SCALE_THREADS its threads (2)
#   SCALE_BODY           the request body (examples/request.json)
#   SCALE_DRAIN_TIMEOUT  the replicas' drain_timeout (10)
#   SCALE_KEEPALIVE      nginx's upstream keepalive_timeout (4s)
#   SCALE_NEXT_UPSTREAM  nginx's proxy_next_upstream ("error timeout"); an
#                        experiment: "error timeout non_idempotent" retries
#                        POSTs already sent, and so hides lost requests
#
# Each replica runs with --workers 1: the machine this was written on has 2
# cores for 3 replicas, nginx and wrk, so more workers would only queue on
# the same cores; one worker is also what a pod with a 1-CPU limit gets.
#
# It fails (exit 1) on any answer other than 200 (wrk's count and nginx's
# access log), any socket error wrk sees, any 5xx in nginx's log, any
# upstream connection that nginx's error.log says was closed or reset under
# a request (even one nginx then sent elsewhere), any
# replica that does not exit 0 after SIGTERM within drain_timeout + 15 s, or
# does not become ready again within 60 s. Timing is only printed, never
# checked: the machines are shared and noisy.
#
# Everything goes to build/scale/: nginx.conf, nginx's pid, error.log and
# access.log (one '|'-separated line per request: time, status, upstream
# addresses, upstream statuses, ...) and temp folders, replica-N.log (each
# replica's log across its restarts), wrk-PHASE.txt. Every process started
# here is stopped on exit, whatever the outcome.
set -euo pipefail
cd "$(dirname "$0")/.."

SERVER=${ATTN_SERVER:-build/attention-server}
case "${1:-}" in
SHORT | short) SHORT=1 ;;
"") SHORT=${SHORT:-0} ;;
*) echo "usage: scripts/scale-test.sh [SHORT]" >&2; exit 2 ;;
esac
[ "$SHORT" = 0 ] || SHORT=1
TPUT_SECONDS=${SCALE_SECONDS:-20}
ROLLS=${SCALE_ROLLS:-1}
CONNS=${SCALE_CONNECTIONS:-16}
THREADS=${SCALE_THREADS:-2}
export SCALE_BODY=${SCALE_BODY:-examples/request.json}
SCALE_SMALL=$SCALE_BODY
DRAIN=${SCALE_DRAIN_TIMEOUT:-10}
KEEPALIVE=${SCALE_KEEPALIVE:-4s}
NEXT_UPSTREAM=${SCALE_NEXT_UPSTREAM:-error timeout}
CONN_TIMEOUT=30 # the server's default conn_timeout, given explicitly
FAIL_TIMEOUT=2  # nginx's fail_timeout (s) for a replica
PAUSE=3         # after a replica is ready again, before the next: > FAIL_TIMEOUT
REPLICAS=3
OUT=build/scale
DIR=$PWD/$OUT

for tool in nginx wrk curl ss; do
    command -v "$tool" >/dev/null ||
        { echo "scale-test: $tool is missing (scripts/deps.sh scale installs it)" >&2; exit 1; }
done
[ -x "$SERVER" ] || { echo "scale-test: no server at $SERVER" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT"

# A sanitized server keeps freed memory in ASan's quarantine (256 MB by
# default): three of them, bound it.
if grep -q __asan_init "$SERVER" 2>/dev/null; then
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=32"
    echo "scale-test: sanitized server: ASan quarantine 32 MB each"
fi

RPID=() RPORT=()
NGINX_PID="" WRK_PID="" NPORT=""
cleanup() {
    local p
    [ -z "$WRK_PID" ] || kill -KILL "$WRK_PID" 2>/dev/null || true
    # SIGTERM: nginx's fast shutdown; its master stops its worker
    [ -z "$NGINX_PID" ] || kill -TERM "$NGINX_PID" 2>/dev/null || true
    # two signals: the server stops at once (exit 1), no drain
    for p in "${RPID[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    sleep 0.1
    for p in "${RPID[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for _ in $(seq 50); do # 5 s, then SIGKILL to what is left
        [ -n "$(jobs -pr)" ] || break
        sleep 0.1
    done
    for p in $(jobs -pr); do kill -KILL "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

FAIL=0
fail() { echo "scale-test: FAIL: $*"; FAIL=1; }
now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
http_code() { curl -s -o /dev/null -m 1 -w '%{http_code}' "$1" 2>/dev/null || true; }

# A loopback port no socket uses, below the kernel's range of ephemeral
# ports: a replica restarts on its port, which an outgoing connection
# (nginx's to another replica) could otherwise have taken in between.
free_port() {
    local p lo
    lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    [ "$lo" -gt 12000 ] || lo=32768
    for _ in $(seq 50); do
        p=$((lo - 10000 + RANDOM % 10000))
        [ -n "$(ss -Htan "sport = :$p")" ] || { echo "$p"; return 0; }
    done
    return 1
}

# start_replica I PORT: replica I on PORT; 1 when it did not start
start_replica() {
    local i=$1 port=$2 log=$OUT/replica-$1.log n
    n=$(grep -c 'listening on' "$log" 2>/dev/null || true)
    echo "=== scale-test: $(date -u +%T.%N) start on port $port ===" >>"$log"
    "$SERVER" --bind 127.0.0.1 --port "$port" --workers 1 --drain-timeout "$DRAIN" \
        --conn-timeout "$CONN_TIMEOUT" >>"$log" 2>&1 &
    RPID[i]=$!
    for _ in $(seq 600); do # 60 s: a sanitized server starts slowly
        [ "$(grep -c 'listening on' "$log" || true)" -gt "${n:-0}" ] && break
        kill -0 "${RPID[i]}" 2>/dev/null || break
        sleep 0.1
    done
    RPORT[i]=$port
    kill -0 "${RPID[i]}" 2>/dev/null && [ "$(grep -c 'listening on' "$log" || true)" -gt "${n:-0}" ]
}

# wait_ready I: until GET /v2/health/ready answers 200 (60 s at most)
wait_ready() {
    local i=$1
    for _ in $(seq 600); do
        [ "$(http_code "http://127.0.0.1:${RPORT[i]}/v2/health/ready")" = 200 ] && return 0
        sleep 0.1
    done
    return 1
}

# wait_exit I SECONDS: waits for replica I to exit; RC is its exit status,
# or "timeout" (then it is killed)
wait_exit() {
    local pid=${RPID[$1]} st
    RC=0
    for _ in $(seq $(($2 * 10))); do
        st=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null || true)
        if [ -z "$st" ] || [ "$st" = Z ]; then
            wait "$pid" || RC=$?
            return
        fi
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    RC=timeout
}

# start_nginx N: nginx in front of replicas 1..N, on NPORT (picked once)
start_nginx() {
    local n=$1 servers="" i user_line=""
    for ((i = 1; i <= n; i++)); do
        servers+="server 127.0.0.1:${RPORT[i]} max_fails=1 fail_timeout=${FAIL_TIMEOUT}s;
        "
    done
    # as root, nginx's workers would run as nobody: keep them as this user
    [ "$(id -u)" != 0 ] || user_line="user $(id -un) $(id -gn);"
    for attempt in 1 2 3 4 5; do
        [ -n "$NPORT" ] || NPORT=$(free_port)
        awk -v dir="$DIR" -v port="$NPORT" -v servers="$servers" -v user="$user_line" \
            -v ka="$KEEPALIVE" -v ct="$CONN_TIMEOUT" -v dt="$DRAIN" -v nu="$NEXT_UPSTREAM" '
            { gsub(/@DIR@/, dir); gsub(/@PORT@/, port); gsub(/@USER_LINE@/, user)
              gsub(/@KEEPALIVE_TIMEOUT@/, ka); gsub(/@CONN_TIMEOUT@/, ct)
              gsub(/@DRAIN_TIMEOUT@/, dt); gsub(/@MAX_BODY@/, "64m")
              sub(/proxy_next_upstream error timeout;/, "proxy_next_upstream " nu ";")
              if ($1 == "@SERVERS@") { printf "%s\n", servers; next }
              print }' tests/scale/nginx.conf.in >"$OUT/nginx.conf"
        nginx -p "$DIR/" -c "$DIR/nginx.conf" -e "$DIR/error.log" &
        NGINX_PID=$!
        for _ in $(seq 100); do
            [ "$(http_code "http://127.0.0.1:$NPORT/v2/health/ready")" = 200 ] && return 0
            kill -0 "$NGINX_PID" 2>/dev/null || break
            sleep 0.1
        done
        # the port was taken in between, most likely: another one
        kill -TERM "$NGINX_PID" 2>/dev/null || true
        wait "$NGINX_PID" 2>/dev/null || true
        NGINX_PID="" NPORT=""
        echo "scale-test: nginx did not start (attempt $attempt; see $OUT/error.log)" >&2
    done
    exit 1
}

stop_nginx() {
    kill -QUIT "$NGINX_PID" 2>/dev/null || true # graceful: lets requests finish
    wait "$NGINX_PID" 2>/dev/null || true
    NGINX_PID=""
}

# wrk_start NAME SECONDS: the load, in the background (WRK_PID)
wrk_start() {
    wrk -t "$THREADS" -c "$CONNS" -d "${2}s" --timeout 10s --latency \
        -s tests/scale/post.lua "http://127.0.0.1:$NPORT" >"$OUT/wrk-$1.txt" 2>&1 &
    WRK_PID=$!
}
# wrk_wait [stop]: waits for it (at most its duration + 30 s; "stop": SIGINT
# first, which makes wrk stop and print its figures)
wrk_wait() {
    [ "${1:-}" != stop ] || kill -INT "$WRK_PID" 2>/dev/null || true
    local t=0
    while kill -0 "$WRK_PID" 2>/dev/null && [ "$(awk '{ print $3 }' "/proc/$WRK_PID/stat" 2>/dev/null)" != Z ]; do
        sleep 0.2
        t=$((t + 1))
        [ "$t" -lt $((5 * (MAX_WRK + 30))) ] || { kill -KILL "$WRK_PID"; break; }
    done
    wait "$WRK_PID" || true
    WRK_PID=""
}
MAX_WRK=600

# The figures of one phase, appended to $OUT/phases: wrk's line and what
# nginx logged between two line counts of access.log and error.log.
#   phase NAME ACCESS0 ERROR0
PHASES=() TPUT=()
phase() {
    local name=$1 a0=$2 e0=$3 w
    sleep 0.5 # nginx logs a request when it ends
    w=$(grep '^WRK ' "$OUT/wrk-$name.txt" ||
        echo "WRK requests=0 seconds=0 connect=0 read=0 write=0 status=0 timeout=0 p50_ms=- p99_ms=- max_ms=-")
    local acc err
    acc=$(tail -n "+$((a0 + 1))" "$OUT/access.log" | awk -F'|' '
        { n++; s[$2]++; if ($1 > last) last = $1
          if ($2 == 499) t499[n] = $1
          if ($2 != 200 && $2 != 499) bad++
          if ($2 >= 500) x5++
          if ($5 ~ /,/) retried++
          m = split($5, u, /, /); for (k = 1; k <= m; k++) if (u[k] != 200) up++ }
        END { for (k in s) st = st (st == "" ? "" : ",") k ":" s[k]
              for (k in t499) if (t499[k] < last - 1) early++
              printf "logged=%d ok=%d other=%d s499=%d early499=%d s5xx=%d retried=%d upstream_non200=%d statuses=%s",
                     n, s[200], bad, s[499], early, x5, retried, up, st == "" ? "-" : st }')
    err=$(tail -n "+$((e0 + 1))" "$OUT/error.log" | awk '
        /Connection refused/ { refused++ } /prematurely closed/ { closed++ }
        /reset by peer/ { reset++ } /no live upstreams/ { nolive++ } /timed out/ { tout++ }
        END { printf "refused=%d closed=%d reset=%d nolive=%d timedout=%d",
                     refused, closed, reset, nolive, tout }')
    # the machine's 1-minute load average: this test's own processes make
    # about 5; much more says something else ran on the same cores
    w+=" load=$(cut -d' ' -f1 /proc/loadavg)"
    PHASES+=("$name $w $acc $err")
    echo "PHASE $name $w $acc $err" >>"$OUT/phases"
    # the checks: every request a 200, no socket error, no 5xx
    local kv
    kv=" $w $acc $err "
    get() { sed -n "s/.* $1=\([^ ]*\) .*/\1/p" <<<"$kv"; }
    [ "$(get status)" = 0 ] || fail "$name: wrk saw $(get status) answers that were not 2xx/3xx"
    local se=$(($(get connect) + $(get read) + $(get write) + $(get timeout)))
    [ "$se" = 0 ] || fail "$name: wrk saw $se socket errors"
    [ "$(get other)" = 0 ] || fail "$name: nginx logged $(get other) answers that were not 200"
    [ "$(get s5xx)" = 0 ] || fail "$name: nginx logged $(get s5xx) answers 5xx"
    # a replica that closed or reset a connection with a request in it,
    # even one that nginx then sent elsewhere (proxy_next_upstream
    # non_idempotent would): the server dropped that request
    local lost=$(($(get closed) + $(get reset)))
    [ "$lost" = 0 ] || fail "$name: nginx's error.log: $lost upstream connections closed or reset under a request"
    # 499: wrk closing its connections at its end with requests in flight;
    # not before its last second
    [ "$(get s499)" -le "$CONNS" ] || fail "$name: nginx logged $(get s499) clients gone (499)"
    [ "$(get early499)" = 0 ] ||
        fail "$name: nginx logged $(get early499) clients gone (499) before the load's last second"
    [ "$(get requests)" -gt 0 ] || fail "$name: wrk got no answers"
}
counts() { echo "$(wc -l <"$OUT/access.log") $(wc -l <"$OUT/error.log")"; }

# --- start: 3 replicas, nginx in front -----------------------------------
for ((i = 1; i <= REPLICAS; i++)); do
    for attempt in 1 2 3 4 5; do # a port taken in between: another one
        start_replica "$i" "$(free_port)" && break
        wait "${RPID[i]}" || true
        [ "$attempt" -lt 5 ] || { echo "scale-test: replica $i did not start (see its log)" >&2; exit 1; }
    done
done
for ((i = 1; i <= REPLICAS; i++)); do
    wait_ready "$i" || { echo "scale-test: replica $i not ready" >&2; exit 1; }
done
: >"$OUT/access.log"
: >"$OUT/error.log"
start_nginx "$REPLICAS"
echo "scale-test: replicas on ports ${RPORT[*]} (workers 1, drain_timeout $DRAIN s," \
    "conn_timeout $CONN_TIMEOUT s); nginx on $NPORT (upstream keepalive_timeout $KEEPALIVE," \
    "proxy_next_upstream $NEXT_UPSTREAM); wrk -t $THREADS -c $CONNS"
# warm up: nginx opens its kept-alive connections to every replica
wrk_start warmup 2
wrk_wait

# --- the roll under load ---------------------------------------------------
read -r A0 E0 < <(counts)
wrk_start roll "$MAX_WRK"
T_ROLL=$(now)
sleep 1
ROLL=()
for ((k = 0; k < ROLLS * REPLICAS; k++)); do
    i=$((k % REPLICAS + 1))
    t0=$(now)
    kill -TERM "${RPID[i]}"
    wait_exit "$i" $((DRAIN + 15))
    rc=$RC
    t_exit=$(since "$t0")
    cut=$(sed -n 's/.*stopped (\([0-9]*\) requests cut off.*/\1/p' "$OUT/replica-$i.log" | tail -1)
    [ "$rc" = 0 ] || fail "replica $i: exit status $rc after SIGTERM"
    start_replica "$i" "${RPORT[i]}" || { echo "scale-test: replica $i did not start again" >&2; exit 1; }
    wait_ready "$i" || fail "replica $i: not ready again within 60 s"
    ROLL+=("replica $i: SIGTERM -> exit $rc after $t_exit s (${cut:-?} cut off at drain_timeout), ready again after $(since "$t0") s")
    sleep "$PAUSE"
done
wrk_wait stop
ROLL_SECONDS=$(since "$T_ROLL")
phase roll "$A0" "$E0"

# --- a steady period as long as the roll -----------------------------------
STEADY=$(awk -v s="$ROLL_SECONDS" 'BEGIN { printf "%d", s + 0.999 }')
read -r A0 E0 < <(counts)
wrk_start steady "$STEADY"
wrk_wait
phase steady "$A0" "$E0"

# --- sequences: every step lands where its cache is -------------------------
# 11 sequences (docs/sequences.md; not a multiple of the replicas, so that a
# round robin would move them) stepped in turn through nginx, which
# hashes X-Sequence-Id onto a replica (tests/scale/nginx.conf.in): every
# step must answer 200 with the cache length its sequence has by then (a
# step on another replica would be 400 sequence_not_found), and nginx's
# log must show each sequence on one replica.
read -r A0 E0 < <(counts)
seq_step() { # seq_step ID START: prints "STATUS CACHE_LENGTH"
    local body='{"query": [[1, 0, 0, 1]], "num_heads": 2, "need_weights": false' out
    [ "$2" = 0 ] || body+=', "sequence_start": true'
    out=$(curl -s -m 10 -H 'Content-Type: application/json' -H "X-Sequence-Id: $1" \
        -d "$body}" -w '|%{http_code}' "http://127.0.0.1:$NPORT/attention" || true)
    echo "${out##*|} $(sed -n 's/.*"cache_length":\([0-9]*\).*/\1/p' <<<"${out%|*}")"
}
SEQ_BAD=0
for step in 1 2 3 4 5 6; do
    for s in $(seq 11); do
        read -r code len < <(seq_step "scale-$$-$s" "$((step == 1))")
        [ "$code" = 200 ] && [ "$len" = "$step" ] || SEQ_BAD=$((SEQ_BAD + 1))
    done
done
sleep 0.5 # nginx logs a request when it ends
# spread FROM PATTERN: of nginx's log lines after FROM whose X-Sequence-Id
# matches PATTERN, "MOVED PER_REPLICA": how many reached another replica
# than the first of their header's value, and how many values each replica got
spread() {
    tail -n "+$(($1 + 1))" "$OUT/access.log" | awk -F'|' -v pat="$2" '$9 ~ pat && $9 != "-" {
        if (!($9 in at)) at[$9] = $4; else if (at[$9] != $4) moved++ }
    END { for (k in at) n[at[k]]++; for (r in n) s = s (s == "" ? "" : ", ") n[r]
          printf "%d %s", moved, s }'
}
SEQ_SPREAD=$(spread "$A0" '.')
read -r SEQ_MOVED SEQ_PER_REPLICA <<<"$SEQ_SPREAD"
[ "$SEQ_BAD" = 0 ] || fail "sequences: $SEQ_BAD of 66 steps not 200 with their cache length"
[ "$SEQ_MOVED" = 0 ] || fail "sequences: $SEQ_MOVED steps reached another replica than their sequence's"
SEQ_LINE="11 sequences x 6 steps through nginx (hash \$http_x_sequence_id consistent):"
SEQ_LINE+=" $SEQ_BAD steps wrong, $SEQ_MOVED moved; sequences per replica: $SEQ_PER_REPLICA"

# --- batches: a batch's sequences land where their caches are --------------
# A decoder steps a batch of sequences in one request (docs/deployment.md,
# "Batches"): the batch's key goes in X-Sequence-Id (in the batch form it is
# only the placement key) and every sequence of the batch is always sent
# with it, its start too. 5 batches of 3 sequences: each started one by
# one (a one-item batch), then the whole batch stepped 4 times; every
# answer must be 200 with each item's cache length, and nginx's log must
# show each batch's key on one replica.
read -r A0 E0 < <(counts)
batch_post() { # batch_post KEY IDS START: prints "STATUS CACHE_LENGTHS"
    local key=$1 ids=$2 q="" out
    local n; n=$(awk -F, '{ print NF }' <<<"$ids")
    for _ in $(seq "$n"); do q+="${q:+,}[[1, 0, 0, 1]]"; done
    local body="{\"query\": [$q], \"num_heads\": 2, \"sequence_id\": [$ids]"
    [ "$3" = 0 ] || body+=', "sequence_start": true'
    out=$(curl -s -m 10 -H 'Content-Type: application/json' -H "X-Sequence-Id: $key" \
        -d "$body}" -w '|%{http_code}' "http://127.0.0.1:$NPORT/attention" || true)
    echo "${out##*|} $(sed -n 's/.*"cache_length":\[\([0-9,]*\)\].*/\1/p' <<<"${out%|*}")"
}
BATCH_BAD=0
for b in $(seq 5); do
    ids=""
    for i in 1 2 3; do
        id="\"batch-$$-$b-$i\""
        read -r code len < <(batch_post "batch-$$-$b" "$id" 1)
        [ "$code" = 200 ] && [ "$len" = 1 ] || BATCH_BAD=$((BATCH_BAD + 1))
        ids+="${ids:+,}$id"
    done
    for step in 2 3 4 5; do
        read -r code len < <(batch_post "batch-$$-$b" "$ids" 0)
        [ "$code" = 200 ] && [ "$len" = "$step,$step,$step" ] || BATCH_BAD=$((BATCH_BAD + 1))
    done
done
sleep 0.5 # nginx logs a request when it ends
BATCH_SPREAD=$(spread "$A0" '^batch-')
read -r BATCH_MOVED BATCH_PER_REPLICA <<<"$BATCH_SPREAD"
[ "$BATCH_BAD" = 0 ] || fail "batches: $BATCH_BAD of 35 requests not 200 with their cache lengths"
[ "$BATCH_MOVED" = 0 ] || fail "batches: $BATCH_MOVED requests reached another replica than their batch's"
BATCH_LINE="5 batches of 3 sequences (started one by one, stepped together 4 times) through"
BATCH_LINE+=" nginx by the batch's key in X-Sequence-Id: $BATCH_BAD wrong, $BATCH_MOVED moved;"
BATCH_LINE+=" batches per replica: $BATCH_PER_REPLICA"

# --- a drain with idle kept-alive connections, at a trickle -----------------
# Under wrk every upstream connection is busy and a replica drains in a
# moment. Here nginx holds idle connections to replica 1 when it gets
# SIGTERM; requests keep coming one at a time (some through those idle
# connections); the replica must answer them, wait for nginx to close the
# rest (its upstream keepalive_timeout, below drain_timeout) and exit 0.
read -r A0 E0 < <(counts)
post() {
    curl -s -o /dev/null -m 10 -w '%{http_code}\n' -H 'Content-Type: application/json' \
        --data-binary @"$SCALE_BODY" "http://127.0.0.1:$NPORT/attention" || true
}
for _ in $(seq 12); do post; done >"$OUT/idle.codes"
IDLE_CONNS=$(ss -Htn state established "dport = :${RPORT[1]}" | wc -l)
t0=$(now)
kill -TERM "${RPID[1]}"
for _ in $(seq 20); do post; sleep 0.1; done >>"$OUT/idle.codes" &
TRICKLE=$!
wait_exit 1 $((DRAIN + 15))
IDLE_EXIT=$(since "$t0")
wait "$TRICKLE"
# requests replica 1 answered after SIGTERM (its access lines after the line
# that says it drains)
IDLE_SERVED=$(awk '/draining/ { n = 0; on = 1; next } on && /^POST / { n++ } END { print n + 0 }' \
    "$OUT/replica-1.log")
cut=$(sed -n 's/.*stopped (\([0-9]*\) requests cut off.*/\1/p' "$OUT/replica-1.log" | tail -1)
[ "$RC" = 0 ] || fail "idle drain: replica 1 exit status $RC after SIGTERM"
start_replica 1 "${RPORT[1]}" || { echo "scale-test: replica 1 did not start again" >&2; exit 1; }
wait_ready 1 || fail "replica 1: not ready again within 60 s"
sleep "$PAUSE"
IDLE_BAD=$(grep -vc '^200$' "$OUT/idle.codes" || true)
[ "$IDLE_BAD" = 0 ] || fail "idle drain: $IDLE_BAD of 32 requests not answered 200"
IDLE_LOST=$(tail -n "+$((E0 + 1))" "$OUT/error.log" | grep -c -e 'prematurely closed' -e 'reset by peer' || true)
[ "$IDLE_LOST" = 0 ] ||
    fail "idle drain: nginx's error.log: $IDLE_LOST upstream connections closed or reset under a request"
IDLE_LINE="replica 1 with $IDLE_CONNS idle connections from nginx; 20 requests in 2-3 s from its"
IDLE_LINE+=" SIGTERM, $IDLE_SERVED of them answered by it: exit $RC after $IDLE_EXIT s (drain_timeout"
IDLE_LINE+=" $DRAIN s; ${cut:-?} cut off); $IDLE_BAD of 32 requests not 200"

# --- throughput with 1, 2 and 3 replicas (long mode) -----------------------
# The compute-bound request: 0x3c3c3c3c is 0.0115 in every element.
COMPUTE=$OUT/compute.json
{
    printf '{"query": {"shape": [512, 32], "dtype": "float32", "b64": "'
    head -c $((512 * 32 * 4)) /dev/zero | tr '\0' '\074' | base64 -w0
    printf '"}, "num_heads": 4, "need_weights": false, "output_encoding": "base64"}'
} >"$COMPUTE"
if [ "$SHORT" = 0 ]; then
    for load in small compute; do
        [ "$load" = small ] || SCALE_BODY=$COMPUTE
        for n in 1 2 3; do
            stop_nginx
            start_nginx "$n"
            wrk_start "warmup-$load-$n" 2
            wrk_wait
            read -r A0 E0 < <(counts)
            wrk_start "$load-$n" "$TPUT_SECONDS"
            wrk_wait
            phase "$load-$n" "$A0" "$E0"
        done
    done
fi

# --- the replicas stop cleanly at the end too ------------------------------
stop_nginx
for ((i = 1; i <= REPLICAS; i++)); do kill -TERM "${RPID[i]}"; done
for ((i = 1; i <= REPLICAS; i++)); do
    wait_exit "$i" $((DRAIN + 15))
    [ "$RC" = 0 ] || fail "replica $i: exit status $RC at the end"
done
RPID=()

# --- the summary --------------------------------------------------------------
echo
echo "scale-test: $ROLLS roll(s) of the $REPLICAS replicas, the load throughout (${ROLL_SECONDS} s):"
for l in "${ROLL[@]}"; do echo "  $l"; done
echo "scale-test: a drain at a trickle: $IDLE_LINE"
echo "scale-test: $SEQ_LINE"
echo "scale-test: $BATCH_LINE"
echo
printf '%-11s %7s %9s %7s %8s %8s %8s %8s %8s %8s %8s %5s\n' phase seconds requests 'req/s' \
    'non-2xx' sockerr 'p50 ms' 'p99 ms' 'max ms' non-200 retried load
for p in "${PHASES[@]}"; do
    kv=" $p "
    g() { sed -n "s/.* $1=\([^ ]*\) .*/\1/p" <<<"$kv"; }
    name=${p%% *}
    rps=$(awk -v r="$(g requests)" -v s="$(g seconds)" 'BEGIN { printf "%.0f", (s > 0 ? r / s : 0) }')
    printf '%-11s %7s %9s %7s %8s %8s %8s %8s %8s %8s %8s %5s\n' "$name" "$(g seconds)" \
        "$(g requests)" "$rps" "$(g status)" \
        "$(($(g connect) + $(g read) + $(g write) + $(g timeout)))" \
        "$(g p50_ms)" "$(g p99_ms)" "$(g max_ms)" "$(g other)" "$(g retried)" "$(g load)"
    case $name in small-* | compute-*) TPUT+=("${name%-*} ${name##*-} $rps $(g p99_ms)") ;; esac
done
echo "(wrk's figures: requests, non-2xx (and 3xx) answers, socket errors (connect, read,"
echo " write, timeout), latency; nginx's access log: non-200 answers but 499 (wrk closing"
echo " its connections at its end), retried: requests nginx sent on to another replica;"
echo " load: the 1-minute load average at the end, about 5 from this test alone)"
echo
for p in "${PHASES[@]}"; do
    kv=" $p "
    printf '%-11s statuses %s; nginx error.log: refused %s, upstream closed %s, reset %s, no live upstreams %s, timed out %s\n' \
        "${p%% *}" "$(g statuses)" "$(g refused)" "$(g closed)" "$(g reset)" "$(g nolive)" "$(g timedout)"
done
if [ "${#TPUT[@]}" -gt 0 ]; then
    echo
    echo "scale-test: throughput, ${TPUT_SECONDS} s each, wrk -c $CONNS (small: $SCALE_SMALL;"
    echo "  compute: $COMPUTE, ~2 ms of attention each); only printed, never checked:"
    for t in "${TPUT[@]}"; do
        read -r load n rps p99 <<<"$t"
        [ "$n" != 1 ] || base=$rps
        awk -v l="$load" -v n="$n" -v r="$rps" -v b="$base" -v p="$p99" \
            'BEGIN { printf "  %-8s %d replica(s): %6d req/s  x%.2f of 1 replica  p99 %s ms\n", l, n, r, r / b, p }'
    done
fi
echo
if [ "$FAIL" = 0 ]; then
    echo "scale-test: OK: every request answered 200, no socket error, every replica exited 0"
else
    echo "scale-test: FAILED (above; logs in $OUT/)"
fi
exit "$FAIL"
