"""The update stage: ``algo.update(rollout)``, metrics namespaced ``update/…``."""

from __future__ import annotations

from tensordict import TensorDict

from rlpipe.algorithms import BaseAlgorithm
from rlpipe.stages.base import Stage

__all__ = ["UpdateStage", "update_seed"]


def update_seed(seed: int, iteration: int) -> int:
    """Seed of iteration ``iteration``'s minibatch shuffle."""
    return (seed * 1_000_003 + iteration) % 2**63


class UpdateStage(Stage):
    """Multi-epoch minibatch optimization of the policy on one rollout."""

    def __init__(self, algo: BaseAlgorithm, seed: int) -> None:
        self.algo, self.seed = algo, seed
        self.reads = ("obs", "action", "sample_log_prob", *algo.advantage_keys)

    def __call__(self, rollout: TensorDict, iteration: int) -> dict[str, float]:
        """Update; return ``update/<name>`` diagnostics.

        The minibatch shuffle is seeded from ``(seed, iteration)`` alone, so an offline replay of
        this rollout from the same weights reproduces the update exactly. Observation statistics
        (``policy.obs_normalization``) merge this rollout's ``obs[:, :T]`` after the update, so the
        update saw the statistics the rollout was collected with.
        """
        self.algo.reseed(update_seed(self.seed, iteration))
        self.algo.policy.train()
        metrics = {f"update/{k}": v for k, v in self.algo.update(rollout).items()}
        update_normalization = getattr(self.algo.policy, "update_normalization", None)
        if update_normalization is not None:
            update_normalization(rollout["obs"][:, :-1])
        return metrics
