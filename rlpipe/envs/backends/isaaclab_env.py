"""``env.backend: isaaclab``: an Isaac Lab task by its id, built the way Isaac Lab's train script builds it.

``env.id: Isaac-Cartpole`` goes through Isaac Lab's own steps:

1. ``resolve_task_config(id, "rsl_rl_cfg_entry_point", overrides=env.cfg.overrides)``: the task's
   env config and rsl_rl agent config, Hydra overrides and presets applied as on Isaac Lab's
   command line (``env.sim.dt=0.01``, ``presets=newton_mjwarp``);
2. ``scene.num_envs`` ← ``trainer.num_envs``, ``sim.device`` ← the run's device, ``seed`` ← the
   run's seed;
3. ``launch_simulation(env_cfg, args)``: nothing to start for a kitless physics backend (Newton),
   Isaac Sim Kit where the config needs it; held open until the env is closed;
4. ``gym.make(id, cfg=env_cfg)``, wrapped by Isaac Lab's ``RslRlVecEnvWrapper`` (actions clipped
   to the agent config's ``clip_actions``, or ``env.cfg.clip_actions``), then rlpipe's
   :class:`~rlpipe.envs.backends.rsl_rl_env.RslRlEnv`.

Isaac Lab 3.0 needs Python 3.12 and its own environment (docs: Isaac Lab), so it is imported only
here, only when a run asks for it; without it the run stops with one line saying how to install it.
Isaac Lab holds one simulation per process: a second env (an eval env) is refused in one line.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import Any

import torch

from rlpipe.config import ConfigError
from rlpipe.envs.backends.rsl_rl_env import RslRlEnv
from rlpipe.extras import is_installed
from rlpipe.runtime.seeding import restore_rng_state, rng_state

__all__ = [
    "AGENT_ENTRY_POINT",
    "INSTALL_HINT",
    "IsaacLabEnv",
    "build_isaaclab_env",
    "require_isaaclab",
    "task_configs",
]

AGENT_ENTRY_POINT = "rsl_rl_cfg_entry_point"
"""The task registry's key of the rsl_rl agent config (what ``isaaclab train --rl_library rsl_rl`` reads)."""
INSTALL_HINT = (
    "needs Isaac Lab 3.0 (Python 3.12): in a python3.12 venv, pip install --only-binary=:all: "
    "isaaclab==3.0.0, then rlpipe (docs: isaaclab.md)"
)
CFG_KEYS = ("overrides", "clip_actions")
"""``env.cfg`` keys of this backend (see :func:`build_isaaclab_env`)."""


def require_isaaclab(feature: str) -> None:
    """One-line ConfigError ``<feature> needs Isaac Lab 3.0 …`` when Isaac Lab is not installed."""
    if not all(is_installed(module) for module in ("isaaclab", "isaaclab_tasks", "isaaclab_rl")):
        raise ConfigError(f"{feature} {INSTALL_HINT}")


def task_configs(task: str, overrides: list[str] | None = None) -> tuple[Any, Any]:
    """``(env_cfg, agent_cfg)`` of ``task`` as Isaac Lab resolves them (its task registry, Hydra overrides).

    ``agent_cfg`` is the task's ``RslRlOnPolicyRunnerCfg`` brought to the installed rsl_rl's form
    (``handle_deprecated_rsl_rl_cfg``, as Isaac Lab's train script does), so ``.to_dict()`` is the
    train_cfg Isaac Lab hands rsl_rl's runner.
    An unknown task is a one-line ConfigError naming ``env.id``.
    """
    require_isaaclab(f"env.id: {task}")
    import gymnasium as gym

    # Isaac Lab lives in its own Python 3.12 venv, not the one rlpipe is type-checked in:
    import isaaclab_tasks  # noqa: F401  # pyright: ignore[reportMissingImports]  (registers the tasks)
    from isaaclab_rl.rsl_rl import (  # pyright: ignore[reportMissingImports]
        check_rsl_rl_version,
        handle_deprecated_rsl_rl_cfg,
    )
    from isaaclab_tasks.utils import resolve_task_config  # pyright: ignore[reportMissingImports]

    name = task.split(":")[-1]
    if name not in gym.envs.registry:
        known = sorted(i for i in gym.envs.registry if i.startswith("Isaac-"))
        raise ConfigError(f"env.id: unknown Isaac Lab task {task!r}; accepted: {', '.join(known[:8])}, …")
    env_cfg, agent_cfg = resolve_task_config(task, AGENT_ENTRY_POINT, overrides=list(overrides or []))
    return env_cfg, handle_deprecated_rsl_rl_cfg(agent_cfg, check_rsl_rl_version())


