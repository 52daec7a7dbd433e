"""Rollout store write speed and size: a massive-batch CartPole rollout written K times per codec.

    .venv/bin/python benchmarks/speed/store_write.py [--num-envs 4096] [--horizon 32] [--repeats 10]

Prints, per codec, the wall time of one ``write_rollout`` (min, median, mean in ms; MB/s of raw
bytes at the median), the bytes on disk per stored transition (N*T transitions per rollout), the
ratio to the raw tensor bytes, the median ``read_rollout`` time, and what ``RolloutStore.submit``
costs the caller (clone + enqueue).
The "…, no checksum" rows show what the per-chunk CRC32C costs; below the table the same cost is
measured interleaved (with, without, with, … per codec: median of the per-pair write-time ratios),
and the SHA-256 a checkpoint carries is timed against its ``torch.save``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import statistics
import tempfile
import time
from pathlib import Path

import torch
from tensordict import TensorDict

import rlpipe.artifacts.zarr_io as zarr_io
from rlpipe.artifacts.store import RolloutStore, write_rollout
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.config import StoreCfg
from rlpipe.rollout import allocate_rollout
from rlpipe.rollout_checks import validate


def cartpole_rollout(n: int, t: int, seed: int = 0) -> TensorDict:
    """A plausible CartPole rollout: obs [n, t+1, 4] floats, int64 actions, ~20-step episodes."""
    g = torch.Generator().manual_seed(seed)
    r = allocate_rollout(n, t, (4,), (), torch.int64, "cpu")
    valid = (slice(None), slice(0, t))
    r["obs"].copy_(torch.randn(n, t + 1, 4, generator=g) * 0.1)
    r["value"].copy_(torch.rand(n, t + 1, generator=g) * 20)
    r["action"][valid] = torch.randint(0, 2, (n, t), generator=g)
    r["sample_log_prob"][valid] = -torch.rand(n, t, generator=g) * 0.1 - 0.64
    r["reward"][valid] = 1.0
    r["terminated"][valid] = torch.rand(n, t, generator=g) < 0.05
    r["done"][valid] = r["terminated"][valid]
    validate(r)
    return r


def disk_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def bench_codec(root: Path, rollout: TensorDict, codec: str, repeats: int) -> dict[str, float]:
    times, sizes, reads = [], [], []
    for k in range(repeats + 1):  # k == 0 warms up zarr's loop, codecs and the page cache
        path = root / codec / f"iter-{k:06d}.zarr"
        start = time.perf_counter()
        write_rollout(path, rollout, {"iteration": k}, codec=codec)
        elapsed = time.perf_counter() - start
        if k:
            times.append(elapsed * 1e3)
            sizes.append(disk_bytes(path))
            start = time.perf_counter()
            read_rollout(path)
            reads.append((time.perf_counter() - start) * 1e3)
    return {
        "min_ms": min(times),
        "median_ms": statistics.median(times),
        "mean_ms": statistics.fmean(times),
        "read_ms": statistics.median(reads),
        "bytes": statistics.fmean(sizes),
    }


class checksums:  # noqa: N801  # a context manager read as a phrase: ``with checksums(False):``
    """Write rollout chunks with (default) or without zarr's CRC32C codec inside the block."""

    def __init__(self, on: bool) -> None:
        self.on, self.saved = on, zarr_io._CHECKSUM

    def __enter__(self) -> None:
        zarr_io._CHECKSUM = self.saved if self.on else ()

    def __exit__(self, *_: object) -> None:
        zarr_io._CHECKSUM = self.saved


def checksum_ratio(root: Path, rollout: TensorDict, codec: str, repeats: int) -> tuple[float, list[float]]:
    """Median of the per-pair ratios write-with-CRC / write-without, pairs interleaved (1 warm-up)."""
    ratios = []
    for k in range(repeats + 1):
        walls = []
        for on in (True, False):
            with checksums(on):
                path = root / f"{'crc' if on else 'raw'}-{k:06d}.zarr"
                start = time.perf_counter()
                write_rollout(path, rollout, {"iteration": k}, codec=codec)
                walls.append(time.perf_counter() - start)
        if k:
            ratios.append(walls[0] / walls[1])
    return statistics.median(ratios), ratios


def crc_compute_cost(rollout: TensorDict, repeats: int) -> str:
    """The CRC32C computation itself over every byte of the rollout (what the codec adds per write)."""
    import google_crc32c  # zarr's crc32c codec uses it

    data = [v.numpy().tobytes() for v in rollout.values(True, True)]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for chunk in data:
            google_crc32c.value(chunk)
        times.append((time.perf_counter() - start) * 1e3)
    size = sum(len(d) for d in data)
    return (
        f"CRC32C computation: {statistics.median(times):.2f} ms for {size / 2**20:.2f} MiB "
        f"({size / 2**30 / (statistics.median(times) / 1e3):.1f} GiB/s) — the direct cost per write"
    )


