"""The update stage: the learner's epochs × minibatches on one rollout, metrics ``update/…``."""

from __future__ import annotations

from tensordict import TensorDict

from rlpipe.learner import Learner
from rlpipe.run.stages.base import Stage

__all__ = ["UpdateStage"]


class UpdateStage(Stage):
    """Multi-epoch minibatch optimization of the policy on one rollout (advantages already in it)."""

    def __init__(self, learner: Learner) -> None:
        self.learner = learner
        self.reads = tuple(learner.update_reads)

    def __call__(self, rollout: TensorDict, iteration: int, env_steps_before: int,
                 total_env_steps: int) -> dict[str, float]:
        """Update as update ``iteration``; the shuffle depends on ``(seed, iteration)`` alone."""
        return self.learner.update(rollout, iteration, env_steps_before, total_env_steps)
