"""rlpipe against a plain single-file torch PPO loop on envpool tasks: env steps per wall and CPU second.

    .venv/bin/python benchmarks/peers/envpool_loop.py [--ids PandaPickCube-v1 Go1JoystickFlatTerrain-v1
        HalfCheetah-v5] [--num-envs 64] [--horizon 64] [--epochs 4] [--minibatches 4] [--hidden 256 256]
        [--warmup 1] [--rounds 5] [--iterations 2] [--threads 1] [--breakdown-iterations 3]
        [--no-breakdown] [--profile-top 15] [--no-mlflow] [--json PATH]

The same work on both sides, each on its own envpool pool of the id (``envpool.make(id,
env_type="gymnasium", num_envs=N, num_threads=1)``, seeded alike), per iteration: N envs × T steps
with a Gaussian actor (state-independent log-std, starting at std 1) and a critic, both ``--hidden``
ELU, on observations normalized with running mean and variance (clipped to ±10, frozen while
collecting, merged from the rollout after the update); an env whose episode ends is reset right
after the step, and a time-limit truncation bootstraps with the critic's value of its true last
observation; GAE (γ 0.99, λ 0.95), advantages normalized over the batch; E epochs × M shuffled
minibatches of the clipped surrogate (0.2) + 0.5 × value MSE − 0.01 × entropy, the gradient norm
clipped to 0.5, Adam at lr 3e-4. Dict observations (Go1's ``state`` and ``privileged_state``): the
actor reads ``state``, the critic every key.

* ``plain``: :class:`PlainPPO` of ``_plain_envpool_ppo.py`` beside this script, a CleanRL-style loop
  written out in one file (per step: the actor and critic on the step's observations, ``envs.step``,
  the rollout tensors filled in place).
* ``rlpipe``: a :class:`rlpipe.trainer.Trainer` from ``params.yaml`` with the workload as overrides
  and the defaults otherwise — every rollout stored (Zarr, under a temporary ``trainer.data_dir``),
  MLflow on (a temporary sqlite store) — eval off, checkpoints out of reach, ``env.cfg``
  ``{mode: sync, num_threads: 1}``. One iteration is ``Trainer.step()``. ``--no-mlflow`` sets
  ``tracking.backend=none`` (no tracking process: a quick check of the script, whose figures then
  leave MLflow's cost out).

Timing: ``--warmup`` iterations per side, then ``--rounds`` rounds alternating plain, rlpipe, each
side running ``--iterations`` iterations per round; an rlpipe round ends once its store has written
the round's last rollout. Per round: wall seconds (``perf_counter``) and CPU seconds — the process's
(``process_time``: every thread, envpool's and a store writer thread's included), and for rlpipe
also its store writer process's (``store.writer``'s default on Linux; read when the round's last
rollout is written) and its MLflow tracking process's (a child process that writes each
iteration's metrics after the iteration: its CPU over all rounds, read after a pause, is shared
out over rlpipe's rounds).
Reported: median env steps per wall and per CPU second, and the medians of the per-round ratios
rlpipe / plain. With torch and envpool at one thread each, the CPU figures hold on a loaded machine
where the wall figures drift.

Breakdown (``--no-breakdown`` skips it): after the timed rounds, ``--breakdown-iterations`` more
of each side with a timer around each phase's function, in CPU and wall ms per iteration (exclusive:
a timed call inside another is subtracted from the outer one; the rest of an iteration is
``other``; CPU time is the process's, so the envpool thread's simulation counts in the phase it
overlaps, mostly the env step's ``recv``), the store writer's own time (its thread's, or its
process's CPU and the wall the hand-over waited for it) and the MLflow
process's CPU beside them; and a cProfile pass (CPU clock) over as many rlpipe iterations: the
top functions by own time. The plain loop uses torch's defaults (``Normal`` distributions, Adam
without ``fused``), as a single-file loop would; rlpipe's own fast paths are part of what it is.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))  # peers/: the plain loop, also when imported

import psutil
import torch
from _bench import (
    DEFAULT_PARAMS,
    NEVER,
    Phases,
    load_cfg,
    median,
    paired_ratios,
    print_machine,
    print_table,
    write_json,
)
from _plain_envpool_ppo import ACTOR_KEY, SEED, PlainPPO, Workload

import rlpipe.artifacts.store as store_module
import rlpipe.envs.backends.envpool_env as envpool_module
import rlpipe.trainer.trainer as trainer_module
from rlpipe.tracking.background import prewarm
from rlpipe.trainer import Trainer

IDS = ("PandaPickCube-v1", "Go1JoystickFlatTerrain-v1", "HalfCheetah-v5")
SETTLE_S = 1.0
"""Pause before reading the tracking process's CPU time, so it has written what was logged."""


