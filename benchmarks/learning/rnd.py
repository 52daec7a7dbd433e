"""RND curiosity on a sparse task: plain PPO against PPO + RND, same seeds, same env steps.

    .venv/bin/python benchmarks/learning/rnd.py [--task deep_sea|mountaincar] [--seeds 0 1 2]
        [--iterations N] [--arms ppo rnd] [--rnd KEY=VALUE ...] [--set KEY=VALUE ...] [--threads 1]
        [--json benchmarks/results/rnd.json]

Tasks (``--task``):

* ``deep_sea`` (default): rlpipe's ``DeepSea`` (bsuite's deep-exploration grid, size 20): 20 steps down
  a 20 × 20 grid; moving right costs 0.0005, and only the path that moves right 20 times in a row
  pays (+1, return 0.99). A dithering policy finds it with probability 2^−20 per episode, and every
  other path returns ≤ 0, so PPO learns to go left. Success: the final greedy policy takes the
  treasure path (the env and the policy are deterministic: one eval episode decides it).
* ``mountaincar``: gymnasium's MountainCar-v0 (−1 per step until the flag, 200-step limit), the
  policy's observation normalization on (its velocity spans ±0.07). Success: the final greedy policy
  reaches the flag in at least half of ``--eval-episodes`` episodes of gymnasium's env (fresh seeds).
  Plain PPO reaches the flag by chance on some seeds here, so it is no clean contrast.

Arms (``--arms``) run the same PPO and differ only in ``algorithm.cfg.rnd``: ``ppo`` none; ``rnd`` the
paper's RND — a separate intrinsic value network, non-episodic intrinsic returns, advantages
2·A_ext + 1·A_int; ``rnd_one_head`` rsl_rl's — the intrinsic reward added to the extrinsic one, one
value head. ``--rnd KEY=VALUE`` overrides a key of the RND arms' ``algorithm.cfg.rnd`` (YAML value).
Each run loads ``params.yaml`` with the task's overrides, ``trainer.num_threads=--threads``,
``tracking.backend=none``, the rollout store off and a temporary ``trainer.data_dir``, and steps a
``rlpipe.trainer.Trainer``. Reported per run: ``goal_episodes`` (training episodes that reached the
goal) and ``first_goal_iteration``, the eval success, wall and CPU time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

import gymnasium as gym
import torch
import yaml
from _bench import (
    DEFAULT_PARAMS,
    NEVER,
    load_cfg,
    print_machine,
    print_table,
    set_threads,
    start_quietly,
    write_json,
)
from tensordict import TensorDict

from rlpipe.envs import build_env
from rlpipe.trainer import Trainer

SHARED = [
    "trainer.enable_eval=false",
    f"trainer.save_freq={NEVER}",
    "trainer.stop_when=[]",
    "algorithm.cfg.n_epochs=4",
    "algorithm.cfg.batch_size=1024",
    "algorithm.cfg.gamma=0.99",
    "algorithm.cfg.ent_coef=0.0",
    "tracking.backend=none",
    "store.enabled=false",
]
"""Every task and arm: the PPO update (no entropy bonus) and a quiet, storeless run."""
DEEP_SEA_SIZE = 20
MOUNTAINCAR_LIMIT = 200
"""MountainCar-v0's time limit: an episode shorter than this reached the flag."""


@dataclass(frozen=True)
class Task:
    """A sparse task: its overrides, the RND arms' configs, how to count goals and judge the policy."""

    overrides: list[str]
    iterations: int
    rnd: dict[str, dict[str, Any] | None]
    """``algorithm.cfg.rnd`` of each arm (``None``: off)."""
    goals: Callable[[TensorDict], int]
    """Training episodes of a rollout ``[N, T+1]`` that reached the goal."""
    evaluate: Callable[[Any, int, int], float]
    """``(policy, episodes, seed)`` → share of greedy episodes that reach the goal."""


def deep_sea_goals(rollout: TensorDict) -> int:
    """Treasure steps (reward > 0.5: +1 less the move cost) of a DeepSea rollout."""
    return int((rollout["reward"][:, :-1] > 0.5).sum())


