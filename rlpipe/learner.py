"""The ``Learner``: the one object that learns — policy, algorithm, optimizer, normalizers, schedules, AMP.

The online driver feeds it fresh rollouts, the offline driver stored ones; both call the same
``learn``, so a replay of rollout k from the weights that collected it is online update k.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from tensordict import TensorDict

from rlpipe.algorithms import BaseAlgorithm, algo_class, build_algo, resolve_algo_cfg
from rlpipe.algorithms.sequences import RECURRENT_STATE
from rlpipe.config import RunConfig
from rlpipe.distributed import broadcast_parameters
from rlpipe.policies import Policy, build_policy

__all__ = ["Learner", "update_seed"]


def update_seed(seed: int, iteration: int) -> int:
    """Seed of iteration ``iteration``'s minibatch shuffle (depends on nothing else)."""
    return (seed * 1_000_003 + iteration) % 2**63


class Learner:
    """Policy + algorithm (optimizer, schedules, reward normalizer, AMP state) + the shuffle seed."""

    def __init__(self, policy: Policy, algorithm: BaseAlgorithm, seed: int) -> None:
        self.policy, self.algorithm, self.seed = policy, algorithm, seed

    @classmethod
    def from_config(cls, cfg: RunConfig, obs_space: gym.Space, action_space: gym.Space,
                    device: torch.device, max_episode_steps: int | None = None) -> Learner:
        """Build from ``cfg.policy`` and ``cfg.algorithm``; ``ConfigError`` for impossible combinations."""
        algo_cfg = resolve_algo_cfg(cfg.algorithm.name, cfg.algorithm.cfg, device)
        algo_class(cfg.algorithm.name).check_run(algo_cfg, cfg.trainer.num_envs, cfg.policy.name,
                                                 cfg.trainer.buffer_size, max_episode_steps)
        policy = build_policy(cfg.policy, obs_space, action_space, device)
        broadcast_parameters(policy)  # before the algorithm copies it (GRPO's reference policy)
        return cls(policy, build_algo(cfg.algorithm.name, algo_cfg, policy, device), cfg.trainer.seed)

    @property
    def device(self) -> torch.device:
        """Where the update runs."""
        return self.algorithm.device

    @property
    def advantage_keys(self) -> tuple[str, ...]:
        """Rollout keys the advantage step writes (``[N, T+1]``, padding slot zero)."""
        return tuple(self.algorithm.advantage_keys)

    @property
    def advantage_reads(self) -> tuple[str, ...]:
        """Rollout keys the advantage step reads."""
        return tuple(self.algorithm.advantage_reads)

    @property
    def update_reads(self) -> tuple[str, ...]:
        """Rollout keys the update reads (a recurrent policy's sequences also need ``done`` and its state)."""
        recurrent = ("done", RECURRENT_STATE) if getattr(self.policy, "is_recurrent", False) else ()
        return (*self.algorithm.update_reads, *recurrent)

    @property
    def shards(self) -> int:
        """Ranks whose rollouts one batch concatenates (single-process replay of a K-rank run)."""
        return self.algorithm.shards

    @shards.setter
    def shards(self, value: int) -> None:
        self.algorithm.shards = int(value)

    def act(self, obs: torch.Tensor, state: torch.Tensor | None = None,
            deterministic: bool = False) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``(action [B, *act], extras)``: ``sample_log_prob`` ``[B]`` (+ ``value``/``state``: recurrent)."""
        if state is not None:
            action, log_prob, value, next_state = self.policy.sample_step(obs, state, deterministic)
            return action, {"sample_log_prob": log_prob, "value": value, "state": next_state}
        action, log_prob = self.policy.sample(obs, deterministic)
        return action, {"sample_log_prob": log_prob}

    def compute_advantages(self, rollout: TensorDict) -> dict[str, float]:
        """Write ``advantage_keys`` into ``rollout``; return ``advantage/…`` diagnostics."""
        return {f"advantage/{k}": v for k, v in self.algorithm.compute_advantages(rollout).items()}

    def learn(self, rollout: TensorDict, iteration: int, env_steps_before: int,
              total_env_steps: int) -> dict[str, float]:
        """Advantage + update of ``rollout`` as update ``iteration``: ``advantage/…``, ``update/…``."""
        metrics = self.compute_advantages(rollout)
        return metrics | self.update(rollout, iteration, env_steps_before, total_env_steps)

    def update(self, rollout: TensorDict, iteration: int, env_steps_before: int,
               total_env_steps: int) -> dict[str, float]:
        """Optimize on ``rollout`` (advantages already in it) as update ``iteration``; ``update/…`` metrics.

        Schedules sit at ``env_steps_before`` of ``total_env_steps``; the minibatch shuffle is seeded
        from ``(seed, iteration)`` alone. Observation statistics merge this rollout's ``obs[:, :T]``
        after the update, so the update saw the statistics the rollout was collected with.
        """
        self.algorithm.set_progress(env_steps_before, total_env_steps)
        self.algorithm.reseed(update_seed(self.seed, iteration))
        self.policy.train()
        metrics = {f"update/{k}": v for k, v in self.algorithm.update(rollout).items()}
        self.policy.update_normalization(rollout["obs"][:, :-1])
        return metrics

    def state_dict(self) -> dict[str, Any]:
        """``{"policy", "algo"}``: everything that learns (weights_only-safe)."""
        return {"policy": self.policy.state_dict(), "algo": self.algorithm.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict`` (extra keys of a full checkpoint are ignored)."""
        self.policy.load_state_dict(state["policy"])
        self.algorithm.load_state_dict(state["algo"])
