"""``python -m rlpipe.isaaclab``: one line without Isaac Lab; the params it builds from an agent config."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest
from click.testing import CliRunner

from rlpipe.config import RunConfig
from rlpipe.envs.backends.isaaclab_env import INSTALL_HINT
from rlpipe.isaaclab.train import isaaclab_params, train

ENTRY = ["--task", "Isaac-Cartpole", "--num_envs", "16", "--device", "cpu", "--max_iterations", "2"]


def test_without_isaaclab_the_entry_script_says_how_to_install_it_and_writes_nothing(monkeypatch, tmp_path):
    for module in ("isaaclab", "isaaclab_tasks", "isaaclab_rl"):
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(train, ENTRY)
    assert (result.exit_code, result.output.strip().splitlines()) == (
        2,
        [f"Error: --task Isaac-Cartpole {INSTALL_HINT}"],
    )
    assert list(tmp_path.iterdir()) == []


def test_the_module_runs_as_a_command():
    result = subprocess.run(
        [sys.executable, "-m", "rlpipe.isaaclab", "--help"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "--num_envs" in result.stdout and "--max_iterations" in result.stdout


@pytest.fixture
def rsl_rl_mapping(monkeypatch):
    """``rlpipe.rsl_rl.params_from_train_cfg`` as a stand-in that maps the rollout length only."""
    module = types.ModuleType("rlpipe.rsl_rl")
    module.params_from_train_cfg = lambda cfg: {  # type: ignore[attr-defined]
        "trainer": {"buffer_size": cfg["num_steps_per_env"], "seed": 7},
        "tracking": {"backend": "none"},
    }
    monkeypatch.setitem(sys.modules, "rlpipe.rsl_rl", module)


def test_params_take_the_agent_config_then_the_command_line(rsl_rl_mapping):
    train_cfg = {
        "num_steps_per_env": 16,
        "seed": 42,
        "max_iterations": 150,
        "experiment_name": "cartpole_direct",
    }
    params = isaaclab_params(
        "Isaac-Cartpole", train_cfg, num_envs=16, device="cpu", hydra_overrides=["env.sim.dt=0.01"]
    )
    cfg = RunConfig.model_validate(params)
    assert cfg.env.id == "Isaac-Cartpole" and cfg.env.backend == "isaaclab"
    assert cfg.env.cfg == {"overrides": ["env.sim.dt=0.01"]}
    trainer = cfg.trainer
    assert (trainer.num_envs, trainer.device, trainer.buffer_size) == (16, "cpu", 16)
    assert (trainer.seed, trainer.iterations, trainer.exp_name, trainer.enable_eval) == (
        42,
        150,
        "cartpole_direct",
        False,
    )
    assert cfg.tracking.backend == "none"


def test_flags_win_over_the_agent_config(rsl_rl_mapping):
    train_cfg = {"num_steps_per_env": 16, "seed": 42, "max_iterations": 150}
    params = isaaclab_params("Isaac-Cartpole", train_cfg, num_envs=4, device="cuda", max_iterations=3, seed=5)
    assert {k: params["trainer"][k] for k in ("num_envs", "device", "iterations", "seed")} == {
        "num_envs": 4,
        "device": "cuda",
        "iterations": 3,
        "seed": 5,
    }
    assert "cfg" not in params["env"]
