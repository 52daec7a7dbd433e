"""``build_algo(name, cfg_kwargs, policy, device)``: the algorithm ``name`` resolves to, built.

The registry is :mod:`rlpipe.config.registry` (torch-free, so params are validated before torch
loads): a name is a built-in, an ``rlpipe.algorithms`` entry point or ``package.module:Class``,
imported here when the algorithm is first built. ``register_algo`` adds a class defined in a
script (the Python API) under a name of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from rlpipe.algorithms.optim import resolve_amp
from rlpipe.config import AlgorithmCfg, ConfigError
from rlpipe.config.references import load_target
from rlpipe.config.registry import (
    CLASS_FORM,
    algorithm_names,
    config_class_of,
    register_algorithm,
    registered,
)

if TYPE_CHECKING:
    from rlpipe.algorithms.base import BaseAlgorithm
    from rlpipe.policies.trainable import TrainablePolicy

__all__ = ["algo_class", "build_algo", "get_registered_algo_names", "register_algo", "resolve_algo_cfg"]

T = TypeVar("T", bound=type)


def register_algo(name: str) -> Callable[[T], T]:
    """Class decorator adding an algorithm defined in a script under ``name`` (the Python API).

    ``cls.cfg_class`` (an ``AlgorithmCfg`` subclass) types ``algorithm.cfg`` of that name from then
    on. A module of its own needs no registration: ``algorithm.name: package.module:Class``, or an
    ``rlpipe.algorithms`` entry point, reaches it from params and every command.
    """

    def add(cls: T) -> T:
        register_algorithm(name, cls.cfg_class, cls)
        return cls

    return add


def get_registered_algo_names() -> list[str]:
    """Names accepted by ``algorithm.name`` besides ``package.module:Class``."""
    return algorithm_names()


def algo_class(name: str) -> type:
    """The class ``name`` resolves to, imported at first use; a one-line ``ConfigError`` otherwise."""
    entry = registered(name)
    if entry.algo is None:
        if entry.reference is None:
            raise ConfigError(f"algorithm.name: {name!r} has a config class but no algorithm class")
        algo = load_target(entry.reference, "algorithm.name", CLASS_FORM)
        if config_class_of(algo, entry.reference) is not entry.cfg_class or not isinstance(algo, type):
            raise ConfigError(
                f"algorithm.name: {entry.reference} names the config class "
                f"{getattr(algo, 'cfg_class', None)!r}, not {entry.cfg_class.__name__}"
            )
        register_algorithm(name, entry.cfg_class, algo, entry.reference)
        return algo
    return entry.algo


def resolve_algo_cfg(
    name: str, cfg_kwargs: dict[str, Any] | AlgorithmCfg, device: torch.device | str | None = None
) -> AlgorithmCfg:
    """The config of algorithm ``name`` for ``device``, its ``auto`` values resolved.

    ``device: auto`` → ``device``; ``amp: auto`` → ``bf16`` or ``none`` for that device
    (``optim.resolve_amp``).

    A config loaded from params is already an instance of the algorithm's config class and is not
    validated again; a dict (the Python API's ``build_algo("ppo", {...})``) is validated here.
    """
    cfg_class = registered(name).cfg_class
    if isinstance(cfg_kwargs, AlgorithmCfg) and not isinstance(cfg_kwargs, cfg_class):
        raise ConfigError(
            f"algorithm.cfg: {name!r} takes a {cfg_class.__name__}, got a {type(cfg_kwargs).__name__}"
        )
    cfg = (
        cfg_kwargs
        if isinstance(cfg_kwargs, AlgorithmCfg)
        else cfg_class.from_dict(dict(cfg_kwargs), "algorithm.cfg")
    )
    if cfg.device == "auto" and device is not None:
        cfg = cfg.model_copy(update={"device": str(device)})
    if getattr(cfg, "amp", None) == "auto":
        target = device if device is not None else (None if cfg.device == "auto" else cfg.device)
        amp = resolve_amp("auto", target if target is not None else _default_device())
        cfg = cfg.model_copy(update={"amp": amp})
    return cfg


def _default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def build_algo(
    name: str,
    cfg_kwargs: dict[str, Any] | AlgorithmCfg,
    policy: TrainablePolicy,
    device: torch.device | str,
    *,
    distributed: bool = False,
) -> BaseAlgorithm:
    """Build algorithm ``name`` for ``policy``: ``cfg_kwargs`` a dict or its config class's instance."""
    cls = algo_class(name)
    return cls(resolve_algo_cfg(name, cfg_kwargs, device), policy)
