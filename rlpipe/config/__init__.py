"""Typed experiment config: the section classes, loading with one-line errors, and hashes."""

from rlpipe.config.algorithm_block import AlgorithmBlock, replay_algorithm
from rlpipe.config.algorithms import AlgorithmCfg, GRPOCfg, PPOCfg, TrustRegionCfg, UpdateCfg
from rlpipe.config.errors import ConfigError, format_validation_error
from rlpipe.config.hashing import NOT_TRAINING, params_hash, training_diff, training_hash, training_params
from rlpipe.config.identity import check_exp_name
from rlpipe.config.loading import apply_overrides, load, read_params
from rlpipe.config.registry import algorithm_names, describing, register_algorithm
from rlpipe.config.sections import (
    CheckpointCfg,
    CNNCfg,
    EnvCfg,
    EvalCfg,
    EventCfg,
    EventsCfg,
    MLPCfg,
    NetworkBlock,
    PolicyCfg,
    RecurrentCfg,
    ReplayCfg,
    RunConfig,
    StopConditionCfg,
    StoreCfg,
    TrackingCfg,
    TrainerCfg,
    merged_replay_policy,
)

__all__ = [
    "NOT_TRAINING",
    "AlgorithmBlock",
    "AlgorithmCfg",
    "CheckpointCfg",
    "CNNCfg",
    "ConfigError",
    "EnvCfg",
    "EvalCfg",
    "EventCfg",
    "EventsCfg",
    "GRPOCfg",
    "MLPCfg",
    "NetworkBlock",
    "PPOCfg",
    "PolicyCfg",
    "RecurrentCfg",
    "ReplayCfg",
    "RunConfig",
    "StopConditionCfg",
    "StoreCfg",
    "TrackingCfg",
    "TrainerCfg",
    "TrustRegionCfg",
    "UpdateCfg",
    "algorithm_names",
    "apply_overrides",
    "check_exp_name",
    "describing",
    "format_validation_error",
    "load",
    "merged_replay_policy",
    "params_hash",
    "read_params",
    "register_algorithm",
    "replay_algorithm",
    "training_diff",
    "training_hash",
    "training_params",
]
