"""A run directory someone sent: reading or evaluating it never runs code that lies inside it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from _fault_harness import EXP, error_line
from _offline_fixtures import ROOT

PAYLOAD = """
from pathlib import Path

Path({marker!r}).write_text("ran")


def make(num_envs, device):
    from rlpipe.envs import CartPole
    return CartPole(num_envs=num_envs, device=device)


def mirror(obs=None, actions=None, env=None):
    return obs, actions
"""
LAUNCHERS = {
    "python -m rlpipe": [sys.executable, "-m", "rlpipe"],
    "rlpipe": [str(Path(sys.executable).with_name("rlpipe"))],
}


@pytest.fixture
def sent(tmp_path: Path, reference: Path) -> tuple[Path, Path]:
    """``(folder, marker)``: ``folder/data/<run>/`` holds a module its params name as the env."""
    folder, marker = tmp_path / "sent", tmp_path / "marker"
    run = folder / "data" / EXP
    shutil.copytree(reference, run)
    (run / "payload.py").write_text(PAYLOAD.format(marker=str(marker)))
    name_in_params(run, lambda params: params["env"].update(id=f"data.{EXP}.payload:make"))
    return folder, marker


def name_in_params(run: Path, edit: Callable[[dict[str, Any]], Any]) -> None:
    """Apply ``edit`` to the run's ``params.yaml``."""
    params = yaml.safe_load((run / "params.yaml").read_text())
    edit(params)
    (run / "params.yaml").write_text(yaml.safe_dump(params))


def rlpipe_in(folder: Path, launcher: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``rlpipe ARGS`` run from ``folder``, the Python path being the user's (rlpipe's checkout only)."""
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    environ.pop("RLPIPE_DEBUG", None)
    return subprocess.run(
        [*LAUNCHERS[launcher], *args], cwd=folder, env=environ, text=True, capture_output=True, timeout=300
    )


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_inspect_imports_nothing_its_params_name(sent, launcher):
    folder, marker = sent
    module = f"data.{EXP}.payload"
    name_in_params(
        folder / "data" / EXP,
        lambda params: (
            params["algorithm"]["cfg"].update(symmetry={"function": f"{module}:mirror"}),
            params["trainer"].update(events={"train": {"hook": {"func": f"{module}:mirror"}}}),
        ),
    )
    result = rlpipe_in(folder, launcher, "inspect", f"data/{EXP}")
    assert result.returncode == 0, result.stderr
    assert "ppo on data.faulty.payload:make" in result.stdout and "latest ckpt-000004.pt" in result.stdout
    assert not marker.exists()


@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize("command", [["eval"], ["export", "--format", "torchscript"]])
def test_eval_and_export_do_not_import_an_env_from_the_run_directory(sent, launcher, command):
    folder, marker = sent
    result = rlpipe_in(folder, launcher, *command, f"data/{EXP}")
    assert result.returncode == 2
    # PYTHONPATH holds the checkout, whose own data/ folder (a run's) may exist: 'data.faulty' is then missing
    expected = (
        rf"Error: env\.id: cannot import module 'data\.{EXP}\.payload' \(ModuleNotFoundError: No module "
        rf"named 'data(\.{EXP})?'\); it is imported from the installed packages and PYTHONPATH, never the "
        "working directory: install its package or add its folder to PYTHONPATH"
    )
    assert re.fullmatch(expected, error_line(result)), error_line(result)
    assert not marker.exists()
    assert not (folder / "data" / EXP / "eval").exists() and not (folder / "data" / EXP / "export").exists()
