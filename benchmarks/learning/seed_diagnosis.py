"""Why a seed falls short: each zoo run's curves and stored rollouts, side by side, weak seeds first.

    .venv/bin/python benchmarks/learning/seed_diagnosis.py --out data/zoo --tasks hopper walker2d
        [--zoo-json benchmarks/results/zoo.json] [--json PATH]

Reads what every ``rlpipe run`` leaves in its run directory, nothing else: ``<out>/<task>/seed<s>/
zoo_<task>/`` (the layout ``benchmarks/zoo.py`` writes) with its ``metrics.json`` (the final
deterministic eval), ``curve.csv`` (per iteration: the policy's entropy, the value function's
explained variance and loss, the update's approximate KL and clip fraction, the eval returns) and
its stored rollouts (``rollouts/iter-*.zarr``), every one of the first and of the last fifth of the
run: the episode length (env steps per finished episode), the share of episodes that ended by
termination (a fall) rather than the time limit, the reward per step, and the share of sampled
action components outside the action space's bounds (what the env clips).

Per seed it prints the ratio of the final eval to the task's reference (``zoo.json``'s summary), the
best eval on the way (a seed that peaked and fell is not a seed that never learned), and those
figures early, midway and at the end; per figure, Spearman's rank correlation with the ratio over
the task's seeds says which of them moves with the outcome. A diagnosis, not a test: with 10 seeds a
correlation of ±0.6 is suggestive, not proof.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import PROJECT_ROOT, print_table, write_json

from rlpipe.artifacts.layout import RunLayout
from rlpipe.artifacts.zarr_read import read_rollout

CURVE_KEYS = {
    "entropy": "update/entropy",
    "expl_var": "update/explained_variance",
    "value_loss": "update/value_loss",
    "approx_kl": "update/approx_kl",
    "clip_frac": "update/clip_fraction",
    "train_return": "train/episode_return_mean",
}
PHASES = {"early": (0.0, 0.2), "mid": (0.4, 0.6), "late": (0.8, 1.0)}
"""Fractions of the run whose iterations are averaged for each curve figure."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--out", type=Path, default=PROJECT_ROOT / "data" / "zoo", help="zoo.py's --out (default data/zoo)")
    add("--tasks", nargs="+", required=True, help="zoo task names (configs/zoo/<task>.yaml stems)")
    add("--zoo-json", type=Path, default=PROJECT_ROOT / "benchmarks" / "results" / "zoo.json")
    add("--json", type=Path, default=None, help="also write the per-seed figures here")
    return parser.parse_args(argv)


def curve_rows(path: Path) -> list[dict[str, float]]:
    """``curve.csv`` as floats (empty cells left out)."""
    with path.open(newline="") as file:
        rows = []
        for row in csv.DictReader(file):
            rows.append({k: float(v) for k, v in row.items() if v not in ("", None) and _finite(v)})
        return rows


def _finite(cell: str) -> bool:
    try:
        return math.isfinite(float(cell))
    except ValueError:
        return False


def phase_mean(rows: list[dict[str, float]], key: str, phase: tuple[float, float]) -> float | None:
    """Mean of ``key`` over the iterations in the ``phase`` fraction of the run."""
    lo, hi = int(phase[0] * len(rows)), max(int(phase[1] * len(rows)), int(phase[0] * len(rows)) + 1)
    values = [r[key] for r in rows[lo:hi] if key in r]
    return sum(values) / len(values) if values else None


def rollout_facts(paths: list[Any]) -> dict[str, float]:
    """Episode length, termination share, reward per step and out-of-bounds action share over ``paths``."""
    steps = episodes = terminated = outside = components = 0
    reward = 0.0
    for path in paths:
        rollout, attrs = read_rollout(path)
        taken = rollout[:, :-1]  # the last slot holds the bootstrap observation only
        action, space = taken["action"], attrs["spaces"]["action"]
        low, high = action.new_tensor(space["low"]), action.new_tensor(space["high"])
        steps += taken["done"].numel()
        episodes += int(taken["done"].sum())
        terminated += int(taken["terminated"].sum())
        reward += float(taken["reward"].sum())
        outside += int(((action < low) | (action > high)).sum())
        components += action.numel()
    return {
        "episode_length": steps / max(episodes, 1),
        "terminated_share": terminated / max(episodes, 1),
        "reward_per_step": reward / max(steps, 1),
        "action_outside": outside / max(components, 1),
    }


