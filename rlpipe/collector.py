"""The collector: steps N envs for T steps under ``inference_mode`` into a reused ``[N, T+1]`` rollout.

Also the episode statistics it reports: running returns and lengths, success rates.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

import torch
from tensordict import TensorDict

from rlpipe.algorithms.sequences import RECURRENT_STATE
from rlpipe.envs import BatchedEnv, StepResult
from rlpipe.envs.base import Obs
from rlpipe.policies import Policy
from rlpipe.rollout import (
    ACTION_MEAN,
    SUCCESS,
    allocate_rollout,
    gather_final_obs,
    obs_from_state,
    obs_state,
    time_slots,
    write_obs,
    zeros_obs,
)
from rlpipe.testing import faults

__all__ = ["Collector", "SuccessTracker", "act_and_step", "episode_sums"]

EPISODE_WINDOW = 200
"""Finished episodes averaged in ``train/episode_return_mean``."""
SLOTTED = ("obs", "action", "sample_log_prob", "reward", "terminated", "truncated")
"""Rollout keys the step loop writes every step, through per-step views."""


class Collector:
    """Fills one rollout per call; the last observation carries over to the next call.

    The hot loop runs only the actor and the env; values of ``obs[:, 0..T]`` and of the true
    final observations of truncated episodes are computed afterwards in two batched forwards.

    Besides the rollout, each call records what the rollout store needs to turn rollouts into
    episodes: :attr:`reset_at_start` (the envs were reset before the first step) and
    :attr:`final_obs`, the true final observations at the done slots, gathered once per rollout on
    the device (:func:`~rlpipe.rollout.gather_final_obs`). Envs that report ``info["success"]``
    get the per-step ``success`` key in the rollout. With ``action_mean`` the rollout also holds the
    policy's deterministic action at every step (:data:`~rlpipe.rollout.ACTION_MEAN`), computed by
    the same ``act(obs, deterministic=True)`` that evaluation acts with, in one batched forward over
    ``obs[:, 0..T-1]`` after the loop (a recurrent policy: its deterministic core step, each step).

    A recurrent policy (``policy.is_recurrent``) runs its own loop (:meth:`_recurrent_loop`): it
    carries the core state ``[N, S]``, zeroes it after a done and at every ``seq_len ×
    seqs_per_state_reset``-th step of a rollout (never when that is ≤ 0), and writes it into the
    ``recurrent_state`` extra at every sequence start (``t % seq_len == 0``).
    """

    writes = ("obs", "action", "sample_log_prob", "value", "reward", "terminated", "truncated",
              "done", "final_value")

    def __init__(
        self,
        env: BatchedEnv,
        policy: Policy,
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
        self.env, self.policy, self.horizon, self.seed = env, policy, horizon, seed
        self.reset_every_rollout, self.group_size = reset_every_rollout, group_size
        self.horizons_per_env_reset, self.deterministic = horizons_per_env_reset, deterministic
        self.action_mean = action_mean
        self._mode_policy = getattr(policy, "deterministic_policy", policy)
        """Whose deterministic action ``action_mean`` records (a teacher mix: its student)."""
        self.num_collects = 0
        """Rollouts collected so far (``horizons_per_env_reset`` counts them)."""
        n, dev = env.num_envs, env.device
        self.recurrent = bool(getattr(policy, "is_recurrent", False))
        self.rollout = allocate_rollout(n, horizon, env.obs_spec, env.action_shape,
                                        env.action_dtype, dev, self._extras(), env.obs_dtypes)
        if self.recurrent:
            self._init_recurrent(seq_len, seqs_per_state_reset)
        self._final_obs = zeros_obs(env.obs_spec, (n, horizon), dev, env.obs_dtypes)
        self._slotted: dict[str, Any] = {}
        self._slots: dict[str, list[Any]] = {}
        """Per-step views ``[N, ...]`` of the rollout's buffers and of the final observations."""
        self.success = SuccessTracker(n, horizon, dev, EPISODE_WINDOW)
        self._episode_return_at = torch.zeros(n, horizon, device=dev)
        self._episode_length_at = torch.zeros(n, horizon, dtype=torch.int64, device=dev)
        self.episode_return = torch.zeros(n, device=dev)
        self.episode_length = torch.zeros(n, dtype=torch.int64, device=dev)
        self.obs: torch.Tensor | None = None
        self.num_resets = 0
        self.reset_at_start = False
        """The newest rollout began with a reset of every env (no episode continues into it)."""
        self.final_obs: TensorDict | None = None
        """The newest rollout's sparse final observations ``[K]`` (``index``, ``obs``), on the device."""
        self._restarted = False
        """The env restarted its episodes on :meth:`load_state_dict`: the next rollout begins afresh."""
        self.recent_returns: deque[float] = deque(maxlen=EPISODE_WINDOW)
        self.recent_lengths: deque[int] = deque(maxlen=EPISODE_WINDOW)

    def __call__(self) -> tuple[TensorDict, dict[str, float]]:
        """Collect one rollout; return it (reused buffer, valid until the next call) and episode stats."""
        self.reset_at_start = self._reset_due() or self._restarted
        if self._reset_due():
            self._reset()
        self._restarted = False
        self.num_collects += 1
        with torch.inference_mode():
            if self.recurrent:
                self._recurrent_loop()
            else:
                self._step_loop()
                self._fill_values()
                self._fill_action_mean()
            faults.poison("obs", self.rollout["obs"])  # no-ops unless a fault test asks
            faults.poison("reward", self.rollout["reward"])
        return self.rollout, self._episode_stats()

    def _reset_due(self) -> bool:
        """First call, ``reset_every_rollout``, or every ``horizons_per_env_reset``-th call."""
        every = self.horizons_per_env_reset
        periodic = every > 0 and self.num_collects % every == 0
        return self.obs is None or self.reset_every_rollout or periodic

    def _reset(self) -> None:
        self.obs = self.env.reset(seed=self.seed + self.num_resets, group_size=self.group_size)
        self.episode_return.zero_()
        self.episode_length.zero_()
        self.num_resets += 1
        if self.recurrent:
            self.recurrent_state.zero_()

    def _step_loop(self) -> None:
        """T env steps; per step only the actor, the env and one copy per rollout key.

        The copies go into per-step views made once (:attr:`_slots`); ``done`` and the episode
        statistics are computed for the whole rollout afterwards (:meth:`_finish_rollout`), and the
        true final observation is copied only on steps where the env returned one distinct from
        ``obs`` (some episode ended).
        """
        slots, obs = self._step_slots(), self.obs
        for t in range(self.horizon):
            write_obs(slots["obs"][t], obs)
            action, log_prob, step = act_and_step(self.env, self.policy, obs, self.deterministic)
            slots["action"][t].copy_(action)
            slots["sample_log_prob"][t].copy_(log_prob)
            slots["reward"][t].copy_(step.reward)
            slots["terminated"][t].copy_(step.terminated)
            slots["truncated"][t].copy_(step.truncated)
            if step.final_obs is not step.obs:
                write_obs(slots["final_obs"][t], step.final_obs)
            if step.info:
                self.success.track(t, step.info, step.terminated | step.truncated)
            obs = step.obs
        write_obs(slots["obs"][self.horizon], obs)
        self.obs = obs
        self._finish_rollout()

    def _step_slots(self) -> dict[str, list[Any]]:
        """:attr:`_slots`, made again only when a buffer is no longer the rollout's (an event replaced it)."""
        buffers = {key: self.rollout.get(key) for key in SLOTTED} | {"final_obs": self._final_obs}
        if any(self._slotted.get(key) is not value for key, value in buffers.items()):
            self._slotted = buffers
            self._slots = {key: time_slots(value) for key, value in buffers.items()}
        return self._slots

    def _finish_rollout(self) -> None:
        """``done = terminated | truncated`` and the running episode sums, for all T steps at once."""
        ro, t = self.rollout, self.horizon
        done = ro["terminated"][:, :t] | ro["truncated"][:, :t]
        ro["done"][:, :t] = done
        self.final_obs = gather_final_obs(self._final_obs, done)
        if self.success.seen:
            if SUCCESS not in ro.keys():
                ro.set(SUCCESS, torch.zeros(ro.batch_size, dtype=torch.bool, device=ro.device))
            ro[SUCCESS][:, :t] = self.success.step
        return_at, length_at = episode_sums(ro["reward"][:, :t], done, self.episode_return,
                                            self.episode_length)
        self._episode_return_at.copy_(return_at)
        self._episode_length_at.copy_(length_at)
        self.episode_return.copy_(return_at[:, -1].masked_fill(done[:, -1], 0.0))
        self.episode_length.copy_(length_at[:, -1].masked_fill(done[:, -1], 0))

    def _extras(self) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        extras = {RECURRENT_STATE: ((self.policy.state_size,), torch.float32)} if self.recurrent else {}
        if self.action_mean:
            extras[ACTION_MEAN] = (tuple(self.env.action_shape), self.env.action_dtype)
        return extras

    def _fill_action_mean(self) -> None:
        """``action_mean[:, :T]``: the deterministic action of each stored observation, one batched forward.

        The observation normalizer changes only in the update, so this equals acting at each step.
        """
        if not self.action_mean:
            return
        ro, n, t = self.rollout, self.env.num_envs, self.horizon
        mean = self._mode_policy.act(ro["obs"][:, :t].flatten(0, 1), deterministic=True)
        ro[ACTION_MEAN][:, :t] = mean.view(n, t, *mean.shape[1:])

    def _init_recurrent(self, seq_len: int | None, seqs_per_state_reset: int) -> None:
        n, dev, policy = self.env.num_envs, self.env.device, self.policy
        self.writes = (*Collector.writes, RECURRENT_STATE)
        self.seq_len = seq_len or self.horizon
        self.state_reset_every = self.seq_len * seqs_per_state_reset if seqs_per_state_reset > 0 else 0
        self.recurrent_state = torch.zeros(n, policy.state_size, device=dev)
        self._final_state = torch.zeros(n, self.horizon, policy.state_size, device=dev)

    def _recurrent_loop(self) -> None:
        """The step loop of a recurrent policy; values come from the same core step as the action."""
        ro, obs, state = self.rollout, self.obs, self.recurrent_state
        ro[RECURRENT_STATE].zero_()
        for t in range(self.horizon):
            if self.state_reset_every and t % self.state_reset_every == 0:
                state = torch.zeros_like(state)
            if t % self.seq_len == 0:
                ro[RECURRENT_STATE][:, t] = state
            action, log_prob, value, next_state = self.policy.sample_step(obs, state, self.deterministic)
            if self.action_mean:  # a deterministic step draws nothing: the samples stay as they were
                ro[ACTION_MEAN][:, t] = self._mode_policy.sample_step(obs, state, True)[0]
            step = self.env.step(action)
            done = step.terminated | step.truncated
            for key, item in (("obs", obs), ("action", action), ("sample_log_prob", log_prob),
                              ("value", value), ("reward", step.reward), ("terminated", step.terminated),
                              ("truncated", step.truncated)):
                ro[key][:, t] = item
            self._final_obs[:, t], self._final_state[:, t] = step.final_obs, next_state
            self.success.track(t, step.info, done)
            state = next_state * (~done).unsqueeze(-1).to(next_state.dtype)
            obs = step.obs
        ro["obs"][:, self.horizon] = obs
        ro["value"][:, self.horizon] = self.policy.step_value(obs, state)
        self.obs, self.recurrent_state = obs, state
        self._finish_rollout()
        self._fill_recurrent_final_values()

    def _fill_recurrent_final_values(self) -> None:
        """V of each truncated episode's true last observation, seen with the state it would have had."""
        ro, n, t = self.rollout, self.env.num_envs, self.horizon
        bootstrap = ro["truncated"][:, :-1] & ~ro["terminated"][:, :-1]
        final_value = self.policy.step_value(self._final_obs.flatten(0, 1), self._final_state.flatten(0, 1))
        ro["final_value"][:, :-1] = final_value.view(n, t) * bootstrap

    def _fill_values(self) -> None:
        ro, n, t1 = self.rollout, *self.rollout.batch_size
        if not self.policy.has_critic:
            return  # value and final_value stay zero
        ro["value"].copy_(self.policy.value(ro["obs"].flatten(0, 1)).view(n, t1))
        ro["final_value"].zero_()
        # Truncations are rare: evaluate the critic on those final observations only (one host
        # sync per rollout) instead of on all N×T of them.
        rows = (ro["truncated"][:, :-1] & ~ro["terminated"][:, :-1]).flatten().nonzero().squeeze(-1)
        if rows.numel():
            final_value = torch.zeros(n * (t1 - 1), device=ro.device)
            final_value[rows] = self.policy.value(self._final_obs.flatten(0, 1)[rows])
            ro["final_value"][:, :-1] = final_value.view(n, t1 - 1)

    def _episode_stats(self) -> dict[str, float]:
        finished = self.rollout["done"][:, :-1]
        returns = self._episode_return_at[finished].tolist()
        self.recent_returns.extend(returns)
        self.recent_lengths.extend(self._episode_length_at[finished].tolist())
        stats = {"collect/episodes": float(len(returns))}
        if self.recent_returns:
            stats["train/episode_return_mean"] = sum(self.recent_returns) / len(self.recent_returns)
            stats["train/episode_length_mean"] = sum(self.recent_lengths) / len(self.recent_lengths)
        stats |= self.success.stats(finished)
        pop_metrics = getattr(self.env, "pop_metrics", None)
        return stats | (pop_metrics() if pop_metrics is not None else {})

    def state_dict(self) -> dict[str, Any]:
        """Carried observation, running episode accumulators, reset count, env state, episode window."""
        return {
            "obs": obs_state(self.obs),
            "episode_return": self.episode_return.clone(),
            "episode_length": self.episode_length.clone(),
            "num_resets": self.num_resets,
            "num_collects": self.num_collects,
            "recent_returns": list(self.recent_returns),
            "recent_lengths": list(self.recent_lengths),
            "env": self.env.state_dict(),
            "success": self.success.state_dict(),
            **({RECURRENT_STATE: self.recurrent_state.clone()} if self.recurrent else {}),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict`` so the next rollout equals the uninterrupted one.

        Exact for torch envs; the gymnasium adapter restarts its episodes on load (``GymnasiumEnv``).
        """
        dev = self.env.device
        self.obs = obs_from_state(state["obs"], dev)
        self.success.load_state_dict(state.get("success", {}))
        self.episode_return.copy_(state["episode_return"])
        self.episode_length.copy_(state["episode_length"])
        self.num_resets = int(state["num_resets"])
        self.num_collects = int(state.get("num_collects", 0))
        self.recent_returns.clear()
        self.recent_returns.extend(state["recent_returns"])
        self.recent_lengths.clear()
        self.recent_lengths.extend(state["recent_lengths"])
        self.env.load_state_dict(state["env"])
        if self.recurrent:
            self.recurrent_state.copy_(state[RECURRENT_STATE])
        fresh = getattr(self.env, "last_obs", None)
        if fresh is not None:
            # The gymnasium adapter cannot restore running episodes: it resets them on load, so
            # the run continues from its new first observations and with fresh episode sums.
            self.obs = fresh.clone()
            self._restarted = True
            self.episode_return.zero_()
            self.episode_length.zero_()
            self.success.running.zero_()

def episode_sums(
    reward: torch.Tensor, done: torch.Tensor, return0: torch.Tensor, length0: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(return_at, length_at)`` ``[N, T]``: each step's episode return and length so far, step included.

    The vectorized form of stepping ``ret += reward[:, t]; at[:, t] = ret; ret[done[:, t]] = 0`` through
    a rollout (``reward``/``done`` ``[N, T]``), where ``return0``/``length0`` ``[N]`` are the episodes
    running when the rollout began. One pass of a dozen ops per rollout instead of six per env step;
    the sums run in float64, so the float32 returns are exact to rounding.
    """
    n, horizon = reward.shape
    steps = torch.arange(horizon, device=reward.device)
    last_done = torch.where(done, steps, -1).cummax(1).values  # latest done at or before t
    before = torch.cat([last_done.new_full((n, 1), -1), last_done[:, :-1]], 1)
    start = before + 1  # first step of t's episode within the rollout (0: it began earlier)
    carried = start == 0
    cumulative = reward.double().cumsum(1)
    head = cumulative.gather(1, (start - 1).clamp(min=0))  # rewards before the episode's first step
    base = torch.where(carried, -return0.double().unsqueeze(1), head)
    return_at = (cumulative - base).to(reward.dtype)
    length_at = steps + 1 - start + torch.where(carried, length0.unsqueeze(1), 0)
    return return_at, length_at


def act_and_step(
    env: BatchedEnv, policy: Policy, obs: Obs, deterministic: bool
) -> tuple[torch.Tensor, torch.Tensor, StepResult]:
    """``(action [N, *act], log_prob [N], step)``: sample from ``policy`` and step ``env``.

    Envs with their own ``act_and_step`` (envpool's double-buffered ``async`` mode) interleave
    inference and simulation themselves.
    """
    own = getattr(env, "act_and_step", None)
    if own is not None:
        return own(lambda o: policy.sample(o, deterministic), obs)
    action, log_prob = policy.sample(obs, deterministic)
    return action, log_prob, env.step(action)


class SuccessTracker:
    """``train/success_rate``: the fraction of finished episodes with ``info["success"]`` at any step.

    Everything stays on the device during collection; :meth:`stats` syncs once per rollout. Envs
    that never report ``success`` produce no metric.
    """

    def __init__(self, num_envs: int, horizon: int, device: torch.device, window: int) -> None:
        self.running = torch.zeros(num_envs, dtype=torch.bool, device=device)
        """``[N]``: the current episode has succeeded so far."""
        self.at = torch.zeros(num_envs, horizon, dtype=torch.bool, device=device)
        """``[N, T]``: ``running`` after step t (read where the episode finished)."""
        self.step = torch.zeros(num_envs, horizon, dtype=torch.bool, device=device)
        """``[N, T]``: step t's own ``info["success"]`` (the rollout's ``success`` key)."""
        self.seen = False
        self.recent: deque[bool] = deque(maxlen=window)

    def track(self, t: int, info: Mapping[str, torch.Tensor], done: torch.Tensor) -> None:
        """Fold step t's ``info["success"]`` ``[N]`` in; forget it for envs whose episode ended."""
        flag = info.get("success")
        if flag is None:
            return
        self.seen = True
        self.step[:, t] = flag
        self.running |= flag.bool()
        self.at[:, t] = self.running
        self.running &= ~done

    def stats(self, finished: torch.Tensor) -> dict[str, float]:
        """``{"train/success_rate": …}`` over the window of finished episodes (``finished``: ``[N, T]``)."""
        if not self.seen:
            return {}
        self.recent.extend(self.at[finished].tolist())
        return {"train/success_rate": sum(self.recent) / len(self.recent)} if self.recent else {}

    def state_dict(self) -> dict[str, Any]:
        """Running flags and the window (checkpointed with the collector)."""
        return {"running": self.running.clone(), "recent": list(self.recent), "seen": self.seen}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (an empty dict leaves the tracker fresh)."""
        if state:
            self.running.copy_(state["running"])
            self.recent.clear()
            self.recent.extend(state["recent"])
            self.seen = bool(state["seen"])
