"""``env.backend: mjlab``: an mjlab task by its id, built as mjlab's own train script builds it.

``env.id`` is a task mjlab registers (``Mjlab-Velocity-Flat-Unitree-Go1``; mjlab's
``list_tasks()``). :func:`build_mjlab_env` resolves the task's env config with mjlab's
``load_env_cfg``, sets ``scene.num_envs`` (``trainer.num_envs``) and ``seed``, builds
``ManagerBasedRlEnv(cfg, device=…)``, wraps it in ``mjlab.rl.RslRlVecEnvWrapper`` with the task's
``clip_actions`` and hands that to :class:`~rlpipe.envs.backends.rsl_rl_env.RslRlEnv`: observation
groups (``actor``, ``critic``) become ``obs_keys``, time-outs are truncations with the approximate
bootstrap rsl_rl uses, ``extras["log"]`` becomes ``env/<key>`` metrics.

``env.cfg`` keys: ``clip_actions`` (a float or null; default the task's agent config's),
``play`` (true: mjlab's play variant of the task) and any field of mjlab's env config, nested
dicts setting nested fields (``{episode_length_s: 10, scene: {env_spacing: 3.0}}``).

:func:`task_train_cfg` gives the task's rsl_rl agent config as the dict rsl_rl's
``OnPolicyRunner`` takes (what mjlab's train script and runner pass it), so the task's PPO settings can
become rlpipe params (``rlpipe.rsl_rl.params_from_train_cfg``).

mjlab is imported here only, when this backend is asked for: it pins its own MuJoCo, so it lives
in a virtualenv of its own (``pip install 'rlpipe[mjlab]'`` there).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import random
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np
import torch

from rlpipe.config import ConfigError
from rlpipe.config.errors import did_you_mean
from rlpipe.envs.backends.rsl_rl_env import RslRlEnv
from rlpipe.extras import require

__all__ = ["BACKEND_KEYS", "build_mjlab_env", "mjlab_tasks", "require_mjlab", "task_train_cfg"]

BACKEND_KEYS = ("clip_actions", "play")
"""``env.cfg`` keys this backend reads itself; every other key is a field of mjlab's env config."""
SET_BY_TRAINER = {"scene.num_envs": "trainer.num_envs", "seed": "trainer.seed"}
"""Env config fields rlpipe sets, with the params key that sets them."""
VENV_NOTE = "in a virtualenv where mjlab's MuJoCo pin fits (docs: mjlab)"


def require_mjlab() -> None:
    """Import mjlab and register its tasks; a one-line ConfigError saying how to install it."""
    try:
        require("mjlab", "env.backend: mjlab")
    except ConfigError as exc:
        raise ConfigError(f"{exc} {VENV_NOTE}") from None
    mjlab("tasks")  # importing it registers the tasks


def mjlab(module: str) -> ModuleType:
    """``mjlab.<module>`` (imported by name: mjlab lives in its own virtualenv, not the type checker's)."""
    return importlib.import_module(f"mjlab.{module}")


def mjlab_tasks() -> list[str]:
    """The task ids mjlab registers, sorted."""
    require_mjlab()
    return mjlab("tasks.registry").list_tasks()


def task_train_cfg(task: str) -> dict[str, Any]:
    """The rsl_rl agent config of ``task`` as the dict rsl_rl's ``OnPolicyRunner`` takes.

    ``asdict`` of mjlab's runner config, less the model keys left unset (``cnn_cfg``,
    ``distribution_cfg`` null; ``rnn_*`` without an ``rnn_type``), which mjlab's own runner strips
    before rsl_rl's ``MLPModel`` sees them.
    """
    _check_task(task)
    train_cfg = dataclasses.asdict(mjlab("tasks.registry").load_rl_cfg(task))
    for model in ("actor", "critic"):
        cfg = train_cfg.get(model, {})
        unset = [k for k in ("cnn_cfg", "distribution_cfg", "rnn_type") if cfg.get(k) is None]
        if "rnn_type" in unset:
            unset += ["rnn_hidden_dim", "rnn_num_layers"]
        for key in unset:
            cfg.pop(key, None)
    return train_cfg


