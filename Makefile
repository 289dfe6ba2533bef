# jobguard: the two commands a newcomer needs are `make demo` and `make test`.
# Each one creates .venv (and installs the project with its dev tools) when missing.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

## demo: a guarded job meets its next trigger under each policy, on the embedded emulator
demo: $(STAMP)
	$(PY) -m jobguard.local.demo

## test: lint, type-check, then every test suite (unit, contract, scenarios, handlers)
test: $(STAMP) lint typecheck
	$(PY) -m pytest tests

lint: $(STAMP)
	$(PY) -m ruff check lib tests handlers bench

typecheck: $(STAMP)
	$(PY) -m mypy

## unit: the fast suites only (no emulator server, no processes)
unit: $(STAMP)
	$(PY) -m pytest tests -m "not server"

## bench: request counts, contention and cold start, side by side with Powertools
bench: $(STAMP)
	$(PY) -m bench.run

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
