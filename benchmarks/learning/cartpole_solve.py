"""Time to solve the default experiment (``make run``'s figure): CartPole, return ≥ 475.

    .venv/bin/python benchmarks/learning/cartpole_solve.py [--seeds 0 1 2] [--threshold 475] [--full]
        [--params params.yaml] [--set KEY=VALUE ...] [--threads N] [--json PATH]

For each seed, the default ``params.yaml`` is loaded through ``rlpipe.config.load`` with
``trainer.seed=SEED``, ``tracking.backend=none`` and a temporary ``trainer.data_dir`` (the rollout
store stays enabled and evaluation stays on, as in the default), run as a
``rlpipe.trainer.Trainer`` (started with its console rows captured) and stepped with
``Trainer.step``. The solve point is the first iteration after which ``train/episode_return_mean``
(mean return of the last 200 finished training episodes) is ≥ the threshold. Reported per seed:

* solve iteration and env steps;
* training wall time to solve: the sum of the iterations' own times (``time/iteration_s``:
  collect + store submit + advantage + update + eval), build excluded;
* process CPU time over the same iterations (on a loaded machine the wall time grows, the CPU
  time much less: a large wall/CPU gap means the numbers were taken under contention);
* total: build + every iteration run + ending the run (the rollout store flushed, ``metrics.json``),
  python start-up excluded.

By default a seed stops at its solve point; ``--full`` runs all ``trainer.iterations`` as
``make run`` does (and reports the final return). Target: median time to solve under 20 s on a
2-core CPU.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import (
    DEFAULT_PARAMS,
    load_cfg,
    median,
    print_machine,
    print_table,
    set_threads,
    start_quietly,
    write_json,
)

from rlpipe.trainer import Trainer

RETURN_KEY = "train/episode_return_mean"
TARGET_S = 20.0
TRACE_KEYS = ("time/iteration_s", "time/collect_s", "time/update_s", RETURN_KEY, "eval/return_mean")
"""Per-iteration metrics kept in the JSON, to see where a slow seed spent its time."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--params", type=Path, default=DEFAULT_PARAMS, help="params file (default: params.yaml)"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="trainer.seed values")
    parser.add_argument("--threshold", type=float, default=475.0, help="solve threshold on " + RETURN_KEY)
    parser.add_argument(
        "--full", action="store_true", help="run all trainer.iterations, not only up to the solve"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra config override (repeatable), as rlpipe run --set",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def run_seed(params: Path, seed: int, overrides: list[str], threshold: float, full: bool) -> dict[str, Any]:
    """Build and iterate one seed; return its solve point and timings."""
    with tempfile.TemporaryDirectory(prefix="rlpipe-solve-") as data_dir:
        cfg = load_cfg(
            params,
            [f"trainer.seed={seed}", "tracking.backend=none", f"trainer.data_dir={data_dir}", *overrides],
        )
        start = time.perf_counter()
        trainer = start_quietly(Trainer(cfg))
        build_s = time.perf_counter() - start
        try:
            result = iterate(trainer, threshold, full)
        finally:
            trainer.close()
        total_s = time.perf_counter() - start
    return {"seed": seed, **result, "build_s": build_s, "total_s": total_s}


def iterate(trainer: Trainer, threshold: float, full: bool) -> dict[str, Any]:
    """Run iterations until the solve (or to the end with ``full``); time each one."""
    train_s = 0.0
    cpu_start = time.process_time()
    solve: dict[str, Any] = {
        "solve_iteration": None,
        "solve_env_steps": None,
        "solve_train_s": None,
        "solve_cpu_s": None,
    }
    metrics: dict[str, float] = {}
    per_iteration: list[dict[str, float | None]] = []
    while trainer.iteration < trainer.cfg.trainer.iterations:
        metrics = trainer.step()
        train_s += metrics["time/iteration_s"]
        per_iteration.append({key: metrics.get(key) for key in TRACE_KEYS})
        if solve["solve_iteration"] is None and metrics.get(RETURN_KEY, 0.0) >= threshold:
            solve = {
                "solve_iteration": trainer.iteration,
                "solve_env_steps": trainer.env_steps,
                "solve_train_s": train_s,
                "solve_cpu_s": time.process_time() - cpu_start,
            }
            if not full:
                break
    return {
        **solve,
        "iterations_run": trainer.iteration,
        "env_steps_run": trainer.env_steps,
        "train_s": train_s,
        "final_return": metrics.get(RETURN_KEY),
        "median_iteration_s": median([it["time/iteration_s"] or 0.0 for it in per_iteration]),
        "per_iteration": per_iteration,
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the seeds that solved, and how many did."""
    solved = [r for r in rows if r["solve_iteration"] is not None]
    return {
        "seeds_solved": f"{len(solved)}/{len(rows)}",
        "median_solve_train_s": median([r["solve_train_s"] for r in solved]),
        "median_solve_env_steps": median([r["solve_env_steps"] for r in solved]),
        "median_total_s": median([r["total_s"] for r in rows]),
    }


COLUMNS = [
    ("seed", "seed", ""),
    ("solve_iteration", "solve it", ""),
    ("solve_env_steps", "env steps", ","),
    ("solve_train_s", "train s to solve", ".2f"),
    ("solve_cpu_s", "cpu s to solve", ".2f"),
    ("iterations_run", "its run", ""),
    ("median_iteration_s", "median s/it", ".3f"),
    ("final_return", "last return", ".1f"),
    ("build_s", "build s", ".2f"),
    ("total_s", "total s", ".2f"),
]


def main() -> None:
    args = parse_args()
    set_threads(args.threads)
    rows = []
    for seed in args.seeds:
        rows.append(run_seed(args.params, seed, args.overrides, args.threshold, args.full))
        print(f"seed {seed}: done ({rows[-1]['total_s']:.1f} s)", flush=True)
    print(
        f"\nCartPole solve (train/episode_return_mean >= {args.threshold:g}), {args.params.name}"
        f"{' ' + ' '.join(args.overrides) if args.overrides else ''}"
    )
    print_table(rows, COLUMNS)
    summary = summarize(rows)
    verdict = "meets" if summary["median_solve_train_s"] < TARGET_S else "misses"
    print(
        f"seeds solved {summary['seeds_solved']}; median train time to solve "
        f"{summary['median_solve_train_s']:.2f} s ({verdict} the < {TARGET_S:g} s target), "
        f"median env steps {summary['median_solve_env_steps']:,.0f}, "
        f"median total {summary['median_total_s']:.2f} s"
    )
    print_machine()
    write_json(
        args.json,
        {
            "benchmark": "cartpole_solve",
            "threshold": args.threshold,
            "params": str(args.params),
            "overrides": args.overrides,
            "full": args.full,
            "seeds": rows,
            "summary": summary,
            "target_train_s": TARGET_S,
        },
    )


if __name__ == "__main__":
    main()
