# Two commands do everything on a fresh machine with Python 3.11:
#   make demo   - quick reproduction: simulations, summary tables and plots under results/
#   make test   - the test suite
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test venv clean

$(BIN)/swansim: setup.cfg pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

venv: $(BIN)/swansim

demo: venv
	$(BIN)/swansim demo --out results

test: venv
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) results .pytest_cache
