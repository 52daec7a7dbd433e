"""``Learner``: built from params, acts on tensors, learns like the online loop, saves and restores."""

from __future__ import annotations

import io
import math
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from _offline_fixtures import tiny_cfg
from tensordict import TensorDict

from rlpipe.algorithms import GRPO, PPO, build_algo
from rlpipe.config import ConfigError
from rlpipe.learner import Learner, update_seed
from rlpipe.policies import build_policy
from rlpipe.rollout import allocate_rollout

OBS = gym.spaces.Box(-1, 1, (3,))
DISCRETE, CONTINUOUS = gym.spaces.Discrete(2), gym.spaces.Box(-1, 1, (2,))
N, T = 8, 16
GRPO_SET = ("algorithm.name=grpo", "policy.name=actor_only", "algorithm.cfg={batch_size: 32, n_epochs: 2}")


def make_learner(tmp_path: Path, *extra: str, action_space: gym.Space = DISCRETE, seed: int = 0) -> Learner:
    torch.manual_seed(seed)
    return Learner.from_config(tiny_cfg(tmp_path, *extra), OBS, action_space, torch.device("cpu"))


def rollout(seed: int = 0, action_space: gym.Space = DISCRETE, state_size: int | None = None) -> TensorDict:
    """A random ``[N, T+1]`` rollout with a few episode ends (the schema the collector writes)."""
    gen = torch.Generator().manual_seed(seed)
    continuous = isinstance(action_space, gym.spaces.Box)
    extras = {"recurrent_state": ((state_size,), torch.float32)} if state_size else {}
    ro = allocate_rollout(N, T, (3,), action_space.shape or (), torch.float32 if continuous else torch.int64,
                          "cpu", extras)
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


def weights(learner: Learner) -> list[torch.Tensor]:
    return [p.detach().clone() for p in learner.policy.parameters()]


# ---------------------------------------------------------------- building


def test_from_config_builds_policy_and_algorithm(tmp_path: Path) -> None:
    ppo = make_learner(tmp_path)
    assert isinstance(ppo.algorithm, PPO) and ppo.algorithm.policy is ppo.policy
    assert ppo.seed == tiny_cfg(tmp_path).trainer.seed and ppo.device == torch.device("cpu")
    assert ppo.advantage_keys == ("advantage", "return") and ppo.shards == 1
    assert ppo.learning_rate == tiny_cfg(tmp_path).algorithm.cfg["learning_rate"]
    grpo = make_learner(tmp_path, *GRPO_SET)
    assert isinstance(grpo.algorithm, GRPO) and not grpo.policy.has_critic
    assert grpo.advantage_keys == ("advantage", "seq_mask", "seq_return")


