"""RND curiosity on a sparse task: MountainCar-v0, PPO with and without RND, same budget.

    .venv/bin/python benchmarks/learning/rnd.py [--seeds 0 1 2] [--iterations 60] [--weight 1.0]
        [--set KEY=VALUE ...] [--threads N] [--json benchmarks/results/rnd.json]

MountainCar-v0 (``env.backend: auto``, which picks envpool's implementation when installed) pays −1 per step
until the car reaches the flag (position ≥ 0.5, the only termination); a time limit truncates each episode
at 200 steps. The final policy is evaluated on gymnasium's own env. A random policy almost never reaches the
flag, so PPO without exploration sees no signal. For each seed, the same config runs twice: plain PPO, and
PPO with ``algorithm.cfg.rnd`` (intrinsic reward weight ``--weight``). Both load ``params.yaml`` with the
overrides below, ``tracking.backend=none``, the rollout store off and a temporary ``trainer.data_dir``, and
step a ``rlpipe.trainer.Trainer``. Reported per run:

* ``first_goal_iteration``: the first iteration after which a training episode had reached the
  flag (``train/episode_length_mean`` < 200; that mean is over finished episodes, each ≤ 200 steps);
* ``success_rate``: share of ``--eval-episodes`` deterministic episodes (the final policy, fresh
  seeds) that reach the flag, with their mean length;
* wall and CPU time of the run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

import gymnasium as gym
import torch
from _bench import DEFAULT_PARAMS, NEVER, load_cfg, print_table, set_threads, start_quietly, write_json

from rlpipe.trainer import Trainer

LIMIT = 200
"""MountainCar-v0's time limit: an episode shorter than this reached the flag."""
BASE = [
    "env.id=MountainCar-v0", "trainer.num_envs=16", "trainer.buffer_size=256",
    "trainer.enable_eval=false", f"trainer.save_freq={NEVER}", "trainer.stop_when=[]",
    "algorithm.cfg.learning_rate=1.0e-3", "algorithm.cfg.n_epochs=4", "algorithm.cfg.batch_size=1024",
    "algorithm.cfg.gamma=0.99", "algorithm.cfg.ent_coef=0.0",
    "tracking.backend=none", "store.enabled=false",
]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="trainer.seed values")
    parser.add_argument("--iterations", type=int, default=60, help="iterations of 16 envs × 256 steps")
    parser.add_argument("--weight", type=float, default=1.0, help="algorithm.cfg.rnd.weight")
    parser.add_argument("--eval-episodes", type=int, default=20, help="deterministic episodes per run")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="extra config override for both arms (repeatable), as rlpipe run --set")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def evaluate(policy: Any, episodes: int, seed: int) -> tuple[float, float]:
    """``(success rate, mean length)`` of deterministic MountainCar-v0 episodes from fresh seeds."""
    env, lengths = gym.make("MountainCar-v0"), []
    for episode in range(episodes):
        obs, _ = env.reset(seed=10_000 + 1_000 * seed + episode)
        steps, terminated, truncated = 0, False, False
        while not (terminated or truncated):
            with torch.no_grad():
                action = policy.act(torch.as_tensor(obs, dtype=torch.float32)[None], deterministic=True)
            obs, _, terminated, truncated, _ = env.step(int(action[0]))
            steps += 1
        lengths.append(steps if terminated else LIMIT + 1)
    env.close()
    return sum(n <= LIMIT for n in lengths) / episodes, sum(min(n, LIMIT) for n in lengths) / episodes


def run_one(arm: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """Train one arm for one seed; report the first goal, the eval success and the time."""
    rnd = [f"algorithm.cfg.rnd={{weight: {args.weight}}}"] if arm == "rnd" else []
    with tempfile.TemporaryDirectory(prefix="rlpipe-rnd-") as data_dir:
        cfg = load_cfg(DEFAULT_PARAMS, [*BASE, f"trainer.iterations={args.iterations}",
                                        f"trainer.seed={seed}", f"trainer.data_dir={data_dir}",
                                        f"trainer.exp_name=mountaincar_{arm}", *rnd, *args.overrides])
        trainer = start_quietly(Trainer(cfg))
        wall, cpu, first_goal = time.perf_counter(), time.process_time(), None
        try:
            while trainer.iteration < cfg.trainer.iterations:
                metrics = trainer.step()
                if first_goal is None and metrics.get("train/episode_length_mean", LIMIT) < LIMIT:
                    first_goal = trainer.iteration
            policy = trainer.parts.algo.policy
            policy.eval()
            success, length = evaluate(policy, args.eval_episodes, seed)
        finally:
            trainer.close()
    return {"arm": arm, "seed": seed, "first_goal_iteration": first_goal, "success_rate": success,
            "eval_length_mean": length, "env_steps": trainer.env_steps,
            "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}


COLUMNS = [
    ("arm", "arm", ""), ("seed", "seed", ""), ("first_goal_iteration", "first goal it", ""),
    ("success_rate", "eval success", ".2f"), ("eval_length_mean", "eval length", ".1f"),
    ("env_steps", "env steps", ","), ("wall_s", "wall s", ".1f"), ("cpu_s", "cpu s", ".1f"),
]


def main() -> None:
    args = parse_args()
    set_threads(args.threads)
    rows = []
    for seed in args.seeds:  # the arms alternate within a seed: load drift hits both alike
        for arm in ("ppo", "rnd"):
            rows.append(run_one(arm, seed, args))
            print(f"{arm} seed {seed}: success {rows[-1]['success_rate']:.2f}, "
                  f"first goal at iteration {rows[-1]['first_goal_iteration']}", flush=True)
    print(f"\nMountainCar-v0, PPO vs PPO + RND (weight {args.weight}), "
          f"{args.iterations} iterations × 4096 steps")
    print_table(rows, COLUMNS)
    summary = {}
    for arm in ("ppo", "rnd"):
        mine = [r for r in rows if r["arm"] == arm]
        summary[arm] = {"mean_success_rate": sum(r["success_rate"] for r in mine) / len(mine),
                        "seeds_reaching_goal": sum(r["first_goal_iteration"] is not None for r in mine)}
    print(summary)
    write_json(args.json, {"task": "MountainCar-v0", "overrides": [*BASE, *args.overrides],
                           "iterations": args.iterations, "rnd_weight": args.weight, "rows": rows,
                           "summary": summary})


if __name__ == "__main__":
    main()
