"""The zoo: every tuned config of ``configs/zoo/`` trained for several seeds, beside published figures.

    .venv/bin/python benchmarks/zoo.py [--tasks hopper walker2d ...] [--seeds 0-9 | 0 1 2] [--iterations N]
        [--set KEY=VALUE ...] [--jobs K] [--threads 1] [--out data/zoo] [--json benchmarks/results/zoo.json]
        [--plots benchmarks/results/zoo] [--configs configs/zoo] [--checkpoints 10] [--mlflow-uri URI]
    .venv/bin/python benchmarks/zoo.py --from-json [--json …] [--plots …]

A task is a params file ``<configs>/<task>.yaml`` (``--tasks``: their stems, default all); ``--seeds``
takes integers and inclusive ranges (``0-9``, ``0-2 7``; default ``0 1 2``). Each (task, seed) is one
``rlpipe run <config> --set …`` in a subprocess, the user's own path (every rollout stored, MLflow on
as the config says), with ``--set`` overrides applied first and then
``trainer.seed=<seed>``, ``trainer.exp_name=zoo_<task>`` (one MLflow experiment per task:
``rlpipe compare --experiment zoo_<task>`` lists its seeds), ``trainer.data_dir=<out>/<task>/seed<seed>``
(the run directory is ``<out>/<task>/seed<seed>/zoo_<task>``), ``trainer.num_threads=<threads>``,
``trainer.iterations`` with ``--iterations``, and ``trainer.save_freq`` lowered so a run checkpoints at
least ``--checkpoints`` times. ``--jobs K`` runs K of them at once; each run's output goes to
``<out>/<task>/seed<seed>/rlpipe.log``. ``--mlflow-uri`` sets ``MLFLOW_TRACKING_URI`` for the runs.

Resumable: a run whose ``metrics.json`` says it reached ``trainer.iterations`` (or a ``stop_when``
condition) is not run again, its figures are read back from its run directory (refused when it was
trained with other training params); a run directory holding rollouts or checkpoints but no final
summary (killed, interrupted, or a larger ``--iterations``) continues with ``rlpipe run --resume`` from
its last checkpoint. The JSON is rewritten after every run, so a crash loses nothing; rows of an
earlier JSON from the same ``--configs`` folder are kept unless this invocation ran them again.

Per run (``rows``): the config, env id, algorithm, seed, env steps and budget, the final deterministic
eval (``eval/return_mean`` of ``metrics.json``; ``eval/success_rate`` and ``eval/success_at_end`` where
the env reports success), the final training return (``train/episode_return_mean``), the training wall
seconds (rlpipe's ``wall_s``, summed over resumes) and env steps per second of them, the CPU seconds and
wall seconds of the ``rlpipe run`` processes (start-up and the MLflow process included; unknown for a
run this script did not start), and the learning curve from ``curve.csv`` (env steps → training return,
at most ``_zoo.MAX_POINTS`` points, and env steps → eval return at every eval). Per task
(``summary``): mean and population std over seeds of the final eval return; its IQM, mean and median
with 95 % stratified-bootstrap intervals (``_aggregate.py``); the reference figure of ``_references.py``
with its source and budget, the ratio to it (the same three aggregates, each seed's ratio, the share
of seeds at ≥ 0.5× and ≥ 0.8×). Figures in ``--plots``: one PNG of the curves per task,
``summary-ratios.png`` (each task's ratio, IQM and interval) and ``summary-profile.png`` (the
performance profile over the tasks with a reference). ``docs/hooks/zoo.py`` turns the JSON into the
docs' Results page.

``--from-json`` trains nothing and reads no run directory: it recomputes the summary and redraws every
figure from the rows already in ``--json`` (their curves included), keeping the rest of the file (the
seeds, overrides and machine it records) as it is: how a JSON written before a new aggregate, or
copied from the machine that trained, is brought up to date.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared helpers

from _bench import PROJECT_ROOT, print_table, set_threads, write_json
from _references import reference
from _zoo import plot, plot_profile, plot_ratios, read_curve, summarize

from rlpipe.artifacts.layout import RunLayout
from rlpipe.config import ConfigError, RunConfig, load, training_diff, training_params

SEGMENTS = "zoo_segments.json"
"""Beside the run directory: one entry per ``rlpipe run`` process this script started for the run."""
LOG = "rlpipe.log"
RESULTS = PROJECT_ROOT / "benchmarks" / "results"
RATIOS_PNG, PROFILE_PNG = "summary-ratios.png", "summary-profile.png"


@dataclass(frozen=True)
class Run:
    """One (task, seed): its params file, the overrides that make it, and where it lives."""

    task: str
    config: Path
    seed: int
    overrides: tuple[str, ...]
    cfg: RunConfig

    @property
    def data_dir(self) -> Path:
        """``<out>/<task>/seed<seed>``: ``trainer.data_dir`` of the run, its log and segments beside it."""
        return Path(self.cfg.trainer.data_dir)

    @property
    def layout(self) -> RunLayout:
        """The run directory ``<data_dir>/zoo_<task>``."""
        return RunLayout(self.cfg.run_dir)

    @property
    def budget(self) -> int:
        """Env steps of ``trainer.iterations`` full iterations."""
        t = self.cfg.trainer
        return t.iterations * t.num_envs * t.buffer_size


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--tasks", nargs="+", default=None, help="config stems in --configs (default: all)")
    add(
        "--seeds",
        nargs="+",
        default=["0-2"],
        metavar="SEEDS",
        help="trainer.seed values: integers and inclusive ranges, e.g. 0-9 or 0 1 2 (default 0-2)",
    )
    add("--iterations", type=int, default=None, help="trainer.iterations of every run")
    add(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override for every run (repeatable), as rlpipe run --set",
    )
    add("--jobs", type=int, default=1, help="runs at once, each its own process (default 1)")
    add("--threads", type=int, default=1, help="trainer.num_threads of every run (default 1)")
    add("--checkpoints", type=int, default=10, help="at least this many checkpoints a run (default 10)")
    add("--configs", type=Path, default=PROJECT_ROOT / "configs" / "zoo", help="folder of task configs")
    add("--out", type=Path, default=PROJECT_ROOT / "data" / "zoo", help="run directories (default data/zoo)")
    add("--json", type=Path, default=RESULTS / "zoo.json", help="results JSON (default: results/zoo.json)")
    add("--plots", type=Path, default=RESULTS / "zoo", help="curve PNGs (default: results/zoo/)")
    add("--mlflow-uri", default=None, help="MLFLOW_TRACKING_URI of the runs (default: rlpipe's)")
    add(
        "--from-json",
        action="store_true",
        help="train nothing: recompute the summary and figures from the rows of --json",
    )
    args = parser.parse_args(argv)
    try:
        args.seeds = seed_list(args.seeds)
    except ValueError as exc:
        parser.error(f"--seeds: {exc}")
    for name in ("jobs", "threads", "checkpoints"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}: got {getattr(args, name)}; accepted: a positive integer")
    if args.iterations is not None and args.iterations < 1:
        parser.error(f"--iterations: got {args.iterations}; accepted: a positive integer")
    args.out, args.configs = args.out.resolve(), args.configs.resolve()
    configs = sorted(args.configs.glob("*.yaml"))
    known = {p.stem: p for p in configs}
    unknown = [t for t in args.tasks or [] if t not in known]
    if not known or unknown:
        parser.error(
            f"--tasks: no config {args.configs}/{(unknown or ['*'])[0]}.yaml; accepted: "
            f"{', '.join(known) or 'none (the folder holds no .yaml)'}"
        )
    args.task_configs = {t: known[t] for t in (args.tasks or known)}
    return args


def seed_list(tokens: list[str]) -> list[int]:
    """``["0-2", "7"]`` → ``[0, 1, 2, 7]``: integers and inclusive ranges, in order, each seed once."""
    seeds: list[int] = []
    for token in tokens:
        first, dash, last = token.partition("-")
        try:
            low, high = int(first), int(last) if dash else int(first)
        except ValueError:
            low = high = -1
        if low < 0 or high < low:
            raise ValueError(f"got {token!r}; accepted: non-negative integers, ranges low-high (low ≤ high)")
        seeds += [s for s in range(low, high + 1) if s not in seeds]
    return seeds


def plan(args: argparse.Namespace) -> list[Run]:
    """Every (task, seed) with its validated config; a config error is one line naming the file (exit 2)."""
    runs = []
    for task, config in args.task_configs.items():
        for seed in args.seeds:
            overrides = [
                *args.overrides,
                f"trainer.seed={seed}",
                f"trainer.exp_name=zoo_{task}",
                f"trainer.data_dir={args.out / task / f'seed{seed}'}",
                f"trainer.num_threads={args.threads}",
                *([f"trainer.iterations={args.iterations}"] if args.iterations else []),
            ]
            try:
                cfg = load(config, overrides)
                every = math.ceil(
                    cfg.trainer.iterations * cfg.trainer.num_envs * cfg.trainer.buffer_size / args.checkpoints
                )
                if every < cfg.trainer.save_freq:
                    overrides.append(f"trainer.save_freq={every}")
                    cfg = load(config, overrides)
            except ConfigError as exc:
                print(f"error: {exc}", file=sys.stderr)
                sys.exit(2)
            runs.append(Run(task, config, seed, tuple(overrides), cfg))
    return runs


def read_json(path: Path) -> Any:
    """The parsed file, or ``None`` when it is missing or unreadable (a run killed while writing)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def finished(run: Run) -> dict[str, Any] | None:
    """The run's ``metrics.json`` once it reached ``trainer.iterations`` or a stop condition, else None."""
    metrics = read_json(run.layout.metrics)
    if not isinstance(metrics, dict) or "interrupted_by" in metrics:
        return None
    if metrics.get("iterations", 0) >= run.cfg.trainer.iterations or metrics.get("stopped_by"):
        return metrics
    return None


