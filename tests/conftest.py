"""Shared fixtures: a real S3-compatible server (moto's server mode) on 127.0.0.1, one per session."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator

import pytest
from _s3 import s3_env

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
    boto3.client("s3", endpoint_url=s3_server, aws_access_key_id="testing", aws_secret_access_key="testing",
                 region_name="us-east-1").create_bucket(Bucket=name)
    return f"s3://{name}"
