# `make demo` and `make test` are the two commands of the README; both set up .venv/ first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.op-plugin-setup

.PHONY: setup demo test declared-cases distributed zoo zoo-npu ci clean

setup: $(STAMP)

# Re-run only when the project's install inputs change, so a second `make` is quick.
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first and pinned: the CPU build of 2.13.0 comes from this machine's local file; an
	# unpinned torch would pull a multi-GB CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[test,bench]'
	# The CPU simulator: torch-npu (pinned) unpacked beside the environment, never pip-installed
	# into it (that would make `import torch` try to load the NPU runtime).
	$(PY) -m op_plugin._simulator.hosting.install
	# The virtual NPU's C++ part (docs/virtual-npu.md): g++, ninja and torch's headers; about 30 s.
	$(PY) -m op_plugin._simulator.device.build
	# Graphviz's `dot` renders `op-plugin inspect` pictures (Debian package graphviz); without it
	# inspect still prints the graphs and writes the .dot file.
	command -v dot >/dev/null || (apt-get update && apt-get install -y --no-install-recommends graphviz) \
		|| echo "warning: could not install graphviz (dot); op-plugin inspect will not render SVG/PNG"
	touch $(STAMP)

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
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --ignore=tests/zoo $(PYTEST_ARGS)

# TorchAir's own declared converter cases through npugraph against eager, each in a guarded worker;
# fails on any failing case not listed (with its reason) in the known-failures file (a few minutes).
declared-cases: setup
	$(VENV)/bin/op-plugin declared-cases --workers 2 --check tests/data/declared_cases_known_failures.txt

# The model zoo: public model code (transformers), small configs, random weights. Installs the `zoo`
# extra; torch stays pinned so the model library cannot pull another build.
zoo: setup
	$(PY) -m pip install --quiet -e '.[zoo]' torch==2.13.0
	$(PY) -m pytest -q -p no:cacheprovider -n 2 tests/zoo

# The zoo on op_plugin's virtual NPU (docs/virtual-npu.md): the same models with their weights and inputs on
# npu, eager on the virtual NPU's kernels, graphs on npu tensors (tests/zoo/test_zoo.py, --zoo-device npu).
zoo-npu: setup
	$(PY) -m pip install --quiet -e '.[zoo]' torch==2.13.0
	$(VENV)/bin/op-plugin run -- $(PY) -m pytest -q -p no:cacheprovider -n 2 tests/zoo/test_zoo.py --zoo-device npu

# The distributed tier: collectives in GE graphs over N gloo ranks on 127.0.0.1, each case under a
# hard timeout (docs/distributed.md; about a minute). Installs the `zoo` extra: a transformers decoder
# layer runs under DTensor tensor parallelism.
distributed: setup
	$(PY) -m pip install --quiet -e '.[zoo]' torch==2.13.0
	$(PY) -m pytest -q -p no:cacheprovider tests/distributed

# What CI runs (.ci/run): the README's test command, then the declared cases, the distributed tier and the zoo
# (on CPU tensors, then on the virtual NPU).
ci: test declared-cases distributed zoo zoo-npu

# Benchmarks: writes docs/benchmarks.md and docs/benchmarks-lowering.png (about 35 minutes: the last
# one, bench/suite_time.py, runs CI's steps in a fresh clone; `python -m bench.run_all --skip suite_time`).
.PHONY: bench
bench: setup
	$(PY) -m bench.run_all

clean:
	rm -rf $(VENV) build dist *.egg-info
