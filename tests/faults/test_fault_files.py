"""Damaged files: flipped/zeroed bytes in checkpoints, pointers, rollout chunks and metadata; bad params."""

from __future__ import annotations

import json
import shutil

import pytest
from _fault_harness import assert_same_as_reference, error_line, kept, rlpipe, run_command, run_dir, snapshot


def copy_run(reference, tmp_path):
    shutil.copytree(reference, run_dir(tmp_path))
    return run_dir(tmp_path)


def flip(path, offset_fraction=0.5, bit=0x01):
    data = bytearray(path.read_bytes())
    data[int(len(data) * offset_fraction)] ^= bit
    path.write_bytes(bytes(data))


def test_flipped_checkpoint_byte_is_refused_then_the_advice_resumes_exactly(tmp_path, reference):
    root = copy_run(reference, tmp_path)
    checkpoint = root / "checkpoints" / "ckpt-000004.pt"
    flip(checkpoint)
    before = snapshot(root)
    refused = rlpipe(*run_command(tmp_path, "trainer.iterations=5"), "--resume")
    assert refused.returncode == 3
    line = error_line(refused)
    assert line.startswith(f"Error: {checkpoint}: checksum mismatch (sha256 ")
    assert line.endswith(
        "the file is damaged; delete it (and its .sha256) to fall back to the previous "
        "checkpoint, ckpt-000003.pt"
    )
    assert snapshot(root) == before
    checkpoint.unlink()  # what the message says to do
    checkpoint.with_name("ckpt-000004.pt.sha256").unlink()
    resumed = rlpipe(*run_command(tmp_path), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "(iteration 3)" in resumed.stderr
    assert_same_as_reference(root, reference)


def test_the_only_checkpoint_damaged_the_advice_starts_over_and_deletes_no_rollout(tmp_path, reference):
    root = copy_run(reference, tmp_path)
    for k in (1, 2, 3):
        (root / "checkpoints" / f"ckpt-00000{k}.pt").unlink()
        (root / "checkpoints" / f"ckpt-00000{k}.pt.sha256").unlink()
    checkpoint = root / "checkpoints" / "ckpt-000004.pt"
    flip(checkpoint)
    refused = rlpipe(*run_command(tmp_path), "--resume")
    assert refused.returncode == 3
    assert error_line(refused).endswith(
        "the file is damaged; no earlier checkpoint is here to fall back to: restore it from a copy, or "
        "delete it (and its .sha256) and --resume, which starts the run over with its rollout stores "
        "set aside, kept (--overwrite deletes them)"
    )
    checkpoint.unlink()  # what the advice says
    checkpoint.with_name("ckpt-000004.pt.sha256").unlink()
    stores = {k: v for k, v in snapshot(root).items() if k.startswith("rollouts/")}
    again = rlpipe(*run_command(tmp_path), "--resume")
    assert again.returncode == 0, again.stderr
    aside = root / "rollouts" / "superseded-1"
    assert (
        f"resume: no checkpoint under {root / 'checkpoints'}; the 4 rollout stores of the stopped run "
        f"(iterations 1–4) moved to {aside} (kept: delete it when not needed); starting from iteration 0"
    ) in again.stderr
    moved = {k.replace("rollouts/", "rollouts/superseded-1/", 1): v for k, v in stores.items()}
    kept(moved, snapshot(root))  # every rollout store kept, byte for byte
    assert_same_as_reference(root, reference)


def test_zeroed_latest_pointer_names_itself_and_falls_back(tmp_path, reference):
    root = copy_run(reference, tmp_path)
    (root / "checkpoints" / "ckpt-000004.pt").unlink()
    (root / "checkpoints" / "ckpt-000004.pt.sha256").unlink()
    pointer = root / "checkpoints" / "latest"
    pointer.write_bytes(b"\x00" * 15)
    resumed = rlpipe(*run_command(tmp_path), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert (
        f"Warning: {pointer}: holds 15 unreadable bytes, not a checkpoint of this folder; using the "
        "newest valid checkpoint, ckpt-000003.pt"
    ) in resumed.stderr
    assert pointer.read_text().strip() == "ckpt-000004.pt"
    assert_same_as_reference(root, reference)


@pytest.mark.slow
def test_zeroed_rollout_chunk_is_refused_naming_store_and_key(tmp_path, reference):
    root = copy_run(reference, tmp_path)
    store = root / "rollouts" / "iter-000002.zarr"
    chunk = store / "reward" / "c.0.0"
    chunk.write_bytes(bytes(chunk.stat().st_size))
    expected = f"Error: {store}: key 'reward': checksum mismatch in chunk reward/c.0.0 (the store is damaged)"
    replay = rlpipe("replay", str(root), "--iterations", "2", "--out", str(tmp_path / "re"))
    assert replay.returncode == 3 and error_line(replay) == expected
    inspect = rlpipe("inspect", str(store))
    assert inspect.returncode == 3 and error_line(inspect) == expected
    good = rlpipe("replay", str(root), "--iterations", "3", "--out", str(tmp_path / "ok"))  # others replay
    assert good.returncode == 0, good.stderr


@pytest.mark.slow
def test_crafted_metadata_is_refused_before_allocation(tmp_path, reference):
    root = copy_run(reference, tmp_path)
    meta_path = root / "rollouts" / "iter-000001.zarr" / "obs" / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta["shape"][0] = meta["chunk_grid"]["configuration"]["chunk_shape"][0] = 10**12
    meta_path.write_text(json.dumps(meta))
    result = rlpipe("inspect", str(root / "rollouts" / "iter-000001.zarr"))
    assert result.returncode == 2
    assert "(damaged or crafted metadata); nothing was read" in error_line(result)
    flip(meta_path, 0.0, 0x40)  # '{' → ';': not JSON any more
    garbled = rlpipe("inspect", str(root / "rollouts" / "iter-000001.zarr"))
    assert garbled.returncode == 2 and "not an rlpipe rollout store" in error_line(garbled)


def test_binary_params_file_names_itself(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    result = rlpipe("run", str(params))
    assert result.returncode == 2
    assert error_line(result).startswith(f"Error: {params}: not a UTF-8 text params file")
