"""Algorithms: GAE, PPO, GRPO and distillation on one shared update loop, schedules, statistics, building."""

from rlpipe.algorithms.base import BaseAlgorithm, minibatch_indices
from rlpipe.algorithms.distillation import Distillation, DistillationCfg
from rlpipe.algorithms.factory import (
    algo_class,
    build_algo,
    get_registered_algo_names,
    register_algo,
    resolve_algo_cfg,
)
from rlpipe.algorithms.gae import compute_gae, generalized_advantage_estimate
from rlpipe.algorithms.grpo import GRPO, GRPOCfg
from rlpipe.algorithms.normalization import RewardNormalizer, RunningMeanStd
from rlpipe.algorithms.optim import build_optimizer
from rlpipe.algorithms.ppo import PPO, PPOCfg
from rlpipe.algorithms.schedules import Schedule, schedule_value
from rlpipe.algorithms.sequences import flatten_transitions
from rlpipe.algorithms.update_cfg import SequenceCfg, TrustRegionCfg, UpdateCfg

__all__ = [
    "GRPO",
    "PPO",
    "BaseAlgorithm",
    "Distillation",
    "DistillationCfg",
    "GRPOCfg",
    "PPOCfg",
    "RewardNormalizer",
    "RunningMeanStd",
    "Schedule",
    "SequenceCfg",
    "TrustRegionCfg",
    "UpdateCfg",
    "algo_class",
    "build_algo",
    "build_optimizer",
    "compute_gae",
    "flatten_transitions",
    "generalized_advantage_estimate",
    "get_registered_algo_names",
    "minibatch_indices",
    "register_algo",
    "resolve_algo_cfg",
    "schedule_value",
]
