"""What tracking costs: MLflow vs ``backend: none`` on the default run; ``dvc repro`` vs ``rlpipe run``.

    .venv/bin/python benchmarks/speed/tracking_overhead.py [--repeats 2] [--iterations N] [--skip-dvc]
        [--json PATH]

Part 1 runs ``params.yaml`` in-process as ``Trainer(cfg).train()`` (256 envs × 32 steps; only
``data_dir`` and the tracking URI changed) with ``backend: none`` and ``backend: mlflow``
interleaved (none, mlflow, none, mlflow …, one SQLite store created beforehand so schema creation is
not counted). It times every ``Tracker.log`` call (console row + curve.csv row + the MLflow enqueue)
and every iteration, and reports per backend: median ``Tracker.log`` ms, median iteration ms, their
ratio, the background writer's wall and CPU ms per ``log_batch`` (its CPU time bounds what it can
take from the loop), and the iteration-time difference mlflow − none (end to end; only meaningful on
a quiet machine). It also times ``open_tracker`` and ``Tracker.finish`` (artifacts) once per run,
and one synchronous ``log_batch`` of an iteration's metrics — what the loop would pay without the
writer thread.

Part 2 copies the working tree (``git ls-files``) into a temporary git repo and times, interleaved,
``python -m rlpipe run params.yaml`` against ``dvc repro -f train`` (the same loop wrapped by DVC, which
also hashes deps and outs and writes dvc.lock). The stage command is timed inside the DVC run as well,
so the overhead is DVC's wall time minus its own command's, from one invocation (robust to load
drift); then a no-op ``dvc repro``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rlpipe import config
from rlpipe.tracking import tracker as tracker_mod
from rlpipe.trainer import Trainer
from rlpipe.trainer import ranks as ranks_mod

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


class Timings:
    """Wraps Tracker.log/finish and the trainer's open_tracker to collect per-call seconds."""

    def __init__(self) -> None:
        self.log: list[float] = []
        self.iteration: list[float] = []
        self.open: list[float] = []
        self.finish: list[float] = []
        self.write_wall: list[float] = []
        self.write_cpu: list[float] = []

    @contextlib.contextmanager
    def installed(self):
        log, finish = tracker_mod.Tracker.log, tracker_mod.Tracker.finish
        open_tracker = ranks_mod.open_tracker  # the name the trainer's start calls

        def timed_log(tracker, metrics, step):
            start = time.perf_counter()
            log(tracker, metrics, step)
            self.log.append(time.perf_counter() - start)
            self.iteration.append(metrics["time/iteration_s"])

        def timed_finish(tracker, summary):
            start = time.perf_counter()
            finish(tracker, summary)
            self.finish.append(time.perf_counter() - start)

        def timed_open(*args, **kwargs):
            start = time.perf_counter()
            result = open_tracker(*args, **kwargs)
            self.open.append(time.perf_counter() - start)
            return result

        from mlflow.tracking import MlflowClient

        log_batch = MlflowClient.log_batch

        def timed_log_batch(client, *args, **kwargs):  # runs on the writer thread
            wall, cpu = time.perf_counter(), time.thread_time()
            log_batch(client, *args, **kwargs)
            if kwargs.get("metrics"):
                self.write_wall.append(time.perf_counter() - wall)
                self.write_cpu.append(time.thread_time() - cpu)

        tracker_mod.Tracker.log, tracker_mod.Tracker.finish = timed_log, timed_finish
        ranks_mod.open_tracker, MlflowClient.log_batch = timed_open, timed_log_batch
        try:
            yield self
        finally:
            tracker_mod.Tracker.log, tracker_mod.Tracker.finish = log, finish
            ranks_mod.open_tracker, MlflowClient.log_batch = open_tracker, log_batch


def med_ms(values: list[float]) -> float:
    return 1000 * statistics.median(values) if values else float("nan")


def one_run(backend: str, uri: str, tmp: Path, iterations: int | None, index: int) -> Timings:
    overrides = [
        f"trainer.data_dir={tmp / f'{backend}{index}'}",
        f"tracking.backend={backend}",
        f"tracking.uri={uri}",
        *([f"trainer.iterations={iterations}"] if iterations else []),
    ]
    cfg = config.load(ROOT / "params.yaml", overrides)
    timings = Timings()
    with timings.installed(), contextlib.redirect_stdout(io.StringIO()):
        Trainer(cfg).train()
    return timings


