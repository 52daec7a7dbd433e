"""The online driver: the iteration loop, its stages, per-rank roles, resume and stop conditions."""

from rlpipe.run.collect_one import collect_rollout
from rlpipe.run.experiment import Experiment, build
from rlpipe.run.loop import run, run_iteration

__all__ = ["Experiment", "build", "collect_rollout", "run", "run_iteration"]
