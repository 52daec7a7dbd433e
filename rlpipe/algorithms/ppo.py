"""PPO with GAE over ``[N, T+1]`` rollouts: the seed's ``PPO`` and ``PPOCfg``."""

from __future__ import annotations

from typing import Any

import torch
from pydantic import Field
from tensordict import TensorDict

from rlpipe.algorithms.base import BaseAlgorithm, flatten_transitions, minibatch_indices
from rlpipe.algorithms.gae import compute_gae
from rlpipe.algorithms.ppo_loss import (
    approx_kl,
    clip_fraction,
    clipped_surrogate,
    explained_variance,
    normalize,
    value_mse,
)
from rlpipe.algorithms.registry import register_algo
from rlpipe.config import AlgorithmCfg

__all__ = ["PPO", "PPOCfg"]

UPDATE_KEYS = ("obs", "action", "sample_log_prob", "advantage", "return", "value")
STAT_NAMES = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")


class PPOCfg(AlgorithmCfg):
    """Configuration for the PPO algorithm (the seed's fields and defaults)."""

    n_epochs: int = Field(10, ge=1)
    """Passes over the rollout per update."""
    clip_coef: float = Field(0.2, gt=0)
    """Surrogate clip range ε."""
    ent_coef: float = Field(0.01, ge=0)
    """Entropy bonus weight."""
    vf_coef: float = Field(0.5, ge=0)
    """Value loss weight."""
    normalize_advantage: bool = True
    """Normalize advantages over the whole batch before the epochs."""


@register_algo("ppo")
class PPO(BaseAlgorithm):
    """Clipped-surrogate PPO: GAE, then ``n_epochs`` × shuffled minibatches, one Adam step each."""

    cfg_class = PPOCfg
    cfg: PPOCfg

    def __init__(self, cfg: PPOCfg, policy: Any) -> None:
        super().__init__(cfg, policy)
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=cfg.learning_rate)

    def compute_advantages(self, rollout: TensorDict) -> dict[str, float]:
        """GAE into ``advantage`` and ``return`` (``[N, T+1]``, padding slot zero)."""
        advantage, returns = compute_gae(rollout, self.cfg.gamma, self.cfg.gae_lambda)
        for key, value in (("advantage", advantage), ("return", returns)):
            padded = torch.zeros_like(rollout["value"])
            padded[:, :-1] = value
            rollout.set(key, padded)
        return {}

    def update(self, rollout: TensorDict) -> dict[str, float]:
        """Multi-epoch minibatch optimization; returns means over every minibatch step."""
        if "advantage" not in rollout.keys():
            self.compute_advantages(rollout)
        batch = flatten_transitions(rollout, UPDATE_KEYS)
        if self.cfg.normalize_advantage:
            batch["advantage"] = normalize(batch["advantage"])
        totals = torch.zeros(len(STAT_NAMES), device=self.device)
        steps = 0
        for _ in range(self.cfg.n_epochs):
            for idx in minibatch_indices(len(batch["obs"]), self.cfg.batch_size, self.device,
                                         self.generator):
                totals += self._minibatch_step({k: v[idx] for k, v in batch.items()})
                steps += 1
        stats = dict(zip(STAT_NAMES, (totals / steps).tolist()))
        stats["explained_variance"] = float(explained_variance(batch["value"], batch["return"]))
        stats["learning_rate"] = self.optimizer.param_groups[0]["lr"]
        return stats

    def loss(self, mb: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(total loss, detached stats [len(STAT_NAMES)])`` of one minibatch."""
        log_prob, entropy, value = self.policy.evaluate(mb["obs"], mb["action"])
        policy_loss, log_ratio = clipped_surrogate(
            log_prob, mb["sample_log_prob"], mb["advantage"], self.cfg.clip_coef
        )
        value_loss = value_mse(value, mb["return"])
        entropy_mean = entropy.mean()
        total = policy_loss + self.cfg.vf_coef * value_loss - self.cfg.ent_coef * entropy_mean
        with torch.no_grad():
            stats = torch.stack([
                policy_loss, value_loss, entropy_mean,
                approx_kl(log_ratio), clip_fraction(log_ratio, self.cfg.clip_coef),
            ])
        return total, stats

    def _minibatch_step(self, mb: dict[str, torch.Tensor]) -> torch.Tensor:
        total, stats = self.loss(mb)
        self.optimizer.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.cfg.max_grad_norm)
        self.optimizer.step()
        return stats

    def state_dict(self) -> dict[str, Any]:
        """Optimizer state."""
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the optimizer."""
        self.optimizer.load_state_dict(state["optimizer"])
