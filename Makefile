# `make run` and `make test` do all set-up: .venv, torch==2.13.0 first (the local CPU build), then
# the project with its test extras, pinned by constraints.txt so nothing upgrades torch.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.rlpipe-installed

.PHONY: run test install lint repro exps clean docs

run: $(STAMP)
	$(BIN)/rlpipe run params.yaml --overwrite

# The type check first (pyright, basic mode, on the whole of rlpipe/; see pyproject.toml), then the suite
# (which runs ruff, import-linter's contracts and the docs build among its tests).
test: $(STAMP)
	$(BIN)/pyright --pythonpath $(BIN)/python
	$(BIN)/python -m pytest

install: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[all,test,docs]'
	touch $(STAMP)

# The docs site (docs/, mkdocs.yml) at http://127.0.0.1:8000, rebuilt on every change; `make test` builds it --strict.
docs: $(STAMP)
	$(BIN)/mkdocs serve

lint: $(STAMP)
	$(BIN)/ruff check rlpipe tests benchmarks dvc_stages examples
	$(BIN)/ruff format --check rlpipe tests benchmarks dvc_stages examples
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) data

repro: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro

# DVC's experiments in 120 columns: the params that differ (short names) and eval/return_mean
# (`rlpipe exps --metric KEY` for others, `dvc exp show` for everything).
exps: $(STAMP)
	$(BIN)/rlpipe exps