#!/bin/bash
# fuzz.sh -- `make fuzz`: libFuzzer, FUZZ_SECONDS (default 60) per target,
# on the targets named in FUZZ_TARGETS (default "codec safetensors"):
#   codec        the request decoder, the core and the encoder
#                (tests/fuzz/fuzz_codec.c), seeded with the request bodies of
#                tests/cases and tests/golden;
#   safetensors  the safetensors reader and the model mapping
#                (tests/fuzz/fuzz_safetensors.c), seeded with the files of
#                tests/models/{repo,broken}, each behind the byte that picks
#                its config.json.
# Needs clang, which it installs when missing (scripts/deps.sh fuzz). The
# sources come from the Makefile (FUZZ_SRC: the core, the codec and the
# service, not the HTTP front end; FUZZ_ST_SRC: model/), so these lists
# cannot drift from the build's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh fuzz
OUT=build/fuzz
CFLAGS=(-g -O1 -std=gnu11 -fopenmp-simd -Wno-pass-failed "-fsanitize=fuzzer,address,undefined" -iquote . -Ibuild/gen)
mkvar() { make -s --no-print-directory "print-$1"; }

fuzz_codec() {
    mkdir -p "$OUT/corpus"
    local python f dst
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
    read -r -a src <<< "$(mkvar FUZZ_SRC)"
    read -r -a libs <<< "$(mkvar FUZZ_LIBS)"
    # the server's sources include <microhttpd.h>: build/mhd/'s, when the
    # system's is older than 1.0 (scripts/mhd.sh)
    make -s --no-print-directory mhd build/gen/grpc_service.pb-c.c
    # shellcheck disable=SC2046 # pkg-config and make print several words
    clang "${CFLAGS[@]}" $(pkg-config --cflags openblas) $(mkvar MHD_CFLAGS) "${src[@]}" \
        -o "$OUT/fuzz_codec" "${libs[@]}" -pthread
    (cd "$OUT" && ./fuzz_codec -max_total_time="${FUZZ_SECONDS:-60}" -max_len=8192 corpus)
}

fuzz_safetensors() {
    local dir="$OUT/corpus_safetensors" f fmt byte
    mkdir -p "$dir"
    for f in tests/models/repo/*/model.safetensors tests/models/broken/*/model.safetensors; do
        # first byte: format (byte % 3) and num_heads 4 ((byte >> 2) % 8 + 1)
        fmt=$(sed -n 's/.*"format": *"\([a-z0-9_]*\)".*/\1/p' "$(dirname "$f")/config.json")
        case "$fmt" in hf_bert) byte='\015' ;; hf_gpt2) byte='\016' ;; *) byte='\014' ;; esac
        { printf %b "$byte"; cat "$f"; } > "$dir/$(basename "$(dirname "$f")")"
    done
    read -r -a src <<< "$(mkvar FUZZ_ST_SRC)"
    read -r -a libs <<< "$(mkvar FUZZ_ST_LIBS)"
    clang "${CFLAGS[@]}" "${src[@]}" -o "$OUT/fuzz_safetensors" "${libs[@]}" -pthread
    (cd "$OUT" && ./fuzz_safetensors -max_total_time="${FUZZ_SECONDS:-60}" -max_len=16384 \
        -dict=../../tests/fuzz/safetensors.dict corpus_safetensors)
}

for target in ${FUZZ_TARGETS:-codec safetensors}; do
    case "$target" in
    codec) fuzz_codec ;;
    safetensors) fuzz_safetensors ;;
    *) echo "fuzz.sh: unknown target $target (codec, safetensors)" >&2; exit 2 ;;
    esac
done
