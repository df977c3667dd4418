# Two commands set up a fresh machine: `make run` (the main job) and `make test` (the test suite).
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
VARIANT ?= auto
BATCH   ?= 10000

.PHONY: run test gpu-test venv clean

venv: $(VENV)/.installed

$(VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

run: venv
	$(PY) run_milestone.py --variant $(VARIANT) --batch $(BATCH)

test: venv
	$(PY) -m pytest -q

gpu-test: venv
	$(PY) -m pytest -q -m gpu

clean:
	rm -rf $(VENV) build *.egg-info
