"""Isaac Lab's rsl_rl train flow with one import changed: ``from rlpipe.rsl_rl import OnPolicyRunner``.

    python drop_in.py TASK NUM_ENVS ITERATIONS LOG_DIR MLFLOW_URI

The steps of ``isaaclab_rl``'s ``train_rsl_rl.py`` (resolve the task's configs, launch the simulation,
``gym.make``, ``RslRlVecEnvWrapper``, the runner from ``agent_cfg.to_dict()``, ``learn``), on the
CPU; prints ``drop-in done`` at the end.
"""

from __future__ import annotations

import argparse
import os
import sys

import gymnasium as gym
import isaaclab_tasks  # noqa: F401  (registers the tasks)
from isaaclab.app import add_launcher_args, launch_simulation
from isaaclab_rl.rsl_rl import RslRlVecEnvWrapper, check_rsl_rl_version, handle_deprecated_rsl_rl_cfg
from isaaclab_tasks.utils import resolve_task_config

from rlpipe.rsl_rl import OnPolicyRunner  # the one changed line: was `from rsl_rl.runners import …`


def main(task: str, num_envs: int, iterations: int, log_dir: str, uri: str) -> None:
    """Train ``task`` for ``iterations`` with the drop-in runner, logging under ``log_dir``."""
    os.environ["MLFLOW_TRACKING_URI"] = uri
    parser = argparse.ArgumentParser()
    add_launcher_args(parser)
    args = parser.parse_args(["--device", "cpu", "--viz", "none"])
    env_cfg, agent_cfg = resolve_task_config(task, "rsl_rl_cfg_entry_point", overrides=[])
    agent_cfg = handle_deprecated_rsl_rl_cfg(agent_cfg, check_rsl_rl_version())
    env_cfg.scene.num_envs = num_envs
    env_cfg.sim.device = agent_cfg.device = "cpu"
    agent_cfg.max_iterations = iterations
    env_cfg.seed = agent_cfg.seed
    with launch_simulation(env_cfg, args):
        env = RslRlVecEnvWrapper(gym.make(task, cfg=env_cfg), clip_actions=agent_cfg.clip_actions)
        runner = OnPolicyRunner(env, agent_cfg.to_dict(), log_dir=log_dir, device=agent_cfg.device)
        runner.learn(num_learning_iterations=iterations, init_at_random_ep_len=True)
        env.close()
    print("drop-in done")


if __name__ == "__main__":
    task, num_envs, iterations, log_dir, uri = sys.argv[1:]
    main(task, int(num_envs), int(iterations), log_dir, uri)
