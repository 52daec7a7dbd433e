"""Every wrong type in params is refused at load: one line with the exact key path, exit 2 from the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from rlpipe.cli import cli
from rlpipe.config import ConfigError, load
from rlpipe.config.policy import ACTIVATIONS

ROOT = Path(__file__).resolve().parents[2]
PARAMS = ROOT / "params.yaml"


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        # booleans inside int lists
        (
            "policy.actor.network_cfg.hidden_sizes=[64, true]",
            "policy.actor.network_cfg.hidden_sizes.1: Input should be a valid integer, "
            "not true/false (got true)",
        ),
        (
            "algorithm.cfg.lr_schedule=[[0, 1.0e-3], [100, false]]",
            "algorithm.cfg.lr_schedule.1.1: Input should be a valid number, not true/false (got false)",
        ),
        # nested lists
        (
            "policy.critic.network_cfg.hidden_sizes=[[64], 64]",
            "policy.critic.network_cfg.hidden_sizes.0: Input should be a valid integer (got [64])",
        ),
        (
            "policy.actor.obs_keys=[[state]]",
            "policy.actor.obs_keys.0: Input should be a valid string (got ['state'])",
        ),
        # mappings where a list is due
        (
            "policy.actor.network_cfg.hidden_sizes={a: 64}",
            "policy.actor.network_cfg.hidden_sizes: Input should be a valid list",
        ),
        (
            "trainer.stop_when={metric: eval/return_mean, min: 475}",
            "trainer.stop_when: Input should be a valid list",
        ),
        # strings where numbers are due, numbers or lists where strings are due
        (
            "policy.actor.network_cfg.hidden_sizes=['64']",
            "policy.actor.network_cfg.hidden_sizes.0: Input should be a valid integer, not a string",
        ),
        (
            "algorithm.cfg.clip_coef='0.2'",
            "algorithm.cfg.clip_coef: Input should be a valid number, not a string",
        ),
        (
            "policy.actor.network_cfg.activation=1",
            "policy.actor.network_cfg.activation: Input should be a valid string",
        ),
        ("env.id=[CartPole]", "env.id: Input should be a valid string (got ['CartPole'])"),
        # values a field does not take, and the replay overrides, checked at load too
        (
            "policy.actor.network_cfg.hidden_sizes=[64, 0]",
            "policy.actor.network_cfg.hidden_sizes.1: Input should be greater than or equal to 1 (got 0)",
        ),
        ("policy.critic.type=cnn", "policy.critic.type: unknown network type 'cnn'; accepted: mlp"),
        (
            "replay.algorithm.cfg.clip_coef=true",
            "replay.algorithm.cfg.clip_coef: Input should be a valid number, not true/false (got true)",
        ),
        (
            "replay.algorithm.cfg.clip_cof=0.1",
            "replay.algorithm.cfg.clip_cof: unknown key (did you mean 'clip_coef'?)",
        ),
    ],
)
def test_a_wrong_type_is_one_line_naming_the_key_path(override, expected):
    with pytest.raises(ConfigError) as info:
        load(PARAMS, [override])
    message = str(info.value)
    assert message.startswith(f"{PARAMS}: {expected}") and "\n" not in message


def test_the_cli_refuses_it_with_exit_2_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bad = "policy.actor.network_cfg.hidden_sizes=[64, true]"
    result = CliRunner().invoke(cli, ["run", str(PARAMS), "--set", bad])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"Error: {PARAMS}: policy.actor.network_cfg.hidden_sizes.1: Input should be a valid integer, not "
        "true/false (got true)"
    ]
    assert list(tmp_path.iterdir()) == []


def test_the_network_config_is_typed_and_its_activations_are_the_builders():
    from rlpipe.policies.mlp import ACTIVATIONS as BUILT

    cfg = load(PARAMS, ["policy.actor.network_cfg={hidden_sizes: [32]}"])
    network = cfg.policy.actor.network_cfg
    assert network.hidden_sizes == [32] and network.activation == "tanh"
    assert set(ACTIVATIONS) == set(BUILT)