def deep_sea_success(policy: Any, episodes: int, seed: int) -> float:
    """1.0 when the greedy policy takes DeepSea's treasure path (deterministic: one episode decides)."""
    env = build_env("DeepSea", 1, "cpu", {"size": DEEP_SEA_SIZE})
    obs, total = env.reset(seed=seed), 0.0
    for _ in range(DEEP_SEA_SIZE):
        with torch.no_grad():
            step = env.step(policy.act(obs, deterministic=True))
        obs, total = step.obs, total + float(step.reward[0])
    return float(total > 0.5)


def mountaincar_goals(rollout: TensorDict) -> int:
    """Flags reached: MountainCar-v0's only termination."""
    return int(rollout["terminated"][:, :-1].sum())


def mountaincar_success(policy: Any, episodes: int, seed: int) -> float:
    """Share of greedy MountainCar-v0 episodes (gymnasium's env, fresh seeds) that reach the flag."""
    env, reached = gym.make("MountainCar-v0"), 0
    for episode in range(episodes):
        obs, _ = env.reset(seed=10_000 + 1_000 * seed + episode)
        terminated = truncated = False
        while not (terminated or truncated):
            with torch.no_grad():
                action = policy.act(torch.as_tensor(obs, dtype=torch.float32)[None], deterministic=True)
            obs, _, terminated, truncated, _ = env.step(int(action[0]))
        reached += terminated
    env.close()
    return reached / episodes


