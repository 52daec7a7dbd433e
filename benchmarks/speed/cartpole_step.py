"""Who steps CartPole-v1 fastest: gymnasium's vectorized class, its sync loop or envpool, raw and in rlpipe.

    .venv/bin/python benchmarks/speed/cartpole_step.py [--envs 8 64 1024] [--steps 2000] [--rounds 3]
        [--json PATH]

Sides, each stepping N envs with the same pre-drawn uniform random actions (auto-resets included):

* ``vector raw`` — ``gymnasium.make_vec("CartPole-v1", N)`` (``CartPoleVectorEnv``, numpy arrays,
  one step late resets);
* ``sync raw`` — ``SyncVectorEnv`` of N ``gymnasium.make`` envs (``SAME_STEP`` resets), as SB3 and
  CleanRL step them;
* ``envpool raw`` — ``envpool.make_gymnasium("CartPole-v1", num_envs=N)``;
* ``rlpipe vector`` / ``rlpipe sync`` / ``rlpipe envpool`` — the same through rlpipe's adapters
  (``build_env`` with ``vectorization_mode`` ``vector_entry_point`` / ``sync``, backend ``envpool``):
  torch actions in, torch tensors out, finished envs reset in the same step.

Rounds rotate the sides (``--rounds``); the table gives the median µs per step and per env step and,
per side, the median of its per-round ratios to ``rlpipe vector`` (what ``backend: auto`` builds).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

import gymnasium
import numpy as np
import torch
from _bench import load_average, median, print_machine, print_table, write_json
from gymnasium.vector import AutoresetMode

from rlpipe.envs import build_env

SIDES = ("rlpipe vector", "vector raw", "sync raw", "envpool raw", "rlpipe sync", "rlpipe envpool")


def make_side(side: str, n: int) -> Callable[[Any], Any]:
    """A ``step(actions)`` of side ``side`` over ``n`` envs, reset with seed 0."""
    if side == "vector raw":
        env = gymnasium.make_vec("CartPole-v1", n, vectorization_mode="vector_entry_point")
    elif side == "sync raw":
        env = gymnasium.make_vec(
            "CartPole-v1",
            n,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        )
    elif side == "envpool raw":
        import envpool

        env = envpool.make_gymnasium("CartPole-v1", num_envs=n, seed=0)
    else:
        cfg = {
            "rlpipe vector": ({"vectorization_mode": "vector_entry_point"}, "gymnasium"),
            "rlpipe sync": ({"vectorization_mode": "sync"}, "gymnasium"),
            "rlpipe envpool": ({}, "envpool"),
        }[side]
        wrapped = build_env("CartPole-v1", n, "cpu", *cfg)
        wrapped.reset(seed=0)
        return wrapped.step
    env.reset(seed=0) if side != "envpool raw" else env.reset()
    return lambda actions: env.step(actions.numpy())


def time_side(step: Callable[[Any], Any], actions: torch.Tensor) -> float:
    """Seconds per step over ``actions`` ``[steps, N]``."""
    start = time.perf_counter()
    for action in actions:
        step(action)
    return (time.perf_counter() - start) / len(actions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[8, 64, 1024])
    parser.add_argument(
        "--steps",
        type=int,
        default=2000,
        help="steps per side and round at 8 envs (fewer above: steps × 8 / N, at least 200)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_before = load_average()
    rows = []
    for n in args.envs:
        steps = max(200, args.steps * 8 // n)
        actions = torch.from_numpy(np.random.default_rng(0).integers(0, 2, size=(steps, n)))
        steppers = {side: make_side(side, n) for side in SIDES}
        times: dict[str, list[float]] = {side: [] for side in SIDES}
        for r in range(args.rounds):
            order = SIDES[r % len(SIDES) :] + SIDES[: r % len(SIDES)]
            for side in order:
                times[side].append(time_side(steppers[side], actions))
        base = times["rlpipe vector"]
        for side in SIDES:
            per_step = median(times[side])
            ratio = median([t / b for t, b in zip(times[side], base, strict=True)])
            rows.append(
                {
                    "envs": n,
                    "side": side,
                    "us_per_step": per_step * 1e6,
                    "us_per_env_step": per_step * 1e6 / n,
                    "vs_rlpipe_vector": ratio,
                }
            )
    print_table(
        rows,
        [
            ("envs", "envs", "d"),
            ("side", "side", "s"),
            ("us_per_step", "µs/step", ",.1f"),
            ("us_per_env_step", "µs/env step", ".2f"),
            ("vs_rlpipe_vector", "time × rlpipe vector", ".2f"),
        ],
    )
    print_machine()
    write_json(
        args.json,
        {
            "benchmark": "cartpole_step",
            "args": {k: str(v) for k, v in vars(args).items()},
            "rows": rows,
            "load_at_start": load_before,
            "load_at_end": load_average(),
        },
    )


if __name__ == "__main__":
    main()
