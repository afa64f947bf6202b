# Two commands do all set-up on a fresh machine (Python 3.11+):
#   make book   build the book and print where to open it
#   make test   run every test (what CI runs)
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: book test venv lint

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is needed, found " + sys.version' 
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

lint: $(STAMP)
	$(PY) -m ruff check transformer_lib tests benchmarks

test: lint
	$(PY) -m pytest tests

book: $(STAMP)
	$(PY) -m jupyter_book build . 
	@echo "Open the book: file://$(CURDIR)/_build/html/index.html"
