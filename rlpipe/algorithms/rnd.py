"""Random network distillation curiosity (Burda et al. 2018, arXiv:1810.12894), as rsl_rl adds it to PPO.

A target network with fixed random weights and a predictor network read the same observations
(``obs_keys`` of a dict observation, concatenated; a flat observation as it is). The predictor learns
to match the target on the states the agent visits, so its error stays high on novel states:

    r_int[:, t] = ‖predictor(s_{t+1}) − target(s_{t+1})‖²          (the next observation of step t)

normalized by the running std of its discounted return (reward normalization), weighted (a
schedule over env steps) and added to the extrinsic reward before GAE — one value head, rsl_rl's
choice (the paper's second, non-episodic value head is not used). After an auto-reset
``obs[:, t+1]`` is the next episode's first observation, so a done step's novelty is that state's.

The network input is whitened with running mean/std clipped to ±5 (``state_normalization``); the
statistics merge each rollout's ``obs[:, 1:]`` before its rewards are computed. The networks are built
at first use from the observation size, from their own seed (the global RNG is untouched), and
their weights, the predictor's Adam state and both running statistics are in ``state_dict``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from tensordict import TensorDict
from torch import nn

from rlpipe.algorithms.normalization import RewardNormalizer, RunningMeanStd
from rlpipe.algorithms.schedules import Schedule
from rlpipe.config.algorithms import RNDCfg
from rlpipe.runtime.distributed import average_gradients

__all__ = ["RND", "RNDCfg", "mlp", "rnd_state"]

STATE_CLIP = 5.0
"""Whitened network inputs are clipped to ±5 (the RND paper)."""
TARGET_SEED_OFFSET = 7_919
"""The networks' initial weights draw from ``seed + offset``, apart from the policy's stream."""


def mlp(in_dim: int, hidden_sizes: Iterable[int], out_dim: int) -> nn.Sequential:
    """``[B, in_dim]`` → ``[B, out_dim]``: Linear + ELU per hidden size, then a Linear."""
    layers: list[nn.Module] = []
    for size in hidden_sizes:
        layers += [nn.Linear(in_dim, size), nn.ELU()]
        in_dim = size
    return nn.Sequential(*layers, nn.Linear(in_dim, out_dim))


def rnd_state(obs: torch.Tensor | TensorDict, keys: list[str] | None) -> torch.Tensor:
    """Observations ``[N, T, ...]`` → network state ``[N, T, D]``.

    A dict observation gives its keys' entries concatenated (every key, sorted, for ``None``); a
    tensor observation its feature dims flattened.
    """
    if isinstance(obs, TensorDict):
        chosen = sorted(obs.keys()) if keys is None else keys
        return torch.cat([_features(obs[k]) for k in chosen], dim=-1)
    return _features(obs)


def _features(x: torch.Tensor) -> torch.Tensor:
    """``[N, T, ...]`` → ``[N, T, D]`` float32."""
    return (x.flatten(2) if x.dim() > 2 else x.unsqueeze(-1)).float()


class RND:
    """Target, predictor, their optimizer and statistics; intrinsic rewards of ``[N, T+1]`` rollouts."""

    def __init__(self, cfg: RNDCfg, device: torch.device) -> None:
        self.cfg, self.device = cfg, torch.device(device)
        points = cfg.weight_schedule and tuple((int(x), float(y)) for x, y in cfg.weight_schedule)
        self.weight_schedule = Schedule(cfg.weight_schedule_kind, cfg.weight, points, cfg.weight_final)
        self.reward_normalizer = (RewardNormalizer(cfg.gamma, self.device) if cfg.reward_normalization
                                  else None)
        self.in_dim: int | None = None
        self.target: nn.Module | None = None
        self.predictor: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.state_stats: RunningMeanStd | None = None

    # ------------------------------------------------------------------ networks

    def build(self, in_dim: int, seed: int) -> None:
        """Create both networks for ``in_dim`` inputs, drawn from ``seed`` (no effect on the global RNG)."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed + TARGET_SEED_OFFSET)
            target = mlp(in_dim, self.cfg.hidden_sizes, self.cfg.embedding_dim)
            predictor = mlp(in_dim, self.cfg.hidden_sizes, self.cfg.embedding_dim)
        self.in_dim = in_dim
        self.target = target.to(self.device).requires_grad_(False).eval()
        self.predictor = predictor.to(self.device)
        self.optimizer = torch.optim.Adam(self.predictor.parameters(), lr=self.cfg.learning_rate)
        self.state_stats = RunningMeanStd((in_dim,), self.device) if self.cfg.state_normalization else None

    def inputs(self, obs: torch.Tensor | TensorDict) -> torch.Tensor:
        """Network input ``[..., D]`` of observations ``[..., obs]``: selected, whitened and clipped."""
        state = rnd_state(obs, self.cfg.obs_keys)
        if self.state_stats is None:
            return state
        return self.state_stats.normalize(state).clamp(-STATE_CLIP, STATE_CLIP)

    def error(self, state: torch.Tensor) -> torch.Tensor:
        """Squared prediction error ``[...]`` of network inputs ``[..., D]``, summed over the embedding."""
        assert self.predictor is not None and self.target is not None
        return (self.predictor(state) - self.target(state)).square().sum(-1)

    # ------------------------------------------------------------------ the advantage stage

    @torch.no_grad()
    def intrinsic_reward(
        self, rollout: TensorDict, seed: int, env_steps: int, total_env_steps: int | None
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """``(weighted, normalized intrinsic reward [N, T], diagnostics)`` of a rollout ``[N, T+1]``.

        Merges the rollout's next observations into the input statistics (and the intrinsic returns
        into the reward statistics) first; builds the networks on the first call.
        """
        next_state = rnd_state(rollout["obs"][:, 1:], self.cfg.obs_keys)
        if self.predictor is None:
            self.build(next_state.shape[-1], seed)
        if self.state_stats is not None:
            self.state_stats.update(next_state)
        reward = self.error(self.inputs(rollout["obs"][:, 1:]))
        if self.reward_normalizer is not None:
            reward = self.reward_normalizer(reward, rollout["done"][:, :-1])
        weight = self.weight_schedule(env_steps, total_env_steps)
        reward = weight * reward
        return reward, {"intrinsic_reward_mean": float(reward.mean()), "rnd_weight": weight}

    # ------------------------------------------------------------------ the update

    def fit(self, rollout: TensorDict, epochs: Iterable[Iterable[torch.Tensor | slice]]) -> torch.Tensor:
        """Train the predictor on ``obs[:, :T]`` rows, one Adam step per minibatch; mean loss (0-dim).

        ``epochs`` yields, per epoch, the row selections of the flattened ``[N·T]`` transitions
        (the update's own minibatches). Gradients are averaged across ranks.
        """
        assert self.predictor is not None and self.optimizer is not None
        state = self.inputs(rollout["obs"][:, :-1]).flatten(0, 1)
        params = list(self.predictor.parameters())
        total, count = torch.zeros((), device=self.device), 0
        for selections in epochs:
            for idx in selections:
                loss = self.error(state[idx]).mean()
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                average_gradients(params)
                self.optimizer.step()
                total, count = total + loss.detach(), count + 1
        return total / max(count, 1)

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        """Networks, predictor optimizer and statistics (``{"in_dim": None}`` before the first rollout)."""
        if self.predictor is None:
            return {"in_dim": None}
        assert self.target is not None and self.optimizer is not None
        rewards = self.reward_normalizer
        return {
            "in_dim": self.in_dim,
            "target": self.target.state_dict(),
            "predictor": self.predictor.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "state_stats": None if self.state_stats is None else self.state_stats.state_dict(),
            "reward_normalizer": None if rewards is None else rewards.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict`` (building the networks from the stored input size)."""
        if state.get("in_dim") is None:
            return
        self.build(int(state["in_dim"]), 0)
        assert self.target is not None and self.predictor is not None and self.optimizer is not None
        self.target.load_state_dict(state["target"])
        self.predictor.load_state_dict(state["predictor"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.state_stats is not None and state.get("state_stats") is not None:
            self.state_stats.load_state_dict(state["state_stats"])
        if self.reward_normalizer is not None and state.get("reward_normalizer") is not None:
            self.reward_normalizer.load_state_dict(state["reward_normalizer"])
