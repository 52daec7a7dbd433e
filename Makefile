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
# Isaac Lab 3.0's lane (docs/isaaclab.md): Isaac Lab in its own Python 3.12 venv under $(LANES_DIR),
# shared by every checkout on the machine and built once (~8 GB, 15+ minutes; the stamp); each run
# reinstalls rlpipe from this checkout keeping Isaac Lab's torch (pip check then vouches for the
# rest), makes the offline cartpole assets, keeps Warp's compiled kernels, and runs
# tests/lanes/isaaclab/ with the lane's Python.
LANES_DIR ?= $(HOME)/.cache/rlpipe/lanes
PYTHON312 ?= python3.12
ISAACLAB_VENV  := $(LANES_DIR)/isaaclab
ISAACLAB_STAMP := $(ISAACLAB_VENV)/.isaaclab-installed
ISAACLAB_PIP   := $(ISAACLAB_VENV)/bin/python -m pip install -q --progress-bar off

.PHONY: test-isaaclab

$(ISAACLAB_STAMP):
	$(PYTHON312) -m venv $(ISAACLAB_VENV)
	$(ISAACLAB_PIP) --upgrade pip
	$(ISAACLAB_PIP) --only-binary=:all: isaaclab==3.0.0
	$(ISAACLAB_PIP) --no-deps isaaclab==3.0.0 rsl-rl-lib pin-pink
	$(ISAACLAB_PIP) hydra-core==1.3.2  # --only-binary backtracked it to a release without hydra.core
	$(ISAACLAB_VENV)/bin/python -c "import importlib.metadata as m; print('torch==' + m.version('torch'))" \
	  > $(ISAACLAB_VENV)/torch-pin.txt
	touch $(ISAACLAB_STAMP)

test-isaaclab: $(ISAACLAB_STAMP)
	$(ISAACLAB_PIP) -c $(ISAACLAB_VENV)/torch-pin.txt -c tests/lanes/isaaclab/constraints.txt \
	  . pytest pytest-timeout
	$(ISAACLAB_VENV)/bin/python -m pip check
	$(ISAACLAB_VENV)/bin/python tests/lanes/isaaclab/make_assets.py $(LANES_DIR)/isaaclab-assets
	RLPIPE_LANE=isaaclab ISAACSIM_ASSET_ROOT=$(LANES_DIR)/isaaclab-assets \
	  WARP_CACHE_PATH=$(LANES_DIR)/isaaclab-warp-cache \
	  $(ISAACLAB_VENV)/bin/python -m pytest tests/lanes/isaaclab -o addopts="-p no:cacheprovider" -v -s
