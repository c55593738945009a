# Set-up, the two jobs of the README, and the docs. Each target creates .venv when it is missing.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= results/demo
# lint-imports finds a package's modules by walking its folder, which misses the package-dir mapping of
# pyproject.toml (bnn.inference lives in inference/): it runs on a tree of links laid out like the installed bnn
IMPORT_TREE := build/import-tree
# the markers of pyproject.toml's [tool.pytest.ini_options] that make test runs and make test-fast leaves out
FAST_TIER := not slow and not long and not notebooks and not subprocess and not packaging and not benchmarks
# pytest-xdist's worker processes: one per core this process may use, at most four (each holds torch in memory); the
# tests marked serial (they measure the machine's load) run afterwards, alone. Each worker takes a whole module at a
# time, the longest first (tests/support/module_order.py), so that a run ends on short modules
TEST_DIST := --dist loadfile --no-loadscope-reorder
TEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print(min(4, len(os.sched_getaffinity(0))))')
# the files that hold tests marked serial: the serial tiers collect only these (the whole suite's collection is seconds)
SERIAL_FILES = $(shell grep -rl --include='*.py' 'mark\.serial' tests)
# the reference in docs/ (Sphinx), built from scratch each time: warnings are errors, so a broken reference or a
# docstring that is not valid reStructuredText fails `make test`; docs/api/ holds the generated API pages
DOCS_OUT := build/docs

.PHONY: demo test test-parallel-tier test-fast test-slow import-contracts docs lint

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# the CPU wheel of torch first, or pip pulls a multi-GB CUDA build for pyro-ppl
	$(PY) -m pip install --quiet --no-compile torch==2.13.0
	$(PY) -m pip install --quiet --no-compile -e ".[dev,ray,docs]"
	# the peer extra (laplace-torch and what its GGN Laplace imports) without dependencies: laplace-torch declares
	# torchvision, and pip would replace the CPU torch with a CUDA build to satisfy it
	$(PY) -m pip install --quiet --no-compile --no-deps $$($(PY) -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["peer"]))')
	# the bytecode that pip compiles one file at a time, compiled on every core (without it, a process that may not
	# write bytecode, PYTHONDONTWRITEBYTECODE, would compile its imports at every start); torch's one Python 3.12 file
	# does not compile on 3.11
	$(PY) -m compileall -q -j 0 -x '/torch/testing/_internal/py312_intrinsics\.py$$' $$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/bnn compare --dataset toy1d --methods svi,nuts,laplace --out $(OUT) --overwrite

# every test but the slow statistical checks (pytest -m slow): notebooks, packaging, subprocesses and benchmarks
# included, the import contracts and the docs build beside them (one process each); the 30 slowest tests
# are listed at the end (where the suite's time goes); then the serial tier, alone
test: $(VENV)/.installed
	$(MAKE) --no-print-directory -j3 --output-sync=line import-contracts docs test-parallel-tier
	$(PY) -m pytest -m "not slow and serial" $(SERIAL_FILES) || test $$? -eq 5  # 5: no serial test in the tier

test-parallel-tier: $(VENV)/.installed
	$(PY) -m pytest -n $(TEST_WORKERS) $(TEST_DIST) -m "not slow and not serial" --durations=30

# the unit tier, before every commit (under 3 minutes on two cores): leaves out the tests marked as slow by nature
test-fast: import-contracts
	$(PY) -m pytest -n $(TEST_WORKERS) $(TEST_DIST) -m "$(FAST_TIER) and not serial"
	$(PY) -m pytest -m "$(FAST_TIER) and serial" $(SERIAL_FILES) || test $$? -eq 5  # 5: no serial test in the tier

# the long statistical checks that make test leaves out (SBC at full size, long chains, full grids); each keeps a short
# version in make test
test-slow: $(VENV)/.installed
	$(PY) -m pytest -n $(TEST_WORKERS) -m slow

import-contracts: $(VENV)/.installed
	rm -rf $(IMPORT_TREE) && mkdir -p $(IMPORT_TREE)/bnn
	ln -s $(CURDIR)/bnn/* $(CURDIR)/datasets $(CURDIR)/models $(CURDIR)/guides $(CURDIR)/inference $(IMPORT_TREE)/bnn/
	cd $(IMPORT_TREE) && $(abspath $(VENV))/bin/lint-imports --config $(CURDIR)/pyproject.toml --no-cache

docs: $(VENV)/.installed
	rm -rf $(DOCS_OUT) docs/api
	$(VENV)/bin/sphinx-build -W --keep-going -q -b html docs $(DOCS_OUT)

lint: $(VENV)/.installed
	$(PY) -m ruff check .
