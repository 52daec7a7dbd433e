"""The reference side of ``envpool_loop.py``: a plain single-file torch PPO loop over one envpool pool.

Not a benchmark itself: ``envpool_loop.py`` times it beside rlpipe doing the same work (its
docstring gives the workload and its constants, :class:`Workload` holds them). Written as a
CleanRL-style loop would be, in one readable piece with torch's defaults (``Normal`` distributions,
Adam without ``fused``): collect N envs × T steps into ``[T, N, ...]`` tensors filled in place, GAE,
then epochs × shuffled minibatches of the clipped PPO loss; observations normalized with running
statistics that are frozen while collecting and merged after the update.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.distributions import Normal

SEED = 1
ACTOR_KEY = "state"
"""The observation group the actor reads when observations are a dict (the critic reads every group)."""


@dataclass(frozen=True)
class Workload:
    """Both sides' settings: ``--num-envs``, ``--horizon``, ``--epochs``, ``--minibatches``, ``--hidden``."""

    num_envs: int
    horizon: int
    epochs: int
    minibatches: int
    hidden: tuple[int, ...]
    lr: float = 3e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip: float = 0.2
    vf_coef: float = 0.5
    ent_coef: float = 0.01
    max_grad_norm: float = 0.5


class RunningNorm:
    """Observation normalization: running mean and variance (float64, merged per rollout), clipped to ±10."""

    def __init__(self, dim: int) -> None:
        self.mean, self.var = torch.zeros(dim, dtype=torch.float64), torch.ones(dim, dtype=torch.float64)
        self.count = 0

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        return ((obs - self.mean.float()) / (self.var + 1e-8).sqrt().float()).clamp(-10.0, 10.0)

    def update(self, obs: torch.Tensor) -> None:  # Chan et al.'s parallel merge
        x, n = obs.double(), obs.shape[0]
        mean, var, total = x.mean(0), x.var(0, unbiased=False), self.count + n
        delta = mean - self.mean
        self.var = (self.var * self.count + var * n + delta.square() * self.count * n / total) / total
        self.mean, self.count = self.mean + delta * n / total, total


