"""The rollout store on S3 (a local moto server) against the store off, upload MB/s, and back-pressure.

    .venv/bin/python benchmarks/speed/s3_store.py [--num-envs 4096] [--horizon 32] [--iterations 6]
        [--block 2]

Starts ``python -m moto.server`` on 127.0.0.1 in its own process (a separate server, as S3 is), then:

1. **overhead** — the massive-batch workload of ``throughput.py`` with ``trainer.data_dir:
   s3://bench/…`` and the store on, against the store off, in interleaved blocks of ``--block``
   iterations. A store-on block's time includes waiting for its last upload (``flush``), so no
   upload leaks into the next store-off block. Target ≤ 1.05×.
2. **upload** — ``write_rollout`` of one massive-batch rollout to S3: seconds, MB/s of raw bytes,
   and the same to a local folder for comparison.
3. **back-pressure** — a workload whose training is faster than its upload (``--bp-epochs``, a
   small network, ``--bp-latency-ms`` added to every S3 request to emulate a distant store):
   per-iteration wall time with the store off, with it on S3, and the time ``submit`` waited for
   the writer's one slot (``store.queue_size: 1``). The run slows to the upload's pace instead of
   queueing rollouts in memory.

The machine's load average is printed with the figures (2 shared cores: compare ratios).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _bench and peers/throughput

import torch
from _bench import median, print_machine, write_json
from peers.throughput import Sample, build_rlpipe, rlpipe_iteration, store_on_vs_off
from store_write import cartpole_rollout

from rlpipe.artifacts.store import write_rollout

TARGET = 1.05


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--params", type=Path, default=Path(__file__).resolve().parents[2] / "params.yaml")
    add("--num-envs", type=int, default=4096)
    add("--horizon", type=int, default=32)
    add("--hidden", type=int, nargs="+", default=[256, 256])
    add("--epochs", type=int, default=4)
    add("--batch-size", type=int, default=16384)
    add("--device", default="cpu")
    add("--warmup", type=int, default=1, help="untimed blocks per side")
    add("--iterations", type=int, default=6, help="timed blocks per side")
    add("--block", type=int, default=2, help="iterations per block")
    add("--repeats", type=int, default=5, help="uploads timed")
    add("--bp-epochs", type=int, default=1, help="PPO epochs of the back-pressure workload")
    add("--bp-iterations", type=int, default=6)
    add(
        "--bp-latency-ms",
        type=float,
        default=100.0,
        help="added to every S3 request in the back-pressure part: a store slower than training",
    )
    add("--skip-overhead", action="store_true", help="only the upload and back-pressure parts")
    add("--json", type=Path, default=None)
    args = parser.parse_args()
    args.checkpoints = False
    return args


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    """``moto.server`` on a free 127.0.0.1 port, in its own process; the environment points at it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
    )
    import boto3

    for _ in range(100):
        try:
            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")
            return proc, endpoint
        except Exception:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("moto server did not start")


