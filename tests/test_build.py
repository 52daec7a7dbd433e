"""``rlpipe.build``: the algorithm a config describes, its one-rollout ``learn`` and its checkpoint state."""

from __future__ import annotations

import io
import math
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from _offline_fixtures import tiny_cfg
from tensordict import TensorDict

from rlpipe.algorithms import GRPO, PPO, BaseAlgorithm
from rlpipe.algorithms.base import update_seed
from rlpipe.algorithms.schedules import Progress
from rlpipe.build import build_algorithm, learn, learner_state, load_learner_state
from rlpipe.config import ConfigError
from rlpipe.rollout import allocate_rollout
from rlpipe.trainer import Trainer

OBS = gym.spaces.Box(-1, 1, (3,))
DISCRETE, CONTINUOUS = gym.spaces.Discrete(2), gym.spaces.Box(-1, 1, (2,))
N, T = 8, 16
GRPO_SET = ("algorithm.name=grpo", "policy.name=actor_only", "algorithm.cfg={batch_size: 32, n_epochs: 2}")


def make_algo(
    tmp_path: Path, *extra: str, action_space: gym.Space = DISCRETE, seed: int = 0
) -> BaseAlgorithm:
    torch.manual_seed(seed)
    return build_algorithm(tiny_cfg(tmp_path, *extra), OBS, action_space, torch.device("cpu"))


def rollout(seed: int = 0, action_space: gym.Space = DISCRETE, state_size: int | None = None) -> TensorDict:
    """A random ``[N, T+1]`` rollout with a few episode ends (the schema the collector writes)."""
    gen = torch.Generator().manual_seed(seed)
    continuous = isinstance(action_space, gym.spaces.Box)
    extras = {"recurrent_state": ((state_size,), torch.float32)} if state_size else {}
    ro = allocate_rollout(
        N, T, (3,), action_space.shape or (), torch.float32 if continuous else torch.int64, "cpu", extras
    )
    ro["obs"].copy_(torch.randn(ro["obs"].shape, generator=gen))
    if continuous:
        ro["action"].copy_(torch.randn(ro["action"].shape, generator=gen).clamp(-1, 1))
    else:
        ro["action"][:, :-1] = torch.randint(0, 2, (N, T), generator=gen)
    ro["sample_log_prob"][:, :-1] = -0.7 + 0.05 * torch.randn(N, T, generator=gen)
    ro["reward"][:, :-1] = torch.randn(N, T, generator=gen) + 1.0
    ro["value"].copy_(torch.randn(ro["value"].shape, generator=gen))
    done = torch.rand(N, T, generator=gen) < 0.1
    ro["done"][:, :-1], ro["terminated"][:, :-1] = done, done
    return ro


def weights(algo: BaseAlgorithm) -> list[torch.Tensor]:
    return [p.detach().clone() for p in algo.policy.parameters()]


# ---------------------------------------------------------------- building


