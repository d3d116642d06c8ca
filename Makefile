# The two commands of the README's quick start:
#   make demo   installs what is missing, builds, trains TSM and TSN, prints the table
#   make test   installs what is missing, builds, runs the whole test suite
BUILD ?= build
JOBS ?= $(shell nproc)
# Compiler warnings are errors here (CI runs `make test`); `make WERROR=OFF ...` relaxes that.
WERROR ?= ON

.PHONY: all deps configure build demo test install clean
all: build

deps:
	@tools/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DVEXP_BUILD_TESTS=ON -DVEXP_WERROR=$(WERROR) >/dev/null

build: configure
	@env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS cmake --build $(BUILD) -j$(JOBS)

demo: build
	@tools/demo.sh $(BUILD)

test: build
	@env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

install: build
	cmake --install $(BUILD) --prefix $(or $(PREFIX),/usr/local)

clean:
	rm -rf $(BUILD)
