"""SAC: soft actor-critic with a tanh-squashed Gaussian actor and automatic entropy tuning.

Critic target (n-step, clipped double Q): ``ret + discount · (min_k Q'_k(s', a') − α log π(a'|s'))``
with ``a' ~ π(·|s')``; actor loss ``E[α log π(a|s) − min_k Q_k(s, a)]`` with ``a ~ π(·|s)``
reparameterized; with ``ent_coef: auto``, ``log α`` descends ``−log α · (log π(a|s) + target_entropy)``
(Haarnoja et al. 2018, arXiv:1812.05905). The ring, the critics and the step loop are
:class:`~rlpipe.algorithms.offpolicy.OffPolicyAlgorithm`'s.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

import gymnasium as gym
import torch

from rlpipe.algorithms.offpolicy import Batch, Obs, OffPolicyAlgorithm
from rlpipe.config.offpolicy import SACCfg
from rlpipe.policies.squashed import TanhGaussianHead

if TYPE_CHECKING:
    from rlpipe.policies.trainable import TrainablePolicy

__all__ = ["SAC", "SACCfg"]


class SAC(OffPolicyAlgorithm):
    """Soft actor-critic on the replay ring (``algorithm.name: sac``)."""

    cfg_class = SACCfg
    cfg: SACCfg
    head_class = TanhGaussianHead
    distribution_name = "tanh_gaussian"
    name: ClassVar[str] = "sac"
    actor_stats = ("policy_loss", "entropy", "ent_coef_loss")

    def __init__(self, cfg: SACCfg, policy: TrainablePolicy) -> None:
        super().__init__(cfg, policy)
        auto = cfg.ent_coef == "auto"
        start = cfg.ent_coef_init if auto else float(cfg.ent_coef)
        self.log_alpha = torch.nn.Parameter(
            torch.tensor(math.log(max(start, 1e-30)), device=self.device), requires_grad=auto
        )
        """log α: learned under ``ent_coef: auto``, else fixed (α = ``ent_coef``; 0 turns entropy off)."""
        self.alpha_zero = not auto and float(cfg.ent_coef) == 0.0
        self.alpha_optimizer = (
            self._optimizer([self.log_alpha], cfg.ent_coef_learning_rate or cfg.learning_rate)
            if auto
            else None
        )
        self.target_entropy = 0.0

    @property
    def head(self) -> TanhGaussianHead:
        """The policy's tanh-Gaussian head."""
        head = self.policy.head
        assert isinstance(head, TanhGaussianHead)
        return head

    def build_networks(self, obs_space: gym.Space, action_space: gym.Space) -> None:
        """The critics, and the entropy target: ``target_entropy`` or −(action dims)."""
        super().build_networks(obs_space, action_space)
        target = self.cfg.target_entropy
        self.target_entropy = -float(self.head.action_dim) if target == "auto" else float(target)

    @property
    def alpha(self) -> torch.Tensor:
        """α, detached (0-dim)."""
        if self.alpha_zero:
            return torch.zeros((), device=self.device)
        return self.log_alpha.detach().exp()

    def policy_sample(self, obs: Obs) -> tuple[torch.Tensor, torch.Tensor]:
        """``(a [B, A], log π(a|s) [B])``, reparameterized, drawn from the update's generator."""
        with self.autocast():
            out = self.policy.actor(self.policy.actor_obs(obs))
        return self.head.rsample(out.float(), self.generator)

    def critic_target(self, batch: Batch) -> torch.Tensor:
        """``ret + discount · (min_k Q'_k(s', a') − α log π(a'|s'))`` (projected for a categorical critic)."""
        next_action, next_log_prob = self.policy_sample(batch["next_obs"])
        return self.bootstrap(batch, next_action, -self.alpha * next_log_prob)

    def actor_step(self, batch: Batch) -> dict[str, torch.Tensor]:
        """The actor's step, then α's (``ent_coef: auto``) on the same actions' log-probabilities."""
        action, log_prob = self.policy_sample(batch["obs"])
        with self.critics_frozen():
            q = self.q_of(batch["obs"], action)
        loss = (self.alpha * log_prob - q).mean()
        self.step(self.optimizer, loss, list(self.policy.parameters()))
        stats = {"policy_loss": loss.detach(), "entropy": -log_prob.detach().mean()}
        if self.alpha_optimizer is not None:
            alpha_loss = -(self.log_alpha * (log_prob.detach() + self.target_entropy)).mean()
            self.step(self.alpha_optimizer, alpha_loss, [self.log_alpha])
            stats["ent_coef_loss"] = alpha_loss.detach()
        return stats

    def extra_metrics(self) -> dict[str, float]:
        """``ent_coef``: α after the update."""
        return {"ent_coef": float(self.alpha)}

    def state_dict(self) -> dict[str, Any]:
        """The shared state, log α and its optimizer."""
        state = super().state_dict() | {"log_alpha": self.log_alpha.detach().clone()}
        if self.alpha_optimizer is not None:
            state["alpha_optimizer"] = self.alpha_optimizer.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        super().load_state_dict(state)
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        if self.alpha_optimizer is not None:
            self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
