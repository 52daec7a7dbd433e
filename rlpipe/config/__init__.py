"""Typed experiment config: the section classes, loading with one-line errors, and hashes."""

from rlpipe.config.errors import format_validation_error
from rlpipe.config.hashing import NOT_TRAINING, params_hash, training_diff, training_hash, training_params
from rlpipe.config.loading import apply_overrides, load, read_params
from rlpipe.config.sections import (
    AlgorithmBlock,
    AlgorithmCfg,
    CheckpointCfg,
    ConfigError,
    EnvCfg,
    EvalCfg,
    EventCfg,
    EventsCfg,
    NetworkBlock,
    PolicyCfg,
    RecurrentCfg,
    ReplayCfg,
    RunConfig,
    StopConditionCfg,
    StoreCfg,
    TrackingCfg,
    TrainerCfg,
)

__all__ = [
    "NOT_TRAINING",
    "AlgorithmBlock",
    "AlgorithmCfg",
    "CheckpointCfg",
    "ConfigError",
    "EnvCfg",
    "EvalCfg",
    "EventCfg",
    "EventsCfg",
    "NetworkBlock",
    "PolicyCfg",
    "RecurrentCfg",
    "ReplayCfg",
    "RunConfig",
    "StopConditionCfg",
    "StoreCfg",
    "TrackingCfg",
    "TrainerCfg",
    "apply_overrides",
    "format_validation_error",
    "load",
    "params_hash",
    "read_params",
    "training_diff",
    "training_hash",
    "training_params",
]
