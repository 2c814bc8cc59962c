#!/bin/bash
# run.sh -- `make bench`: every benchmark in one invocation, each
# ratio against a baseline measured in this same run. Tables on stdout, CSV
# and PNG plots under build/bench/.
#
# Expects the Makefile to have built build/attention-server and
# build/bench/{bench_core,bench_codec,bench_jsonnum,const_server,bench_subnormal,bench_model,
# bench_kvattend,bench_sequences,bench_batch,bench_grpc}.
#
# BENCH_SECONDS: seconds per wrk point (4). BENCH_ONLY=large: only the large
# request's stage table and the two-at-a-time line (needs just the server;
# BENCH_LARGE_RUNS timed runs per encoding, 5 by default, median by e2e).
# BENCH_ONLY=sequences: only 4b, sequences end to end (bench/sequences_e2e.py,
# which starts its own server; SEQUENCES_* settings in its header).
# BENCH_ONLY=offload: only 4c, a decoder's attention on the server vs in
# PyTorch (bench/offload.py, its own server; OFFLOAD_* settings in its header).
# BENCH_ONLY=round_trip: only 4d, a one-row step against nginx's fixed answer
# (bench/round_trip.py, its own server and nginx; RTT_* settings in its header).
# BENCH_ONLY=batch: only 1g-1h and 4e, a layer step of a batch of sequences
# in process (bench_batch; BENCH_BATCH_RSS=0 leaves out its 8 GiB part) and
# end to end (bench/batch_e2e.py, its own server; BATCH_* in its header).
# BENCH_ONLY=grpc: only 4f, the Open Inference Protocol over gRPC against
# HTTP (bench_grpc, its own server).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=build/bench
mkdir -p "$OUT"
DURATION=${BENCH_SECONDS:-4}
ONLY=${BENCH_ONLY:-}
RUNS=${BENCH_LARGE_RUNS:-5}
case "$ONLY" in ""|large|sequences|offload|round_trip|batch|grpc) ;; *) echo "bench: BENCH_ONLY must be empty, 'large', 'sequences', 'offload', 'round_trip', 'batch' or 'grpc'" >&2; exit 2 ;; esac

echo "attention-service bench, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# 4b. sequences end to end over HTTP: a decode step at a 16 k cache against
# the stateless request carrying the cache, and chunks against the stateless
# causal request of their shape (its own server, limits raised)
sequences_e2e() { echo; /usr/bin/python3 bench/sequences_e2e.py build/attention-server "$OUT/sequences.csv"; }
# 4c. a decoder (examples/offload/) generating with its attention on the
# server and in PyTorch, at contexts of 2 048 tokens and more
offload() { echo; /usr/bin/python3 bench/offload.py build/attention-server "$OUT/offload.csv"; }
# 4d. a one-row sequence step (v2 binary, wrk -c1) against nginx answering
# a fixed 200 to the same requests
round_trip() { echo; /usr/bin/python3 bench/round_trip.py build/attention-server "$OUT/round_trip.csv"; }
# 1g-1h. a layer step of B 16 sequences x 4 096 tokens on the compute path
# against an all-core streaming read, and RSS at 8 GiB of caches; 4e. the
# same step end to end (v2 binary) against the server's compute stage
batch_inproc() { echo; build/bench/bench_batch "$OUT"; }
batch_e2e() { echo; /usr/bin/python3 bench/batch_e2e.py build/attention-server "$OUT/batch_e2e.csv"; }
# 4f. the Open Inference Protocol over gRPC: the large binary case end to
# end against its compute, and a one-row sequence step over one
# ModelStreamInfer stream against HTTP keep-alive (its own server; the
# large request's model from bench/make_bodies.py)
grpc_bench() {
    [ -s "$OUT/bodies/large_v2.bin" ] || /usr/bin/python3 bench/make_bodies.py "$OUT/bodies"
    echo; build/bench/bench_grpc build/attention-server "$OUT/bodies" "$OUT"
}
if [ "$ONLY" = sequences ] || [ "$ONLY" = offload ] || [ "$ONLY" = round_trip ] || [ "$ONLY" = batch ] ||
   [ "$ONLY" = grpc ]; then
    case "$ONLY" in sequences) sequences_e2e ;; offload) offload ;; round_trip) round_trip ;;
                    batch) batch_inproc; batch_e2e ;; grpc) grpc_bench ;; esac
    echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    exit 0