def other_params(run: Run) -> str | None:
    """Why a finished run cannot stand for ``run`` (trained with other training params), or ``None``."""
    try:
        diffs = training_diff(training_params(load(run.layout.params)), training_params(run.cfg))
    except (ConfigError, OSError) as exc:
        return f"{run.layout.params}: {exc}"
    shown = "; ".join(f"{key}: {a!r} there, {b!r} now" for key, a, b in diffs[:3])
    return (
        (f"{run.layout.root}: finished with other training params ({shown}); use another --out or delete it")
        if diffs
        else None
    )


def execute(run: Run, mlflow_uri: str | None) -> dict[str, Any]:
    """``rlpipe run`` (``--resume`` when the run directory holds a run) until it exits; append its segment."""
    resume = run.layout.holds_run()
    print(
        f"{run.task} seed {run.seed}: {'resuming' if resume else 'starting'} "
        f"(log: {relative(run.data_dir / LOG)})",
        flush=True,
    )
    args = ["run", str(run.config), *(a for o in run.overrides for a in ("--set", o))]
    args += ["--resume"] if resume else []
    env = {**os.environ, **({"MLFLOW_TRACKING_URI": mlflow_uri} if mlflow_uri else {})}
    run.data_dir.mkdir(parents=True, exist_ok=True)
    with (run.data_dir / LOG).open("a") as log:
        log.write(f"$ {shlex.join(['rlpipe', *args])}\n")
        log.flush()
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "rlpipe", *args],
            cwd=PROJECT_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        _, status, usage = os.wait4(proc.pid, 0)  # the child's own CPU time, even with other jobs running
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall, cpu = time.perf_counter() - start, usage.ru_utime + usage.ru_stime
    segment = {
        "resume": resume,
        "returncode": proc.returncode,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
    }
    segments = read_json(run.data_dir / SEGMENTS) or []
    (run.data_dir / SEGMENTS).write_text(json.dumps([*segments, segment], indent=1) + "\n")
    return segment


