"""A policy kept outside rlpipe: actor and critic share their hidden layers (one trunk, two outputs)."""

from __future__ import annotations

import torch
from torch import nn

from rlpipe.config import PolicyCfg
from rlpipe.policies import ActionHead, ActorCritic, build_mlp


class SharedTrunkActorCritic(ActorCritic):
    """``policy.actor.network_cfg``'s hidden layers feed the actor's output layer and a value layer.

    ``actor``: ``[B, obs_dim]`` → ``[B, head.out_dim]``; ``critic``: ``[B, obs_dim]`` → ``[B, 1]``,
    both through the same trunk, so the value loss shapes the actor's features too.
    """

    @classmethod
    def from_cfg(
        cls, cfg: PolicyCfg, obs_dim: int, head: ActionHead, device: torch.device | str
    ) -> SharedTrunkActorCritic:
        """The trunk from ``policy.actor``; ``policy.critic`` is not read (the critic is one layer)."""
        net = cfg.actor.network_cfg
        trunk = build_mlp(obs_dim, net.hidden_sizes[-1], net.hidden_sizes[:-1], net.activation)
        features = nn.Sequential(trunk, nn.Tanh())
        actor = nn.Sequential(features, nn.Linear(net.hidden_sizes[-1], head.out_dim))
        critic = nn.Sequential(features, nn.Linear(net.hidden_sizes[-1], 1))
        return cls(actor=actor, critic=critic, head=head, device=device)
