"""``env.id: package.module:ClassOrFactory`` plugins and the ``rlpipe.envs`` entry-point group.

A plugin id names an importable object; what it is decides the backend:

* a :class:`~rlpipe.envs.base.BatchedEnv` subclass → ``cls(num_envs=N, device=D, **env.cfg)``;
* a ``gymnasium.Env`` subclass → registered with gymnasium and vectorized by
  :class:`~rlpipe.envs.backends.gym_adapter.GymnasiumEnv`;
* any other callable (a factory) → called with ``num_envs``/``device`` where its signature takes
  them, plus ``env.cfg``; it must return a ``BatchedEnv`` or an rsl_rl-style ``VecEnv`` (wrapped
  by :class:`~rlpipe.envs.backends.rsl_rl_env.RslRlEnv`);
* no such attribute, but importing the module registered ``Id`` with gymnasium →
  gymnasium's own ``module:Id-v0`` form.

Packages announce ids in ``pyproject.toml``::

    [project.entry-points."rlpipe.envs"]
    MyTask-v0 = "my_pkg.envs:make_my_task"

``env.id: MyTask-v0`` then builds ``my_pkg.envs:make_my_task``, and ``rlpipe envs`` lists it.

The module is imported from the Python path the user set up (installed packages, ``PYTHONPATH``)
and only by a command that builds the env: rlpipe adds neither the working directory nor a run
directory to ``sys.path``, so a run directory someone sent cannot bring the code its params name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import gymnasium
import torch

from rlpipe.config import ConfigError
from rlpipe.config.references import find_target, is_reference
from rlpipe.envs.base import BatchedEnv
from rlpipe.envs.ids import ENTRY_POINT_GROUP, entry_point_ids

__all__ = ["ENTRY_POINT_GROUP", "build_plugin_env", "entry_point_ids", "is_plugin_id", "plugin_target"]


def is_plugin_id(env_id: str) -> bool:
    """True for ``module:attr`` ids."""
    return is_reference(env_id)


def plugin_target(env_id: str) -> tuple[str, Any]:
    """Import ``module`` of ``module:attr``; return ``(attr, object or None)``.

    ``None`` means the module has no such attribute (gymnasium's ``module:Id-v0`` form). An import
    failure is a one-line ConfigError naming the module and the error (the resolution algorithms
    and policies share: :func:`rlpipe.config.references.find_target`).
    """
    return find_target(env_id, "env.id", "package.module:ClassOrFactory")


def build_plugin_env(
    env_id: str,
    num_envs: int,
    device: torch.device | str,
    cfg: dict[str, Any],
    build_gymnasium: Callable[[str], BatchedEnv],
) -> BatchedEnv:
    """Build a ``module:attr`` env (see the module docstring); ``build_gymnasium(id)`` wraps ids."""
    attr, target = plugin_target(env_id)
    if target is None:
        if attr in gymnasium.envs.registry:
            return build_gymnasium(attr)
        raise ConfigError(
            f"env.id: module {env_id.partition(':')[0]!r} has no attribute {attr!r} "
            "and registered no gymnasium id of that name"
        )
    if isinstance(target, type) and issubclass(target, BatchedEnv):
        return wrap_env(env_id, _call(env_id, target, num_envs, device, cfg), device)
    if isinstance(target, type) and issubclass(target, gymnasium.Env):
        gym_id = "rlpipe." + env_id.replace(":", ".")  # gymnasium reads "a:b" as module:id
        if gymnasium.envs.registry.get(gym_id) is None or gymnasium.spec(gym_id).entry_point is not target:
            gymnasium.register(id=gym_id, entry_point=target)
        return build_gymnasium(gym_id)
    if not callable(target):
        raise ConfigError(
            f"env.id: {env_id} is a {type(target).__name__}; accepted: a BatchedEnv "
            "class, a gymnasium.Env class or a factory"
        )
    return wrap_env(env_id, _call(env_id, target, num_envs, device, cfg), device)


def wrap_env(env_id: str, env: object, device: torch.device | str) -> BatchedEnv:
    """A BatchedEnv as is; an rsl_rl-style VecEnv wrapped by ``RslRlEnv``; else a ConfigError."""
    from rlpipe.envs.backends.rsl_rl_env import RslRlEnv, is_rsl_rl_env

    if isinstance(env, BatchedEnv):
        return env
    if is_rsl_rl_env(env):
        return RslRlEnv(env, device)
    raise ConfigError(
        f"env.id: {env_id} returned a {type(env).__name__}; accepted: a BatchedEnv or "
        "an rsl_rl VecEnv (get_observations, step, num_envs, num_actions)"
    )


def _call(
    env_id: str, target: Callable[..., Any], num_envs: int, device: torch.device | str, cfg: dict[str, Any]
) -> object:
    """Call ``target`` with ``num_envs``/``device`` where accepted and ``cfg``; bad kwargs → ConfigError."""
    try:
        params = inspect.signature(target).parameters
    except (TypeError, ValueError):
        params = {}
    any_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    given = {k: v for k, v in (("num_envs", num_envs), ("device", device)) if k in params or any_kw}
    for key in cfg:
        if key in given:
            raise ConfigError(f"env.cfg.{key}: set by trainer.{key}, not env.cfg")
        if params and key not in params and not any_kw:
            accepted = ", ".join(p for p in params if p not in ("self", "num_envs", "device"))
            raise ConfigError(f"env.cfg.{key}: unknown argument of {env_id}; accepted: {accepted}")
    return target(**given, **cfg)
