"""The environment a process needs to reach the test S3 server (tests/conftest.py, subprocesses)."""

from __future__ import annotations


def s3_env(endpoint: str) -> dict[str, str]:
    """Endpoint, test credentials and a short retry backoff."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "RLPIPE_STORE_BACKOFF_S": "0.05",
    }
