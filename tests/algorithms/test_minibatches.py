"""The shared update loop: what PPO has, GRPO now has too; counters, stat weighting, sync-only steps."""

from __future__ import annotations

import math

import gymnasium as gym
import pytest
import torch
from tensordict import TensorDict

import rlpipe.algorithms.base as algo_base
from rlpipe.algorithms import GRPOCfg, build_algo
from rlpipe.algorithms.minibatches import Tally, minibatch_slices
from rlpipe.config import ConfigError
from rlpipe.policies import build_policy
from rlpipe.rollout import allocate_rollout

OBS, ACT = gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2)
N, T = 8, 8


def make_grpo(**cfg):
    policy = build_policy({"name": "actor_only", "critic": None}, OBS, ACT, "cpu")
    return build_algo("grpo", {"batch_size": 8, "n_epochs": 1, "kl_coef": 0.0, **cfg}, policy, "cpu")


def rollout(seed=0, dones=False):
    gen = torch.Generator().manual_seed(seed)
    ro = allocate_rollout(N, T, (3,), (), torch.int64, "cpu")
    ro["obs"].copy_(torch.randn(ro["obs"].shape, generator=gen))
    ro["action"][:, :-1] = torch.randint(0, 2, (N, T), generator=gen)
    ro["sample_log_prob"][:, :-1] = math.log(0.5)
    ro["reward"][:, :-1] = torch.randn(N, T, generator=gen)
    if dones:  # envs 0..3 end at step 3: their steps 4.. are masked out of the update
        ro["done"][:4, 3] = ro["terminated"][:4, 3] = True
    return ro


def count_steps(algo):
    calls = []
    step = algo.optimizer.step
    algo.optimizer.step = lambda *a, **k: (calls.append(1), step(*a, **k))[1]
    return calls


def test_grpo_target_kl_stops_early_and_reports_the_epoch():
    algo = make_grpo(target_kl=1e-9, n_epochs=3, learning_rate=1e-2)
    it = iter([0.0] * 8 + [1.0])  # epoch 1: 8 minibatches under the limit; epoch 2: the first one over
    algo.kl_rules.global_mean = lambda t: torch.tensor(next(it))
    stats = algo.update(rollout())
    assert stats["early_stop_epoch"] == 2 and stats["minibatch_steps"] == 8 == stats["optimizer_steps"]


def test_grpo_adaptive_lr_and_accumulated_gradients():
    algo = make_grpo(
        schedule="adaptive",
        desired_kl=100.0,
        learning_rate=1e-4,
        num_mini_batches=4,
        accumulate_grads=True,
        n_epochs=2,
    )
    calls = count_steps(algo)
    stats = algo.update(rollout())
    assert len(calls) == 2 and stats["optimizer_steps"] == 2 and stats["minibatch_steps"] == 8
    assert stats["learning_rate"] == pytest.approx(1e-4 * 1.5**8)  # tiny KL: ×1.5 per minibatch


def test_grpo_shuffle_off_ignores_the_seed_and_other_optimizers_apply():
    def run(seed, **cfg):
        torch.manual_seed(0)
        algo = make_grpo(n_epochs=2, **cfg)
        algo.reseed(seed)
        algo.update(rollout())
        return [p.detach().clone() for p in algo.policy.parameters()]

    assert all(
        torch.equal(a, b)
        for a, b in zip(run(1, shuffle_minibatches=False), run(2, shuffle_minibatches=False))
    )
    assert any(not torch.equal(a, b) for a, b in zip(run(1), run(2)))
    assert type(make_grpo(optimizer="sgd").optimizer) is torch.optim.SGD


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"schedule": "adaptive"}, r"^algorithm\.cfg\.desired_kl: required when schedule is adaptive"),
        ({"amp": "fp16"}, r"^algorithm\.cfg\.amp: fp16 needs a CUDA device"),
        ({"lr_schedule": [[10, 1e-3], [5, 1e-4]]}, r"^algorithm\.cfg\.lr_schedule: .*increasing"),
        ({"target_kl": 0.01, "accumulate_grads": True}, r"^algorithm\.cfg\.target_kl: cannot be combined"),
    ],
)
def test_grpo_validates_the_shared_fields_in_one_line(cfg, message):
    with pytest.raises(ConfigError, match=message) as info:
        make_grpo(**cfg)
    assert "\n" not in str(info.value)
    assert {"lr_schedule", "amp", "target_kl", "accumulate_grads"} <= set(GRPOCfg.model_fields)


