"""Two writers on one run directory: the second is refused naming the first; a dead one's lock is taken."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
from _fault_harness import error_line, rlpipe, run_command, run_dir, snapshot


def copy_run(reference, tmp_path):
    shutil.copytree(reference, run_dir(tmp_path))
    return run_dir(tmp_path)


def hold(root, pid: int) -> None:
    (root / ".lock").write_text(
        json.dumps(
            {
                "pid": pid,
                "host": socket.gethostname(),
                "command": "rlpipe run",
                "since": "2026-01-01T00:00:00",
            }
        )
    )


def test_second_writer_is_refused_naming_pid_and_host(tmp_path, reference):
    root = copy_run(reference, tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        hold(root, holder.pid)
        before = snapshot(root)
        result = rlpipe(*run_command(tmp_path, "trainer.iterations=6"), "--resume")
        assert result.returncode == 1
        assert error_line(result) == (
            f"Error: {root.absolute()}: in use by rlpipe run (pid {holder.pid} on {socket.gethostname()}, "
            "since 2026-01-01T00:00:00); wait for it to end or stop it, then retry"
        )
        assert snapshot(root) == before and (root / ".lock").is_file()
        out = tmp_path / "replayed"
        out.mkdir()
        hold(out, holder.pid)  # an offline writer locks its output folder
        replay = rlpipe("replay", str(root), "--iterations", "2", "--out", str(out))
        assert replay.returncode == 1 and f"pid {holder.pid}" in error_line(replay)
        assert not (out / "checkpoints").exists()
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_a_dead_writers_lock_is_taken_over_with_a_warning(tmp_path, reference):
    root = copy_run(reference, tmp_path)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    hold(root, gone.pid)
    result = rlpipe(*run_command(tmp_path), "--resume")
    assert result.returncode == 0, result.stderr
    assert (
        f"Warning: {(root / '.lock').absolute()}: taking over the lock of pid {gone.pid} on "
        f"{socket.gethostname()}, which is no longer running"
    ) in result.stderr
    assert not (root / ".lock").exists()


@pytest.mark.slow
def test_two_live_writers_on_one_run(tmp_path):
    command = [sys.executable, "-m", "rlpipe", *run_command(tmp_path, "trainer.iterations=400")]
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    root = run_dir(tmp_path)
    try:
        deadline = time.monotonic() + 300
        while not list((root / "checkpoints").glob("ckpt-*.pt")) and time.monotonic() < deadline:
            time.sleep(0.05)
        second = rlpipe(*run_command(tmp_path, "trainer.iterations=400"), "--resume")
        assert second.returncode == 1 and f"pid {first.pid}" in error_line(second)
        assert first.poll() is None  # the first one runs on, untouched
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=300)
    assert first.returncode == 143
    rows = (root / "curve.csv").read_text().splitlines()
    assert [int(r.split(",")[0]) for r in rows[1:]] == list(range(1, len(rows)))  # not interleaved