def checkpoint_hash_cost(hidden: int, repeats: int) -> str:
    """SHA-256 of a checkpoint's bytes against its ``torch.save`` (actor + critic 2×hidden MLPs + Adam)."""
    net = torch.nn.Sequential(
        torch.nn.Linear(4, hidden), torch.nn.Linear(hidden, hidden), torch.nn.Linear(hidden, 2)
    )
    weights = net.state_dict()
    state = {"policy": {f"{side}.{k}": v for side in ("actor", "critic") for k, v in weights.items()}}
    state["algo"] = {"exp_avg": dict(state["policy"]), "exp_avg_sq": dict(state["policy"])}
    save_ms, hash_ms, size = [], [], 0
    for _ in range(repeats):
        buffer = io.BytesIO()
        start = time.perf_counter()
        torch.save(state, buffer)
        save_ms.append((time.perf_counter() - start) * 1e3)
        data = buffer.getbuffer()
        size = len(data)
        start = time.perf_counter()
        hashlib.sha256(data).hexdigest()
        hash_ms.append((time.perf_counter() - start) * 1e3)
    save, digest = statistics.median(save_ms), statistics.median(hash_ms)
    return (
        f"checkpoint SHA-256: {digest:.2f} ms for {size / 2**20:.2f} MiB (torch.save {save:.2f} ms: "
        f"+{100 * digest / save:.0f}% of the serialization, before the fsync)"
    )


def bench_submit(root: Path, rollout: TensorDict, repeats: int) -> float:
    """Median ms the caller spends in ``submit`` (clone + enqueue) with a writer behind it."""
    times = []
    with RolloutStore(root / "submit", StoreCfg(queue_size=repeats + 1)) as store:
        for k in range(1, repeats + 1):
            start = time.perf_counter()
            store.submit(rollout, {"iteration": k})
            times.append((time.perf_counter() - start) * 1e3)
        store.flush()
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--horizon", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument(
        "--checkpoint-hidden",
        type=int,
        default=256,
        help="hidden width of the MLPs whose checkpoint is hashed (default 256)",
    )
    args = parser.parse_args()
    n, t = args.num_envs, args.horizon
    rollout = cartpole_rollout(n, t)
    raw = sum(v.numel() * v.element_size() for v in rollout.values(True, True))
    print(
        f"rollout N={n} T={t}: {len(list(rollout.keys(True, True)))} keys, "
        f"{raw / 2**20:.2f} MiB raw, {n * t} transitions; {args.repeats} writes per codec"
    )
    print(
        f"{'codec':<24}{'min ms':>8}{'median ms':>10}{'mean ms':>9}{'B/transition':>14}"
        f"{'vs raw':>8}{'MB/s':>7}{'read ms':>9}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        rows = [(codec, codec, True) for codec in ("none", "blosc-lz4")]
        for label, codec, checked in [
            *rows,
            ("none, no checksum", "none", False),
            ("blosc-lz4, no checksum", "blosc-lz4", False),
        ]:
            with checksums(checked):
                result = bench_codec(
                    Path(tmp) / label.replace(", ", "-").replace(" ", "_"), rollout, codec, args.repeats
                )
            mbps = raw / 2**20 / (result["median_ms"] / 1e3)
            print(
                f"{label:<24}{result['min_ms']:>8.1f}{result['median_ms']:>10.1f}"
                f"{result['mean_ms']:>9.1f}{result['bytes'] / (n * t):>14.1f}"
                f"{result['bytes'] / raw:>8.2f}{mbps:>7.0f}{result['read_ms']:>9.1f}"
            )
        for codec in ("none", "blosc-lz4"):
            ratio, ratios = checksum_ratio(Path(tmp) / f"pairs-{codec}", rollout, codec, args.repeats)
            print(
                f"CRC32C cost, {codec}: write time with/without {ratio:.3f}x (median of {len(ratios)} "
                f"interleaved pairs, min {min(ratios):.3f} max {max(ratios):.3f}; target <= 1.03x)"
            )
        print(
            f"submit() on the caller's thread (clone + enqueue, CPU): "
            f"{bench_submit(Path(tmp), rollout, args.repeats):.2f} ms median"
        )
    print(crc_compute_cost(rollout, args.repeats))
    print(checkpoint_hash_cost(args.checkpoint_hidden, args.repeats))


if __name__ == "__main__":
    main()