def sync_log_batch_ms(uri: str, sample: dict[str, float], repeats: int = 20) -> float:
    """One synchronous MLflow write of an iteration's metrics (what the writer thread hides)."""
    from mlflow.entities import Metric

    from rlpipe.tracking.mlflow_runs import open_experiment
    from rlpipe.tracking.mlflow_store import open_client

    client = open_client(uri)
    run_id = client.create_run(open_experiment(client, "sync_probe", uri)).info.run_id
    times = []
    for step in range(repeats):
        batch = [Metric(k, v, int(time.time() * 1000), step) for k, v in sample.items()]
        start = time.perf_counter()
        client.log_batch(run_id, metrics=batch)
        times.append(time.perf_counter() - start)
    client.set_terminated(run_id)
    return med_ms(times)


def tracking_part(repeats: int, iterations: int | None, tmp: Path) -> dict[str, Any]:
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    one_run("mlflow", uri, tmp, 1, 99)  # create the store's schema (a one-off, several seconds)
    runs: dict[str, list[Timings]] = {"none": [], "mlflow": []}
    for index in range(repeats):
        for backend in ("none", "mlflow"):
            runs[backend].append(one_run(backend, uri, tmp, iterations, index))
            print(f"  {backend:6s} run {index + 1}/{repeats} done", file=sys.stderr)
    out: dict[str, Any] = {}
    for backend, timings in runs.items():
        logs = [t for r in timings for t in r.log[1:]]  # the first row also writes the CSV header
        iters = [t for r in timings for t in r.iteration[1:]]
        out[backend] = {
            "log_ms": med_ms(logs),
            "iteration_ms": med_ms(iters),
            "log_share_pct": 100 * statistics.median(logs) / statistics.median(iters),
            "open_ms": med_ms([t for r in timings for t in r.open]),
            "finish_ms": med_ms([t for r in timings for t in r.finish]),
            "writer_wall_ms": med_ms([t for r in timings for t in r.write_wall]),
            "writer_cpu_ms": med_ms([t for r in timings for t in r.write_cpu]),
        }
        out[backend]["writer_cpu_share_pct"] = (
            100 * out[backend]["writer_cpu_ms"] / out[backend]["iteration_ms"]
        )
    pairs = [
        statistics.median(m.iteration[1:]) / statistics.median(n.iteration[1:])
        for n, m in zip(runs["none"], runs["mlflow"], strict=True)
    ]
    out["iteration_delta_pct"] = 100 * (statistics.median(pairs) - 1)  # median of per-pair ratios
    sample = {f"update/metric_{i}": 0.5 for i in range(22)}
    out["sync_log_batch_ms"] = sync_log_batch_ms(uri, sample)
    return out


def copy_repo(dst: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for rel in sorted({r for r in listed.split("\0") if r and (ROOT / r).is_file()}):
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dst / rel)
    (dst / "dvc.lock").unlink(missing_ok=True)
    commit = ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "b"]
    for args in (["init", "-q"], ["add", "-A"], commit):
        subprocess.run(["git", *args], cwd=dst, check=True, capture_output=True)


