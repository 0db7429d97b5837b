# README's two commands: `make run` (the main job) and `make test` (the whole suite).
# Both create .venv and install what they need on a machine that has only Python and pip.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup run test test-quick clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

run: setup
	$(VENV)/bin/wevent simulate --mechanism all

test: setup
	$(PY) -m pytest

test-quick: setup
	$(PY) -m pytest -m "not slow"

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
