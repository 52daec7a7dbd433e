"""The stages of one iteration: collect, advantage, update, checkpoint (evaluation: ``rlpipe.evaluation``)."""

from rlpipe.run.stages.advantage import AdvantageStage
from rlpipe.run.stages.base import Stage, check_key_flow
from rlpipe.run.stages.checkpoint import Checkpointer
from rlpipe.run.stages.collect import Collector
from rlpipe.run.stages.update import UpdateStage

__all__ = ["AdvantageStage", "Checkpointer", "Collector", "Stage", "UpdateStage", "check_key_flow"]
