"""PushCube learning curve: success rate against env steps and wall time, from a run's curve.csv.

    MUJOCO_GL=egl rlpipe run configs/push_cube.yaml
    rlpipe eval data/push_cube_ppo
    rlpipe export data/push_cube_ppo
    rlpipe eval data/push_cube_ppo --policy data/push_cube_ppo/export/policy.onnx
    python benchmarks/learning/push_cube_learning.py data/push_cube_ppo \
        --out benchmarks/learning/push_cube_learning.png --json benchmarks/results/push_cube.json

Prints the env steps and wall time at which the deterministic eval success (``--metric``, default
``eval/success_at_end``: the cube still in the goal when the episode ends) first reached
``--target`` (default 0.9) and the final values, and draws eval (at the end / at any step) and
train success. ``--json`` also gathers the run's summary (``metrics.json``), the offline eval of
the checkpoint (``eval/metrics.json``) and of the exported file (``eval/policy-metrics.json``) and
the MLflow runs of the experiment with their artifacts (``MLFLOW_TRACKING_URI``).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(run_dir: Path) -> list[dict[str, float]]:
    """Rows of ``curve.csv`` as floats (empty cells dropped), plus cumulative ``wall_s``."""
    rows = []
    with (run_dir / "curve.csv").open() as fh:
        for row in csv.DictReader(fh):
            rows.append({k: float(v) for k, v in row.items() if v not in ("", None)})
    walls = itertools.accumulate(r.get("time/iteration_s", 0.0) for r in rows)
    for row, wall in zip(rows, walls, strict=True):
        row["wall_s"] = wall
    return rows


def mlflow_artifacts(exp_name: str) -> list[dict[str, Any]]:
    """Every MLflow run of ``exp_name`` (``MLFLOW_TRACKING_URI``): id, name, status, artifact paths."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if not uri:
        return []
    import mlflow

    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name(exp_name)
    listing = []
    for run in client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"]) if exp else []:
        paths, todo = [], [""]
        while todo:
            for info in client.list_artifacts(run.info.run_id, todo.pop() or None):
                (todo if info.is_dir else paths).append(info.path)
        listing.append(
            {
                "run_id": run.info.run_id,
                "run_name": run.info.run_name,
                "status": run.info.status,
                "artifacts": sorted(paths),
            }
        )
    return listing


def read_json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, default=Path("push_cube_learning.png"))
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--metric", default="eval/success_at_end")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = load(args.run_dir)
    hit = next((r for r in rows if r.get(args.metric, 0) >= args.target), None)
    if hit:
        print(
            f"{args.metric} >= {args.target:.0%} first at iteration {hit['iteration']:.0f}: "
            f"{hit['env_steps']:,.0f} env steps, {hit['wall_s']:.0f} s wall"
        )
    else:
        print(f"{args.metric} never reached {args.target:.0%}")
    last = rows[-1]
    evals = [r for r in rows if "eval/success_rate" in r]
    final = evals[-1] if evals else {}
    nan = float("nan")
    print(
        f"final: iteration {last['iteration']:.0f}, {last['env_steps']:,.0f} env steps, "
        f"{last['wall_s']:.0f} s, eval success at end {final.get('eval/success_at_end', nan):.2f}, "
        f"at any step {final.get('eval/success_rate', nan):.2f}, "
        f"train success {last.get('train/success_rate', nan):.2f}"
    )
    plot(rows, args)
    if args.json:
        summary = {
            "run_dir": str(args.run_dir),
            "metric": args.metric,
            "target": args.target,
            "first_hit": {k: hit[k] for k in ("iteration", "env_steps", "wall_s")} if hit else None,
            "final_iteration": last["iteration"],
            "env_steps": last["env_steps"],
            "train_wall_s": last["wall_s"],
            "online_eval": {k: v for k, v in final.items() if k.startswith("eval/")},
            "summary": read_json(args.run_dir / "metrics.json"),
            "checkpoint_eval": read_json(args.run_dir / "eval" / "metrics.json"),
            "onnx_eval": read_json(args.run_dir / "eval" / "policy-metrics.json"),
            "mlflow_runs": mlflow_artifacts(args.run_dir.name),
            "load_avg_now": os.getloadavg(),
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2, default=str))
        print(f"results → {args.json}")


def plot(rows: list[dict[str, float]], args: argparse.Namespace) -> None:
    """Success against env steps (eval at the end / at any step, train) and against wall time."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    steps = [r["env_steps"] / 1e6 for r in rows]
    for key, label in (
        ("eval/success_at_end", "eval, at the episode's end (deterministic)"),
        ("eval/success_rate", "eval, at any step (deterministic)"),
        ("train/success_rate", "train, at any step (sampled actions)"),
    ):
        pts = [(s, r[key]) for s, r in zip(steps, rows, strict=True) if key in r]
        if pts:
            ax1.plot(*zip(*pts, strict=True), label=label)
    ax1.axhline(args.target, color="grey", linestyle=":", linewidth=1)
    ax1.set(xlabel="env steps (M)", ylabel="success rate", ylim=(-0.02, 1.02), title="PushCube PPO")
    ax1.legend(loc="lower right", fontsize=8)
    walls = [r["wall_s"] / 60 for r in rows]
    pts = [(w, r[args.metric]) for w, r in zip(walls, rows, strict=True) if args.metric in r]
    if pts:
        ax2.plot(*zip(*pts, strict=True), color="C0")
    ax2.set(
        xlabel="wall time (min)", ylabel=args.metric, ylim=(-0.02, 1.02), title="same run against wall time"
    )
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"plot → {args.out}")


if __name__ == "__main__":
    main()
