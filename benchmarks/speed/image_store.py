"""Codecs for image groups on real frames: bytes per env step, compression ratio, write throughput.

    .venv/bin/python benchmarks/speed/image_store.py [--num-envs 32] [--horizon 64] [--repeats 3]
        [--json benchmarks/results/image_store.json]

Collects PixelCartPole rollouts (64×64 grayscale, 3 stacked frames: ``configs/pixel_cartpole.yaml``)
with the collector and a freshly initialized CNN policy, then writes the same rollout with every
``store.image_codec`` (vector arrays keep codec ``none``) and reads it back: on-disk bytes of the
image group per env step, its compression ratio against raw uint8, the writer's seconds and raw MB/s
(median of ``--repeats``), the read-back seconds, and the write's share of one training iteration of
that config (collect + update, store off, median of 3). One thread: the machine is shared.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _bench

import torch
from _bench import median, print_machine, print_table, write_json

from rlpipe import config
from rlpipe.artifacts.store import write_rollout
from rlpipe.artifacts.zarr_io import CODECS
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]
PARAMS = ROOT / "configs" / "pixel_cartpole.yaml"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--horizon", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    return parser.parse_args()


def trainer(tmp: Path, args: argparse.Namespace) -> Trainer:
    overrides = [
        f"trainer.data_dir={tmp}",
        "trainer.device=cpu",
        f"trainer.num_envs={args.num_envs}",
        f"trainer.buffer_size={args.horizon}",
        "trainer.enable_eval=false",
        "store.enabled=false",
        "trainer.num_threads=1",
        "trainer.iterations=3",
    ]
    return Trainer(config.load(PARAMS, overrides))


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        run = trainer(tmp / "run", args)
        iteration_s = []
        for _ in range(3):
            start = time.perf_counter()
            run.step()
            iteration_s.append(time.perf_counter() - start)
        rollout = run.collect().clone()
        pixels = rollout["obs", "pixels"]
        steps = args.num_envs * args.horizon
        raw = pixels.numel()
        rows = []
        for codec in CODECS:
            write_s, read_s, size = [], [], 0
            for i in range(args.repeats):
                path = tmp / f"{codec}-{i}.zarr"
                start = time.perf_counter()
                write_rollout(path, rollout, {}, "none", 1024, codec)
                write_s.append(time.perf_counter() - start)
                start = time.perf_counter()
                back, _ = read_rollout(path)
                read_s.append(time.perf_counter() - start)
                assert torch.equal(back["obs", "pixels"], pixels)
                size = sum(p.stat().st_size for p in (path / "obs" / "pixels").rglob("*") if p.is_file())
            rows.append(
                {
                    "codec": codec,
                    "bytes_per_env_step": size / steps,
                    "ratio": raw / size,
                    "write_s": median(write_s),
                    "write_mb_s": raw / 1e6 / median(write_s),
                    "read_s": median(read_s),
                    "share_of_iteration": median(write_s) / median(iteration_s),
                }
            )
    print_machine()
    print(
        f"{args.num_envs} envs x {args.horizon} steps of {list(pixels.shape[2:])} uint8: "
        f"{raw / steps:.0f} raw bytes per env step; one iteration {median(iteration_s):.2f} s"
    )
    print_table(
        rows,
        [
            ("codec", "codec", "<11"),
            ("bytes_per_env_step", "B/step", ">9.0f"),
            ("ratio", "ratio", ">8.1f"),
            ("write_s", "write_s", ">8.3f"),
            ("write_mb_s", "MB/s", ">8.0f"),
            ("read_s", "read_s", ">8.3f"),
            ("share_of_iteration", "share", ">7.1%"),
        ],
    )
    compressed = [r for r in rows if r["codec"] != "none"]
    best = min(compressed, key=lambda r: r["bytes_per_env_step"] * (1 + r["share_of_iteration"]))
    print(f"chosen default store.image_codec: {best['codec']}")
    write_json(
        args.json,
        {
            "num_envs": args.num_envs,
            "horizon": args.horizon,
            "image_shape": list(pixels.shape[2:]),
            "raw_bytes_per_env_step": raw / steps,
            "iteration_s": median(iteration_s),
            "codecs": rows,
            "chosen": best["codec"],
        },
    )


if __name__ == "__main__":
    main()
