"""Minibatches above ``chunk_rows`` run in chunks: the same optimizer steps, the gradient up to rounding."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from tensordict import TensorDict

from rlpipe.algorithms import build_algo
from rlpipe.config import ConfigError
from rlpipe.policies import build_policy

OBS, ACT = gym.spaces.Box(-1, 1, (5,)), gym.spaces.Box(-1, 1, (2,))
ROWS = 3000


def make_ppo(chunk_rows, policy_cfg=None, **cfg):
    torch.manual_seed(0)
    policy = build_policy(policy_cfg or {"name": "actor_critic"}, OBS, ACT, "cpu")
    cfg = {"batch_size": 1000, "n_epochs": 2, "chunk_rows": chunk_rows, **cfg}
    return build_algo("ppo", cfg, policy, "cpu")


def batch() -> TensorDict:
    g = torch.Generator().manual_seed(1)
    columns = {
        "obs": torch.randn(ROWS, 5, generator=g),
        "action": torch.randn(ROWS, 2, generator=g),
        "sample_log_prob": torch.randn(ROWS, generator=g) - 2,
        "advantage": torch.randn(ROWS, generator=g),
        "return": torch.randn(ROWS, generator=g),
        "value": torch.randn(ROWS, generator=g),
    }
    return TensorDict(columns, batch_size=[ROWS])


def train(algo) -> tuple[torch.Tensor, dict[str, float]]:
    """One update of ``batch()``: the flat parameters afterwards and the reported stats."""
    algo.generator.manual_seed(3)
    stats = algo.report(algo._epochs(batch()), {})
    return torch.cat([p.detach().flatten() for p in algo.policy.parameters()]), stats


@pytest.mark.parametrize(
    "options",
    [
        {"normalize_advantage": "minibatch"},
        {"normalize_advantage": "batch"},
        {"accumulate_grads": True},
        {"clip_value_loss": True},
    ],
)
def test_chunks_give_the_whole_minibatch_update_up_to_rounding(options):
    whole_params, whole = train(make_ppo(None, **options))
    chunk_params, chunked = train(make_ppo(300, **options))  # 1000-row minibatches: chunks of 300 ×3 and 100
    assert not torch.equal(whole_params, chunk_params)  # a different summation order, really chunked
    torch.testing.assert_close(chunk_params, whole_params, rtol=0, atol=1e-6)
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"):
        assert chunked[key] == pytest.approx(whole[key], rel=1e-5, abs=1e-6), key
    assert chunked["optimizer_steps"] == whole["optimizer_steps"]


def test_a_chunk_as_large_as_the_minibatch_changes_nothing():
    assert torch.equal(train(make_ppo(1000))[0], train(make_ppo(None))[0])


def test_target_kl_stops_at_the_same_minibatch_chunked_or_not():
    whole_params, whole = train(make_ppo(None, target_kl=0.01, learning_rate=0.05))
    chunk_params, chunked = train(make_ppo(300, target_kl=0.01, learning_rate=0.05))
    assert whole["early_stop_epoch"] >= 1 and chunked["optimizer_steps"] == whole["optimizer_steps"]
    torch.testing.assert_close(chunk_params, whole_params, rtol=0, atol=1e-6)


def test_auto_chunks_on_cpu_and_never_a_recurrent_policy():
    assert make_ppo("auto").chunk_rows == 4096
    assert make_ppo(None).chunk_rows is None and make_ppo(512).chunk_rows == 512
    recurrent = {"name": "recurrent_actor_critic", "recurrent": {"type": "gru", "hidden_size": 8}}
    assert make_ppo(512, recurrent).chunk_rows is None  # whole sequences: the loss is not a mean over rows


@pytest.mark.parametrize("value", [0, -4, 2.5, "fast", True])
def test_chunk_rows_is_an_int_auto_or_null(value):
    with pytest.raises(ConfigError, match="chunk_rows.*accepted: an int >= 1, auto or null"):
        make_ppo(value)
