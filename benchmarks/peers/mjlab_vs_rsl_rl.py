"""rsl_rl's OnPolicyRunner against rlpipe on the same mjlab env object: env steps/s (CPU or CUDA).

    CUDA_VISIBLE_DEVICES= ~/.cache/rlpipe/lanes/mjlab/bin/python benchmarks/peers/mjlab_vs_rsl_rl.py
        [--task Mjlab-Velocity-Flat-Unitree-Go1] [--num-envs 4] [--horizon 24] [--rounds 3]
        [--device cpu] [--json PATH]

Runs in the mjlab lane's virtualenv (``make test-mjlab`` builds it). One ``ManagerBasedRlEnv`` of the
task, wrapped by mjlab's ``RslRlVecEnvWrapper`` with the task's ``clip_actions``, is built once and
both trainers step that object:

* ``rsl_rl``: ``rsl_rl.runners.OnPolicyRunner(env, train_cfg, log_dir=None)`` with the task's own
  agent config (``rlpipe.envs.backends.mjlab_env.task_train_cfg``: what mjlab's runner hands
  rsl_rl's); one iteration is ``learn(1)``.
* ``rlpipe``: a ``Trainer`` given the same env (``Trainer(cfg, env=…)``), the task's PPO settings
  written as overrides of ``params.yaml`` (the same networks, observation groups and
  normalization, epochs, minibatches, adaptive learning rate), every rollout stored, tracking off,
  no eval; one iteration is ``Trainer.step()`` with its store flushed.

Each side runs one warm-up iteration (Warp compiles its kernels in the first), then ``--rounds``
rounds time one iteration of each side in turn. The table gives the median env steps/s
(``num_envs × horizon`` per iteration) and ``vs_rsl_rl``, the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

import torch
from _bench import (
    DEFAULT_PARAMS,
    NEVER,
    load_cfg,
    median,
    print_machine,
    print_table,
    start_quietly,
    timing_only_overrides,
    write_json,
)

from rlpipe.envs.backends.mjlab_env import task_train_cfg
from rlpipe.trainer import Trainer


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="Mjlab-Velocity-Flat-Unitree-Go1")
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--horizon", type=int, default=24, help="steps per env per iteration")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", type=Path, default=None)
    return parser.parse_args()


def mjlab_env(task: str, num_envs: int, device: str) -> Any:
    """The task's env as mjlab's train script builds it, and the task's agent config as a dict."""
    import mjlab.tasks  # noqa: F401  # registers the tasks
    from mjlab.envs import ManagerBasedRlEnv
    from mjlab.rl import RslRlVecEnvWrapper
    from mjlab.tasks.registry import load_env_cfg, load_rl_cfg

    cfg, agent = load_env_cfg(task), load_rl_cfg(task)
    cfg.scene.num_envs, cfg.seed = num_envs, agent.seed
    env = ManagerBasedRlEnv(cfg=cfg, device=device)
    return RslRlVecEnvWrapper(env, clip_actions=agent.clip_actions), task_train_cfg(task)


