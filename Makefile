# Quickstart: `make demo` and `make test`. Both create .venv, install the CPU build
# of torch 2.13.0 and the package, and build the C++ extension once.
# edist (GPL) is installed only as a test reference and benchmark peer; the library
# never imports it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
EXT_STAMP := $(VENV)/.bedl_ext_built
SOURCES := $(wildcard csrc/*.cpp csrc/*.h csrc/common/*.h csrc/cpu/*.cpp csrc/cpu/*.h csrc/cpu/*/*.cpp csrc/cpu/*/*.h) setup.py
# DEBUG=1 (e.g. `make install DEBUG=1`) builds the in-place extension with -O1 -g instead of
# -O3; the build flavour is recorded so that switching it rebuilds the extension.
DEBUG ?= 0
export DEBUG
FLAVOUR_STAMP := $(VENV)/.bedl_build_flavour
BUILD_FLAVOUR := DEBUG=$(DEBUG)
# The sanitized build lives only in build/asan (see test-asan); it never replaces the
# in-place extension that `make test` loads.
unexport SANITIZE
ASAN_DIR := build/asan
ASAN_LIB := $(ASAN_DIR)/lib
ASAN_TESTS ?= tests/test_core_reference.py tests/test_core_properties.py tests/test_oracles.py \
	tests/test_symbol_table.py tests/test_local_tables.py tests/test_bad_input.py \
	tests/test_overflow.py tests/test_alignments.py
# The interpreter is not instrumented, so the sanitizer runtimes must be loaded first; they
# come from the compiler torch's extension builder uses ($CXX, else c++).
ASAN_PRELOAD = $(shell $${CXX:-c++} -print-file-name=libasan.so):$(shell $${CXX:-c++} -print-file-name=libubsan.so)
# CPython leaks on purpose at exit, so leak checking is off; any UB report stops the run.
ASAN_ENV = LD_PRELOAD=$(ASAN_PRELOAD) ASAN_OPTIONS=detect_leaks=0 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 PYTHONPATH=$(abspath $(ASAN_LIB))
# `make experiment`: the paper's protocol on DATASET (strings, minipalindrome, sorting,
# cystic, leukemia, sentiment, or all), with EXPERIMENT_ARGS passed on to
# `python -m bedl_torch experiment`; results in RESULTS/DATASET, continued by a rerun.
DATASET ?= strings
EXPERIMENT_ARGS ?=
RESULTS ?= results

.PHONY: install build test test-asan demo bench experiment paper-table clean FORCE

$(VENV)/.deps_installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH_SPEC) numpy ninja "setuptools>=77" wheel
	$(PY) -m pip install --quiet pytest hypothesis scikit-learn scipy matplotlib tqdm clarabel nbclient nbformat ipykernel edist==1.2.2
	touch $@

# Rewritten only when the flavour changes, so that it triggers a rebuild only then.
$(FLAVOUR_STAMP): FORCE
	@mkdir -p $(VENV)
	@echo '$(BUILD_FLAVOUR)' | cmp -s - $@ || echo '$(BUILD_FLAVOUR)' > $@

# Builds the extension in place once; rebuilt only when csrc/, setup.py or the flavour change.
$(EXT_STAMP): $(VENV)/.deps_installed $(SOURCES) $(FLAVOUR_STAMP)
	$(PY) -m pip install --quiet --no-build-isolation --no-deps -e .
	touch $@

install build: $(EXT_STAMP)

# The suite runs twice: as built (AVX2 paths where the processor has them), then on the
# scalar kernels alone (BEDL_TORCH_SIMD=0), leaving out the test files that never reach the
# kernels in this process (the notebooks run in kernels of their own). Both runs always run;
# the target fails if either fails.
SCALAR_RUN_SKIPS := notebooks datasets tree oracles mglvq classifiers bedl_study
test: $(EXT_STAMP)
	status=0; \
	$(PY) -m pytest -q tests || status=1; \
	BEDL_TORCH_SIMD=0 $(PY) -m pytest -q tests \
	  $(foreach t,$(SCALAR_RUN_SKIPS),--ignore=tests/test_$(t).py) || status=1; \
	exit $$status

# The core tests against a copy of the package in build/asan/lib whose extension is built
# with AddressSanitizer and UndefinedBehaviorSanitizer (SANITIZE=1 in setup.py). That copy
# comes first on PYTHONPATH; pytest runs without the current folder on sys.path (where the
# repository's in-place package would win) and only if bedl_torch comes from the copy.
ASAN_PYTEST = import sys; del sys.path[0]; import bedl_torch, pytest; \
	sys.exit(pytest.main(sys.argv[1:]) if bedl_torch.__file__.startswith('$(abspath $(ASAN_LIB))/') \
	else 'loaded ' + bedl_torch.__file__ + ', not the sanitized build in $(ASAN_LIB)')

test-asan: $(VENV)/.deps_installed
	rm -rf $(ASAN_LIB)
	mkdir -p $(ASAN_DIR)
	SANITIZE=1 $(PY) setup.py --quiet egg_info --egg-base $(ASAN_DIR) \
		build --build-base $(ASAN_DIR) --build-lib $(ASAN_LIB)
	$(ASAN_ENV) $(PY) -c "$(ASAN_PYTEST)" -q -p no:cacheprovider $(ASAN_TESTS)

demo: $(EXT_STAMP)
	$(PY) -m bedl_torch.demo

bench: $(EXT_STAMP)
	$(PY) benchmarks/bench_core.py

# The paper's cross-validation and table for one data set, or for each with DATASET=all
# (e.g. `make experiment DATASET=cystic EXPERIMENT_ARGS=--quick`).
experiment: $(EXT_STAMP)
	$(PY) -m bedl_torch experiment $(DATASET) \
		--out $(RESULTS)$(if $(filter all,$(DATASET)),,/$(DATASET)) $(EXPERIMENT_ARGS)

# The paper table from one command: all six data sets (continuing what RESULTS holds), their
# compact results in benchmarks/results, and benchmarks/paper_table.md rendered from them
# with the explanations of benchmarks/paper_notes.md.
paper-table: $(EXT_STAMP)
	$(PY) -m bedl_torch experiment all --out $(RESULTS) $(EXPERIMENT_ARGS)
	$(PY) -m bedl_torch experiment export $(RESULTS) --out benchmarks/results
	$(PY) -m bedl_torch experiment render --results benchmarks/results \
		--out benchmarks/paper_table.md --notes benchmarks/paper_notes.md

clean:
	rm -rf build $(VENV) *.egg-info bedl_torch/*.so

# Long fuzz campaign (tools/fuzz.py): at least 100,000 inputs over every public entry point,
# each batch in its own process so that a crash is caught and its input printed.
# FUZZ_ARGS passes options, e.g. FUZZ_ARGS="--jobs 4 --huge-costs".
FUZZ_ARGS ?=
.PHONY: fuzz
fuzz: $(EXT_STAMP)
	$(PY) tools/fuzz.py $(FUZZ_ARGS)
