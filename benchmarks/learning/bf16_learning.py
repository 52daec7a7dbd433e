"""Does bf16 autocast learn what fp32 learns? Learning curves of both on three tasks, 3 seeds each.

    .venv/bin/python benchmarks/learning/bf16_learning.py [--tasks cartpole pendulum halfcheetah]
        [--seeds 0 1 2] [--halfcheetah-steps 200000] [--threads 1] [--json PATH] [--png PATH]
    .venv/bin/python benchmarks/learning/bf16_learning.py --plot-only --json PATH [--also PATH ...] --png PATH

Tasks (each its shipped config, loaded through ``rlpipe.config.load``):

* ``cartpole``: ``params.yaml`` (torch CartPole, 128 envs × 32 steps; with evaluation off its
  ``stop_when`` never fires, so it runs its 100-iteration cap unless ``--set trainer.iterations=K``);
* ``pendulum``: ``configs/ppo_pendulum.yaml`` (torch Pendulum, 64 × 128, 60 iterations, 492k steps);
* ``halfcheetah``: ``configs/ppo_halfcheetah.yaml`` (gymnasium HalfCheetah-v5, 1 env × 2048) cut to
  ``--halfcheetah-steps`` (default 200k of its 1M: the full budget takes hours on the 2-core CPU).

For every task and seed, ``algorithm.cfg.amp`` none (fp32) and bf16 run one after the other from
the same seed (``trainer.seed=SEED``), store off, no tracking, no eval, no checkpoints, as a
``rlpipe.trainer.Trainer`` (console rows captured) stepped with ``Trainer.step`` as ``rlpipe run``
steps it. The curve is ``train/episode_return_mean`` (the mean of
the last finished training episodes) against env steps. The summary compares the final return (mean
of the last 10 % of iterations) of bf16 against fp32: the per-seed difference, and whether the
bf16 mean lies within the fp32 seeds' spread (min..max widened by one fp32 standard deviation, or
by 2 % of the fp32 mean where the seeds agree, as on a solved CartPole).
The PNG shows the three tasks side by side, fp32 and bf16 in two colours, one thin line per seed
and the mean across seeds thick. Results are written to the JSON after every run, so an
interrupted sweep keeps what finished (``--resume`` skips the runs the JSON already holds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import NEVER, PROJECT_ROOT, environment, load_cfg, set_threads, start_quietly

RETURN_KEY = "train/episode_return_mean"
TASKS = {
    "cartpole": (PROJECT_ROOT / "params.yaml", "CartPole (torch)"),
    "pendulum": (PROJECT_ROOT / "configs" / "ppo_pendulum.yaml", "Pendulum (torch)"),
    "halfcheetah": (PROJECT_ROOT / "configs" / "ppo_halfcheetah.yaml", "HalfCheetah-v5 (gymnasium)"),
}
AMPS = ("none", "bf16")
LABELS = {"none": "fp32", "bf16": "bf16"}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS), help="tasks to run")
    add("--seeds", type=int, nargs="+", default=[0, 1, 2], help="trainer.seed values")
    add("--halfcheetah-steps", type=int, default=200_000, help="env-step budget of HalfCheetah")
    add("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    add("--json", type=Path, default=PROJECT_ROOT / "data" / "bench" / "bf16_learning.json", help="results")
    add("--png", type=Path, default=PROJECT_ROOT / "data" / "bench" / "bf16_learning.png", help="curves")
    add(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra config override for every run (repeatable), e.g. trainer.iterations=25",
    )
    add("--resume", action="store_true", help="keep the runs already in --json, run the rest")
    add("--also", type=Path, nargs="+", default=[], help="other result JSONs to merge into summary and PNG")
    add("--plot-only", action="store_true", help="only redraw --png from --json")
    return parser.parse_args()


def overrides(
    task: str, seed: int, amp: str, data_dir: str, halfcheetah_steps: int, extra: list[str]
) -> list[str]:
    """The task's config with this seed and precision; nothing written but the run directory."""
    sets = [
        f"trainer.seed={seed}",
        f"algorithm.cfg.amp={amp}",
        "tracking.backend=none",
        "store.enabled=false",
        "trainer.enable_eval=false",
        f"trainer.save_freq={NEVER}",
        f"trainer.data_dir={data_dir}",
        "trainer.num_threads=null",
    ]
    if task == "halfcheetah":
        sets.append(f"trainer.iterations={-(-halfcheetah_steps // 2048)}")
    return [*sets, *extra]


def run_one(task: str, seed: int, amp: str, halfcheetah_steps: int, extra: list[str]) -> dict[str, Any]:
    """Train one (task, seed, amp) to the end; the curve and the wall time."""
    from rlpipe.trainer import Trainer  # after set_threads

    params = TASKS[task][0]
    with tempfile.TemporaryDirectory(prefix="rlpipe-bf16-") as data_dir:
        cfg = load_cfg(params, overrides(task, seed, amp, data_dir, halfcheetah_steps, extra))
        trainer = start_quietly(Trainer(cfg))
        steps, returns, start = [], [], time.perf_counter()
        try:
            while trainer.iteration < cfg.trainer.iterations:
                metrics = trainer.step(checkpoint=False)
                steps.append(trainer.env_steps)
                returns.append(metrics.get(RETURN_KEY, float("nan")))
        finally:
            trainer.close()
    return {
        "task": task,
        "seed": seed,
        "amp": amp,
        "env_steps": steps,
        "returns": returns,
        "wall_s": time.perf_counter() - start,
        "final_return": final_return(returns),
    }


