"""Disk faults: a file-size limit (``ulimit -f``) mid-run and a read-only folder."""

from __future__ import annotations

import os
import resource
import shlex
import shutil

import pytest
from _fault_harness import (
    assert_same_as_reference,
    error_line,
    rlpipe,
    run_command,
    run_dir,
    snapshot,
)


def test_file_size_limit_at_the_first_checkpoint_prints_a_resume_that_works_and_keeps_the_store(
    tmp_path, reference
):
    limit = (reference / "checkpoints" / "ckpt-000001.pt").stat().st_size - 1  # rollout chunks fit
    assert max(p.stat().st_size for p in (reference / "rollouts").rglob("c.*") if p.is_file()) < limit

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    failed = rlpipe(*run_command(tmp_path), preexec=small_files)
    root = run_dir(tmp_path)
    assert failed.returncode == 1, failed.stderr
    line = error_line(failed)
    assert line.startswith(
        f"Error: {root / 'checkpoints' / 'ckpt-000001.pt'}: File too large — the file-size limit (ulimit -f) "
        "was reached: raise it; resume with: rlpipe run "
    )
    assert not (root / "checkpoints" / "ckpt-000001.pt").exists()
    assert not [p for p in (root / "checkpoints").iterdir() if p.name.startswith(".")]  # no temporary
    assert (root / "params.yaml").is_file() and (root / "rollouts" / "iter-000001.zarr").is_dir()
    stored = {k: v for k, v in snapshot(root).items() if k.startswith("rollouts/")}
    command = shlex.split(line.split("; resume with: ", 1)[1])
    assert command[:2] == ["rlpipe", "run"] and command[-1] == "--resume"
    resumed = rlpipe(*command[1:])  # the printed command, as typed (the limit lifted)
    assert resumed.returncode == 0, resumed.stderr
    assert f"moved to {root / 'rollouts' / 'superseded-1'}" in resumed.stderr
    moved = {k.replace("rollouts/", "rollouts/superseded-1/", 1): v for k, v in stored.items()}
    assert moved and all(snapshot(root).get(k) == v for k, v in moved.items())  # kept, byte for byte
    assert_same_as_reference(root, reference)


def read_only_dir(tmp_path):
    """A folder no write can enter: under /sys when root (permissions do not stop root), else chmod 555."""
    if os.geteuid() == 0:
        return "/sys/rlpipe-faults"
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    return str(folder / "data")


def test_read_only_data_dir_is_one_line_and_exit_1(tmp_path):
    target = read_only_dir(tmp_path)
    result = rlpipe(*run_command(tmp_path, f"trainer.data_dir={target}"))
    assert result.returncode == 1
    line = error_line(result)
    assert line.startswith(f"Error: {target}") and ("not permitted" in line or "Permission denied" in line)


@pytest.mark.slow
def test_replay_into_a_read_only_folder_loses_nothing(tmp_path, reference):
    root = tmp_path / "run"
    shutil.copytree(reference, root)
    before = snapshot(root)
    target = read_only_dir(tmp_path)
    result = rlpipe("replay", str(root), "--iterations", "2", "--out", target)
    assert result.returncode == 1
    assert error_line(result).startswith(f"Error: {target}")
    assert snapshot(root) == before
    if not target.startswith("/sys"):
        pytest.skip("ran as a non-root user: chmod covered it")


def test_file_size_limit_in_the_writer_process_is_one_line_and_nothing_half_published(tmp_path):
    """The limit is below a rollout's shared staging buffer (which it also bounds) but above params.yaml."""
    extra = ("store.writer=process", "trainer.num_envs=64", "algorithm.cfg.batch_size=64")
    limit = 6000

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # inherited by the writer process

    failed = rlpipe(*run_command(tmp_path, *extra), preexec=small_files)
    root = run_dir(tmp_path)
    assert failed.returncode == 1, failed.stderr[-2000:]
    store = root / "rollouts" / "iter-000001.zarr"
    assert error_line(failed).startswith(f"Error: {store}: File too large — the file-size limit (ulimit -f) ")
    assert (root / "params.yaml").stat().st_size < limit
    rollouts = root / "rollouts"
    assert not store.exists() and not (rollouts.exists() and list(rollouts.iterdir()))  # nor a temporary
    assert not (root / "checkpoints").exists() or not list((root / "checkpoints").glob("ckpt-*"))