def rlpipe_overrides(
    agent: dict[str, Any], num_envs: int, horizon: int, device: str, data_dir: str
) -> list[str]:
    """The task's agent config as ``--set`` overrides of ``params.yaml``."""
    ppo, actor, critic = agent["algorithm"], agent["actor"], agent["critic"]
    groups = agent["obs_groups"]

    def net(model: dict[str, Any], group: str) -> str:
        hidden = list(model["hidden_dims"])
        keys = ", ".join(groups[group])
        return f"{{type: mlp, obs_keys: [{keys}], network_cfg: {{hidden_sizes: {hidden}, activation: elu}}}}"

    algo = (
        f"{{learning_rate: {ppo['learning_rate']}, n_epochs: {ppo['num_learning_epochs']}, "
        f"num_mini_batches: {ppo['num_mini_batches']}, gamma: {ppo['gamma']}, gae_lambda: {ppo['lam']}, "
        f"clip_coef: {ppo['clip_param']}, ent_coef: {ppo['entropy_coef']}, "
        f"vf_coef: {ppo['value_loss_coef']}, max_grad_norm: {ppo['max_grad_norm']}, "
        f"schedule: {ppo['schedule']}, desired_kl: {ppo['desired_kl']}, "
        f"clip_value_loss: {str(ppo['use_clipped_value_loss']).lower()}, vf_clip_coef: {ppo['clip_param']}, "
        "normalize_advantage: batch}"
    )
    return [
        f"trainer.num_envs={num_envs}",
        f"trainer.buffer_size={horizon}",
        f"trainer.device={device}",
        f"trainer.seed={agent['seed']}",
        f"policy.actor={net(actor, 'actor')}",
        f"policy.critic={net(critic, 'critic')}",
        "policy.log_std_init=0.0",
        f"policy.obs_normalization={str(actor['obs_normalization']).lower()}",
        "algorithm.name=ppo",
        f"algorithm.cfg={algo}",
        *timing_only_overrides(data_dir, "mjlab_vs_rsl_rl"),
    ]


def rsl_rl_iteration(env: Any, agent: dict[str, Any], horizon: int, device: str):
    """``learn(1)`` of an rsl_rl runner on ``env`` with the task's agent config."""
    from rsl_rl.runners import OnPolicyRunner

    train_cfg = {**agent, "num_steps_per_env": horizon, "save_interval": NEVER}
    with contextlib.redirect_stdout(io.StringIO()):  # it prints its models
        runner = OnPolicyRunner(env, train_cfg, log_dir=None, device=device)
    return lambda: runner.learn(num_learning_iterations=1)


def rlpipe_iteration(env: Any, agent: dict[str, Any], args: argparse.Namespace, data_dir: str):
    """``Trainer.step()`` of a run on ``env`` (every rollout stored), flushed before it returns."""
    overrides = rlpipe_overrides(agent, args.num_envs, args.horizon, args.device, data_dir)
    trainer = start_quietly(Trainer(load_cfg(DEFAULT_PARAMS, overrides), env=env))

    def iteration() -> None:
        trainer.step()
        trainer.parts.store.flush()

    return iteration


def timed(fn: Any) -> float:
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        fn()
    return time.perf_counter() - start


def main() -> None:
    args = parse_args()
    torch.manual_seed(0)
    print_machine()
    built = time.perf_counter()
    env, agent = mjlab_env(args.task, args.num_envs, args.device)
    print(f"{args.task}: {args.num_envs} envs built in {time.perf_counter() - built:.1f} s", flush=True)
    with tempfile.TemporaryDirectory() as data_dir:
        sides = {
            "rsl_rl": rsl_rl_iteration(env, agent, args.horizon, args.device),
            "rlpipe": rlpipe_iteration(env, agent, args, data_dir),
        }
        warmup = {name: timed(step) for name, step in sides.items()}
        times: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(args.rounds):
            for name, step in sides.items():
                times[name].append(timed(step))
    steps = args.num_envs * args.horizon
    ratios = [r / s for r, s in zip(times["rsl_rl"], times["rlpipe"])]  # rlpipe steps/s over rsl_rl's
    rows = [
        {
            "side": name,
            "warmup_s": warmup[name],
            "iteration_s": median(times[name]),
            "env_steps_per_s": steps / median(times[name]),
            "vs_rsl_rl": median(ratios) if name == "rlpipe" else 1.0,
        }
        for name in sides
    ]
    print_table(
        rows,
        [
            ("side", "side", "s"),
            ("warmup_s", "warmup_s", ".1f"),
            ("iteration_s", "iteration_s", ".2f"),
            ("env_steps_per_s", "env_steps/s", ".1f"),
            ("vs_rsl_rl", "vs_rsl_rl", ".2f"),
        ],
    )
    env.close()
    write_json(
        args.json, {"task": args.task, "num_envs": args.num_envs, "horizon": args.horizon, "rows": rows}
    )


if __name__ == "__main__":
    main()
