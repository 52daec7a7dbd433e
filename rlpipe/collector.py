"""The collector: steps N envs for T steps under ``inference_mode`` into a reused ``[N, T+1]`` rollout.

Besides the rollout, each call records what the rollout store needs to turn rollouts into episodes:
``reset_at_start`` (the envs were reset before the first step) and ``final_obs``, the true final
observations at the done slots, gathered once per rollout on the device
(:func:`~rlpipe.rollout.gather_final_obs`). Envs that report ``info["success"]`` get the per-step
``success`` key in the rollout. With ``action_mean`` the rollout also holds the policy's
deterministic action at every step (:data:`~rlpipe.rollout.ACTION_MEAN`), computed by the same
``act(obs, deterministic=True)`` that evaluation acts with (a recurrent policy: its deterministic
core step, each step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDict

from rlpipe.envs import BatchedEnv
from rlpipe.episode_tally import EpisodeTally
from rlpipe.policies.trainable import ActingPolicy
from rlpipe.rollout import (
    ACTION_MEAN,
    REQUIRED_KEYS,
    STEP_KEYS,
    SUCCESS,
    allocate_rollout,
    gather_final_obs,
    obs_from_state,
    obs_state,
    time_slots,
    write_obs,
    zeros_obs,
)
from rlpipe.stepping import make_stepper
from rlpipe.testing import faults

__all__ = ["Collector", "ResetPlan"]


@dataclass
class ResetPlan:
    """When the collector resets every env, and with which seed.

    Before its first rollout, before every rollout (``reset_every_rollout``: GRPO's groups) or before
    every ``horizons_per_env_reset``-th one. Reset k seeds the env with ``seed + k``; ``group_size``
    envs in a row start alike.
    """

    seed: int
    reset_every_rollout: bool = False
    group_size: int = 1
    horizons_per_env_reset: int = -1
    num_resets: int = 0
    num_collects: int = 0
    """Rollouts collected so far (``horizons_per_env_reset`` counts them)."""

    def begin_rollout(self, first: bool) -> bool:
        """Count a rollout; return whether it begins with a reset (``first``: none was collected yet)."""
        every = self.horizons_per_env_reset
        due = first or self.reset_every_rollout or (every > 0 and self.num_collects % every == 0)
        self.num_collects += 1
        return due

    def reset(self, env: BatchedEnv) -> torch.Tensor | TensorDict:
        """Reset every env of ``env`` with the next seed; return the first observations."""
        obs = env.reset(seed=self.seed + self.num_resets, group_size=self.group_size)
        self.num_resets += 1
        return obs


class Collector:
    """Fills one rollout per call; the last observation carries over to the next call.

    One step loop for every policy: per step only the policy's stepper (:mod:`rlpipe.stepping`: the
    actor and the env, plus a recurrent policy's core state) and one copy per rollout key. The
    stepper fills what the loop leaves (``value``, ``final_value``, ``action_mean``) afterwards; a
    feedforward policy's in two batched forwards. What else a call records: the module's docstring.
    """

    writes: tuple[str, ...] = REQUIRED_KEYS
    """The rollout keys every collector writes; an instance adds its stepper's extras."""

    def __init__(
        self,
        env: BatchedEnv,
        policy: ActingPolicy,
        horizon: int,
        seed: int,
        reset_every_rollout: bool = False,
        group_size: int = 1,
        horizons_per_env_reset: int = -1,
        deterministic: bool = False,
        seq_len: int | None = None,
        seqs_per_state_reset: int = -1,
        action_mean: bool = False,
    ) -> None:
        self.env, self.policy, self.horizon, self.deterministic = env, policy, horizon, deterministic
        self.resets = ResetPlan(seed, reset_every_rollout, group_size, horizons_per_env_reset)
        self.action_mean = action_mean
        # Whose deterministic action ``action_mean`` records (a teacher mix: its student).
        mode_policy = policy.deterministic_policy if action_mean else None
        self.stepper = make_stepper(
            env, policy, horizon, deterministic, mode_policy, seq_len, seqs_per_state_reset
        )
        self.writes = (*REQUIRED_KEYS, *self.stepper.extras)
        n, dev = env.num_envs, env.device
        extras = self.stepper.extras | (
            {ACTION_MEAN: (tuple(env.action_shape), env.action_dtype)} if action_mean else {}
        )
        self.rollout = allocate_rollout(
            n, horizon, env.obs_spec, env.action_shape, env.action_dtype, dev, extras, env.obs_dtypes
        )
        self._final_obs = zeros_obs(env.obs_spec, (n, horizon), dev, env.obs_dtypes)
        self._slotted: dict[str, Any] = {}
        self._slots: dict[str, list[Any]] = {}
        """Per-step views ``[N, ...]`` of the rollout's buffers and of the final observations."""
        self.episodes = EpisodeTally(n, horizon, dev)
        self.obs: torch.Tensor | TensorDict | None = None
        self.reset_at_start = False
        """The newest rollout began with a reset of every env (no episode continues into it)."""
        self._sparse_final_obs: TensorDict | None = None
        self._restarted = False
        """The env restarted its episodes on :meth:`load_state_dict`: the next rollout begins afresh."""

    @property
    def recurrent_state(self) -> torch.Tensor:
        """The policy's carried state ``[N, S]`` (a recurrent core's; empty for a feedforward policy)."""
        return self.stepper.state

    def __call__(self) -> tuple[TensorDict, dict[str, float]]:
        """Collect one rollout; return it (reused buffer, valid until the next call) and episode stats."""
        due = self.resets.begin_rollout(first=self.obs is None)
        self.reset_at_start = due or self._restarted
        if due:
            self._reset()
        self._restarted = False
        with torch.inference_mode():
            self._step_loop()
            self._finish_rollout()
            self.stepper.finish(self.rollout, self._final_obs)
            faults.poison("obs", self.rollout["obs"])  # no-ops unless a fault test asks
            faults.poison("reward", self.rollout["reward"])
        return self.rollout, self._episode_stats()

    def _reset(self) -> None:
        self.obs = self.resets.reset(self.env)
        self.episodes.restart()
        self.stepper.reset()

    def _step_loop(self) -> None:
        """T env steps; per step only the stepper and one copy per rollout key, into views made once.

        ``done`` and the episode statistics are computed for the whole rollout afterwards
        (:meth:`_finish_rollout`), and the true final observation is copied only on steps where the
        env returned one distinct from ``obs`` (some episode ended).
        """
        slots, obs, step_at = self._step_slots(), self.obs, self.stepper
        obs_at, action_at, log_prob_at = slots["obs"], slots["action"], slots["sample_log_prob"]
        reward_at, terminated_at, truncated_at = slots["reward"], slots["terminated"], slots["truncated"]
        final_obs_at, success = slots["final_obs"], self.episodes.success
        step_at.begin(self.rollout, self._final_obs)
        for t in range(self.horizon):
            write_obs(obs_at[t], obs)
            action, log_prob, step = step_at(t, obs)
            action_at[t].copy_(action)
            log_prob_at[t].copy_(log_prob)
            reward_at[t].copy_(step.reward)
            terminated_at[t].copy_(step.terminated)
            truncated_at[t].copy_(step.truncated)
            if step.final_obs is not step.obs:
                write_obs(final_obs_at[t], step.final_obs)
            if step.info:
                success.track(t, step.info, step.terminated | step.truncated)
            obs = step.obs
        write_obs(obs_at[self.horizon], obs)
        self.obs = obs

    @property
    def final_obs(self) -> TensorDict:
        """The newest rollout's sparse final observations ``[K]`` (``index``, ``obs``), on the device.

        Gathered from the step buffer at the rollout's done slots on first use (one host sync), so a
        run without a store never pays for it.
        """
        if self._sparse_final_obs is None:
            done = self.rollout["done"][:, : self.horizon]
            self._sparse_final_obs = gather_final_obs(self._final_obs, done)
        return self._sparse_final_obs

    def _step_slots(self) -> dict[str, list[Any]]:
        """:attr:`_slots`, made again only when a buffer is no longer the rollout's (an event replaced it)."""
        buffers = {key: self.rollout.get(key) for key in STEP_KEYS} | {"final_obs": self._final_obs}
        if any(self._slotted.get(key) is not value for key, value in buffers.items()):
            self._slotted = buffers
            self._slots = {key: time_slots(value) for key, value in buffers.items()}
        return self._slots

    def _finish_rollout(self) -> None:
        """``done = terminated | truncated``, the final observations, ``success`` and the episode sums."""
        ro, t = self.rollout, self.horizon
        done = ro["terminated"][:, :t] | ro["truncated"][:, :t]
        ro["done"][:, :t] = done
        self._sparse_final_obs = None  # gathered when asked for (the store), not on every rollout
        if self.episodes.success.seen:
            if SUCCESS not in ro.keys():
                ro.set(SUCCESS, torch.zeros(ro.batch_size, dtype=torch.bool, device=ro.device))
            ro[SUCCESS][:, :t] = self.episodes.success.step
        self.episodes.fold(ro["reward"][:, :t], done)

    def _episode_stats(self) -> dict[str, float]:
        stats = self.episodes.stats(self.rollout["done"][:, :-1])
        pop_metrics = getattr(self.env, "pop_metrics", None)
        return stats | (pop_metrics() if pop_metrics is not None else {})

    def state_dict(self) -> dict[str, Any]:
        """Carried observation and policy state, episode tally, reset and rollout counts, env state."""
        return {
            "obs": obs_state(self.obs),
            "num_resets": self.resets.num_resets,
            "num_collects": self.resets.num_collects,
            "env": self.env.state_dict(),
            **self.episodes.state_dict(),
            **self.stepper.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict`` so the next rollout equals the uninterrupted one.

        Exact for torch envs; the gymnasium adapter restarts its episodes on load (``GymnasiumEnv``).
        """
        self.obs = obs_from_state(state["obs"], self.env.device)
        self.episodes.load_state_dict(state)
        self.resets.num_resets = int(state["num_resets"])
        self.resets.num_collects = int(state.get("num_collects", 0))
        self.env.load_state_dict(state["env"])
        self.stepper.load_state_dict(state)
        fresh = getattr(self.env, "last_obs", None)
        if fresh is not None:
            # The gymnasium adapter cannot restore running episodes: it resets them on load, so
            # the run continues from its new first observations and with fresh episode sums.
            self.obs = fresh.clone()
            self._restarted = True
            self.episodes.restart()
