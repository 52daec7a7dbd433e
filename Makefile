# `make run` and `make test` do all set-up: .venv, torch==2.13.0 first (the local CPU build), then
# the project with its test extras, pinned by constraints.txt so nothing upgrades torch.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.rlpipe-installed

.PHONY: run test install lint repro clean

run: $(STAMP)
	$(BIN)/rlpipe run params.yaml --overwrite

test: $(STAMP)
	$(BIN)/python -m pytest

install: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check rlpipe tests benchmarks stages examples
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) data

repro: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro
