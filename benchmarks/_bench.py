"""Shared helpers of the benchmark scripts: config loading, interleaved timing, tables, JSON.

Not a benchmark itself; the scripts beside it import it (``python benchmarks/<name>.py`` puts
this folder first on ``sys.path``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from rlpipe.config import RunConfig, load
from rlpipe.config.loading import apply_overrides

if TYPE_CHECKING:
    from rlpipe.trainer import Trainer

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PARAMS = PROJECT_ROOT / "params.yaml"
NEVER = 10**15
"""An env-step count no benchmark reaches: used to push eval/checkpoint frequencies out of the way."""


def load_cfg(params: Path | RunConfig, overrides: Sequence[str]) -> RunConfig:
    """``rlpipe.config.load`` with ``--set``-style overrides (the public API the CLI uses).

    ``params`` may also be a loaded config: the overrides then apply to it, validated the same way.
    """
    if isinstance(params, RunConfig):
        return RunConfig.model_validate(apply_overrides(params.to_dict(), list(overrides)))
    return load(params, list(overrides))


W1_BACKENDS = {
    "auto": ["env.backend=auto"],  # CartPole-v1: gymnasium's CartPoleVectorEnv
    "envpool": ["env.backend=envpool"],
    "sync": ["env.backend=gymnasium", "env.cfg.vectorization_mode=sync"],  # one python env each, as SB3
}
"""The ``--backend(s)`` choices of the W1 benchmarks: what simulates ``CartPole-v1``."""


def prepare_tracking(uri: str, experiment: str) -> None:
    """Create the MLflow store at ``uri`` and ``experiment`` in it with one tiny run, untimed.

    What a user's store holds after their first run (``data/mlflow.db`` with the run's
    experiment): a timed run then pays neither for the schema nor for creating its experiment.
    """
    from rlpipe.tracking.background import BackgroundRun

    BackgroundRun.start(uri, experiment, {}, {}, run_name="warm-up").end("FINISHED")


def backend_overrides(name: str) -> list[str]:
    """The ``--set`` overrides of W1 backend ``name`` (a key of :data:`W1_BACKENDS`)."""
    return list(W1_BACKENDS[name])


def timing_only_overrides(data_dir: Path | str, exp_name: str) -> list[str]:
    """The ``--set`` overrides of a run that is only timed: no tracking, eval, checkpoint or stop.

    ``trainer.iterations`` is :data:`NEVER` (the benchmark calls ``Trainer.step()`` itself); the
    run writes under ``data_dir/exp_name``.
    """
    return [
        "tracking.backend=none",
        "trainer.enable_eval=false",
        f"trainer.iterations={NEVER}",
        f"trainer.save_freq={NEVER}",
        "trainer.stop_when=[]",
        f"trainer.data_dir={data_dir}",
        f"trainer.exp_name={exp_name}",
    ]


def start_quietly(trainer: Trainer) -> Trainer:
    """Start ``trainer``'s run (lock, ``params.yaml``, tracker) with its banner and console rows captured.

    The tracker prints to the stdout it was opened with, so every later row goes to the same buffer
    instead of between the benchmark's own lines; ``curve.csv`` is still written. Returns ``trainer``.
    """
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.start()
    return trainer


def set_threads(threads: int | None) -> None:
    """``torch.set_num_threads(threads)`` when given; the default is left alone otherwise."""
    if threads is not None:
        torch.set_num_threads(threads)


def synchronize(device: torch.device) -> None:
    """Wait for ``device``'s queued kernels (a CUDA device), so a timer reads finished work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """``(seconds, fn())`` measured with ``perf_counter``."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _no_clock() -> float:
    return 0.0


_INHERITED = object()
"""What :meth:`Phases.wrap` records for an attribute found on the owner's class, not the owner itself."""


class Phases:
    """Exclusive wall and CPU seconds, and calls, per phase: a timer wrapped around each phase's function.

    A wrapped call nested in another is subtracted from the outer one, so the phases add up to the
    time spent inside the outermost wrapped calls. CPU time is the process's (``process_time``): the
    work of other threads (a simulator's, a writer's) counts in whichever phase it overlaps. With
    ``cpu=False`` only the wall clock is read (``cpu`` stays at zero), one clock read less per call.
    Each wrapper adds its own small cost per call to the phase it wraps.
    """

    def __init__(self, cpu: bool = True) -> None:
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._cpu_clock = time.process_time if cpu else _no_clock
        self._stack: list[list[float]] = []  # [wall start, cpu start, wall and cpu in nested timed calls]
        self._wrapped: list[tuple[Any, str, Any]] = []

    def timed(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` with its calls' exclusive time added to ``phase``."""
        stack, wall, cpu, calls = self._stack, self.wall, self.cpu, self.calls
        clock, cpu_clock = time.perf_counter, self._cpu_clock

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            frame = [clock(), cpu_clock(), 0.0, 0.0]
            stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                stack.pop()
                spent_wall, spent_cpu = clock() - frame[0], cpu_clock() - frame[1]
                wall[phase] += spent_wall - frame[2]
                cpu[phase] += spent_cpu - frame[3]
                calls[phase] += 1
                if stack:
                    stack[-1][2] += spent_wall
                    stack[-1][3] += spent_cpu

        return wrapper

    def wrap(self, owner: Any, name: str, phase: str) -> bool:
        """Replace ``owner.name`` by a timed wrapper until :meth:`restore`; False when there is none."""
        fn = getattr(owner, name, None)
        if fn is None:
            return False
        self._wrapped.append((owner, name, getattr(owner, "__dict__", {}).get(name, _INHERITED)))
        setattr(owner, name, self.timed(phase, fn))
        return True

    def restore(self) -> None:
        """Put every wrapped attribute back as it was (an instance's own, or its class's again)."""
        for owner, name, own in reversed(self._wrapped):
            if own is _INHERITED:  # found on its class: drop the wrapper, the class's shows again
                delattr(owner, name)
            else:
                setattr(owner, name, own)
        self._wrapped.clear()


def median(values: Sequence[float]) -> float:
    """Median of a non-empty sequence (``nan`` when empty)."""
    return statistics.median(values) if values else float("nan")


def mean_std(values: Sequence[float]) -> str:
    """``mean ± std`` over seeds (sample std, 0 for one value), for a summary line."""
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):,.1f} ± {spread:,.1f}"


def paired_ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """``a[i] / b[i]`` for interleaved pairs: robust to load drifting between pairs."""
    return [x / y for x, y in zip(a, b, strict=True)]


def load_average() -> float:
    """1-minute load average (``nan`` where the OS has none); above the core count, timings inflate."""
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else float("nan")


LOAD_AT_START = load_average()


def environment() -> dict[str, Any]:
    """What the numbers were taken on: CPU count, load, torch threads and versions."""
    return {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "loadavg_1min_at_start": LOAD_AT_START,
        "loadavg_1min_at_end": load_average(),
        "platform": platform.platform(),
    }


def print_machine() -> None:
    """One line saying how loaded the machine was, to read the absolute times against."""
    env = environment()
    busy = env["loadavg_1min_at_end"] > (env["cpu_count"] or 1)
    print(
        f"machine: {env['cpu_count']} CPUs, torch threads {env['torch_threads']}, load average "
        f"{env['loadavg_1min_at_start']} at start, {env['loadavg_1min_at_end']} at end"
        f"{' (loaded: absolute times are inflated, compare ratios)' if busy else ''}"
    )


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str, str]]) -> None:
    """Print ``rows`` as a fixed-width table; ``columns`` are ``(key, header, format spec)``."""
    cells = [[_cell(row.get(key), spec) for key, _, spec in columns] for row in rows]
    widths = [max(len(header), *(len(c[i]) for c in cells)) for i, (_, header, _) in enumerate(columns)]
    print("  ".join(h.rjust(w) for (_, h, _), w in zip(columns, widths)))
    for line in cells:
        print("  ".join(c.rjust(w) for c, w in zip(line, widths)))


def _cell(value: Any, spec: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value != value:
        return "nan"
    return format(value, spec) if spec else str(value)


def write_json(path: Path | None, results: dict[str, Any]) -> None:
    """Write ``results`` (plus the environment) as indented JSON when ``path`` is given."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**results, "environment": environment()}, indent=2) + "\n")
    print(f"results written to {path}")


def add_workload_args(parser: argparse.ArgumentParser, device_help: str) -> None:
    """The massive-batch workload's options, shared by throughput.py and replay.py."""
    add = parser.add_argument
    add("--params", type=Path, default=DEFAULT_PARAMS, help="params file (default: params.yaml)")
    add("--num-envs", type=int, default=4096, help="N (default 4096)")
    add("--horizon", type=int, default=32, help="T, steps per env per iteration (default 32)")
    add("--hidden", type=int, nargs="+", default=[256, 256], help="hidden sizes of actor and critic")
    add("--epochs", type=int, default=4, help="PPO epochs (default 4)")
    add("--batch-size", type=int, default=16384, help="minibatch size (default 16384)")
    add("--device", default="cpu", help=device_help)


EVAL_KEY = "eval/return_mean"
RECHECK = ["eval.num_envs=16", "eval.num_episodes=4", "eval.deterministic=true", "eval.video=false"]
"""The re-evaluation of a trained checkpoint: 64 fresh deterministic episodes."""


def train_to_threshold(
    params: Path, seed: int, threshold: float, overrides: Sequence[str], stop_at_threshold: bool = True
) -> dict[str, Any]:
    """Train ``params`` for ``seed`` until its online eval reaches ``threshold`` (or the whole budget).

    The store stays on (a temporary ``trainer.data_dir``), tracking is off. The final checkpoint is
    then scored again on 64 fresh deterministic episodes (``evaluate_checkpoint``), so a lucky eval
    cannot pass for a solve. Returns the env steps at the first eval ≥ ``threshold`` (``None``: never),
    the final metrics and trainer summary, the eval curve ``[[env_steps, eval], ...]``, the re-check,
    the training seconds (the iterations' own ``time/iteration_s``) and the process CPU and wall seconds.
    """
    from rlpipe.offline.commands import evaluate_checkpoint
    from rlpipe.trainer import Trainer

    stop = f"[{{metric: {EVAL_KEY}, min: {threshold}}}]" if stop_at_threshold else "[]"
    wall_start, cpu_start = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory(prefix="rlpipe-threshold-") as data_dir:
        cfg = load_cfg(
            params,
            [
                f"trainer.seed={seed}",
                "tracking.backend=none",
                f"trainer.data_dir={data_dir}",
                f"trainer.stop_when={stop}",
                *overrides,
            ],
        )
        trainer = start_quietly(Trainer(cfg))
        train_s, metrics, curve, solve_steps, summary = 0.0, {}, [], None, {}
        try:
            while not trainer.done:
                metrics = trainer.step()
                train_s += metrics["time/iteration_s"]
                if EVAL_KEY in metrics:
                    curve.append([trainer.env_steps, metrics[EVAL_KEY]])
                    if solve_steps is None and metrics[EVAL_KEY] >= threshold:
                        solve_steps = trainer.env_steps
        finally:
            summary = trainer.close()
        recheck = evaluate_checkpoint(load_cfg(cfg, RECHECK), None, out=Path(data_dir) / "recheck.json")
    return {
        "solve_env_steps": solve_steps,
        "iteration": trainer.iteration,
        "env_steps": trainer.env_steps,
        "metrics": metrics,
        "summary": summary or {},
        "eval_curve": curve,
        "recheck": recheck,
        "train_s": train_s,
        "cpu_s": time.process_time() - cpu_start,
        "wall_s": time.perf_counter() - wall_start,
    }
