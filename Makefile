# Attention service -- one non-recursive Makefile.
#
#   make                 build everything under build/
#   make run             install what is missing, build, start the service
#   make test            install what is missing, build, run every test
#   make SANITIZE=address,undefined test   the same under sanitizers (build/san/)
#   make clean

CC      ?= cc
OPT     ?= -O2 -g
WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS  += -std=gnu11 $(OPT) $(WARN) -MMD -MP -pthread -I. \
           $(shell pkg-config --cflags openblas 2>/dev/null)
LDFLAGS += -pthread
BLAS_LIBS := $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)

ifdef SANITIZE
BUILD   := build/san
CFLAGS  += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SANITIZE)
else
BUILD   := build
endif

CORE_SRC  := core/attention.c
CORE_OBJ  := $(CORE_SRC:%.c=$(BUILD)/%.o)

DEMO      := $(BUILD)/attention-demo
DEMO_SRC  := examples/demo.c

UNIT      := $(BUILD)/tests/unit
UNIT_SRC  := tests/test_attention.c tests/golden.c tests/check.c
UNIT_OBJ  := $(UNIT_SRC:%.c=$(BUILD)/%.o)

ALL_OBJ   := $(CORE_OBJ) $(UNIT_OBJ) $(DEMO_SRC:%.c=$(BUILD)/%.o)

.PHONY: all run test unit deps-build deps-test clean

all: $(DEMO) $(UNIT)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(DEMO): $(BUILD)/examples/demo.o $(CORE_OBJ)
	$(CC) $(LDFLAGS) $^ -o $@ $(BLAS_LIBS) -lm

$(UNIT): $(UNIT_OBJ) $(CORE_OBJ)
	$(CC) $(LDFLAGS) $^ -o $@ -lcriterion -ljansson $(BLAS_LIBS) -lm

deps-build:
	@scripts/deps.sh build

deps-test:
	@scripts/deps.sh test

run: deps-build
	$(MAKE) $(DEMO)
	$(DEMO)

# Criterion runs tests in worker processes, two at a time (two cores).
# allocator_may_return_null: the out-of-memory test asks for exabytes and
# expects NULL back, which ASan otherwise turns into an abort.
unit: $(UNIT)
	ASAN_OPTIONS=allocator_may_return_null=1 $(UNIT) --jobs 2

test: deps-test
	$(MAKE) unit

clean:
	rm -rf build

-include $(ALL_OBJ:.o=.d)
