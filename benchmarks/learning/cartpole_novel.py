"""CartPole without velocities (rl-zoo's ``CartPoleNoVel-v1``): ``configs/zoo/cartpole_novel.yaml`` per seed.

    .venv/bin/python benchmarks/learning/cartpole_novel.py [--seeds 0 1 2] [--threshold 475]
        [--full-budget] [--set KEY=VALUE ...] [--threads N] [--json PATH]

The task: the torch CartPole with ``obs_groups``, the recurrent policy reading ``proprio`` (cart
position, pole angle) only, so it must infer both velocities from its memory. Each seed loads the
config with ``trainer.seed``, ``tracking.backend=none`` and a temporary ``trainer.data_dir`` (the
rollout store stays on) and steps a ``rlpipe.trainer.Trainer`` until the online deterministic eval
(``eval/return_mean`` over ``trainer.num_eval_envs`` × ``num_eval_episodes`` fresh episodes, every
``trainer.eval_freq`` env steps and at the end) reaches the threshold, or the config's env-step
budget (``trainer.iterations``) runs out; ``--full-budget`` trains the whole budget instead and
still reports the first eval at the threshold. The final checkpoint is then scored again on 64
fresh deterministic episodes (``evaluate_checkpoint``), so a lucky eval cannot pass for a solve.

Reported per seed: solved or not, env steps at the first eval ≥ threshold (the solve), the final
online eval and the 64-episode re-evaluation, the stochastic training return, the training wall
seconds (the iterations' own ``time/iteration_s``, build excluded), the process CPU seconds and the
wall seconds of the whole seed, and the eval curve ``[[env_steps, eval/return_mean], ...]``.
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

PARAMS = PROJECT_ROOT / "configs" / "zoo" / "cartpole_novel.yaml"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="trainer.seed values")
    parser.add_argument("--threshold", type=float, default=475.0, help="solve threshold on " + EVAL_KEY)
    parser.add_argument(
        "--full-budget",
        action="store_true",
        help="train every iteration of the config instead of stopping at the solve",
    )
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
    """Train one seed to the threshold (or the whole budget); re-evaluate its final checkpoint."""
    run = train_to_threshold(
        PARAMS,
        seed,
        args.threshold,
        [f"trainer.num_threads={args.threads}", *args.overrides],
        not args.full_budget,
    )
    metrics, recheck = run["metrics"], run["recheck"]
    solve_steps = run["solve_env_steps"]
    return {
        "seed": seed,
        "solved": solve_steps is not None,
        "solve_env_steps": solve_steps,
        "env_steps": run["env_steps"],
        "iteration": run["iteration"],
        "final_eval": metrics.get(EVAL_KEY),
        "recheck_return": recheck[EVAL_KEY],
        "recheck_std": recheck.get("eval/return_std"),
        "train_return": metrics.get("train/episode_return_mean"),
        "train_s": run["train_s"],
        "wall_s": run["wall_s"],
        "cpu_s": run["cpu_s"],
        "eval_curve": run["eval_curve"],
    }


COLUMNS = [
    ("seed", "seed", ""),
    ("solved", "solved", ""),
    ("solve_env_steps", "env steps to solve", ","),
    ("final_eval", "final eval", ".1f"),
    ("recheck_return", "64-episode eval", ".1f"),
    ("train_return", "train return", ".1f"),
    ("train_s", "train s", ".1f"),
    ("wall_s", "wall s", ".1f"),
    ("cpu_s", "cpu s", ".1f"),
]


def main() -> None:
    args = parse_args()
    set_threads(args.threads)
    rows = []
    for seed in args.seeds:
        rows.append(run_seed(seed, args))
        print(
            f"seed {seed}: " + ", ".join(f"{k}={v}" for k, v in rows[-1].items() if k != "eval_curve"),
            flush=True,
        )
    print(f"\nCartPole without velocities to a deterministic eval >= {args.threshold:g} ({PARAMS.name})")
    print_table(rows, COLUMNS)
    solved = [r for r in rows if r["solved"]]
    summary: dict[str, Any] = {
        "seeds_solved": f"{len(solved)}/{len(rows)}",
        "recheck_return": mean_std([r["recheck_return"] for r in rows]),
        "wall_s": mean_std([r["wall_s"] for r in rows]),
        "cpu_s": mean_std([r["cpu_s"] for r in rows]),
    }
    if solved:
        summary["solve_env_steps"] = mean_std([r["solve_env_steps"] for r in solved])
    print(summary)
    print_machine()
    write_json(
        args.json,
        {
            "benchmark": "cartpole_novel",
            "params": str(PARAMS.relative_to(PROJECT_ROOT)),
            "threshold": args.threshold,
            "full_budget": args.full_budget,
            "overrides": args.overrides,
            "seeds": rows,
            "summary": summary,
        },
    )


if __name__ == "__main__":
    main()
