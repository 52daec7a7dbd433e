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
pytestmark = pytest.mark.slow  # three DVC processes: ~10 s


def run(repo: Path, endpoint: str, *args: str) -> str:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    result = subprocess.run([str(BIN / "dvc"), *args], cwd=repo, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, f"dvc {' '.join(args)}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_checkpoints_and_params_push_to_and_pull_from_the_s3_remote(s3_server, s3_bucket, tmp_path):
    repo = tmp_path / "project"
    run_dir = repo / "data" / "cartpole_ppo"
    save_checkpoint(run_dir / "checkpoints", 2, {"w": torch.arange(4.0)}, keep_last=None)
    (run_dir / "params.yaml").write_text("trainer: {seed: 1}\n")
    run(repo, s3_server, "init", "--no-scm")
    run(repo, s3_server, "remote", "add", "-d", "s3store", f"{s3_bucket}/dvc")  # the README's commands
    run(repo, s3_server, "remote", "modify", "s3store", "endpointurl", s3_server)
    run(repo, s3_server, "add", "data/cartpole_ppo/checkpoints", "data/cartpole_ppo/params.yaml")
    before = digest(run_dir / "checkpoints")
    assert "5 files pushed" in run(repo, s3_server, "push")  # ckpt, .sha256, latest, the .dir listing, params

    s3 = boto3.client("s3", endpoint_url=s3_server, aws_access_key_id="testing",
                      aws_secret_access_key="testing", region_name="us-east-1")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=s3_bucket[5:]).get("Contents", [])]
    assert len(keys) == 5 and all(k.startswith("dvc/files/md5/") for k in keys), keys

    shutil.rmtree(run_dir / "checkpoints")
    shutil.rmtree(repo / ".dvc" / "cache")
    run(repo, s3_server, "pull")
    assert digest(run_dir / "checkpoints") == before
