"""Helpers of ``tests/faults``: drive the real ``rlpipe`` CLI in a subprocess, inject one fault, check.

Every case asserts the one-line message, the exit code, that nothing written before the fault is
lost (:func:`snapshot` before, :func:`kept` after) and that resume or replay afterwards is bit-exact
(:func:`assert_same_as_reference`, against an uninterrupted run of the same params).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from _offline_fixtures import PARAMS, ROOT, leaves, same_leaves

from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.artifacts.zarr_read import read_rollout

ITERATIONS = 4
FAST = (
    "trainer.device=cpu",
    "trainer.num_envs=4",
    "trainer.buffer_size=8",
    f"trainer.iterations={ITERATIONS}",
    "trainer.save_freq=32",
    "trainer.enable_eval=false",
    "trainer.num_eval_envs=2",
    "trainer.num_threads=1",
    "tracking.backend=none",
    "policy.actor.network_cfg.hidden_sizes=[8]",
    "policy.critic.network_cfg.hidden_sizes=[8]",
    "algorithm.cfg.batch_size=16",
    "algorithm.cfg.n_epochs=1",
    "eval.num_envs=2",
    "eval.num_episodes=1",
)
"""4 iterations of 4 envs × 8 steps, a checkpoint after every iteration (save_freq = one iteration)."""
EXP = "faulty"


def overrides(data_dir: Path, *extra: str) -> list[str]:
    """``--set`` arguments of the fast params under ``data_dir`` (exp_name :data:`EXP`)."""
    items = [*FAST, f"trainer.data_dir={data_dir}", f"trainer.exp_name={EXP}", *extra]
    return [arg for item in items for arg in ("--set", item)]


def run_command(data_dir: Path, *extra: str) -> list[str]:
    """``rlpipe run params.yaml --set …`` as argv (without the interpreter)."""
    return ["run", str(PARAMS), *overrides(data_dir, *extra)]


def rlpipe(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 300,
    preexec: Callable[[], Any] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m rlpipe ARGS`` from the repository root; ``env`` adds variables (fault hooks)."""
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    environ.pop("RLPIPE_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "rlpipe", *args],
        cwd=ROOT,
        env=environ,
        text=True,
        capture_output=True,
        timeout=timeout,
        preexec_fn=preexec,
    )


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one ``Error: …`` line of a failed command (and no traceback anywhere)."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def run_dir(data_dir: Path) -> Path:
    return data_dir / EXP


def snapshot(root: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``root`` (the lock and temporaries aside)."""
    found = {}
    for path in sorted(Path(root).rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and path.name != ".lock" and not any(p.startswith(".") for p in rel.parts):
            found[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def kept(before: dict[str, str], after: dict[str, str], may_change: tuple[str, ...] = ()) -> None:
    """Every file of ``before`` is still there, unchanged (except names starting with ``may_change``)."""
    lost = [k for k, v in before.items() if after.get(k) != v and not k.startswith(may_change)]
    assert not lost, f"lost or changed: {lost}"


def state(path: Path) -> dict[str, Any]:
    """Every leaf of a checkpoint but wall time, the params hash (covers data_dir) and evaluation's own
    counters (the reference does not evaluate; evaluation never touches what training computes)."""
    skip = ("/wall_s", "/params_hash", "/evaluator_calls")
    return {
        k: v for k, v in leaves(load_checkpoint(path)) if k not in skip and not k.startswith("/last_eval")
    }


def assert_same_as_reference(done: Path, reference: Path, iterations: int = ITERATIONS) -> None:
    """Final checkpoint and every rollout of run dir ``done`` equal those of ``reference``, bit for bit.

    Rollouts: all of ``1..iterations``, or the newest ones when ``done`` keeps fewer (``store.keep_last``).
    """
    final = f"checkpoints/ckpt-{iterations:06d}.pt"
    assert same_leaves(state(reference / final), state(done / final))
    stored = sorted(int(p.name[5:11]) for p in (done / "rollouts").glob("iter-*.zarr"))
    assert stored and stored == list(range(stored[0], iterations + 1)), stored
    for k in stored:
        a, _ = read_rollout(reference / "rollouts" / f"iter-{k:06d}.zarr")
        b, _ = read_rollout(done / "rollouts" / f"iter-{k:06d}.zarr")
        assert all(torch.equal(a[key], b[key]) for key in a.keys()), k


def resumed_from(stderr: str) -> int:
    """The iteration a ``--resume`` continued from (0: started over)."""
    for line in stderr.splitlines():
        if line.startswith("resume: continuing from"):
            return int(line.rsplit("(iteration ", 1)[1].rstrip(")"))
    return 0


def covered(
    before: dict[str, str], after: dict[str, str], iteration: int, retained: tuple[str, ...] = ()
) -> None:
    """Files of iterations ≤ ``iteration`` (checkpoints, rollouts) and ``params.yaml`` survived unchanged.

    ``retained``: folders whose old entries retention may delete (``rollouts/`` with ``store.keep_last``).
    """

    def number(name: str) -> int | None:
        for part in Path(name).parts:
            if part.startswith(("ckpt-", "iter-")):
                return int(part[5:11])
        return None

    def covers(name: str) -> bool:
        n = number(name)
        if name.startswith(retained):
            return False
        return name == "params.yaml" or (n is not None and n <= iteration and "rejected" not in name)

    keep = {k: v for k, v in before.items() if covers(k)}
    kept(keep, after)
