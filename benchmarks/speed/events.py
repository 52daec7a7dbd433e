"""What events cost the loop: no handler, one no-op handler on every event, interleaved.

    .venv/bin/python benchmarks/speed/events.py [--iterations 20] [--num-envs 256] [--threads 1]

Three ``rlpipe.trainer.Trainer`` runs of the default CartPole experiment (store and tracking off, so
only the loop is timed) are stepped alternately, one ``Trainer.step`` each: ``none`` (no handler
registered: the loop builds no context), ``noop`` (a handler returning None on every event, added
with ``Trainer.add_event``, including after each collect), ``none`` again as a control. Prints the
median iteration time of each and the ratios noop/none and none/none(control), medians of
per-iteration ratios.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

from rlpipe import config
from rlpipe.trainer import Trainer
from rlpipe.trainer.events import EVENTS


def make(kind: str, data_dir: str, args: argparse.Namespace) -> Trainer:
    cfg = config.load(
        "params.yaml",
        [
            f"trainer.data_dir={data_dir}/{kind}",
            f"trainer.num_envs={args.num_envs}",
            f"trainer.iterations={args.iterations + 1000}",
            "trainer.enable_eval=false",
            "trainer.stop_when=[]",
            "store.enabled=false",
            "tracking.backend=none",
            "trainer.save_freq=1000000000",
        ],
    )
    trainer = Trainer(cfg)
    if kind == "noop":
        for event in EVENTS:
            trainer.add_event(event, lambda ctx: None)
    trainer.start()
    return trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        runs = {kind: make(kind, tmp, args) for kind in ("none", "noop", "control")}
        times: dict[str, list[float]] = {kind: [] for kind in runs}
        for i in range(args.iterations + 2):
            for kind, trainer in runs.items():
                start = time.perf_counter()
                trainer.step()
                if i >= 2:  # warm-up
                    times[kind].append(time.perf_counter() - start)
        for trainer in reversed(runs.values()):  # the last started restores the signal handlers first
            trainer.close()
    med = {kind: statistics.median(values) for kind, values in times.items()}
    ratio = lambda a, b: statistics.median(x / y for x, y in zip(times[a], times[b]))  # noqa: E731
    for kind, value in med.items():
        print(f"{kind:8s} {value * 1000:8.1f} ms/iteration")
    print(f"one no-op handler on every event / none: {ratio('noop', 'none'):.3f}x")
    print(f"none / none (control: the noise floor):  {ratio('none', 'control'):.3f}x")


if __name__ == "__main__":
    main()
