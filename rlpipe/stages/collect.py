"""The collect stage: step N envs for T steps under ``inference_mode`` into a reused ``[N, T+1]`` rollout."""

from __future__ import annotations

from collections import deque
from typing import Any

import torch
from tensordict import TensorDict

from rlpipe.envs import BatchedEnv
from rlpipe.policies import Policy
from rlpipe.rollout import allocate_rollout
from rlpipe.stages.base import Stage

__all__ = ["Collector"]

EPISODE_WINDOW = 200
"""Finished episodes averaged in ``train/episode_return_mean``."""


class Collector(Stage):
    """Fills one rollout per call; the last observation carries over to the next call.

    The hot loop runs only the actor and the env; values of ``obs[:, 0..T]`` and of the true
    final observations of truncated episodes are computed afterwards in two batched forwards.
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
    ) -> None:
        self.env, self.policy, self.horizon, self.seed = env, policy, horizon, seed
        self.reset_every_rollout, self.group_size = reset_every_rollout, group_size
        n, dev = env.num_envs, env.device
        self.rollout = allocate_rollout(n, horizon, env.obs_shape, env.action_shape,
                                        env.action_dtype, dev)
        self._final_obs = torch.zeros(n, horizon, *env.obs_shape, device=dev)
        self._episode_return_at = torch.zeros(n, horizon, device=dev)
        self._episode_length_at = torch.zeros(n, horizon, dtype=torch.int64, device=dev)
        self.episode_return = torch.zeros(n, device=dev)
        self.episode_length = torch.zeros(n, dtype=torch.int64, device=dev)
        self.obs: torch.Tensor | None = None
        self.num_resets = 0
        self.recent_returns: deque[float] = deque(maxlen=EPISODE_WINDOW)
        self.recent_lengths: deque[int] = deque(maxlen=EPISODE_WINDOW)

    def __call__(self) -> tuple[TensorDict, dict[str, float]]:
        """Collect one rollout; return it (reused buffer, valid until the next call) and episode stats."""
        if self.obs is None or self.reset_every_rollout:
            self._reset()
        with torch.inference_mode():
            self._step_loop()
            self._fill_values()
        return self.rollout, self._episode_stats()

    def _reset(self) -> None:
        self.obs = self.env.reset(seed=self.seed + self.num_resets, group_size=self.group_size)
        self.episode_return.zero_()
        self.episode_length.zero_()
        self.num_resets += 1

    def _step_loop(self) -> None:
        ro, obs = self.rollout, self.obs
        obs_buf, act_buf, logp_buf = ro["obs"], ro["action"], ro["sample_log_prob"]
        rew_buf, term_buf, trunc_buf, done_buf = (ro["reward"], ro["terminated"], ro["truncated"],
                                                  ro["done"])
        for t in range(self.horizon):
            obs_buf[:, t] = obs
            action, log_prob = self.policy.sample(obs)
            step = self.env.step(action)
            act_buf[:, t] = action
            logp_buf[:, t] = log_prob
            rew_buf[:, t] = step.reward
            term_buf[:, t] = step.terminated
            trunc_buf[:, t] = step.truncated
            done = step.terminated | step.truncated
            done_buf[:, t] = done
            self._final_obs[:, t] = step.final_obs
            self._track_episodes(t, step.reward, done)
            obs = step.obs
        obs_buf[:, self.horizon] = obs
        self.obs = obs

    def _track_episodes(self, t: int, reward: torch.Tensor, done: torch.Tensor) -> None:
        self.episode_return += reward
        self.episode_length += 1
        self._episode_return_at[:, t] = self.episode_return
        self._episode_length_at[:, t] = self.episode_length
        self.episode_return.masked_fill_(done, 0.0)
        self.episode_length.masked_fill_(done, 0)

    def _fill_values(self) -> None:
        ro, n, t1 = self.rollout, *self.rollout.batch_size
        if not self.policy.has_critic:
            return  # value and final_value stay zero
        ro["value"].copy_(self.policy.value(ro["obs"].flatten(0, 1)).view(n, t1))
        bootstrap = ro["truncated"][:, :-1] & ~ro["terminated"][:, :-1]
        final_value = self.policy.value(self._final_obs.flatten(0, 1)).view(n, t1 - 1)
        ro["final_value"][:, :-1] = final_value * bootstrap

    def _episode_stats(self) -> dict[str, float]:
        finished = self.rollout["done"][:, :-1]
        returns = self._episode_return_at[finished].tolist()
        self.recent_returns.extend(returns)
        self.recent_lengths.extend(self._episode_length_at[finished].tolist())
        stats = {"collect/episodes": float(len(returns))}
        if self.recent_returns:
            stats["train/episode_return_mean"] = sum(self.recent_returns) / len(self.recent_returns)
            stats["train/episode_length_mean"] = sum(self.recent_lengths) / len(self.recent_lengths)
        return stats

    def state_dict(self) -> dict[str, Any]:
        """Carried observation, running episode accumulators, reset count, env state, episode window."""
        return {
            "obs": None if self.obs is None else self.obs.clone(),
            "episode_return": self.episode_return.clone(),
            "episode_length": self.episode_length.clone(),
            "num_resets": self.num_resets,
            "recent_returns": list(self.recent_returns),
            "recent_lengths": list(self.recent_lengths),
            "env": self.env.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict`` so the next rollout equals the uninterrupted one.

        Exact for torch envs; the gymnasium adapter restarts its episodes on load (``GymnasiumEnv``).
        """
        dev = self.env.device
        self.obs = None if state["obs"] is None else state["obs"].to(dev)
        self.episode_return.copy_(state["episode_return"])
        self.episode_length.copy_(state["episode_length"])
        self.num_resets = int(state["num_resets"])
        self.recent_returns.clear()
        self.recent_returns.extend(state["recent_returns"])
        self.recent_lengths.clear()
        self.recent_lengths.extend(state["recent_lengths"])
        self.env.load_state_dict(state["env"])
        fresh = getattr(self.env, "last_obs", None)
        if fresh is not None:
            # The gymnasium adapter cannot restore running episodes: it resets them on load, so
            # the run continues from its new first observations and with fresh episode sums.
            self.obs = fresh.clone()
            self.episode_return.zero_()
            self.episode_length.zero_()
