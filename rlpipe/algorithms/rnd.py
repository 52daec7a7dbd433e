"""Random network distillation curiosity (Burda et al. 2018, arXiv:1810.12894), added to PPO.

A target network with fixed random weights and a predictor network read the same observations
(``obs_keys`` of a dict observation, concatenated; a flat observation as it is). The predictor learns
to match the target on the states the agent visits, so its error stays high on novel states:

    r_int[:, t] = ‖predictor(s_{t+1}) − target(s_{t+1})‖²          (the next observation of step t)

normalized by the std of its discounted return — running over the whole run (the paper), or of the
current rollout alone (``reward_normalization: rollout``). After an auto-reset ``obs[:, t+1]`` is the
next episode's first observation, so a done step's novelty is that state's. Two ways to use it:

* one value head (rsl_rl, the default): the weighted ``r_int`` is added to the extrinsic reward
  before GAE, and the policy's critic learns the sum (episodic: ``done`` cuts it);
* ``intrinsic_critic`` (the paper): a separate value network V_int, trained here on the update's
  minibatches, learns the intrinsic return alone — non-episodic unless ``episodic``, so novelty
  beyond an episode's end still counts — and the advantages are combined after two GAEs:
  A = extrinsic_coef·A_ext + weight·A_int (the policy's critic learns the extrinsic return).

The networks' input is whitened with running mean/std clipped to ±5 (``state_normalization``); the
statistics merge each rollout's ``obs[:, 1:]`` before its rewards are computed. The networks are built
at first use from the observation size, from their own seed (the global RNG is untouched), and
their weights, both Adam states and both running statistics are in ``state_dict``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import gymnasium as gym
import torch
from tensordict import TensorDict
from torch import nn

from rlpipe import fast
from rlpipe.algorithms.gae import generalized_advantage_estimate
from rlpipe.algorithms.normalization import RewardNormalizer, RunningMeanStd
from rlpipe.algorithms.schedules import Schedule
from rlpipe.config import ConfigError
from rlpipe.config.rnd import RNDCfg
from rlpipe.runtime.distributed import average_gradients

__all__ = ["INTRINSIC_RETURN", "RND", "RNDCfg", "RolloutRewardNormalizer", "mlp", "rnd_state"]

INTRINSIC_RETURN = "intrinsic_return"
"""Rollout key ``[N, T+1]`` of V_int's targets (``intrinsic_critic``; padding slot zero)."""
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


