# `make run` and `make test` do all set-up: .venv, torch==2.13.0 first (the local CPU build), then
# the project with its test extras, pinned by constraints.txt so nothing upgrades torch.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.rlpipe-installed

.PHONY: run test install lint repro exps clean docs test-lerobot test-mjlab

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
# Test lanes install the real thing in their own venvs under LANES_DIR (shared by every checkout on the
# machine; each keeps a stamp so its heavy install runs once) and stay out of `make test`.
LANES_DIR ?= $(HOME)/.cache/rlpipe/lanes

# LeRobot: lerobot 0.4.4 (Python 3.11, torch 2.10, numpy 2.2; about 8 GB) reads, checks and edits the
# exports rlpipe makes here in .venv (video decoding needs FFmpeg's libraries: apt-get install ffmpeg).
LEROBOT_PYTHON  ?= python3.11
LEROBOT_LANE    := $(LANES_DIR)/lerobot
LEROBOT_STAMP   := $(LEROBOT_LANE)/.rlpipe-lane-installed
LEROBOT_EXPORTS := data/lanes/lerobot

$(LEROBOT_STAMP):
	$(LEROBOT_PYTHON) -m venv $(LEROBOT_LANE)
	$(LEROBOT_LANE)/bin/python -m pip install --progress-bar off -q lerobot==0.4.4 pytest pytest-timeout
	touch $(LEROBOT_STAMP)

test-lerobot: $(STAMP) $(LEROBOT_STAMP)
	$(BIN)/python tests/lanes/lerobot/make_exports.py $(LEROBOT_EXPORTS)
	RLPIPE_LEROBOT_EXPORTS=$(CURDIR)/$(LEROBOT_EXPORTS) $(LEROBOT_LANE)/bin/python -m pytest \
		tests/lanes/lerobot -m lane -o addopts= -p no:cacheprovider --confcutdir=tests/lanes/lerobot

MJLAB_VENV := $(LANES_DIR)/mjlab
MJLAB_STAMP := $(MJLAB_VENV)/.mjlab-1.6.0-installed

# mjlab 1.6 (Python 3.11, MuJoCo 3.11: not the default venv's MuJoCo 4) on the CPU: Go1 velocity trained by
# rlpipe through env.backend: mjlab and through rlpipe.rsl_rl's runner; Warp's compiled kernels are kept.
test-mjlab: $(MJLAB_STAMP)
	$(MJLAB_VENV)/bin/python -m pip install -q --no-deps -e .
	CUDA_VISIBLE_DEVICES= WARP_CACHE_PATH=$(LANES_DIR)/warp-cache-mjlab MUJOCO_GL=egl \
	  $(MJLAB_VENV)/bin/python -m pytest tests/lanes/mjlab -o addopts='-p no:cacheprovider' -m lane --timeout 1800 -v -rP

$(MJLAB_STAMP):
	python3.11 -m venv $(MJLAB_VENV)
	$(MJLAB_VENV)/bin/python -m pip install -q --progress-bar off --upgrade pip
	$(MJLAB_VENV)/bin/python -m pip install -q --progress-bar off mjlab==1.6.0 torch==2.13.0
	$(MJLAB_VENV)/bin/python -m pip install -q --progress-bar off -e . pytest pytest-timeout
	$(MJLAB_VENV)/bin/python -m pip check
	touch $(MJLAB_STAMP)

# Isaac Lab 3.0's lane (docs/isaaclab.md): Isaac Lab in its own Python 3.12 venv under $(LANES_DIR),
# shared by every checkout on the machine and built once (~8 GB, 15+ minutes; the stamp); each run
# reinstalls rlpipe from this checkout keeping Isaac Lab's torch (pip check then vouches for the
# rest), makes the offline cartpole assets, keeps Warp's compiled kernels, and runs
# tests/lanes/isaaclab/ with the lane's Python.
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
