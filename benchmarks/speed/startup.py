"""Start-up figures: ``--help``, time to the first row (MLflow on/off), time to solve the default.

    .venv/bin/python benchmarks/speed/startup.py [--repeats 3] [--tree NAME=PATH ...] [--skip-solve]
        [--solve-trees NAME ...] [--fresh-store] [--json PATH]

Every figure is the wall time of a fresh ``rlpipe`` process (the console script of this venv) from
spawn, as a user sees it, with ``PYTHONPATH`` pointing at a source tree (default: this one; give
several ``--tree before=/path/a --tree after=/path/b`` to compare commits in one run). Cases, all
interleaved (each repetition runs every case of every tree once, in turn):

* ``python -c "import click, pydantic"`` and ``python -c "import torch"``: references;
* ``rlpipe --help``;
* first row: ``rlpipe run params.yaml`` (the tree's own default) with ``trainer.iterations=1``, time
  until the first table row is printed, and the CPU seconds the trainer process itself used until
  then (robust to a loaded machine), with ``tracking.backend=none`` and with MLflow on (a
  SQLite store under a temporary folder, created by a warm-up run, so schema creation is not
  counted; ``--fresh-store`` counts it);
* solve: ``rlpipe run params.yaml`` as ``make run`` runs it (MLflow on): time to the first row whose
  deterministic eval return is >= 475, time to exit, and whether the final eval is >= 475.

Medians over the repetitions, and the first row's MLflow − none difference per repetition (goal:
within 0.3 s). The machine is shared: compare within one run, not across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SOLVED = 475.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repetitions (default 3)")
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="source tree to time (repeatable; default: this checkout as 'this')",
    )
    parser.add_argument("--skip-solve", action="store_true", help="skip the (long) solve runs")
    parser.add_argument(
        "--solve-trees",
        nargs="+",
        default=None,
        metavar="NAME",
        help="run the solve case only for these trees (default: all)",
    )
    parser.add_argument(
        "--fresh-store",
        action="store_true",
        help="a new MLflow store per first-row run (counts schema creation)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    return parser.parse_args()


def environment(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "DVC_ROOT")}
    return {**env, "PYTHONPATH": str(tree), "PYTHONUNBUFFERED": "1"}


def time_command(cmd: list[str], tree: Path) -> float:
    """Seconds from spawn to exit of ``cmd`` (its output discarded); it must succeed."""
    start = time.perf_counter()
    subprocess.run(cmd, cwd=tree, env=environment(tree), check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def record(out: dict[str, list[Any]], case: str, value: Any, name: str) -> None:
    """Keep one measurement and print it at once (a long run under load shows progress)."""
    out.setdefault(case, []).append(value)
    shown = "-" if value is None else f"{value:.2f}"
    print(f"  {name:<8} {case:<28} {shown}", flush=True)


def time_run(tree: Path, overrides: list[str]) -> dict[str, Any]:
    """Run ``rlpipe run params.yaml`` in ``tree``; time its rows as they are printed, and its exit."""
    cmd = [str(BIN / "rlpipe"), "run", "params.yaml", *[a for kv in overrides for a in ("--set", kv)]]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=tree, env=environment(tree), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    header: list[str] = []
    first_row_s = solved_row_s = first_row_cpu_s = None
    last_eval = None
    for line in proc.stdout:
        now = time.perf_counter() - start
        cells = line.split()
        if cells[:1] == ["iter"]:
            header = cells
        elif header and cells and cells[0].isdigit() and len(cells) == len(header):
            if first_row_s is None:
                first_row_s, first_row_cpu_s = now, process_cpu_s(proc.pid)
            value = cells[header.index("eval")]
            if value != "-":
                last_eval = float(value)
                if solved_row_s is None and last_eval >= SOLVED:
                    solved_row_s = now
    if proc.wait() != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed with exit code {proc.returncode}")
    return {
        "first_row_s": first_row_s,
        "first_row_cpu_s": first_row_cpu_s,
        "solved_row_s": solved_row_s,
        "exit_s": time.perf_counter() - start,
        "last_eval": last_eval,
    }


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) the trainer process itself has used so far (Linux ``/proc``).

    Unlike wall time it barely grows with the machine's load, and it leaves out the tracking
    process: what the trainer itself paid before its first row.
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_repetition(
    trees: dict[str, Path],
    scratch: Path,
    rep: int,
    args: argparse.Namespace,
    results: dict[str, dict[str, list[Any]]],
) -> None:
    """Every case of every tree once, interleaved."""
    python = str(BIN / "python")
    for name, tree in trees.items():
        out = results.setdefault(name, {})
        ref = time_command([python, "-c", "import click, pydantic"], tree)
        record(out, "import click, pydantic", ref, name)
        record(out, "import torch", time_command([python, "-c", "import torch"], tree), name)
        record(out, "rlpipe --help", time_command([str(BIN / "rlpipe"), "--help"], tree), name)
        for backend in ("none", "mlflow"):
            store = scratch / name / (f"mlflow-{rep}.db" if args.fresh_store else "mlflow.db")
            run = time_run(
                tree,
                [
                    "trainer.iterations=1",
                    f"tracking.backend={backend}",
                    f"tracking.uri=sqlite:///{store}",
                    f"trainer.data_dir={scratch / name / f'first-{backend}-{rep}'}",
                ],
            )
            record(out, f"first row, tracking {backend}", run["first_row_s"], name)
            record(out, f"first row CPU, tracking {backend}", run["first_row_cpu_s"], name)
        if not args.skip_solve and (args.solve_trees is None or name in args.solve_trees):
            run = time_run(
                tree,
                [
                    f"tracking.uri=sqlite:///{scratch / name / 'mlflow.db'}",
                    f"trainer.data_dir={scratch / name / f'solve-{rep}'}",
                ],
            )
            record(out, "solve: first eval >= 475", run["solved_row_s"], name)
            record(out, "solve: exit", run["exit_s"], name)
            record(out, "solve: final eval", run["last_eval"], name)
        print(f"repetition {rep + 1}, {name}: done", flush=True)


def median(values: list[Any]) -> float | None:
    numbers = [v for v in values if v is not None]
    return statistics.median(numbers) if numbers else None


def report(results: dict[str, dict[str, list[Any]]]) -> dict[str, Any]:
    """Print one table (medians, and every repetition) per tree; return the summary."""
    summary: dict[str, Any] = {}
    for name, cases in results.items():
        print(f"\n{name}: median over {len(next(iter(cases.values())))} interleaved repetitions")
        rows = {case: median(values) for case, values in cases.items()}
        on, off = cases["first row, tracking mlflow"], cases["first row, tracking none"]
        diffs = [a - b for a, b in zip(on, off) if a is not None and b is not None]
        rows["first row: mlflow − none"] = median(diffs)
        cpu_on, cpu_off = cases["first row CPU, tracking mlflow"], cases["first row CPU, tracking none"]
        cpu_diffs = [a - b for a, b in zip(cpu_on, cpu_off) if a is not None and b is not None]
        rows["first row CPU: mlflow − none"] = median(cpu_diffs)
        for case, value in rows.items():
            every = cases.get(case, cpu_diffs if "CPU" in case else diffs)
            shown = ", ".join("-" if v is None else f"{v:.2f}" for v in every)
            print(f"  {case:<28} {'-' if value is None else f'{value:7.2f}'}   [{shown}]")
        ref = rows["import click, pydantic"]
        print(f"  --help / (import click, pydantic) = {rows['rlpipe --help'] / ref:.2f}×")
        summary[name] = {"median": rows, "all": cases, "first_row_diffs": diffs}
    return summary


def main() -> None:
    args = parse_args()
    trees = dict(t.split("=", 1) for t in args.tree) if args.tree else {"this": str(ROOT)}
    resolved = {name: Path(path).resolve() for name, path in trees.items()}
    results: dict[str, dict[str, list[Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="rlpipe-startup-") as tmp:
        scratch = Path(tmp)
        for name, tree in resolved.items():  # warm-up: page cache, bytecode, the MLflow schema
            time_run(
                tree,
                [
                    "trainer.iterations=1",
                    f"tracking.uri=sqlite:///{scratch / name / 'mlflow.db'}",
                    f"trainer.data_dir={scratch / name / 'warm-up'}",
                ],
            )
        for rep in range(args.repeats):
            one_repetition(resolved, scratch, rep, args, results)
    summary = report(results)
    load = os.getloadavg()
    print(
        f"\nload average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} cores "
        "(a loaded machine stretches every figure; compare within this run)"
    )
    if args.json:
        trees_out = {k: str(v) for k, v in resolved.items()}
        args.json.write_text(
            json.dumps(
                {"benchmark": "startup", "trees": trees_out, "results": summary, "loadavg": load}, indent=2
            )
        )


if __name__ == "__main__":
    main()
