"""Algorithms: GAE, PPO, GRPO and distillation on one shared update loop; SAC and TD3 on a replay ring."""

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
from rlpipe.algorithms.offpolicy import OffPolicyAlgorithm
from rlpipe.algorithms.optim import build_optimizer
from rlpipe.algorithms.ppo import PPO, PPOCfg
from rlpipe.algorithms.sac import SAC, SACCfg
from rlpipe.algorithms.schedules import Schedule, schedule_value
from rlpipe.algorithms.sequences import flatten_transitions
from rlpipe.algorithms.td3 import TD3, TD3Cfg
from rlpipe.algorithms.update_cfg import SequenceCfg, TrustRegionCfg, UpdateCfg

__all__ = [
    "GRPO",
    "PPO",
    "SAC",
    "TD3",
    "BaseAlgorithm",
    "Distillation",
    "DistillationCfg",
    "GRPOCfg",
    "OffPolicyAlgorithm",
    "PPOCfg",
    "RewardNormalizer",
    "RunningMeanStd",
    "SACCfg",
    "Schedule",
    "SequenceCfg",
    "TD3Cfg",
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
