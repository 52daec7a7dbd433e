"""``build_policy`` from a config block: the class ``policy.name`` resolves to, with its networks.

``policy.name`` resolves as ``algorithm.name`` and ``env.id`` do (:mod:`rlpipe.config.registry`): a
built-in name, an ``rlpipe.policies`` entry point, or ``package.module:Class`` (a
``TrainablePolicy`` subclass), imported here from the installed packages and ``PYTHONPATH``.
``register_policy`` adds a class defined in a script (the Python API) under a name of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import gymnasium as gym
import torch
from torch import nn

from rlpipe.config import ConfigError, NetworkBlock, PolicyCfg
from rlpipe.config.references import load_target
from rlpipe.config.registry import CLASS_FORM, POLICY_GROUP, policy_names, policy_reference
from rlpipe.policies.encoders import ObsEncoder
from rlpipe.policies.trainable import TrainablePolicy

__all__ = ["build_policy", "get_registered_policy_names", "policy_class", "register_policy"]

_POLICIES: dict[str, type[TrainablePolicy]] = {}
T = TypeVar("T", bound=type[TrainablePolicy])


def register_policy(name: str) -> Callable[[T], T]:
    """Class decorator adding a policy defined in a script under ``name`` (``policy.name`` in params).

    A module of its own needs no registration: ``policy.name: package.module:Class``.
    """

    def add(cls: T) -> T:
        if name in _POLICIES and _POLICIES[name] is not cls:
            raise ValueError(f"policy {name!r} is already registered by {_POLICIES[name].__name__}")
        _POLICIES[name] = cls
        return cls

    return add


def get_registered_policy_names() -> list[str]:
    """Names accepted by ``policy.name`` besides ``package.module:Class``."""
    return sorted({*policy_names(), *_POLICIES})


def policy_class(name: str) -> type[TrainablePolicy]:
    """The class ``policy.name`` resolves to (its module imported); a one-line ``ConfigError`` otherwise."""
    if name in _POLICIES:
        return _POLICIES[name]
    reference = policy_reference(name)
    if reference is None:
        raise ConfigError(
            f"policy.name: unknown policy {name!r}; accepted: {', '.join(get_registered_policy_names())}, "
            f"a {POLICY_GROUP} entry point or {CLASS_FORM}"
        )
    cls = load_target(reference, "policy.name", CLASS_FORM)
    if not (isinstance(cls, type) and issubclass(cls, TrainablePolicy)):
        raise ConfigError(
            f"policy.name: {reference} is not a policy class; accepted: a TrainablePolicy subclass"
        )
    return cls


def build_policy(
    policy_block: PolicyCfg | dict[str, Any],
    obs_space: gym.Space,
    action_space: gym.Space,
    device: torch.device | str,
    actor: nn.Module | None = None,
    critic: nn.Module | None = None,
) -> TrainablePolicy:
    """Build ``policy_block.name`` for these spaces; networks come from the block unless given.

    Observations are flattened: ``obs_dim = prod(obs_space.shape)``. For a Dict space each
    network reads the concatenation of its ``obs_keys`` (default: every key); the recurrent core
    is shared, so its actor and critic must read the same keys. Image groups a network reads go
    through a CNN each (:mod:`rlpipe.policies.encoders`), whose features take their place.
    """
    from rlpipe.policies.encoders import build_obs_encoder, check_obs_space
    from rlpipe.policies.heads import build_action_head
    from rlpipe.policies.mlp import build_mlp_from_cfg
    from rlpipe.policies.obs_keys import resolve_obs_keys

    cfg = policy_block if isinstance(policy_block, PolicyCfg) else PolicyCfg.from_dict(policy_block, "policy")
    policy_type = policy_class(cfg.name)
    head = build_action_head(action_space, cfg.log_std_init, cfg.distribution)
    if cfg.action_dim is not None and cfg.action_dim != head.action_dim:
        raise ConfigError(
            f"policy.action_dim: {cfg.action_dim} does not match the env's action dim {head.action_dim}"
        )
    actor_keys, obs_dim = resolve_obs_keys(obs_space, cfg.actor.obs_keys, "policy.actor.obs_keys")
    critic_block = cfg.critic or cfg.actor
    critic_keys, critic_dim = resolve_obs_keys(obs_space, critic_block.obs_keys, "policy.critic.obs_keys")
    check_obs_space(obs_space)
    actor_encoder, obs_dim = build_obs_encoder(obs_space, actor_keys, cfg.actor, "policy.actor")
    from_cfg = getattr(policy_type, "from_cfg", None)
    critic_encoder = None
    if from_cfg is None and policy_type.has_critic:  # a critic of its own
        critic_where = "policy.critic" if cfg.critic is not None else "policy.actor"
        critic_encoder, critic_dim = build_obs_encoder(
            obs_space, critic_keys, critic_block, critic_where, actor_encoder if cfg.share_encoder else None
        )
    if from_cfg is not None:  # policies with their own layout (recurrent) build their networks
        if critic_keys != actor_keys:
            raise ConfigError(
                f"policy.critic.obs_keys: {cfg.name!r} shares one core between actor "
                "and critic; give both the same obs_keys"
            )
        policy = from_cfg(cfg, obs_dim, head, device)
        _with_init(policy, cfg)
        _with_encoders(policy, actor_encoder, None)  # the shared core reads the actor's features
        return _with_normalizer(_with_keys(policy, actor_keys, critic_keys), cfg, obs_space)
    actor = actor or build_mlp_from_cfg(_network_cfg(cfg.actor), obs_dim, head.out_dim, "policy.actor")
    cls = cast(Callable[..., TrainablePolicy], policy_type)  # each class takes its own networks
    if policy_type.has_critic:
        if critic is None:
            if cfg.critic is None:
                raise ConfigError(f"policy.critic: required by {cfg.name!r}")
            critic = build_mlp_from_cfg(_network_cfg(cfg.critic), critic_dim, 1, "policy.critic")
        policy = cls(actor=actor, critic=critic, head=head, device=device)
    else:
        policy = cls(actor=actor, head=head, device=device)
    _with_init(policy, cfg)
    _with_encoders(policy, actor_encoder, critic_encoder)
    return _with_normalizer(_with_keys(policy, actor_keys, critic_keys), cfg, obs_space)


def _network_cfg(block: NetworkBlock) -> dict[str, Any]:
    """A network block without ``obs_keys`` (the MLP builder does not take it)."""
    data = block.to_dict()
    data.pop("obs_keys", None)
    data.pop("encoders", None)
    return data


ACTOR_OUTPUT_GAIN = 0.01
"""Orthogonal gain of the actor's output layer: the first actions barely depend on the observation."""
CRITIC_OUTPUT_GAIN = 1.0
"""Orthogonal gain of the critic's output layer."""


