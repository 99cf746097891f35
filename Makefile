# Thin wrapper over meson + ninja.  `make` builds build/wstore and
# build/libwstore.so and never installs packages; `make deps` installs the
# Debian packages the tests need (as root) and `make deps-build` those the
# build needs; `make test` and `make demo` run them first.
# See README.md for the rest.
BUILD ?= build
PREFIX ?= /usr/local
MESON_OPTS ?=

.PHONY: all deps deps-build demo test test-unit asan asan-build tsan tsan-build install uninstall deb bench fleet fuzz fuzz-build clean format-check format

all: $(BUILD)/build.ninja
	ninja -C $(BUILD)

$(BUILD)/build.ninja:
	meson setup $(BUILD) --prefix=$(PREFIX) $(MESON_OPTS)

# what the tests need (make test); deps-build: what the build needs (make demo)
deps:
	sh scripts/deps.sh test

deps-build:
	sh scripts/deps.sh build

demo: deps-build
	$(MAKE) all
	BUILD=$(BUILD) sh scripts/demo.sh

test: deps
	$(MAKE) all
	sh tests/run.sh $(BUILD)

# SUITES (default: all) picks the suites of tests/run.sh to run.
SUITES ?=

# Sanitizer reports go to files in the build directory as well as failing
# the process: a daemon's stderr (the mount's, serve's) is often not shown
# by its suite, so the reports are printed after the run, and any report
# fails the target even when no check saw the process fail.
# asan-build, tsan-build: only the builds (CI makes them while the plain
# suites run)
asan-build:
	$(MAKE) BUILD=build-asan MESON_OPTS="-Db_sanitize=address,undefined -Db_lundef=false" all

asan: asan-build
	rm -f build-asan/sanitizer.*
	ASAN_OPTIONS=detect_leaks=1:log_path=$(CURDIR)/build-asan/sanitizer \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=$(CURDIR)/build-asan/sanitizer \
		sh tests/run.sh build-asan $(SUITES); \
		rc=$$?; sh tests/lib/sanreports.sh build-asan || rc=1; exit $$rc

# a data race fails the process that has it (exit 66), so its check fails;
# tests/tsan.supp: races inside Mooncake's own (uninstrumented) library
tsan-build:
	$(MAKE) BUILD=build-tsan MESON_OPTS="-Db_sanitize=thread -Db_lundef=false" all

tsan: tsan-build
	rm -f build-tsan/sanitizer.*
	TSAN_OPTIONS=halt_on_error=1:exitcode=66:suppressions=$(CURDIR)/tests/tsan.supp:log_path=$(CURDIR)/build-tsan/sanitizer \
		sh tests/run.sh build-tsan $(SUITES); \
		rc=$$?; sh tests/lib/sanreports.sh build-tsan || rc=1; exit $$rc

# DESTDIR (staged installs) is honoured by meson install.  A root install
# into the system refreshes the loader's cache, so that the Python binding
# (and anything else) finds libwstore.so.0 by its soname at once.
install: all
	meson configure $(BUILD) --prefix=$(PREFIX)
	ninja -C $(BUILD)
	meson install -C $(BUILD)
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then ldconfig; fi

# removes what the last `make install` of $(BUILD) installed (its log),
# and what Python wrote beside the installed modules (__pycache__); fails
# when something could not be removed (meson's uninstall only counts
# them: "Failed: N", exit 0)
uninstall:
	@log=$(BUILD)/meson-logs/install-log.txt; \
	if [ ! -f "$$log" ]; then echo "uninstall: $$log is missing: nothing was installed from $(BUILD)" >&2; exit 1; fi; \
	grep '\.py$$' "$$log" | while read -r f; do \
		if [ -d "$${f%/*}/__pycache__" ]; then rm -rf "$${f%/*}/__pycache__"; fi; \
	done; \
	out=$$(ninja -C $(BUILD) uninstall 2>&1); rc=$$?; printf '%s\n' "$$out"; \
	if [ $$rc != 0 ] || printf '%s\n' "$$out" | grep -q '^Failed: [1-9]'; then \
		echo "uninstall: some files could not be removed (above)" >&2; exit 1; fi
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then ldconfig; fi

# Debian packages from this tree (debian/): wstore, libwstore0,
# libwstore-dev, python3-wstore and their -dbgsym, into $(DEB_OUT).  No
# tests inside the package build (the suites run from the tree).
DEB_OUT ?= build-deb
deb:
	sh scripts/deps.sh deb
	sh scripts/deb.sh $(DEB_OUT)

bench: all
	sh bench/run.sh $(BUILD)

# the fleet bed (network namespaces, Redis Cluster, Mooncake, serve; root):
# every scenario measured, docs/fleet.md and docs/fleet/*.png rewritten;
# FLEET_SIZE the checkpoint, 256M unless set (make fleet FLEET_SIZE=2G)
fleet: all
	FLEET_SIZE=$(FLEET_SIZE) bash bench/fleet/run.sh $(BUILD)

# libFuzzer targets tests/fuzz/fuzz_*.c (clang); FUZZ_SECONDS per target.
FUZZ_SECONDS ?= 30
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_OUT=build-fuzz sh scripts/fuzz.sh

# only the fuzz targets' build
fuzz-build:
	FUZZ_BUILD_ONLY=1 FUZZ_OUT=build-fuzz sh scripts/fuzz.sh

clean:
	rm -rf build build-asan build-tsan build-fuzz build-deb

# The C sources match .clang-format (clang-format 14, Debian 12).
FORMAT_FILES = $$(git ls-files 'src/*.[ch]' 'include/*.h' 'tests/*.[ch]' 'bench/*.c')
format-check:
	@out=$$(clang-format --dry-run $(FORMAT_FILES) 2>&1); \
	if [ -n "$$out" ]; then echo "$$out" | head -40; \
		echo "format-check: run 'make format'"; exit 1; fi; \
	echo "format-check: ok"

format:
	clang-format -i $(FORMAT_FILES)
