"""``examples/plugins``: a plug-in algorithm (A2C) and policy, copied outside the repository, named from
params, trained, inspected without importing them, replayed bit for bit, evaluated and exported."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from _offline_fixtures import assert_same_learner
from click.testing import CliRunner

from rlpipe.cli import cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "plugins"
TINY = (
    "trainer.num_envs=4",
    "trainer.buffer_size=8",
    "trainer.iterations=3",
    "trainer.eval_freq=96",
    "trainer.num_eval_envs=2",
    "checkpoint.every_iteration=true",
    "policy.actor.network_cfg.hidden_sizes=[16,16]",
    "eval.num_envs=2",
    "eval.num_episodes=1",
)
"""Three iterations of 4 envs × 8 steps, a checkpoint after each (so each replays from its own)."""


def rlpipe(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.output


def forget_plugin() -> None:
    """Drop the plug-in's modules, as in a fresh interpreter."""
    for name in [m for m in sys.modules if m.split(".")[0] == "rlpipe_a2c"]:
        del sys.modules[name]


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory: pytest.TempPathFactory):
    """The example's package in a folder outside the repository, on the path; one tiny run of it."""
    outside = tmp_path_factory.mktemp("site")
    shutil.copytree(EXAMPLE / "rlpipe_a2c", outside / "rlpipe_a2c")
    data = tmp_path_factory.mktemp("data")
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(outside))  # what PYTHONPATH=<folder> does
        code, out = rlpipe(
            "run",
            EXAMPLE / "params.yaml",
            *(arg for item in (*TINY, f"trainer.data_dir={data}") for arg in ("--set", item)),
        )
        assert code == 0, out
        yield data / "cartpole_a2c"
        forget_plugin()


def test_the_plugin_trained_with_its_own_classes_and_config(plugin_run):
    from rlpipe.artifacts.checkpoints import load_checkpoint

    state = load_checkpoint(plugin_run / "checkpoints" / "ckpt-000003.pt")
    assert any(key.startswith("critic.0.0.") for key in state["policy"])  # the shared trunk's layers
    params = yaml.safe_load((plugin_run / "params.yaml").read_text())
    assert params["algorithm"]["name"] == "rlpipe_a2c.algo:A2C"
    assert "clip_coef" not in sys.modules["rlpipe_a2c.algo"].A2CCfg.model_fields  # no option it ignores


def test_inspect_names_the_modules_it_needs_without_importing_them(plugin_run):
    forget_plugin()
    code, out = rlpipe("inspect", plugin_run, "--json")
    assert code == 0, out
    summary = json.loads(out)
    assert summary["algorithm"] == "rlpipe_a2c.algo:A2C"
    assert summary["code"] == {
        "algorithm": "rlpipe_a2c.algo:A2C",
        "policy": "rlpipe_a2c.policy:SharedTrunkActorCritic",
    }
    assert not [m for m in sys.modules if m.startswith("rlpipe_a2c")]
    code, out = rlpipe("inspect", plugin_run)
    assert "needs module rlpipe_a2c.algo (algorithm rlpipe_a2c.algo:A2C)" in out


def test_replay_is_bit_exact_and_eval_and_export_run(plugin_run, tmp_path):
    code, out = rlpipe("replay", plugin_run, "--out", tmp_path / "replay")
    assert code == 0, out
    for k in (1, 2, 3):
        name = f"ckpt-{k:06d}.pt"
        assert_same_learner(tmp_path / "replay" / "checkpoints" / name, plugin_run / "checkpoints" / name)
    code, out = rlpipe("eval", plugin_run, "--out", tmp_path / "eval.json")
    assert code == 0 and "eval/return_mean" in json.loads((tmp_path / "eval.json").read_text()), out
    code, out = rlpipe("export", plugin_run, "--format", "torchscript", "--out", tmp_path / "export")
    assert code == 0 and "max |Δaction| = 0" in out, out


def test_without_the_folder_on_the_path_a_command_says_what_to_do(plugin_run, monkeypatch):
    forget_plugin()
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "site" not in Path(p).name])
    code, out = rlpipe("eval", plugin_run)
    lines = out.strip().splitlines()
    assert code == 2 and len(lines) == 1, out
    # names the key (algorithm.name or policy.name: this process resolved A2C already), the module,
    # and where it is looked for
    assert ".name: cannot import module 'rlpipe_a2c." in lines[0]
    assert lines[0].endswith(
        "never the working directory: install its package or add its folder to PYTHONPATH"
    )
