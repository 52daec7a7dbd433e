"""rsl_rl's ``OnPolicyRunner`` API over rlpipe: Isaac Lab and mjlab train scripts switch with one import."""

from __future__ import annotations

from rlpipe.rsl_rl.runner import OnPolicyRunner
from rlpipe.rsl_rl.train_cfg import params_from_train_cfg

__all__ = ["OnPolicyRunner", "params_from_train_cfg"]