class RolloutRewardNormalizer(RewardNormalizer):
    """Divide rewards ``[N, T]`` by the std of this rollout's discounted returns (``[N]`` carried across).

    :class:`RewardNormalizer`'s running variance remembers every rollout. When the predictor learns
    the visited states within a few updates (low-dimensional or one-hot states), the novelty of the
    first rollouts, orders of magnitude above the later one, sets that variance for the rest of the
    run and the normalized intrinsic reward fades to nothing; this one forgets it.
    """

    def __call__(self, reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """Scaled copy of ``reward`` ``[N, T]``: statistics of this call's returns only."""
        self.stats = RunningMeanStd((), self.device)
        return super().__call__(reward, done)


class RND:
    """Target, predictor, the optional V_int, their optimizers and statistics, over ``[N, T+1]`` rollouts."""

    def __init__(self, cfg: RNDCfg, device: torch.device) -> None:
        self.cfg, self.device = cfg, torch.device(device)
        self.weight_schedule = Schedule.of(
            cfg.weight_schedule_kind, cfg.weight, cfg.weight_schedule, cfg.weight_final
        )
        normalizers = {"running": RewardNormalizer, "rollout": RolloutRewardNormalizer}
        normalizer = normalizers.get(cfg.reward_normalization)
        self.reward_normalizer = normalizer(cfg.gamma, self.device) if normalizer is not None else None
        self.episodic = cfg.episodic if cfg.episodic is not None else not cfg.intrinsic_critic
        """Whether ``done`` cuts the intrinsic return (its GAE and the normalizer's discounted return)."""
        self.in_dim: int | None = None
        self.target: nn.Module | None = None
        self.predictor: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.critic: nn.Module | None = None
        """V_int: network input ``[B, D]`` → ``[B, 1]`` (``intrinsic_critic``; else ``None``)."""
        self.critic_optimizer: torch.optim.Optimizer | None = None
        self.state_stats: RunningMeanStd | None = None
        self.losses_step: Callable[..., dict[str, torch.Tensor]] = self.losses
        """What :meth:`step` computes its losses with: :meth:`losses`, or its compiled form
        (``trainer.compile``)."""

    def check_observations(self, obs_space: gym.Space) -> None:
        """``ConfigError`` naming ``algorithm.cfg.rnd.obs_keys`` unless it picks groups of ``obs_space``.

        Flat observations take no keys; a dict observation takes distinct keys it has (``null``: all).
        """
        keys, where = self.cfg.obs_keys, "algorithm.cfg.rnd.obs_keys"
        if keys is None:
            return
        if not isinstance(obs_space, gym.spaces.Dict):
            raise ConfigError(
                f"{where}: the env's observations are flat, not a dict of groups; remove obs_keys"
            )
        available = ", ".join(sorted(obs_space.spaces))
        unknown = [key for key in keys if key not in obs_space.spaces]
        if unknown:
            raise ConfigError(
                f"{where}: the env has no observation group {unknown[0]!r}; accepted: {available}"
            )
        if not keys or len(set(keys)) != len(keys):
            raise ConfigError(f"{where}: needs distinct groups (got {list(keys)}); accepted: {available}")

    # ------------------------------------------------------------------ networks

    def build(self, in_dim: int, seed: int) -> None:
        """Create the networks for ``in_dim`` inputs, drawn from ``seed`` (no effect on the global RNG)."""
        cfg = self.cfg
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed + TARGET_SEED_OFFSET)
            target = mlp(in_dim, cfg.hidden_sizes, cfg.embedding_dim)
            predictor = mlp(in_dim, cfg.hidden_sizes, cfg.embedding_dim)
            critic = mlp(in_dim, cfg.critic_hidden_sizes, 1) if cfg.intrinsic_critic else None
        self.in_dim = in_dim
        self.target = target.to(self.device).requires_grad_(False).eval()
        self.predictor = predictor.to(self.device)
        self.optimizer = torch.optim.Adam(self.predictor.parameters(), lr=cfg.learning_rate)
        if critic is not None:
            self.critic = critic.to(self.device)
            self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=cfg.critic_learning_rate)
        self.state_stats = RunningMeanStd((in_dim,), self.device) if cfg.state_normalization else None

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

    def value(self, state: torch.Tensor) -> torch.Tensor:
        """V_int ``[...]`` of network inputs ``[..., D]``."""
        assert self.critic is not None
        return self.critic(state).squeeze(-1)

    # ------------------------------------------------------------------ the advantage stage

    @torch.no_grad()
    def novelty(self, rollout: TensorDict, seed: int) -> torch.Tensor:
        """Normalized, unweighted intrinsic reward ``[N, T]`` of a rollout ``[N, T+1]``.

        Merges the rollout's next observations into the input statistics (and the intrinsic returns
        into the reward statistics, cut at ``done`` only when ``episodic``) first; builds the networks
        on the first call.
        """
        next_state = rnd_state(rollout["obs"][:, 1:], self.cfg.obs_keys)
        if self.predictor is None:
            self.build(next_state.shape[-1], seed)
        if self.state_stats is not None:
            self.state_stats.update(next_state)
        reward = self.error(self.inputs(rollout["obs"][:, 1:]))
        if self.reward_normalizer is not None:
            done = rollout["done"][:, :-1]
            reward = self.reward_normalizer(reward, done if self.episodic else torch.zeros_like(done))
        return reward

    def weight(self, env_steps: int, total_env_steps: int | None) -> float:
        """The intrinsic weight (reward weight, or A_int's coefficient) at ``env_steps``."""
        return self.weight_schedule(env_steps, total_env_steps)

    def intrinsic_reward(
        self, rollout: TensorDict, seed: int, env_steps: int, total_env_steps: int | None
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """``(weighted, normalized intrinsic reward [N, T], diagnostics)`` of a rollout ``[N, T+1]``."""
        weight = self.weight(env_steps, total_env_steps)
        reward = weight * self.novelty(rollout, seed)
        return reward, {"intrinsic_reward_mean": float(reward.mean()), "rnd_weight": weight}

    @torch.no_grad()
    def intrinsic_advantage(
        self, rollout: TensorDict, seed: int, env_steps: int, total_env_steps: int | None, gae_lambda: float
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
        """``(weight·A_int [N, T], intrinsic return [N, T], diagnostics)``: GAE of the novelty with V_int.

        Non-episodic (``episodic`` off): no ``done`` cuts the trace, V_int(obs[:, t+1]) is always the
        bootstrap — after a reset that of the next episode's first state. Episodic: ``done`` cuts it,
        and a time-limit truncation bootstraps with V_int of the truncated step's own state.
        """
        reward = self.novelty(rollout, seed)
        value = self.value(self.inputs(rollout["obs"]))
        done = rollout["done"][:, :-1]
        truncation_value = torch.zeros_like(reward)
        if self.episodic:
            cut = rollout["truncated"][:, :-1] & ~rollout["terminated"][:, :-1]
            truncation_value = value[:, :-1] * cut
        else:
            done = torch.zeros_like(done)
        advantage, returns = generalized_advantage_estimate(
            reward, value[:, :-1], value[:, 1:], done, truncation_value, self.cfg.gamma, gae_lambda
        )
        weight = self.weight(env_steps, total_env_steps)
        stats = {
            "intrinsic_reward_mean": float(reward.mean()),
            "rnd_weight": weight,
            "intrinsic_value_mean": float(value.mean()),
        }
        return weight * advantage, returns, stats

    # ------------------------------------------------------------------ the update

    def step(self, obs: torch.Tensor | TensorDict, returns: torch.Tensor | None) -> dict[str, torch.Tensor]:
        """One Adam step of the predictor (and V_int) on a minibatch of transitions' observations.

        ``obs`` ``[B, *obs]`` are the update's minibatch rows (``obs[:, :T]`` of the rollout), so the
        networks train on the update's own minibatches; V_int regresses ``returns`` ``[B]`` (the
        ``INTRINSIC_RETURN`` rows; ``None`` without ``intrinsic_critic``). Gradients are averaged
        across ranks. Returns the detached losses (0-dim): ``rnd_loss`` [, ``intrinsic_value_loss``].
        """
        assert self.predictor is not None and self.optimizer is not None
        losses = self.losses_step(obs, returns)
        nets = [(self.predictor, self.optimizer)]
        if self.critic is not None and self.critic_optimizer is not None and returns is not None:
            nets.append((self.critic, self.critic_optimizer))
        for (net, optimizer), loss in zip(nets, losses.values()):
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            average_gradients(list(net.parameters()))
            fast.optimizer_step(optimizer)
        return {name: loss.detach() for name, loss in losses.items()}

    def losses(self, obs: torch.Tensor | TensorDict, returns: torch.Tensor | None) -> dict[str, torch.Tensor]:
        """The 0-dim losses on observations ``[B, *obs]``: ``rnd_loss`` [, ``intrinsic_value_loss``].

        ``intrinsic_value_loss`` (V_int's mean squared error against ``returns`` ``[B]``) only with
        ``intrinsic_critic`` and ``returns``.
        """
        state = self.inputs(obs.unsqueeze(1)).squeeze(1)  # rows as one-step sequences [B, 1, D]
        losses = {"rnd_loss": self.error(state).mean()}
        if self.critic is not None and returns is not None:
            losses["intrinsic_value_loss"] = (self.value(state) - returns).pow(2).mean()
        return losses

    def fit(
        self, rollout: TensorDict, epochs: Iterable[Iterable[torch.Tensor | slice]]
    ) -> dict[str, torch.Tensor]:
        """:meth:`step` on each row selection of ``epochs`` of the rollout's ``[N·T]`` transitions.

        For training the networks on a rollout apart from an update; returns the mean losses (0-dim).
        """
        obs = rollout["obs"][:, :-1].flatten(0, 1)
        returns = rollout[INTRINSIC_RETURN][:, :-1].flatten() if self.critic is not None else None
        totals: dict[str, torch.Tensor] = {}
        count = 0
        for selections in epochs:
            for idx in selections:
                losses = self.step(obs[idx], None if returns is None else returns[idx])
                totals = {name: totals.get(name, 0) + loss for name, loss in losses.items()}
                count += 1
        return {name: total / max(count, 1) for name, total in totals.items()}

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        """Networks, optimizers and statistics (``{"in_dim": None}`` before the first rollout)."""
        if self.predictor is None:
            return {"in_dim": None}
        assert self.target is not None and self.optimizer is not None
        rewards, critic = self.reward_normalizer, self.critic
        state = {
            "in_dim": self.in_dim,
            "target": self.target.state_dict(),
            "predictor": self.predictor.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "state_stats": None if self.state_stats is None else self.state_stats.state_dict(),
            "reward_normalizer": None if rewards is None else rewards.state_dict(),
        }
        if critic is not None and self.critic_optimizer is not None:
            state |= {"critic": critic.state_dict(), "critic_optimizer": self.critic_optimizer.state_dict()}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict`` (building the networks from the stored input size)."""
        if state.get("in_dim") is None:
            return
        self.build(int(state["in_dim"]), 0)
        assert self.target is not None and self.predictor is not None and self.optimizer is not None
        self.target.load_state_dict(state["target"])
        self.predictor.load_state_dict(state["predictor"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.critic is not None and self.critic_optimizer is not None and "critic" in state:
            self.critic.load_state_dict(state["critic"])
            self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        if self.state_stats is not None and state.get("state_stats") is not None:
            self.state_stats.load_state_dict(state["state_stats"])
        if self.reward_normalizer is not None and state.get("reward_normalizer") is not None:
            self.reward_normalizer.load_state_dict(state["reward_normalizer"])
