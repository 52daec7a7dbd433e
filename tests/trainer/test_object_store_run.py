"""``trainer.data_dir: s3://…``: a short run, resume, replay and inspect against a real S3 server (moto).

Also every way a URL can be unusable: one line naming it, exit code 2, nothing written.
"""

from __future__ import annotations

import json

import boto3
import pytest
import requests
from _offline_fixtures import PARAMS, assert_same_learner, set_args
from click.testing import CliRunner

from rlpipe.artifacts.checkpoints import latest_checkpoint
from rlpipe.cli import cli
from rlpipe.location import location


def invoke(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.output


def stored(endpoint: str, bucket_url: str) -> list[str]:
    bucket = bucket_url.removeprefix("s3://")
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    return sorted(obj["Key"] for obj in s3.list_objects_v2(Bucket=bucket).get("Contents", []))


def test_run_resume_replay_and_inspect_on_s3(s3_server, s3_bucket):
    data = f"{s3_bucket}/runs"
    run_dir = location(f"{data}/cartpole_ppo")
    code, out = invoke("run", PARAMS, *set_args(data, "trainer.iterations=2"))  # type: ignore[arg-type]
    assert code == 0, out
    files = stored(s3_server, s3_bucket)
    for name in (
        "params.yaml",
        "metrics.json",
        "curve.csv",
        "checkpoints/ckpt-000002.pt",
        "checkpoints/latest",
        "rollouts/iter-000001.zarr/zarr.json",
        "rollouts/iter-000002.zarr/obs/c.0.0.0",
    ):
        assert f"runs/cartpole_ppo/{name}" in files, name
    assert "runs/cartpole_ppo/.lock" not in files  # released at the end

    code, out = invoke("run", PARAMS, *set_args(data), "--resume")  # type: ignore[arg-type]
    assert code == 0 and "resume: continuing from s3://" in out, out
    assert latest_checkpoint(run_dir / "checkpoints") == run_dir / "checkpoints" / "ckpt-000004.pt"
    assert json.loads((run_dir / "metrics.json").read_text())["iterations"] == 4
    assert (run_dir / "curve.csv").read_text().count("\n") == 5  # header + 4 rows, none repeated

    ckpt = "checkpoints/ckpt-000004.pt"
    code, out = invoke("replay", run_dir)
    assert code == 0, out
    assert_same_learner(run_dir / ckpt, run_dir / "reupdate" / ckpt)  # type: ignore[arg-type]

    code, out = invoke("inspect", run_dir, "--json")
    assert code == 0 and json.loads(out)["iterations"] == 4, out
    code, out = invoke("inspect", run_dir / "rollouts" / "iter-000003.zarr")
    assert code == 0 and "iteration" in out and "obs" in out, out


@pytest.mark.slow
def test_an_s3_run_equals_a_local_one_and_evaluates_and_exports_there(s3_bucket, tmp_path):
    data = f"{s3_bucket}/runs"
    run_dir = location(f"{data}/cartpole_ppo")
    assert invoke("run", PARAMS, *set_args(data, "trainer.iterations=2"))[0] == 0  # type: ignore[arg-type]
    assert invoke("run", PARAMS, *set_args(data), "--resume")[0] == 0  # type: ignore[arg-type]
    assert invoke("run", PARAMS, *set_args(tmp_path))[0] == 0  # type: ignore[arg-type]
    ckpt = "checkpoints/ckpt-000004.pt"  # resumed on S3 == uninterrupted in a local folder, bit for bit
    assert_same_learner(tmp_path / "cartpole_ppo" / ckpt, run_dir / ckpt)  # type: ignore[arg-type]

    for command in ("eval", "export"):  # outputs beside the run: eval/metrics.json, export/policy.onnx
        code, out = invoke(command, run_dir)
        assert code == 0 and "s3://" in out, out
    assert json.loads((run_dir / "eval" / "metrics.json").read_text())["eval/return_mean"] > 0
    export = run_dir / "export"
    assert (export / "policy.onnx").read_bytes() and (export / "policy.onnx.json").is_file()


def _refused(
    args: list[str], endpoint: str | None, bucket_url: str | None, tmp_path, monkeypatch, pattern: str
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = invoke(*args)
    assert code == 2, out
    line = out.strip()
    assert "\n" not in line and line.startswith("Error: ") and pattern in line, line
    assert list(tmp_path.iterdir()) == []  # nothing written locally
    if bucket_url is not None and endpoint is not None:
        assert stored(endpoint, bucket_url) == []  # nor in the bucket


def test_an_unreachable_endpoint_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    _refused(
        ["run", PARAMS, *set_args("s3://somewhere/runs")],
        None,
        None,
        tmp_path,
        monkeypatch,
        "s3://somewhere/runs/cartpole_ppo: cannot reach the object store at http://127.0.0.1:9",
    )


def test_a_missing_bucket_is_one_line(s3_server, s3_bucket, tmp_path, monkeypatch):
    _refused(
        ["run", PARAMS, *set_args("s3://no-such-bucket/runs")],
        None,
        None,
        tmp_path,
        monkeypatch,
        "s3://no-such-bucket/runs/cartpole_ppo: bucket 'no-such-bucket' does not exist",
    )
    _refused(
        ["replay", "s3://no-such-bucket/runs/x"],
        None,
        None,
        tmp_path,
        monkeypatch,
        "bucket 'no-such-bucket' does not exist",
    )


def test_refused_credentials_are_one_line(s3_server, s3_bucket, tmp_path, monkeypatch):
    requests.post(f"{s3_server}/moto-api/reset-auth", data=b"0", timeout=10)  # moto checks keys from now on
    try:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "wrong")
        _refused(
            ["run", PARAMS, *set_args(f"{s3_bucket}/runs")],
            None,
            None,
            tmp_path,
            monkeypatch,
            f"{s3_bucket}/runs/cartpole_ppo: the store refused the credentials",
        )
    finally:
        requests.post(f"{s3_server}/moto-api/reset-auth", data=b"inf", timeout=10)
    assert stored(s3_server, s3_bucket) == []


def test_a_scheme_without_a_filesystem_is_one_line(tmp_path, monkeypatch):
    _refused(
        ["run", PARAMS, *set_args("gs://bucket/runs")],
        None,
        None,
        tmp_path,
        monkeypatch,
        "trainer.data_dir: gs://bucket/runs: no filesystem for the URL scheme 'gs' is installed",
    )
    _refused(["replay", "nosuch://bucket/run"], None, None, tmp_path, monkeypatch, "nosuch://bucket/run")


@pytest.mark.parametrize("command", ["replay", "inspect", "eval", "export"])
def test_offline_commands_take_an_s3_run_dir_that_is_not_one(
    command, s3_server, s3_bucket, tmp_path, monkeypatch
):
    _refused(
        [command, f"{s3_bucket}/empty"], s3_server, s3_bucket, tmp_path, monkeypatch, f"{s3_bucket}/empty"
    )
