"""The online driver: the iteration loop, its stages, events, per-rank roles, resume and stop conditions."""

from rlpipe.run.collect_one import collect_rollout
from rlpipe.run.events import Callback, EventContext, EventError, Events
from rlpipe.run.experiment import Experiment, build
from rlpipe.run.loop import OnlineRun, run, run_iteration

__all__ = ["Callback", "EventContext", "EventError", "Events", "Experiment", "OnlineRun", "build",
           "collect_rollout", "run", "run_iteration"]
