"""Policies: the ``Policy`` interface, feedforward and recurrent actor-critics, obs normalizer, registry."""

from rlpipe.policies.actor_critic import ActorCritic, ActorOnly
from rlpipe.policies.base import Policy
from rlpipe.policies.factory import build_policy, get_registered_policy_names, policy_class, register_policy
from rlpipe.policies.heads import (
    ActionHead,
    BetaHead,
    CategoricalHead,
    GaussianHead,
    StateStdGaussianHead,
    build_action_head,
)
from rlpipe.policies.mlp import build_mlp, build_mlp_from_cfg
from rlpipe.policies.normalizer import ObsNormalizer
from rlpipe.policies.recurrent import RecurrentActorCritic, RecurrentCore
from rlpipe.policies.trainable import TrainablePolicy

__all__ = [
    "ActionHead",
    "ActorCritic",
    "ActorOnly",
    "BetaHead",
    "CategoricalHead",
    "GaussianHead",
    "ObsNormalizer",
    "Policy",
    "RecurrentActorCritic",
    "RecurrentCore",
    "StateStdGaussianHead",
    "TrainablePolicy",
    "build_action_head",
    "build_mlp",
    "build_mlp_from_cfg",
    "build_policy",
    "get_registered_policy_names",
    "policy_class",
    "register_policy",
]