def test_grpo_stats_are_weighted_by_valid_steps():
    algo = make_grpo(n_epochs=1, batch_size=20)  # 48 valid steps: minibatches of 20, 20, 8
    ro = rollout(dones=True)
    algo.compute_advantages(ro)
    seen = []
    loss = algo.loss_step

    def spy(mb):
        total, stats = loss(mb)
        seen.append((mb.batch_size[0], stats["entropy"]))
        return total, stats

    algo.loss_step = spy
    stats = algo.update(ro)
    assert [rows for rows, _ in seen] == [20, 20, 8]
    expected = sum(rows * e for rows, e in seen) / 48
    assert stats["entropy"] == pytest.approx(float(expected), rel=1e-6)
    assert stats["valid_fraction"] == pytest.approx(48 / 64)


def test_grpo_minibatches_a_k_rank_batch_as_one():
    """Ranks keep different numbers of valid steps: a replayed K-rank batch is shuffled as a whole."""

    def run(shards):
        torch.manual_seed(0)
        algo = make_grpo(n_epochs=2)
        algo.shards = shards
        algo.reseed(3)
        algo.update(rollout(dones=True))
        return [p.detach().clone() for p in algo.policy.parameters()]

    assert all(torch.equal(a, b) for a, b in zip(run(1), run(2)))


def test_a_rank_with_fewer_minibatches_still_steps_with_the_others(monkeypatch):
    """Distributed ranks step together: a rank out of rows joins each remaining step with zero grads."""
    monkeypatch.setattr(algo_base, "global_minibatch_count", lambda rows, size, device: 10)
    algo = make_grpo(n_epochs=2)
    calls = count_steps(algo)
    grads = []
    average = algo_base.average_gradients
    monkeypatch.setattr(
        algo_base,
        "average_gradients",
        lambda params: (grads.append([p.grad.clone() for p in params]), average([]))[1],
    )
    stats = algo.update(rollout())  # 64 valid steps: 8 own minibatches + 2 sync-only steps per epoch
    assert len(calls) == 20 and stats["minibatch_steps"] == 16 == stats["optimizer_steps"]
    sync_only = [grads[i] for i in (8, 9, 18, 19)]
    assert all(torch.count_nonzero(g) == 0 for step in sync_only for g in step)
    assert all(any(torch.count_nonzero(g) for g in grads[i]) for i in (0, 7, 10))


def test_tally_means_and_minibatch_slices_cover_every_row():
    tally = Tally()
    tally.add({"a": torch.tensor(1.0), "b": torch.tensor(2.0)}, None)
    tally.add({"a": torch.tensor(3.0), "b": torch.tensor(4.0)}, None)
    assert tally.names == ("a", "b") and tally.forwards == 2
    torch.testing.assert_close(tally.totals / tally.weight, torch.tensor([2.0, 3.0]))
    algo = make_grpo()
    algo.reseed(0)
    epoch = lambda: minibatch_slices(19, 4, algo.generator, algo.device)  # noqa: E731
    rows = torch.cat(list(epoch()))
    assert sorted(rows.tolist()) == list(range(19))
    batch = TensorDict({"x": torch.arange(19)}, batch_size=[19])
    assert [batch[idx].batch_size[0] for idx in epoch()] == [4, 4, 4, 4, 3]
