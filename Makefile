# The two commands of the README's quick start:
#   make demo   installs what the demo needs, builds vexp and its plugins, trains TSM and TSN, prints the table
#   make test   installs what is missing, builds everything (test targets too), runs the whole test suite
BUILD ?= build
JOBS ?= $(shell nproc)
# Compiler warnings are errors here (CI runs `make test`); `make WERROR=OFF ...` relaxes that.
WERROR ?= ON

.PHONY: all deps demo-deps configure build demo test sanitize fuzz install clean
all: build

deps:
	@tools/install-deps.sh

demo-deps:
	@tools/install-deps.sh demo

# make demo and make test share $(BUILD) and configure it the same way, tests on: the demo
# then builds only the `vexp` target (which depends on every plugin, tools/vexp/CMakeLists.txt;
# the recipes link in $(BUILD)/share/vexp is made at configure time), no test executable,
# fuzz driver or fixture. One configuration means a `make test` after `make demo` compiles
# only what the demo did not, and no cache option flips back and forth between the two.
# The price: configuring with tests on needs GoogleTest and mpirun, which the demo's
# package list therefore includes (tools/install-deps.sh demo).
CONFIGURE = cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DVEXP_BUILD_TESTS=ON -DVEXP_WERROR=$(WERROR) >/dev/null
CMAKE_BUILD = env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS cmake --build $(BUILD) -j$(JOBS)

configure: deps
	@$(CONFIGURE)

build: configure
	@$(CMAKE_BUILD)

demo: demo-deps
	@$(CONFIGURE)
	@$(CMAKE_BUILD) --target vexp
	@tools/demo.sh $(BUILD)

test: build
	@env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer, in its own build
# folder (not part of CI: about twice the build time and 2-3x the test time on 2 cores).
# libtorch's own allocations leak by design at exit (static registries): leaks are not
# checked; every other ASan/UBSan finding stops the process that hit it (exit 86 / 87,
# never an exit code vexp itself uses) and is written to $(SANITIZE_BUILD)/sanitizer-reports/,
# so a finding in a vexp that a shell test runs fails `make sanitize` even when that
# test only checked for a non-zero exit.
SANITIZE_BUILD ?= build-sanitize
sanitize: deps
	@cmake -S . -B $(SANITIZE_BUILD) -DCMAKE_BUILD_TYPE=Release -DVEXP_BUILD_TESTS=ON -DVEXP_SANITIZE=ON >/dev/null
	@env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS cmake --build $(SANITIZE_BUILD) -j$(JOBS)
	@logs=$(abspath $(SANITIZE_BUILD))/sanitizer-reports; rm -rf "$$logs"; mkdir -p "$$logs"; \
	env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS \
	  ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:allocator_may_return_null=1:detect_odr_violation=0:exitcode=86:log_path=$$logs/asan \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=87:log_path=$$logs/ubsan \
	  ctest --test-dir $(SANITIZE_BUILD) --output-on-failure -j$(JOBS) $(CTEST_ARGS); rc=$$?; \
	if [ -n "$$(ls -A "$$logs")" ]; then \
	  echo "make sanitize: sanitizer reports (also from processes whose test passed), in $$logs:"; \
	  head -n 40 "$$logs"/*; rc=1; \
	fi; exit $$rc
# The libFuzzer targets (the recipe loader, sweep expressions, the Kinetics readers), built
# with clang in their own folder and each run for VEXP_FUZZ_SECONDS (default 20) from the
# seed corpora.
FUZZ_BUILD ?= $(BUILD)-fuzz
fuzz:
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DVEXP_FUZZ=ON \
	  -DVEXP_BUILD_TESTS=ON -DVEXP_WERROR=OFF >/dev/null
	@env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS cmake --build $(FUZZ_BUILD) -j$(JOBS) --target vexp_fuzz_recipe vexp_fuzz_sweep_expr vexp_fuzz_kinetics_csv mutate_kinetics_csv
	@env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS ctest --test-dir $(FUZZ_BUILD) -L fuzz --output-on-failure

install: build
	cmake --install $(BUILD) --prefix $(or $(PREFIX),/usr/local)

clean:
	rm -rf $(BUILD)