@pytest.mark.parametrize(("extra", "message"), [
    (("algorithm.name=grpo", "algorithm.cfg={}"), r"^policy\.name: GRPO needs an actor-only policy"),
    ((*GRPO_SET, "trainer.num_envs=6"),
     r"^trainer\.num_envs: 6 is not divisible by algorithm\.cfg\.group_size=4"),
    (("algorithm.cfg.seq_len=5", "policy.name=recurrent_actor_critic"),
     r"^trainer\.buffer_size \(16\) must be a multiple of algorithm\.cfg\.seq_len \(5\)"),
    (("algorithm.cfg.amp=fp16",), r"^algorithm\.cfg\.amp: fp16 needs a CUDA device"),
    (("algorithm.cfg.clip_cof=0.1",), r"^\S*params\.yaml: algorithm\.cfg\.clip_cof: unknown key"),
])
def test_from_config_rejects_bad_combinations_in_one_line(tmp_path: Path, extra: tuple[str, ...],
                                                          message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        make_learner(tmp_path, *extra)
    assert "\n" not in str(info.value)


def test_the_algorithm_must_train_the_learners_policy() -> None:
    policy = build_policy({"name": "actor_critic"}, OBS, DISCRETE, "cpu")
    other = build_policy({"name": "actor_critic"}, OBS, DISCRETE, "cpu")
    with pytest.raises(ValueError, match="another policy"):
        Learner(policy, build_algo("ppo", {}, other, "cpu"), seed=0)


# ---------------------------------------------------------------- acting


@pytest.mark.parametrize("action_space", [DISCRETE, CONTINUOUS], ids=["discrete", "continuous"])
def test_act_shapes_and_extras(tmp_path: Path, action_space: gym.Space) -> None:
    learner = make_learner(tmp_path, action_space=action_space)
    obs = torch.randn(5, 3)
    action, extras = learner.act(obs)
    assert action.shape == (5, *(action_space.shape or ()))
    assert set(extras) == {"sample_log_prob", "value"}
    assert extras["sample_log_prob"].shape == extras["value"].shape == (5,)
    torch.testing.assert_close(extras["sample_log_prob"], learner.policy.distribution(obs).log_prob(action))
    torch.testing.assert_close(extras["value"], learner.value(obs))
    assert not action.requires_grad and not extras["value"].requires_grad
    assert set(learner.act(obs, with_value=False)[1]) == {"sample_log_prob"}
    assert learner.initial_state(5) is None
    mode, _ = learner.act(obs, deterministic=True)
    assert torch.equal(mode, learner.act(obs, deterministic=True)[0])


def test_act_carries_the_recurrent_state(tmp_path: Path) -> None:
    learner = make_learner(tmp_path, "policy.name=recurrent_actor_critic", "policy.recurrent.hidden_size=8")
    assert learner.is_recurrent and "recurrent_state" in learner.update_reads
    obs = torch.randn(5, 3)
    action, extras = learner.act(obs)
    assert action.shape == (5,) and extras["value"].shape == (5,)
    state = extras["state"]
    assert state.shape == (5, learner.policy.state_size) and state.abs().sum() > 0
    zero = learner.initial_state(5)
    assert torch.equal(zero, torch.zeros(5, learner.policy.state_size))
    torch.testing.assert_close(learner.value(obs), learner.value(obs, zero))
    assert not torch.allclose(learner.value(obs, state), learner.value(obs, zero))
    _, again = learner.act(obs, state, deterministic=True)
    assert not torch.allclose(again["state"], state)  # the state moved on


# ---------------------------------------------------------------- learning


def test_learn_changes_parameters_and_returns_named_metrics(tmp_path: Path) -> None:
    learner = make_learner(tmp_path)
    before = weights(learner)
    metrics = learner.learn(rollout(), iteration=1, env_steps_before=0, total_env_steps=4 * N * T)
    assert any(not torch.equal(a, b) for a, b in zip(before, weights(learner)))
    expected = {"policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "explained_variance",
                "learning_rate", "ent_coef", "minibatch_steps", "optimizer_steps"}
    assert set(metrics) == {f"update/{name}" for name in expected}
    assert all(math.isfinite(v) for v in metrics.values())
    assert metrics["update/minibatch_steps"] == 2 * 2  # 128 transitions / 64 per minibatch × 2 epochs
    assert learner.algorithm.env_steps == N * T  # the schedules' position moved past this rollout


def test_learn_is_the_online_drivers_advantage_and_update_bit_for_bit(tmp_path: Path) -> None:
    from rlpipe.run import build

    extra = ("policy.obs_normalization=true", "algorithm.cfg.normalize_rewards=true",
             "algorithm.cfg.lr_schedule_kind=linear")
    torch.manual_seed(0)
    exp = build(tiny_cfg(tmp_path, *extra), store=False, evaluate=False)
    ro, _ = exp.collect()
    torch.manual_seed(1)
    learner = Learner.from_config(tiny_cfg(tmp_path, *extra), exp.env.observation_space, exp.env.action_space,
                                  torch.device("cpu"))
    learner.load_state_dict(exp.learner.state_dict())
    for iteration in (1, 2):
        online = ro.clone()
        expected = exp.advantage(online) | exp.update(online, iteration, (iteration - 1) * N * T, 4 * N * T)
        got = learner.learn(ro.clone(), iteration, (iteration - 1) * N * T, 4 * N * T)
        assert got == expected
    for a, b in zip(exp.policy.state_dict().values(), learner.policy.state_dict().values()):
        assert torch.equal(a, b)


def test_same_seed_same_result_other_seed_other_shuffle(tmp_path: Path) -> None:
    def trained(seed: int) -> list[torch.Tensor]:
        learner = make_learner(tmp_path)
        learner.seed = seed
        learner.learn(rollout(), 3, 0, 4 * N * T)
        return weights(learner)

    assert all(torch.equal(a, b) for a, b in zip(trained(5), trained(5)))
    assert any(not torch.equal(a, b) for a, b in zip(trained(5), trained(6)))
    assert update_seed(5, 3) == 5 * 1_000_003 + 3


@pytest.mark.parametrize("extra", [(), GRPO_SET, ("algorithm.cfg.normalize_rewards=true",
                                                  "policy.obs_normalization=true", "algorithm.cfg.amp=bf16")],
                         ids=["ppo", "grpo", "ppo-normalized-bf16"])
def test_state_dict_round_trip_gives_identical_later_updates(tmp_path: Path, extra: tuple[str, ...]) -> None:
    total = 4 * N * T
    first = make_learner(tmp_path, *extra, seed=0)
    first.learn(rollout(0), 1, 0, total)
    buffer = io.BytesIO()
    torch.save(first.state_dict(), buffer)
    buffer.seek(0)
    second = make_learner(tmp_path, *extra, seed=1)  # other initial weights (and GRPO reference)
    assert any(not torch.equal(a, b) for a, b in zip(weights(first), weights(second)))
    second.load_state_dict(torch.load(buffer, weights_only=True))
    assert set(first.state_dict()) == {"policy", "algo"}
    assert first.learn(rollout(1), 2, N * T, total) == second.learn(rollout(1), 2, N * T, total)
    assert all(torch.equal(a, b) for a, b in zip(weights(first), weights(second)))


def test_load_policy_state_leaves_the_optimizer_alone(tmp_path: Path) -> None:
    trained = make_learner(tmp_path)
    trained.learn(rollout(), 1, 0, 4 * N * T)
    fresh = make_learner(tmp_path, seed=1)
    fresh.load_policy_state(trained.policy.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(weights(fresh), weights(trained)))
    assert not fresh.optimizer.state and trained.optimizer.state


def test_shards_reach_the_algorithm_and_are_validated(tmp_path: Path) -> None:
    learner = make_learner(tmp_path)
    learner.shards = 2
    assert learner.algorithm.shards == 2
    with pytest.raises(ValueError, match="shards must be >= 1"):
        learner.shards = 0


# ---------------------------------------------------------------- GRPO on the shared loop


def test_grpo_lr_schedule_moves_the_learning_rate(tmp_path: Path) -> None:
    learner = make_learner(tmp_path, *GRPO_SET, "algorithm.cfg.lr_schedule=[[0, 1.0e-3], [256, 1.0e-4]]",
                           "algorithm.cfg.ent_coef=0.02", "algorithm.cfg.ent_coef_schedule_kind=linear")
    total = 4 * N * T
    first = learner.learn(rollout(0), 1, 0, total)
    assert first["update/learning_rate"] == 1e-3 and first["update/ent_coef"] == pytest.approx(0.02)
    later = learner.learn(rollout(1), 3, 2 * N * T, total)
    assert later["update/learning_rate"] == 1e-4 and learner.optimizer.param_groups[0]["lr"] == 1e-4
    assert later["update/ent_coef"] == pytest.approx(0.01)  # halfway through a linear decay to 0


def test_grpo_bf16_update_runs_on_cpu_and_changes_the_weights(tmp_path: Path) -> None:
    learner = make_learner(tmp_path, *GRPO_SET, "algorithm.cfg.amp=bf16", action_space=CONTINUOUS)
    seen: list[torch.dtype] = []
    learner.policy.actor.register_forward_hook(lambda mod, inp, out: seen.append(out.dtype))
    before = weights(learner)
    metrics = learner.learn(rollout(action_space=CONTINUOUS), 1, 0, 4 * N * T)
    assert seen and set(seen) == {torch.bfloat16}  # every update forward ran under autocast
    assert all(math.isfinite(v) for v in metrics.values())
    assert any(not torch.equal(a, b) for a, b in zip(before, weights(learner)))
    assert all(p.dtype == torch.float32 for p in learner.policy.parameters())
