"""Recurrent PPO: sequence minibatches, config checks, and a memory task only a recurrent policy solves."""

from __future__ import annotations

import pytest
import torch

from rlpipe.algorithms import PPO, PPOCfg, build_algo
from rlpipe.algorithms.sequences import minibatch_rows, sequence_batch
from rlpipe.build import learn
from rlpipe.collector import Collector
from rlpipe.config import ConfigError
from rlpipe.envs import build_env
from rlpipe.policies import build_policy
from rlpipe.rollout import allocate_rollout

LENGTH, N, T, L = 6, 64, 24, 8
"""RepeatFirst episodes of 6 steps; 64 envs × 24 steps per rollout; BPTT over 8 steps (crossing episodes)."""


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny networks: one thread avoids oversubscription on shared CI cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_sequence_batch_cuts_each_env_into_consecutive_chunks():
    ro = allocate_rollout(2, 6, (1,), (), torch.int64, "cpu", {"recurrent_state": ((2,), torch.float32)})
    ro["obs"][..., 0] = torch.arange(14.0).view(2, 7)
    ro["recurrent_state"][:, :, 0] = torch.arange(14.0).view(2, 7)
    ro["done"][0, 4] = True
    batch = sequence_batch(ro, ("obs",), 3)
    assert batch["obs"][..., 0].tolist() == [[0, 1, 2], [3, 4, 5], [7, 8, 9], [10, 11, 12]]
    assert batch["start_state"][:, 0].tolist() == [0, 3, 7, 10]
    assert batch["done"][1].tolist() == [False, True, False]


def test_minibatches_hold_whole_sequences():
    flat = {"obs": torch.zeros(320, 3), "advantage": torch.zeros(320)}
    seqs = {"obs": torch.zeros(40, 8, 3), "advantage": torch.zeros(40, 8), "start_state": torch.zeros(40, 4)}
    assert minibatch_rows(PPOCfg(batch_size=64), flat) == 64  # transitions, as before
    assert minibatch_rows(PPOCfg(batch_size=64), seqs) == 8  # 64 transitions = 8 sequences of 8
    assert minibatch_rows(PPOCfg(batch_size=4), seqs) == 1  # never an empty minibatch
    assert minibatch_rows(PPOCfg(num_mini_batches=3), seqs) == 14  # ceil(40 / 3) sequences


def test_seq_len_must_divide_the_buffer_size():
    message = r"trainer.buffer_size \(24\) must be a multiple of algorithm.cfg.seq_len \(5\)"
    with pytest.raises(ConfigError, match=message):
        PPO.check_run(PPOCfg(seq_len=5), 4, "recurrent_actor_critic", 24)
    PPO.check_run(PPOCfg(seq_len=8), 4, "recurrent_actor_critic", 24)


def make_run(name: str, seed: int = 0):
    torch.manual_seed(seed)
    env = build_env("RepeatFirst", N, "cpu", {"length": LENGTH})
    mlp = {"network_cfg": {"hidden_sizes": [32]}}
    block = {"name": name, "recurrent": {"type": "gru", "hidden_size": 32}, "actor": mlp, "critic": mlp}
    policy = build_policy(block, env.observation_space, env.action_space, "cpu")
    algo = build_algo(
        "ppo",
        {"batch_size": 256, "n_epochs": 4, "seq_len": L, "learning_rate": 3e-3, "ent_coef": 0.01},
        policy,
        "cpu",
    )
    collector = Collector(env, policy, T, seed, seq_len=L, seqs_per_state_reset=-1)
    return policy, algo, collector


def train(name: str, iterations: int, seed: int = 0):
    policy, algo, collector = make_run(name, seed)
    algo.seed = seed
    for iteration in range(1, iterations + 1):
        rollout, _ = collector()
        metrics = learn(algo, rollout, iteration, 0, iterations)
    return policy, metrics


def success_rate(policy, seed: int = 99) -> float:
    """Share of 1024 greedy episodes that repeat the cue (the return of an episode is 0 or 1)."""
    env = build_env("RepeatFirst", 256, "cpu", {"length": LENGTH})
    rollout, _ = Collector(env, policy, 4 * LENGTH, seed, deterministic=True, seqs_per_state_reset=-1)()
    return float(rollout["reward"][:, :-1].sum() / rollout["done"][:, :-1].sum())


def test_recurrent_ppo_update_smoke():
    before = [p.detach().clone() for p in make_run("recurrent_actor_critic")[0].parameters()]
    policy, metrics = train("recurrent_actor_critic", 2)
    assert all(torch.isfinite(torch.tensor(v)) for v in metrics.values())
    assert metrics["update/minibatch_steps"] == 4 * (N * T // 256)
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.parameters()))
    assert 0.0 <= success_rate(policy) <= 1.0


@pytest.mark.slow
def test_recurrent_policy_solves_the_memory_task_a_feedforward_one_cannot():
    recurrent, _ = train("recurrent_actor_critic", 25)
    feedforward, _ = train("actor_critic", 25)
    assert success_rate(recurrent) >= 0.9
    assert abs(success_rate(feedforward) - 0.5) < 0.1


def test_a_recurrent_run_goes_through_the_pipeline_and_stores_its_states(tmp_path):
    from pathlib import Path

    from rlpipe import config
    from rlpipe.artifacts.zarr_read import read_rollout
    from rlpipe.trainer import Trainer

    params = Path(__file__).resolve().parents[2] / "params.yaml"
    cfg = config.load(
        params,
        [
            "trainer.device=cpu",
            "trainer.num_envs=4",
            "trainer.buffer_size=8",
            "trainer.iterations=2",
            "trainer.enable_eval=false",
            "tracking.backend=none",
            f"trainer.data_dir={tmp_path}",
            "env.id=RepeatFirst",
            "env.cfg={length: 3}",
            "policy.name=recurrent_actor_critic",
            "policy.recurrent={type: gru, hidden_size: 8}",
            "algorithm.cfg.seq_len=4",
            "algorithm.cfg.batch_size=16",
            "algorithm.cfg.n_epochs=1",
            "policy.obs_normalization=true",
        ],
    )
    summary = Trainer(cfg).train()
    assert summary["iterations"] == 2
    first, _ = read_rollout(cfg.run_dir / "rollouts" / "iter-000001.zarr")
    second, _ = read_rollout(cfg.run_dir / "rollouts" / "iter-000002.zarr")
    assert first["recurrent_state"].shape == (4, 9, 8)
    assert first["recurrent_state"][:, 4].abs().sum(-1).gt(0).all()  # env step 4: mid-episode
    # env step 8 is mid-episode too, but seqs_per_state_reset (default 8 × seq_len 4) zeroes the
    # state at every rollout start
    assert second["recurrent_state"][:, 0].abs().sum() == 0
    with pytest.raises(ConfigError, match="algorithm.cfg.seq_len"):
        Trainer(
            cfg.replace(algorithm=cfg.algorithm.replace(cfg=cfg.algorithm.cfg.replace(seq_len=3)))
        ).train()
