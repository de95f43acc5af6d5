# vkgrad — top-level build. `make` builds everything into build/.
#   make deps    install missing Debian packages (apt-get, idempotent)
#   make demo    deps + build + run the multi-client demo
#   make test    deps + build + unit and integration tests
#   make test-asan  the test suite under AddressSanitizer + UBSan

CC      ?= cc
BUILD   ?= build
VERSION := 0.1.0
SOMAJOR := 0
PKGS    := vulkan libuv msgpack libsystemd
SAN     ?=

CFLAGS_BASE = -std=c17 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -fPIC \
	-DVKG_VERSION=\"$(VERSION)\" -I. -Iproto -Iclient -I$(BUILD)/gen $(SAN)
CFLAGS_PKG  = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LIBS_PKG    = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
ALL_CFLAGS  = $(CFLAGS_BASE) $(CFLAGS_PKG) $(CFLAGS)
LDLIBS_ALL  = $(LIBS_PKG) -lpthread -lm $(SAN)

PROTO_SRC  := $(wildcard proto/*.c)
DAEMON_SRC := $(wildcard daemon/*.c)
CLIENT_LIB_SRC := client/vkgrad.c client/ref.c
CLI_SRC    := $(filter-out $(CLIENT_LIB_SRC),$(wildcard client/*.c))
SHADERS    := $(wildcard shaders/*.comp)
SPV_INC    := $(patsubst shaders/%.comp,$(BUILD)/gen/%.spv.inc,$(SHADERS))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

.PHONY: all deps demo test test-unit test-integration test-asan clean
all: $(BUILD)/vkgradd $(BUILD)/vkgrad $(BUILD)/libvkgrad.so $(BUILD)/libvkgrad.a

deps:
	@./scripts/deps.sh

$(BUILD)/gen/%.spv.inc: shaders/%.comp
	@mkdir -p $(@D)
	glslc -O --target-env=vulkan1.2 -mfmt=c $< -o $@

$(BUILD)/gen/kernel_registry_gen.c: $(SHADERS) $(SPV_INC) shaders/gen_registry.sh
	@mkdir -p $(@D)
	./shaders/gen_registry.sh $@ $(foreach s,$(SHADERS),$(s) $(patsubst shaders/%.comp,$(BUILD)/gen/%.spv.inc,$(s)))

$(BUILD)/obj/%.o: %.c $(wildcard proto/*.h daemon/*.h client/*.h)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Idaemon -c $< -o $@

$(BUILD)/obj/gen/kernel_registry_gen.o: $(BUILD)/gen/kernel_registry_gen.c daemon/kernel_registry.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Idaemon -c $< -o $@

$(BUILD)/vkgradd: $(call obj,$(DAEMON_SRC) $(PROTO_SRC)) $(BUILD)/obj/gen/kernel_registry_gen.o
	$(CC) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/libvkgrad.a: $(call obj,$(CLIENT_LIB_SRC) $(PROTO_SRC))
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libvkgrad.so.$(VERSION): $(call obj,$(CLIENT_LIB_SRC) $(PROTO_SRC))
	$(CC) -shared -Wl,-soname,libvkgrad.so.$(SOMAJOR) -o $@ $^ $(shell pkg-config --libs msgpack) -lpthread $(SAN)

$(BUILD)/libvkgrad.so: $(BUILD)/libvkgrad.so.$(VERSION)
	ln -sf libvkgrad.so.$(VERSION) $(BUILD)/libvkgrad.so.$(SOMAJOR)
	ln -sf libvkgrad.so.$(VERSION) $@

$(BUILD)/vkgrad: $(call obj,$(CLI_SRC)) $(BUILD)/libvkgrad.a
	$(CC) -o $@ $(call obj,$(CLI_SRC)) $(BUILD)/libvkgrad.a $(shell pkg-config --libs msgpack) -lpthread -lm $(SAN)

# ---- tests ----------------------------------------------------------------
UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNIT_BIN  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
INTEG_SRC := $(wildcard tests/integration/test_*.c)
INTEG_BIN := $(patsubst tests/integration/%.c,$(BUILD)/tests/%,$(INTEG_SRC))
TEST_COMMON := $(call obj,$(wildcard tests/common/*.c))

$(BUILD)/tests/test_%: tests/unit/test_%.c $(BUILD)/libvkgrad.a $(call obj,$(filter-out daemon/main.c,$(DAEMON_SRC))) $(BUILD)/obj/gen/kernel_registry_gen.o
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Idaemon -o $@ $< $(call obj,$(filter-out daemon/main.c,$(DAEMON_SRC))) $(BUILD)/obj/gen/kernel_registry_gen.o $(BUILD)/libvkgrad.a $(LDLIBS_ALL) $(shell pkg-config --libs cmocka)

$(BUILD)/tests/test_%: tests/integration/test_%.c $(TEST_COMMON) $(BUILD)/libvkgrad.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Itests/common -o $@ $< $(TEST_COMMON) $(BUILD)/libvkgrad.a $(LDLIBS_ALL) $(shell pkg-config --libs cmocka)

test-build: all $(UNIT_BIN) $(INTEG_BIN)

test:
	@./scripts/deps.sh
	@$(MAKE) --no-print-directory test-build
	@BUILD=$(BUILD) ./tests/run.sh $(UNIT_BIN) $(INTEG_BIN)

test-asan:
	@./scripts/deps.sh
	@$(MAKE) --no-print-directory BUILD=build-asan SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" test-build
	@BUILD=build-asan ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 ./tests/run.sh $(patsubst $(BUILD)/%,build-asan/%,$(UNIT_BIN) $(INTEG_BIN))

demo:
	@./scripts/deps.sh
	@$(MAKE) --no-print-directory all
	@./scripts/demo.sh $(BUILD)

clean:
	rm -rf build build-asan
