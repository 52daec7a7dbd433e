"""Refusals of ``replay`` and ``update`` come before any folder is made, and name a command that works."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from _offline_fixtures import PARAMS, set_args, tiny_cfg
from click.testing import CliRunner

from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.cli import cli
from rlpipe.trainer import Trainer


@pytest.fixture(scope="module")
def every_2nd(tmp_path_factory):
    """4 iterations storing every 2nd (rollouts 2 and 4), checkpoints at iterations 2 and 4."""
    cfg = tiny_cfg(tmp_path_factory.mktemp("every2"), "store.every=2")
    Trainer(cfg).train()
    return cfg.run_dir


def invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args])


def entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_update_on_an_every_k_run_advises_a_command_that_works(every_2nd, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(every_2nd, run)
    refused = invoke("update", run)
    assert refused.exit_code == 2, refused.output
    assert "no checkpoint of iteration 3" in refused.output and "rlpipe replay" not in refused.output
    advised = re.findall(r"`(rlpipe [^`]+)`", refused.output)
    assert len(advised) == 1, refused.output
    command = shlex.split(advised[0])
    assert command[:2] == ["rlpipe", "update"]
    done = invoke(*command[1:])  # the advice, as typed
    assert done.exit_code == 0, done.output
    state = load_checkpoint(run / "updated" / "ckpt-000004.pt")
    assert state["origin"]["start"] == str(run / "checkpoints" / "ckpt-000002.pt")


def test_update_where_replay_rebuilds_the_checkpoint_advises_that_replay(tmp_path):
    cfg = tiny_cfg(tmp_path, "trainer.iterations=3")  # rollouts 1–3, checkpoints 2 and 3
    Trainer(cfg).train()
    (cfg.run_dir / "checkpoints" / "ckpt-000002.pt").unlink()
    refused = invoke("update", cfg.run_dir)
    assert refused.exit_code == 2, refused.output
    command = shlex.split(re.findall(r"`(rlpipe [^`]+)`", refused.output)[0])
    assert command == ["rlpipe", "replay", str(cfg.run_dir), "--iterations", "3"]
    done = invoke(*command[1:])
    assert done.exit_code == 0, done.output
    assert (cfg.run_dir / "reupdate" / "checkpoints" / "ckpt-000003.pt").is_file()


def test_a_refused_replay_makes_no_folder(every_2nd, tmp_path):
    before = entries(every_2nd)
    for extra in ((), ("--iterations", "4"), ("--out", tmp_path / "new" / "re")):
        refused = invoke("replay", every_2nd, *extra)
        assert refused.exit_code == 2 and "not stored" in refused.output, refused.output
        assert entries(every_2nd) == before and not (tmp_path / "new").exists()


def test_a_refused_update_makes_no_folder(every_2nd, tmp_path):
    before = entries(every_2nd)
    refused = invoke("update", PARAMS, *set_args(every_2nd.parent, "store.every=2"))
    assert refused.exit_code == 2 and "no checkpoint of iteration 3" in refused.output, refused.output
    assert entries(every_2nd) == before
    rollout = every_2nd / "rollouts" / "iter-000002.zarr"
    other = invoke(
        "update", every_2nd, rollout, "--checkpoint", tmp_path / "none.pt", "--out", tmp_path / "o"
    )
    assert other.exit_code == 2 and not (tmp_path / "o").exists(), other.output


def test_a_replay_refused_while_reading_takes_back_the_folder_it_made(every_2nd, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(every_2nd, run)
    chunk = run / "rollouts" / "iter-000004.zarr" / "reward" / "c.0.0"
    chunk.write_bytes(bytes(chunk.stat().st_size))  # found only when its data are read
    start = run / "checkpoints" / "ckpt-000002.pt"
    refused = invoke("replay", run, "--iterations", "4", "--from", start, "--out", tmp_path / "new" / "re")
    assert refused.exit_code == 3 and "checksum mismatch" in refused.output, refused.output
    assert not (tmp_path / "new").exists()
