"""envpool throughput: rlpipe's collector (sync and async) against envpool stepping random actions.

For every id × env count: ``raw`` steps an envpool pool (``envpool.make(id, num_envs=N)``) with
uniform random numpy actions (the simulator's own speed, auto-reset included); ``sync`` and
``async`` run ``rlpipe.collector.Collector`` over ``EnvpoolEnv`` (``mode: sync`` / ``mode: async``,
double-buffered halves) with the default 64×64 actor-critic, one rollout of ``--horizon`` steps
per round, values included. Rounds alternate raw, sync, async (``--rounds``); the table shows median
env steps per second and the median of per-round ratios to raw.
Run: ``.venv/bin/python benchmarks/speed/envpool_throughput.py [--ids HalfCheetah-v5 ...] [--envs 16 64 256]
[--json out.json]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

import numpy as np
import torch
from _bench import load_average, median, paired_ratios, print_machine, print_table, write_json

from rlpipe.collector import Collector
from rlpipe.envs.backends.envpool_env import EnvpoolEnv
from rlpipe.policies import build_policy

IDS = ("HalfCheetah-v5", "CheetahRun-v1", "PandaPickCube-v1", "Go1JoystickFlatTerrain-v1")


def raw_round(pool: Any, horizon: int, rng: np.random.Generator) -> float:
    """Steps/s of ``horizon`` envpool steps with random actions (actions drawn outside the timer)."""
    space = pool.action_space
    actions = rng.uniform(space.low, space.high, (horizon, pool.config["num_envs"], *space.shape))
    actions = actions.astype(np.float32)
    start = time.perf_counter()
    for action in actions:
        pool.step(action)
    return horizon * pool.config["num_envs"] / (time.perf_counter() - start)


def collector_round(collector: Collector) -> float:
    start = time.perf_counter()
    collector()
    return collector.rollout.batch_size[0] * collector.horizon / (time.perf_counter() - start)


def measure(env_id: str, num_envs: int, horizon: int, rounds: int, modes: list[str]) -> dict[str, Any]:
    import envpool

    pool = envpool.make(env_id, env_type="gymnasium", num_envs=num_envs, batch_size=num_envs, seed=0)
    pool.reset()
    collectors = {}
    for mode in modes:
        env = EnvpoolEnv(env_id, num_envs, "cpu", mode=mode, resume="restart")
        policy = build_policy({"name": "actor_critic"}, env.observation_space, env.action_space, "cpu")
        collectors[mode] = Collector(env, policy, horizon, seed=0)
        collectors[mode]()  # warm-up: creates the pools, first reset
    rng = np.random.default_rng(0)
    raw_round(pool, horizon, rng)
    samples: dict[str, list[float]] = {"raw": [], **{mode: [] for mode in modes}}
    for _ in range(rounds):
        samples["raw"].append(raw_round(pool, horizon, rng))
        for mode, collector in collectors.items():
            samples[mode].append(collector_round(collector))
    row: dict[str, Any] = {"id": env_id, "envs": num_envs, "raw": median(samples["raw"])}
    for mode in modes:
        row[mode] = median(samples[mode])
        row[f"{mode}/raw"] = median(paired_ratios(samples[mode], samples["raw"]))
    if len(modes) == 2:
        row["async/sync"] = median(paired_ratios(samples["async"], samples["sync"]))
    return row | {"load": load_average()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", nargs="+", default=list(IDS))
    parser.add_argument("--envs", nargs="+", type=int, default=[16, 64, 256])
    parser.add_argument("--horizon", type=int, default=32, help="Steps per env per round.")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (policy inference).")
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=("sync", "async"),
        default=["sync", "async"],
        help="Collector modes (each holds its own pools: Playground envs take ~25 MB each).",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print_machine()
    rows = []
    for env_id in args.ids:
        for num_envs in args.envs:
            rows.append(measure(env_id, num_envs, args.horizon, args.rounds, args.modes))
            print_table(rows[-1:], COLUMNS)
    print("\nall:")
    print_table(rows, COLUMNS)
    write_json(args.json, {"rows": rows, "horizon": args.horizon, "rounds": args.rounds})


COLUMNS = (
    ("id", "id", "s"),
    ("envs", "envs", "d"),
    ("raw", "raw steps/s", ",.0f"),
    ("sync", "sync", ",.0f"),
    ("async", "async", ",.0f"),
    ("sync/raw", "sync/raw", ".2f"),
    ("async/raw", "async/raw", ".2f"),
    ("async/sync", "async/sync", ".2f"),
    ("load", "load", ".1f"),
)


if __name__ == "__main__":
    main()
