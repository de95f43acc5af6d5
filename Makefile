# vkgrad — top-level build. `make` builds everything into build/.
#   make deps    install missing Debian packages (apt-get, idempotent): DEPS=test
#                (default: everything), python (build+runtime, python) or demo
#                (build+runtime only); scripts/deps.sh
#   make demo    build+runtime packages + build + run the multi-client demo
#   make test    packages (test extras too) + build + unit and integration tests (TEST_JOBS binaries
#                at a time, default one per core: tests/run.sh)
#   make test-asan  the test suite under AddressSanitizer + UBSan
#   make test-valgrind  test_errors + test_lifecycle, every daemon under memcheck
#   make soak    one daemon, mixed clients for SOAK_SECONDS (600): growth verdict
#   make bench   deps + build + `vkgrad bench --compare` (daemon vs in-process)
#   make bench-kernels  deps + build + `vkgrad bench --kernels` (GPU time, TFLOP/s,
#                GB/s and max error per shape, dtype and kernel variant)

CC      ?= cc
BUILD   ?= build
VERSION := 0.2.0
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
# common/: plain-libc helpers the daemon and the CLI both link (an atomic
# file write); not in libvkgrad, whose exports are the client API
COMMON_SRC := $(wildcard common/*.c)
COMMON_OBJ  = $(call obj,$(COMMON_SRC))
# daemon/ by subsystem: net (listener, connections, replies), ops (a frame
# becomes a job), gpu (device, regions, pipelines), kernels (which kernels,
# recording), sched (classes, fair shares, batches, completion)
DAEMON_DIRS := daemon daemon/net daemon/ops daemon/gpu daemon/kernels daemon/sched
DAEMON_INC  := $(addprefix -I,$(DAEMON_DIRS))
DAEMON_SRC := $(foreach d,$(DAEMON_DIRS),$(wildcard $(d)/*.c))
# libvkgrad by noun (client/vkgrad_priv.h: what they share): the connection,
# its transport (frames, reply table, waiting), traces, queries (hello,
# stats, ping), regions, jobs, the raw call; abi.c its growing ABI, ref.c
# the float64 reference. The CLI is every other client/*.c.
CLIENT_LIB_SRC := client/connection.c client/transport.c client/trace.c client/queries.c \
                  client/regions.c client/jobs.c client/tensors.c client/optim.c client/raw_call.c \
                  client/abi.c client/ref.c
CLI_SRC    := $(filter-out $(CLIENT_LIB_SRC),$(wildcard client/*.c))
# vkgrad-bench (`vkgrad bench` runs it): its own program, since its direct
# mode runs the daemon's core in-process; it shares the CLI's helpers
BENCH_SRC  := $(wildcard bench/*.c) client/cli_util.c client/cli_task.c
SHADERS    := $(wildcard shaders/*.comp)
# every shader is built once per storage dtype (shaders/dtype.glsl)
DTYPES     := f32 f16 bf16
spv_of      = $(BUILD)/gen/$(basename $(notdir $(1))).$(2).spv.inc
SPV_INC    := $(foreach s,$(SHADERS),$(foreach d,$(DTYPES),$(call spv_of,$(s),$(d))))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

.PHONY: all deps demo bench bench-kernels test test-unit test-integration test-asan test-valgrind soak clean
all: $(BUILD)/vkgradd $(BUILD)/vkgrad $(BUILD)/vkgrad-bench $(BUILD)/libvkgrad.so \
	$(BUILD)/libvkgrad.a $(BUILD)/libvkgradd-core.a

deps:
	@./scripts/deps.sh $(DEPS)

# Shaders: each compiled by shaders/compile.sh with the toolchain that
# scripts/shader-tools.sh chose for what it needs (the system's glslc; for
# GL_KHR_cooperative_matrix / GL_EXT_bfloat16 where that lacks them, Debian
# sid's, fetched once into ~/.cache/vkgrad/shader-tools; else the kernel is
# left out), each module checked by spirv-val. VKGRAD_SHADER_TOOLS = auto
# (default) | system | fetch | none: see scripts/shader-tools.sh.
VKGRAD_SHADER_TOOLS ?= auto
SHADER_TOOLS_ENV := $(BUILD)/gen/shader-tools.env
# the setting, rewritten only when it changes (so a change re-probes)
$(BUILD)/gen/shader-tools.mode: FORCE
	@mkdir -p $(@D)
	@echo "$(VKGRAD_SHADER_TOOLS)" | cmp -s - $@ || echo "$(VKGRAD_SHADER_TOOLS)" >$@
$(SHADER_TOOLS_ENV): $(BUILD)/gen/shader-tools.mode scripts/shader-tools.sh $(wildcard shaders/features/*.comp)
	@./scripts/shader-tools.sh probe $@ $(VKGRAD_SHADER_TOOLS)
SHADER_DEPS = $(wildcard shaders/*.glsl shaders/iface/*.h) $(SHADER_TOOLS_ENV) shaders/compile.sh
$(BUILD)/gen/%.f32.spv.inc: shaders/%.comp $(SHADER_DEPS)
	@./shaders/compile.sh $(SHADER_TOOLS_ENV) $< f32 $@
$(BUILD)/gen/%.f16.spv.inc: shaders/%.comp $(SHADER_DEPS)
	@./shaders/compile.sh $(SHADER_TOOLS_ENV) $< f16 $@
$(BUILD)/gen/%.bf16.spv.inc: shaders/%.comp $(SHADER_DEPS)
	@./shaders/compile.sh $(SHADER_TOOLS_ENV) $< bf16 $@
.PHONY: FORCE
FORCE:

$(BUILD)/gen/kernel_registry_gen.c: $(SHADERS) $(SPV_INC) shaders/gen_registry.sh
	@mkdir -p $(@D)
	@echo "gen_registry $@"
	@./shaders/gen_registry.sh $@ $(foreach s,$(SHADERS),$(foreach d,$(DTYPES),$(s) $(d) $(call spv_of,$(s),$(d))))

# Layers: proto/, common/, client/ and the tests' helpers compile without
# daemon/ on the include path, so none of them can include a daemon header;
# the daemon and the benchmark (which embeds the daemon's core) see it.
# common/ headers are included by path ("common/atomic_file.h").
HDRS := $(wildcard proto/*.h common/*.h $(addsuffix /*.h,$(DAEMON_DIRS)) client/*.h bench/*.h shaders/iface/*.h)
$(BUILD)/obj/%.o: %.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/obj/daemon/%.o: daemon/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(DAEMON_INC) -c $< -o $@

$(BUILD)/obj/bench/%.o: bench/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(DAEMON_INC) -Ibench -c $< -o $@

$(BUILD)/obj/gen/kernel_registry_gen.o: $(BUILD)/gen/kernel_registry_gen.c daemon/kernels/kernel_registry.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(DAEMON_INC) -c $< -o $@

$(BUILD)/vkgradd: $(call obj,$(DAEMON_SRC) $(PROTO_SRC) $(COMMON_SRC)) $(BUILD)/obj/gen/kernel_registry_gen.o
	$(CC) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/libvkgrad.a: $(call obj,$(CLIENT_LIB_SRC) $(PROTO_SRC))
	rm -f $@ && ar rcs $@ $^

# The shared library exports exactly the functions client/vkgrad.h declares
# (a version script made from it): proto_* and vkg_ref_* stay internal, in
# libvkgrad.a for the CLI and the tests (tests/build/test_exports.sh).
$(BUILD)/gen/libvkgrad.map: client/vkgrad.h
	@mkdir -p $(@D)
	@{ echo '{ global:'; \
	   sed -n 's/^[A-Za-z_][A-Za-z0-9_ *]*[ *]\(vkg_[a-z0-9_]*\)(.*/  \1;/p' $<; \
	   echo '  local: *; };'; } >$@

