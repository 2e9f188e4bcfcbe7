# Lockwarden: the two commands are `make run` and `make test`.
PY ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
STAMP = $(VENV)/.installed

.PHONY: run test bench lint docs clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/lw up --demo --state-dir .lw/state --run-dir .lw/run

test: $(STAMP)
	$(BIN)/pytest -q $(PYTEST_ARGS)

# Every figure of docs/contracts.md#performance-targets: each script's JSON, then the
# table figure | measured | target | met?
# (JSON kept in .lw/bench; `$(BIN)/python bench/report.py --help` for --only/--all).
bench: $(STAMP)
	$(BIN)/python bench/report.py --out .lw/bench

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# docs/api.md is generated from the API declarations (client/api/); a test fails when it is stale.
docs: $(STAMP)
	$(BIN)/python -m client.api.reference --output docs/api.md

clean:
	rm -rf $(VENV) .lw .mypy_cache .ruff_cache
