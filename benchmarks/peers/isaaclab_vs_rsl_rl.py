"""rsl_rl's OnPolicyRunner beside rlpipe on the same Isaac Lab env object: env steps/s (the Isaac Lab lane).

    <lane venv>/bin/python benchmarks/peers/isaaclab_vs_rsl_rl.py [--task Isaac-Cartpole]
        [--num-envs 16] [--device cpu] [--iterations 5] [--json PATH]

One Isaac Lab env is built (``env.backend: isaaclab``'s own path: the task's configs, the
simulation launched, ``gym.make``, Isaac Lab's ``RslRlVecEnvWrapper``) and both trainers step that
same object, one after the other:

* ``rsl_rl``: ``rsl_rl.runners.OnPolicyRunner`` over the wrapper with the task's agent config
  (``to_dict()``, ``log_dir=None``: no writer); one iteration is ``learn(1)``.
* ``rlpipe`` / ``rlpipe+store``: a ``Trainer`` over the same env (``RslRlEnv`` around the wrapper),
  the agent config's sizes written out as params (rollout length, networks, epochs, minibatches,
  PPO coefficients), tracking off, no eval, the rollout store off / on (every rollout written); one
  iteration is ``Trainer.step()``.

Each side runs one untimed iteration (Warp kernels, first allocations), then ``--iterations`` timed
ones; env steps/s = iterations × T × N / seconds. Needs the lane's environment (Isaac Lab 3.0,
``ISAACSIM_ASSET_ROOT`` with the cartpole assets; ``make test-isaaclab`` makes them).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import DEFAULT_PARAMS, load_cfg, start_quietly, timing_only_overrides, write_json

from rlpipe.envs.backends.isaaclab_env import build_isaaclab_env, task_configs
from rlpipe.runtime.seeding import seed_everything
from rlpipe.trainer import Trainer

SEED = 42


def rlpipe_overrides(
    task: str, train_cfg: dict[str, Any], num_envs: int, device: str, store: bool, data_dir: str
) -> list[str]:
    """The agent config's workload as ``--set`` overrides (what decides the cost of an iteration)."""
    algo, actor, critic = train_cfg["algorithm"], train_cfg["actor"], train_cfg["critic"]
    horizon = int(train_cfg["num_steps_per_env"])

    def net(model: dict[str, Any]) -> str:
        sizes, activation = list(model["hidden_dims"]), model["activation"]
        return f"{{type: mlp, network_cfg: {{hidden_sizes: {sizes}, activation: {activation}}}}}"

    ppo = {
        "learning_rate": algo["learning_rate"],
        "n_epochs": algo["num_learning_epochs"],
        "batch_size": num_envs * horizon // int(algo["num_mini_batches"]),
        "gamma": algo["gamma"],
        "gae_lambda": algo["lam"],
        "clip_coef": algo["clip_param"],
        "ent_coef": algo["entropy_coef"],
        "vf_coef": algo["value_loss_coef"],
        "max_grad_norm": algo["max_grad_norm"],
    }
    return [
        "env.backend=isaaclab",
        f"env.id={task}",
        f"trainer.num_envs={num_envs}",
        f"trainer.buffer_size={horizon}",
        f"trainer.device={device}",
        f"policy.actor={net(actor)}",
        f"policy.critic={net(critic)}",
        "algorithm.name=ppo",
        "algorithm.cfg={" + ", ".join(f"{k}: {v}" for k, v in ppo.items()) + "}",
        f"store.enabled={str(store).lower()}",
        *timing_only_overrides(data_dir, f"isaaclab_{'store' if store else 'nostore'}"),
    ]


def time_rsl_rl(vec_env: Any, train_cfg: dict[str, Any], device: str, iterations: int) -> float:
    """Seconds of ``iterations`` × ``learn(1)`` of rsl_rl's own runner, after one untimed."""
    from rsl_rl.runners import OnPolicyRunner

    runner = OnPolicyRunner(vec_env, {**train_cfg, "device": device}, log_dir=None, device=device)
    runner.learn(1)
    start = time.perf_counter()
    for _ in range(iterations):
        runner.learn(1)
    return time.perf_counter() - start


def time_rlpipe(env: Any, overrides: list[str], iterations: int) -> float:
    """Seconds of ``iterations`` × ``Trainer.step()`` over ``env``, after one untimed; the run is closed."""
    trainer = start_quietly(Trainer(load_cfg(DEFAULT_PARAMS, overrides), env=env))
    trainer.step()
    start = time.perf_counter()
    for _ in range(iterations):
        trainer.step()
    if trainer.parts.store is not None:
        trainer.parts.store.flush()  # the writes of the timed iterations count
    seconds = time.perf_counter() - start
    trainer.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="Isaac-Cartpole")
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    _, agent_cfg = task_configs(args.task)
    train_cfg = agent_cfg.to_dict()
    seed_everything(SEED)  # the env takes the seed torch was given, as in a run
    env = build_isaaclab_env(args.task, args.num_envs, args.device)
    steps = args.iterations * int(train_cfg["num_steps_per_env"]) * args.num_envs
    results: dict[str, Any] = {"task": args.task, "num_envs": args.num_envs, "device": args.device}
    results["rsl_rl"] = steps / time_rsl_rl(env.env, train_cfg, args.device, args.iterations)
    with tempfile.TemporaryDirectory() as data_dir:
        for side, store in (("rlpipe", False), ("rlpipe+store", True)):
            overrides = rlpipe_overrides(args.task, train_cfg, args.num_envs, args.device, store, data_dir)
            results[side] = steps / time_rlpipe(env, overrides, args.iterations)
    env.close()
    for side in ("rsl_rl", "rlpipe", "rlpipe+store"):
        print(
            f"{side:<14} {results[side]:8.1f} env steps/s  ({results[side] / results['rsl_rl']:.2f}× rsl_rl)"
        )
    write_json(args.json, results)


if __name__ == "__main__":
    main()
