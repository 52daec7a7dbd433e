"""What the collector records for datasets: sparse final observations, reset_at_start, per-step success."""

from __future__ import annotations

import copy

import pytest
import torch

from rlpipe.collector import Collector
from rlpipe.envs import build_env
from rlpipe.policies import build_policy
from rlpipe.rollout import ACTION_MEAN, SUCCESS
from rlpipe.rollout_checks import validate


def make(env_id="CartPole", n=6, horizon=30, **env_cfg):
    torch.manual_seed(0)
    env = build_env(env_id, n, "cpu", env_cfg)
    policy = build_policy({"name": "actor_critic"}, env.observation_space, env.action_space, "cpu")
    return env, Collector(env, policy, horizon, seed=3)


def test_final_obs_hold_the_true_last_observation_of_every_done_slot_in_order():
    env, collector = make(max_episode_steps=9)
    collector._reset()
    shadow = copy.deepcopy(env)  # replays the same actions to see the true final observations
    rollout, _ = collector()
    done = rollout["done"][:, :-1]
    final = collector.final_obs
    assert done.any() and torch.equal(final["index"], done.nonzero())
    expected = []
    for t in range(30):
        step = shadow.step(rollout["action"][:, t])
        expected += [(env_i, t, step.final_obs[env_i]) for env_i in done[:, t].nonzero().flatten().tolist()]
    expected.sort(key=lambda e: (e[0], e[1]))
    assert torch.equal(final["obs"], torch.stack([obs for _, _, obs in expected]))
    truncated = rollout["truncated"][:, :-1][done]
    assert truncated.any()  # time limits among them: their final obs is not the next episode's first
    assert not torch.equal(final["obs"][truncated], rollout["obs"][:, 1:][done][truncated])


def test_reset_at_start_follows_every_reset_kind():
    _, collector = make(horizon=5)
    assert [collector() and collector.reset_at_start for _ in range(3)] == [True, False, False]
    _, periodic = make(horizon=5)
    periodic.resets.horizons_per_env_reset = 2
    assert [periodic() and periodic.reset_at_start for _ in range(4)] == [True, False, True, False]
    _, every = make(horizon=5)
    every.resets.reset_every_rollout = True
    assert [every() and every.reset_at_start for _ in range(2)] == [True, True]


def test_a_resumed_collector_continues_unless_its_env_restarted_episodes():
    _, collector = make(horizon=5)
    collector()
    state = collector.state_dict()
    _, resumed = make(horizon=5)
    resumed.load_state_dict(state)  # a torch env: the carried observation goes on
    resumed()
    assert resumed.reset_at_start is False
    gym_env = build_env("CartPole-v1", 2, "cpu", {"vectorization_mode": "sync"})  # the GymnasiumEnv adapter
    policy = build_policy({"name": "actor_critic"}, gym_env.observation_space, gym_env.action_space, "cpu")
    first = Collector(gym_env, policy, 5, seed=3)
    first()
    again = Collector(build_env("CartPole-v1", 2, "cpu", {"vectorization_mode": "sync"}), policy, 5, seed=3)
    again.load_state_dict(first.state_dict())  # gymnasium restarts its episodes on load
    again()
    assert again.reset_at_start is True
    again()
    assert again.reset_at_start is False


def test_success_is_recorded_per_step_only_for_envs_that_report_it():
    env, collector = make(horizon=8)
    rollout, _ = collector()
    assert SUCCESS not in rollout.keys()
    real_step = env.step
    flags = []

    def step(action):
        result = real_step(action)
        flags.append(result.obs[:, 0] > 0)
        return result._replace(info={"success": flags[-1]})

    env.step = step
    rollout, _ = collector()
    assert torch.equal(rollout[SUCCESS][:, :-1], torch.stack(flags, 1))
    assert not rollout[SUCCESS][:, -1].any()


def mean_collector(env_id, policy_block, **options):
    torch.manual_seed(0)
    env = build_env(env_id, 4, "cpu")
    policy = build_policy(policy_block, env.observation_space, env.action_space, "cpu")
    return policy, Collector(env, policy, 12, seed=3, **options)


@pytest.mark.parametrize(
    ("env_id", "distribution"), [("CartPole", "auto"), ("Pendulum", "gaussian"), ("Pendulum", "beta")]
)
def test_action_mean_is_the_deterministic_action_of_each_stored_observation(env_id, distribution):
    block = {"name": "actor_critic", "distribution": distribution}
    policy, collector = mean_collector(env_id, block, action_mean=True)
    rollout, _ = collector()
    mean = rollout[ACTION_MEAN]
    assert mean.dtype == rollout["action"].dtype and mean.shape == rollout["action"].shape
    with torch.inference_mode():
        acted = torch.stack([policy.act(rollout["obs"][:, t], deterministic=True) for t in range(12)], 1)
    torch.testing.assert_close(mean[:, :-1], acted, rtol=1e-6, atol=1e-6)
    assert not mean[:, -1].any()  # slot T is padding
    assert not torch.equal(mean[:, :-1].float(), rollout["action"][:, :-1].float())  # sampled ≠ mode
    validate(rollout)


def test_action_mean_draws_nothing_and_is_absent_by_default():
    def two_rollouts(**options):
        _, collector = mean_collector("Pendulum", {"name": "actor_critic"}, **options)
        first = collector()[0].clone()
        return first, collector()[0].clone()

    plain = two_rollouts()
    assert ACTION_MEAN not in plain[0].keys()
    recorded = two_rollouts(action_mean=True)
    for mine, theirs in zip(recorded, plain, strict=True):  # the random stream goes on alike
        assert torch.equal(mine["action"], theirs["action"])


def test_a_recurrent_action_mean_follows_the_state_the_policy_acted_with():
    small = {"network_cfg": {"hidden_sizes": [8]}}
    block = {
        "name": "recurrent_actor_critic",
        "actor": small,
        "critic": small,
        "recurrent": {"type": "gru", "hidden_size": 8, "num_layers": 1},
    }
    policy, collector = mean_collector("RepeatFirst", block, action_mean=True)
    rollout, _ = collector()
    state, expected = torch.zeros(4, policy.state_size), []
    with torch.inference_mode():
        for t in range(12):
            action, _, _, state = policy.sample_step(rollout["obs"][:, t], state, True)
            expected.append(action)
            state = state * (~rollout["done"][:, t]).unsqueeze(-1).float()
    assert torch.equal(rollout[ACTION_MEAN][:, :-1], torch.stack(expected, 1))


def test_a_teacher_mix_records_its_students_deterministic_action():
    from rlpipe.algorithms.distillation import TeacherMix

    student, _ = mean_collector("Pendulum", {"name": "actor_only"})
    env = build_env("Pendulum", 4, "cpu")
    teacher = build_policy({"name": "actor_critic"}, env.observation_space, env.action_space, "cpu")
    collector = Collector(env, TeacherMix(student, teacher, lambda: 0.5), 12, seed=3, action_mean=True)
    rollout, _ = collector()
    with torch.inference_mode():
        acted = torch.stack([student.act(rollout["obs"][:, t], deterministic=True) for t in range(12)], 1)
    torch.testing.assert_close(rollout[ACTION_MEAN][:, :-1], acted, rtol=1e-6, atol=1e-6)
