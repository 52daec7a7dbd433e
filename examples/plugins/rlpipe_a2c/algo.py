"""A2C (Mnih et al. 2016, synchronous): one gradient step per rollout on the policy-gradient loss.

Its config class holds what it uses: the shared loop's options (``UpdateCfg``: optimizer, schedules,
epochs, minibatches, precision, gradient clip) and its own loss weights; no clip range, no KL rules.
"""

from __future__ import annotations

import torch
from pydantic import Field
from tensordict import TensorDict

from rlpipe.algorithms import BaseAlgorithm, UpdateCfg, flatten_transitions
from rlpipe.algorithms.gae import generalized_advantage_estimate, truncation_bootstrap


class A2CCfg(UpdateCfg):
    """A2C's hyperparameters: one epoch over the whole rollout as one minibatch by default."""

    learning_rate: float = Field(default=7.0e-4, gt=0)
    """RMSprop's learning rate (SB3's default)."""
    n_epochs: int = Field(default=1, ge=1)
    """Passes over the rollout per update: A2C makes one."""
    num_mini_batches: int | None = Field(default=1, ge=1)
    """Minibatches per epoch: the whole rollout is one batch."""
    gae_lambda: float = Field(default=1.0, ge=0, le=1)
    """1.0: n-step returns bootstrapped from the last value, as A2C."""
    vf_coef: float = Field(default=0.5, ge=0)
    """Weight of the value loss."""
    normalize_advantage: bool = False
    """Normalize the advantages over the rollout before the loss."""


class A2C(BaseAlgorithm):
    """Advantage actor-critic on the shared update loop: GAE advantages, then ``minibatch_loss``."""

    cfg_class = A2CCfg
    cfg: A2CCfg
    advantage_reads = ("reward", "done", "value", "truncated", "terminated", "final_value")
    update_reads = ("obs", "action", "sample_log_prob", "advantage", "return")
    chunkable = True

    def compute_advantages(self, rollout: TensorDict) -> dict[str, float]:
        """GAE into ``advantage`` and ``return`` ``[N, T+1]`` (slot T zero)."""
        value = rollout["value"].float()
        advantage, returns = generalized_advantage_estimate(
            rollout["reward"][:, :-1].float(),
            value[:, :-1],
            value[:, 1:],
            rollout["done"][:, :-1],
            truncation_bootstrap(rollout).float(),
            self.cfg.gamma,
            self.cfg.gae_lambda,
        )
        for key, tensor in (("advantage", advantage), ("return", returns)):
            padded = torch.zeros_like(value)
            padded[:, :-1] = tensor
            rollout.set(key, padded)
        return {}

    def update_batch(self, rollout: TensorDict) -> TensorDict:
        """Every transition ``[N·T]``; the advantages normalized over them when asked."""
        batch = flatten_transitions(rollout, self.update_reads)
        if self.cfg.normalize_advantage:
            adv = batch["advantage"]
            batch["advantage"] = (adv - adv.mean()) / (adv.std() + 1e-8)
        return TensorDict(batch, batch_size=[batch["obs"].shape[0]])

    def minibatch_loss(self, mb: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``-A·log π + vf_coef·(V - R)² - ent_coef·H``, means over the rows; ``approx_kl`` for the loop."""
        with self.autocast():
            log_prob, entropy, value = self.policy.evaluate(mb["obs"], mb["action"])
        log_prob, entropy, value = log_prob.float(), entropy.float(), value.float()
        policy_loss = -(mb["advantage"] * log_prob).mean()
        value_loss = (value - mb["return"]).pow(2).mean()
        entropy_mean = entropy.mean()
        total = policy_loss + self.cfg.vf_coef * value_loss - self.ent_coef * entropy_mean
        log_ratio = (log_prob - mb["sample_log_prob"]).detach()
        stats = {
            "policy_loss": policy_loss.detach(),
            "value_loss": value_loss.detach(),
            "entropy": entropy_mean.detach(),
            "approx_kl": ((log_ratio.exp() - 1) - log_ratio).mean(),
        }
        return total, stats
