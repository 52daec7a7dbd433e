"""The stages of one iteration: collect, advantage, update, evaluate, checkpoint."""

from rlpipe.stages.advantage import AdvantageStage
from rlpipe.stages.base import Stage, check_key_flow
from rlpipe.stages.checkpoint import Checkpointer
from rlpipe.stages.collect import Collector
from rlpipe.stages.evaluate import Evaluator
from rlpipe.stages.update import UpdateStage, update_seed

__all__ = [
    "AdvantageStage",
    "Checkpointer",
    "Collector",
    "Evaluator",
    "Stage",
    "UpdateStage",
    "check_key_flow",
    "update_seed",
]
