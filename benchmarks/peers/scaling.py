"""Scaling sweep: env steps/s, page faults, peak RSS and the update's GFLOP/s from 256 to 16,384 envs.

    .venv/bin/python benchmarks/peers/scaling.py [--sizes 256 1024 4096 16384]
        [--sides rlpipe plain rlpipe-bf16]
        [--malloc tuned threshold system] [--warmup 1] [--iterations 3] [--large-iterations 1]
        [--rounds 1] [--device cpu] [--also OLD.json ...] [--json PATH] [--png PATH]

Workload (as ``benchmarks/peers/throughput.py``): torch CartPole, N envs × T=32 steps, separate actor and
critic MLPs 256×256 ReLU, PPO 4 epochs × 8 minibatches of N·T/8, Adam, store off, one torch
thread. Sides: ``rlpipe`` (``Trainer.step``, fp32), ``plain`` (throughput.py's CleanRL-style
loop, fp32), ``rlpipe-bf16`` (``algorithm.cfg.amp=bf16``) and ``rlpipe-whole`` (fp32 with
``algorithm.cfg.chunk_rows=null``: whole minibatches in one forward and backward; ``rlpipe`` runs the
default, chunks of 4096 rows on CPU).

Every (N, side) runs in its own process, so its peak RSS (``ru_maxrss``) and page faults are its
own; sides alternate within a round (``--rounds`` repeats the whole alternation). A process does
``--warmup`` untimed and ``--iterations`` timed iterations (``--large-iterations`` when N·T > 131,072);
the tables give medians. ``--also`` merges the rows of earlier runs' JSON. Reported:

* env steps per CPU second = N·T / the process's CPU seconds per iteration (user + system, so page
  faults count), the headline figure because the shared machine's wall clock measures its load;
  with one thread on a quiet machine it equals env steps/s, which is reported too. Collect and update
  CPU seconds (rlpipe: its collector, the algorithm's advantage + update), minor page faults per
  iteration, peak RSS and its parts (RSS after build, the rollout buffer, the update's flat batch
  and minibatch working set);
* the update's achieved GFLOP/s: matmul FLOPs from the layer shapes, forward + backward ≈ 3 ×
  forward = 3 · 2 · Σ in·out per sample and network, × epochs × N·T, over the update's CPU seconds;
  against the single-thread GEMM rate measured in the same process after every timed iteration,
  also in CPU time (``[N·T/8 capped at 16384, 256] @ [256, 256]``, the layer's own shape, and a
  square 1024³), fp32 and bf16.

``--malloc`` picks the allocator settings of every child: ``tuned`` (rlpipe's default,
``rlpipe.runtime.allocator.tune_malloc``: glibc mmap off), ``threshold`` (mmap threshold 32 MiB,
trim threshold 1 GiB) or ``system`` (glibc's defaults); rows of a setting other
than ``tuned`` are labelled ``side [setting]``. Goals: env steps per CPU-s at the largest N ≥ 0.9 ×
those at 1,024; fp32 update ≥ 75 % of the GEMM rate. Writes a PNG of env steps per CPU-s against N.
The load average is recorded with every process: on a shared machine compare ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import (
    DEFAULT_PARAMS,
    PROJECT_ROOT,
    environment,
    load_average,
    load_cfg,
    median,
    print_table,
    start_quietly,
)
from _gemm import bf16_native, gemm_rates

SIDES = ("rlpipe", "plain", "rlpipe-bf16", "rlpipe-whole")
SIZES = (256, 1024, 4096, 16384)
OBS_DIM, ACTIONS = 4, 2  # CartPole


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--sizes", type=int, nargs="+", default=list(SIZES), help="numbers of envs N")
    add("--sides", nargs="+", default=list(SIDES), choices=SIDES, help="what to run at every N")
    add(
        "--malloc",
        nargs="+",
        default=["tuned"],
        choices=["tuned", "threshold", "system"],
        help="allocator settings; several: each side runs under each, alternating",
    )
    add("--horizon", type=int, default=32, help="T (default 32)")
    add("--hidden", type=int, nargs="+", default=[256, 256], help="hidden sizes of actor and critic")
    add("--epochs", type=int, default=4, help="PPO epochs (default 4)")
    add("--minibatches", type=int, default=8, help="minibatches per epoch (default 8)")
    add("--warmup", type=int, default=1, help="untimed iterations per process")
    add("--iterations", type=int, default=3, help="timed iterations per process")
    add("--large-iterations", type=int, default=1, help="timed iterations per process when N·T > 131,072")
    add("--rounds", type=int, default=1, help="alternations of the sides per N")
    add("--device", default="cpu", help="trainer.device (default cpu)")
    add("--threads", type=int, default=1, help="torch threads (default 1)")
    add("--json", type=Path, default=PROJECT_ROOT / "data" / "bench" / "scaling.json", help="results")
    add("--png", type=Path, default=PROJECT_ROOT / "data" / "bench" / "scaling.png", help="steps/s vs N")
    add(
        "--bf16-max-n",
        type=int,
        default=None,
        help="largest N of rlpipe-bf16 (default: every N where bf16 is native, else 1024)",
    )
    add(
        "--from-partial",
        type=Path,
        nargs="+",
        default=[],
        help="only build the table/PNG from these .partial.jsonl files of interrupted runs",
    )
    add("--also", type=Path, nargs="+", default=[], help="earlier scaling JSONs: their rows join the table")
    add("--child", nargs=2, metavar=("SIDE", "N"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# ------------------------------------------------------------------------------------ FLOPs, GEMM


def forward_flops_per_sample(hidden: list[int]) -> int:
    """Matmul FLOPs of one sample through actor (→ 2 logits) and critic (→ 1 value): Σ 2·in·out."""
    total = 0
    for out_dim in (ACTIONS, 1):
        sizes = [OBS_DIM, *hidden, out_dim]
        total += sum(2 * a * b for a, b in zip(sizes[:-1], sizes[1:]))
    return total


def update_flops(n: int, args: argparse.Namespace) -> float:
    """FLOPs of one update: epochs × N·T samples × (forward + backward ≈ 3 × forward)."""
    return args.epochs * n * args.horizon * 3 * forward_flops_per_sample(args.hidden)


# ---------------------------------------------------------------------------------------- child


def apply_malloc(mode: str) -> None:
    """The allocator settings of ``mode``, before any large allocation of this process."""
    from rlpipe.runtime import allocator

    if mode == "tuned":
        allocator.tune_malloc()
        return
    os.environ[allocator.MALLOC_ENV] = "system"  # rlpipe's build must not apply its settings
    if mode == "threshold":
        allocator.mallopt({-3: 32 * 2**20, -1: 2**30})  # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD


def rss_bytes() -> int:
    """Resident set size now."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def workload_args(args: argparse.Namespace, n: int) -> argparse.Namespace:
    """throughput.py's namespace for N envs with minibatch N·T/minibatches."""
    return argparse.Namespace(
        params=DEFAULT_PARAMS,
        num_envs=n,
        horizon=args.horizon,
        hidden=args.hidden,
        epochs=args.epochs,
        batch_size=n * args.horizon // args.minibatches,
        device=args.device,
        checkpoints=False,
        threads=args.threads,
    )


