"""TD3: a deterministic tanh actor, clipped double Q, target policy smoothing, delayed actor steps.

Critic target (n-step): ``ret + discount · min_k Q'_k(s', clip(μ'(s') + clip(ε, −c, c), −1, 1))``
with ``ε ~ N(0, target_policy_noise²)`` in [-1, 1] action units; actor loss ``−E[min_k Q_k(s, μ(s))]``
every ``policy_frequency``-th critic step, when the target actor and critics move too (Fujimoto et
al. 2018, arXiv:1802.09477). Collection adds ``exploration_noise`` to the squashed action.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from rlpipe.algorithms.offpolicy import Batch, OffPolicyAlgorithm
from rlpipe.algorithms.target_networks import frozen_copy
from rlpipe.config.offpolicy import TD3Cfg
from rlpipe.policies.squashed import TanhDeterministicHead

if TYPE_CHECKING:
    from rlpipe.policies.trainable import TrainablePolicy

__all__ = ["TD3", "TD3Cfg"]


class TD3(OffPolicyAlgorithm):
    """Twin delayed DDPG on the replay ring (``algorithm.name: td3``)."""

    cfg_class = TD3Cfg
    cfg: TD3Cfg
    head_class = TanhDeterministicHead
    distribution_name = "tanh_deterministic"
    name: ClassVar[str] = "td3"

    def __init__(self, cfg: TD3Cfg, policy: TrainablePolicy) -> None:
        super().__init__(cfg, policy)
        self.head.noise_std = cfg.exploration_noise
        self.actor_target: nn.Module = frozen_copy(policy.actor)
        """μ': the target actor (the policy's actor network; it reads the policy's normalized obs)."""

    @property
    def head(self) -> TanhDeterministicHead:
        """The policy's deterministic tanh head."""
        head = self.policy.head
        assert isinstance(head, TanhDeterministicHead)
        return head

    def critic_target(self, batch: Batch) -> torch.Tensor:
        """``ret + discount · min_k Q'_k(s', μ'(s') + clipped noise)`` (projected if categorical)."""
        cfg, head = self.cfg, self.head
        with self.autocast():
            out = self.actor_target(self.policy.actor_obs(batch["next_obs"]))
        squashed = torch.tanh(out.float())
        noise = torch.randn(squashed.shape, generator=self.generator, device=squashed.device)
        noise = (noise * cfg.target_policy_noise).clamp(-cfg.target_noise_clip, cfg.target_noise_clip)
        next_action = head.to_bounds((squashed + noise).clamp(-1.0, 1.0))
        return self.bootstrap(batch, next_action, torch.zeros_like(batch["ret"]))

    def actor_step(self, batch: Batch) -> dict[str, torch.Tensor]:
        """``−E[min_k Q_k(s, μ(s))]``: the deterministic actor climbs the critics."""
        with self.autocast():
            out = self.policy.actor(self.policy.actor_obs(batch["obs"]))
        action = self.head.squash(out.float())
        with self.critics_frozen():
            loss = -self.q_of(batch["obs"], action).mean()
        self.step(self.optimizer, loss, list(self.policy.parameters()))
        return {"policy_loss": loss.detach()}

    def target_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """The critics and the actor, with their targets."""
        return [*super().target_pairs(), (self.policy.actor, self.actor_target)]

    def state_dict(self) -> dict[str, Any]:
        """The shared state and the target actor."""
        return super().state_dict() | {"actor_target": self.actor_target.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        super().load_state_dict(state)
        self.actor_target.load_state_dict(state["actor_target"])
