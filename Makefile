# Set-up, the two jobs of the README, and the docs. Each target creates .venv when it is missing.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= results/demo
# lint-imports finds a package's modules by walking its folder, which misses the package-dir mapping of
# pyproject.toml (bnn.inference lives in inference/): it runs on a tree of links laid out like the installed bnn
IMPORT_TREE := build/import-tree
# the reference in docs/ (Sphinx), built from scratch each time: warnings are errors, so a broken reference or a
# docstring that is not valid reStructuredText fails `make test`; docs/api/ holds the generated API pages
DOCS_OUT := build/docs

.PHONY: demo test lint docs

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# the CPU wheel of torch first, or pip pulls a multi-GB CUDA build for pyro-ppl
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[dev,ray,docs]"
	# the peer extra (laplace-torch and what its GGN Laplace imports) without dependencies: laplace-torch declares
	# torchvision, and pip would replace the CPU torch with a CUDA build to satisfy it
	$(PY) -m pip install --quiet --no-deps $$($(PY) -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["peer"]))')
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/bnn compare --dataset toy1d --methods svi,nuts,laplace --out $(OUT) --overwrite

test: $(VENV)/.installed docs
	rm -rf $(IMPORT_TREE) && mkdir -p $(IMPORT_TREE)/bnn
	ln -s $(CURDIR)/bnn/* $(CURDIR)/datasets $(CURDIR)/models $(CURDIR)/guides $(CURDIR)/inference $(IMPORT_TREE)/bnn/
	cd $(IMPORT_TREE) && $(abspath $(VENV))/bin/lint-imports --config $(CURDIR)/pyproject.toml --no-cache
	$(PY) -m pytest

docs: $(VENV)/.installed
	rm -rf $(DOCS_OUT) docs/api
	$(VENV)/bin/sphinx-build -W --keep-going -q -b html docs $(DOCS_OUT)

lint: $(VENV)/.installed
	$(PY) -m ruff check .
