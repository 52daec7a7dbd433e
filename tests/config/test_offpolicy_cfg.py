"""The off-policy configs: what an SAC/TD3 run refuses, each in one line naming the key."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from click.testing import CliRunner

from rlpipe import config
from rlpipe.build import build_algorithm
from rlpipe.cli import cli
from rlpipe.config import ConfigError
from rlpipe.config.offpolicy import SACCfg, TD3Cfg, replay_rollouts

ROOT = Path(__file__).resolve().parents[2]
SAC_PARAMS = ROOT / "configs" / "sac_pendulum.yaml"
OBS = gym.spaces.Box(-8.0, 8.0, (3,), np.float32)
ACTION = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)


def refusal(*overrides: str) -> str:
    """The one-line ``ConfigError`` loading ``configs/sac_pendulum.yaml`` with ``overrides`` raises."""
    with pytest.raises(ConfigError) as info:
        config.load(SAC_PARAMS, list(overrides))
    message = str(info.value)
    assert "\n" not in message
    return message


def build_refusal(*overrides: str) -> str:
    """The one-line ``ConfigError`` building the algorithm of those params raises."""
    cfg = config.load(SAC_PARAMS, ["trainer.device=cpu", *overrides])
    with pytest.raises(ConfigError) as info:
        build_algorithm(cfg, OBS, ACTION, torch.device("cpu"))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_the_shipped_config_loads_and_its_ring_fits_its_stores():
    cfg = config.load(SAC_PARAMS)
    algo = cfg.algorithm.cfg
    assert isinstance(algo, SACCfg) and cfg.store.enabled
    assert replay_rollouts(algo.replay_size, cfg.trainer.num_envs, cfg.trainer.buffer_size) == 125
    assert algo.steps_problem(cfg.trainer.buffer_size) is None
    assert algo.gradient_steps(cfg.trainer.buffer_size) == 50


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("store.every=2", "store.every: got 2"),
        ("store.envs=4", "store.envs: got 4"),
        ("store.precision={obs: float16}", "store.precision: an off-policy run needs {}"),
        ("store.budget={total_tb: 1}", "store.budget: an off-policy run needs null"),
        ("store.keep_last=124", "store.keep_last: got 124; at least the ring's 125 rollouts"),
    ],
)
def test_store_settings_the_ring_cannot_be_rebuilt_from_are_refused(override, key):
    message = refusal(override)
    assert key in message and "rebuilt from the stores on --resume" in message
    assert "(got 1)" not in message  # no stand-in value shown as the user's


@pytest.mark.parametrize(
    "overrides",
    [
        ["store.enabled=false", "store.every=2", "store.precision={obs: float16}", "store.keep_last=1"],
        ["store.envs=16", "store.keep_last=125"],  # every env, exactly the ring's rollouts
        ["algorithm.cfg.replay_size=800", "store.keep_last=1"],  # a ring of one rollout
    ],
)
def test_store_settings_that_keep_the_ring_rebuildable_load(overrides):
    assert isinstance(config.load(SAC_PARAMS, overrides).algorithm.cfg, SACCfg)


def test_a_ppo_run_keeps_every_store_option():
    cfg = config.load(ROOT / "params.yaml", ["store.enabled=true", "store.every=2", "store.keep_last=1"])
    assert cfg.store.every == 2


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["algorithm.cfg.updates_per_step=0.33"],
            "algorithm.cfg.updates_per_step: 0.33 × trainer.buffer_size (50) = 16.5 gradient steps",
        ),
        (["algorithm.cfg.updates_per_step=0.01"], "algorithm.cfg.updates_per_step: 0.01 ×"),
        (["policy.name=actor_critic"], "policy.name: sac trains its own Q critics"),
        (["policy.distribution=gaussian"], "policy.distribution: sac acts through 'tanh_gaussian'"),
        (["algorithm.name=td3"], "policy.distribution: td3 acts through 'tanh_deterministic'"),
    ],
)
def test_runs_sac_and_td3_cannot_make_are_refused_before_training(overrides, expected):
    assert expected in build_refusal(*overrides)


@pytest.mark.parametrize("updates", ["0.5", "2", "0.02"])
def test_whole_step_counts_build(updates):
    cfg = config.load(SAC_PARAMS, ["trainer.device=cpu", f"algorithm.cfg.updates_per_step={updates}"])
    algo = build_algorithm(cfg, OBS, ACTION, torch.device("cpu"))
    assert algo.cfg.gradient_steps(50) == round(50 * float(updates))


def test_algorithm_blocks_check_their_own_values():
    with pytest.raises(ValueError, match="v_min"):
        TD3Cfg.model_validate({"distributional": {"v_min": 1.0, "v_max": 1.0}})
    with pytest.raises(ValueError, match="ent_coef"):
        SACCfg.model_validate({"ent_coef": -0.1})
    with pytest.raises(ValueError, match="lr_schedule"):
        SACCfg.model_validate({"lr_schedule": [[0, 1e-3]], "lr_schedule_kind": "linear"})
    assert TD3Cfg().policy_frequency == 2 and SACCfg().policy_frequency == 1


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("store.every=2", "store.every: got 2; an off-policy run needs 1"),
        ("algorithm.cfg.updates_per_step=0.33", "algorithm.cfg.updates_per_step: 0.33"),
    ],
)
def test_the_cli_exits_2_in_one_line_and_writes_nothing(tmp_path, override, message):
    data = tmp_path / "data"
    args = ["run", str(SAC_PARAMS), "--set", f"trainer.data_dir={data}", "--set", "tracking.backend=none"]
    result = CliRunner().invoke(cli, [*args, "--set", "trainer.device=cpu", "--set", override])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output
    assert not data.exists()