def timed_cmd(repo: Path, *args: str) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "DVC_ROOT")}
    env |= {"PATH": f"{BIN}{os.pathsep}{env['PATH']}", "DVC_NO_ANALYTICS": "1"}
    start = time.perf_counter()
    subprocess.run(args, cwd=repo, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def dvc_part(repeats: int, iterations: int | None, tmp: Path) -> dict[str, Any]:
    repo = tmp / "repo"
    copy_repo(repo)
    params = repo / "params.yaml"
    if iterations:  # the same value for both commands: DVC reads it from params.yaml
        pattern, text = r"(?m)^  iterations: \d+", params.read_text()
        params.write_text(re.sub(pattern, f"  iterations: {iterations}", text))
    # Time the stage command inside DVC too, so overhead = DVC wall - its own command (same invocation).
    dvc_yaml = repo / "dvc.yaml"
    dvc_yaml.write_text(
        dvc_yaml.read_text().replace(
            "cmd: python dvc_stages/train.py",
            "cmd: date +%s.%N > .t0 && python dvc_stages/train.py && date +%s.%N > .t1",
            1,
        )
    )
    run_cmd = [str(BIN / "python"), "-m", "rlpipe", "run", "params.yaml"]
    timed_cmd(repo, *run_cmd)  # warm-up: creates data/mlflow.db and the OS file cache
    plain, wrapped, inner = [], [], []
    for index in range(repeats):
        shutil.rmtree(repo / "data" / "cartpole_ppo", ignore_errors=True)
        plain.append(timed_cmd(repo, *run_cmd))
        shutil.rmtree(repo / "data" / "cartpole_ppo", ignore_errors=True)
        wrapped.append(timed_cmd(repo, str(BIN / "dvc"), "repro", "-f", "train"))
        inner.append(float((repo / ".t1").read_text()) - float((repo / ".t0").read_text()))
        print(f"  dvc pair {index + 1}/{repeats} done", file=sys.stderr)
    noop = [timed_cmd(repo, str(BIN / "dvc"), "repro", "train") for _ in range(3)]
    overhead = [w - i for w, i in zip(wrapped, inner, strict=True)]
    return {
        "rlpipe_run_s": statistics.median(plain),
        "dvc_repro_s": statistics.median(wrapped),
        "stage_cmd_s": statistics.median(inner),
        "overhead_s": statistics.median(overhead),
        "overhead_pct": 100 * statistics.median(o / i for o, i in zip(overhead, inner, strict=True)),
        "noop_repro_s": statistics.median(noop),
    }


def report(track: dict[str, Any], dvc: dict[str, Any] | None) -> None:
    print("\nTracking cost per iteration on the default run (median; first iteration excluded)")
    print(
        f"{'backend':8s} {'Tracker.log ms':>15s} {'iteration ms':>13s} {'log share':>10s} "
        f"{'open_tracker ms':>16s} {'finish ms':>10s}"
    )
    for backend in ("none", "mlflow"):
        r = track[backend]
        print(
            f"{backend:8s} {r['log_ms']:15.2f} {r['iteration_ms']:13.1f} {r['log_share_pct']:9.2f}% "
            f"{r['open_ms']:16.0f} {r['finish_ms']:10.0f}"
        )
    m = track["mlflow"]
    print(
        f"mlflow writer thread per iteration: {m['writer_wall_ms']:.1f} ms wall, "
        f"{m['writer_cpu_ms']:.1f} ms CPU "
        f"({m['writer_cpu_share_pct']:.2f}% of an iteration if it all contended with the loop)"
    )
    print(
        f"iteration time mlflow vs none (median of paired ratios): {track['iteration_delta_pct']:+.2f}% "
        f"(synchronous log_batch would cost {track['sync_log_batch_ms']:.1f} ms per iteration)"
    )
    if dvc:
        print("\ndvc repro overhead on top of the rlpipe run it wraps (medians)")
        print(
            f"rlpipe run {dvc['rlpipe_run_s']:.1f}s | dvc repro -f train {dvc['dvc_repro_s']:.1f}s, "
            f"of which its stage command {dvc['stage_cmd_s']:.1f}s: overhead {dvc['overhead_s']:.2f}s "
            f"({dvc['overhead_pct']:.1f}%) | no-op dvc repro {dvc['noop_repro_s']:.2f}s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="interleaved pairs per comparison")
    parser.add_argument("--iterations", type=int, help="default: params.yaml's trainer.iterations")
    parser.add_argument("--skip-dvc", action="store_true", help="only the MLflow part")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        track = tracking_part(args.repeats, args.iterations, Path(tmp))
        dvc = None if args.skip_dvc else dvc_part(args.repeats, args.iterations, Path(tmp))
    report(track, dvc)
    if args.json:
        env = {"cpus": os.cpu_count(), "load1": os.getloadavg()[0]}
        args.json.write_text(json.dumps({"tracking": track, "dvc": dvc, "machine": env}, indent=2) + "\n")


if __name__ == "__main__":
    main()