fi

if [ -z "$ONLY" ]; then
# 1-2. core (1b: positional encoding vs compute; 1c: peaked scores; 1d: causal
# and windows against the unmasked request)
build/bench/bench_core core "$OUT"
build/bench/bench_core pe "$OUT"
build/bench/bench_core peaked "$OUT"
build/bench/bench_core causal "$OUT"
build/bench/bench_core scale "$OUT"
# 1e. a decode step over a sequence's cache vs the streaming read, and PyTorch
build/bench/bench_kvattend "$OUT"
# 1f. a one-row step with 10, 10 000 and 100 000 sequences held
echo
build/bench/bench_sequences "$OUT"
batch_inproc

# 3. codec
echo
/usr/bin/python3 bench/make_bodies.py "$OUT/bodies"
build/bench/bench_codec "$OUT"
echo
echo "3b. Numbers alone (lib/jsonnum.c vs jansson), with heap per number"
build/bench/bench_jsonnum --csv "$OUT/jsonnum.csv"
elif [ ! -s "$OUT/bodies/large_v2.bin" ]; then
    /usr/bin/python3 bench/make_bodies.py "$OUT/bodies"
fi

# 4. end to end over HTTP
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

start_attention() { # flags...; sets PORT
    local log="$OUT/server.log"
    build/attention-server --port 0 --bind 127.0.0.1 --log-level warn "$@" 2>"$log" &
    PIDS+=($!)
    for _ in $(seq 200); do
        PORT=$(sed -n 's/.*listening on http:\/\/[0-9.]*:\([0-9]*\).*/\1/p' "$log")
        [ -n "$PORT" ] && return 0
        sleep 0.05
    done
    echo "bench: attention-server did not start" >&2; exit 1
}

start_const() {
    coproc CONST { exec build/bench/const_server 0; }
    PIDS+=($CONST_PID)
    read -r _ PORT <&"${CONST[0]}"
}

# wrk: prints "req/s p50_ms p99_ms non2xx"
load() { # port body concurrency
    local threads=$(( $3 < 2 ? 1 : 2 ))
    BODY_FILE="$2" wrk -t"$threads" -c"$3" -d"${DURATION}s" --latency -s bench/post.lua \
        "http://127.0.0.1:$1/attention" | awk '
        function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0;
                         if (v ~ /s$/) return v * 1000; return v }
        /Requests\/sec/ { rps = $2 }
        /^ +50%/ { p50 = ms($2) } /^ +99%/ { p99 = ms($2) }
        /Non-2xx/ { bad = $5 }
        END { printf "%.0f %.2f %.2f %d\n", rps, p50, p99, bad }'
}

# with the large request's weights as a server-held model (bodies/models/large)
start_attention --model-repository "$OUT/bodies/models"; ATT_PORT=$PORT
for _ in $(seq 200); do
    curl -sf "http://127.0.0.1:$ATT_PORT/v2/health/ready" >/dev/null && break
    sleep 0.05
done
if [ -z "$ONLY" ]; then
echo
echo "4. End to end over HTTP (wrk, ${DURATION}s per point; attention-server with its defaults: 2 workers x 1 thread)"
printf "%-8s %-10s %5s %10s %9s %9s %7s %12s\n" request server conc "req/s" "p50 ms" "p99 ms" non2xx "vs const"
echo "request,server,concurrency,rps,p50_ms,p99_ms,non2xx" > "$OUT/e2e.csv"
start_const; CONST_PORT=$PORT
declare -A CONST_RPS
for c in 1 8 64; do
    read -r rps p50 p99 bad < <(load "$CONST_PORT" "$OUT/bodies/tiny.json" "$c")
    CONST_RPS[$c]=$rps
    printf "%-8s %-10s %5d %10d %9.2f %9.2f %7d %12s\n" tiny const-mhd "$c" "$rps" "$p50" "$p99" "$bad" "1.00"
    echo "tiny,const,$c,$rps,$p50,$p99,$bad" >> "$OUT/e2e.csv"
