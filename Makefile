# `make run` and `make test` do all set-up: .venv, torch==2.13.0 first (the local CPU build), then
# the project with its test extras, pinned by constraints.txt so nothing upgrades torch.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.rlpipe-installed

.PHONY: run test install lint repro exps clean

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
	$(BIN)/ruff check rlpipe tests benchmarks dvc_stages examples
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) data

repro: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro

# `dvc exp show`, short: the params that differ between experiments and the key metrics (README).
exps: $(STAMP)
	$(BIN)/dvc exp show --only-changed \
	  --drop '.*/|checkpoint$$|mlflow_run_id$$|iterations$$|.*run\.json$$|rev$$|typ$$|parent$$|Created$$' \
	  --keep '(.*:)?eval/return_mean$$|train/episode_return_mean$$|env_steps$$|wall_s$$'
