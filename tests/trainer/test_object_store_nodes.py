"""Two nodes emulated on one machine (``torchrun --nnodes 2`` launched twice), one ``s3://`` run directory.

Each node writes its rank's rollout shards to the same bucket, rank 0 the checkpoints; the result
equals the single-node 2-process run bit for bit. Every process is killed after the first
checkpoint (of 4), ``--resume`` on both nodes continues from the object store bit for bit, and
``rlpipe replay s3://…`` of the run equals the replay of the single-node run bit for bit.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from _offline_fixtures import PARAMS, assert_same_learner, set_args
from _s3 import s3_env
from click.testing import CliRunner

from rlpipe.artifacts.shards import read_any
from rlpipe.cli import cli
from rlpipe.location import location

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
NODE_ARGS = ("trainer.distributed=true", "trainer.iterations=8")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def torchrun(
    nnodes: int,
    nproc: int,
    port: int,
    data_dir: str,
    endpoint: str,
    *extra: str,
) -> subprocess.Popen[bytes]:
    """One node's ``torchrun … -m rlpipe run`` (its own process group, so a kill reaches every rank)."""
    args = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        str(nnodes),
        "--nproc_per_node",
        str(nproc),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"127.0.0.1:{port}",
        "-m",
        "rlpipe",
        "run",
        str(PARAMS),
        *set_args(data_dir, *NODE_ARGS),
        *extra,
    ]  # type: ignore[arg-type]
    env = {**os.environ, **s3_env(endpoint), "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        args, env=env, cwd=ROOT, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


def finish(*procs: subprocess.Popen[bytes]) -> None:
    for proc in procs:
        out, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0, out.decode()[-3000:]


def two_nodes(data_dir: str, endpoint: str, *extra: str) -> tuple[subprocess.Popen[bytes], ...]:
    port = free_port()
    return tuple(torchrun(2, 1, port, data_dir, endpoint, *extra) for _ in range(2))


def test_two_nodes_on_s3_equal_one_node_survive_a_kill_and_replay_bit_exact(s3_server, s3_bucket, tmp_path):
    single = tmp_path / "single"
    finish(torchrun(1, 2, free_port(), str(single), s3_server))  # the single-node 2-process run (local)
    reference = single / "cartpole_ppo"

    data = f"{s3_bucket}/runs"
    run_dir = location(f"{data}/cartpole_ppo")
    nodes = two_nodes(data, s3_server)
    ckpt2 = run_dir / "checkpoints" / "ckpt-000002.pt"
    deadline = time.monotonic() + 600
    while not ckpt2.is_file():  # kill every process of both nodes once the first checkpoint is stored
        assert time.monotonic() < deadline and all(p.poll() is None for p in nodes), "no checkpoint"
        time.sleep(0.2)
    for proc in nodes:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (run_dir / "checkpoints" / "ckpt-000008.pt").is_file()  # killed mid-run, not after it

    finish(*two_nodes(data, s3_server, "--resume"))
    final = "checkpoints/ckpt-000008.pt"
    assert_same_learner(reference / final, run_dir / final)  # type: ignore[arg-type]
    for k in range(1, 9):  # every shard: the same data as the single-node run's
        a, attrs = read_any(reference / "rollouts" / f"iter-{k:06d}.zarr")
        b, _ = read_any(run_dir / "rollouts" / f"iter-{k:06d}.zarr")
        assert attrs["world_size"] == 2
        assert torch.equal(a["obs"], b["obs"]) and torch.equal(a["action"], b["action"]), k

    for target in (reference, run_dir):
        result = CliRunner().invoke(cli, ["replay", str(target)])
        assert result.exit_code == 0, result.output
    assert_same_learner(reference / "reupdate" / final, run_dir / "reupdate" / final)  # type: ignore[arg-type]