done
for req in tiny medium; do
    for c in 1 8 64; do
        read -r rps p50 p99 bad < <(load "$ATT_PORT" "$OUT/bodies/$req.json" "$c")
        ratio=$(awk -v a="$rps" -v b="${CONST_RPS[$c]}" 'BEGIN { printf "%.2f", a / b }')
        printf "%-8s %-10s %5d %10d %9.2f %9.2f %7d %12s\n" "$req" attention "$c" "$rps" "$p50" "$p99" "$bad" "$ratio"
        echo "$req,attention,$c,$rps,$p50,$p99,$bad" >> "$OUT/e2e.csv"
    done
done
echo "(target: tiny requests at concurrency 64 >= 25% of the constant server's req/s)"
fi

# Large request: stage breakdown from the Server-Timing header.
echo
echo "Large request (L=512, E=768, H=12, attention weights returned): median of $RUNS"
echo "(nested, flat, base64: POST /attention with the weights inline; model-b64: POST /attention"
echo " base64 with \"model\"; v2-binary: KServe v2 infer on the server-held model, binary in and out)"
printf "%-9s %10s %9s %9s %9s %9s %9s %9s %12s\n" encoding "body MB" receive queue decode compute encode "e2e ms" "e2e/compute"
echo "encoding,body_mb,receive_ms,queue_ms,decode_ms,compute_ms,encode_ms,e2e_ms" > "$OUT/stages.csv"
for enc in nested flat base64 model-b64 v2-binary; do
    body="$OUT/bodies/large_$enc.json" path=/attention hdr='Content-Type: application/json'
    case $enc in
    model-b64) body="$OUT/bodies/large_model_base64.json" ;;
    v2-binary) body="$OUT/bodies/large_v2.bin" path=/v2/models/large/infer
               hdr="Inference-Header-Content-Length: $(cat "$OUT/bodies/large_v2.hlen")" ;;
    esac
    for i in $(seq $((RUNS + 1))); do
        curl -s -o /dev/null -D - -w 'total %{time_total}\n' -H "$hdr" \
            --data-binary @"$body" "http://127.0.0.1:$ATT_PORT$path" |
            tr -d '\r' | awk '/^Server-Timing/ { n = split(substr($0, 16), f, /, */)
                                                  for (i = 1; i <= n; i++) { split(f[i], kv, /;dur=/); gsub(/ /, "", kv[1]); ms[kv[1]] = kv[2] } }
                              /^total/ { print ms["receive"], ms["queue"], ms["decode"], ms["compute"], ms["encode"], $2 * 1000 }'
    done | tail -n "$RUNS" | sort -n -k6 | sed -n "$(( (RUNS + 1) / 2 ))p" > "$OUT/stage_$enc.txt"  # drop the warm-up, median by e2e
    read -r r q d c e t < "$OUT/stage_$enc.txt"
    mb=$(awk -v s="$(stat -c %s "$body")" 'BEGIN { printf "%.1f", s / 1048576 }')
    printf "%-9s %10s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %11.2fx\n" "$enc" "$mb" "$r" "$q" "$d" "$c" "$e" "$t" "$(awk -v t="$t" -v c="$c" 'BEGIN { print t / c }')"
    echo "$enc,$mb,$r,$q,$d,$c,$e,$t" >> "$OUT/stages.csv"
done
echo "(targets: base64 end to end <= 1.5x the core's compute time; v2-binary <= 1.25x)"

