"""The Evaluator: deterministic scoring, recurrent state carried within an episode."""

from __future__ import annotations

import torch

from rlpipe.envs import build_env
from rlpipe.evaluation import Evaluator
from rlpipe.policies import build_policy


def test_recurrent_policy_is_evaluated_with_its_state_carried_and_reset_on_done():
    torch.manual_seed(0)
    env = build_env("RepeatFirst", 4, "cpu", {"length": 4})
    small = {"network_cfg": {"hidden_sizes": [8]}}
    policy = build_policy(
        {
            "name": "recurrent_actor_critic",
            "actor": small,
            "critic": small,
            "recurrent": {"type": "gru", "hidden_size": 8, "num_layers": 1},
        },
        env.observation_space,
        env.action_space,
        "cpu",
    )
    seen: list[torch.Tensor] = []
    original = policy.sample_step

    def recording(obs, state, deterministic=False):
        seen.append(state.clone())
        return original(obs, state, deterministic)

    policy.sample_step = recording
    policy.sample = None  # the feedforward path must not be used for a recurrent policy
    metrics = Evaluator(env, policy, num_episodes=2, seed=0)()
    assert metrics["eval/episodes"] == 8.0
    assert torch.count_nonzero(seen[0]) == 0  # episode start
    assert torch.count_nonzero(seen[1]) > 0  # carried within the episode
    assert torch.count_nonzero(seen[4]) == 0  # zeroed after the first episode ended


def test_same_checkpoint_scores_the_same_and_training_rng_is_untouched():
    torch.manual_seed(0)
    env = build_env("CartPole", 4, "cpu")
    policy = build_policy({"name": "actor_critic"}, env.observation_space, env.action_space, "cpu")
    first = Evaluator(env, policy, num_episodes=1, seed=5)
    second = Evaluator(env, policy, num_episodes=1, seed=5)
    state = torch.get_rng_state()
    assert first() == second()
    assert torch.equal(state, torch.get_rng_state())
