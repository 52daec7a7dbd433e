"""``UpdateCfg``: the fields of the shared update loop; ``TrustRegionCfg``: a clip range and KL rules.

Optimizer, minibatching, gradient accumulation, mixed precision, learning-rate and entropy
schedules and gradient clipping work the same for every algorithm on the loop (``UpdateCfg``). The
clip range, the adaptive learning rate and target-KL early stopping are options of the algorithms
that keep each update near the collecting policy (PPO, GRPO: ``TrustRegionCfg``); an algorithm's
config class adds its loss and advantage options to one of the two. The classes live in
:mod:`rlpipe.config.algorithms` (torch-free, so params are checked before torch loads).
"""

from rlpipe.config.algorithms import SequenceCfg, TrustRegionCfg, UpdateCfg
from rlpipe.config.errors import fail
from rlpipe.config.schedules import Points

__all__ = ["Points", "SequenceCfg", "TrustRegionCfg", "UpdateCfg", "fail"]