# ---------------------------------------------------------------------------------------- rlpipe


def rlpipe_overrides(
    env_id: str, w: Workload, data_dir: str, groups: list[str] | None, mlflow: bool = True
) -> list[str]:
    """The workload as ``--set`` overrides of ``params.yaml`` (the store stays on, MLflow unless ``mlflow``
    is false).

    ``groups``: a dict observation's keys, :data:`ACTOR_KEY` first (``None``: a flat observation).
    """
    net = f"network_cfg: {{hidden_sizes: {list(w.hidden)}, activation: elu}}"
    actor_keys, critic_keys = (
        (f"obs_keys: [{ACTOR_KEY}], ", f"obs_keys: [{', '.join(groups)}], ") if groups else ("", "")
    )
    algo = (
        f"{{learning_rate: {w.lr}, n_epochs: {w.epochs}, num_mini_batches: {w.minibatches}, "
        f"gamma: {w.gamma}, gae_lambda: {w.gae_lambda}, clip_coef: {w.clip}, ent_coef: {w.ent_coef}, "
        f"vf_coef: {w.vf_coef}, max_grad_norm: {w.max_grad_norm}, normalize_advantage: batch}}"
    )
    return [
        f"env.id={env_id}",
        "env.backend=envpool",
        "env.cfg={mode: sync, num_threads: 1}",
        f"trainer.num_envs={w.num_envs}",
        f"trainer.buffer_size={w.horizon}",
        "trainer.device=cpu",
        f"trainer.seed={SEED}",
        f"trainer.num_threads={torch.get_num_threads()}",
        "trainer.enable_eval=false",
        f"trainer.iterations={NEVER}",
        f"trainer.save_freq={NEVER}",
        "trainer.stop_when=[]",
        f"trainer.data_dir={data_dir}",
        f"trainer.exp_name=envpool_loop_{env_id}",
        "policy.name=actor_critic",
        "policy.obs_normalization=true",
        "policy.log_std_init=0.0",
        f"policy.actor={{type: mlp, {actor_keys}{net}}}",
        f"policy.critic={{type: mlp, {critic_keys}{net}}}",
        "algorithm.name=ppo",
        f"algorithm.cfg={algo}",
        "store.enabled=true",
        *(
            ["tracking.backend=mlflow", f"tracking.uri=sqlite:///{data_dir}/mlflow.db"]
            if mlflow
            else ["tracking.backend=none"]
        ),
    ]


