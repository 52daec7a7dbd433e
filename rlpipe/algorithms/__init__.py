"""Algorithms: pure advantage maths (GAE), PPO, and the ``build_algo``/``register_algo`` registry."""

from rlpipe.algorithms.base import BaseAlgorithm, flatten_transitions, minibatch_indices
from rlpipe.algorithms.gae import compute_gae, generalized_advantage_estimate
from rlpipe.algorithms.ppo import PPO, PPOCfg
from rlpipe.algorithms.registry import (
    algo_class,
    build_algo,
    get_registered_algo_names,
    register_algo,
    resolve_algo_cfg,
)

__all__ = [
    "PPO",
    "BaseAlgorithm",
    "PPOCfg",
    "algo_class",
    "build_algo",
    "compute_gae",
    "flatten_transitions",
    "generalized_advantage_estimate",
    "get_registered_algo_names",
    "minibatch_indices",
    "register_algo",
    "resolve_algo_cfg",
]
