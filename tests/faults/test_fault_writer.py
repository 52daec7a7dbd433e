"""The store's writer process stopped (SIGSTOP) or killed between two writes, its thread hung, in a real run.

A stopped writer is warned about by pid and, past ``store.writer_timeout_s``, stopped and reported
in one line (exit 1, resumable); the time the run waits for it before a checkpoint is in the row's
``time/store_wait_s``; a writer killed between writes is reported as dead, by its signal. A writer
thread hung in a write (a disk or an object store that stops answering) is warned about and given
up at the same limit, in one line (exit 1, resumable).
"""

from __future__ import annotations

import csv
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from _fault_harness import (
    EXP,
    FAST,
    ROOT,
    assert_same_as_reference,
    covered,
    error_line,
    resumed_from,
    rlpipe,
    run_command,
    run_dir,
    snapshot,
)
from _offline_fixtures import PARAMS

from rlpipe import config


def state_of(pid: int) -> str | None:
    """The process's state letter (``R``, ``S``, ``T`` stopped, ``Z``), ``None`` when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def writer_of(parent: int) -> list[int]:
    """Pids of the writer processes ``parent`` started (alive or not yet reaped)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if ppid == parent and b"rlpipe.artifacts.writer_process" in cmdline:
            found.append(int(stat.parent.name))
    return found


def wait_until(condition, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def assert_resumes_from_1_as_the_reference(command: list[str], root: Path, reference: Path) -> None:
    """``--resume`` continues from checkpoint 1, leaves no temporaries and ends as the reference run."""
    before = snapshot(root)
    resumed = rlpipe(*command, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed_from(resumed.stderr) == 1
    covered(before, snapshot(root), 1)
    assert not [p for p in root.rglob(".*") if p.name != ".lock"], "temporaries left behind"
    assert_same_as_reference(root, reference)


def test_a_stopped_writer_is_warned_about_then_stopped_exit_1_and_the_run_resumes(tmp_path, reference):
    command = run_command(tmp_path, "store.writer=process", "store.writer_timeout_s=4")
    root = run_dir(tmp_path)
    store = root / "rollouts" / "iter-000002.zarr"
    stalled = rlpipe(*command, env={"RLPIPE_FAULT_SIGNAL_AT": "store.write:2:SIGSTOP"})  # the writer's point
    assert stalled.returncode == 1, stalled.stderr[-2000:]
    line = error_line(stalled)
    found = re.fullmatch(
        rf"Error: {re.escape(str(store))}: the rollout store's writer process \(pid (\d+)\) did not "
        r"answer for 4 s \(stopped or hung\) and was stopped; raise store\.writer_timeout_s to wait "
        r"longer; resume with: rlpipe run .* --resume",
        line,
    )
    assert found, line
    pid = found.group(1)
    warning = re.compile(
        rf"Warning: the rollout store's writer process \(pid {pid}\) has not answered for \d s while "
        rf"writing {re.escape(str(store))}; the run waits up to 4 s \(store\.writer_timeout_s\)"
    )
    assert [w for w in stalled.stderr.splitlines() if warning.fullmatch(w)], stalled.stderr
    assert state_of(int(pid)) is None
    assert not store.exists()
    assert_resumes_from_1_as_the_reference(command, root, reference)


def test_a_hung_writer_thread_is_warned_about_then_given_up_exit_1_and_the_run_resumes(tmp_path, reference):
    command = run_command(tmp_path, "store.writer=thread", "store.writer_timeout_s=4")
    root = run_dir(tmp_path)
    store = root / "rollouts" / "iter-000002.zarr"
    began = time.monotonic()
    hung = rlpipe(*command, env={"RLPIPE_FAULT_HANG_AT": "store.write:2:600"})  # the thread's write
    assert time.monotonic() - began < 300, "the run waited for the hung write"
    assert hung.returncode == 1, hung.stderr[-2000:]
    line = error_line(hung)
    assert re.fullmatch(
        rf"Error: {re.escape(str(store))}: the rollout store's writer thread has not finished it for "
        r"4 s \(a disk or an object store that stopped answering\) and was given up; raise "
        r"store\.writer_timeout_s to wait longer; resume with: rlpipe run .* --resume",
        line,
    ), line
    warning = re.compile(
        r"Warning: the rollout store's writer thread has not finished for \d s while writing "
        rf"{re.escape(str(store))}; the run waits up to 4 s \(store\.writer_timeout_s\)"
    )
    assert [w for w in hung.stderr.splitlines() if warning.fullmatch(w)], hung.stderr
    assert not store.exists()
    assert_resumes_from_1_as_the_reference(command, root, reference)


def test_the_wait_for_a_stopped_writer_before_a_checkpoint_is_in_the_rows_store_wait(tmp_path, monkeypatch):
    """The writer stops in its second write for 1.5 s; iteration 2's checkpoint waits for it."""
    from rlpipe.trainer import Trainer

    monkeypatch.setenv("RLPIPE_FAULT_SIGNAL_AT", "store.write:2:SIGSTOP")  # read by the writer process
    stop_s = 1.5

    def resume_the_writer() -> None:
        stopped: list[int] = []
        wait_until(lambda: stopped.extend(p for p in writer_of(os.getpid()) if state_of(p) == "T") or stopped)
        time.sleep(stop_s)
        os.kill(stopped[0], signal.SIGCONT)

    helper = threading.Thread(target=resume_the_writer, daemon=True)
    helper.start()
    cfg = config.load(PARAMS, [*FAST, f"trainer.data_dir={tmp_path}", f"trainer.exp_name={EXP}"])
    Trainer(cfg.model_copy(update={"store": cfg.store.model_copy(update={"writer": "process"})})).train()
    helper.join(timeout=10)
    with (run_dir(tmp_path) / "curve.csv").open() as file:
        waits = [float(row["time/store_wait_s"]) for row in csv.DictReader(file)]
    assert len(waits) == 4 and waits[1] >= stop_s - 0.1, waits  # (iteration 1 waits for the start-up)


def test_a_writer_killed_between_writes_is_one_line_naming_its_signal_and_the_run_resumes(
    tmp_path, reference
):
    """The run stops itself before its second collect (its writer idle), the test kills the writer."""
    command = run_command(tmp_path, "store.writer=process")
    root = run_dir(tmp_path)
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "RLPIPE_FAULT_SIGNAL_AT": "collect.start:2:SIGSTOP"}
    environ.pop("RLPIPE_DEBUG", None)
    run = subprocess.Popen(
        [sys.executable, "-m", "rlpipe", *command], cwd=ROOT, env=environ, text=True, stderr=subprocess.PIPE
    )
    try:
        wait_until(lambda: state_of(run.pid) == "T")
        (writer,) = writer_of(run.pid)
        os.kill(writer, signal.SIGKILL)
        os.kill(run.pid, signal.SIGCONT)
        _, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 1, stderr[-2000:]
    line = error_line(subprocess.CompletedProcess(run.args, 1, "", stderr))
    store = root / "rollouts" / "iter-000002.zarr"
    assert line.startswith(
        f"Error: {store}: the rollout store's writer process died (killed by SIGKILL) before "
        "writing it; resume with: rlpipe run "
    ), line
    resumed = rlpipe(*command, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert_same_as_reference(root, reference)
