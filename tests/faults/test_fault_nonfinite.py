"""NaN/Inf injected into obs, reward and gradients: refused before the weights, rollout kept, resume exact."""

from __future__ import annotations

import json
import re

import pytest
import torch
from _fault_harness import (
    assert_same_as_reference,
    error_line,
    rlpipe,
    run_command,
    run_dir,
    snapshot,
)

from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.artifacts.zarr_read import read_rollout


def test_nan_reward_stops_before_the_update_and_resume_is_bit_exact(tmp_path, reference):
    killed = rlpipe(*run_command(tmp_path), env={"RLPIPE_FAULT_NAN_AT": "reward:3"})
    root = run_dir(tmp_path)
    assert killed.returncode == 3, killed.stderr
    rejected = root / "rollouts" / "rejected" / "iter-000003.zarr"
    assert error_line(killed) == (
        f"Error: non-finite 'reward' at iteration 3 (envs [1]); rollout kept at {rejected}; latest "
        "stays ckpt-000002.pt (fix the cause, then resume with --resume)"
    )
    assert (root / "checkpoints" / "latest").read_text().strip() == "ckpt-000002.pt"
    assert not (root / "checkpoints" / "ckpt-000003.pt").exists()
    stored = sorted(p.name for p in (root / "rollouts").glob("iter-*"))
    assert stored == ["iter-000001.zarr", "iter-000002.zarr"]
    rollout, attrs = read_rollout(rejected)
    assert attrs["rejected"].startswith("non-finite 'reward' at iteration 3") and attrs["iteration"] == 3
    assert torch.isnan(rollout["reward"][1, 2]) and torch.isfinite(rollout["reward"][0]).all()

    refused = rlpipe("update", str(root), str(rejected))  # update refuses it unless asked
    assert refused.returncode == 3
    assert re.fullmatch(
        rf"Error: {re.escape(str(rejected))}: rollout was rejected by the non-finite "
        r"guard \(non-finite 'reward' .*\); pass --allow-rejected to use it anyway",
        error_line(refused),
    )
    allowed = rlpipe("update", str(root), str(rejected), "--allow-rejected")  # still must be finite
    assert allowed.returncode == 3 and "key 'reward' is not finite at [1, 2]" in error_line(allowed)

    before = snapshot(root)
    resumed = rlpipe(*run_command(tmp_path), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    after = snapshot(root)  # what the checkpoint covers is untouched by the resume
    assert all(after.get(k) == v for k, v in before.items() if "ckpt-000001" in k or "iter-000001" in k)
    assert_same_as_reference(root, reference)


@pytest.mark.parametrize(
    ("fault", "key", "iteration"),
    [
        ("obs:2", "obs", 2),
        pytest.param("reward:1:inf", "reward", 1, marks=pytest.mark.slow),
        ("grad:3", "gradients", 2),  # one optimizer step per minibatch: step 3 is in update 2
    ],
)
def test_nonfinite_obs_reward_and_gradients_are_refused(tmp_path, fault, key, iteration):
    result = rlpipe(*run_command(tmp_path), env={"RLPIPE_FAULT_NAN_AT": fault})
    root = run_dir(tmp_path)
    assert result.returncode == 3, result.stderr
    line = error_line(result)
    assert line.startswith(f"Error: non-finite '{key}' at iteration {iteration} (")
    last = iteration - 1
    assert line.endswith(
        f"latest stays ckpt-{last:06d}.pt (fix the cause, then resume with --resume)"
        if last
        else "no checkpoint written (fix the cause, then resume with --resume)"
    )
    assert (root / "rollouts" / "rejected" / f"iter-{iteration:06d}.zarr").is_dir()
    assert not (root / "rollouts" / f"iter-{iteration:06d}.zarr").exists()  # out of the replayable set
    for ckpt in (root / "checkpoints").glob("ckpt-*.pt"):  # nothing non-finite ever reached a file
        assert all(torch.isfinite(t).all() for t in load_checkpoint(ckpt)["policy"].values())


@pytest.mark.slow
def test_skip_mode_drops_the_iteration_and_goes_on(tmp_path):
    result = rlpipe(
        *run_command(tmp_path, "trainer.on_nonfinite=skip"), env={"RLPIPE_FAULT_NAN_AT": "reward:2"}
    )
    root = run_dir(tmp_path)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("Warning: non-finite")]
    assert len(warnings) == 1 and warnings[0].endswith("iteration skipped (1 in a row, at most 3)")
    summary = json.loads((root / "metrics.json").read_text())
    assert summary["skipped_iterations"] == 1 and summary["iterations"] == 4
    assert (root / "rollouts" / "rejected" / "iter-000002.zarr").is_dir()
    assert sorted(p.name[5:11] for p in (root / "rollouts").glob("iter-*")) == ["000001", "000003", "000004"]
    final = load_checkpoint(root / "checkpoints" / "ckpt-000004.pt")
    assert all(torch.isfinite(t).all() for t in final["policy"].values())


@pytest.mark.slow
def test_skip_mode_stops_after_max_in_a_row(tmp_path):
    result = rlpipe(
        *run_command(tmp_path, "trainer.on_nonfinite=skip", "trainer.max_skipped_in_a_row=2"),
        env={"RLPIPE_FAULT_NAN_AT": "reward:2+"},
    )  # every rollout from the second on
    root = run_dir(tmp_path)
    assert result.returncode == 3, result.stderr
    assert error_line(result).endswith(
        "(2 iterations skipped in a row before it: trainer.max_skipped_in_a_row reached)"
    )
    assert "non-finite 'reward' at iteration 4" in error_line(result)
    assert sorted(p.name for p in (root / "rollouts" / "rejected").iterdir()) == [
        "iter-000002.zarr",
        "iter-000003.zarr",
        "iter-000004.zarr",
    ]
    assert (root / "checkpoints" / "latest").read_text().strip() == "ckpt-000001.pt"


def test_eval_refuses_nonfinite_weights(tmp_path, reference):
    state = load_checkpoint(reference / "checkpoints" / "ckpt-000004.pt")
    name = next(iter(state["policy"]))
    state["policy"][name] = torch.full_like(state["policy"][name], float("nan"))
    bad = tmp_path / "ckpt-000004.pt"
    torch.save(state, bad)
    result = rlpipe("eval", str(reference), "--checkpoint", str(bad), "--out", str(tmp_path / "eval.json"))
    assert result.returncode == 3
    assert error_line(result) == f"Error: {bad}: non-finite weight {name!r}; evaluate an earlier checkpoint"
    assert not (tmp_path / "eval.json").exists()
