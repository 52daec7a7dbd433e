"""The interpreter-lock tax of the rollout store's writer: small torch ops beside rollout writes.

    .venv/bin/python benchmarks/speed/gil_tax.py [--num-envs 1024] [--horizon 24] [--seconds 3]
        [--rounds 3] [--modes none thread process tobytes] [--op-size 64] [--json PATH]

A training thread on a GPU is launch-bound Python: every torch op releases the interpreter lock
while its kernel is launched and takes it back afterwards, so whatever else holds the lock in the
same process delays every op. Here the main thread stands in for it: a loop of small CPU torch ops
(``addmm`` then ``relu_`` on ``--op-size``² matrices; each releases and retakes the lock as a
launch does) for ``--seconds``, while a feeder thread submits robot-sized rollouts to a
``RolloutStore`` back to back (``RobotProxy``'s layout: 48 + 205 float observations, 12 float
actions, ``--num-envs`` × ``--horizon`` steps, ~1 KB per env step; ``store.keep_last: 2``, so
retention deletes as it goes). The feeder only submits: its own Python is a few calls per rollout,
and it waits for a slot without the lock. Modes, interleaved within each round:

* ``none``: no writes (the feeder idles): the main thread's rate alone;
* ``thread``: ``store.writer: thread``, the writer thread of this process;
* ``process``: ``store.writer: process``, the writer process fed from shared memory;
* ``tobytes``: the writer thread with the chunk write rlpipe had before its copy-free path
  (``ndarray.tobytes()``, then ``raw + crc`` and ``google_crc32c.value`` on the copy, all holding
  the lock), patched in here only, for reference.

Each store is created and warmed (one rollout written: the process started, zarr imported) before
the rounds. Per mode and round: the main thread's torch ops/s and its ratio to ``none`` in the same
round (the table: medians over rounds, the ratio a median of per-round ratios), and the write
throughput: rollouts published while the ops ran (by the store's newest iteration when the window
closed) × the rollout's bytes / ``--seconds``. On a machine with few cores the writer process
competes with the main thread for a core where the thread competes for the lock: read a ratio
against the machine's load average (printed, and in the JSON).
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

import torch
from _bench import median, paired_ratios, print_machine, print_table, set_threads, write_json
from tensordict import TensorDict

import rlpipe.fast as fast
from rlpipe.artifacts.store import RolloutStore
from rlpipe.config import StoreCfg
from rlpipe.rollout import allocate_rollout

MODES = ("none", "thread", "process", "tobytes")
POLICY_OBS, PRIVILEGED_OBS, ACTIONS = 48, 205, 12
"""``RobotProxy``'s observation groups and action size (``rlpipe/envs/tasks/robot_proxy.py``)."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--num-envs", type=int, default=1024, help="envs per rollout (default 1024)")
    add("--horizon", type=int, default=24, help="steps per env per rollout (default 24)")
    add("--seconds", type=float, default=3.0, help="seconds of ops per mode and round (default 3)")
    add("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    add(
        "--modes",
        nargs="+",
        choices=MODES,
        default=list(MODES),
        help="which writers run ('none' always does)",
    )
    add("--op-size", type=int, default=64, help="side of the main thread's square matrices (default 64)")
    add("--threads", type=int, default=1, help="torch threads (default 1)")
    add("--json", type=Path, default=None, help="also write the results as JSON here")
    args = parser.parse_args()
    if "none" not in args.modes:
        args.modes.insert(0, "none")
    return args


def robot_rollout(num_envs: int, horizon: int, seed: int = 0) -> TensorDict:
    """A CPU rollout of ``RobotProxy``'s layout filled with random values (as incompressible as real ones)."""
    g = torch.Generator().manual_seed(seed)
    rollout = allocate_rollout(
        num_envs,
        horizon,
        {"policy": (POLICY_OBS,), "privileged": (PRIVILEGED_OBS,)},
        (ACTIONS,),
        torch.float32,
        "cpu",
    )
    for key in ("obs/policy", "obs/privileged", "action", "value", "sample_log_prob"):
        leaf = rollout.get(tuple(key.split("/")))
        slots = leaf if key.startswith("obs") or key == "value" else leaf[:, :horizon]  # padding stays zero
        slots.copy_(torch.randn(slots.shape, generator=g))
    return rollout


def rollout_bytes(rollout: TensorDict) -> int:
    return sum(t.numel() * t.element_size() for t in rollout.values(include_nested=True, leaves_only=True))


# ------------------------------------------------------------------------- the old chunk write


def write_chunk_tobytes(path: str, block: Any) -> None:
    """The chunk write before the copy-free path: two copies and the checksum, all under the lock."""
    import google_crc32c
    import numpy as np

    raw = np.ascontiguousarray(block).tobytes()
    Path(path).write_bytes(raw + struct.pack("<I", google_crc32c.value(raw)))


@contextmanager
def old_chunk_write(on: bool) -> Iterator[None]:
    """``rlpipe.fast.write_chunk`` replaced by :func:`write_chunk_tobytes` while ``on``."""
    real = fast.write_chunk
    if on:
        fast.write_chunk = write_chunk_tobytes
    try:
        yield
    finally:
        fast.write_chunk = real


