"""Tests of rlpipe/artifacts/checkpoints.py: atomic saves, pointers, retention, safe loads, RNG states."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import rlpipe.artifacts.checkpoints as ckpt_mod
from rlpipe.artifacts.checkpoints import (
    ChecksumError,
    best_checkpoint,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from rlpipe.artifacts.layout import checksum_path
from rlpipe.artifacts.store import StoreError
from rlpipe.refused import RefusedDataError
from rlpipe.runtime.seeding import restore_rng_state, rng_state


def make_state(iteration: int) -> dict[str, Any]:
    return {
        "iteration": iteration,
        "env_steps": iteration * 1024,
        "policy": {"w": torch.full((3, 2), float(iteration)), "b": torch.arange(2)},
        "optimizer": {"lr": 1e-3, "betas": [0.9, 0.999], "step": torch.tensor(iteration)},
        "env_id": "CartPole",
        "carried_obs": None,
        "flags": torch.tensor([True, False]),
    }


def names(directory: Path) -> list[str]:
    """Entries of ``directory`` except checksum sidecars (each checkpoint must have its own)."""
    found = sorted(p.name for p in directory.iterdir())
    checkpoints = [n for n in found if n.endswith(".pt")]
    assert [n for n in found if n.endswith(".sha256")] == [f"{n}.sha256" for n in checkpoints]
    return [n for n in found if not n.endswith(".sha256")]


def test_save_load_round_trip_and_latest_pointer(tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path, 7, make_state(7), keep_last=None)
    assert path == tmp_path / "ckpt-000007.pt"
    assert (tmp_path / "latest").read_text().strip() == "ckpt-000007.pt"
    assert latest_checkpoint(tmp_path) == path
    state = load_checkpoint(path)
    want = make_state(7)
    assert torch.equal(state["policy"]["w"], want["policy"]["w"])
    assert state["policy"]["b"].dtype == torch.int64
    assert state["flags"].dtype == torch.bool
    assert state["optimizer"]["betas"] == [0.9, 0.999]
    assert (state["env_id"], state["carried_obs"], state["env_steps"]) == ("CartPole", None, 7168)
    save_checkpoint(tmp_path, 8, make_state(8), keep_last=None)
    assert latest_checkpoint(tmp_path) == tmp_path / "ckpt-000008.pt"
    assert names(tmp_path) == ["ckpt-000007.pt", "ckpt-000008.pt", "latest"]  # no temporaries


def test_failed_save_keeps_previous_checkpoint_and_pointer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_checkpoint(tmp_path, 1, make_state(1), keep_last=None)

    def half_then_fail(obj: object, f: Any) -> None:
        f.write(b"PK\x03\x04 partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ckpt_mod.torch, "save", half_then_fail)
    with pytest.raises(OSError, match="No space left"):
        save_checkpoint(tmp_path, 2, make_state(2), keep_last=None)
    assert names(tmp_path) == ["ckpt-000001.pt", "latest"]
    assert latest_checkpoint(tmp_path) == tmp_path / "ckpt-000001.pt"


def test_retention_keeps_last_k_and_the_best(tmp_path: Path) -> None:
    metrics = {1: 10.0, 2: 50.0, 3: 20.0, 4: 30.0, 5: 5.0}
    for it, metric in metrics.items():
        save_checkpoint(tmp_path, it, make_state(it), keep_last=2, best_metric=metric)
    assert names(tmp_path) == ["best", "ckpt-000002.pt", "ckpt-000004.pt", "ckpt-000005.pt", "latest"]
    assert best_checkpoint(tmp_path) == tmp_path / "ckpt-000002.pt"
    assert json.loads((tmp_path / "best").read_text()) == {"file": "ckpt-000002.pt", "metric": 50.0}
    save_checkpoint(tmp_path, 6, make_state(6), keep_last=2, best_metric=60.0)
    assert best_checkpoint(tmp_path) == tmp_path / "ckpt-000006.pt"
    assert names(tmp_path) == ["best", "ckpt-000005.pt", "ckpt-000006.pt", "latest"]


def test_retention_without_metric_and_keep_all(tmp_path: Path) -> None:
    for it in range(1, 5):
        save_checkpoint(tmp_path / "k", it, make_state(it), keep_last=1)
        save_checkpoint(tmp_path / "all", it, make_state(it), keep_last=None)
    assert names(tmp_path / "k") == ["ckpt-000004.pt", "latest"]
    assert len(names(tmp_path / "all")) == 5
    assert best_checkpoint(tmp_path / "k") is None


def test_latest_falls_back_to_highest_file(tmp_path: Path) -> None:
    assert latest_checkpoint(tmp_path / "missing") is None
    assert latest_checkpoint(tmp_path) is None
    save_checkpoint(tmp_path, 3, make_state(3), keep_last=None)
    save_checkpoint(tmp_path, 12, make_state(12), keep_last=None)
    (tmp_path / "latest").unlink()
    assert latest_checkpoint(tmp_path) == tmp_path / "ckpt-000012.pt"
    (tmp_path / "latest").write_text("ckpt-000099.pt\n")  # names a file that is gone
    assert latest_checkpoint(tmp_path) == tmp_path / "ckpt-000012.pt"


def test_load_is_weights_only(tmp_path: Path) -> None:
    path = tmp_path / "ckpt-000001.pt"
    torch.save({"sneaky": np.random.RandomState(0)}, path)  # an arbitrary pickled object
    with pytest.raises(StoreError, match=r"ckpt-000001\.pt: truncated or not a checkpoint \("):
        load_checkpoint(path)


def test_truncated_checkpoint_is_a_store_error(tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path, 3, make_state(3), keep_last=None)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ChecksumError, match=r"ckpt-000003\.pt: checksum mismatch"):
        load_checkpoint(path)
    checksum_path(path).unlink()  # no sidecar (an older checkpoint): torch.load's own error
    with pytest.raises(StoreError, match=r"ckpt-000003\.pt: truncated or not a checkpoint \("):
        load_checkpoint(path)
    path.write_bytes(b"")
    with pytest.raises(StoreError, match="truncated or not a checkpoint"):
        load_checkpoint(path)


def test_missing_and_non_dict_checkpoints(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"ckpt-000009\.pt: no checkpoint here"):
        load_checkpoint(tmp_path / "ckpt-000009.pt")
    torch.save(torch.zeros(3), tmp_path / "t.pt")
    with pytest.raises(StoreError, match="not a checkpoint .holds a Tensor"):
        load_checkpoint(tmp_path / "t.pt")


def draw() -> tuple[list[float], list[float], list[float]]:
    py = [random.random(), random.gauss(0, 1), float(random.getrandbits(40))]
    npy = [*np.random.rand(3).tolist(), float(np.random.standard_normal()), float(np.random.randint(1 << 30))]
    return py, npy, torch.rand(4).tolist() + torch.randn(2).tolist()


def test_rng_state_round_trips_through_a_checkpoint(tmp_path: Path) -> None:
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    random.gauss(0, 1)  # leaves a cached gaussian (gauss_next) in python's state
    np.random.standard_normal()  # and in numpy's legacy state (has_gauss)
    path = save_checkpoint(tmp_path, 1, {"rng": rng_state()}, keep_last=None)
    after_save = draw()
    draw()  # move every generator on
    restore_rng_state(load_checkpoint(path)["rng"])
    assert draw() == after_save


def test_rng_state_is_weights_only_safe_and_distinguishes_states() -> None:
    random.seed(5)
    first = rng_state()
    random.random()
    second = rng_state()
    assert not torch.equal(first["python"]["state"], second["python"]["state"])
    assert first["python"]["state"].dtype == torch.int64
    assert first["numpy"]["key"].shape == (624,)
    assert first["torch"].dtype == torch.uint8


def test_checksum_mismatch_is_one_line_error_naming_the_file(tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path, 1, make_state(1), keep_last=None)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01  # one flipped bit in the middle (tensor data)
    path.write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match=rf"^{path}: checksum mismatch \(sha256 ") as info:
        load_checkpoint(path)
    assert "\n" not in str(info.value) and isinstance(info.value, RefusedDataError)


def test_a_checkpoint_without_sidecar_still_loads(tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path, 1, make_state(1), keep_last=None)
    checksum_path(path).unlink()
    assert load_checkpoint(path)["iteration"] == 1


@pytest.mark.parametrize("pointer", [b"garbage\n", b"\x00" * 15, b"ckpt-0000x1.pt", b"../params.yaml"])
def test_bad_latest_pointer_warns_naming_itself_and_falls_back(tmp_path, capsys, pointer) -> None:
    save_checkpoint(tmp_path, 1, make_state(1), keep_last=None)
    save_checkpoint(tmp_path, 2, make_state(2), keep_last=None)
    (tmp_path / "latest").write_bytes(pointer)
    assert latest_checkpoint(tmp_path) == tmp_path / "ckpt-000002.pt"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"Warning: {tmp_path / 'latest'}: holds ")
    assert err[0].endswith("using the newest valid checkpoint, ckpt-000002.pt")


def test_fallback_passes_over_a_damaged_newest_checkpoint(tmp_path, capsys) -> None:
    save_checkpoint(tmp_path, 1, make_state(1), keep_last=None)
    newest = save_checkpoint(tmp_path, 2, make_state(2), keep_last=None)
    newest.write_bytes(b"\x00" * newest.stat().st_size)  # zeroed
    (tmp_path / "latest").write_text("nonsense")
    assert latest_checkpoint(tmp_path) == tmp_path / "ckpt-000001.pt"
    assert "ckpt-000002.pt: checksum mismatch" in capsys.readouterr().err
