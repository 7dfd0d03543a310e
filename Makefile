# Two commands on a fresh machine: `make demo` (the main job) and `make test` (the whole suite).
# Each bootstraps the virtual environment it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)  ## evaluate the reference agent on shop's dev split (embedded SQLite), then measure it
	$(BIN)/rehearsal run --world shop --agent reference --split dev --repeats 2 --out runs/demo
	$(BIN)/python measure.py runs/demo

lint: $(STAMP)
	$(BIN)/ruff check rehearsal_env tests benchmarks training measure.py
	$(BIN)/mypy

test: lint  ## ruff, mypy, then every test
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/reset.py
	$(BIN)/python benchmarks/throughput.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