class CpuTimed:
    """A callable (the collector, an algorithm method) that also appends its thread CPU seconds to
    ``spent``; its other attributes (``horizon``, ``writes``, ``rollout`` …) read through."""

    def __init__(self, fn: Any, spent: list[float]) -> None:
        self._fn, self._spent = fn, spent

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return self._fn(*args, **kwargs)
        finally:
            self._spent.append(time.thread_time() - start)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fn, name)


def cpu_timed(fn: Any, spent: list[float]) -> Any:
    """``fn`` that also appends its thread CPU seconds to ``spent``."""
    return CpuTimed(fn, spent)


def child(args: argparse.Namespace) -> dict[str, Any]:
    """Build one side at N envs, time its iterations, measure its memory and the GEMM rate beside it."""
    side, n = args.child[0], int(args.child[1])
    apply_malloc(args.malloc[0])
    import torch
    from _plain_cartpole_ppo import PlainPPO
    from throughput import plain_iteration, rlpipe_iteration, rlpipe_overrides

    from rlpipe.trainer import Trainer

    torch.set_num_threads(args.threads)
    wargs = workload_args(args, n)
    load_start, spent, collected = load_average(), [], []
    amp = "bf16" if side == "rlpipe-bf16" else "none"
    with tempfile.TemporaryDirectory(prefix="rlpipe-scaling-") as data_dir, contextlib.ExitStack() as running:
        overrides = rlpipe_overrides(wargs, data_dir, store=False)
        chunks = "null" if side == "rlpipe-whole" else "auto"
        cfg = load_cfg(
            wargs.params, [*overrides, f"algorithm.cfg.amp={amp}", f"algorithm.cfg.chunk_rows={chunks}"]
        )
        chunk_rows = None
        if side == "plain":
            plain = PlainPPO(cfg, list(args.hidden), torch.device(args.device))
            plain.update = cpu_timed(plain.update, spent)  # type: ignore[method-assign]
            plain.collect = cpu_timed(plain.collect, collected)  # type: ignore[method-assign]
            step, rollout_bytes = (lambda: plain_iteration(plain)), plain_buffer_bytes(plain)
        else:
            trainer = start_quietly(Trainer(cfg))
            running.callback(trainer.close)  # before the run dir goes
            parts, algo = trainer.parts, trainer.parts.algo
            chunk_rows = algo.chunk_rows
            rollout_bytes = parts.collector.rollout.bytes()
            algo.compute_advantages = cpu_timed(algo.compute_advantages, spent)
            algo.update = cpu_timed(algo.update, spent)
            parts.collector = cpu_timed(parts.collector, collected)
            step = lambda: rlpipe_iteration(trainer)  # noqa: E731
        rss_built = rss_bytes()
        for _ in range(args.warmup):
            step()
        samples, gemm = [], []
        iterations = args.iterations if n * args.horizon <= 131072 else args.large_iterations
        for _ in range(iterations):
            spent.clear()
            collected.clear()
            cpu = time.process_time()
            sample = step()._asdict()
            samples.append(
                {
                    **sample,
                    "cpu_s": time.process_time() - cpu,
                    "update_cpu_s": sum(spent),
                    "collect_cpu_s": sum(collected),
                }
            )
            gemm.append(gemm_rates(min(wargs.batch_size, 16384), args.hidden[-1], args.device, amp == "bf16"))
    batch = n * args.horizon
    return {
        "side": side,
        "n": n,
        "samples": samples,
        "gemm": {k: median([g[k] for g in gemm]) for k in gemm[0]},
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "rss_built": rss_built,
        "rollout_bytes": int(rollout_bytes),
        "flat_batch_bytes": flat_batch_bytes(batch),
        "activation_bytes": activation_bytes(
            min(batch // args.minibatches, chunk_rows or batch), args.hidden, amp
        ),
        "load": [load_start, load_average()],
    }


def plain_buffer_bytes(plain: Any) -> int:
    """Bytes of the plain loop's time-major buffers."""
    return sum(t.numel() * t.element_size() for t in vars(plain).values() if hasattr(t, "element_size"))


def flat_batch_bytes(batch: int) -> int:
    """The update's flat ``[N·T]`` copies: obs [N·T, 4] fp32 + action int64 + 4 fp32 columns."""
    return batch * (OBS_DIM * 4 + 8 + 4 * 4)


def activation_bytes(minibatch: int, hidden: list[int], amp: str) -> int:
    """Autograd's saved activations of one minibatch: per network and hidden layer, the linear output
    and the ReLU output (fp32; under bf16 also the bf16 copies of inputs and weights' operands)."""
    per_sample = 2 * sum(hidden) * 2 * 4  # 2 networks × hidden units × (pre, post ReLU) × fp32
    if amp == "bf16":
        per_sample += 2 * sum(hidden) * 2 * 2
    return minibatch * per_sample


# --------------------------------------------------------------------------------------- parent


def run_child(args: argparse.Namespace, side: str, malloc: str, n: int) -> dict[str, Any] | None:
    """``scaling.py --child SIDE N`` with the same options; its JSON line."""
    cmd = [
        sys.executable,
        __file__,
        "--child",
        side,
        str(n),
        "--malloc",
        malloc,
        "--horizon",
        str(args.horizon),
        "--hidden",
        *map(str, args.hidden),
        "--epochs",
        str(args.epochs),
        "--minibatches",
        str(args.minibatches),
        "--warmup",
        str(args.warmup),
        "--iterations",
        str(args.iterations),
        "--large-iterations",
        str(args.large_iterations),
        "--device",
        args.device,
        "--threads",
        str(args.threads),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"{side} at N={n} failed (left out):\n{done.stderr[-3000:]}", file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def row(results: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """Medians over every timed iteration of one (side, N); GFLOP/s against the GEMM rates measured
    in the same processes (the update in thread CPU time, as the GEMM)."""
    side, n = results[0]["side"], results[0]["n"]
    samples = [s for r in results for s in r["samples"]]
    wall = median([s["wall_s"] for s in samples])
    cpu = median([s["cpu_s"] for s in samples])
    update_cpu = median([s["update_cpu_s"] for s in samples])
    gflops = update_flops(n, args) / update_cpu / 1e9
    precision = "bf16" if side.startswith("rlpipe-bf16") else "fp32"
    gemm = {k: median([r["gemm"][k] for r in results]) for k in results[0]["gemm"]}
    return {
        "side": side,
        "n": n,
        "minibatch": n * args.horizon // args.minibatches,
        "wall_s": wall,
        "sps": n * args.horizon / wall,
        "cpu_s": cpu,
        "sps_cpu": n * args.horizon / cpu,
        "collect_s": median([s["collect_s"] for s in samples]),
        "collect_cpu_s": median([s["collect_cpu_s"] for s in samples]),
        "update_s": median([s["update_s"] for s in samples]),
        "update_cpu_s": update_cpu,
        "page_faults": median([s["page_faults"] for s in samples]),
        "peak_rss_mb": max(r["peak_rss"] for r in results) / 2**20,
        "rss_built_mb": max(r["rss_built"] for r in results) / 2**20,
        "rollout_mb": results[0]["rollout_bytes"] / 2**20,
        "flat_batch_mb": results[0]["flat_batch_bytes"] / 2**20,
        "activations_mb": results[0]["activation_bytes"] / 2**20,
        "update_gflops": gflops,
        "gemm_layer": gemm[f"layer_{precision}"],
        "gemm_square": gemm[f"square_{precision}"],
        "share_layer": gflops / gemm[f"layer_{precision}"],
        "share_square": gflops / gemm[f"square_{precision}"],
        "gemm": gemm,
        "load": [x for r in results for x in r["load"]],
    }


COLUMNS = [
    ("side", "side", ""),
    ("n", "N", ","),
    ("minibatch", "minibatch", ","),
    ("wall_s", "s/it", ".2f"),
    ("sps", "steps/s wall", ",.0f"),
    ("cpu_s", "CPU s/it", ".2f"),
    ("sps_cpu", "steps/CPU-s", ",.0f"),
    ("collect_cpu_s", "collect CPU s", ".2f"),
    ("update_cpu_s", "update CPU s", ".2f"),
    ("page_faults", "faults/it", ",.0f"),
    ("peak_rss_mb", "peak RSS MB", ",.0f"),
    ("rss_built_mb", "RSS built", ",.0f"),
    ("rollout_mb", "rollout MB", ".1f"),
    ("flat_batch_mb", "flat batch", ".1f"),
    ("activations_mb", "activations", ".0f"),
    ("update_gflops", "update GFLOP/s", ".1f"),
    ("gemm_layer", "GEMM layer", ".1f"),
    ("share_layer", "of layer", ".0%"),
    ("gemm_square", "GEMM 1024^3", ".1f"),
    ("share_square", "of sq.", ".0%"),
]


def plot(rows: list[dict[str, Any]], png: Path, title: str) -> None:
    """Env steps/s against N (log x), one line per side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for side in dict.fromkeys(r["side"] for r in rows):
        mine = sorted((r for r in rows if r["side"] == side), key=lambda r: r["n"])
        ax.plot([r["n"] for r in mine], [r["sps_cpu"] for r in mine], marker="o", label=side)
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("envs N (T=32, minibatch N·T/8)")
    ax.set_ylabel("env steps per CPU second (1 thread)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    print(f"plot written to {png}")


def verdicts(rows: list[dict[str, Any]], sizes: list[int]) -> dict[str, Any]:
    """Steps/s at a side's largest N over those at 1,024 (or the smallest N), per side."""
    base_n = 1024 if 1024 in sizes else min(sizes)
    out = {}
    for side in dict.fromkeys(r["side"] for r in rows):
        by_n = {r["n"]: r for r in rows if r["side"] == side}
        top = by_n[max(by_n)]
        ratio = top["sps_cpu"] / by_n[base_n]["sps_cpu"] if base_n in by_n else float("nan")
        out[side] = {
            "flatness": ratio,
            "base_n": base_n,
            "max_n": top["n"],
            "share_layer_at_max": top["share_layer"],
            "share_square_at_max": top["share_square"],
        }
        print(
            f"{side}: env steps per CPU-s at N={top['n']:,} / N={base_n:,} = {ratio:.2f}x "
            f"({'meets' if ratio >= 0.9 else 'misses'} >= 0.9x); update at N={top['n']:,}: "
            f"{top['update_gflops']:.1f} GFLOP/s = {top['share_layer']:.0%} of the layer-shaped GEMM, "
            f"{top['share_square']:.0%} of the square one (goal >= 75%)"
        )
    return out


def report_partial(args: argparse.Namespace) -> None:
    """Table, verdicts and PNG from the per-process lines of (possibly interrupted) runs."""
    results: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for path in args.from_partial:
        for line in path.read_text().splitlines():
            r = json.loads(line)
            results.setdefault((r["side"], r["n"]), []).append(r)
    rows = sorted((row(rs, args) for rs in results.values()), key=lambda r: (r["side"], r["n"]))
    print_table(rows, COLUMNS)
    summary = verdicts(rows, sorted({r["n"] for r in rows}))
    plot(rows, args.png, "CartPole PPO 256x256, 1 thread (env steps per CPU second)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {"benchmark": "scaling", "rows": rows, "summary": summary, "environment": environment()}, indent=1
        )
        + "\n"
    )
    print(f"results written to {args.json}")


def main() -> None:
    args = parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    if args.from_partial:
        report_partial(args)
        return
    bf16_max_n = args.bf16_max_n or (max(args.sizes) if bf16_native(args.device) else 1024)
    results: dict[tuple[str, int], list[dict[str, Any]]] = {}
    partial = args.json.with_suffix(".partial.jsonl")  # every finished process, as it finishes
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_text("")
    for n in args.sizes:
        for _ in range(args.rounds):
            for side in args.sides:
                for malloc in args.malloc:
                    if side == "rlpipe-bf16" and n > bf16_max_n:
                        continue  # emulated bf16: an update at large N takes many minutes
                    label = side if malloc == "tuned" else f"{side} [{malloc}]"
                    result = run_child(args, side, malloc, n)
                    if result is None:
                        continue
                    r = {**result, "side": label, "malloc": malloc}
                    results.setdefault((label, n), []).append(r)
                    with partial.open("a") as fh:
                        fh.write(json.dumps(r) + "\n")
                    print(
                        f"  N={n:,} {label}: {median([s['wall_s'] for s in r['samples']]):.2f} s/it, "
                        f"update {median([s['update_cpu_s'] for s in r['samples']]):.2f} CPU s, "
                        f"faults {median([s['page_faults'] for s in r['samples']]):,.0f}, "
                        f"load {r['load'][1]}",
                        flush=True,
                    )
    rows = [row(rs, args) for rs in results.values()]
    for path in args.also:
        rows += json.loads(path.read_text())["rows"]
    print_table(rows, COLUMNS)
    summary = verdicts(rows, args.sizes)
    env = environment()
    plot(
        rows,
        args.png,
        f"CartPole PPO 256x256, 1 thread, malloc {'/'.join(args.malloc)}, "
        f"load {env['loadavg_1min_at_start']}..{env['loadavg_1min_at_end']}",
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": "scaling",
        "args": {k: str(v) for k, v in vars(args).items()},
        "bf16_native": bf16_native(args.device),
        "rows": rows,
        "summary": summary,
        "raw": [r for rs in results.values() for r in rs],
        "environment": env,
    }
    args.json.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"results written to {args.json}")


if __name__ == "__main__":
    main()
