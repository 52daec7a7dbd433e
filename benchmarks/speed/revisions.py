"""Two revisions of rlpipe on the same workloads, interleaved: env steps/s of the old against the new.

    .venv/bin/python benchmarks/speed/revisions.py [--old fe4fc7d] [--new REV] [--rounds 3]
        [--workloads w1 massive scaling] [--scaling-sizes 1024 16384] [--smoke] [--json PATH]

``--old`` is checked out as a detached git worktree in a temporary folder (removed at the end);
``--new`` likewise, or, when left out, the working tree as it is. Every run is a subprocess
``python -m rlpipe run params.yaml --set …`` started in the tree with ``PYTHONPATH=<tree>``, so that
tree's ``rlpipe`` is imported (checked before the rounds) with its own ``params.yaml``; every
``--set`` key exists in both revisions. Workloads, sized as the scripts they come from:

* ``w1`` (``benchmarks/peers/sb3_compare.py``'s rlpipe row with store and MLflow on): gymnasium
  ``CartPole-v1`` (``env.backend=auto``), 8 envs × 128 steps, 64×64 tanh actor and critic, PPO 4
  epochs × minibatches of 256, lr 2.5e-4, seed 0, ``trainer.num_threads=auto``, 98 iterations
  (100,000 env steps in whole rollouts), every rollout stored, MLflow on a sqlite store per tree;
* ``massive`` (``benchmarks/peers/throughput.py``): torch ``CartPole``, 4,096 envs × 32 steps,
  256×256 ReLU, 4 epochs × minibatches of 16,384, store and tracking off, no periodic checkpoint,
  1 + 10 iterations;
* ``scaling`` (``benchmarks/peers/scaling.py``): the same at each of ``--scaling-sizes`` envs N,
  minibatch N·32/8, one torch thread, 1 + 3 iterations (1 + 1 when N·32 > 131,072).

Eval and stop rules are off everywhere. Before the rounds each tree makes one small untimed run
(compiling its bytecode, creating its MLflow store). Per round the two trees run one after the
other, the one going first alternating. Two figures per run, both leaving out the first iteration
(start-up, first-touch allocations): *loop* env steps/s, from the arrival times of the console rows
of iteration 1 and of the ``done:`` line (so logging, checkpoints and the final flush of the store
and MLflow count), and *timed* env steps/s, the ``curve.csv`` sum of ``time/iteration_s`` of
iterations 2… (collect through update and eval, as the trainer times it). The tables give them per
round and the ratio new/old; the verdict is the median loop ratio against 0.97 (within 3 %).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import NEVER, PROJECT_ROOT, median, print_table, write_json

TOLERANCE = 0.97
EXP = "revisions"
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s")  # a console row: iteration, env_steps, …
COMMON = (
    "trainer.device=cpu",
    "trainer.stop_when=[]",
    "trainer.enable_eval=false",
    "algorithm.cfg.n_epochs=4",
    f"trainer.exp_name={EXP}",
)
W1 = (
    "env.id=CartPole-v1",
    "env.backend=auto",
    "trainer.seed=0",
    "trainer.num_threads=auto",
    "algorithm.cfg.learning_rate=2.5e-4",
    "store.enabled=true",
    "tracking.backend=mlflow",
)
TORCH = ("env.id=CartPole", "store.enabled=false", "tracking.backend=none", f"trainer.save_freq={NEVER}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--old", default="fe4fc7d", help="the revision measured against (default fe4fc7d)")
    add("--new", default=None, help="the revision measured (default: the working tree as it is)")
    add("--rounds", type=int, default=None, help="old/new pairs per workload (default 3; --smoke: 1)")
    add("--workloads", nargs="+", default=["w1", "massive", "scaling"], choices=["w1", "massive", "scaling"])
    add("--scaling-sizes", type=int, nargs="+", default=[1024, 16384], help="envs N of the scaling points")
    add("--smoke", action="store_true", help="tiny sizes and 2 iterations: checks the script in seconds")
    add(
        "--json",
        type=Path,
        default=None,
        help="results (default benchmarks/results/revisions.json; --smoke: data/bench/revisions-smoke.json)",
    )
    args = parser.parse_args()
    args.rounds = args.rounds or (1 if args.smoke else 3)
    default = "data/bench/revisions-smoke.json" if args.smoke else "benchmarks/results/revisions.json"
    args.json = args.json or PROJECT_ROOT / default
    return args


def workload(
    envs: int, horizon: int, hidden: int, activation: str, batch: int, iterations: int, extra: tuple[str, ...]
) -> list[str]:
    """``--set`` overrides of one workload (actor and critic ``hidden``×``hidden``)."""
    net = f"{{hidden_sizes: [{hidden}, {hidden}], activation: {activation}}}"
    return [
        *COMMON,
        *extra,
        f"trainer.num_envs={envs}",
        f"trainer.buffer_size={horizon}",
        f"trainer.iterations={iterations}",
        f"policy.actor.network_cfg={net}",
        f"policy.critic.network_cfg={net}",
        f"algorithm.cfg.batch_size={batch}",
    ]


def workloads(args: argparse.Namespace) -> dict[str, list[str]]:
    """Name → overrides of every selected workload (``--smoke``: few envs, 2 iterations)."""
    s = args.smoke
    out: dict[str, list[str]] = {}
    if "w1" in args.workloads:
        out["w1"] = workload(
            4 if s else 8,
            16 if s else 128,
            64,
            "tanh",
            32 if s else 256,
            2 if s else math.ceil(100_000 / 1024),
            W1,
        )
    if "massive" in args.workloads:
        out["massive"] = workload(
            64 if s else 4096, 8 if s else 32, 256, "relu", 128 if s else 16384, 2 if s else 11, TORCH
        )
    if "scaling" in args.workloads:
        horizon = 8 if s else 32
        for n in [32, 64] if s else args.scaling_sizes:
            iterations = 2 if s else (4 if n * horizon <= 131_072 else 2)
            out[f"scaling-{n}"] = workload(
                n, horizon, 256, "relu", n * horizon // 8, iterations, (*TORCH, "trainer.num_threads=1")
            )
    return out


def git(*argv: str) -> str:
    return subprocess.run(
        ["git", *argv], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def checkout(rev: str, root: Path, name: str) -> tuple[Path, str]:
    """A detached worktree of ``rev`` under ``root``; its path and full commit."""
    try:
        commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    except subprocess.CalledProcessError:
        print(f"--{name} {rev!r}: not a revision of {PROJECT_ROOT}", file=sys.stderr)
        raise SystemExit(2) from None
    git("worktree", "add", "--detach", str(root / name), commit)
    return root / name, commit


def child_env(tree: Path) -> dict[str, str]:
    """The environment of a run in ``tree``: its package first, rows unbuffered, our MLflow store."""
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}  # it wins over tracking.uri
    return {**env, "PYTHONPATH": str(tree), "PYTHONUNBUFFERED": "1"}


def check_import(tree: Path) -> None:
    """Fail unless ``python -m rlpipe`` in ``tree`` imports ``tree``'s package (not the editable one)."""
    out = subprocess.run(
        [sys.executable, "-c", "import rlpipe; print(rlpipe.__file__)"],
        cwd=tree,
        env=child_env(tree),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(out).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"{tree}: PYTHONPATH imports rlpipe from {out}, not from the tree")


