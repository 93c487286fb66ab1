# `make demo` and `make test` are the two commands of the README; both set up .venv/ first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.op-plugin-setup

.PHONY: setup demo test declared-cases distributed zoo zoo-npu ci clean

setup: $(STAMP)

# Re-run only when the project's install inputs change, so a second `make` is quick. Each step says what
# it does before it starts, and the long pip installs show pip's own progress (the first set-up takes a
# few minutes; nothing here is silent for long).
$(STAMP): pyproject.toml Makefile
	@echo "setup [1/6]: the environment $(VENV)/ and a current pip"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first and pinned: the CPU build of 2.13.0 comes from this machine's local file; an
	# unpinned torch would pull a multi-GB CUDA build.
	@echo "setup [2/6]: torch 2.13.0 (CPU build), then op-plugin with its test tools (pip; a minute or two)"
	$(PY) -m pip install torch==2.13.0
	$(PY) -m pip install -e '.[test,bench]'
	# Bytecode for the editable install (pip compiles only what it copies): `import op_plugin` then reads
	# .pyc files instead of compiling about 200 modules (0.2 s of every process's start, issue 36).
	$(PY) -m compileall -q op_plugin meta converters > /dev/null
	# The CPU simulator: torch-npu (pinned) unpacked beside the environment, never pip-installed
	# into it (that would make `import torch` try to load the NPU runtime).
	@echo "setup [3/6]: the CPU simulator (torch-npu 2.13.0 unpacked, not installed)"
	$(PY) -m op_plugin._simulator.hosting.install
	# The virtual NPU's C++ part (docs/virtual-npu.md): g++, ninja and torch's headers; about 30 s.
	@echo "setup [4/6]: the virtual NPU's C++ part (about 30 s)"
	$(PY) -m op_plugin._simulator.device.build
	# Graphviz's `dot` renders `op-plugin inspect` pictures (Debian package graphviz); without it
	# inspect still prints the graphs and writes the .dot file.
	@echo "setup [5/6]: Graphviz (dot), for op-plugin inspect's pictures"
	command -v dot >/dev/null || (apt-get update && apt-get install -y --no-install-recommends graphviz) \
		|| echo "warning: could not install graphviz (dot); op-plugin inspect will not render SVG/PNG"
	touch $(STAMP)
	@echo "setup [6/6]: done ($(VENV)/bin/python, $(VENV)/bin/op-plugin)"

demo: setup
	$(VENV)/bin/op-plugin demo

# lint-imports: the pipeline's stages import one way (contracts in pyproject.toml, docs/design.md).
# The zoo has its own target: it needs the `zoo` extra (transformers), which setup does not
# install, and it compiles whole public models.
# ruff: pyflakes, pycodestyle and bugbear (E, F, B; pyproject.toml). pytest-xdist runs the tests on
# two workers; each test is independent of the others' order and process. PYTEST_ARGS adds options
# (bench/suite_time.py passes --durations).
test: setup
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --ignore=tests/zoo --ignore=tests/virtual_npu $(PYTEST_ARGS)

# The virtual NPU (docs/virtual-npu.md): each check a child process with the device up (about 6 minutes of
# worker time, so a tier of its own, in CI).
.PHONY: virtual-npu
virtual-npu: setup
	$(PY) -m pytest -q -p no:cacheprovider -n 2 tests/virtual_npu

# TorchAir's own declared converter cases through npugraph against eager, each in a guarded worker;
# fails on any failing case not listed (with its reason) in the known-failures file (a few minutes).
declared-cases: setup
	$(VENV)/bin/op-plugin declared-cases --workers 2 --check tests/data/declared_cases_known_failures.txt

# The model zoo: public model code (transformers), small configs, random weights. Installs the `zoo`
# extra; torch stays pinned so the model library cannot pull another build.
zoo: setup
	$(PY) -m pip install --quiet -e '.[zoo]' torch==2.13.0
	$(PY) -m pytest -q -p no:cacheprovider -n 2 tests/zoo

# The zoo's recent tier in full (tests/zoo/test_zoo_recent.py: every model static, dynamic, training, decode;
# about 15 minutes of one core, so CI runs a subset: docs/model-zoo.md).
.PHONY: zoo-all
zoo-all: setup
	$(PY) -m pip install --quiet -e '.[zoo]' torch==2.13.0
	OP_PLUGIN_ZOO_RECENT_ALL=1 $(PY) -m pytest -q -p no:cacheprovider -n 2 tests/zoo

# The zoo on op_plugin's virtual NPU (docs/virtual-npu.md): the same models with their weights and inputs on
# npu, eager on the virtual NPU's kernels, graphs on npu tensors (tests/zoo/test_zoo.py, --zoo-device npu); the
# decode steps with the KV cache (test_zoo_decode.py) and the torch_npu-op graphs (test_npu_*.py: the vllm-ascend
# decode step, the DeepSeek MoE layer, W8A8), their ACL-graph modes captured into the virtual NPUGraph.
zoo-npu: setup
	$(PY) -m pip install --quiet -e '.[zoo]' torch==2.13.0
	$(VENV)/bin/op-plugin run -- $(PY) -m pytest -q -p no:cacheprovider -n 2 tests/zoo/test_zoo.py \
		tests/zoo/test_zoo_decode.py tests/zoo/test_npu_decode_step.py tests/zoo/test_npu_moe_layer.py \
		tests/zoo/test_npu_w8a8.py --zoo-device npu

# The distributed tier: collectives in GE graphs over N gloo ranks on 127.0.0.1, each case under a
# hard timeout (docs/distributed.md; about a minute). Installs the `zoo` extra: a transformers decoder
# layer runs under DTensor tensor parallelism.
distributed: setup
	$(PY) -m pip install --quiet -e '.[zoo]' torch==2.13.0
	$(PY) -m pytest -q -p no:cacheprovider tests/distributed

# TorchAir's own smoke tests (Ascend/torchair's smoke folder at a pinned commit, run unmodified) on the virtual NPU,
# each file in its own process under a hard timeout, every test's outcome held to tests/torchair_smoke/expected.toml
# (docs/virtual-npu.md; about 10 minutes). The folder: TORCHAIR_SMOKE_DIR, else a clone (network); without it the
# target says it was skipped and fails (TORCHAIR_SMOKE_ARGS=--allow-offline passes instead).
.PHONY: torchair-smoke
torchair-smoke: setup
	$(PY) tests/torchair_smoke/run.py $(TORCHAIR_SMOKE_ARGS)

# What CI runs (.ci/run): the README's test command, then the virtual NPU, the declared cases, the distributed
# tier and the zoo (on CPU tensors, then on the virtual NPU).
ci: test virtual-npu declared-cases distributed zoo zoo-npu

# Benchmarks: writes docs/benchmarks.md and docs/benchmarks-lowering.png (about 35 minutes: the last
# one, bench/suite_time.py, runs CI's steps in a fresh clone; `python -m bench.run_all --skip suite_time`).
.PHONY: bench
bench: setup
	$(PY) -m bench.run_all

clean:
	rm -rf $(VENV) build dist *.egg-info
