"""``ActorCritic`` (PPO) and ``ActorOnly`` (GRPO): an actor MLP and action head, with or without a critic."""

from __future__ import annotations

import torch
from torch import nn
from torch.distributions import Distribution

from rlpipe.policies.heads import ActionHead
from rlpipe.policies.trainable import TrainablePolicy

__all__ = ["ActorCritic", "ActorOnly", "MLPActorPolicy"]


class MLPActorPolicy(TrainablePolicy):
    """An actor network and an action head over flat observations ``[B, obs_dim]``.

    ``actor``: ``[B, obs_dim]`` → ``[B, head.out_dim]`` (logits, Gaussian mean [and log-std], Beta α/β).
    """

    def __init__(self, actor: nn.Module, head: ActionHead, device: torch.device | str) -> None:
        super().__init__()
        self.actor, self.head = actor, head
        self.device = torch.device(device)

    def distribution(self, obs: torch.Tensor) -> Distribution:
        """π(·|obs)."""
        return self.head.distribution(self.actor(self.actor_obs(obs)))

    def deterministic_action(self, dist: Distribution) -> torch.Tensor:
        """The head's mode: argmax, Gaussian mean or the Beta's mapped mode."""
        return self.head.mode(dist)

    def sample(self, obs: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """``(action [B, *act], log_prob [B])`` through the head's fast path (no distribution object)."""
        return self.head.sample(self.actor(self.actor_obs(obs)), deterministic)

    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """The action ``[B, *act]`` alone: the mode skips the log-probability, which an eval never reads."""
        return self.head.act(self.actor(self.actor_obs(obs)), deterministic)

    def evaluate(
        self, obs: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log_prob [B], entropy [B], value [B])`` of given actions through the head's fast path."""
        log_prob, entropy = self.head.evaluate(self.actor(self.actor_obs(obs)), action)
        return log_prob, entropy, self.value(obs)


class ActorCritic(MLPActorPolicy):
    """Separate actor and critic networks; ``critic``: ``[B, obs_dim]`` → ``[B, 1]``."""

    def __init__(
        self, actor: nn.Module, critic: nn.Module, head: ActionHead, device: torch.device | str
    ) -> None:
        super().__init__(actor, head, device)
        self.critic = critic
        self.to(self.device)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V(obs) ``[B]``."""
        return self.critic(self.critic_obs(obs)).squeeze(-1)


class ActorOnly(MLPActorPolicy):
    """Actor without a critic, for GRPO: ``value`` is identically zero (no network, no memory)."""

    has_critic = False

    def __init__(self, actor: nn.Module, head: ActionHead, device: torch.device | str) -> None:
        super().__init__(actor, head, device)
        self.to(self.device)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Zeros ``[B]``: GRPO needs no critic."""
        return torch.zeros(obs.shape[0], device=obs.device)
