# fxcpp: the two commands that matter are `make demo` and `make test`.
PYTHON   ?= /usr/bin/python3
JOBS     ?= 2
BUILD    := build
ASAN     := build-asan
PREFIX   ?= /usr/local
export PYTHONPATH := $(CURDIR)/python$(if $(PYTHONPATH),:$(PYTHONPATH))
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: all deps build build-asan test test-cpp test-asan test-python demo bench bench-quick install clean fuzz

all: build

deps:
	@scripts/install_deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE=$(PYTHON) >/dev/null

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

$(ASAN)/CMakeCache.txt: | deps
	cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DFXCPP_SANITIZE=ON -DFXCPP_BUILD_PYTHON=OFF \
	      -DFXCPP_BUILD_BENCH=OFF >/dev/null

build-asan: deps $(ASAN)/CMakeCache.txt
	cmake --build $(ASAN) -j$(JOBS) --target fxcpp_core_tests

test-cpp: build
	$(BUILD)/fxcpp_core_tests --gtest_brief=1

test-asan: build-asan
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(ASAN)/fxcpp_core_tests --gtest_brief=1

test-python: build
	$(PYTHON) -m pytest -q -p no:cacheprovider tests/python

test: test-cpp test-asan test-python

# Longer fuzzing sessions: the differential fuzzer against torch.fx over many
# seeds, then the hypothesis API suite with its large profile. Override with
# FXCPP_FUZZ_SEEDS, FXCPP_FUZZ_STEPS, FXCPP_FUZZ_FIRST_SEED, FXCPP_HYPOTHESIS_MAX_EXAMPLES.
fuzz: build
	FXCPP_FUZZ_SEEDS=$${FXCPP_FUZZ_SEEDS:-2000} FXCPP_FUZZ_STEPS=$${FXCPP_FUZZ_STEPS:-200} \
	  $(PYTHON) -m pytest -q -p no:cacheprovider tests/python/test_fuzz_diff.py
	FXCPP_HYPOTHESIS_PROFILE=fuzz FXCPP_HYPOTHESIS_MAX_EXAMPLES=$${FXCPP_HYPOTHESIS_MAX_EXAMPLES:-2000} \
	  $(PYTHON) -X faulthandler -m pytest -q -p no:cacheprovider tests/python/test_fuzz_api.py

demo: build
	$(PYTHON) examples/demo.py

bench: build
	$(PYTHON) bench/run.py --full

bench-quick: build
	$(PYTHON) bench/run.py --quick

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)
	$(PYTHON) scripts/install_python.py

clean:
	rm -rf $(BUILD) $(ASAN)
