"""Policies: the ``Policy`` interface, actor-critic and actor-only MLP policies, and their registry."""

from rlpipe.policies.actor_critic import ActorCritic, ActorOnly
from rlpipe.policies.base import Policy
from rlpipe.policies.heads import ActionHead, CategoricalHead, GaussianHead, build_action_head
from rlpipe.policies.mlp import build_mlp, build_mlp_from_cfg
from rlpipe.policies.registry import build_policy, get_registered_policy_names, register_policy

__all__ = [
    "ActionHead",
    "ActorCritic",
    "ActorOnly",
    "CategoricalHead",
    "GaussianHead",
    "Policy",
    "build_action_head",
    "build_mlp",
    "build_mlp_from_cfg",
    "build_policy",
    "get_registered_policy_names",
    "register_policy",
]
