"""Tune the default experiment: wall time of training until ``trainer.stop_when`` stops it, per candidate.

    .venv/bin/python benchmarks/learning/tune_default.py [--seeds 0 1 2 3 4] [--candidate NAME KEY=VALUE ...]
        [--json PATH]

Each candidate is the default ``params.yaml`` with some ``--set`` overrides; each runs once per
seed, in this process (imports paid once) as ``Trainer(cfg).train()``, with
``tracking.backend=none`` (the default's MLflow run is written by another process) and a temporary
``trainer.data_dir`` (the rollout store stays on, as in the default). Candidates and seeds are
interleaved (every candidate runs seed s before any runs seed s+1). Reported per candidate: seeds
solved (the final deterministic eval ≥ 475, as ``make run`` checks), iterations and the run's own
training wall time (``wall_s``: collect, store hand-off, advantage, update, evaluations,
checkpoints) — median and worst over the seeds.
``make run``'s time to exit is this plus the start-up (``benchmarks/speed/startup.py``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import DEFAULT_PARAMS, load_cfg, print_machine, write_json

from rlpipe.trainer import Trainer

CANDIDATES: dict[str, list[str]] = {
    "default": [],
    "mb2048": ["algorithm.cfg.batch_size=2048"],
    "mb2048-lr3e-3": ["algorithm.cfg.batch_size=2048", "algorithm.cfg.learning_rate=3.0e-3"],
    "epochs6": ["algorithm.cfg.n_epochs=6"],
    "eval3": ["trainer.eval_freq=12288"],
}
SOLVED = 475.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument(
        "--candidate",
        nargs="+",
        action="append",
        default=None,
        metavar="NAME [KEY=VALUE]",
        help="a candidate: its name, then its overrides (repeatable; default: CANDIDATES)",
    )
    parser.add_argument("--json", type=Path, default=None)
    return parser.parse_args()


def one_run(overrides: list[str], seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rlpipe-tune-") as tmp:
        cfg = load_cfg(
            DEFAULT_PARAMS,
            [*overrides, f"trainer.seed={seed}", "tracking.backend=none", f"trainer.data_dir={tmp}"],
        )
        summary = Trainer(cfg).train()
    return {
        "seed": seed,
        "iterations": summary["iterations"],
        "wall_s": summary["wall_s"],
        "eval": summary.get("eval/return_mean", float("nan")),
    }


def main() -> None:
    args = parse_args()
    candidates = {c[0]: c[1:] for c in args.candidate} if args.candidate else CANDIDATES
    print_machine()
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in candidates}
    for seed in args.seeds:
        for name, overrides in candidates.items():
            result = one_run(overrides, seed)
            results[name].append(result)
            print(
                f"seed {seed} {name:16s} iterations {result['iterations']:3d}  "
                f"wall {result['wall_s']:6.2f} s  eval {result['eval']:6.1f}",
                flush=True,
            )
    print(f"\n{'candidate':16s} solved  iter (median, max)  wall s (median, max)")
    for name, rows in results.items():
        solved = sum(r["eval"] >= SOLVED for r in rows)
        iters, walls = [r["iterations"] for r in rows], [r["wall_s"] for r in rows]
        print(
            f"{name:16s} {solved}/{len(rows)}   {statistics.median(iters):5.1f} {max(iters):4d}       "
            f"{statistics.median(walls):6.2f} {max(walls):6.2f}"
        )
    if args.json:
        write_json(args.json, {"candidates": candidates, "results": results})


if __name__ == "__main__":
    main()
