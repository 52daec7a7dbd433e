"""Continuous PPO learning check: env steps and time until the torch Pendulum reaches return ≥ −250.

    .venv/bin/python benchmarks/learning/pendulum.py [--seeds 0 1 2] [--threshold -250] [--amp none bf16]
        [--params configs/ppo_pendulum.yaml] [--set KEY=VALUE ...] [--full] [--threads N] [--json PATH]

For each ``--amp`` value and seed, ``configs/ppo_pendulum.yaml`` is loaded through
``rlpipe.config.load`` with ``trainer.seed=SEED``, ``algorithm.cfg.amp=AMP``,
``tracking.backend=none``, the rollout store off and a temporary ``trainer.data_dir``, run as a
``rlpipe.trainer.Trainer`` (started with its console rows captured) and stepped with
``Trainer.step``, which positions the schedules (``algo.set_progress``) before every update, as
``rlpipe run`` does. The solve point is the first iteration after which ``train/episode_return_mean``
(mean of the last 200 finished training episodes, each 200 steps long) is ≥ the threshold. Reported
per run: solve iteration, env steps, training wall time (sum of the iterations' own times, build
excluded) and CPU time to solve; with ``--full`` also the final and the worst return after the
solve (stability) and the final deterministic eval return.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import PROJECT_ROOT, load_cfg, median, print_table, set_threads, start_quietly, write_json

from rlpipe.trainer import Trainer

RETURN_KEY = "train/episode_return_mean"
DEFAULT_PARAMS = PROJECT_ROOT / "configs" / "ppo_pendulum.yaml"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=Path, default=DEFAULT_PARAMS, help="params file")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="trainer.seed values")
    parser.add_argument(
        "--amp",
        nargs="+",
        default=["none"],
        choices=["none", "bf16", "fp16"],
        help="algorithm.cfg.amp values to run (each with every seed)",
    )
    parser.add_argument("--threshold", type=float, default=-250.0, help="solve threshold on " + RETURN_KEY)
    parser.add_argument("--full", action="store_true", help="run all trainer.iterations")
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


def run_one(
    params: Path, seed: int, amp: str, overrides: list[str], threshold: float, full: bool
) -> dict[str, Any]:
    """Build and iterate one (amp, seed); return the solve point and timings."""
    with tempfile.TemporaryDirectory(prefix="rlpipe-pendulum-") as data_dir:
        cfg = load_cfg(
            params,
            [
                f"trainer.seed={seed}",
                f"algorithm.cfg.amp={amp}",
                "tracking.backend=none",
                "store.enabled=false",
                f"trainer.data_dir={data_dir}",
                *overrides,
            ],
        )
        trainer = start_quietly(Trainer(cfg))
        try:
            return {"amp": amp, "seed": seed, **iterate(trainer, threshold, full)}
        finally:
            trainer.close()


def iterate(trainer: Trainer, threshold: float, full: bool) -> dict[str, Any]:
    """Run iterations until the solve (or to the end with ``full``)."""
    train_s, cpu_start = 0.0, time.process_time()
    solve: dict[str, Any] = {
        "solve_iteration": None,
        "solve_env_steps": None,
        "solve_train_s": None,
        "solve_cpu_s": None,
    }
    metrics: dict[str, float] = {}
    after_solve: list[float] = []
    while trainer.iteration < trainer.cfg.trainer.iterations:
        metrics = trainer.step()
        train_s += metrics["time/iteration_s"]
        ret = metrics.get(RETURN_KEY, float("-inf"))
        if solve["solve_iteration"] is not None:
            after_solve.append(ret)
        elif ret >= threshold:
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
        "train_s": train_s,
        "final_return": metrics.get(RETURN_KEY),
        "worst_after_solve": min(after_solve) if after_solve else None,
        "final_eval": metrics.get("eval/return_mean"),
    }


COLUMNS = [
    ("amp", "amp", ""),
    ("seed", "seed", ""),
    ("solve_iteration", "solve it", ""),
    ("solve_env_steps", "env steps", ","),
    ("solve_train_s", "train s", ".1f"),
    ("solve_cpu_s", "cpu s", ".1f"),
    ("iterations_run", "its run", ""),
    ("final_return", "last return", ".1f"),
    ("worst_after_solve", "worst after", ".1f"),
    ("final_eval", "eval", ".1f"),
]


def main() -> None:
    args = parse_args()
    set_threads(args.threads)
    rows = []
    for seed in args.seeds:  # amp values alternate within a seed: load drift hits both alike
        for amp in args.amp:
            rows.append(run_one(args.params, seed, amp, args.overrides, args.threshold, args.full))
            print(f"amp {amp} seed {seed}: solve env steps {rows[-1]['solve_env_steps']}", flush=True)
    print(
        f"\nPendulum PPO (train/episode_return_mean >= {args.threshold:g}), {args.params.name}"
        f"{' ' + ' '.join(args.overrides) if args.overrides else ''}"
    )
    print_table(rows, COLUMNS)
    summary = {}
    for amp in args.amp:
        solved = [r for r in rows if r["amp"] == amp and r["solve_iteration"] is not None]
        summary[amp] = {
            "solved": f"{len(solved)}/{len(args.seeds)}",
            "median_env_steps": median([r["solve_env_steps"] for r in solved]),
            "median_train_s": median([r["solve_train_s"] for r in solved]),
        }
        print(
            f"amp {amp}: solved {summary[amp]['solved']}, median env steps "
            f"{summary[amp]['median_env_steps']:,.0f}, median train s {summary[amp]['median_train_s']:.1f}"
        )
    write_json(
        args.json,
        {
            "benchmark": "pendulum",
            "threshold": args.threshold,
            "params": str(args.params),
            "overrides": args.overrides,
            "runs": rows,
            "summary": summary,
        },
    )


if __name__ == "__main__":
    main()