# ------------------------------------------------------------------------------------ one window


class Feeder:
    """A thread submitting ``rollout`` to ``store`` back to back until stopped (``store`` None: idles)."""

    def __init__(self, store: RolloutStore | None, rollout: TensorDict, first: int) -> None:
        self.store, self.rollout, self.next = store, rollout, first
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while self.store is not None and not self.stop.is_set():
            self.store.submit(self.rollout, {"iteration": self.next})
            self.next += 1

    def __enter__(self) -> Feeder:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        if self.store is not None:
            self.store.flush()


def ops_for(seconds: float, size: int) -> int:
    """Run ``addmm`` + ``relu_`` on ``size``² matrices for ``seconds``; the number of torch ops run."""
    x, w, b = torch.randn(size, size), torch.randn(size, size), torch.randn(size)
    out = torch.empty(size, size)
    count, clock = 0, time.perf_counter
    end = clock() + seconds
    while clock() < end:
        for _ in range(16):
            torch.addmm(b, x, w, out=out)
            out.relu_()
        count += 32
    return count


def window(
    store: RolloutStore | None, rollout: TensorDict, seconds: float, size: int, mode: str
) -> dict[str, float]:
    """One mode's window: ops/s of the main thread and rollouts published while it ran."""
    first = (store.latest() or 0) + 1 if store is not None else 0
    with old_chunk_write(mode == "tobytes"), Feeder(store, rollout, first):
        start = time.perf_counter()
        ops = ops_for(seconds, size)
        elapsed = time.perf_counter() - start
        published = (store.latest() or 0) - first + 1 if store is not None else 0
    return {"ops_per_s": ops / elapsed, "rollouts": max(published, 0), "window_s": elapsed}


def make_store(root: Path, mode: str, rollout: TensorDict) -> RolloutStore | None:
    """The store of ``mode`` under ``root``, warmed by one write; ``None`` for ``none``."""
    if mode == "none":
        return None
    writer = "process" if mode == "process" else "thread"
    store = RolloutStore(root / mode, StoreCfg(keep_last=2, writer=writer))
    assert store.mode == writer, f"store.writer={writer} runs as {store.mode} here"
    with old_chunk_write(mode == "tobytes"):
        store.submit(rollout, {"iteration": 1})
        store.flush()
    return store


def summarize(samples: dict[str, list[dict[str, float]]], megabytes: float) -> list[dict[str, Any]]:
    base = [s["ops_per_s"] for s in samples["none"]]
    rows = []
    for mode, runs in samples.items():
        ops = [s["ops_per_s"] for s in runs]
        rates = [s["rollouts"] * megabytes / s["window_s"] for s in runs]
        rows.append(
            {
                "mode": mode,
                "ops_per_s": median(ops),
                "vs_none": median(paired_ratios(ops, base)),
                "vs_none_per_round": paired_ratios(ops, base),
                "write_mb_per_s": median(rates) if mode != "none" else None,
                "rollouts_per_window": median([s["rollouts"] for s in runs]) if mode != "none" else None,
                "ops_per_s_per_round": ops,
            }
        )
    return rows


COLUMNS = (
    ("mode", "writer", ""),
    ("ops_per_s", "main-thread ops/s", ",.0f"),
    ("vs_none", "vs none", ".3f"),
    ("write_mb_per_s", "written MB/s", ",.1f"),
    ("rollouts_per_window", "rollouts/window", ".0f"),
)


def main() -> None:
    args = parse_args()
    set_threads(args.threads)
    rollout = robot_rollout(args.num_envs, args.horizon)
    megabytes = rollout_bytes(rollout) / 1e6
    print(
        f"GIL tax: {args.op_size}x{args.op_size} addmm+relu_ on the main thread for {args.seconds} s, "
        f"beside RobotProxy rollouts of {args.num_envs} x {args.horizon} ({megabytes:.1f} MB) written "
        f"back to back; modes {args.modes}, {args.rounds} rounds, torch threads {torch.get_num_threads()}"
    )
    samples: dict[str, list[dict[str, float]]] = {mode: [] for mode in args.modes}
    with tempfile.TemporaryDirectory(prefix="rlpipe-gil-tax-") as root:
        stores = {mode: make_store(Path(root), mode, rollout) for mode in args.modes}
        try:
            for index in range(args.rounds):
                for mode in args.modes:
                    samples[mode].append(window(stores[mode], rollout, args.seconds, args.op_size, mode))
                print(
                    f"  round {index + 1}/{args.rounds}: "
                    + ", ".join(f"{mode} {samples[mode][-1]['ops_per_s']:,.0f} ops/s" for mode in args.modes),
                    flush=True,
                )
        finally:
            for store in stores.values():
                if store is not None:
                    store.close()
    rows = summarize(samples, megabytes)
    print_table(rows, COLUMNS)
    print_machine()
    spread = {r["mode"]: statistics.pstdev(r["vs_none_per_round"]) for r in rows}
    write_json(
        args.json,
        {
            "benchmark": "gil_tax",
            "args": {k: str(v) for k, v in vars(args).items()},
            "rollout_mb": megabytes,
            "rows": rows,
            "vs_none_spread": spread,
            "samples": samples,
        },
    )


if __name__ == "__main__":
    main()