def test_build_algorithm_builds_its_policy_and_takes_the_runs_seed(tmp_path: Path) -> None:
    ppo = make_algo(tmp_path)
    assert isinstance(ppo, PPO) and ppo.policy.has_critic
    assert ppo.seed == tiny_cfg(tmp_path).trainer.seed and ppo.device == torch.device("cpu")
    assert ppo.advantage_keys == ("advantage", "return") and ppo.shards == 1
    assert ppo.learning_rate == tiny_cfg(tmp_path).algorithm.cfg.learning_rate
    grpo = make_algo(tmp_path, *GRPO_SET)
    assert isinstance(grpo, GRPO) and not grpo.policy.has_critic
    assert grpo.advantage_keys == ("advantage", "seq_mask", "seq_return")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("algorithm.name=grpo", "algorithm.cfg={}"), r"^policy\.name: GRPO needs an actor-only policy"),
        (
            (*GRPO_SET, "trainer.num_envs=6"),
            r"^trainer\.num_envs: 6 is not divisible by algorithm\.cfg\.group_size=4",
        ),
        (
            ("algorithm.cfg.seq_len=5", "policy.name=recurrent_actor_critic"),
            r"^trainer\.buffer_size \(16\) must be a multiple of algorithm\.cfg\.seq_len \(5\)",
        ),
        (("algorithm.cfg.amp=fp16",), r"^algorithm\.cfg\.amp: fp16 needs a CUDA device"),
        (("algorithm.cfg.clip_cof=0.1",), r"^\S*params\.yaml: algorithm\.cfg\.clip_cof: unknown key"),
    ],
)
def test_build_algorithm_rejects_bad_combinations_in_one_line(
    tmp_path: Path, extra: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        make_algo(tmp_path, *extra)
    assert "\n" not in str(info.value)


def test_recurrence_is_the_policys_and_the_update_reads_its_sequences(tmp_path: Path) -> None:
    plain = make_algo(tmp_path)
    recurrent = make_algo(tmp_path, "policy.name=recurrent_actor_critic", "policy.recurrent.hidden_size=8")
    assert not plain.policy.is_recurrent and "recurrent_state" not in plain.rollout_reads
    assert recurrent.policy.is_recurrent and {"done", "recurrent_state"} <= set(recurrent.rollout_reads)


# ---------------------------------------------------------------- learning


def test_learn_changes_parameters_and_returns_named_metrics(tmp_path: Path) -> None:
    algo = make_algo(tmp_path)
    before = weights(algo)
    metrics = learn(algo, rollout(), iteration=1, env_steps_before=0, total_env_steps=4 * N * T)
    assert any(not torch.equal(a, b) for a, b in zip(before, weights(algo)))
    expected = {
        "policy_loss",
        "value_loss",
        "entropy",
        "approx_kl",
        "clip_fraction",
        "explained_variance",
        "learning_rate",
        "ent_coef",
        "minibatch_steps",
        "optimizer_steps",
    }
    assert set(metrics) == {f"update/{name}" for name in expected}
    assert all(math.isfinite(v) for v in metrics.values())
    assert metrics["update/minibatch_steps"] == 2 * 2  # 128 transitions / 64 per minibatch × 2 epochs
    assert algo.progress == Progress(0, 4 * N * T)  # the caller's counters: the update never counts


def test_learn_is_the_online_iterations_advantage_and_update_bit_for_bit(tmp_path: Path) -> None:
    extra = (
        "policy.obs_normalization=true",
        "algorithm.cfg.normalize_rewards=true",
        "algorithm.cfg.lr_schedule_kind=linear",
        "tracking.backend=none",
        "trainer.iterations=4",
    )
    torch.manual_seed(0)
    trainer = Trainer(tiny_cfg(tmp_path, *extra), store=False, evaluate=False)
    torch.manual_seed(1)
    algo = build_algorithm(
        tiny_cfg(tmp_path, *extra),
        trainer.env.observation_space,
        trainer.env.action_space,
        torch.device("cpu"),
    )
    load_learner_state(algo, learner_state(trainer.algo))
    total = trainer.cfg.trainer.iterations * trainer.parts.steps_per_iteration
    for iteration in (1, 2):
        before = trainer.env_steps
        ro = trainer.collect().clone()
        online = trainer.update()
        got = learn(algo, ro, iteration, before, total)
        assert got == {k: v for k, v in online.items() if k.startswith(("advantage/", "update/"))}
    for a, b in zip(trainer.policy.state_dict().values(), algo.policy.state_dict().values()):
        assert torch.equal(a, b)
    trainer.close()


def test_learn_weighs_rnd_where_the_online_iteration_does(tmp_path: Path) -> None:
    # A linear RND weight needs the run's length from the first advantage on, offline as online.
    rnd = '{"hidden_sizes": [8], "weight": 1.0, "weight_final": 0.0, "weight_schedule_kind": "linear"}'
    extra = (f"algorithm.cfg.rnd={rnd}", "tracking.backend=none", "trainer.iterations=4")
    trainer = Trainer(tiny_cfg(tmp_path, *extra), store=False, evaluate=False)
    algo = build_algorithm(
        tiny_cfg(tmp_path, *extra),
        trainer.env.observation_space,
        trainer.env.action_space,
        torch.device("cpu"),
    )
    load_learner_state(algo, learner_state(trainer.algo))
    total = trainer.cfg.trainer.iterations * trainer.parts.steps_per_iteration
    for iteration, weight in ((1, 1.0), (2, 0.75)):
        before = trainer.env_steps
        ro = trainer.collect().clone()
        assert trainer.update()["advantage/rnd_weight"] == weight
        assert learn(algo, ro, iteration, before, total)["advantage/rnd_weight"] == weight
    trainer.close()


def test_same_seed_same_result_other_seed_other_shuffle(tmp_path: Path) -> None:
    def trained(seed: int) -> list[torch.Tensor]:
        algo = make_algo(tmp_path)
        algo.seed = seed
        learn(algo, rollout(), 3, 0, 4 * N * T)
        return weights(algo)

    assert all(torch.equal(a, b) for a, b in zip(trained(5), trained(5)))
    assert any(not torch.equal(a, b) for a, b in zip(trained(5), trained(6)))
    assert update_seed(5, 3) == 5 * 1_000_003 + 3


@pytest.mark.parametrize(
    "extra",
    [
        (),
        GRPO_SET,
        ("algorithm.cfg.normalize_rewards=true", "policy.obs_normalization=true", "algorithm.cfg.amp=bf16"),
    ],
    ids=["ppo", "grpo", "ppo-normalized-bf16"],
)
def test_state_dict_round_trip_gives_identical_later_updates(tmp_path: Path, extra: tuple[str, ...]) -> None:
    total = 4 * N * T
    first = make_algo(tmp_path, *extra, seed=0)
    learn(first, rollout(0), 1, 0, total)
    buffer = io.BytesIO()
    torch.save(learner_state(first), buffer)
    buffer.seek(0)
    second = make_algo(tmp_path, *extra, seed=1)  # other initial weights (and GRPO reference)
    assert any(not torch.equal(a, b) for a, b in zip(weights(first), weights(second)))
    load_learner_state(second, torch.load(buffer, weights_only=True))
    assert set(learner_state(first)) == {"policy", "algo"}
    assert learn(first, rollout(1), 2, N * T, total) == learn(second, rollout(1), 2, N * T, total)
    assert all(torch.equal(a, b) for a, b in zip(weights(first), weights(second)))


def test_loading_policy_weights_leaves_the_optimizer_alone(tmp_path: Path) -> None:
    trained = make_algo(tmp_path)
    learn(trained, rollout(), 1, 0, 4 * N * T)
    fresh = make_algo(tmp_path, seed=1)
    fresh.policy.load_state_dict(trained.policy.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(weights(fresh), weights(trained)))
    assert not fresh.optimizer.state and trained.optimizer.state


# ---------------------------------------------------------------- GRPO on the shared loop


def test_grpo_lr_schedule_moves_the_learning_rate(tmp_path: Path) -> None:
    algo = make_algo(
        tmp_path,
        *GRPO_SET,
        "algorithm.cfg.lr_schedule=[[0, 1.0e-3], [256, 1.0e-4]]",
        "algorithm.cfg.ent_coef=0.02",
        "algorithm.cfg.ent_coef_schedule_kind=linear",
    )
    total = 4 * N * T
    first = learn(algo, rollout(0), 1, 0, total)
    assert first["update/learning_rate"] == 1e-3 and first["update/ent_coef"] == pytest.approx(0.02)
    later = learn(algo, rollout(1), 3, 2 * N * T, total)
    assert later["update/learning_rate"] == 1e-4 and algo.optimizer.param_groups[0]["lr"] == 1e-4
    assert later["update/ent_coef"] == pytest.approx(0.01)  # halfway through a linear decay to 0


def test_grpo_bf16_update_runs_on_cpu_and_changes_the_weights(tmp_path: Path) -> None:
    algo = make_algo(tmp_path, *GRPO_SET, "algorithm.cfg.amp=bf16", action_space=CONTINUOUS)
    seen: list[torch.dtype] = []
    algo.policy.actor.register_forward_hook(lambda mod, inp, out: seen.append(out.dtype))
    before = weights(algo)
    metrics = learn(algo, rollout(action_space=CONTINUOUS), 1, 0, 4 * N * T)
    assert seen and set(seen) == {torch.bfloat16}  # every update forward ran under autocast
    assert all(math.isfinite(v) for v in metrics.values())
    assert any(not torch.equal(a, b) for a, b in zip(before, weights(algo)))
    assert all(p.dtype == torch.float32 for p in algo.policy.parameters())