def relative(path: Path) -> str:
    """``path`` relative to the repository root when it lies below it."""
    path = path.resolve()
    return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else str(path)


def record(run: Run, metrics: dict[str, Any]) -> dict[str, Any]:
    """The row of a finished run: its figures from ``metrics.json``, ``curve.csv`` and its segments."""
    segments = read_json(run.data_dir / SEGMENTS) or []
    wall = metrics.get("wall_s")
    return {
        "task": run.task,
        "config": relative(run.config),
        "env_id": run.cfg.env.id,
        "algorithm": run.cfg.algorithm.name,
        "seed": run.seed,
        "run_dir": relative(run.layout.root),
        "iterations": metrics.get("iterations"),
        "env_steps": metrics.get("env_steps"),
        "budget_env_steps": run.budget,
        "stopped_by": metrics.get("stopped_by"),
        "eval_return": metrics.get("eval/return_mean"),
        "eval_return_std": metrics.get("eval/return_std"),
        "eval_episodes": metrics.get("eval/episodes"),
        "eval_success_rate": metrics.get("eval/success_rate"),
        "eval_success_at_end": metrics.get("eval/success_at_end"),
        "train_return": metrics.get("train/episode_return_mean"),
        "wall_s": wall,
        "env_steps_per_s": metrics["env_steps"] / wall if wall else None,
        "cpu_s": round(sum(s["cpu_s"] for s in segments), 3) if segments else None,
        "command_wall_s": round(sum(s["wall_s"] for s in segments), 3) if segments else None,
        "segments": len(segments),
        "resumed": any(s["resume"] for s in segments),
        "mlflow_run_id": metrics.get("mlflow_run_id"),
        "curve": read_curve(run.layout.curve),
    }


