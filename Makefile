# snapfs - build, test and install.
#
#   make                 build build/snapfs (optimised, with debug info)
#   make test            build with ASan/UBSan and run every test (unit + integration)
#   make unit            build and run the C unit tests only
#   make install PREFIX=/usr/local
#   make format          clang-format every source file

PREFIX  ?= /usr/local
VERSION := 0.1.0
PKGS    := fuse3 sqlite3 libcurl libzstd libcjson libcrypto

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS))

CC      ?= cc
WARN    := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wno-format-nonliteral -Wvla
CFLAGS  ?= -O2 -g
ALL_CFLAGS = -std=c17 -D_GNU_SOURCE -DSNAPFS_VERSION='"$(VERSION)"' -I. $(WARN) $(PKG_CFLAGS) -pthread -MMD -MP $(CFLAGS)
LDLIBS  := $(PKG_LIBS) -pthread

SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

LIB_SRCS := $(wildcard lib/*.c backend/*.c runtime/*.c fs/*.c)
MAIN_SRC := main.c
UNIT_SRCS := $(wildcard tests/unit/test_*.c)

OBJ = $(patsubst %.c,$(1)/%.o,$(2))

.PHONY: all test unit install format clean integration
# Keep the unit tests' objects: make would otherwise delete them after `make test`
# and print that last, after the suite's closing "N passed, N failed" line.
.SECONDARY:

all: build/snapfs

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

unit: $(UNIT_BINS)
	@tests/run-unit.sh $(UNIT_BINS)

# The whole suite: unit tests and integration tests on a real mount.
test: build/asan/snapfs $(UNIT_BINS)
	tests/run.sh

install: build/snapfs
	install -D -m 0755 build/snapfs $(DESTDIR)$(PREFIX)/bin/snapfs
	install -D -m 0755 scripts/make-image.sh $(DESTDIR)$(PREFIX)/share/snapfs/make-image.sh

format:
	clang-format -i $(LIB_SRCS) $(MAIN_SRC) $(wildcard */*.h tests/unit/*.c tests/unit/*.h)

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
