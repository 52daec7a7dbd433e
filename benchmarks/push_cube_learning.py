"""PushCube learning curve: success rate against env steps and wall time, from a run's curve.csv.

    rlpipe run configs/push_cube.yaml
    python benchmarks/push_cube_learning.py data/push_cube_ppo --out benchmarks/push_cube_learning.png

Prints the env steps and wall time at which the deterministic eval success first reached
``--target`` (default 0.9) and the final values, and draws eval/train success and eval return.
"""

from __future__ import annotations

import argparse
import csv
import itertools
from pathlib import Path

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, default=Path("push_cube_learning.png"))
    parser.add_argument("--target", type=float, default=0.9)
    args = parser.parse_args()
    rows = load(args.run_dir)
    hit = next((r for r in rows if r.get("eval/success_rate", 0) >= args.target), None)
    if hit:
        print(f"eval success >= {args.target:.0%} first at iteration {hit['iteration']:.0f}: "
              f"{hit['env_steps']:,.0f} env steps, {hit['wall_s']:.0f} s wall")
    else:
        print(f"eval success never reached {args.target:.0%}")
    last = rows[-1]
    print(f"final: iteration {last['iteration']:.0f}, {last['env_steps']:,.0f} env steps, "
          f"{last['wall_s']:.0f} s, eval success {last.get('eval/success_rate', float('nan')):.2f}, "
          f"train success {last.get('train/success_rate', float('nan')):.2f}")
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    steps = [r["env_steps"] / 1e6 for r in rows]
    for key, label in (("eval/success_rate", "eval (deterministic)"),
                       ("train/success_rate", "train (sampled actions)")):
        pts = [(s, r[key]) for s, r in zip(steps, rows, strict=True) if key in r]
        if pts:
            ax1.plot(*zip(*pts, strict=True), label=label)
    ax1.axhline(args.target, color="grey", linestyle=":", linewidth=1)
    ax1.set(xlabel="env steps (M)", ylabel="success rate (at episode end)", ylim=(-0.02, 1.02),
            title="PushCube PPO")
    ax1.legend(loc="lower right")
    walls = [r["wall_s"] / 60 for r in rows]
    pts = [(w, r["eval/success_rate"]) for w, r in zip(walls, rows, strict=True)
           if "eval/success_rate" in r]
    if pts:
        ax2.plot(*zip(*pts, strict=True), color="C0")
    ax2.set(xlabel="wall time (min)", ylabel="eval success rate", ylim=(-0.02, 1.02),
            title="same run against wall time")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"plot → {args.out}")


if __name__ == "__main__":
    main()
