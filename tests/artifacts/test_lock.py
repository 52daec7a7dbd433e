"""The run-directory writer lock: exclusive, re-entrant in one process, stale locks taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from rlpipe.artifacts.errors import LockedError
from rlpipe.artifacts.lock import RunLock


def write_lock(directory, **fields):
    (directory / ".lock").write_text(json.dumps({"command": "rlpipe run", "since": "then", **fields}))


def test_lock_file_names_this_process_and_goes_away(tmp_path):
    with RunLock(tmp_path, "rlpipe test"):
        record = json.loads((tmp_path / ".lock").read_text())
        assert record["pid"] == os.getpid() and record["host"] == socket.gethostname()
        assert record["command"] == "rlpipe test"
        with RunLock(tmp_path):  # re-entrant: the same process may nest (run → its own stages)
            pass
        assert (tmp_path / ".lock").exists()
    assert not (tmp_path / ".lock").exists()


def test_live_holder_refuses(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        write_lock(tmp_path, pid=holder.pid, host=socket.gethostname())
        with pytest.raises(LockedError, match=rf"in use by rlpipe run \(pid {holder.pid} on "):
            RunLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait()
    assert json.loads((tmp_path / ".lock").read_text())["pid"] == holder.pid  # left alone


def test_another_hosts_lock_is_never_taken_over(tmp_path):
    write_lock(tmp_path, pid=1, host="elsewhere.example")
    with pytest.raises(LockedError, match=r"pid 1 on elsewhere\.example"):
        RunLock(tmp_path).acquire()


@pytest.mark.parametrize("content", ["", "{not json"])
def test_a_dead_or_unreadable_lock_is_taken_over(tmp_path, capsys, content):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    if content:
        (tmp_path / ".lock").write_text(content)
    else:
        write_lock(tmp_path, pid=dead.pid, host=socket.gethostname())
    with RunLock(tmp_path):
        assert json.loads((tmp_path / ".lock").read_text())["pid"] == os.getpid()
    assert "taking over the lock" in capsys.readouterr().err
