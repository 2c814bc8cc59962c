#!/bin/bash
# fuzz.sh -- `make fuzz`: libFuzzer on the request decoder, the core and the
# encoder (tests/fuzz/fuzz_codec.c) for FUZZ_SECONDS (default 60), seeded
# with the request bodies of tests/cases and tests/golden. Needs clang, which
# it installs when missing (scripts/deps.sh fuzz). The sources come from the
# Makefile (FUZZ_SRC: the core, the codec and the service, not the HTTP
# front end), so this list cannot drift from the build's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh fuzz
OUT=build/fuzz
mkdir -p "$OUT/corpus"
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
read -r -a src <<< "$(make -s --no-print-directory print-FUZZ_SRC)"
read -r -a libs <<< "$(make -s --no-print-directory print-FUZZ_LIBS)"
# shellcheck disable=SC2046 # pkg-config prints several words
clang -g -O1 -std=gnu11 -fopenmp-simd -Wno-pass-failed -fsanitize=fuzzer,address,undefined -I. \
    $(pkg-config --cflags openblas) "${src[@]}" -o "$OUT/fuzz_codec" "${libs[@]}" -pthread
cd "$OUT"
./fuzz_codec -max_total_time="${FUZZ_SECONDS:-60}" -max_len=8192 corpus
