"""Dict observations: ``policy.actor.obs_keys`` / ``policy.critic.obs_keys`` and the per-key normalizer."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlpipe.config import ConfigError, PolicyCfg
from rlpipe.policies import build_policy
from rlpipe.policies.obs_keys import DictObsNormalizer

SPACE = gym.spaces.Dict(
    {
        "state": gym.spaces.Box(-np.inf, np.inf, (3,), np.float32),
        "privileged_state": gym.spaces.Box(-np.inf, np.inf, (5,), np.float32),
    }
)
ACTIONS = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def obs(batch: int = 4) -> TensorDict:
    g = torch.Generator().manual_seed(0)
    return TensorDict(
        {"state": torch.randn(batch, 3, generator=g), "privileged_state": torch.randn(batch, 5, generator=g)},
        batch_size=[batch],
    )


def policy(actor_keys=None, critic_keys=None, name="actor_critic", **extra):
    cfg = PolicyCfg.from_dict(
        {"name": name, "actor": {"obs_keys": actor_keys}, "critic": {"obs_keys": critic_keys}, **extra}
    )
    return build_policy(cfg, SPACE, ACTIONS, "cpu")


def test_asymmetric_actor_critic_reads_its_own_keys() -> None:
    p = policy(["state"], ["state", "privileged_state"])
    assert p.actor[0].in_features == 3 and p.critic[0].in_features == 8
    o = obs()
    action, log_prob = p.sample(o)
    assert action.shape == (4, 2) and log_prob.shape == (4,) and p.value(o).shape == (4,)
    changed = o.clone()
    changed["privileged_state"] += 1.0  # the actor never sees privileged state …
    torch.testing.assert_close(p.distribution(changed).mean, p.distribution(o).mean, rtol=0, atol=0)
    assert not torch.equal(p.value(changed), p.value(o))  # … the critic does


def test_default_reads_every_key_sorted_and_order_is_honoured() -> None:
    p = policy()
    assert p.actor_obs_keys == ("privileged_state", "state") and p.actor[0].in_features == 8
    assert policy(["state", "privileged_state"]).actor_obs_keys == ("state", "privileged_state")


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (["stat"], "policy.actor.obs_keys: unknown key 'stat'; accepted: privileged_state, state"),
        ([], "policy.actor.obs_keys: needs distinct keys; accepted: privileged_state, state"),
        (["state", "state"], "policy.actor.obs_keys: needs distinct keys"),
    ],
)
def test_bad_keys_are_one_line_errors(keys, message) -> None:
    with pytest.raises(ConfigError, match=f"^{message}"):
        policy(keys)


def test_keys_on_flat_observations_and_recurrent_mismatch_are_refused() -> None:
    cfg = PolicyCfg.from_dict({"actor": {"obs_keys": ["state"]}})
    with pytest.raises(ConfigError, match="^policy.actor.obs_keys: the env's observations are not a dict"):
        build_policy(cfg, gym.spaces.Box(-1, 1, (3,)), ACTIONS, "cpu")
    shared = "^policy.critic.obs_keys: 'recurrent_actor_critic' shares one core"
    with pytest.raises(ConfigError, match=shared):
        policy(["state"], ["state", "privileged_state"], name="recurrent_actor_critic")
    recurrent = policy(["state"], ["state"], name="recurrent_actor_critic")
    assert recurrent.sample(obs())[0].shape == (4, 2)


def test_per_key_normalizer_updates_and_normalizes_each_key() -> None:
    p = policy(["state"], None, obs_normalization=True)
    assert isinstance(p.obs_normalizer, DictObsNormalizer)
    batch = obs(64)
    batch["state"] = batch["state"] * 3 + 5
    p.update_normalization(batch)
    normalized = p.normalize_obs(batch)
    assert normalized["state"].mean().abs() < 1e-5 and set(normalized.keys()) == {"state", "privileged_state"}
    restored = policy(["state"], None, obs_normalization=True)
    restored.load_state_dict(p.state_dict())
    torch.testing.assert_close(restored.normalize_obs(batch)["state"], normalized["state"])