class IsaacLabEnv(RslRlEnv):
    """An Isaac Lab task behind rlpipe's rsl_rl adapter; closing it closes the env, then the simulation."""

    _open: IsaacLabEnv | None = None
    """The Isaac Lab env open in this process (Isaac Lab runs one simulation per process)."""

    def __init__(self, vec_env: Any, device: torch.device | str, launched: contextlib.ExitStack) -> None:
        super().__init__(vec_env, device)
        self._launched = launched
        IsaacLabEnv._open = self

    def close(self) -> None:
        """Close the Isaac Lab env, then leave ``launch_simulation`` (stops Kit where it was started)."""
        try:
            super().close()
        finally:
            self._launched.close()
            if IsaacLabEnv._open is self:
                IsaacLabEnv._open = None


def build_isaaclab_env(
    task: str, num_envs: int, device: torch.device | str, cfg: dict[str, Any] | None = None
) -> IsaacLabEnv:
    """Build ``num_envs`` envs of Isaac Lab task ``task`` on ``device`` (steps in the module docstring).

    ``cfg`` (``env.cfg``): ``overrides`` (list of Isaac Lab Hydra overrides, default none) and
    ``clip_actions`` (float or null; default: the task's agent config's). The env's seed is the
    run's (``trainer.seed`` + rank, as seeded just before the env is built); each reset re-seeds
    Isaac Lab with the collector's seed through ``env.seed``. The global random states are as
    before the call: the policy built next gets the initial weights ``rlpipe replay`` rebuilds.
    """
    options = _options(cfg or {})
    if IsaacLabEnv._open is not None:
        raise ConfigError(
            "env.backend: isaaclab runs one simulation per process and one is open; "
            "set trainer.enable_eval=false (evaluate with Isaac Lab's play script)"
        )
    env_cfg, agent_cfg = task_configs(task, options["overrides"])
    env_cfg.scene.num_envs = int(num_envs)
    env_cfg.sim.device = _isaac_device(device)
    env_cfg.seed = int(torch.initial_seed() % 2**32)  # Isaac Lab seeds numpy too: 0 to 2**32 - 1
    clip = options.get("clip_actions", getattr(agent_cfg, "clip_actions", None))
    launched, rng = contextlib.ExitStack(), rng_state()
    try:
        vec_env = _make(task, env_cfg, launched, clip)
        return IsaacLabEnv(vec_env, device, launched)
    except BaseException:
        launched.close()
        raise
    finally:  # Isaac Lab re-seeds and draws while it builds: the policy's initial weights must not see it
        restore_rng_state(rng)


def _make(task: str, env_cfg: Any, launched: contextlib.ExitStack, clip_actions: float | None) -> Any:
    """``launch_simulation`` (held by ``launched``) → ``gym.make`` → ``RslRlVecEnvWrapper``."""
    import gymnasium as gym

    # Isaac Lab lives in its own Python 3.12 venv, not the one rlpipe is type-checked in:
    from isaaclab.app import add_launcher_args, launch_simulation  # pyright: ignore[reportMissingImports]
    from isaaclab_rl.rsl_rl import RslRlVecEnvWrapper  # pyright: ignore[reportMissingImports]

    parser = argparse.ArgumentParser(add_help=False)
    add_launcher_args(parser)  # Isaac Lab's own launcher defaults, as its train script parses them
    args = parser.parse_args(["--device", env_cfg.sim.device, "--viz", "none"])
    launched.enter_context(launch_simulation(env_cfg, args))
    env = gym.make(task, cfg=env_cfg)
    launched.callback(env.close)  # closed again after the wrapper closes it: Isaac Lab's close is idempotent
    return RslRlVecEnvWrapper(env, clip_actions=clip_actions)


def _options(cfg: dict[str, Any]) -> dict[str, Any]:
    """Check ``env.cfg`` of this backend: known keys, ``overrides`` a list of ``key=value`` strings."""
    for key in cfg:
        if key not in CFG_KEYS:
            raise ConfigError(
                f"env.cfg.{key}: unknown argument of env.backend isaaclab; accepted: {', '.join(CFG_KEYS)}"
            )
    overrides = cfg.get("overrides", [])
    if not isinstance(overrides, list) or not all(isinstance(o, str) and "=" in o for o in overrides):
        raise ConfigError(
            f"env.cfg.overrides: got {overrides!r}; accepted: a list of Isaac Lab Hydra overrides "
            "such as ['env.sim.dt=0.01', 'presets=newton_mjwarp']"
        )
    clip = cfg.get("clip_actions")
    if clip is not None and (isinstance(clip, bool) or not isinstance(clip, int | float) or clip <= 0):
        raise ConfigError(f"env.cfg.clip_actions: got {clip!r}; accepted: a positive number or null")
    return {**cfg, "overrides": overrides}


def _isaac_device(device: torch.device | str) -> str:
    """Isaac Lab's device string: ``cpu`` or ``cuda:<index>`` (it reads a bare ``cuda`` as no index)."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda:{device.index or 0}"
    return device.type
