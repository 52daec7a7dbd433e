"""Suite-wide set-up: one intra-op thread per test process while pytest-xdist runs two side by side.

``make test`` runs ``-n 2`` on CI's two cores; two workers that each start torch with one thread per
core (and subprocesses that inherit it) would oversubscribe the machine, which collapses torch's
intra-op thread pool. Subprocesses inherit ``OMP_NUM_THREADS``; a params file's
``trainer.num_threads`` still wins.

Also a real S3-compatible server (moto's server mode) on 127.0.0.1, one per test process, started
on first use, and a fresh bucket per test that asks for one.
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
from collections.abc import Iterator

import pytest
from _s3 import s3_env


def pytest_configure(config: pytest.Config) -> None:
    """Pin one thread per process before torch starts (workers import it only after this hook).

    The load-average warning is switched off for the suite and its subprocesses: the load on a test
    machine is the suite's own workers, and a warning line would break tests that count output lines.
    """
    os.environ["RLPIPE_LOAD_WARNING"] = "0"
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


_BUCKETS = itertools.count()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a moto S3 server (started on first use, stopped at session end)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log lines in test output
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3_bucket(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh, empty bucket on the test server: ``s3://rlpipe-test-N`` (env set for this test)."""
    import boto3

    for key, value in s3_env(s3_server).items():
        monkeypatch.setenv(key, value)
    name = f"rlpipe-test-{next(_BUCKETS)}"
    boto3.client(
        "s3",
        endpoint_url=s3_server,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket=name)
    return f"s3://{name}"
