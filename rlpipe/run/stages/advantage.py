"""The advantage stage: pure tensor maths on the rollout (no network), delegated to the learner."""

from __future__ import annotations

from tensordict import TensorDict

from rlpipe.learner import Learner
from rlpipe.run.stages.base import Stage

__all__ = ["AdvantageStage"]


class AdvantageStage(Stage):
    """GAE for PPO, group-normalized step returns for GRPO: whatever the algorithm's advantage writes."""

    def __init__(self, learner: Learner) -> None:
        self.learner = learner
        self.reads = tuple(learner.advantage_reads)
        self.writes = tuple(learner.advantage_keys)

    def __call__(self, rollout: TensorDict) -> dict[str, float]:
        """Write the advantage keys into ``rollout``; return ``advantage/…`` diagnostics."""
        return self.learner.compute_advantages(rollout)
