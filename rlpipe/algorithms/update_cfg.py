"""``UpdateCfg``: the fields of the shared update loop, accepted by every algorithm built on it.

Optimizer, minibatching, gradient accumulation, mixed precision, learning-rate and entropy
schedules, the adaptive learning rate and target-KL early stopping work the same for PPO and
GRPO; an algorithm's config class adds only its loss and advantage options. The class lives in
:mod:`rlpipe.config.algorithms` (torch-free, so params are checked before torch loads).
"""

from rlpipe.config.algorithms import UpdateCfg
from rlpipe.config.errors import fail
from rlpipe.config.schedules import Points

__all__ = ["Points", "UpdateCfg", "fail"]
