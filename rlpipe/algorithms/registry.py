"""Algorithm registry: ``register_algo`` and ``build_algo(name, cfg_kwargs, policy, device)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch

from rlpipe.algorithms.optim import resolve_amp
from rlpipe.config import AlgorithmCfg, ConfigError

__all__ = ["algo_class", "build_algo", "get_registered_algo_names", "register_algo", "resolve_algo_cfg"]

_ALGOS: dict[str, type] = {}
T = TypeVar("T", bound=type)


def register_algo(name: str) -> Callable[[T], T]:
    """Class decorator adding an algorithm under ``name`` (``algorithm.name`` in params)."""

    def add(cls: T) -> T:
        if name in _ALGOS and _ALGOS[name] is not cls:
            raise ValueError(f"algorithm {name!r} is already registered by {_ALGOS[name].__name__}")
        _ALGOS[name] = cls
        return cls

    return add


def get_registered_algo_names() -> list[str]:
    """Names accepted by ``algorithm.name``."""
    return sorted(_ALGOS)


def algo_class(name: str) -> type:
    """The class registered as ``name``; a one-line ``ConfigError`` otherwise."""
    key = name.lower()
    if key not in _ALGOS:
        raise ConfigError(
            f"algorithm.name: unknown algorithm {name!r}; accepted: {', '.join(get_registered_algo_names())}"
        )
    return _ALGOS[key]


def resolve_algo_cfg(
    name: str, cfg_kwargs: dict[str, Any] | AlgorithmCfg, device: torch.device | str | None = None
) -> AlgorithmCfg:
    """Validate ``cfg_kwargs`` against the algorithm's config class; ``device: auto`` → ``device``.

    ``amp: auto`` becomes ``bf16`` or ``none`` for that device (``optim.resolve_amp``).
    """
    cls = algo_class(name)
    cfg = cfg_kwargs if isinstance(cfg_kwargs, AlgorithmCfg) else cls.cfg_class.from_dict(
        dict(cfg_kwargs), "algorithm.cfg"
    )
    if cfg.device == "auto" and device is not None:
        cfg = cfg.replace(device=str(device))
    if getattr(cfg, "amp", None) == "auto":
        target = device if device is not None else (None if cfg.device == "auto" else cfg.device)
        cfg = cfg.replace(amp=resolve_amp("auto", target if target is not None else _default_device()))
    return cfg


def _default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def build_algo(
    name: str,
    cfg_kwargs: dict[str, Any] | AlgorithmCfg,
    policy: Any,
    device: torch.device | str,
    *,
    distributed: bool = False,
) -> Any:
    """Build algorithm ``name`` for ``policy`` with ``cfg_kwargs`` validated by its config class."""
    cls = algo_class(name)
    cfg = resolve_algo_cfg(name, cfg_kwargs, device)
    return cls(cfg, policy)
