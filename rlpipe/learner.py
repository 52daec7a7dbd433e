"""``Learner``: the one object that learns — policy, algorithm, optimizer, normalizers, schedules, AMP.

The online loop and the offline commands both drive a ``Learner``:

* ``act(obs, state)`` / ``value(obs, state)`` for collection and evaluation (plain tensors, no
  TensorDict per env step);
* ``learn(rollout, iteration, env_steps_before, total_env_steps)``: advantages, then ``update``
  (schedules, the seeded minibatch shuffle, the update, the observation statistics) — one
  rollout's update, the same online and in replay;
* ``state_dict()`` / ``load_state_dict()`` with the checkpoints' ``policy`` and ``algo`` entries.

What it holds: the policy (with its observation normalizer), the algorithm (optimizer, grad
scaler and autocast dtype, LR/entropy schedules, reward normalizer, minibatch-shuffle generator,
KL rules) and the run's seed.
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import torch
from tensordict import TensorDict

from rlpipe.algorithms import BaseAlgorithm, algo_class, build_algo, resolve_algo_cfg
from rlpipe.algorithms.sequences import RECURRENT_STATE
from rlpipe.config import RunConfig
from rlpipe.policies import Policy, build_policy
from rlpipe.runtime.distributed import broadcast_parameters
from rlpipe.runtime.threads import configure_threads, linear_shapes

__all__ = ["Learner", "update_seed"]

def update_seed(seed: int, iteration: int) -> int:
    """Seed of iteration ``iteration``'s minibatch shuffle: a function of ``(seed, iteration)`` only."""
    return (seed * 1_000_003 + iteration) % 2**63