$(BUILD)/libvkgrad.so.$(VERSION): $(call obj,$(CLIENT_LIB_SRC) $(PROTO_SRC)) $(BUILD)/gen/libvkgrad.map
	$(CC) -shared -Wl,-soname,libvkgrad.so.$(SOMAJOR) -Wl,--version-script=$(BUILD)/gen/libvkgrad.map \
		-o $@ $(call obj,$(CLIENT_LIB_SRC) $(PROTO_SRC)) $(shell pkg-config --libs msgpack) -lpthread -lm $(SAN)

$(BUILD)/libvkgrad.so: $(BUILD)/libvkgrad.so.$(VERSION)
	ln -sf libvkgrad.so.$(VERSION) $(BUILD)/libvkgrad.so.$(SOMAJOR)
	ln -sf libvkgrad.so.$(VERSION) $@

# The daemon without its main(), with common/: what `vkgrad-bench --direct`
# (bench/) runs in-process. It needs proto/ too, which libvkgrad.a carries,
# so link it before that.
CORE_OBJ := $(call obj,$(filter-out daemon/main.c,$(DAEMON_SRC))) $(BUILD)/obj/gen/kernel_registry_gen.o \
	$(COMMON_OBJ)
$(BUILD)/libvkgradd-core.a: $(CORE_OBJ)
	rm -f $@ && ar rcs $@ $^

