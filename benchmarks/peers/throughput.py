"""Massive-batch throughput: one rlpipe PPO iteration against a plain-torch PPO loop doing the same work.

    .venv/bin/python benchmarks/peers/throughput.py [--warmup 3] [--iterations 10] [--threads N]
        [--num-envs 4096] [--horizon 32] [--hidden 256 256] [--epochs 4] [--batch-size 16384]
        [--device cpu] [--checkpoints] [--json PATH]
    .venv/bin/python benchmarks/peers/throughput.py --store [--block 2] ...   # store on vs off
    .venv/bin/python benchmarks/peers/throughput.py --guards ...   # non-finite guard on vs off
    .venv/bin/python benchmarks/peers/throughput.py --profile [--profile-rows 15]  # where the time goes

Workload: torch CartPole (``rlpipe.envs.CartPole``), N=4096 envs × T=32 steps, separate actor and
critic MLPs 256×256 ReLU, PPO with 4 epochs × 8 minibatches of 16384, Adam, grad clip 0.5.

rlpipe is built from ``params.yaml`` through ``rlpipe.config.load`` with the overrides
``trainer.num_envs``, ``trainer.buffer_size``, ``policy.{actor,critic}.network_cfg``,
``algorithm.cfg.n_epochs``/``batch_size``, ``store.enabled=false``, ``tracking.backend=none``,
``trainer.enable_eval=false`` (plus ``trainer.iterations`` and ``trainer.save_freq`` pushed out of
reach so no iteration is the "last" one and no checkpoint is written; ``--checkpoints`` keeps the
params' ``save_freq``, which with this workload checkpoints every iteration). One
``rlpipe.trainer.Trainer`` is started per side (its console rows captured) and one iteration is
``Trainer.step``.

The plain loop is ``PlainPPO`` of ``_plain_cartpole_ppo.py`` beside this script: what one writes by hand
in the CleanRL style, on the same env class, with the hyperparameters of the same resolved config.

The two alternate iteration by iteration (A, B, A, B …) after ``--warmup`` iterations each; the
table gives the median of ``--iterations`` timed iterations per side, rlpipe's collect/update
split (``time/collect_s`` includes the store submit; ``time/update_s`` is advantage + update), and
the ratio rlpipe/plain as the median of the per-pair ratios. Target: ≤ 1.05× (rl8 and rsl_rl
measure about 1.10–1.15× a plain loop on this workload). The table also counts the process's
minor page faults per iteration: memory glibc handed back to the OS and had to fault in again
(``MALLOC_TRIM_THRESHOLD_``/``MALLOC_MMAP_THRESHOLD_`` or jemalloc remove most of them, on both
sides). On a shared machine ``--threads 1`` gives much steadier numbers than torch's default of
one thread per core, whose parallel regions stall whenever a core is taken by another process.

``--store`` instead compares rlpipe with ``store.enabled=true`` (writing to a temporary
``trainer.data_dir``, or ``--data-dir``) against ``store.enabled=false``, alternating blocks of
``--block`` iterations; a store-on block's time includes waiting for its last write to reach
disk, so background writes never leak into the store-off block that follows. Target: ≤ 1.03×.

``--guards`` compares rlpipe with its non-finite guard (the checks at every stage boundary, the
state it would restore in ``skip`` mode, and the per-step gradient-norm flag) against the same loop
with all of them switched off, interleaved iteration by iteration; it also times the guard's own
calls inside the guarded iterations and reports them as a share of the iteration (the direct
measure: robust to a busy machine). Target: < 1%.

``--profile`` runs one warm-up and one profiled iteration of each side under ``torch.profiler``
and prints the top ops by self CPU time, then rlpipe's functions by cumulative time (cProfile).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

import torch
from _bench import (
    NEVER,
    add_workload_args,
    load_cfg,
    median,
    paired_ratios,
    print_machine,
    print_table,
    set_threads,
    start_quietly,
    synchronize,
    timed,
    write_json,
)
from _plain_cartpole_ppo import PlainPPO

import rlpipe.trainer.lifecycle as lifecycle_module
import rlpipe.trainer.trainer as trainer_module
from rlpipe.algorithms.finite import GradientCheck
from rlpipe.trainer import Trainer

RATIO_TARGET = 1.05
STORE_RATIO_TARGET = 1.03
GUARD_RATIO_TARGET = 1.01


# ---------------------------------------------------------------------------------------- config


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add_workload_args(parser, "trainer.device for both sides (default cpu)")
    add("--warmup", type=int, default=3, help="untimed iterations per side (store mode: blocks)")
    add("--iterations", type=int, default=10, help="timed iterations per side (store mode: blocks)")
    add("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    add("--checkpoints", action="store_true", help="keep the params' save_freq (checkpoints)")
    add("--store", action="store_true", help="compare store.enabled=true against false instead")
    add("--block", type=int, default=2, help="iterations per block in --store mode (default 2)")
    add("--data-dir", type=Path, default=None, help="where --store writes (default: a temp dir)")
    add("--guards", action="store_true", help="compare the non-finite guard on against off instead")
    add("--profile", action="store_true", help="profile one iteration of each side instead")
    add("--profile-rows", type=int, default=15, help="rows per profile table (default 15)")
    add("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def rlpipe_overrides(args: argparse.Namespace, data_dir: str, store: bool) -> list[str]:
    """The workload as ``--set`` overrides of the default params."""
    net = f"{{hidden_sizes: {list(args.hidden)}, activation: relu}}"
    overrides = [
        f"trainer.num_envs={args.num_envs}",
        f"trainer.buffer_size={args.horizon}",
        f"policy.actor.network_cfg={net}",
        f"policy.critic.network_cfg={net}",
        f"algorithm.cfg.n_epochs={args.epochs}",
        f"algorithm.cfg.batch_size={args.batch_size}",
        f"store.enabled={str(store).lower()}",
        "tracking.backend=none",
        "trainer.enable_eval=false",
        f"trainer.device={args.device}",
        f"trainer.data_dir={data_dir}",
        f"trainer.iterations={NEVER}",
    ]
    if getattr(args, "threads", None) is not None:  # the same torch threads as the plain loop
        overrides.append(f"trainer.num_threads={args.threads}")
    return overrides if args.checkpoints else [*overrides, f"trainer.save_freq={NEVER}"]


def build_rlpipe(args: argparse.Namespace, data_dir: str, store: bool) -> Trainer:
    """A ``Trainer`` of the workload, started as ``rlpipe run`` starts (its console rows captured).

    The caller closes it (``Trainer.close``: the store flushed, ``metrics.json`` written).
    """
    return start_quietly(Trainer(load_cfg(args.params, rlpipe_overrides(args, data_dir, store))))


# ---------------------------------------------------------------------------------------- timing


class Sample(NamedTuple):
    """One iteration (or the per-iteration mean of a block) of one side."""

    wall_s: float
    collect_s: float
    update_s: float
    page_faults: float
    """Minor page faults of the process: first touches of memory the allocator got from the OS."""


def minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def rlpipe_iteration(trainer: Trainer) -> Sample:
    """One ``Trainer.step``; its own collect/update split (``time/collect_s``, ``time/update_s``)."""
    faults, start = minor_faults(), time.perf_counter()
    metrics = trainer.step()
    synchronize(trainer.algo.device)
    return Sample(
        time.perf_counter() - start,
        metrics["time/collect_s"],
        metrics["time/update_s"],
        minor_faults() - faults,
    )


def plain_iteration(plain: PlainPPO) -> Sample:
    faults, start = minor_faults(), time.perf_counter()
    collect_s, update_s = plain.iteration()
    return Sample(time.perf_counter() - start, collect_s, update_s, minor_faults() - faults)


def interleave(
    sides: dict[str, Callable[[], Sample]], warmup: int, timed_rounds: int
) -> dict[str, list[Sample]]:
    """Run the sides in turn, round after round; keep the samples of the timed rounds."""
    samples: dict[str, list[Sample]] = {name: [] for name in sides}
    for round_index in range(warmup + timed_rounds):
        last = {name: fn() for name, fn in sides.items()}
        if round_index >= warmup:
            for name, sample in last.items():
                samples[name].append(sample)
        print(
            f"  round {round_index + 1}/{warmup + timed_rounds}"
            f"{' (warm-up)' if round_index < warmup else ''}: "
            + ", ".join(f"{name} {sample.wall_s:.3f} s" for name, sample in last.items()),
            flush=True,
        )
    return samples


def side_row(name: str, samples: list[Sample], steps: int) -> dict[str, Any]:
    walls = [s.wall_s for s in samples]
    return {
        "side": name,
        "median_s": median(walls),
        "min_s": min(walls),
        "max_s": max(walls),
        "collect_s": median([s.collect_s for s in samples]),
        "update_s": median([s.update_s for s in samples]),
        "page_faults": median([s.page_faults for s in samples]),
        "sps": steps / median(walls),
        "n": len(walls),
        "samples": [s._asdict() for s in samples],
    }


SIDE_COLUMNS = [
    ("side", "side", ""),
    ("median_s", "median s/it", ".3f"),
    ("min_s", "min", ".3f"),
    ("max_s", "max", ".3f"),
    ("collect_s", "collect s", ".3f"),
    ("update_s", "update s", ".3f"),
    ("page_faults", "page faults/it", ",.0f"),
    ("sps", "env steps/s", ",.0f"),
    ("n", "n", ""),
]


def report(samples: dict[str, list[Sample]], steps: int, target: float) -> dict[str, Any]:
    """Print the per-side table and the ratio first/second; return both for the JSON."""
    (a_name, a), (b_name, b) = samples.items()
    rows = [side_row(name, s, steps) for name, s in samples.items()]
    print_table(rows, SIDE_COLUMNS)
    ratios = paired_ratios([s.wall_s for s in a], [s.wall_s for s in b])
    ratio = median(ratios)
    verdict = "meets" if ratio <= target else "misses"
    print(
        f"ratio {a_name}/{b_name}: {ratio:.3f}x median of {len(ratios)} pairs "
        f"(ratio of medians {rows[0]['median_s'] / rows[1]['median_s']:.3f}x; "
        f"pairs min {min(ratios):.3f} max {max(ratios):.3f}) — {verdict} the <= {target:.2f}x target"
    )
    return {"rows": rows, "pair_ratios": ratios, "ratio_median": ratio, "target": target}


# ----------------------------------------------------------------------------------------- modes


def compare_plain(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rlpipe-throughput-") as data_dir:
        trainer = build_rlpipe(args, data_dir, store=False)
        try:
            device = trainer.algo.device
            plain = PlainPPO(trainer.cfg, list(args.hidden), device)
            print(
                f"rlpipe vs plain torch: N={args.num_envs} T={args.horizon} hidden={args.hidden} "
                f"epochs={args.epochs} batch={args.batch_size} device={device} "
                f"threads={torch.get_num_threads()}"
            )
            sides = {"rlpipe": lambda: rlpipe_iteration(trainer), "plain": lambda: plain_iteration(plain)}
            samples = interleave(sides, args.warmup, args.iterations)
        finally:
            trainer.close()
    return report(samples, args.num_envs * args.horizon, RATIO_TARGET)


def store_block(trainer: Trainer, block: int) -> Sample:
    """Per-iteration mean over ``block`` iterations, the wait for their writes included."""
    faults, start = minor_faults(), time.perf_counter()
    parts = [rlpipe_iteration(trainer) for _ in range(block)]
    if trainer.parts.store is not None:
        trainer.parts.store.flush()
    wall, faults = time.perf_counter() - start, minor_faults() - faults
    return Sample(
        wall / block,
        sum(p.collect_s for p in parts) / block,
        sum(p.update_s for p in parts) / block,
        faults / block,
    )


def compare_store(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rlpipe-store-", dir=args.data_dir) as data_dir:
        store_on = build_rlpipe(args, str(Path(data_dir) / "on"), store=True)
        store_off = build_rlpipe(args, str(Path(data_dir) / "off"), store=False)
        print(
            f"rlpipe store on vs off: N={args.num_envs} T={args.horizon}, blocks of {args.block} "
            f"iterations, writing under {data_dir}, threads={torch.get_num_threads()}"
        )
        return store_on_vs_off(store_on, store_off, args, "store on", STORE_RATIO_TARGET)


def store_on_vs_off(
    on: Trainer, off: Trainer, args: argparse.Namespace, label: str, target: float
) -> dict[str, Any]:
    """Blocks of ``args.block`` iterations with the store on (``label``) and off, interleaved; the report.

    Closes both trainers (``off`` first: it was started last).
    """
    try:
        samples = interleave(
            {label: lambda: store_block(on, args.block), "store off": lambda: store_block(off, args.block)},
            args.warmup,
            args.iterations,
        )
    finally:
        off.close()
        on.close()
    return report(samples, args.num_envs * args.horizon, target)


GUARD_CALLS = (
    (trainer_module, "nonfinite_rollout"),
    (trainer_module, "nonfinite_update"),
    (lifecycle_module, "nonfinite_weight"),
)
"""The non-finite guard's calls, where the trainer looks them up: the rollout and update checks and the
weight check before checkpoints (``stop`` mode keeps no state to restore)."""
Replace = Callable[[str, Callable[..., Any]], Callable[..., Any]]
"""``replace(name, original)``: what a guard call is swapped for (``no_guard``, a ``TimedGuard``)."""


@contextlib.contextmanager
def guard_calls(replace: Replace) -> Iterator[None]:
    """For the body, every guard call ``name`` is ``replace(name, original)`` (one trainer's iteration)."""
    originals = [(module, name, getattr(module, name)) for module, name in GUARD_CALLS]
    for module, name, original in originals:
        setattr(module, name, replace(name, original))
    try:
        yield
    finally:
        for module, name, original in originals:
            setattr(module, name, original)


def no_guard(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """The guard switched off: no check finds anything, no state is kept (the gradient flag is drained)."""
    if name == "nonfinite_update":

        def drain(algo: Any, metrics: dict[str, float]) -> None:
            algo.gradient_check.take()

        return drain
    return lambda *args: None


class PlainClip(GradientCheck):
    """``clip_grad_norm_`` without the non-finite flag."""

    def clip(self, parameters: Any, max_norm: float, scaler_skips_inf: bool = False) -> torch.Tensor:
        return torch.nn.utils.clip_grad_norm_(list(parameters), max_norm)


class TimedGuard:
    """The real guard calls, timed (a CUDA device is synchronized around each): a ``guard_calls`` argument."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.seconds = device, 0.0

    def __call__(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def timed_call(*args: Any) -> Any:
            synchronize(self.device)
            start = time.perf_counter()
            try:
                return original(*args)
            finally:
                synchronize(self.device)
                self.seconds += time.perf_counter() - start

        return timed_call


def guarded_iteration(trainer: Trainer, replace: Replace) -> Sample:
    """One ``rlpipe_iteration`` with the guard calls replaced (see ``guard_calls``)."""
    with guard_calls(replace):
        return rlpipe_iteration(trainer)


def compare_guards(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rlpipe-guards-") as data_dir:
        on = build_rlpipe(args, str(Path(data_dir) / "on"), store=False)
        off = build_rlpipe(args, str(Path(data_dir) / "off"), store=False)
        try:
            off.algo.gradient_check = PlainClip()
            timed_guard = TimedGuard(on.algo.device)
            print(
                f"rlpipe non-finite guard on vs off: N={args.num_envs} T={args.horizon} "
                f"device={on.algo.device} threads={torch.get_num_threads()}"
            )
            samples = interleave(
                {
                    "guard on": lambda: guarded_iteration(on, timed_guard),
                    "guard off": lambda: guarded_iteration(off, no_guard),
                },
                args.warmup,
                args.iterations,
            )
        finally:
            off.close()
            on.close()
    result = report(samples, args.num_envs * args.horizon, GUARD_RATIO_TARGET)
    rounds = args.warmup + args.iterations
    share = timed_guard.seconds / sum(s.wall_s for s in samples["guard on"]) * args.iterations / rounds
    print(
        f"the guard's own checks: {1e3 * timed_guard.seconds / rounds:.2f} ms per iteration, "
        f"{100 * share:.2f}% of a guarded iteration (target < 1%; excludes the per-step norm flag)"
    )
    return {**result, "guard_ms_per_iteration": 1e3 * timed_guard.seconds / rounds, "guard_share": share}


def profile(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rlpipe-profile-") as data_dir:
        trainer = build_rlpipe(args, data_dir, store=False)
        try:
            plain = PlainPPO(trainer.cfg, list(args.hidden), trainer.algo.device)
            results = {}
            sides = {"rlpipe": lambda: rlpipe_iteration(trainer), "plain": lambda: plain_iteration(plain)}
            for name, fn in sides.items():
                fn()  # warm-up
                results[name] = torch_profile(name, fn, args.profile_rows)
            results["rlpipe_functions"] = python_profile(lambda: rlpipe_iteration(trainer), args.profile_rows)
        finally:
            trainer.close()
    return results


def torch_profile(name: str, fn: Callable[[], Any], rows: int) -> str:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        wall, _ = timed(fn)
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)
    print(f"\n== {name}: one iteration, {wall:.3f} s wall under the profiler; top ops by self CPU ==")
    print(table)
    return table


def python_profile(fn: Callable[[], Any], rows: int) -> str:
    profiler = cProfile.Profile()
    profiler.runcall(fn)
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats("rlpipe", rows)
    print("\n== rlpipe: one iteration under cProfile, rlpipe functions by cumulative time ==")
    print(out.getvalue())
    return out.getvalue()


def main() -> None:
    args = parse_args()
    set_threads(args.threads)
    if args.profile:
        write_json(args.json, {"benchmark": "throughput-profile", **profile(args)})
        return
    mode = "store" if args.store else "guards" if args.guards else "plain"
    result = {"store": compare_store, "guards": compare_guards, "plain": compare_plain}[mode](args)
    print_machine()
    settings = {k: str(v) for k, v in vars(args).items()}
    write_json(args.json, {"benchmark": f"throughput-{mode}", "args": settings, **result})


if __name__ == "__main__":
    main()