def final_return(returns: list[float]) -> float:
    """Mean over the last 10 % of iterations (at least one) of the logged return."""
    tail = [r for r in returns[-max(1, len(returns) // 10) :] if r == r]
    return statistics.fmean(tail) if tail else float("nan")


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per task: final returns of fp32 and bf16 per seed, means, and the verdict."""
    rows = []
    for task in dict.fromkeys(r["task"] for r in runs):
        final = {
            amp: {r["seed"]: r["final_return"] for r in runs if r["task"] == task and r["amp"] == amp}
            for amp in AMPS
        }
        seeds = sorted(set(final["none"]) & set(final["bf16"]))
        if not seeds:
            continue
        fp32, bf16 = [final["none"][s] for s in seeds], [final["bf16"][s] for s in seeds]
        spread = statistics.stdev(fp32) if len(fp32) > 1 else 0.0
        margin = max(spread, 0.02 * abs(statistics.fmean(fp32)))  # a saturated task has no spread
        low, high = min(fp32) - margin, max(fp32) + margin
        bf16_mean = statistics.fmean(bf16)
        wall = {
            amp: statistics.fmean([r["wall_s"] for r in runs if r["task"] == task and r["amp"] == amp])
            for amp in AMPS
        }
        rows.append(
            {
                "task": task,
                "seeds": seeds,
                "fp32_final": fp32,
                "bf16_final": bf16,
                "fp32_mean": statistics.fmean(fp32),
                "bf16_mean": bf16_mean,
                "fp32_std": spread,
                "same": low <= bf16_mean <= high,
                "fp32_wall_s": wall["none"],
                "bf16_wall_s": wall["bf16"],
            }
        )
    return rows


def print_summary(rows: list[dict[str, Any]]) -> None:
    print(
        f"\n{'task':>12} {'fp32 final (per seed)':>30} {'bf16 final (per seed)':>30} "
        f"{'fp32 mean':>10} {'bf16 mean':>10} {'same':>5} {'wall s fp32/bf16':>17}"
    )
    for r in rows:
        per_seed = lambda xs: " ".join(f"{x:.1f}" for x in xs)  # noqa: E731
        print(
            f"{r['task']:>12} {per_seed(r['fp32_final']):>30} {per_seed(r['bf16_final']):>30} "
            f"{r['fp32_mean']:>10.1f} {r['bf16_mean']:>10.1f} {'yes' if r['same'] else 'NO':>5} "
            f"{r['fp32_wall_s']:>8.1f}/{r['bf16_wall_s']:.1f}"
        )


def plot(runs: list[dict[str, Any]], png: Path) -> None:
    """One panel per task: thin lines per seed, the seed mean thick; fp32 and bf16 in two colours."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(r["task"] for r in runs))
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 4), squeeze=False)
    colours = {"none": "tab:blue", "bf16": "tab:orange"}
    for ax, task in zip(axes[0], tasks):
        for amp in AMPS:
            mine = [r for r in runs if r["task"] == task and r["amp"] == amp]
            for r in mine:
                ax.plot(r["env_steps"], r["returns"], color=colours[amp], alpha=0.3, linewidth=0.8)
            if mine:
                length = min(len(r["returns"]) for r in mine)
                mean = [statistics.fmean(r["returns"][i] for r in mine) for i in range(length)]
                ax.plot(
                    mine[0]["env_steps"][:length],
                    mean,
                    color=colours[amp],
                    linewidth=2,
                    label=f"{LABELS[amp]} (mean of {len(mine)} seeds)",
                )
        ax.set_title(TASKS[task][1])
        ax.set_xlabel("env steps")
        ax.set_ylabel("training episode return")
        ax.legend(loc="lower right")
        ax.grid(alpha=0.3)
    fig.suptitle("PPO, fp32 vs bf16 autocast (algorithm.cfg.amp)")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    print(f"curves written to {png}")


def save(path: Path, runs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": "bf16_learning",
        "halfcheetah_steps": args.halfcheetah_steps,
        "runs": runs,
        "summary": summarize(runs),
        "environment": environment(),
    }
    path.write_text(json.dumps(payload, indent=1) + "\n")


def main() -> None:
    args = parse_args()
    runs: list[dict[str, Any]] = []
    if (args.plot_only or args.resume) and args.json.exists():
        runs = json.loads(args.json.read_text())["runs"]
    if not args.plot_only:
        set_threads(args.threads)
        done = {(r["task"], r["seed"], r["amp"]) for r in runs}
        for task in args.tasks:
            for seed in args.seeds:
                for amp in AMPS:  # fp32 and bf16 back to back: load drift hits both alike
                    if (task, seed, amp) in done:
                        continue
                    runs.append(run_one(task, seed, amp, args.halfcheetah_steps, args.overrides))
                    print(
                        f"{task} seed {seed} {LABELS[amp]}: final return {runs[-1]['final_return']:.1f} "
                        f"({runs[-1]['wall_s']:.0f} s)",
                        flush=True,
                    )
                    save(args.json, runs, args)
    for path in args.also:
        runs += json.loads(path.read_text())["runs"]
    print_summary(summarize(runs))
    plot(runs, args.png)


if __name__ == "__main__":
    main()
