#!/bin/bash
# soak.sh -- `make soak`: a mixed load of valid, invalid, aborted and slow
# clients against the real server for SOAK_SECONDS (60 by default; `make
# test` runs 10), then the server's RSS and open descriptors before and
# after, and its gauges once the load has stopped. Fails when descriptors
# leak, when the gauges do not return to zero, when RSS grows past the
# configured budgets, or when a normal client is not answered during the
# load.
#
# Clients: bash's /dev/tcp for the raw ones, curl for the rest.
set -uo pipefail
cd "$(dirname "$0")/.."
SERVER=${ATTN_SERVER:-build/attention-server}
SECONDS_TOTAL=${SOAK_SECONDS:-60}
OUT=build/soak
mkdir -p "$OUT"
LOG=$OUT/server.log
BUDGET_MB=64 # max_inflight_bytes and max_answer_bytes each

# A sanitized server (make SANITIZE=... test) keeps freed memory in ASan's
# quarantine (256 MB by default) and maps shadow memory for what it uses:
# bound the quarantine and allow for both in the RSS check.
SLACK_MB=64
if grep -q __asan_init "$SERVER" 2>/dev/null; then
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=32"
    SLACK_MB=$((64 + 32 + BUDGET_MB / 2))
    echo "soak: sanitized server: ASan quarantine 32 MB, RSS slack ${SLACK_MB} MB"
fi
"$SERVER" --port 0 --bind 127.0.0.1 --log-level warn --workers 2 \
    --max-inflight-bytes ${BUDGET_MB}M --max-answer-bytes ${BUDGET_MB}M \
    --header-timeout 3 --body-timeout 3 --min-send-rate 64K --min-upload-rate 64K \
    --drain-timeout 5 2>"$LOG" &
PID=$!
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    kill "$PID" 2>/dev/null
}
trap cleanup EXIT
PORT=
for _ in $(seq 200); do
    PORT=$(sed -n 's/.*listening on http:\/\/[0-9.]*:\([0-9]*\).*/\1/p' "$LOG")
    [ -n "$PORT" ] && break
    sleep 0.05
done
[ -n "$PORT" ] || { echo "soak: the server did not start" >&2; exit 1; }
URL=http://127.0.0.1:$PORT

rss_kb() { awk '/^VmRSS/ {print $2}' /proc/$PID/status; }
fds() { ls /proc/$PID/fd | wc -l; }
gauge() { curl -s "$URL/metrics" | awk -v k="$1" '$1 == k {print $2}'; }

TINY='{"query": [[1, 0, 1, 0], [0, 1, 0, 1]], "num_heads": 2}'
# L = 512, E = 16, H = 4, base64 out: a 5.6 MB answer from a 44 KB request
BIG=$OUT/big.json
{
    printf '{"query": {"shape": [512, 16], "dtype": "float32", "b64": "'
    head -c $((512 * 16 * 4)) /dev/zero | tr '\0' '\1' | base64 -w0
    printf '"}, "num_heads": 4, "output_encoding": "base64"}'
} > "$BIG"
BIGLEN=$(stat -c %s "$BIG")

for _ in $(seq 20); do curl -s -o /dev/null -H 'Content-Type: application/json' -d "$TINY" "$URL/attention"; done
curl -s -o /dev/null -H 'Content-Type: application/json' --data-binary @"$BIG" "$URL/attention"
RSS0=$(rss_kb) FD0=$(fds)
END=$((SECONDS + SECONDS_TOTAL))

valid() {
    while [ $SECONDS -lt $END ]; do
        curl -s -o /dev/null -H 'Content-Type: application/json' -d "$TINY" "$URL/attention"
        curl -s -o /dev/null -H 'Content-Type: application/json' --data-binary @"$BIG" "$URL/attention"
    done
}
invalid() {
    while [ $SECONDS -lt $END ]; do
        curl -s -o /dev/null -H 'Content-Type: application/json' -d '{"query": [[1, 2], [3]]' "$URL/attention"
        curl -s -o /dev/null -H 'Content-Type: text/plain' -d 'x' "$URL/attention"
        curl -s -o /dev/null -X DELETE "$URL/healthz"
    done
}
aborted() { # half a request line, half a body, then close
    while [ $SECONDS -lt $END ]; do
        exec 3<>/dev/tcp/127.0.0.1/$PORT && printf 'GET / HTTP/1.1\r\n' >&3; exec 3>&-
        exec 3<>/dev/tcp/127.0.0.1/$PORT &&
            printf 'POST /attention HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n' \
                "$BIGLEN" >&3 && head -c $((BIGLEN / 2)) "$BIG" >&3
        exec 3>&-
        sleep 0.02
    done
}
slow() { # a big answer read at ~10 KB/s, and headers a byte at a time
    while [ $SECONDS -lt $END ]; do
        exec 4<>/dev/tcp/127.0.0.1/$PORT
        printf 'POST /attention HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n' \
            "$BIGLEN" >&4
        cat "$BIG" >&4
        for _ in $(seq 40); do read -r -N 1024 -t 1 -u 4 _ || break; sleep 0.1; done
        exec 4>&-
        exec 5<>/dev/tcp/127.0.0.1/$PORT
        for c in G E T ' ' /; do printf '%s' "$c" >&5 2>/dev/null || break; sleep 0.5; done
        exec 5>&-
    done
}
for f in valid invalid aborted slow slow; do $f & PIDS+=($!); done

# a normal client during the load: every probe must be answered
PROBES=0 MISSED=0
while [ $SECONDS -lt $END ]; do
    sleep 1
    PROBES=$((PROBES + 1))
    code=$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$URL/healthz")
    [ "$code" = 200 ] || MISSED=$((MISSED + 1))
done
wait "${PIDS[@]}" 2>/dev/null
PIDS=()
sleep 4 # past header_timeout, body_timeout and a rate window
RSS1=$(rss_kb) FD1=$(fds)
INFL=$(gauge attention_inflight_bytes) ANS=$(gauge attention_answer_bytes)
OPEN=$(gauge attention_connections_open)
REQS=$(curl -s "$URL/metrics" | awk '/^attention_http_requests_total/ {n += $2} END {print n}')

echo "soak: ${SECONDS_TOTAL}s, $REQS requests answered, $PROBES health probes during the load, $MISSED missed"
echo "soak: RSS $((RSS0 / 1024)) MB before, $((RSS1 / 1024)) MB after; descriptors $FD0 before, $FD1 after"
echo "soak: after the load: attention_inflight_bytes $INFL, attention_answer_bytes $ANS, attention_connections_open $OPEN"
fail=0
[ "$MISSED" -eq 0 ] || { echo "soak: FAIL: the health check went unanswered $MISSED times"; fail=1; }
[ "$FD1" -le $((FD0 + 2)) ] || { echo "soak: FAIL: descriptors leak ($FD0 -> $FD1)"; fail=1; }
[ "$INFL" = 0 ] && [ "$ANS" = 0 ] || { echo "soak: FAIL: bytes still held"; fail=1; }
[ "$OPEN" -le 2 ] || { echo "soak: FAIL: $OPEN connections still open"; fail=1; }
# the budgets bound what the load may add (plus allocator slack)
[ "$RSS1" -le $((RSS0 + (2 * BUDGET_MB + SLACK_MB) * 1024)) ] ||
    { echo "soak: FAIL: RSS grew past the budgets"; fail=1; }
kill -TERM "$PID"
wait "$PID"
rc=$?
[ "$rc" -eq 0 ] || { echo "soak: FAIL: exit status $rc after SIGTERM"; fail=1; }
exit $fail