def earlier_rows(args: argparse.Namespace, ran: set[tuple[str, int]]) -> list[dict[str, Any]]:
    """Rows of the JSON at ``--json`` from the same ``--configs`` folder that this invocation does not run."""
    data = read_json(args.json) if args.json.is_file() else None
    if not isinstance(data, dict) or data.get("configs") != relative(args.configs):
        return []
    return [r for r in data.get("rows", []) if (r["task"], r["seed"]) not in ran]


def draw(plots: Path, rows: list[dict[str, Any]], tasks: set[str]) -> dict[str, dict[str, Any]]:
    """The summary of ``rows``; redraw the curves of ``tasks``, the ratio chart and the profile."""
    summary = summarize(rows, reference, lambda task: relative(plots / f"{task}.png"))
    for task in tasks & set(summary):
        plot(task, [r for r in rows if r["task"] == task], summary[task], plots / f"{task}.png")
    plot_ratios(summary, plots / RATIOS_PNG)
    plot_profile(summary, plots / PROFILE_PNG)
    return summary


def publish(
    args: argparse.Namespace, rows: list[dict[str, Any]], failed: list[dict[str, Any]], tasks: set[str]
) -> dict[str, dict[str, Any]]:
    """Rewrite the JSON with every row and redraw the curves of ``tasks``; return the summary."""
    rows = sorted(rows, key=lambda r: (r["task"], r["seed"]))
    summary = draw(args.plots, rows, tasks)
    write_json(
        args.json,
        {
            "benchmark": "zoo",
            "configs": relative(args.configs),
            "out": relative(args.out),
            "seeds": args.seeds,
            "iterations": args.iterations,
            "overrides": args.overrides,
            "jobs": args.jobs,
            "threads": args.threads,
            "rows": rows,
            "summary": summary,
            "failed": failed,
        },
    )
    return summary


