"""The advantage stage: pure tensor maths on the rollout (no network), delegated to the algorithm."""

from __future__ import annotations

from tensordict import TensorDict

from rlpipe.algorithms import BaseAlgorithm
from rlpipe.stages.base import Stage

__all__ = ["AdvantageStage"]


class AdvantageStage(Stage):
    """GAE for PPO, group-normalized step returns for GRPO: whatever ``algo.compute_advantages`` writes."""

    def __init__(self, algo: BaseAlgorithm) -> None:
        self.algo = algo
        self.reads = ("reward", "done", "value")
        self.writes = tuple(algo.advantage_keys)

    def __call__(self, rollout: TensorDict) -> dict[str, float]:
        """Write the advantage keys into ``rollout``; return diagnostics."""
        return {f"advantage/{k}": v for k, v in self.algo.compute_advantages(rollout).items()}
