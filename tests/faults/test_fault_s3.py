"""The object store goes down mid-run: retried with backoff, then one line; nothing half-written is
visible, and once it is back ``--resume`` continues bit for bit (a moto server of this test's own)."""

from __future__ import annotations

import contextlib
import logging
import socket

import boto3
import pytest
from _fault_harness import EXP, FAST, assert_same_as_reference
from _offline_fixtures import PARAMS
from _s3 import s3_env

from rlpipe import Trainer
from rlpipe.cli.exits import describe
from rlpipe.location import location
from rlpipe.object_store import StorageUnavailable

pytestmark = pytest.mark.slow  # two runs against a server of its own, with retries: ~6 s unloaded


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(port: int):
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server


def test_a_store_outage_stops_the_run_in_one_line_and_resume_continues(reference, monkeypatch):
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    for key, value in {**s3_env(endpoint), "RLPIPE_STORE_RETRIES": "3"}.items():
        monkeypatch.setenv(key, value)
    server = serve(port)
    boto3.client("s3").create_bucket(Bucket="outage")
    items = [*FAST, "trainer.data_dir=s3://outage/runs", f"trainer.exp_name={EXP}"]
    run_dir = location(f"s3://outage/runs/{EXP}")

    trainer = Trainer.from_params(PARAMS, overrides=items)
    trainer.add_event("after_update", lambda ctx: server.stop() if ctx.iteration == 2 else None)
    with pytest.raises(Exception) as info:  # noqa: B017 - the store's error wraps StorageUnavailable
        trainer.train()
    with contextlib.suppress(Exception):  # the store's error again: already reported above
        trainer.close()
    assert isinstance(info.value, StorageUnavailable) or isinstance(info.value.__cause__, StorageUnavailable)
    code, line = describe(info.value)
    assert code == 1 and "\n" not in line and line.startswith(f"s3://outage/runs/{EXP}/"), line
    assert "object store failed after 3 attempts" in line, line

    server = serve(port)  # the store is back (moto keeps its buckets in this process)
    try:
        rollouts = sorted(p.name for p in (run_dir / "rollouts").iterdir())
        committed = [name for name in rollouts if (run_dir / "rollouts" / name / "zarr.json").is_file()]
        assert committed and committed == rollouts[: len(committed)]  # whole ones first, any leftover last
        Trainer.from_params(PARAMS, overrides=items, resume=True).train()
        assert_same_as_reference(run_dir, reference)  # type: ignore[arg-type]
        assert not (run_dir / ".lock").exists()
    finally:
        server.stop()