# The user's CLI links libvkgrad and libsystemd (sd-bus, to see whether a
# socket unit listens: client/socket_state.c); `vkgrad bench` execs vkgrad-bench.
$(BUILD)/vkgrad: $(call obj,$(CLI_SRC)) $(COMMON_OBJ) $(BUILD)/libvkgrad.a
	$(CC) -o $@ $(call obj,$(CLI_SRC)) $(COMMON_OBJ) $(BUILD)/libvkgrad.a \
		$(shell pkg-config --libs msgpack libsystemd) -lpthread -lm $(SAN)

$(BUILD)/vkgrad-bench: $(call obj,$(BENCH_SRC)) $(BUILD)/libvkgradd-core.a $(BUILD)/libvkgrad.a
	$(CC) -o $@ $(call obj,$(BENCH_SRC)) $(BUILD)/libvkgradd-core.a $(BUILD)/libvkgrad.a \
		$(shell pkg-config --libs vulkan libuv msgpack) -lpthread -lm $(SAN)

# ---- tests ----------------------------------------------------------------
UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNIT_BIN  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
INTEG_SRC := $(wildcard tests/integration/test_*.c)
INTEG_BIN := $(patsubst tests/integration/%.c,$(BUILD)/tests/%,$(INTEG_SRC))
TEST_COMMON := $(call obj,$(wildcard tests/common/*.c))
# python/vkgrad against real daemons (unittest, /usr/bin/python3 with Debian's
# numpy and torch); scripts that run.sh runs like the test binaries
PY_TESTS  := tests/python/test_python tests/python/test_python_survive tests/python/test_python_package \
             tests/python/test_python_ops \
             tests/python/test_pytorch tests/python/test_pytorch_regions \
             tests/python/test_train_smoke_run tests/python/test_ddp_run \
             tests/python/test_resident_run tests/python/test_train_bench_run
# what libvkgrad.so exports; the build's shader toolchain, both ways (fetched
# or system tools, and an offline build without them into $(BUILD)/offline);
# no loop between the files of one folder (from the objects' symbols)
BUILD_TESTS := tests/build/test_exports.sh tests/build/test_shader_tools.sh tests/build/test_abi.sh \
               tests/build/test_deps.sh tests/build/test_layers.sh

# Unit tests link the daemon's objects and, of tests/common, only what does
# no I/O (growth.c); they learn the shader sources and dtypes the registry is
# built from (test_kernel_registry counts against them).
UNIT_COMMON := $(call obj,tests/common/growth.c)
UNIT_DEFS   := '-DVKG_TEST_SHADER_DIR="$(CURDIR)/shaders"' '-DVKG_TEST_DTYPES="$(DTYPES)"'
$(BUILD)/tests/test_%: tests/unit/test_%.c $(BUILD)/libvkgrad.a $(call obj,$(filter-out daemon/main.c,$(DAEMON_SRC))) $(BUILD)/obj/gen/kernel_registry_gen.o $(COMMON_OBJ) $(UNIT_COMMON)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(UNIT_DEFS) $(DAEMON_INC) -Itests/common -o $@ $< $(call obj,$(filter-out daemon/main.c,$(DAEMON_SRC))) $(BUILD)/obj/gen/kernel_registry_gen.o $(COMMON_OBJ) $(UNIT_COMMON) $(BUILD)/libvkgrad.a $(LDLIBS_ALL) $(shell pkg-config --libs cmocka)

# bench/peak_ref.c (bench --peak's references and check) has neither Vulkan
# nor daemon code in it: its test links it alone
$(BUILD)/tests/test_peak_ref: tests/unit/test_peak_ref.c $(BUILD)/obj/bench/peak_ref.o
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Ibench -o $@ $< $(BUILD)/obj/bench/peak_ref.o $(LDLIBS_ALL) $(shell pkg-config --libs cmocka)

# client/cli_task.c (the CLI's and the bench's jobs and their references)
# without a daemon: with the client library alone
$(BUILD)/tests/test_cli_task: tests/unit/test_cli_task.c $(BUILD)/obj/client/cli_task.o $(BUILD)/obj/client/cli_util.o $(BUILD)/libvkgrad.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Iclient -o $@ $< $(BUILD)/obj/client/cli_task.o $(BUILD)/obj/client/cli_util.o $(BUILD)/libvkgrad.a $(LDLIBS_ALL) $(shell pkg-config --libs cmocka)

# bench/peak_copy.c (bench --peak's copy line) on the device: with the
# bench's Vulkan helpers and the daemon's device code
PEAK_COPY_OBJ := $(call obj,bench/peak_copy.c bench/peak_vk.c bench/peak_ref.c)
$(BUILD)/tests/test_peak_copy: tests/unit/test_peak_copy.c $(PEAK_COPY_OBJ) $(BUILD)/libvkgrad.a $(call obj,$(filter-out daemon/main.c,$(DAEMON_SRC))) $(BUILD)/obj/gen/kernel_registry_gen.o $(COMMON_OBJ)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(DAEMON_INC) -Ibench -o $@ $< $(PEAK_COPY_OBJ) $(call obj,$(filter-out daemon/main.c,$(DAEMON_SRC))) $(BUILD)/obj/gen/kernel_registry_gen.o $(COMMON_OBJ) $(BUILD)/libvkgrad.a $(LDLIBS_ALL) $(shell pkg-config --libs cmocka)

$(BUILD)/tests/test_%: tests/integration/test_%.c $(TEST_COMMON) $(BUILD)/libvkgrad.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Itests/common -o $@ $< $(TEST_COMMON) $(BUILD)/libvkgrad.a $(LDLIBS_ALL) $(shell pkg-config --libs cmocka)

# The soak (make soak): built with the tests so that it keeps compiling.
SOAK_SRC := $(wildcard tests/soak/*.c)
$(BUILD)/tests/soak: $(SOAK_SRC) tests/soak/soak.h $(TEST_COMMON) $(BUILD)/libvkgrad.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Itests/common -Itests/soak -o $@ $(SOAK_SRC) $(TEST_COMMON) $(BUILD)/libvkgrad.a $(LDLIBS_ALL) $(shell pkg-config --libs cmocka)

test-build: all $(UNIT_BIN) $(INTEG_BIN) $(BUILD)/tests/soak

# `make test` builds with a job per core unless given -j itself
TEST_BUILD_J = $(if $(findstring -j,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 1))
test:
	@./scripts/deps.sh test
	@$(MAKE) --no-print-directory $(TEST_BUILD_J) test-build
	@BUILD=$(BUILD) ./tests/run.sh $(UNIT_BIN) $(INTEG_BIN) $(PY_TESTS) $(BUILD_TESTS)

test-asan:
	@./scripts/deps.sh test
	@$(MAKE) --no-print-directory BUILD=build-asan SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" test-build
	@BUILD=build-asan ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
		VKGRAD_KEEP_DRIVERS=libvulkan_lvp.so:libVkLayer_khronos_validation.so:libVkLayer_MESA_device_select.so \
		./tests/run.sh $(patsubst $(BUILD)/%,build-asan/%,$(UNIT_BIN) $(INTEG_BIN)) $(PY_TESTS)

# Every daemon that test_errors and test_lifecycle start runs under valgrind's
# memcheck (tests/common/daemon_proc.c: VKGRAD_TEST_DAEMON_WRAPPER); a memory
# error or a definite leak makes it exit 99, which daemon_proc_stop fails on.
# Driver-internal reports are suppressed in tests/valgrind.supp; the driver
# stays mapped so its frames have names. Without the validation layer (`make
# test` runs it; under valgrind its own leaks and time-outs would drown ours).
# lavapipe under valgrind is slow (~15 s per daemon start): a few minutes.
VALGRIND_TESTS := $(BUILD)/tests/test_errors $(BUILD)/tests/test_lifecycle
VALGRIND_CMD   := valgrind --leak-check=full --errors-for-leak-kinds=definite \
	--error-exitcode=99 --num-callers=30 --suppressions=$(CURDIR)/tests/valgrind.supp
test-valgrind:
	@./scripts/deps.sh test valgrind
	@$(MAKE) --no-print-directory test-build
	@BUILD=$(BUILD) TEST_TIMEOUT=1800 VKGRAD_TEST_DAEMON_WRAPPER="$(VALGRIND_CMD)" \
		VKGRAD_TEST_VALIDATION=0 VKGRAD_KEEP_DRIVERS=libvulkan_lvp.so \
		./tests/run.sh $(VALGRIND_TESTS)

# One daemon, mixed clients for SOAK_SECONDS (default 600), its memory and
# descriptors sampled every second, a verdict on their growth (tests/soak/soak.h).
# Not in CI.
SOAK_SECONDS ?= 600
soak:
	@./scripts/deps.sh test
	@$(MAKE) --no-print-directory all $(BUILD)/tests/soak
	@BUILD=$(BUILD) SOAK_SECONDS=$(SOAK_SECONDS) $(BUILD)/tests/soak

demo:
	@./scripts/deps.sh demo
	@$(MAKE) --no-print-directory all
	@./scripts/demo.sh $(BUILD)

bench:
	@./scripts/deps.sh demo
	@$(MAKE) --no-print-directory all
	@$(BUILD)/vkgrad bench --compare

# Starts its own daemon with region limits raised for the large shapes; on a
# CPU device (lavapipe) shapes above 1 GFLOP are skipped (--max-gflop).
bench-kernels:
	@./scripts/deps.sh demo
	@$(MAKE) --no-print-directory all
	@$(BUILD)/vkgrad bench --kernels

clean:
	rm -rf build build-asan python/build python/vkgrad.egg-info

# ---- install ----------------------------------------------------------------
#   make install [PREFIX=/usr/local] [DESTDIR=/staging]    make uninstall
# (also the user units of systemd/user/ into USERUNITDIR: systemctl --user
# enable --now vkgradd.socket gives a user a daemon of their own)
# Daemon and CLI in bin, libvkgrad.so.$(VERSION) with its soname and dev
# symlinks, libvkgrad.a, vkgrad.h, vkgrad.pc, the systemd units (vkgradd,
# the per-GPU templates vkgradd@, the metrics timer and service), the
# sysusers.d entry for the vkgrad user/group, man pages, a commented
# config file (kept when one is there already), and the Python package
# (python/vkgrad, into PYTHONDIR: the system's dist-packages for PREFIX=/usr,
# else PREFIX/lib/pythonX.Y/dist-packages, which Debian's python3 searches
# for /usr/local), told where libvkgrad.so.0 went.
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
LIBDIR      ?= $(PREFIX)/lib
INCLUDEDIR  ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
MANDIR      ?= $(PREFIX)/share/man
SYSCONFDIR  ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
UNITDIR     ?= $(PREFIX)/lib/systemd/system
USERUNITDIR ?= $(PREFIX)/lib/systemd/user
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
PYTHON      ?= /usr/bin/python3
PYVER        = $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3)
PYTHONDIR   ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/lib/python3/dist-packages,$(PREFIX)/lib/python$(PYVER)/dist-packages)
PY_SRC      := $(filter-out python/vkgrad/_install.py,$(wildcard python/vkgrad/*.py))
SUBST = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@BINDIR@|$(BINDIR)|g' \
	-e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
	-e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' -e 's|@VERSION@|$(VERSION)|g'

.PHONY: install uninstall
install: $(BUILD)/vkgradd $(BUILD)/vkgrad $(BUILD)/vkgrad-bench $(BUILD)/libvkgrad.so $(BUILD)/libvkgrad.a
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) \
		$(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(UNITDIR) $(DESTDIR)$(USERUNITDIR) $(DESTDIR)$(SYSUSERSDIR) \
		$(DESTDIR)$(SYSCONFDIR)/vkgrad $(DESTDIR)$(MANDIR)/man3
	install -m 0755 $(BUILD)/vkgradd $(BUILD)/vkgrad $(BUILD)/vkgrad-bench $(DESTDIR)$(BINDIR)/
	install -m 0755 $(BUILD)/libvkgrad.so.$(VERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libvkgrad.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libvkgrad.so.$(SOMAJOR)
	ln -sf libvkgrad.so.$(SOMAJOR) $(DESTDIR)$(LIBDIR)/libvkgrad.so
	install -m 0644 $(BUILD)/libvkgrad.a $(DESTDIR)$(LIBDIR)/
	install -m 0644 client/vkgrad.h $(DESTDIR)$(INCLUDEDIR)/
	$(SUBST) client/vkgrad.pc.in >$(DESTDIR)$(PKGCONFIGDIR)/vkgrad.pc
	$(SUBST) systemd/vkgradd.service.in >$(DESTDIR)$(UNITDIR)/vkgradd.service
	$(SUBST) systemd/vkgradd.socket.in >$(DESTDIR)$(UNITDIR)/vkgradd.socket
	$(SUBST) systemd/vkgradd@.service.in >$(DESTDIR)$(UNITDIR)/vkgradd@.service
	$(SUBST) systemd/vkgradd@.socket.in >$(DESTDIR)$(UNITDIR)/vkgradd@.socket
	$(SUBST) systemd/vkgrad-metrics.service.in >$(DESTDIR)$(UNITDIR)/vkgrad-metrics.service
	install -m 0644 systemd/vkgrad-metrics.timer $(DESTDIR)$(UNITDIR)/
	install -m 0644 systemd/user/vkgradd.socket $(DESTDIR)$(USERUNITDIR)/
	$(SUBST) systemd/user/vkgradd.service.in >$(DESTDIR)$(USERUNITDIR)/vkgradd.service
	chmod 0644 $(DESTDIR)$(USERUNITDIR)/vkgradd.service
	chmod 0644 $(DESTDIR)$(PKGCONFIGDIR)/vkgrad.pc $(DESTDIR)$(UNITDIR)/vkgradd.service \
		$(DESTDIR)$(UNITDIR)/vkgradd.socket $(DESTDIR)$(UNITDIR)/vkgradd@.service \
		$(DESTDIR)$(UNITDIR)/vkgradd@.socket $(DESTDIR)$(UNITDIR)/vkgrad-metrics.service
	install -m 0644 systemd/vkgrad.sysusers $(DESTDIR)$(SYSUSERSDIR)/vkgrad.conf
	install -m 0644 man/vkgradd.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 man/vkgrad.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 man/vkgrad.3 $(DESTDIR)$(MANDIR)/man3/
	[ -e $(DESTDIR)$(SYSCONFDIR)/vkgrad/vkgradd.conf ] || \
		install -m 0644 systemd/vkgradd.conf $(DESTDIR)$(SYSCONFDIR)/vkgrad/vkgradd.conf
	install -d $(DESTDIR)$(PYTHONDIR)/vkgrad
	install -m 0644 $(PY_SRC) python/vkgrad/py.typed $(DESTDIR)$(PYTHONDIR)/vkgrad/
	printf '# Written by make install.\nLIBDIR = "%s"\n' '$(LIBDIR)' >$(DESTDIR)$(PYTHONDIR)/vkgrad/_install.py
	chmod 0644 $(DESTDIR)$(PYTHONDIR)/vkgrad/_install.py
	@[ -n "$(DESTDIR)" ] || echo "install: now run 'systemd-sysusers; systemctl daemon-reload; systemctl enable --now vkgradd.socket'"

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/vkgradd $(DESTDIR)$(BINDIR)/vkgrad $(DESTDIR)$(BINDIR)/vkgrad-bench \
		$(DESTDIR)$(LIBDIR)/libvkgrad.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libvkgrad.so.$(SOMAJOR) \
		$(DESTDIR)$(LIBDIR)/libvkgrad.so $(DESTDIR)$(LIBDIR)/libvkgrad.a \
		$(DESTDIR)$(INCLUDEDIR)/vkgrad.h $(DESTDIR)$(PKGCONFIGDIR)/vkgrad.pc \
		$(DESTDIR)$(UNITDIR)/vkgradd.service $(DESTDIR)$(UNITDIR)/vkgradd.socket \
		$(DESTDIR)$(UNITDIR)/vkgradd@.service $(DESTDIR)$(UNITDIR)/vkgradd@.socket \
		$(DESTDIR)$(UNITDIR)/vkgrad-metrics.service $(DESTDIR)$(UNITDIR)/vkgrad-metrics.timer \
		$(DESTDIR)$(USERUNITDIR)/vkgradd.socket $(DESTDIR)$(USERUNITDIR)/vkgradd.service \
		$(DESTDIR)$(MANDIR)/man3/vkgrad.3 \
		$(DESTDIR)$(SYSUSERSDIR)/vkgrad.conf \
		$(DESTDIR)$(MANDIR)/man8/vkgradd.8 $(DESTDIR)$(MANDIR)/man1/vkgrad.1
	! cmp -s systemd/vkgradd.conf $(DESTDIR)$(SYSCONFDIR)/vkgrad/vkgradd.conf || \
		rm -f $(DESTDIR)$(SYSCONFDIR)/vkgrad/vkgradd.conf
	rmdir $(DESTDIR)$(SYSCONFDIR)/vkgrad 2>/dev/null || true
	rm -rf $(DESTDIR)$(PYTHONDIR)/vkgrad

# ---- fuzzing ------------------------------------------------------------------
#   make fuzz [FUZZ_SECONDS=60]  build the libFuzzer targets of tests/fuzz/ (clang,
#       ASan+UBSan) into $(BUILD)/fuzz/ and run each for FUZZ_SECONDS on a scratch
#       copy of its seed corpus; fails when one crashes, leaks, times out, passes
#       -malloc_limit_mb or breaks one of its invariants.
#   make fuzz-corpus  rewrite the seeds in tests/fuzz/corpus/ with make_corpus.c
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_TARGETS := frame request
FUZZ_LIBS     = $(shell pkg-config --libs msgpack) -lm
FUZZ_CFLAGS   = -std=c17 -O1 -g -fno-omit-frame-pointer -Wall -Wextra -Werror -D_GNU_SOURCE \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I. -Iproto \
	$(shell pkg-config --cflags msgpack)
# Longest input: fuzz_frame's header and two max_frame frames; one body.
FUZZ_MAXLEN_frame   := 131200
FUZZ_MAXLEN_request := 65536

.PHONY: fuzz fuzz-build fuzz-corpus
fuzz:
	@./scripts/fuzz-deps.sh
	@$(MAKE) --no-print-directory fuzz-build
	@rc=0; $(foreach t,$(FUZZ_TARGETS),./tests/fuzz/run.sh $(t) $(FUZZ_DIR)/fuzz_$(t) \
		tests/fuzz/corpus/$(t) $(FUZZ_DIR) $(FUZZ_SECONDS) $(FUZZ_MAXLEN_$(t)) || rc=1;) \
		exit $$rc

fuzz-build: $(patsubst %,$(FUZZ_DIR)/fuzz_%,$(FUZZ_TARGETS))

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(PROTO_SRC) $(wildcard proto/*.h)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(PROTO_SRC) $(FUZZ_LIBS)

$(FUZZ_DIR)/make_corpus: tests/fuzz/make_corpus.c $(PROTO_SRC) $(wildcard proto/*.h)
	@mkdir -p $(@D)
	$(CC) -std=c17 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -I. -Iproto \
		$(shell pkg-config --cflags msgpack) -o $@ $< $(PROTO_SRC) $(FUZZ_LIBS)

fuzz-corpus: $(FUZZ_DIR)/make_corpus
	rm -rf tests/fuzz/corpus
	$(FUZZ_DIR)/make_corpus tests/fuzz/corpus
