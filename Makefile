# Build, demo and test rsmx. `make demo` runs the main job; `make test` runs the whole suite.
VENV ?= .venv
PY := $(VENV)/bin/python
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(abspath $(VENV))/bin:$(PATH)
ENGINES := ThreadedEnginePerDevice ThreadedEngine NaiveEngine

.PHONY: venv build demo test test-rust test-python lint stubtest bench mxref

$(VENV)/.ready: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "maturin>=1.5,<2" "numpy>=1.23" pytest pytest-timeout ruff scikit-learn mypy graphviz
	# The CUDA tests compile every kernel with the NVRTC the GPU machines' driver (580) pairs with.
	$(PY) -m pip install -q cuda-bindings==13.0.3 nvidia-cuda-nvrtc==13.0.88 "cuda-pathfinder>=1.9"
	touch $@

venv: $(VENV)/.ready

# MXNet 1.9.1 in a venv of its own, the reference the distributed KVStore tests run
# against; where it cannot be installed, the reason is written down and those tests skip.
MXREF ?= .mxref
$(MXREF)/.done:
	rm -rf $(MXREF)
	(python3 -m venv $(MXREF) && $(MXREF)/bin/python -m pip install -q mxnet==1.9.1 numpy==1.23.5) \
		|| (mkdir -p $(MXREF) && echo "installing mxnet==1.9.1 numpy==1.23.5 in $(MXREF) failed" \
			> $(MXREF)/UNAVAILABLE)
	touch $@

mxref: $(MXREF)/.done

build: venv
	maturin develop --release -q

demo: build
	$(PY) examples/demo.py

# Checks the stub python/rsmx/_core.pyi against the built extension, so it builds first.
stubtest: build
	$(PY) -m mypy.stubtest rsmx._core --mypy-config-file tests/stubtest_mypy.ini

lint: venv stubtest
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings
	cargo clippy --all-targets --features python -- -D warnings
	ruff check python tests benches examples

test-rust:
	cargo test

test-python: build mxref
	# RSMX_CHECK_BORROWS: every kernel's slices of its blobs are checked for in-place
	# soundness (a shared and a mutable slice over the same bytes is an error).
	# RSMX_TEST_ENGINE_RERUN: after the first engine, tests that run no engine op
	# (marked engine_free: the CUDA sources compiled and run by themselves) and those that
	# run MXNet's own processes (marked mxnet_interop) are left out.
	rerun=0; for e in $(ENGINES); do \
		echo "== pytest under $$e"; \
		RSMX_TEST_ENGINE_RERUN=$$rerun RSMX_CHECK_BORROWS=1 RSMX_ENGINE_TYPE=$$e \
			$(PY) -m pytest -q -p no:cacheprovider --durations=40 tests || exit 1; \
		echo "== GPU tests on two fake GPUs under $$e"; \
		RSMX_FAKE_GPU=2 RSMX_ENGINE_TYPE=$$e $(PY) -m pytest -q -p no:cacheprovider -m gpu tests || exit 1; \
		rerun=1; \
	done

test: lint test-rust test-python

bench: build
	cargo bench
	$(PY) benches/python/bench.py