def _with_init(policy: TrainablePolicy, cfg: PolicyCfg) -> None:
    """Re-initialize the actor and critic MLPs when ``policy.init`` is ``orthogonal``."""
    from rlpipe.policies.mlp import orthogonal_init

    if cfg.init != "orthogonal":
        return
    for name, gain in (("actor", ACTOR_OUTPUT_GAIN), ("critic", CRITIC_OUTPUT_GAIN)):
        net = getattr(policy, name, None)
        if isinstance(net, nn.Module):
            orthogonal_init(net, gain)


def _with_encoders(policy: TrainablePolicy, actor: ObsEncoder | None, critic: ObsEncoder | None) -> None:
    """Attach the image encoders (submodules on the policy's device; ``None``: no image group read)."""
    device = next(policy.parameters()).device
    policy.actor_encoder = None if actor is None else actor.to(device)
    policy.critic_encoder = None if critic is None else critic.to(device)


def _with_keys(
    policy: TrainablePolicy, actor_keys: tuple[str, ...] | None, critic_keys: tuple[str, ...] | None
) -> TrainablePolicy:
    policy.actor_obs_keys, policy.critic_obs_keys = actor_keys, critic_keys
    return policy


def _with_normalizer(policy: TrainablePolicy, cfg: PolicyCfg, obs_space: gym.Space) -> TrainablePolicy:
    """Attach an ``ObsNormalizer`` (a submodule, so its buffers join the state_dict) when enabled."""
    from rlpipe.policies.normalizer import ObsNormalizer
    from rlpipe.policies.obs_keys import DictObsNormalizer, space_shape

    if cfg.obs_normalization:
        device = next(policy.parameters()).device
        norm = (
            DictObsNormalizer(obs_space)
            if isinstance(obs_space, gym.spaces.Dict)
            else ObsNormalizer(space_shape(obs_space))
        )
        policy.obs_normalizer = norm.to(device)
    return policy
