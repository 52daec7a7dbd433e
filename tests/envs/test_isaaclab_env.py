"""``env.backend: isaaclab`` where Isaac Lab is not installed, and the checks made before it is imported.

The backend against the real Isaac Lab runs in its own lane (``make test-isaaclab``,
tests/lanes/isaaclab/); these tests hold in any environment: Isaac Lab is hidden where installed.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from rlpipe.cli import cli
from rlpipe.config import ConfigError, EnvCfg
from rlpipe.envs import build_env
from rlpipe.envs.backends import isaaclab_env
from rlpipe.envs.backends.isaaclab_env import INSTALL_HINT, IsaacLabEnv, build_isaaclab_env

ROOT = Path(__file__).resolve().parents[2]
TINY = ("tracking.backend=none", "trainer.num_envs=4", "trainer.buffer_size=4", "trainer.enable_eval=false")


@pytest.fixture
def no_isaaclab(monkeypatch):
    """Isaac Lab not installed (hidden where it is)."""
    for module in ("isaaclab", "isaaclab_tasks", "isaaclab_rl"):
        monkeypatch.setitem(sys.modules, module, None)


def test_rlpipe_run_without_isaaclab_says_how_to_install_it_and_writes_nothing(
    no_isaaclab, monkeypatch, tmp_path
):
    monkeypatch.chdir(tmp_path)
    overrides = (
        *TINY,
        f"trainer.data_dir={tmp_path / 'data'}",
        "env.backend=isaaclab",
        "env.id=Isaac-Cartpole",
    )
    args = ["run", str(ROOT / "params.yaml"), *(a for o in overrides for a in ("--set", o))]
    result = CliRunner().invoke(cli, args)
    assert (result.exit_code, result.output.strip().splitlines()) == (
        2,
        [f"Error: env.id: Isaac-Cartpole {INSTALL_HINT}"],
    )
    assert "python3.12" in INSTALL_HINT and "isaaclab==3.0.0" in INSTALL_HINT
    assert list(tmp_path.iterdir()) == []  # no run dir, no MLflow store


def test_the_backend_is_a_params_value():
    assert EnvCfg.model_validate({"id": "Isaac-Cartpole", "backend": "isaaclab"}).backend == "isaaclab"


@pytest.mark.parametrize(
    ("cfg", "line"),
    [
        (
            {"num_envs": 4},
            "env.cfg.num_envs: unknown argument of env.backend isaaclab; accepted: overrides, clip_actions",
        ),
        ({"overrides": "env.sim.dt=0.01"}, "env.cfg.overrides: got 'env.sim.dt=0.01'; accepted: a list"),
        ({"overrides": ["presets"]}, "env.cfg.overrides: got ['presets']; accepted: a list"),
        ({"clip_actions": 0}, "env.cfg.clip_actions: got 0; accepted: a positive number or null"),
        ({"clip_actions": True}, "env.cfg.clip_actions: got True; accepted: a positive number or null"),
    ],
)
def test_env_cfg_is_checked_before_isaaclab_is_imported(no_isaaclab, cfg, line):
    with pytest.raises(ConfigError) as caught:
        build_env("Isaac-Cartpole", 4, "cpu", cfg, backend="isaaclab")
    assert str(caught.value).startswith(line)


def test_a_second_simulation_in_one_process_is_refused(monkeypatch):
    monkeypatch.setattr(IsaacLabEnv, "_open", object())
    with pytest.raises(
        ConfigError, match=r"^env.backend: isaaclab runs one simulation per process.*enable_eval=false"
    ):
        build_isaaclab_env("Isaac-Cartpole", 4, "cpu", {})


@pytest.mark.parametrize(
    ("device", "isaac"),
    [("cpu", "cpu"), ("cuda", "cuda:0"), ("cuda:1", "cuda:1"), (torch.device("cpu"), "cpu")],
)
def test_devices_are_spelled_as_isaaclab_reads_them(device, isaac):
    assert isaaclab_env._isaac_device(device) == isaac


class _DrawingVecEnv:
    """An rsl_rl VecEnv stand-in that re-seeds and draws from torch's global RNG while it is built."""

    num_envs, num_actions, device = 2, 1, "cpu"

    def __init__(self) -> None:
        torch.manual_seed(0)  # Isaac Lab's configure_seed
        self.obs = torch.rand(self.num_envs, 3)  # a reset's randomization

    def get_observations(self):
        return {"policy": self.obs}

    def step(self, actions):
        raise AssertionError("not stepped here")


def test_building_the_env_leaves_the_global_rng_as_it_was(monkeypatch):
    cfg = types.SimpleNamespace(scene=types.SimpleNamespace(num_envs=0), sim=types.SimpleNamespace(device=""))
    monkeypatch.setattr(isaaclab_env, "task_configs", lambda task, overrides: (cfg, types.SimpleNamespace()))
    monkeypatch.setattr(isaaclab_env, "_make", lambda *args: _DrawingVecEnv())
    torch.manual_seed(123)
    expected = torch.rand(4)
    torch.manual_seed(123)
    env = build_isaaclab_env("Isaac-Cartpole", 2, "cpu", {})
    try:
        assert torch.equal(torch.rand(4), expected)  # the policy's initial weights as replay rebuilds them
        assert (cfg.scene.num_envs, cfg.sim.device, cfg.seed) == (2, "cpu", 123)
    finally:
        env.close()
    assert IsaacLabEnv._open is None