def run_once(side: str, tree: Path, overrides: list[str], tmp: Path) -> dict[str, Any]:
    """One ``rlpipe run`` in ``tree``; its console rows timed as they arrive, its curve and summary read."""
    data_dir = Path(tempfile.mkdtemp(dir=tmp, prefix="data-"))
    sets = [*overrides, f"trainer.data_dir={data_dir}", f"tracking.uri=sqlite:///{tmp}/mlflow-{side}.db"]
    cmd = [sys.executable, "-m", "rlpipe", "run", "params.yaml", *(a for o in sets for a in ("--set", o))]
    load, start = os.getloadavg()[0], time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=tree, env=child_env(tree), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    first: tuple[float, int] | None = None
    done_t, tail = math.nan, deque(maxlen=40)
    assert proc.stdout is not None
    for line in proc.stdout:
        now = time.perf_counter()
        tail.append(line)
        if first is None and (row := ROW.match(line)):
            first = (now, int(row[2]))
        elif line.startswith("done:"):
            done_t = now
    process_s = time.perf_counter() - start
    if proc.wait() != 0 or first is None:
        raise SystemExit(f"run failed in {tree}: {' '.join(cmd)}\n{''.join(tail)}")
    run_dir = data_dir / EXP
    summary = json.loads((run_dir / "metrics.json").read_text())
    with (run_dir / "curve.csv").open() as fh:
        curve = [r for r in csv.DictReader(fh) if int(float(r["iteration"])) > 1]
    later_steps = summary["env_steps"] - first[1]
    timed_s = sum(float(r["time/iteration_s"]) for r in curve)
    shutil.rmtree(data_dir)
    return {
        "env_steps": summary["env_steps"],
        "iterations": summary["iterations"],
        "wall_s": summary["wall_s"],
        "process_s": process_s,
        "loop_s": done_t - first[0],
        "sps": later_steps / (done_t - first[0]) if curve else math.nan,
        "timed_sps": later_steps / timed_s if curve else math.nan,
        "load_1min": load,
    }


def ratios(pairs: list[dict[str, Any]], key: str) -> list[float]:
    return [p["new"][key] / p["old"][key] for p in pairs]


