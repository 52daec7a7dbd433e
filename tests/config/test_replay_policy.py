"""replay.policy: a partial policy block for an off-policy replay, merged key by key, checked at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlpipe.config import ConfigError, load, merged_replay_policy

PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"
SAC = "replay.algorithm={name: sac}"


def test_the_overrides_merge_over_the_runs_policy_key_by_key():
    cfg = load(PARAMS, [SAC, "replay.policy={name: actor_only, actor: {network_cfg: {hidden_sizes: [32]}}}"])
    merged = merged_replay_policy(cfg.policy, cfg.replay.policy)
    assert merged.name == "actor_only" and cfg.policy.name == "actor_critic"
    assert merged.actor.network_cfg.hidden_sizes == [32]
    assert merged.actor.network_cfg.activation == cfg.policy.actor.network_cfg.activation  # kept
    assert merged_replay_policy(cfg.policy, {}) is cfg.policy


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["replay.policy.distribution=tanh_gaussian"],
            "replay.policy: only an off-policy replay algorithm (sac, td3) trains a fresh policy; ppo "
            "replays from the run's checkpoints",
        ),
        ([SAC, "replay.policy.distribution=tanh"], "replay.policy.distribution: Input should be 'auto'"),
        ([SAC, "replay.policy.nme=actor_only"], "replay.policy.nme: unknown key (did you mean 'name'?)"),
        (
            [SAC, "replay.policy.actor.network_cfg.hidden_sizes=[0]"],
            "replay.policy.actor.network_cfg.hidden_sizes.0: Input should be greater than or equal to 1",
        ),
    ],
)
def test_a_bad_replay_policy_is_one_line_naming_its_key(overrides, expected):
    with pytest.raises(ConfigError) as info:
        load(PARAMS, overrides)
    message = str(info.value)
    assert message.startswith(f"{PARAMS}: {expected}") and "\n" not in message, message
