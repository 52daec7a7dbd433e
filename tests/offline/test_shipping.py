"""`rlpipe export` (verified, all or nothing) and `rlpipe eval --policy/--video` on tiny stored runs."""

from __future__ import annotations

import json

import onnx
import pytest
from _offline_fixtures import tiny_cfg
from click.testing import CliRunner

from rlpipe.cli import cli
from rlpipe.policies.export import DeployedActor
from rlpipe.trainer import Trainer


def invoke(*args: object, code: int = 0) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result.output


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    """4 iterations of PPO on CartPole with observation normalization, rollouts stored."""
    cfg = tiny_cfg(tmp_path_factory.mktemp("ship"), "policy.obs_normalization=true")
    Trainer(cfg).train()
    return cfg.run_dir


@pytest.fixture(scope="module")
def recurrent_no_store(tmp_path_factory):
    """A GRU policy on Pendulum, no rollout store: export verifies on fresh env observations."""
    cfg = tiny_cfg(
        tmp_path_factory.mktemp("ship-rnn"),
        "env.id=Pendulum",
        "store.enabled=false",
        "trainer.iterations=2",
        "policy.name=recurrent_actor_critic",
        "policy.recurrent.type=gru",
        "policy.recurrent.hidden_size=8",
        "algorithm.cfg.seq_len=8",
        "eval.num_episodes=1",
    )
    Trainer(cfg).train()
    return cfg.run_dir


def test_export_onnx_is_verified_on_stored_observations_and_describes_itself(cartpole):
    out = invoke("export", cartpole)
    assert "verified on 128 observations (stored rollout iter-000004.zarr): max |Δaction| = 0" in out
    sidecar = json.loads((cartpole / "export" / "policy.onnx.json").read_text())
    assert sidecar["checkpoint"] == "ckpt-000004.pt" and sidecar["action"]["space"] == "Discrete"
    assert sidecar["verified"]["max_abs_diff"] == 0 and sidecar["normalizer"]["count"] > 0
    props = {p.key: p.value for p in onnx.load(str(cartpole / "export" / "policy.onnx")).metadata_props}
    assert props["params_hash"] == sidecar["params_hash"] and json.loads(props["inputs"]) == ["obs"]
    assert props["rlpipe_version"] == sidecar["rlpipe_version"]


def test_exported_file_scores_exactly_like_its_checkpoint(cartpole):
    invoke("export", cartpole, "--format", "torchscript", "--checkpoint", "2")
    assert json.loads((cartpole / "export" / "policy.pt.json").read_text())["iteration"] == 2
    invoke("eval", cartpole, "--checkpoint", cartpole / "checkpoints" / "ckpt-000002.pt")
    checkpoint = json.loads((cartpole / "eval" / "metrics.json").read_text())
    out = invoke("eval", cartpole, "--policy", cartpole / "export" / "policy.pt")
    shipped = json.loads((cartpole / "eval" / "policy-metrics.json").read_text())
    assert "eval/return_mean" in out
    keys = [k for k in checkpoint if k.startswith("eval/")] + ["iteration", "env_steps"]
    assert {k: shipped[k] for k in keys} == {k: checkpoint[k] for k in keys}


def test_a_file_that_acts_differently_is_refused_with_exit_3_and_nothing_written(
    cartpole, tmp_path, monkeypatch
):
    original = DeployedActor._action
    monkeypatch.setattr(DeployedActor, "_action", lambda self, out: 1 - original(self, out))
    result = CliRunner().invoke(
        cli, ["export", str(cartpole), "--format", "torchscript", "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 3
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: policy.pt: exported actions differ")
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_recurrent_policy_without_a_store_is_verified_on_env_observations(recurrent_no_store):
    out = invoke("export", recurrent_no_store, "--format", "torchscript")
    assert "fresh envs (no stored rollout)" in out
    sidecar = json.loads((recurrent_no_store / "export" / "policy.pt.json").read_text())
    assert sidecar["recurrent"]["type"] == "gru" and sidecar["inputs"] == ["obs", "state"]
    assert sidecar["action"]["clipped"] is True and sidecar["verified"]["max_abs_diff"] <= 1e-5
    invoke("eval", recurrent_no_store)
    checkpoint = json.loads((recurrent_no_store / "eval" / "metrics.json").read_text())
    invoke("eval", recurrent_no_store, "--policy", recurrent_no_store / "export" / "policy.pt")
    shipped = json.loads((recurrent_no_store / "eval" / "policy-metrics.json").read_text())
    assert shipped["eval/return_mean"] == pytest.approx(checkpoint["eval/return_mean"], abs=1e-3)


def test_user_mistakes_are_one_line_exit_2(cartpole, recurrent_no_store, tmp_path):
    assert "Invalid value for '--format'" in invoke("export", cartpole, "--format", "tflite", code=2)
    assert "ckpt-000007.pt: checkpoint not found" in invoke("export", cartpole, "--checkpoint", "7", code=2)
    rnn_file = recurrent_no_store / "export" / "policy.pt"
    if rnn_file.is_file():  # exported by the test above; Pendulum's file does not fit CartPole
        assert "differs" in invoke("eval", cartpole, "--policy", rnn_file, code=2)
    assert "give one of them" in invoke("eval", cartpole, "--policy", "x.onnx", "--checkpoint", "y", code=2)
    assert "exported policy not found" in invoke("eval", cartpole, "--policy", tmp_path / "x.onnx", code=2)