def build_mjlab_env(
    task: str, num_envs: int, device: torch.device | str, cfg: dict[str, Any] | None = None
) -> RslRlEnv:
    """``num_envs`` envs of mjlab task ``task`` on ``device``, as an rlpipe env (module docstring).

    The env's seed is torch's initial seed, which rlpipe sets to ``trainer.seed`` (plus the rank)
    before it builds the env; every collector reset seeds mjlab again (``env.seed``).
    """
    cfg = dict(cfg or {})
    _check_task(task)
    registry = mjlab("tasks.registry")
    env_cfg = registry.load_env_cfg(task, play=bool(cfg.pop("play", False)))
    clip_actions = cfg.pop("clip_actions", registry.load_rl_cfg(task).clip_actions)
    apply_overrides(env_cfg, cfg, "env.cfg")
    env_cfg.scene.num_envs = num_envs
    env_cfg.seed = torch.initial_seed() % 2**31
    with global_rngs_kept(torch.device(device)):
        env = mjlab("envs").ManagerBasedRlEnv(cfg=env_cfg, device=mjlab_device(device))
        vec_env = mjlab("rl").RslRlVecEnvWrapper(env, clip_actions=clip_actions)  # resets every env
    return RslRlEnv(vec_env, device)


@contextlib.contextmanager
def global_rngs_kept(device: torch.device) -> Iterator[None]:
    """Restore the global python, numpy and torch generators after the block.

    mjlab seeds them and draws from them while it builds and resets the env; rlpipe initializes
    the policy from them after the env is built, and ``rlpipe replay`` (which builds no env) redoes
    that initialization, so building the env must leave them as they were.
    """
    python_state, numpy_state = random.getstate(), np.random.get_state()
    devices = [torch.device(mjlab_device(device)).index] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        yield
    random.setstate(python_state)
    np.random.set_state(numpy_state)


def mjlab_device(device: torch.device | str) -> str:
    """The device string mjlab (and Warp) takes: ``cpu`` or ``cuda:<index>``."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        return f"cuda:{torch.cuda.current_device()}"
    return str(device)


def apply_overrides(target: Any, overrides: dict[str, Any], path: str) -> None:
    """Set the dataclass fields of ``target`` named by ``overrides`` (nested dicts: nested fields).

    ``path`` is the key path of ``overrides`` in the params (``env.cfg``); an unknown field or a
    field rlpipe sets itself is a one-line ConfigError naming it.
    """
    fields = {f.name for f in dataclasses.fields(target)}
    for key, value in overrides.items():
        name = f"{path}.{key}"
        dotted = name.removeprefix("env.cfg.")
        if dotted in SET_BY_TRAINER:
            raise ConfigError(f"{name}: set by {SET_BY_TRAINER[dotted]}, not env.cfg")
        if key not in fields:
            accepted = sorted(fields) if path != "env.cfg" else [*BACKEND_KEYS, *sorted(fields)]
            raise ConfigError(
                f"{name}: not a field of mjlab's {type(target).__name__}{did_you_mean(key, fields)}; "
                f"accepted: {', '.join(accepted)}"
            )
        current = getattr(target, key)
        if isinstance(value, dict) and dataclasses.is_dataclass(current):
            apply_overrides(current, value, name)
        else:
            setattr(target, key, value)


def _check_task(task: str) -> None:
    """Refuse an id mjlab does not register, naming the close ones and where the list is."""
    tasks = mjlab_tasks()
    if task not in tasks:
        raise ConfigError(
            f"env.id: unknown mjlab task {task!r}{did_you_mean(task, tasks)}; "
            f"accepted: one of mjlab's {len(tasks)} tasks ({', '.join(tasks[:4])}, …)"
        )
