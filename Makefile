# Set-up and the two jobs of the README. Each target creates .venv when it is missing.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= results/demo

.PHONY: demo test lint

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# the CPU wheel of torch first, or pip pulls a multi-GB CUDA build for pyro-ppl
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

demo: $(VENV)/.installed
	$(PY) -m bnn compare --dataset toy1d --methods svi,nuts,laplace --out $(OUT) --overwrite

test: $(VENV)/.installed
	$(PY) -m pytest

lint: $(VENV)/.installed
	$(PY) -m ruff check .
