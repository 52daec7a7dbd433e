"""What the store's writer process costs a small CPU run: its start, each rollout, the default run's wall.

    .venv/bin/python benchmarks/speed/writer_start.py [--rounds 3] [--rollouts 20] [--iterations 8]
        [--parts store run] [--json PATH]

``store.writer: auto`` is the writer process on Linux. A GPU run gains from it (the writes never
hold the training interpreter's lock, ``speed/gil_tax.py``); this measures what it costs where
rollouts are small and the lock is not contended: the default ``params.yaml`` (torch CartPole,
128 envs × 32 steps, a 0.1 MB rollout) on the CPU. ``store.writer: thread`` and ``process``
alternate (thread, process, thread, … ``--rounds`` of each), every sample in a fresh interpreter.

* ``store`` part: a fresh ``python`` process imports rlpipe's store (torch, as a trainer has it),
  builds the default run's rollout and a ``RolloutStore``, then times the first ``submit`` (the
  shared-memory buffer is allocated there in process mode), the first ``flush`` (the writer
  process's start, its imports and the first write; the thread's import of zarr's writer and the
  first write), then ``--rollouts`` more rollouts, each ``submit`` + ``flush`` (median: the
  per-rollout cost when every write is waited for), and ``close``.
* ``run`` part: the wall time of ``python -m rlpipe run params.yaml`` for ``--iterations``
  iterations (``tracking.backend: none``, a temporary ``trainer.data_dir``, ``stop_when`` off so
  every run does the same iterations; eval as in ``params.yaml``), the ratio process / thread per
  round and its median.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import DEFAULT_PARAMS, PROJECT_ROOT, median, paired_ratios, print_machine, print_table, write_json

WRITERS = ("thread", "process")

CHILD = r"""
import json, sys, tempfile, time
import torch
from rlpipe.artifacts.store import RolloutStore
from rlpipe.config import StoreCfg
from rlpipe.rollout import allocate_rollout

writer, count = sys.argv[1], int(sys.argv[2])
rollout = allocate_rollout(128, 32, (4,), (), torch.int64, "cpu")
rollout["obs"].copy_(torch.randn(rollout["obs"].shape))
clock = time.perf_counter
with tempfile.TemporaryDirectory() as root:
    store = RolloutStore(root, StoreCfg(writer=writer))
    start = clock()
    store.submit(rollout, {"iteration": 1})
    submitted = clock()
    store.flush()
    flushed = clock()
    each = []
    for it in range(2, count + 2):
        t0 = clock()
        store.submit(rollout, {"iteration": it})
        store.flush()
        each.append(clock() - t0)
    t0 = clock()
    store.close()
    closed = clock() - t0
print(json.dumps({"mode": store.mode, "first_submit_s": submitted - start,
                  "first_flush_s": flushed - submitted, "first_on_disk_s": flushed - start,
                  "per_rollout_s": sorted(each)[len(each) // 2],
                  "close_s": closed}))
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--rounds", type=int, default=3, help="interleaved rounds of (thread, process) (default 3)")
    add("--rollouts", type=int, default=20, help="rollouts after the first, store part (default 20)")
    add("--iterations", type=int, default=8, help="iterations of the default run, run part (default 8)")
    add("--parts", nargs="+", choices=("store", "run"), default=["store", "run"], help="which parts run")
    add("--params", type=Path, default=DEFAULT_PARAMS, help="the run part's params (default params.yaml)")
    add("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def child_env() -> dict[str, str]:
    """This interpreter's environment with the checkout first on ``PYTHONPATH`` and one OpenMP thread."""
    path = os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}


def store_sample(writer: str, rollouts: int) -> dict[str, float]:
    """One fresh interpreter's first-rollout and per-rollout times in ``writer`` mode."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, writer, str(rollouts)],
        check=True,
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=PROJECT_ROOT,
    )
    sample = json.loads(out.stdout.strip().splitlines()[-1])
    if sample["mode"] != writer:
        raise SystemExit(f"store.writer={writer} ran as {sample['mode']} on this platform")
    return sample


def run_sample(writer: str, params: Path, iterations: int) -> dict[str, float]:
    """The wall seconds of one ``rlpipe run`` of ``params`` in ``writer`` mode."""
    with tempfile.TemporaryDirectory(prefix="rlpipe-writer-start-") as data_dir:
        command = [
            sys.executable,
            "-m",
            "rlpipe",
            "run",
            str(params),
            "--set",
            f"store.writer={writer}",
            "--set",
            f"trainer.iterations={iterations}",
            "--set",
            "trainer.stop_when=[]",
            "--set",
            "tracking.backend=none",
            "--set",
            f"trainer.data_dir={data_dir}",
        ]
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=child_env(), cwd=PROJECT_ROOT)
        wall = time.perf_counter() - start
        stores = len(list(Path(data_dir).glob("*/rollouts/iter-*.zarr")))
    if stores != iterations:
        raise SystemExit(f"{writer}: {stores} stores after {iterations} iterations")
    return {"wall_s": wall}


def interleaved(sample: Any, rounds: int, label: str) -> dict[str, list[dict[str, float]]]:
    samples: dict[str, list[dict[str, float]]] = {writer: [] for writer in WRITERS}
    for index in range(rounds):
        for writer in WRITERS:
            samples[writer].append(sample(writer))
        print(
            f"  {label} round {index + 1}/{rounds}: "
            + ", ".join(
                f"{w} {json.dumps({k: round(v, 4) for k, v in samples[w][-1].items() if k != 'mode'})}"
                for w in WRITERS
            ),
            flush=True,
        )
    return samples


def rows_of(samples: dict[str, list[dict[str, float]]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """Medians per writer, and per key the median of per-round ratios process / thread."""
    rows = [{"writer": w, **{k: median([s[k] for s in samples[w]]) for k in keys}} for w in WRITERS]
    rows.append(
        {
            "writer": "process / thread",
            **{
                k: median(
                    paired_ratios([s[k] for s in samples["process"]], [s[k] for s in samples["thread"]])
                )
                for k in keys
            },
        }
    )
    return rows


STORE_KEYS = ("first_submit_s", "first_flush_s", "first_on_disk_s", "per_rollout_s", "close_s")


def main() -> None:
    args = parse_args()
    settings = {k: str(v) for k, v in vars(args).items()}
    results: dict[str, Any] = {"benchmark": "writer_start", "args": settings}
    if "store" in args.parts:
        print(
            f"store: the default run's rollout (128 x 32 CartPole), first one and {args.rollouts} more, "
            f"each in a fresh interpreter"
        )
        samples = interleaved(lambda w: store_sample(w, args.rollouts), args.rounds, "store")
        results["store"] = {"rows": rows_of(samples, STORE_KEYS), "samples": samples}
        columns = [("writer", "writer", ""), *((k, k, ".4f") for k in STORE_KEYS)]
        print_table(results["store"]["rows"], columns)
    if "run" in args.parts:
        print(f"run: rlpipe run {args.params.name}, {args.iterations} iterations, tracking off")
        samples = interleaved(lambda w: run_sample(w, args.params, args.iterations), args.rounds, "run")
        results["run"] = {"rows": rows_of(samples, ("wall_s",)), "samples": samples}
        print_table(results["run"]["rows"], [("writer", "writer", ""), ("wall_s", "wall s", ".3f")])
    print_machine()
    write_json(args.json, results)


if __name__ == "__main__":
    main()
