#!/bin/bash
# fuzz.sh -- `make fuzz`: libFuzzer on the request decoder, the core and the
# encoder (tests/fuzz/fuzz_codec.c) for FUZZ_SECONDS (default 60), seeded
# with the request bodies of tests/cases and tests/golden. Needs clang.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=build/fuzz
mkdir -p "$OUT/corpus"
command -v clang >/dev/null || { scripts/deps.sh build; apt-get install -y -qq clang >/dev/null; }
python=$(command -v python3 || true)
for f in tests/cases/*.json tests/golden/*.json; do
    dst="$OUT/corpus/$(basename "$(dirname "$f")")_$(basename "$f")"
    if [ -n "$python" ]; then # the request body alone
        "$python" -c 'import json,sys; c=json.load(open(sys.argv[1]))
b=c.get("raw", c.get("body", c.get("request")))
sys.stdout.write(b if isinstance(b, str) else json.dumps(b))' "$f" > "$dst"
    else
        cp "$f" "$dst"
    fi
done
clang -g -O1 -std=gnu11 -fopenmp-simd -Wno-pass-failed -fsanitize=fuzzer,address,undefined -I. \
    $(pkg-config --cflags openblas) tests/fuzz/fuzz_codec.c tests/codec_compare.c server/codec.c server/jsonnum.c \
    server/errors.c core/attention.c core/posenc.c -o "$OUT/fuzz_codec" -ljansson \
    $(pkg-config --libs openblas) -lm -pthread
cd "$OUT"
./fuzz_codec -max_total_time="${FUZZ_SECONDS:-60}" -max_len=8192 corpus
