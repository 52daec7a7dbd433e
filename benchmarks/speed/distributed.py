"""Multi-process scaling on CPU: env steps/s with 1 vs K gloo processes, and the gradient all-reduce.

    .venv/bin/python benchmarks/speed/distributed.py [--procs 1 2] [--num-envs 4096] [--horizon 32]
        [--hidden 256 256] [--epochs 4] [--minibatches 8] [--warmup 1] [--iterations 5] [--json PATH]

Workload (the massive-batch one of ``throughput.py``): torch CartPole, ``--num-envs`` envs in all
(split evenly over the K processes, ``num_envs`` being per rank) × T steps, actor and critic MLPs
256×256 ReLU, PPO with ``--epochs`` × ``--minibatches`` minibatches per epoch (per rank:
``batch_size = N·T / (K · minibatches)``, so every K runs the same number of optimizer steps on
the same global minibatch size). Each process uses one torch thread; K processes are spawned with
``torch.multiprocessing`` and join a gloo group as ``torchrun`` would (``trainer.distributed``);
each builds a ``rlpipe.trainer.Trainer`` of one shared run dir and steps it (``Trainer.step``
without checkpoints, console rows captured).

Per K the table gives the median iteration wall time of rank 0 (between barriers) and env steps/s
over every rank's envs; ``allreduce_ms`` is the median time of rlpipe's gradient hook
(``average_gradients``: flatten → one all-reduce → divide) per minibatch step, which includes
waiting for the slower rank, and ``bare_allreduce_ms`` the median of a bare all-reduce of the same
flat gradient buffer right after a barrier (the communication alone).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from _bench import DEFAULT_PARAMS, NEVER, load_cfg, print_machine, start_quietly, write_json

import rlpipe.algorithms.base as algo_base
from rlpipe.runtime.distributed import average_gradients, shutdown
from rlpipe.trainer import Trainer


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--num-envs", type=int, default=4096, help="envs over all processes")
    parser.add_argument("--horizon", type=int, default=32)
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 256])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--minibatches", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--params", type=Path, default=DEFAULT_PARAMS)
    parser.add_argument("--json", type=Path, default=None)
    return parser.parse_args()


def overrides(args: argparse.Namespace, procs: int, data_dir: str) -> list[str]:
    """The workload for one of ``procs`` ranks."""
    per_rank = args.num_envs // procs
    net = f"{{hidden_sizes: {list(args.hidden)}, activation: relu}}"
    return [
        f"trainer.num_envs={per_rank}",
        f"trainer.buffer_size={args.horizon}",
        f"policy.actor.network_cfg={net}",
        f"policy.critic.network_cfg={net}",
        f"algorithm.cfg.n_epochs={args.epochs}",
        f"algorithm.cfg.batch_size={per_rank * args.horizon // args.minibatches}",
        "store.enabled=false",
        "tracking.backend=none",
        "trainer.enable_eval=false",
        "trainer.device=cpu",
        f"trainer.data_dir={data_dir}",
        f"trainer.iterations={NEVER}",
        f"trainer.save_freq={NEVER}",
        "trainer.num_threads=1",
        f"trainer.distributed={str(procs > 1).lower()}",
    ]


class TimedHook:
    """``average_gradients`` with the wall time of every call recorded."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def __call__(self, params: Any) -> None:
        start = time.perf_counter()
        average_gradients(params)
        self.times.append(time.perf_counter() - start)


def bare_allreduce_ms(numel: int, repeats: int = 30) -> float:
    """Median ms of one all-reduce of a float32 buffer of ``numel`` right after a barrier."""
    buffer, times = torch.zeros(numel), []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(buffer)
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def worker(rank: int, procs: int, port: int, args: argparse.Namespace, out: Path) -> None:
    """One rank: warm up, time ``--iterations`` iterations, save rank 0's figures."""
    os.environ.update(
        {
            "RANK": str(rank),
            "WORLD_SIZE": str(procs),
            "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
    )
    hook = TimedHook()
    algo_base.average_gradients = hook  # the name BaseAlgorithm's optimizer step calls
    cfg = load_cfg(args.params, overrides(args, procs, str(out / f"runs-{procs}")))  # shared by the ranks
    trainer = start_quietly(Trainer(cfg))
    try:
        for _ in range(args.warmup):
            trainer.step(checkpoint=False)
        hook.times.clear()
        walls = []
        for _ in range(args.iterations):
            if procs > 1:
                dist.barrier()
            start = time.perf_counter()
            trainer.step(checkpoint=False)
            walls.append(time.perf_counter() - start)
        numel = sum(p.numel() for p in trainer.policy.parameters())
        bare = bare_allreduce_ms(numel) if procs > 1 else 0.0
        if rank == 0:
            wall = statistics.median(walls)
            torch.save(
                {
                    "procs": procs,
                    "iteration_s": wall,
                    "sps": trainer.parts.steps_per_iteration / wall,
                    "allreduce_ms": 1e3 * statistics.median(hook.times) if procs > 1 else 0.0,
                    "bare_allreduce_ms": bare,
                    "minibatch_steps": len(hook.times) // args.iterations,
                    "grad_numel": numel,
                },
                out / f"procs-{procs}.pt",
            )
    finally:
        trainer.close()
    shutdown()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    args = parse_args()
    print_machine()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for procs in args.procs:
            mp.spawn(worker, args=(procs, free_port(), args, Path(tmp)), nprocs=procs, join=True)
            rows.append(torch.load(Path(tmp) / f"procs-{procs}.pt", weights_only=True))
    base = rows[0]["sps"]
    print(
        f"{'procs':>5} {'iter_s':>8} {'env steps/s':>12} {'speedup':>8} {'allreduce_ms':>13} "
        f"{'bare_allreduce_ms':>18} {'mb_steps':>8}"
    )
    for row in rows:
        print(
            f"{row['procs']:>5} {row['iteration_s']:>8.3f} {row['sps']:>12,.0f} {row['sps'] / base:>8.2f} "
            f"{row['allreduce_ms']:>13.3f} {row['bare_allreduce_ms']:>18.3f} {row['minibatch_steps']:>8}"
        )
    if args.json:
        write_json(args.json, {"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows})


if __name__ == "__main__":
    main()
