"""The one-rollout stages refuse an off-policy run in one line (its update needs the replay ring)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _offline_fixtures import ROOT
from click.testing import CliRunner

from rlpipe import config
from rlpipe.cli import cli
from rlpipe.trainer import Trainer

SMALL = (
    "trainer.device=cpu",
    "trainer.num_envs=2",
    "trainer.buffer_size=10",
    "trainer.iterations=2",
    "trainer.enable_eval=false",
    "trainer.num_threads=1",
    "tracking.backend=none",
    "policy.actor.network_cfg.hidden_sizes=[8]",
    "algorithm.cfg.critic.hidden_sizes=[8]",
    "algorithm.cfg.batch_size=8",
    "algorithm.cfg.learning_starts=0",
    "algorithm.cfg.random_steps=0",
)


@pytest.fixture(scope="module")
def sac_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("sac")
    sets = [*SMALL, f"trainer.data_dir={data_dir}", "trainer.exp_name=sac"]
    Trainer(config.load(ROOT / "configs" / "sac_pendulum.yaml", sets)).train()
    return data_dir / "sac"


@pytest.mark.parametrize(
    ("command", "words"),
    [("update", "updates from a replay ring of many rollouts"), ("advantage", "computes no advantages")],
)
def test_one_rollout_stages_refuse_an_off_policy_run(sac_run, command, words):
    before = sorted(str(p.relative_to(sac_run)) for p in sac_run.rglob("*"))
    args = [command, str(sac_run)] + (
        [str(sac_run / "rollouts" / "iter-000002.zarr")] if command == "advantage" else []
    )
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: algorithm.name: sac ") and words in lines[0], lines
    assert "rlpipe replay RUN" in lines[0]
    assert sorted(str(p.relative_to(sac_run)) for p in sac_run.rglob("*")) == before


def test_eval_and_export_serve_an_off_policy_run(sac_run):
    for args in (["eval", str(sac_run)], ["export", str(sac_run)]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
    assert (sac_run / "export" / "policy.onnx").is_file()
    assert "max |Δaction|" in CliRunner().invoke(cli, ["export", str(sac_run)]).output