class RlpipeSide:
    """A started ``Trainer`` of the workload; :meth:`iteration` is ``step()``."""

    def __init__(self, env_id: str, w: Workload, data_dir: str, mlflow: bool = True) -> None:
        import envpool

        space = envpool.make_spec(env_id).observation_space
        groups = sorted(space.spaces, key=lambda k: k != ACTOR_KEY) if hasattr(space, "spaces") else None
        cfg = load_cfg(DEFAULT_PARAMS, rlpipe_overrides(env_id, w, data_dir, groups, mlflow))
        self.trainer = Trainer(cfg)
        with contextlib.redirect_stdout(io.StringIO()):  # the banner; the rows go to the same buffer
            self.trainer.start()

    def iteration(self) -> dict[str, float]:
        metrics = self.trainer.step()
        return {"collect_s": metrics["time/collect_s"], "update_s": metrics["time/update_s"]}

    def settle(self) -> None:
        """Wait for the store to write what was submitted (the end of a timed round)."""
        self.trainer.parts.store.flush()

    def writer_pid(self) -> int | None:
        """The store's writer process (``store.writer: process``, once started), or ``None``."""
        handle = getattr(self.trainer.parts.store, "_process", None)
        process = getattr(handle, "_process", None)
        return process.pid if process is not None else None

    def writer_cpu(self) -> float:
        """CPU seconds of the store's writer process so far (0 without one)."""
        return process_cpu(self.writer_pid())

    def close(self) -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            self.trainer.close()


# ---------------------------------------------------------------------------------------- timing