PAPER = {"intrinsic_critic": True, "extrinsic_coef": 2.0, "weight": 1.0}
"""The RND paper's combination: a separate non-episodic intrinsic value, 2·A_ext + 1·A_int."""
SMALL_SLOW = {"learning_rate": 1.0e-4, "hidden_sizes": [64, 64]}
"""MountainCar's RND networks: small, with a slow Adam (its 2-D states are learned at once otherwise)."""
FORGETFUL = {"reward_normalization": "rollout"}
"""DeepSea's one-hot cells are learned within a few updates: the running std would keep the first
rollouts' novelty, 100× the later one, and the intrinsic reward would fade to nothing."""
TASKS = {
    "deep_sea": Task(
        [
            "env.id=DeepSea",
            f"env.cfg={{size: {DEEP_SEA_SIZE}}}",
            "trainer.num_envs=64",
            "trainer.buffer_size=64",
            "algorithm.cfg.learning_rate=3.0e-4",
        ],
        50,
        {"ppo": None, "rnd": {**PAPER, **FORGETFUL}, "rnd_one_head": {**FORGETFUL, "weight": 1.0}},
        deep_sea_goals,
        deep_sea_success,
    ),
    "mountaincar": Task(
        [
            "env.id=MountainCar-v0",
            "trainer.num_envs=16",
            "trainer.buffer_size=256",
            "policy.obs_normalization=true",
            "algorithm.cfg.learning_rate=1.0e-3",
        ],
        100,
        {"ppo": None, "rnd": {**SMALL_SLOW, **PAPER}, "rnd_one_head": {**SMALL_SLOW, "weight": 1.0}},
        mountaincar_goals,
        mountaincar_success,
    ),
}
SUCCESS = 0.5
"""A run succeeds when its final greedy policy reaches the goal in at least this share of eval episodes."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=list(TASKS), default="deep_sea", help="the sparse task")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="trainer.seed values")
    parser.add_argument(
        "--iterations",
        type=int,
        default=None,
        help="iterations of 4096 env steps (default: deep_sea 50, mountaincar 100)",
    )
    parser.add_argument(
        "--arms",
        nargs="+",
        choices=["ppo", "rnd", "rnd_one_head"],
        default=["ppo", "rnd"],
        help="arms to run",
    )
    parser.add_argument(
        "--rnd",
        dest="rnd_overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a key of the RND arms' algorithm.cfg.rnd (repeatable)",
    )
    parser.add_argument("--eval-episodes", type=int, default=20, help="greedy episodes per run (mountaincar)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra config override for every arm (repeatable), as rlpipe run --set",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads (trainer.num_threads)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def rnd_cfg(base: dict[str, Any] | None, overrides: list[str]) -> dict[str, Any] | None:
    """``base`` with ``KEY=VALUE`` overrides (``None`` stays ``None``: plain PPO)."""
    if base is None:
        return None
    cfg = dict(base)
    for item in overrides:
        key, _, value = item.partition("=")
        cfg[key] = yaml.safe_load(value)
    return cfg


def run_one(
    task: Task, arm: str, seed: int, rnd: dict[str, Any] | None, overrides: list[str], eval_episodes: int
) -> dict[str, Any]:
    """Train one arm for one seed; report the goals reached in training, the eval success and the time."""
    extra = [f"algorithm.cfg.rnd={yaml.safe_dump(rnd, default_flow_style=True).strip()}"] if rnd else []
    with tempfile.TemporaryDirectory(prefix="rlpipe-rnd-") as data_dir:
        cfg = load_cfg(
            DEFAULT_PARAMS,
            [
                *overrides,
                f"trainer.seed={seed}",
                f"trainer.data_dir={data_dir}",
                f"trainer.exp_name=rnd_{arm}",
                *extra,
            ],
        )
        trainer = start_quietly(Trainer(cfg))
        wall, cpu, first_goal, goals = time.perf_counter(), time.process_time(), None, 0
        try:
            while trainer.iteration < cfg.trainer.iterations:
                rollout = trainer.collect()
                reached = task.goals(rollout)
                trainer.update(rollout)
                goals += reached
                if first_goal is None and reached:
                    first_goal = trainer.iteration
            policy = trainer.parts.algo.policy
            policy.eval()
            success = task.evaluate(policy, eval_episodes, seed)
        finally:
            trainer.close()
    return {
        "arm": arm,
        "seed": seed,
        "goal_episodes": goals,
        "first_goal_iteration": first_goal,
        "success_rate": success,
        "solved": success >= SUCCESS,
        "env_steps": trainer.env_steps,
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
    }


COLUMNS = [
    ("arm", "arm", ""),
    ("seed", "seed", ""),
    ("goal_episodes", "goal episodes", ","),
    ("first_goal_iteration", "first goal it", ""),
    ("success_rate", "eval success", ".2f"),
    ("env_steps", "env steps", ","),
    ("wall_s", "wall s", ".1f"),
    ("cpu_s", "cpu s", ".1f"),
]


def main() -> None:
    args = parse_args()
    set_threads(args.threads)
    task = TASKS[args.task]
    iterations = args.iterations or task.iterations
    overrides = [
        *SHARED,
        *task.overrides,
        f"trainer.iterations={iterations}",
        f"trainer.num_threads={args.threads}",
        *args.overrides,
    ]
    rnd = {arm: rnd_cfg(task.rnd[arm], args.rnd_overrides) for arm in args.arms}
    rows = []
    for seed in args.seeds:  # the arms alternate within a seed: load drift hits every arm alike
        for arm in args.arms:
            rows.append(run_one(task, arm, seed, rnd[arm], overrides, args.eval_episodes))
            row = rows[-1]
            print(
                f"{arm} seed {seed}: success {row['success_rate']:.2f}, {row['goal_episodes']} goal "
                f"episodes (first at iteration {row['first_goal_iteration']}), {row['wall_s']:.0f} s",
                flush=True,
            )
    print(f"\n{args.task}, {iterations} iterations × 4096 env steps; algorithm.cfg.rnd per arm: {rnd}")
    print_table(rows, COLUMNS)
    summary = {}
    for arm in args.arms:
        mine = [r for r in rows if r["arm"] == arm]
        summary[arm] = {
            "seeds_solved": sum(r["solved"] for r in mine),
            "seeds": len(mine),
            "seeds_reaching_goal_in_training": sum(r["goal_episodes"] > 0 for r in mine),
            "mean_wall_s": sum(r["wall_s"] for r in mine) / len(mine),
            "mean_cpu_s": sum(r["cpu_s"] for r in mine) / len(mine),
        }
    print(summary)
    print_machine()
    write_json(
        args.json,
        {
            "task": args.task,
            "overrides": overrides,
            "iterations": iterations,
            "env_steps_per_run": rows[0]["env_steps"],
            "success_threshold": SUCCESS,
            "rnd": rnd,
            "rows": rows,
            "summary": summary,
            "command": " ".join(["benchmarks/learning/rnd.py", *sys.argv[1:]]),
        },
    )


if __name__ == "__main__":
    main()
