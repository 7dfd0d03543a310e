# Two commands on a fresh machine: `make demo` (the main job) and `make test` (the whole suite).
# Each bootstraps the virtual environment it needs. `make help` lists every target.
#
# The CLI examples in the README say `rehearsal ...` and `python ...`: either activate the environment
# once per shell (`make install && . .venv/bin/activate`), or run them through make:
#   make rehearsal ARGS="world list"            # any rehearsal command
#   make run ARGS="--world shop --split dev"    # rehearsal run ...
#   make measure ARGS="runs/demo"               # python measure.py ...
#   make verify RUN=runs/demo                   # rehearsal eval verify RUN_DIR
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: help install demo rehearsal run measure verify test lint docs bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

help:  ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z]+):.*## /  make \1\t/'
	@echo "  or activate the environment: . $(VENV)/bin/activate  (then rehearsal ..., python measure.py ...)"

install: $(STAMP)  ## create .venv with the package and its dev tools (then: . .venv/bin/activate)

rehearsal: $(STAMP)  ## any rehearsal command: make rehearsal ARGS="world list"
	$(BIN)/rehearsal $(ARGS)

run: $(STAMP)  ## rehearsal run: make run ARGS="--world shop --split dev --out runs/mine"
	$(BIN)/rehearsal run $(ARGS)

measure: $(STAMP)  ## python measure.py: make measure ARGS="runs/mine"
	$(BIN)/python measure.py $(ARGS)

verify: $(STAMP)  ## check a run directory's records: make verify RUN=runs/mine
	$(BIN)/rehearsal eval verify $(RUN)

demo: $(STAMP)  ## publish the shop world, evaluate the reference agent on its dev split (embedded SQLite), measure it
	$(BIN)/rehearsal world build shop
	$(BIN)/rehearsal run --world shop --agent reference --split dev --repeats 2 --out runs/demo
	$(BIN)/python measure.py runs/demo
	@echo "next: $(BIN)/rehearsal readiness runs/demo; $(BIN)/rehearsal world show shop --html shop.html"
	@echo "      (state such as world_versions/ lives in \$$REHEARSAL_HOME, default ~/.rehearsal)"

lint: $(STAMP)  ## ruff and mypy
	$(BIN)/ruff check rehearsal_env tests benchmarks training worlds measure.py
	$(BIN)/mypy

test: lint  ## ruff, mypy, then every test in 2 processes, a file each (why each skipped test skipped is listed at the end)
	$(BIN)/python -m pytest -rs -n 2 --dist loadfile --no-loadscope-reorder

$(VENV)/.docs-stamp: $(STAMP) pyproject.toml
	$(BIN)/python -m pip install -q -e ".[dev,docs]"
	touch $(VENV)/.docs-stamp

docs: $(VENV)/.docs-stamp  ## build the manual (docs/, mkdocs.yml) into site/ with mkdocs build --strict
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(STAMP)  ## the benchmarks
	$(BIN)/python benchmarks/reset.py
	$(BIN)/python benchmarks/throughput.py

clean:  ## remove .venv, runs and caches
	rm -rf $(VENV) runs site .pytest_cache .mypy_cache .ruff_cache