def from_json(args: argparse.Namespace) -> int:
    """Recompute the summary and every figure from the rows of ``--json``; train and read nothing else."""
    data = read_json(args.json)
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        print(
            f"error: --json {relative(args.json)}: no zoo results there (a JSON object with 'rows' written "
            "by benchmarks/zoo.py)",
            file=sys.stderr,
        )
        return 2
    rows = sorted(data["rows"], key=lambda r: (r["task"], r["seed"]))
    data["summary"] = draw(args.plots, rows, {r["task"] for r in rows})
    args.json.write_text(json.dumps(data, indent=2) + "\n")  # the environment stays the one that measured
    print(f"summary of {len(rows)} rows rewritten in {relative(args.json)}; figures: {relative(args.plots)}")
    if data["summary"]:
        print_table(console_rows(data["summary"]), COLUMNS)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json:
        return from_json(args)
    set_threads(args.threads)  # this process's torch threads, as the JSON's environment records them
    runs = plan(args)
    done = {(r.task, r.seed) for r in runs}
    rows, failed, todo = earlier_rows(args, done), [], []
    for run in runs:
        metrics = finished(run)
        problem = other_params(run) if metrics else None
        if problem:
            failed.append({"task": run.task, "seed": run.seed, "error": problem})
            print(f"{run.task} seed {run.seed}: {problem}", file=sys.stderr)
        elif metrics:
            rows.append(record(run, metrics))
            print(f"{run.task} seed {run.seed}: finished earlier, read back from {relative(run.layout.root)}")
        else:
            todo.append(run)
    publish(args, rows, failed, {r.task for r in runs})
    try:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            started = {}
            for run in todo:
                started[pool.submit(execute, run, args.mlflow_uri)] = run
            for future in as_completed(started):
                run, segment = started[future], future.result()
                metrics = finished(run)
                if metrics is None:
                    failed.append(
                        {
                            "task": run.task,
                            "seed": run.seed,
                            "returncode": segment["returncode"],
                            "log": relative(run.data_dir / LOG),
                        }
                    )
                    print(
                        f"{run.task} seed {run.seed}: exit {segment['returncode']}, not finished; see "
                        f"{relative(run.data_dir / LOG)}; run this command again to resume it",
                        file=sys.stderr,
                    )
                    continue
                rows.append(record(run, metrics))
                print(
                    f"{run.task} seed {run.seed}: eval return {rows[-1]['eval_return']}, "
                    f"{segment['wall_s']:.0f} s",
                    flush=True,
                )
                publish(args, rows, failed, {run.task})
    except KeyboardInterrupt:
        print(
            "interrupted: each run checkpoints and stops; run the same command again to resume",
            file=sys.stderr,
        )
        return 130
    summary = publish(args, rows, failed, {r.task for r in runs})
    if summary:
        print_table(console_rows(summary), COLUMNS)
    return 1 if failed else 0


def console_rows(summary: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The summary's tasks with the IQMs, their intervals and the seed shares as flat keys for ``COLUMNS``."""
    rows = []
    for task in summary.values():
        row = dict(task)
        for key, prefix in (("eval_return_ci", "iqm"), ("ratio_ci", "ratio_iqm")):
            if task.get(key):
                row.update(zip((prefix, f"{prefix}_low", f"{prefix}_high"), task[key]["iqm"]))
        row.update({f"at_least_{t}": share for t, share in (task.get("seeds_at_least") or {}).items()})
        rows.append(row)
    return rows


COLUMNS = [
    ("task", "task", ""),
    ("env_id", "env", ""),
    ("n", "seeds", ""),
    ("env_steps_mean", "env steps", ",.0f"),
    ("iqm", "IQM", ",.1f"),
    ("iqm_low", "CI low", ",.1f"),
    ("iqm_high", "CI high", ",.1f"),
    ("eval_return_mean", "mean", ",.1f"),
    ("eval_return_std", "± std", ",.1f"),
    ("reference", "reference", ",.1f"),
    ("ratio_iqm", "ratio IQM", ".2f"),
    ("ratio_iqm_low", "low", ".2f"),
    ("ratio_iqm_high", "high", ".2f"),
    ("at_least_0.5", "≥0.5×", ".2f"),
    ("at_least_0.8", "≥0.8×", ".2f"),
    ("wall_s_mean", "wall s", ",.0f"),
    ("env_steps_per_s_mean", "env steps/s", ",.0f"),
]


if __name__ == "__main__":
    sys.exit(main())