# Two large requests at once versus one at a time.
echo
seq_start=$(date +%s.%N)
for i in 1 2 3 4 5 6 7 8; do
    curl -s -o /dev/null -H 'Content-Type: application/json' --data-binary @"$OUT/bodies/large_base64.json" "http://127.0.0.1:$ATT_PORT/attention"
done
seq_t=$(echo "$(date +%s.%N) - $seq_start" | bc)
par_start=$(date +%s.%N)
STREAMS=()
for s in 1 2; do
    ( for i in 1 2 3 4; do
        curl -s -o /dev/null -H 'Content-Type: application/json' --data-binary @"$OUT/bodies/large_base64.json" "http://127.0.0.1:$ATT_PORT/attention"
      done ) &
    STREAMS+=($!)
done
wait "${STREAMS[@]}"
par_t=$(echo "$(date +%s.%N) - $par_start" | bc)
printf "Two large base64 requests at once: 8 one at a time %.2f s, 8 two at a time %.2f s: throughput %.2fx (target >= 1.7x)\n" \
    "$seq_t" "$par_t" "$(echo "$seq_t / $par_t" | bc -l)"

# Reduced weights (weights_top_k, weights_pool) at L = S = 4096, H = 16
# against the full weights: time, answer size, each server's peak RSS.
echo
/usr/bin/python3 bench/reduced_weights.py build/attention-server "$OUT/reduced.csv"
[ -z "$ONLY" ] && sequences_e2e
[ -z "$ONLY" ] && offload
[ -z "$ONLY" ] && round_trip
[ -z "$ONLY" ] && batch_e2e
[ -z "$ONLY" ] && grpc_bench

if [ -n "$ONLY" ]; then
    echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    exit 0
fi

# 5. subnormals with and without FTZ/DAZ, per OpenBLAS kernel set
build/bench/bench_subnormal "$OUT/subnormal.csv"

# 6. a server-held model: load time and RSS of one layer of a 12-layer checkpoint
echo
build/bench/bench_model "$OUT"

# Plots
if command -v gnuplot >/dev/null; then
    gnuplot <<EOF
set datafile separator ','
set terminal pngcairo size 900,560 font ',11'
set output '$OUT/scaling.png'
set title 'Core time vs sequence length (E=512, H=8, N=1, 1 thread)'
set logscale xy 2
set xlabel 'L = S'; set ylabel 'ms'; set key top left; set grid
plot '$OUT/scaling.csv' using (\$2==0 ? \$1 : 1/0):3 with linespoints lw 2 title 'need\_weights false (tiled)', \
     '' using (\$2==1 ? \$1 : 1/0):3 with linespoints lw 2 title 'need\_weights true (per head)'
set output '$OUT/window.png'
unset logscale; set title 'Window [255, 0]: time vs sequence length (E=512, H=8, N=1, 1 thread, no projections)'
set xlabel 'L = S'; set ylabel 'CPU ms'; set key top left; set grid; set yrange [0:*]
plot '$OUT/window.csv' using 1:2 with linespoints lw 2 title 'window [255, 0]'
set yrange [*:*]
set output '$OUT/stages.png'
unset logscale; set title 'Large request (L=512, E=768, H=12): where the time goes'
set style data histograms; set style histogram rowstacked; set style fill solid 0.8 border -1
set boxwidth 0.6; set ylabel 'ms'; set xlabel 'request encoding'; set key outside right
plot '$OUT/stages.csv' every ::1 using 3:xtic(1) title 'receive', '' every ::1 using 4 title 'queue', \\
     '' every ::1 using 5 title 'decode', '' every ::1 using 6 title 'compute', \\
     '' every ::1 using 7 title 'encode', \\
     '' every ::1 using (\$8-\$3-\$4-\$5-\$6-\$7) title 'send + client'
EOF
    echo
    echo "plots: $OUT/scaling.png $OUT/window.png $OUT/stages.png; CSV: $OUT/*.csv"
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