def mlp(inputs: int, outputs: int, hidden: tuple[int, ...]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for size in hidden:
        layers += [nn.Linear(inputs, size), nn.ELU()]
        inputs = size
    return nn.Sequential(*layers, nn.Linear(inputs, outputs))


class Agent(nn.Module):
    """Gaussian actor on the first ``actor_dim`` observation columns, critic on all of them."""

    def __init__(self, obs_dim: int, actor_dim: int, act_dim: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.actor, self.critic = mlp(actor_dim, act_dim, hidden), mlp(obs_dim, 1, hidden)
        self.log_std = nn.Parameter(torch.zeros(act_dim))
        self.norm, self.actor_dim = RunningNorm(obs_dim), actor_dim

    def dist(self, x: torch.Tensor) -> Normal:
        return Normal(self.actor(x[:, : self.actor_dim]), self.log_std.exp())

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self.norm(obs)).squeeze(-1)

    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = self.norm(obs)
        dist = self.dist(x)
        action = dist.sample()
        return action, dist.log_prob(action).sum(-1), self.critic(x).squeeze(-1)

    def evaluate(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x = self.norm(obs)
        dist = self.dist(x)
        return dist.log_prob(action).sum(-1), dist.entropy().sum(-1), self.critic(x).squeeze(-1)


class PlainPPO:
    """The reference: collect → GAE → epochs × minibatches, in plain torch over one envpool pool.

    The pool is ``envpool.make(env_id, env_type="gymnasium", num_envs=N, num_threads=1)``, seeded
    ``SEED + i`` per env; the rollout tensors are ``[T, N, ...]``, filled in place.
    """

    def __init__(self, env_id: str, w: Workload) -> None:
        import envpool

        torch.manual_seed(SEED)
        self.w, n, t = w, w.num_envs, w.horizon
        self.envs = envpool.make(
            env_id,
            env_type="gymnasium",
            num_envs=n,
            batch_size=n,
            num_threads=1,
            seed=[SEED + i for i in range(n)],
        )
        first = self.envs.reset()[0]
        self.keys = sorted(first, key=lambda k: k != ACTOR_KEY) if isinstance(first, dict) else None
        self.obs = self.to_torch(first)
        actor_dim = first[ACTOR_KEY].shape[1] if self.keys else self.obs.shape[1]
        act_dim = self.envs.action_space.shape[0]
        self.agent = Agent(self.obs.shape[1], actor_dim, act_dim, w.hidden)
        self.optimizer = torch.optim.Adam(self.agent.parameters(), lr=w.lr)
        self.b_obs = torch.zeros(t, n, self.obs.shape[1])
        self.b_action = torch.zeros(t, n, act_dim)
        self.b_logprob, self.b_reward, self.b_value = torch.zeros(t, n), torch.zeros(t, n), torch.zeros(t, n)
        self.b_done = torch.zeros(t, n)
        self.next_value = torch.zeros(n)

    def to_torch(self, obs: Any) -> torch.Tensor:
        """float64 observations (a dict: groups side by side, ``state`` first) → float32 ``[N, D]``."""
        if self.keys is not None:
            obs = np.concatenate([obs[key] for key in self.keys], 1)
        return torch.from_numpy(obs.astype(np.float32))

    def iteration(self) -> dict[str, float]:
        start = time.perf_counter()
        self.collect()
        middle = time.perf_counter()
        self.update()
        return {"collect_s": middle - start, "update_s": time.perf_counter() - middle}

    @torch.no_grad()
    def collect(self) -> None:
        for t in range(self.w.horizon):
            self.b_obs[t] = self.obs
            action, logprob, value = self.agent.act(self.obs)
            obs, reward, terminated, truncated, _ = self.envs.step(action.numpy())
            next_obs = self.to_torch(obs)
            self.b_action[t], self.b_logprob[t], self.b_value[t] = action, logprob, value
            self.b_reward[t] = torch.from_numpy(reward)
            self.b_done[t] = torch.from_numpy(terminated | truncated)
            time_limit = torch.from_numpy(truncated & ~terminated)
            if time_limit.any():  # bootstrap from the true last observation
                self.b_reward[t, time_limit] += self.w.gamma * self.agent.value(next_obs[time_limit])
            done = np.flatnonzero(terminated | truncated)
            if done.size:  # start their next episodes now (envpool would spend the next step on it)
                next_obs[done] = self.to_torch(self.envs.reset(done)[0])
            self.obs = next_obs
        self.next_value = self.agent.value(self.obs)

    def advantages(self) -> tuple[torch.Tensor, torch.Tensor]:
        w, advantage = self.w, torch.zeros_like(self.b_reward)
        last = torch.zeros(w.num_envs)
        for t in reversed(range(w.horizon)):
            next_value = self.next_value if t == w.horizon - 1 else self.b_value[t + 1]
            not_done = 1.0 - self.b_done[t]
            delta = self.b_reward[t] + w.gamma * next_value * not_done - self.b_value[t]
            last = advantage[t] = delta + w.gamma * w.gae_lambda * not_done * last
        return advantage, advantage + self.b_value

    def update(self) -> None:
        w = self.w
        advantage, returns = (x.flatten() for x in self.advantages())
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        obs, action = self.b_obs.flatten(0, 1), self.b_action.flatten(0, 1)
        old_logprob = self.b_logprob.flatten()
        rows = obs.shape[0]
        size = rows // w.minibatches
        for _ in range(w.epochs):
            perm = torch.randperm(rows)
            for start in range(0, rows, size):
                idx = perm[start : start + size]
                logprob, entropy, value = self.agent.evaluate(obs[idx], action[idx])
                ratio = (logprob - old_logprob[idx]).exp()
                clipped = ratio.clamp(1 - w.clip, 1 + w.clip)
                surrogate = torch.min(ratio * advantage[idx], clipped * advantage[idx])
                loss = (
                    -surrogate.mean()
                    + w.vf_coef * (value - returns[idx]).square().mean()
                    - w.ent_coef * entropy.mean()
                )
                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.agent.parameters(), w.max_grad_norm)
                self.optimizer.step()
        self.agent.norm.update(obs)
