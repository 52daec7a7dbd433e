"""The update loop's two KL rules, read after every minibatch from its ``approx_kl`` stat.

* target-KL early stopping: the update stops before stepping the first minibatch whose KL passes
  ``1.5 × target_kl`` (SB3's and rl8's margin);
* the KL-adaptive learning rate (rsl_rl, ``schedule: adaptive``): lr / 1.5 after a minibatch whose
  KL passed ``2 × desired_kl``, lr · 1.5 after one under ``desired_kl / 2``, within
  ``[min_lr, max_lr]``.

Both rules are pure functions of host floats, tested on their own; :class:`KLRules` applies them
to the KL averaged over the ranks (:meth:`KLRules.global_mean`), so every rank of a distributed run
adapts its learning rate and stops identically. The loop applies them for every algorithm whose
config is a ``TrustRegionCfg`` (PPO, GRPO); another algorithm's config turns none on.
"""

from __future__ import annotations

import torch

from rlpipe.algorithms.optim import learning_rate, set_learning_rate
from rlpipe.algorithms.update_cfg import TrustRegionCfg, UpdateCfg
from rlpipe.runtime.distributed import all_reduce_sum, world_size

__all__ = ["ADAPTIVE_LR_FACTOR", "EARLY_STOP_FACTOR", "KLRules", "adaptive_lr", "kl_exceeds_target"]

EARLY_STOP_FACTOR = 1.5
"""Stop once the KL passes this multiple of ``target_kl`` (SB3's and rl8's margin)."""
ADAPTIVE_LR_FACTOR = 1.5
"""rsl_rl's step of the adaptive learning rate (divide or multiply)."""


class KLRules:
    """The KL rules a ``TrustRegionCfg`` turns on, applied after each minibatch to ``optimizer``'s lr."""

    def __init__(self, cfg: UpdateCfg, optimizer: torch.optim.Optimizer, device: torch.device) -> None:
        self.cfg = cfg
        self.optimizer = optimizer
        self.device = device

    def global_mean(self, t: torch.Tensor, weight: float = 1.0) -> torch.Tensor:
        """Mean of ``t`` over the ranks (each weighted by ``weight``); identity in a single process.

        The one place the KL rules read their value: a distributed run all-reduces here so every
        rank stops early and adapts its learning rate identically. A rank without this minibatch
        passes weight 0.
        """
        if world_size() == 1:
            return t
        pair = torch.stack([t.detach().float() * weight, torch.tensor(weight, device=t.device)])
        total = all_reduce_sum(pair)
        return total[0] / total[1]

    def stop_after(self, kl: torch.Tensor | None) -> bool:
        """Adapt the learning rate to this minibatch's KL; true when the update must stop before its step.

        Reads the KL on the host (one sync per minibatch) only when ``target_kl`` or the adaptive
        schedule is on. ``kl=None``: this rank has no such minibatch (it still joins the mean).
        """
        cfg = self.cfg
        if not (cfg.reads_kl and isinstance(cfg, TrustRegionCfg)):
            return False
        if kl is None:
            kl_value = float(self.global_mean(torch.zeros((), device=self.device), 0.0))
        else:
            kl_value = float(self.global_mean(kl))
        if cfg.schedule == "adaptive":
            assert cfg.desired_kl is not None  # guaranteed by TrustRegionCfg
            lr = adaptive_lr(learning_rate(self.optimizer), kl_value, cfg.desired_kl, cfg.min_lr, cfg.max_lr)
            set_learning_rate(self.optimizer, lr)
        return cfg.target_kl is not None and kl_exceeds_target(kl_value, cfg.target_kl)


def kl_exceeds_target(kl: float, target_kl: float) -> bool:
    """Early stopping: true once the KL passes ``1.5 × target_kl``."""
    return kl > EARLY_STOP_FACTOR * target_kl


def adaptive_lr(lr: float, kl: float, desired_kl: float, min_lr: float, max_lr: float) -> float:
    """rsl_rl's KL-adaptive learning rate: the next lr after a minibatch whose KL was ``kl``.

    KL > 2·desired → lr / 1.5 (not below ``min_lr``); 0 < KL < desired / 2 → lr · 1.5 (not above
    ``max_lr``); otherwise unchanged.
    """
    if kl > 2.0 * desired_kl:
        return max(min_lr, lr / ADAPTIVE_LR_FACTOR)
    if 0.0 < kl < desired_kl / 2.0:
        return min(max_lr, lr * ADAPTIVE_LR_FACTOR)
    return lr
