"""mjlab tasks (MuJoCo-Warp; Isaac Lab's API) as rlpipe envs through their rsl_rl ``VecEnv`` wrapper.

``PYTHONPATH=. rlpipe run params.yaml --set env.id=examples.mjlab_env:make
--set env.cfg.task=Mjlab-Velocity-Flat-Unitree-Go1`` (mjlab installed, e.g. in a separate venv;
CUDA when present, else CPU, where Warp first compiles its kernels for many minutes). mjlab's
observation groups (``actor``, ``critic``) become ``policy.actor.obs_keys`` / ``policy.critic.obs_keys``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["make"]


def make(
    num_envs: int,
    device: str = "cpu",
    task: str = "Mjlab-Velocity-Flat-Unitree-Go1",
    seed: int = 0,
    clip_actions: float | None = None,
) -> Any:
    """``task`` with ``num_envs`` envs on ``device``, wrapped for rsl_rl (and so for rlpipe)."""
    import mjlab.tasks  # noqa: F401  # registers the tasks
    from mjlab.envs import ManagerBasedRlEnv
    from mjlab.rl import RslRlVecEnvWrapper
    from mjlab.tasks.registry import load_env_cfg

    cfg = load_env_cfg(task)
    cfg.scene.num_envs, cfg.seed = num_envs, seed
    return RslRlVecEnvWrapper(ManagerBasedRlEnv(cfg=cfg, device=str(device)), clip_actions=clip_actions)