def process_cpu(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` (0 for ``None`` or one that has ended)."""
    if pid is None:
        return 0.0
    with contextlib.suppress(psutil.Error):
        times = psutil.Process(pid).cpu_times()
        return times.user + times.system
    return 0.0


def children_cpu(exclude: tuple[int | None, ...] = ()) -> float:
    """CPU seconds of this process's live child processes but ``exclude`` (rlpipe's MLflow tracking process;
    the store's writer process is passed in ``exclude`` and counted as the store's)."""
    return sum(
        process_cpu(child.pid)
        for child in psutil.Process().children(recursive=True)
        if child.pid not in exclude
    )


def wait_for_idle_children(poll_s: float = 0.5, timeout_s: float = 120.0) -> None:
    """Wait until the child processes stop using CPU: MLflow's start-up (import, opening the store and
    the run) is no iteration's work."""
    deadline, last = time.monotonic() + timeout_s, children_cpu()
    while time.monotonic() < deadline:
        time.sleep(poll_s)
        now = children_cpu()
        if now - last < 0.02 * poll_s:
            return
        last = now


def tracking_cpu(since: float, iterations: int, exclude: tuple[int | None, ...] = ()) -> float:
    """The tracking process's CPU seconds per iteration since ``since`` (``children_cpu``), once it is idle.

    It writes each iteration's metrics after the iteration logged them, so its CPU is read after a
    pause and charged to rlpipe's iterations, never to the plain loop's that it overlapped.
    """
    time.sleep(SETTLE_S)
    return (children_cpu(exclude) - since) / iterations


def timed_round(side: Any, iterations: int) -> dict[str, float]:
    """Wall and process CPU seconds of ``iterations`` iterations (rlpipe: until its store has written;
    its writer process's CPU included)."""
    writer_cpu = getattr(side, "writer_cpu", lambda: 0.0)
    wall, cpu, splits, writer = time.perf_counter(), time.process_time(), [], writer_cpu()
    for _ in range(iterations):
        splits.append(side.iteration())
    getattr(side, "settle", lambda: None)()
    return {
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu + writer_cpu() - writer,
        "collect_s": sum(s["collect_s"] for s in splits),
        "update_s": sum(s["update_s"] for s in splits),
    }


ENV_STEP = "collect: env step (envpool send, recv, reset)"


def instrument_plain(plain: PlainPPO, phases: Phases) -> None:
    phases.wrap(plain.agent, "act", "collect: policy forward (actor, sample, critic)")
    phases.wrap(plain.envs, "step", ENV_STEP)
    phases.wrap(plain, "collect", "collect: rollout writes, conversions, loop")
    phases.wrap(plain, "advantages", "advantage (GAE)")
    phases.wrap(plain.agent, "evaluate", "update: forward")
    phases.wrap(plain.optimizer, "step", "update: optimizer step")
    phases.wrap(plain, "update", "update: loss, backward, grad clip, loop")


def instrument_rlpipe(side: RlpipeSide, phases: Phases) -> None:
    """Wrap rlpipe's phases where the trainer looks them up (its parts, and ``rlpipe.trainer.trainer``)."""
    trainer = side.trainer
    parts, policy = trainer.parts, trainer.parts.algo.policy
    phases.wrap(policy, "sample", "collect: policy forward (actor, sample)")
    phases.wrap(parts.env, "step", "collect: env adapter (actions out, bookkeeping)")
    phases.wrap(envpool_module, "obs_to_torch", "collect: env adapter (numpy → torch)")
    phases.wrap(parts.collector, "_fill_values", "collect: critic values (batched)")
    phases.wrap(trainer, "collect", "collect: rollout writes, conversions, loop")
    phases.wrap(parts.algo, "compute_advantages", "advantage (GAE)")
    for name in ("nonfinite_rollout", "nonfinite_update"):
        phases.wrap(trainer_module, name, "guards (non-finite checks)")
    phases.wrap(trainer.state, "rollout_attrs", "store: submit (checks, host copy, attrs)")
    phases.wrap(parts.store, "submit", "store: submit (checks, host copy, attrs)")
    phases.wrap(policy, "evaluate", "update: forward")
    phases.wrap(parts.algo.optimizer, "step", "update: optimizer step")
    phases.wrap(policy, "update_normalization", "update: obs normalization merge")
    phases.wrap(parts.algo, "update", "update: loss, backward, grad clip, loop")
    phases.wrap(trainer.session.tracker, "log", "tracking (console row, curve.csv, MLflow queue)")


def breakdown(name: str, side: Any, iterations: int, pool_class: type, mlflow: bool) -> list[dict[str, Any]]:
    """ms per iteration of each phase over ``iterations`` instrumented iterations (see the docstring).

    ``mlflow``: rlpipe has a tracking process, whose CPU gets a row.
    """
    phases, writer = Phases(), [0.0, 0.0]
    real_write = store_module._write_checked
    handle = getattr(side.trainer.parts.store, "_process", None) if name == "rlpipe" else None
    in_process = handle is not None
    writer_cpu = side.writer_cpu if in_process else time.thread_time

    def write(real: Any, *args: Any, **kwargs: Any) -> None:  # on the hand-over thread: beside the table
        wall, cpu = time.perf_counter(), writer_cpu()
        real(*args, **kwargs)
        writer[0] += time.perf_counter() - wall
        writer[1] += writer_cpu() - cpu

    try:
        for method in ("send", "recv", "reset"):  # the pool class both sides' pools of this id share
            phases.wrap(pool_class, method, ENV_STEP)
        if name == "plain":
            instrument_plain(side, phases)
        else:
            instrument_rlpipe(side, phases)
            if in_process:
                handle.write = functools.partial(write, type(handle).write.__get__(handle))
            else:
                store_module._write_checked = functools.partial(write, real_write)
        wall, cpu, children = time.perf_counter(), time.process_time(), children_cpu()
        for _ in range(iterations):
            side.iteration()
        getattr(side, "settle", lambda: None)()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        phases.restore()
        store_module._write_checked = real_write
        if in_process:
            del handle.write
    per = 1e3 / iterations

    def row(phase: str, cpu_s: float, wall_s: float | None) -> dict[str, Any]:
        wall_ms = None if wall_s is None else per * wall_s
        return {"side": name, "phase": phase, "cpu_ms": per * cpu_s, "wall_ms": wall_ms}

    rows = [row(phase, phases.cpu[phase], phases.wall[phase]) for phase in sorted(phases.wall)]
    rows.append(
        row(
            "other (iteration bookkeeping, metrics)",
            cpu - sum(phases.cpu.values()),
            wall - sum(phases.wall.values()),
        )
    )
    rows.append(row("= the iteration (process)", cpu, wall))
    if name == "rlpipe" and in_process:
        rows.append(
            row("+ the store writer process (Zarr write; wall: the hand-over's wait)", writer[1], writer[0])
        )
    elif name == "rlpipe":
        rows.append(row("  of which the store writer thread (Zarr write)", writer[1], writer[0]))
        if mlflow:
            rows.append(row("+ the MLflow tracking process", tracking_cpu(children, 1), None))
    return rows


def profile_top(side: RlpipeSide, iterations: int, top: int) -> list[dict[str, Any]]:
    """cProfile of rlpipe's ``iterations`` iterations: the ``top`` functions by own time, per iteration."""
    profiler = cProfile.Profile(time.process_time)  # CPU: a loaded machine's preemptions stay out
    profiler.runcall(lambda: [side.iteration() for _ in range(iterations)])
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]  # pstats keeps its table here
    rows = sorted(stats.items(), key=lambda item: -item[1][2])[:top]
    return [
        {
            "function": f"{Path(file).name}:{line}({fn})",
            "calls": calls / iterations,
            "own_ms": 1e3 * own / iterations,
            "cumulative_ms": 1e3 * cumulative / iterations,
        }
        for (file, line, fn), (_, calls, own, cumulative, _) in rows
    ]


# ------------------------------------------------------------------------------------------ main


def run_id(env_id: str, w: Workload, args: argparse.Namespace) -> dict[str, Any]:
    mlflow = not args.no_mlflow
    with tempfile.TemporaryDirectory(prefix="rlpipe-envpool-loop-") as data_dir:
        if mlflow:
            prewarm()  # as `rlpipe run` does: the MLflow process starts while the envs are built
        sides: dict[str, Any] = {"plain": PlainPPO(env_id, w)}
        sides["rlpipe"] = RlpipeSide(env_id, w, data_dir, mlflow)
        try:
            for side in sides.values():
                timed_round(side, args.warmup)
            if mlflow:
                wait_for_idle_children()
            samples: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
            children = children_cpu((sides["rlpipe"].writer_pid(),))
            for index in range(args.rounds):
                for name, side in sides.items():
                    samples[name].append(timed_round(side, args.iterations))
                print(
                    f"  {env_id} round {index + 1}/{args.rounds}: "
                    + ", ".join(
                        f"{n} {samples[n][-1]['wall_s']:.2f} s wall, "
                        f"{samples[n][-1]['cpu_s']:.2f} s process CPU"
                        for n in sides
                    ),
                    flush=True,
                )
            exclude = (sides["rlpipe"].writer_pid(),)  # counted in rlpipe's rounds as the store's
            tracking = tracking_cpu(children, args.rounds, exclude) if mlflow else 0.0  # per rlpipe round
            for sample in samples["rlpipe"]:
                sample["tracking_cpu_s"], sample["cpu_s"] = tracking, sample["cpu_s"] + tracking
            extra: dict[str, Any] = {}
            if not args.no_breakdown:
                n, pool_class = args.breakdown_iterations, type(sides["plain"].envs)
                extra["profile"] = profile_top(sides["rlpipe"], n, args.profile_top)
                extra["breakdown"] = [
                    row
                    for name, side in sides.items()
                    for row in breakdown(name, side, n, pool_class, mlflow)
                ]
        finally:
            sides["rlpipe"].close()
    return summarize(env_id, w, args, samples) | extra


def summarize(
    env_id: str, w: Workload, args: argparse.Namespace, samples: dict[str, list[dict[str, float]]]
) -> dict[str, Any]:
    steps = w.num_envs * w.horizon * args.iterations
    row: dict[str, Any] = {"id": env_id, "num_envs": w.num_envs, "horizon": w.horizon}
    for name, rounds in samples.items():
        row[f"{name}_sps_wall"] = median([steps / r["wall_s"] for r in rounds])
        row[f"{name}_sps_cpu"] = median([steps / r["cpu_s"] for r in rounds])
        for key in ("collect_s", "update_s"):
            row[f"{name}_{key}"] = median([r[key] / args.iterations for r in rounds])
    for unit in ("wall", "cpu"):
        mine, theirs = ([r[f"{unit}_s"] for r in samples[n]] for n in ("rlpipe", "plain"))
        row[f"ratio_{unit}"] = median(paired_ratios(theirs, mine))  # env steps/s: rlpipe over plain
    return row | {"rounds": samples}


COLUMNS = (
    ("id", "id", ""),
    ("plain_sps_wall", "plain steps/s", ",.0f"),
    ("rlpipe_sps_wall", "rlpipe steps/s", ",.0f"),
    ("ratio_wall", "wall ratio", ".2f"),
    ("plain_sps_cpu", "plain steps/CPU s", ",.0f"),
    ("rlpipe_sps_cpu", "rlpipe steps/CPU s", ",.0f"),
    ("ratio_cpu", "CPU ratio", ".2f"),
    ("plain_collect_s", "plain collect s", ".3f"),
    ("rlpipe_collect_s", "rlpipe collect s", ".3f"),
    ("plain_update_s", "plain update s", ".3f"),
    ("rlpipe_update_s", "rlpipe update s", ".3f"),
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--ids", nargs="+", default=list(IDS), help="envpool ids")
    add("--num-envs", type=int, default=64, help="N (default 64)")
    add("--horizon", type=int, default=64, help="T, steps per env per iteration (default 64)")
    add("--epochs", type=int, default=4, help="E (default 4)")
    add("--minibatches", type=int, default=4, help="M (default 4)")
    add("--hidden", type=int, nargs="+", default=[256, 256], help="hidden sizes of actor and critic")
    add("--warmup", type=int, default=1, help="untimed iterations per side (default 1)")
    add("--rounds", type=int, default=5, help="timed rounds (default 5)")
    add("--iterations", type=int, default=2, help="iterations per side per round (default 2)")
    add("--threads", type=int, default=1, help="torch threads (default 1)")
    add("--breakdown-iterations", type=int, default=3, help="breakdown iterations per side (default 3)")
    add("--no-breakdown", action="store_true", help="skip the phase breakdown and the profile")
    add("--profile-top", type=int, default=15, help="functions listed by the profile (default 15)")
    add(
        "--no-mlflow",
        action="store_true",
        help="tracking.backend=none for rlpipe: no MLflow process (a quick check; MLflow's cost left out)",
    )
    add("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    w = Workload(args.num_envs, args.horizon, args.epochs, args.minibatches, tuple(args.hidden))
    print(
        f"plain torch PPO vs rlpipe (store on, MLflow {'off' if args.no_mlflow else 'on'}) on envpool: "
        f"N={w.num_envs} T={w.horizon} "
        f"{list(w.hidden)} ELU, {w.epochs} epochs x {w.minibatches} minibatches, "
        f"{args.iterations} iterations x {args.rounds} rounds, threads={torch.get_num_threads()}"
    )
    rows = [run_id(env_id, w, args) for env_id in args.ids]
    print_table(rows, COLUMNS)
    for row in rows:
        if "breakdown" in row:
            print(f"\n{row['id']}: ms per iteration")
            print_table(
                row["breakdown"],
                (
                    ("side", "side", ""),
                    ("phase", "phase", ""),
                    ("cpu_ms", "CPU ms", ".1f"),
                    ("wall_ms", "wall ms", ".1f"),
                ),
            )
            print(f"{row['id']}: rlpipe's top functions by own CPU time (cProfile), per iteration")
            print_table(
                row["profile"],
                (
                    ("function", "function", ""),
                    ("calls", "calls", ".0f"),
                    ("own_ms", "own ms", ".1f"),
                    ("cumulative_ms", "cum ms", ".1f"),
                ),
            )
    print_machine()
    write_json(
        args.json,
        {
            "benchmark": "envpool_loop",
            "workload": vars(w) | {"hidden": list(w.hidden)},
            "args": {k: str(v) for k, v in vars(args).items()},
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
