# snapfs - build, test and install.
#
#   make                 build build/snapfs (optimised, with debug info)
#   make test            build with ASan/UBSan and run every test (unit + integration)
#   make unit            build and run the C unit tests only
#   make fuzz            build the libFuzzer targets with clang and run each FUZZ_SECONDS (300)
#   make chaos           the chaos test's long profile (CHAOS_ROUNDS 300, CHAOS_SECONDS 3600)
#   make install PREFIX=/usr/local   the daemon, its agent, snapfs-image, make-image.sh, the man pages, the systemd unit
#   make deb             the Debian package (dpkg-buildpackage -b) into build/deb/ (docs/packaging.md)
#   make bench           build the benchmarks' C programs (bench/*.c) into build/bench/; runs none
#   make example-python  run examples/python-app/run.sh (root; Debian's mirror the first time; minutes)
#   make format          clang-format every source file
#   make format-check    fail on a source file clang-format would change

# Build with every core: JOBS (default: nproc) jobs, unless -jN is given
# (it wins) or clean is among the goals (it would race the build). Only the
# top-level make: a make the tests or dpkg-buildpackage start gets what they pass.
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
ifeq ($(MAKELEVEL)$(filter clean,$(MAKECMDGOALS)),0)
MAKEFLAGS += -j$(JOBS)
endif

PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
# The agent, the program snapfs runs inside each sandbox (runtime/agent/).
LIBEXECDIR ?= $(PREFIX)/libexec/snapfs
# Units: Debian bookworm's place (pkg-config systemd: systemdsystemunitdir)
# for PREFIX=/usr, the package's; under any other PREFIX, so that a source
# install never overwrites the packaged unit (systemd reads
# /usr/local/lib/systemd/system too).
ifeq ($(PREFIX),/usr)
UNITDIR ?= /lib/systemd/system
else
UNITDIR ?= $(PREFIX)/lib/systemd/system
endif
VERSION := 0.1.0
PKGS    := fuse3 sqlite3 libcurl libzstd libcjson libcrypto libnl-route-3.0 libnftables

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS))

CC      ?= cc
WARN    := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wno-format-nonliteral -Wvla
CFLAGS  ?= -O2 -g
# CPPFLAGS and LDFLAGS: dpkg-buildflags' hardening (debian/rules) reaches every object and link.
ALL_CFLAGS = $(CPPFLAGS) -std=c17 -D_GNU_SOURCE -DSNAPFS_VERSION='"$(VERSION)"' -DSNAPFS_AGENT_DEFAULT='"$(LIBEXECDIR)/snapfs-agent"' -I. $(WARN) $(PKG_CFLAGS) -pthread -MMD -MP $(CFLAGS)
LDLIBS  := $(LDFLAGS) $(PKG_LIBS) -pthread

SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# The folders are the layers (docs/architecture.md): each uses only those after it.
LIB_SRCS := $(wildcard fs/*.c ops/*.c runtime/*.c runtime/*/*.c backend/*/*.c lib/*.c)
MAIN_SRC := main.c
UNIT_SRCS := $(wildcard tests/unit/test_*.c)

OBJ = $(patsubst %.c,$(1)/%.o,$(2))

.PHONY: all test unit install format format-check bench clean integration fuzz fuzz-build chaos deb example-python
# Keep the unit tests' objects: make would otherwise delete them after `make test`
# and print that last, after the suite's closing "N passed, N failed" line.
.SECONDARY:

all: build/snapfs build/snapfs-agent

# The agent runs inside sandboxes whatever their image: static, with musl
# (glibc's static binaries abort under runsc exec --exec-fd), the C library
# and runtime/agent/wire.c alone, none of the daemon's flags or sanitizers.
AGENT_CC   ?= musl-gcc
AGENT_SRCS := $(wildcard runtime/agent/inside/*.c) runtime/agent/wire.c
build/snapfs-agent: $(AGENT_SRCS) runtime/agent/inside/inside.h runtime/agent/wire.h
	@mkdir -p $(dir $@)
	$(AGENT_CC) -static -Os -std=gnu17 -I. -Wall -Wextra -Werror -Wshadow -o $@ $(AGENT_SRCS)
	@if readelf -l $@ | grep -q INTERP; then echo "$@ is not static" >&2; rm -f $@; exit 1; fi

build/snapfs: $(call OBJ,build/rel,$(LIB_SRCS) $(MAIN_SRC))
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

build/asan/snapfs: $(call OBJ,build/asan,$(LIB_SRCS) $(MAIN_SRC))
	$(CC) $(ALL_CFLAGS) $(SAN) -o $@ $^ $(LDLIBS)

build/rel/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

build/asan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN) -c -o $@ $<

# Each tests/unit/test_X.c is one program linked with every module but main.
build/asan/tests/unit/%: build/asan/tests/unit/%.o $(call OBJ,build/asan,$(LIB_SRCS))
	$(CC) $(ALL_CFLAGS) $(SAN) -o $@ $^ $(LDLIBS)

UNIT_BINS := $(patsubst %.c,build/asan/%,$(UNIT_SRCS))

# test_store_oom makes one allocation of the store fail: every calloc of its
# program goes through the test's __wrap_calloc().
build/asan/tests/unit/test_store_oom: LDLIBS += -Wl,--wrap=calloc
# test_store_records counts the manifests a store reads: its objstore's gets go through the test.
build/asan/tests/unit/test_store_records: LDLIBS += -Wl,--wrap=objstore_local_open

# test_agent_plain tests a file of the agent (built with musl, not in LIB_SRCS) with the host's compiler.
build/asan/tests/unit/test_agent_plain: build/asan/runtime/agent/inside/plain.o

unit: $(UNIT_BINS)
	@tests/run-unit.sh $(UNIT_BINS)

# The benchmarks' C programs (bench/*.c, which bench/*.sh run), built so that
# they keep compiling: each linked like a unit test, with every module but
# main; pause_ticker runs inside a sandbox, so it is static and needs no module.
BENCH_BINS := $(patsubst bench/%.c,build/bench/%,$(wildcard bench/*.c))

bench: $(BENCH_BINS)

build/bench/pause_ticker: bench/pause_ticker.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -static -o $@ $<

build/bench/%: build/rel/bench/%.o $(call OBJ,build/rel,$(LIB_SRCS))
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

# libFuzzer targets (tests/fuzz/fuzz_X.c, one per parser of untrusted bytes):
# clang only, every module built again with coverage, ASan and UBSan into an
# archive, so each target links just the modules its parser needs. UB aborts
# (no recovery), so the fuzzer counts it as a crash; leaks are found by ASan.
FUZZ_CC    ?= clang
FUZZ_SAN   := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_SRCS  := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS  := $(patsubst tests/fuzz/%.c,build/fuzz/%,$(FUZZ_SRCS))
FUZZ_SECONDS ?= 300

build/fuzz/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(ALL_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link -c -o $@ $<

build/fuzz/libsnapfs.a: $(call OBJ,build/fuzz,$(LIB_SRCS))
	rm -f $@
	ar rcs $@ $^

build/fuzz/fuzz_%: build/fuzz/tests/fuzz/fuzz_%.o build/fuzz/libsnapfs.a
	$(FUZZ_CC) $(ALL_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)

fuzz-build: $(FUZZ_BINS)

# Each target for FUZZ_SECONDS from its seed corpus, two at a time; new inputs
# accumulate in build/fuzz/corpus/, crashes land in build/fuzz/artifacts/.
fuzz: $(FUZZ_BINS)
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_KEEP=1 tests/fuzz/run.sh

# The whole suite: unit tests, integration tests on a real mount, then each
# fuzz target for 30 s on its seed corpus (tests/run.sh; `make fuzz` is the long run).
# The suite runs without this make's job flags: a make a test starts (make
# deb) sees what it would under a plain `make test`.
test: build/asan/snapfs build/snapfs-agent $(UNIT_BINS) $(FUZZ_BINS)
	env -u MAKEFLAGS -u MFLAGS tests/run.sh

# tests/integration/test_chaos.sh for longer than the suite's profile (30
# rounds): kill -9 of the daemon in the middle of random operations. The
# last round's checks may outlast CHAOS_SECONDS: 15 minutes more at most.
CHAOS_ROUNDS  ?= 300
CHAOS_SECONDS ?= 3600
chaos: build/asan/snapfs
	CHAOS_ROUNDS=$(CHAOS_ROUNDS) CHAOS_SECONDS=$(CHAOS_SECONDS) \
		timeout -k 60 $$(($(CHAOS_SECONDS) + 900)) bash tests/integration/test_chaos.sh

# snapfs(8) and snapfs-image(8) from their scdoc sources (Debian's scdoc package).
MANPAGES := build/snapfs.8 build/snapfs-image.8
build/%.8: docs/man/%.8.scd
	@mkdir -p $(dir $@)
	scdoc <$< >$@

# The unit names the binary where this install puts it.
install: build/snapfs build/snapfs-agent $(MANPAGES)
	install -D -m 0755 build/snapfs $(DESTDIR)$(BINDIR)/snapfs
	install -D -m 0755 build/snapfs-agent $(DESTDIR)$(LIBEXECDIR)/snapfs-agent
	install -D -m 0755 scripts/snapfs-image $(DESTDIR)$(BINDIR)/snapfs-image
	install -D -m 0755 scripts/make-image.sh $(DESTDIR)$(PREFIX)/share/snapfs/make-image.sh
	install -D -m 0644 build/snapfs.8 $(DESTDIR)$(MANDIR)/man8/snapfs.8
	install -D -m 0644 build/snapfs-image.8 $(DESTDIR)$(MANDIR)/man8/snapfs-image.8
	install -D -m 0755 examples/walkthrough.sh $(DESTDIR)$(PREFIX)/share/doc/snapfs/examples/walkthrough.sh
	install -d -m 0755 $(DESTDIR)$(UNITDIR)
	sed 's|@BINDIR@|$(BINDIR)|g' systemd/snapfs.service >$(DESTDIR)$(UNITDIR)/snapfs.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/snapfs.service

# The package, built in a copy of the tree (dpkg-buildpackage cleans the tree it
# builds in: `make clean` there, never here); the .deb lands in build/deb/.
DEB_SRC := build/deb/snapfs-$(VERSION)
deb:
	rm -rf build/deb
	mkdir -p $(DEB_SRC)
	tar --exclude=./build --exclude=./.git --exclude=./tests/doubles/node_modules -cf - . | tar -xf - -C $(DEB_SRC)
	cd $(DEB_SRC) && dpkg-buildpackage -b -us -uc

# A Python service cold against forked warm (examples/python-app/README.md): not
# part of `make test`, it needs minutes and Debian's mirror.
example-python: build/snapfs
	examples/python-app/run.sh

# Every C source and header the formatter keeps; tests/run.sh checks them with --dry-run.
FORMAT_SRCS = $(LIB_SRCS) $(MAIN_SRC) $(AGENT_SRCS) $(wildcard */*.h */*/*.h */*/*/*.h tests/unit/*.c tests/fuzz/*.c tests/doubles/*.c bench/*.c)

format:
	clang-format -i $(FORMAT_SRCS)

# Fails, naming each place, on a file `make format` would change: one check of tests/run.sh.
format-check:
	clang-format --dry-run -Werror $(FORMAT_SRCS)

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