def overhead(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rlpipe-s3-") as local:
        on = build_rlpipe(args, "s3://bench/overhead", store=True)
        off = build_rlpipe(args, str(Path(local) / "off"), store=False)
        print(f"store on S3 vs off: N={args.num_envs} T={args.horizon}, blocks of {args.block} iterations")
        return store_on_vs_off(on, off, args, "store on s3", TARGET)


def upload(args: argparse.Namespace) -> dict[str, Any]:
    rollout = cartpole_rollout(args.num_envs, args.horizon)
    raw = sum(t.numel() * t.element_size() for t in rollout.values(include_nested=True, leaves_only=True))
    times: dict[str, list[float]] = {"s3": [], "local": []}
    with tempfile.TemporaryDirectory(prefix="rlpipe-s3-up-") as local:
        for k in range(args.repeats + 1):  # k == 0 warms up
            for side, root in (("s3", "s3://bench/upload"), ("local", local)):
                target = f"{root}/iter-{k:06d}.zarr" if side == "s3" else Path(root) / f"iter-{k:06d}.zarr"
                start = time.perf_counter()
                write_rollout(target, rollout, {"iteration": k})
                if k:
                    times[side].append(time.perf_counter() - start)
    times["boto3 puts"] = raw_puts(rollout, args.repeats)
    rows = {side: {"median_s": median(t), "mb_per_s": raw / 1e6 / median(t)} for side, t in times.items()}
    print(
        f"upload of one rollout ({raw / 1e6:.1f} MB raw): S3 {rows['s3']['median_s']:.3f} s "
        f"({rows['s3']['mb_per_s']:.0f} MB/s), local folder {rows['local']['median_s']:.3f} s "
        f"({rows['local']['mb_per_s']:.0f} MB/s); the server's ceiling, the same bytes as one "
        f"bare boto3 PUT per chunk: {rows['boto3 puts']['median_s']:.3f} s "
        f"({rows['boto3 puts']['mb_per_s']:.0f} MB/s); "
        f"median of {args.repeats}"
    )
    return {"raw_bytes": raw, **rows, "samples": times}


def raw_puts(rollout: Any, repeats: int) -> list[float]:
    """Seconds to PUT the rollout's chunks (1024 envs each, as the store cuts them) with bare boto3."""
    import boto3

    chunks = [
        t[i : i + 1024].numpy().tobytes()
        for t in rollout.values(include_nested=True, leaves_only=True)
        for i in range(0, t.shape[0], 1024)
    ]
    s3 = boto3.client("s3")
    times = []
    for k in range(repeats + 1):
        start = time.perf_counter()
        for i, body in enumerate(chunks):
            s3.put_object(Bucket="bench", Key=f"raw/{k}/{i}", Body=body)
        if k:
            times.append(time.perf_counter() - start)
    return times


def slow_store(latency_s: float) -> None:
    """Add ``latency_s`` to every S3 request of this process (a distant or throttled store)."""
    import asyncio

    import s3fs

    call = s3fs.S3FileSystem._call_s3

    async def delayed(self: Any, method: str, *a: Any, **k: Any) -> Any:
        await asyncio.sleep(latency_s)
        return await call(self, method, *a, **k)

    s3fs.S3FileSystem._call_s3 = delayed  # type: ignore[method-assign]


def back_pressure(args: argparse.Namespace, upload_s: float) -> dict[str, Any]:
    fast = argparse.Namespace(**{**vars(args), "epochs": args.bp_epochs, "hidden": [32, 32]})
    slow_store(args.bp_latency_ms / 1000)
    with tempfile.TemporaryDirectory(prefix="rlpipe-s3-bp-") as local:
        on = build_rlpipe(fast, "s3://bench/backpressure", store=True)
        off = build_rlpipe(fast, str(Path(local) / "off"), store=False)
        waits: list[float] = []
        store = on.parts.store
        assert store is not None
        submit = store.submit

        def timed_submit(*a: Any, **k: Any) -> None:
            start = time.perf_counter()
            submit(*a, **k)
            waits.append(time.perf_counter() - start)

        store.submit = timed_submit  # type: ignore[method-assign]
        walls: dict[str, list[float]] = {"on": [], "off": []}
        try:
            for i in range(args.bp_iterations + 1):
                for side, trainer in (("on", on), ("off", off)):
                    s: Sample = rlpipe_iteration(trainer)
                    if i:
                        walls[side].append(s.wall_s)
        finally:
            off.close()
            on.close()
    row = {
        "train_s_store_off": median(walls["off"]),
        "iteration_s_store_on": median(walls["on"]),
        "submit_wait_s": median(waits[1:]),
        "upload_s": upload_s,
    }
    print(
        f"back-pressure (epochs={fast.epochs}, hidden 32x32, +{args.bp_latency_ms:.0f} ms per S3 request): "
        f"an iteration trains in "
        f"{row['train_s_store_off']:.3f} s with the store off; with it on S3 an iteration takes "
        f"{row['iteration_s_store_on']:.3f} s, of which submit waits {row['submit_wait_s']:.3f} s for the "
        f"writer's slot (one upload without the added latency: {upload_s:.3f} s); at most "
        "store.queue_size=1 rollout is held"
    )
    return row


def main() -> None:
    args = parse_args()
    torch.manual_seed(0)
    proc, endpoint = start_server()
    try:
        print(f"moto S3 server at {endpoint} (own process)")
        results: dict[str, Any] = {"upload": upload(args)}
        if not args.skip_overhead:
            results["overhead"] = overhead(args)
        results["back_pressure"] = back_pressure(args, results["upload"]["s3"]["median_s"])
        print_machine()
        write_json(args.json, results)
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
