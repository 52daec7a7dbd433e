"""A DVC remote on the object store that holds the run directories (README: the same bucket, moto here)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
import torch

from rlpipe.artifacts.checkpoints import save_checkpoint

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # three DVC processes: ~10 s


def run(repo: Path, endpoint: str, *args: str) -> str:
    env = {
        **os.environ,
        "DVC_NO_ANALYTICS": "1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    result = subprocess.run(
        [str(BIN / "dvc"), *args], cwd=repo, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"dvc {' '.join(args)}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_checkpoints_push_to_and_pull_from_the_s3_remote(s3_server, s3_bucket, tmp_path):
    """The README's recipe in a git project whose ``data/`` is git-ignored: ``dvc add -o`` copies the
    checkpoints out of it, push sends them to the bucket, pull brings them back."""
    repo = tmp_path / "project"
    run_dir = repo / "data" / "cartpole_ppo"
    save_checkpoint(run_dir / "checkpoints", 2, {"w": torch.arange(4.0)}, keep_last=None)
    shutil.copy(ROOT / ".gitignore", repo / ".gitignore")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    run(repo, s3_server, "init")
    run(repo, s3_server, "remote", "add", "-d", "s3store", f"{s3_bucket}/dvc")  # the README's commands
    run(repo, s3_server, "remote", "modify", "s3store", "endpointurl", s3_server)
    (repo / "models").mkdir()
    run(repo, s3_server, "add", "data/cartpole_ppo/checkpoints", "-o", "models/cartpole_ppo")
    before = digest(run_dir / "checkpoints")
    assert digest(repo / "models" / "cartpole_ppo") == before
    assert "4 files pushed" in run(repo, s3_server, "push")  # ckpt, .sha256, latest, the .dir listing

    s3 = boto3.client(
        "s3",
        endpoint_url=s3_server,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=s3_bucket[5:]).get("Contents", [])]
    assert len(keys) == 4 and all(k.startswith("dvc/files/md5/") for k in keys), keys

    shutil.rmtree(repo / "models" / "cartpole_ppo")
    shutil.rmtree(repo / ".dvc" / "cache")
    run(repo, s3_server, "pull")
    assert digest(repo / "models" / "cartpole_ppo") == before