class Learner:
    """Policy + algorithm + seed: acts, learns from ``[N, T+1]`` rollouts, saves and restores itself."""

    def __init__(self, policy: Policy, algorithm: BaseAlgorithm, seed: int) -> None:
        if algorithm.policy is not policy:
            raise ValueError("Learner: the algorithm was built for another policy object")
        self.policy, self.algorithm, self.seed = policy, algorithm, int(seed)

    @property
    def device(self) -> torch.device:
        """Where the update runs."""
        return self.algorithm.device

    @classmethod
    def from_config(
        cls, cfg: RunConfig, obs_space: gym.spaces.Box, action_space: gym.Space, device: torch.device,
        max_episode_steps: int | None = None,
    ) -> Learner:
        """Validate the algorithm against the run, build the policy and the algorithm for these spaces.

        ``max_episode_steps`` is the env's time limit (``None``: none or unknown). Raises
        ``ConfigError`` naming the key for bad combinations before any network exists. The policy's
        initial weights draw from the global torch RNG (seed it first); in a distributed run every
        rank gets rank 0's weights before the algorithm copies any of them (GRPO's reference).
        """
        trainer, name = cfg.trainer, cfg.algorithm.name
        algo_cfg = resolve_algo_cfg(name, cfg.algorithm.cfg, device)
        algo_class(name).check_run(algo_cfg, trainer.num_envs, cfg.policy.name, trainer.buffer_size,
                                   max_episode_steps)
        policy = build_policy(cfg.policy, obs_space, action_space, device)
        broadcast_parameters(policy)
        return cls(policy, build_algo(name, algo_cfg, policy, device), trainer.seed)

    def largest_batch(self, num_envs: int, horizon: int) -> int:
        """Rows the networks see at once: an update minibatch of the ``[N, T]`` rollout or the N envs.

        What ``trainer.num_threads: auto`` sizes the thread count by (:mod:`rlpipe.runtime.threads`).
        """
        transitions = num_envs * horizon
        return max(num_envs, min(self.algorithm.cfg.minibatch_size(transitions), transitions))

    def configure_threads(self, setting: int | str | None, num_envs: int, horizon: int,
                          announce: bool = True) -> int:
        """Set torch's CPU threads for this run (``trainer.num_threads``, :mod:`rlpipe.runtime.threads`)."""
        processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))  # ranks on this machine (torchrun)
        return configure_threads(setting, self.largest_batch(num_envs, horizon),
                                 linear_shapes(self.policy), processes, announce)

    # ------------------------------------------------------------------ acting

    @property
    def is_recurrent(self) -> bool:
        """True when ``act`` carries a core state ``[B, S]`` between steps."""
        return bool(getattr(self.policy, "is_recurrent", False))

    def initial_state(self, batch: int) -> torch.Tensor | None:
        """The state ``[batch, S]`` at an episode start; ``None`` for a feedforward policy."""
        return self.policy.initial_state(batch) if self.is_recurrent else None

    @torch.no_grad()
    def act(
        self, obs: torch.Tensor, state: torch.Tensor | None = None, deterministic: bool = False,
        with_value: bool = True,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``(action [B, *act], extras)`` for ``obs`` ``[B, *obs]``.

        extras: ``sample_log_prob`` ``[B]``; ``value`` ``[B]`` (skipped with ``with_value=False``, the
        collector's hot path, which values all observations in one forward afterwards); for a
        recurrent policy also ``state``, the next core state ``[B, S]`` (``state=None``: zeros).
        ``deterministic`` takes the distribution's mode.
        """
        if self.is_recurrent:
            state = self.policy.initial_state(obs.shape[0]) if state is None else state
            action, log_prob, value, next_state = self.policy.sample_step(obs, state, deterministic)
            return action, {"sample_log_prob": log_prob, "value": value, "state": next_state}
        action, log_prob = self.policy.sample(obs, deterministic)
        extras = {"sample_log_prob": log_prob}
        if with_value:
            extras["value"] = self.policy.value(obs)
        return action, extras

    @torch.no_grad()
    def value(self, obs: torch.Tensor, state: torch.Tensor | None = None) -> torch.Tensor:
        """V(obs) ``[B]`` (bootstrap and final values); a recurrent policy sees ``obs`` with ``state``."""
        if self.is_recurrent:
            state = self.policy.initial_state(obs.shape[0]) if state is None else state
            return self.policy.step_value(obs, state)
        return self.policy.value(obs)

    # ------------------------------------------------------------------ learning

    @property
    def advantage_keys(self) -> tuple[str, ...]:
        """Keys ``compute_advantages`` writes into the rollout (``[N, T+1]``)."""
        return tuple(self.algorithm.advantage_keys)

    @property
    def advantage_reads(self) -> tuple[str, ...]:
        """Rollout keys ``compute_advantages`` reads."""
        return tuple(self.algorithm.advantage_reads)

    @property
    def update_reads(self) -> tuple[str, ...]:
        """Rollout keys ``update`` reads, advantage keys included.

        A recurrent policy's sequences also need ``done`` and its state.
        """
        recurrent = ("done", RECURRENT_STATE) if self.is_recurrent else ()
        return (*self.algorithm.update_reads, *recurrent)

    def compute_advantages(self, rollout: TensorDict) -> dict[str, float]:
        """Write ``advantage_keys`` into ``rollout``; return diagnostics named ``advantage/<name>``."""
        return {f"advantage/{k}": v for k, v in self.algorithm.compute_advantages(rollout).items()}

    def learn(
        self, rollout: TensorDict, iteration: int, env_steps_before: int, total_env_steps: int
    ) -> dict[str, float]:
        """Advantage + update on ``rollout`` ``[N, T+1]`` as update ``iteration`` (counted from 1).

        Returns ``advantage/…`` and ``update/…`` metrics; see ``update``.
        """
        metrics = self.compute_advantages(rollout)
        return metrics | self.update(rollout, iteration, env_steps_before, total_env_steps)

    def update(
        self, rollout: TensorDict, iteration: int, env_steps_before: int, total_env_steps: int
    ) -> dict[str, float]:
        """Optimize on ``rollout`` (advantage keys already in it) as update ``iteration``.

        Schedules are positioned at ``env_steps_before`` (every rank's env steps collected before
        this rollout) of ``total_env_steps``. The minibatch shuffle is seeded from ``(seed,
        iteration)`` alone, so re-learning a stored rollout from the same state reproduces the
        update exactly. Observation statistics merge this rollout's ``obs[:, :T]`` after the
        update, so the update saw the statistics the rollout was collected with. Returns
        ``update/…`` metrics.
        """
        self.algorithm.set_progress(env_steps_before, total_env_steps)
        self.algorithm.reseed(update_seed(self.seed, iteration))
        self.policy.train()
        metrics = {f"update/{k}": v for k, v in self.algorithm.update(rollout).items()}
        self.policy.update_normalization(rollout["obs"][:, :-1])
        return metrics

    # ------------------------------------------------------------------ optimizer state

    @property
    def shards(self) -> int:
        """Ranks whose rollouts one ``learn`` call's rollout concatenates (replay of a K-rank run)."""
        return self.algorithm.shards

    @shards.setter
    def shards(self, value: int) -> None:
        if int(value) < 1:
            raise ValueError(f"shards must be >= 1 (got {value})")
        self.algorithm.shards = int(value)

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The torch optimizer over the policy's parameters."""
        return self.algorithm.optimizer

    @property
    def learning_rate(self) -> float:
        """The optimizer's current learning rate."""
        return self.algorithm.learning_rate

    @property
    def ent_coef(self) -> float:
        """The entropy coefficient of the latest update."""
        return float(self.algorithm.ent_coef)

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        """``{"policy": weights + observation statistics, "algo": optimizer, scaler, schedules, ...}``."""
        return {"policy": self.policy.state_dict(), "algo": self.algorithm.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict`` (a checkpoint's ``policy`` and ``algo`` entries; others are ignored)."""
        self.load_policy_state(state["policy"])
        self.algorithm.load_state_dict(state["algo"])

    def load_policy_state(self, policy_state: dict[str, Any]) -> None:
        """Restore the policy only (evaluation, or starting a new optimizer from trained weights)."""
        self.policy.load_state_dict(policy_state)
