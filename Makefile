# Two commands do all set-up on a fresh machine (Python 3.11+, Linux or macOS):
#   make book      build the book and print where to open it
#   make test      run every test (what CI runs: .ci/run), the chapters with the smoke profile
#   make test-fast the library's and the application's quick tests (a minute or two): while changing code
# and, for authors:
#   make screenshots full-page screenshots of the built site in _build/screenshots/ (browser test)
#   make figures   redraw the figures (figures/) with transformer_book: the architecture, the chapters' maps
#                  of it and their concept pictures
#   make test-colab  the chapters on an emulated Colab (tests/test_colab.py; minutes, needs PyPI)
#   make lint      ruff check and ruff format --check over every Python directory and the chapters
#   make execute   re-run every notebook in place with the CPU profile (refreshes the stored outputs
#                  that nbval compares); NB=chapters/07_feed_forward.ipynb re-runs one
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NOTEBOOKS := $(sort $(wildcard chapters/*.ipynb))
# -W: any Sphinx warning fails the build; --all: rebuild every page, so none hides an old warning.
BUILD_BOOK := $(VENV)/bin/jupyter-book build . -W -n --keep-going --all
# The tests train with the smoke profile (seconds, not the 30 minutes of the cpu profile): the
# chapters, the command line and the benchmarks they call read TRANSFORMER_PROFILE.
TEST_ENV := TRANSFORMER_PROFILE=smoke
# Notebook outputs must not depend on progress bars or on the hash seed.
NOTEBOOK_ENV := $(TEST_ENV) TQDM_DISABLE=1 PYTHONHASHSEED=0
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with chapters/nbval_sanitize.cfg
# pytest-xdist workers (loadscope keeps each notebook, and each test module, on one worker).
JOBS ?= 2

.PHONY: figures book test test-fast test-book test-units test-notebooks test-default-kernels test-colab screenshots venv lint execute browser-setup npm-packages clean

venv: $(STAMP)

# pip byte-compiles on one core; compileall -j 0 uses all of them (85 s -> about 55 s on 2 cores).
# The bytecode must be written: where PYTHONDONTWRITEBYTECODE is set, Python would otherwise compile
# torch anew in every process. (A few files written for newer Pythons do not compile; pip skips
# them the same way, hence `|| true`.)
$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is needed, found " + sys.version'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile -r requirements.txt
	$(PY) -m pip install -q --no-compile --no-deps -e .
	$(PY) -m compileall -q -j 0 $(VENV)/lib > /dev/null 2>&1 || true
	touch $(STAMP)

book: $(STAMP) npm-packages
	$(BUILD_BOOK)
	@echo
	@echo "The book is built. Open it in a browser: file://$(CURDIR)/_build/html/index.html"
	@echo "(Chapter 11's translator box needs the site served: $(PY) -m http.server -d _build/html, then http://localhost:8000)"

# Every Python directory: ruff check and ruff format at 100 columns (pyproject.toml). The chapters'
# code cells too, at 88: no line wider than the book's code boxes (chapters/ruff.toml).
PY_DIRS := transformer_lib transformer_tasks transformer_book tests benchmarks scripts _ext conftest.py
lint: $(STAMP)
	$(PY) -m ruff check $(PY_DIRS)
	$(PY) -m ruff format --check $(PY_DIRS)
	$(PY) -m ruff format --check chapters
	$(PY) -m ruff check chapters

# Debian's chromium and the pinned CDN scripts for tests/test_browser.py (never fails; see the script).
browser-setup:
	@scripts/setup_browser.sh

# The pinned npm packages only (node_modules/): the build copies chapter 11's translator runtime from there.
npm-packages:
	@scripts/setup_browser.sh --npm-only

# pytest, where exit status 5 (nothing collected) means the suite ran nothing: a failure too.
# $(1): environment assignments, $(2): pytest arguments.
define pytest
	@set +e; $(1) $(PY) -m pytest -p no:cacheprovider $(2); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests from: $(2)"; fi; exit $$rc
endef

# make test: lint, then three parts run in this order, each even when an earlier one failed
# (make -k), and the whole fails if any part does:
#   test-book       the book builds with zero Sphinx warnings;
#   test-units      tests/: the package's unit tests, the book's configuration, and the browser
#                   test of the site just built;
#   test-notebooks  every notebook re-run under nbval and compared with its stored outputs (with
#                   TQDM_DISABLE=1, which the CLI tests in test-units must not inherit);
#   test-default-kernels  the notebooks and the drawn figures again, with PyTorch's plain CPU kernels.
test: lint browser-setup
	@$(MAKE) --no-print-directory -k test-book test-units test-notebooks test-default-kernels

# The quick tests only: not the book's pages, figures and browser (marker `book`), nor what starts
# processes or trains (marker `slow`; pyproject.toml lists the markers). For the loop of changing
# code; `make test` still runs everything.
test-fast: $(STAMP)
	$(call pytest,$(TEST_ENV),-n $(JOBS) -m "not colab and not book and not slow" tests)

test-book: $(STAMP) npm-packages
	$(BUILD_BOOK)

test-units: $(STAMP)
	$(call pytest,$(TEST_ENV),-n $(JOBS) --dist loadscope -m "not colab" tests)

test-notebooks: $(STAMP)
	$(if $(NOTEBOOKS),$(call pytest,$(NOTEBOOK_ENV),-n $(JOBS) --dist loadscope $(NBVAL) $(NOTEBOOKS)),\
		@echo "make test: no notebooks in chapters/"; exit 1)

# What compares floats with stored outputs (every notebook, the figures drawn from the code), run with
# ATEN_CPU_CAPABILITY=default: PyTorch then uses its plain CPU kernels instead of the processor's
# vectorised ones, and rounds in another order, as another processor would. Those comparisons hold at
# the printed precision or a stated tolerance (conftest.py, tests/test_diagrams.py), so they pass
# both ways.
test-default-kernels: $(STAMP)
	$(if $(NOTEBOOKS),$(call pytest,ATEN_CPU_CAPABILITY=default $(NOTEBOOK_ENV),-n $(JOBS) --dist loadscope $(NBVAL) $(NOTEBOOKS) tests/test_diagrams.py),\
		@echo "make test: no notebooks in chapters/"; exit 1)

# Full-page screenshots of every page of the built site, to read it as a reader would (_build/screenshots/).
screenshots: browser-setup book
	$(call pytest,BOOK_SCREENSHOTS=full,tests/test_browser.py)

figures: $(STAMP)
	$(PY) scripts/draw_figures.py

# Not part of `make test` (it installs torch into a new environment); the workflow runs it.
test-colab: $(STAMP)
	$(call pytest,$(TEST_ENV),-m colab tests/test_colab.py)

execute: $(STAMP)
	scripts/execute_notebooks.sh $(or $(NB),$(NOTEBOOKS))

clean:
	rm -rf _build
