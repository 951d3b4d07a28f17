# onboard: the two set-up commands are `make demo` and `make test`; both install what is missing.
BUILD      ?= build
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
# ccache, where installed, makes rebuilds of unchanged sources instant; builds are the same without it.
CCACHE     := $(if $(shell command -v ccache 2>/dev/null),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
TORCH_PREFIX ?=

.PHONY: deps configure build demo test bench fuzz asan-test gpu-check format-check clean

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CCACHE) $(CMAKE_ARGS)

configure: $(BUILD)/build.ninja

build: deps configure
	cmake --build $(BUILD) -j $(JOBS)

# The main job on the bundled flagship example.
demo: build
	bash scripts/demo.sh $(BUILD)

# Every test (GoogleTest through ctest).
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

bench: build
	bash scripts/bench.sh $(BUILD)

# libFuzzer targets, one per parser, 60 s each (clang).
fuzz: deps
	bash scripts/fuzz.sh 60

# The stages below LibTorch (core .. validators) and their tests under ASan + UBSan.
ASAN_TESTS = test_core test_parsers test_templates test_search test_codegen test_validators
asan-test: deps
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DONBOARD_SANITIZE=ON -DONBOARD_WITH_TORCH=OFF -DONBOARD_BENCH=OFF
	cmake --build build-asan -j $(JOBS) --target $(ASAN_TESTS)
	cd build-asan && ctest --output-on-failure -j $(JOBS) -L 'core|parsers|templates|search|codegen|validators'

gpu-check:
	bash scripts/gpu-check.sh

# The C++ lines changed since BASE (default: the last commit's parent) follow .clang-format.
format-check:
	bash scripts/check-format.sh $(or $(BASE),HEAD~1)

clean:
	rm -rf $(BUILD) build-asan build-fuzz
