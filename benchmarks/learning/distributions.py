"""Action distributions on the torch Pendulum: final eval return of gaussian, gaussian_state_std and beta.

    .venv/bin/python benchmarks/learning/distributions.py [--seeds 0 1 2] [--iterations 25]
        [--distributions gaussian gaussian_state_std beta] [--params configs/ppo_pendulum.yaml]
        [--set KEY=VALUE ...] [--threads 1] [--json benchmarks/results/distributions.json]

For each seed and ``policy.distribution`` (interleaved: seed 0 with every distribution, then seed
1, …), ``configs/ppo_pendulum.yaml`` is loaded with ``trainer.seed=SEED``,
``policy.distribution=NAME``, ``trainer.iterations=ITERATIONS``, ``tracking.backend=none``, the
rollout store off, no checkpoint before the final one and a temporary ``trainer.data_dir``, and
trained with :class:`rlpipe.trainer.Trainer`. The only evaluation is the trainer's final one: the
deterministic (mode) action on ``trainer.num_eval_envs`` eval envs × ``num_eval_episodes`` full
200-step episodes. Reported per run: the final eval return (mean over those episodes), the final
training return (``train/episode_return_mean``), and the training wall and CPU time; per
distribution: mean ± std (sample std) of the final eval return across seeds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import (
    NEVER,
    PROJECT_ROOT,
    load_cfg,
    print_machine,
    print_table,
    set_threads,
    start_quietly,
    write_json,
)

from rlpipe.trainer import Trainer

DEFAULT_PARAMS = PROJECT_ROOT / "configs" / "ppo_pendulum.yaml"
DISTRIBUTIONS = ["gaussian", "gaussian_state_std", "beta"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=Path, default=DEFAULT_PARAMS, help="params file")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="trainer.seed values")
    parser.add_argument(
        "--distributions",
        nargs="+",
        default=DISTRIBUTIONS,
        choices=DISTRIBUTIONS,
        help="policy.distribution values (each with every seed)",
    )
    parser.add_argument("--iterations", type=int, default=25, help="trainer.iterations of every run")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra config override (repeatable), as rlpipe run --set",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def run_one(args: argparse.Namespace, seed: int, distribution: str) -> dict[str, Any]:
    """Train one (distribution, seed) for ``args.iterations``; its final eval return and timings."""
    with tempfile.TemporaryDirectory(prefix="rlpipe-distributions-") as data_dir:
        cfg = load_cfg(
            args.params,
            [
                f"trainer.seed={seed}",
                f"policy.distribution={distribution}",
                f"trainer.iterations={args.iterations}",
                "tracking.backend=none",
                "store.enabled=false",
                f"trainer.eval_freq={NEVER}",
                f"trainer.save_freq={NEVER}",
                f"trainer.data_dir={data_dir}",
                *args.overrides,
            ],
        )
        trainer = start_quietly(Trainer(cfg))
        wall, cpu = time.perf_counter(), time.process_time()
        metrics: dict[str, float] = {}
        for row in trainer.iterate():
            metrics = row
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "distribution": distribution,
        "seed": seed,
        "env_steps": trainer.env_steps,
        "eval_return": metrics["eval/return_mean"],
        "eval_return_episode_std": metrics["eval/return_std"],
        "train_return": metrics.get("train/episode_return_mean"),
        "wall_s": wall,
        "cpu_s": cpu,
    }


def summarize(runs: list[dict[str, Any]], distribution: str) -> dict[str, Any]:
    """Mean ± sample std across seeds of one distribution's final eval (and training) return."""
    mine = [r for r in runs if r["distribution"] == distribution]
    evals = [r["eval_return"] for r in mine]
    trains = [r["train_return"] for r in mine if r["train_return"] is not None]
    return {
        "distribution": distribution,
        "seeds": len(mine),
        "env_steps": mine[0]["env_steps"],
        "eval_return_mean": statistics.fmean(evals),
        "eval_return_std": statistics.stdev(evals) if len(evals) > 1 else 0.0,
        "train_return_mean": statistics.fmean(trains) if trains else None,
        "cpu_s_mean": statistics.fmean(r["cpu_s"] for r in mine),
    }


RUN_COLUMNS = [
    ("distribution", "distribution", ""),
    ("seed", "seed", ""),
    ("env_steps", "env steps", ","),
    ("eval_return", "eval return", ".1f"),
    ("train_return", "train return", ".1f"),
    ("wall_s", "wall s", ".1f"),
    ("cpu_s", "cpu s", ".1f"),
]
SUMMARY_COLUMNS = [
    ("distribution", "distribution", ""),
    ("seeds", "seeds", ""),
    ("eval_return_mean", "eval mean", ".1f"),
    ("eval_return_std", "± std", ".1f"),
    ("train_return_mean", "train mean", ".1f"),
    ("cpu_s_mean", "cpu s", ".1f"),
]


def main() -> None:
    args = parse_args()
    set_threads(args.threads)
    runs = []
    for seed in args.seeds:  # distributions alternate within a seed: load drift hits them alike
        for distribution in args.distributions:
            runs.append(run_one(args, seed, distribution))
            print(f"{distribution} seed {seed}: eval return {runs[-1]['eval_return']:.1f}", flush=True)
    rows = [summarize(runs, d) for d in args.distributions]
    print(
        f"\nPendulum PPO, {args.iterations} iterations ({runs[0]['env_steps']:,} env steps) per run, "
        f"{args.params.name}{' ' + ' '.join(args.overrides) if args.overrides else ''}"
    )
    print_table(runs, RUN_COLUMNS)
    print("\nfinal deterministic eval return across seeds")
    print_table(rows, SUMMARY_COLUMNS)
    print_machine()
    params = args.params.resolve()
    shown = params.relative_to(PROJECT_ROOT) if params.is_relative_to(PROJECT_ROOT) else params
    write_json(
        args.json,
        {
            "benchmark": "distributions",
            "iterations": args.iterations,
            "params": str(shown),
            "overrides": args.overrides,
            "rows": rows,
            "runs": runs,
        },
    )


if __name__ == "__main__":
    main()