def measure(
    name: str, overrides: list[str], trees: dict[str, Path], args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    """``--rounds`` old/new pairs of one workload (which side goes first alternates); table and summary."""
    pairs = []
    for r in range(args.rounds):
        pair = {}
        for side in ("old", "new") if r % 2 == 0 else ("new", "old"):
            pair[side] = run_once(side, trees[side], overrides, tmp)
            print(
                f"  {name} round {r + 1}/{args.rounds} {side}: {pair[side]['sps']:,.0f} env steps/s "
                f"(loop {pair[side]['loop_s']:.1f} s, load {pair[side]['load_1min']:.1f})",
                flush=True,
            )
        pairs.append({"round": r + 1, "old": pair["old"], "new": pair["new"]})
    rows = [
        {
            "round": p["round"],
            "old": p["old"]["sps"],
            "new": p["new"]["sps"],
            "ratio": p["new"]["sps"] / p["old"]["sps"],
            "old_t": p["old"]["timed_sps"],
            "new_t": p["new"]["timed_sps"],
            "ratio_t": p["new"]["timed_sps"] / p["old"]["timed_sps"],
        }
        for p in pairs
    ]
    print(f"\n{name}: env steps/s after iteration 1, old {args.old} against new")
    print_table(rows, COLUMNS)
    loop, timed = ratios(pairs, "sps"), ratios(pairs, "timed_sps")
    result = {
        "overrides": overrides,
        "rounds": pairs,
        "median_ratio": median(loop),
        "min_ratio": min(loop),
        "max_ratio": max(loop),
        "median_ratio_timed": median(timed),
        "min_ratio_timed": min(timed),
        "max_ratio_timed": max(timed),
    }
    verdict = "within" if result["median_ratio"] >= TOLERANCE else "NOT within"
    verdict = "smoke sizes, no verdict" if args.smoke else f"{verdict} 3 %"
    print(
        f"{name}: new/old loop {result['median_ratio']:.3f} (spread {min(loop):.3f}..{max(loop):.3f}), "
        f"timed {result['median_ratio_timed']:.3f} ({min(timed):.3f}..{max(timed):.3f}) — {verdict}\n"
    )
    return result


COLUMNS = [
    ("round", "round", ""),
    ("old", "old loop sps", ",.0f"),
    ("new", "new loop sps", ",.0f"),
    ("ratio", "new/old", ".3f"),
    ("old_t", "old timed sps", ",.0f"),
    ("new_t", "new timed sps", ",.0f"),
    ("ratio_t", "new/old timed", ".3f"),
]


def main() -> None:
    args = parse_args()
    chosen = workloads(args)
    tmp = Path(tempfile.mkdtemp(prefix="rlpipe-revisions-"))
    load_before = loadavg()
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    try:
        old, old_commit = checkout(args.old, tmp, "old")
        if args.new is None:
            new, new_commit = PROJECT_ROOT, git("rev-parse", "HEAD") + ("+working-tree" if dirty else "")
        else:
            new, new_commit = checkout(args.new, tmp, "new")
        trees = {"old": old, "new": new}
        print(
            f"old {args.old} = {old_commit[:12]} in {old}; new {args.new or 'working tree'} = "
            f"{new_commit[:12]} in {new}; {args.rounds} rounds, {nproc()} CPUs, load {load_before}"
        )
        warm = workloads(argparse.Namespace(smoke=True, workloads=["w1"]))["w1"]
        for side, tree in trees.items():
            check_import(tree)
            run_once(side, tree, warm, tmp)  # untimed: bytecode compiled, MLflow store created
            print(f"  warm-up {side}: rlpipe from {tree}", flush=True)
        results = {name: measure(name, overrides, trees, args, tmp) for name, overrides in chosen.items()}
    finally:
        for name in ("old", "new"):
            if (tmp / name).exists():
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(tmp / name)],
                    cwd=PROJECT_ROOT,
                    check=False,
                    capture_output=True,
                )
        shutil.rmtree(tmp, ignore_errors=True)
        git("worktree", "prune")
    load_after = loadavg()
    print(f"machine: {nproc()} CPUs, load average {load_before} before, {load_after} after")
    write_json(
        args.json,
        {
            "benchmark": "revisions",
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "smoke": args.smoke,
            "host": {"nproc": nproc(), "load_before": load_before, "load_after": load_after},
            "old": {"rev": args.old, "commit": old_commit},
            "new": {"rev": args.new, "commit": new_commit},
            "rounds": args.rounds,
            "tolerance": TOLERANCE,
            "workloads": results,
        },
    )


def nproc() -> int:
    return len(os.sched_getaffinity(0))


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


if __name__ == "__main__":
    main()