def diagnose(run_root: Path, reference: float | None) -> dict[str, Any]:
    """One run's figures: the final and best eval, the phase means of the curves, the rollout facts."""
    metrics = json.loads((run_root / "metrics.json").read_text())
    rows = curve_rows(run_root / "curve.csv")
    final = metrics.get("eval/return_mean")
    evals = [r["eval/return_mean"] for r in rows if "eval/return_mean" in r]
    figures: dict[str, Any] = {
        "final_eval": final,
        "best_eval": max(evals) if evals else None,
        "ratio": final / reference if final is not None and reference else None,
    }
    for name, key in CURVE_KEYS.items():
        for phase, span in PHASES.items():
            figures[f"{name}_{phase}"] = phase_mean(rows, key, span)
    paths = RunLayout(run_root).rollout_paths()
    iterations = sorted(paths)
    for phase in ("early", "late"):
        lo, hi = (int(f * len(iterations)) for f in PHASES[phase])
        picks = iterations[lo:hi]
        if picks:
            for name, value in rollout_facts([paths[i] for i in picks]).items():
                figures[f"{name}_{phase}"] = value
    return figures


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties); ``None`` below 4 pairs or with no spread."""
    if len(xs) < 4:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx, vy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return cov / math.sqrt(vx * vy) if vx and vy else None


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def task_report(task: str, out: Path, reference: float | None) -> dict[int, dict[str, Any]]:
    """Every finished seed of ``task`` under ``out``."""
    seeds = {}
    for seed_dir in sorted((out / task).glob("seed*"), key=lambda p: int(p.name[4:])):
        root = seed_dir / f"zoo_{task}"
        if (root / "metrics.json").is_file() and (root / "curve.csv").is_file():
            seeds[int(seed_dir.name[4:])] = diagnose(root, reference)
    return seeds


def print_task(task: str, seeds: dict[int, dict[str, Any]]) -> None:
    shown = ["ratio", "best_eval", "final_eval", "entropy_early", "entropy_late", "expl_var_late",
             "approx_kl_late", "clip_frac_late", "episode_length_late", "terminated_share_late",
             "action_outside_late"]  # fmt: skip
    rows = [{"seed": s, **f} for s, f in sorted(seeds.items(), key=_by_ratio)]
    print(f"\n{task}: {len(seeds)} seeds, weakest first")
    print_table(rows, [("seed", "seed", "d"), *((k, k, ".3g") for k in shown)])
    ratios = [f["ratio"] for f in seeds.values()]
    if None in ratios:
        return
    correlations = []
    for key in sorted({k for f in seeds.values() for k in f} - {"ratio", "final_eval", "best_eval"}):
        pairs = [(f[key], f["ratio"]) for f in seeds.values() if f.get(key) is not None]
        rho = spearman([p[0] for p in pairs], [p[1] for p in pairs])
        if rho is not None:
            correlations.append({"figure": key, "rho": rho, "seeds": len(pairs)})
    correlations.sort(key=lambda c: -abs(c["rho"]))
    if correlations:
        print_table(
            correlations[:10],
            [("figure", "figure", "s"), ("rho", "Spearman with ratio", "+.2f"), ("seeds", "seeds", "d")],
        )


def _by_ratio(item: tuple[int, dict[str, Any]]) -> float:
    ratio = item[1].get("ratio")
    return ratio if ratio is not None else math.inf


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    summary = json.loads(args.zoo_json.read_text()).get("summary", {}) if args.zoo_json.is_file() else {}
    report = {}
    for task in args.tasks:
        reference = (summary.get(task) or {}).get("reference")
        seeds = task_report(task, args.out, reference)
        if not seeds:
            print(f"{task}: no finished run under {args.out / task}", file=sys.stderr)
            continue
        print_task(task, seeds)
        report[task] = {"reference": reference, "seeds": seeds}
    if args.json:
        write_json(args.json, {"benchmark": "seed_diagnosis", "out": str(args.out), "tasks": report})
    return 0 if report else 1


if __name__ == "__main__":
    sys.exit(main())
