"""Time to solve CartPole from pixels: ``configs/pixel_cartpole.yaml`` until its deterministic eval ≥ 475.

    .venv/bin/python benchmarks/learning/pixel_cartpole.py [--seeds 0 1 2] [--threshold 475]
        [--set KEY=VALUE ...] [--threads N] [--json PATH]

Each seed loads the config with ``trainer.seed``, ``tracking.backend=none`` and a temporary
``trainer.data_dir`` (the rollout store stays on, images compressed with ``store.image_codec``) and
steps a ``rlpipe.trainer.Trainer`` until the online deterministic eval (``eval/return_mean`` over
``trainer.num_eval_envs`` × ``num_eval_episodes`` fresh episodes, at the iteration's weights) reaches
the threshold, or ``trainer.iterations`` run out. The solved policy is then scored again on 64 fresh
episodes (``evaluate_checkpoint``), so a lucky eval cannot pass for a solve. Reported per seed: the
iteration and env steps of the solve, the training wall and CPU minutes to it (the iterations' own
``time/iteration_s``; build excluded), the stochastic training return at that point and the 64-episode
re-evaluation.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import (
    EVAL_KEY,
    PROJECT_ROOT,
    mean_std,
    print_machine,
    print_table,
    set_threads,
    train_to_threshold,
    write_json,
)

PARAMS = PROJECT_ROOT / "configs" / "pixel_cartpole.yaml"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="trainer.seed values")
    parser.add_argument("--threshold", type=float, default=475.0, help="solve threshold on " + EVAL_KEY)
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra config override (repeatable), as rlpipe run --set",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def run_seed(seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """Train one seed to the threshold; re-evaluate the solved checkpoint on 64 episodes."""
    run = train_to_threshold(PARAMS, seed, args.threshold, args.overrides)
    metrics, recheck = run["metrics"], run["recheck"]
    return {
        "seed": seed,
        "solved": metrics.get(EVAL_KEY, 0.0) >= args.threshold,
        "iteration": run["iteration"],
        "env_steps": run["env_steps"],
        "train_min": run["train_s"] / 60,
        "cpu_min": run["cpu_s"] / 60,
        "online_eval": metrics.get(EVAL_KEY),
        "train_return": metrics.get("train/episode_return_mean"),
        "recheck_return": recheck[EVAL_KEY],
        "recheck_std": recheck.get("eval/return_std"),
        "stopped_by": run["summary"].get("stopped_by"),
    }


COLUMNS = [
    ("seed", "seed", ""),
    ("solved", "solved", ""),
    ("iteration", "iterations", ""),
    ("env_steps", "env steps", ","),
    ("train_min", "train min", ".2f"),
    ("cpu_min", "cpu min", ".2f"),
    ("online_eval", "online eval", ".1f"),
    ("train_return", "train return", ".1f"),
    ("recheck_return", "64-episode eval", ".1f"),
]


def main() -> None:
    args = parse_args()
    set_threads(args.threads)
    rows = []
    for seed in args.seeds:
        rows.append(run_seed(seed, args))
        print(f"seed {seed}: {rows[-1]}", flush=True)
    print(f"\nPixelCartPole to a deterministic eval >= {args.threshold:g} ({PARAMS.name})")
    print_table(rows, COLUMNS)
    solved = [r for r in rows if r["solved"]]
    summary = {"seeds_solved": f"{len(solved)}/{len(rows)}"}
    if solved:
        summary |= {
            "env_steps": mean_std([r["env_steps"] for r in solved]),
            "train_min": mean_std([r["train_min"] for r in solved]),
            "recheck_return": mean_std([r["recheck_return"] for r in solved]),
        }
    print(summary)
    print_machine()
    write_json(
        args.json,
        {
            "benchmark": "pixel_cartpole",
            "params": str(PARAMS.relative_to(PROJECT_ROOT)),
            "threshold": args.threshold,
            "overrides": args.overrides,
            "seeds": rows,
            "summary": summary,
        },
    )


if __name__ == "__main__":
    main()
