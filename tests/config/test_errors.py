"""Errors that help: "did you mean" for key typos, YAML/JSON errors with line and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlpipe.config import ConfigError, load
from rlpipe.config.errors import did_you_mean

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def params_file():
    return ROOT / "params.yaml"


@pytest.mark.parametrize(
    "override, expected",
    [
        (
            "trainer.iteratons=3",
            "trainer.iteratons: unknown key (did you mean 'iterations'?); accepted: exp_name",
        ),
        ("traner.seed=3", "traner: unknown key (did you mean 'trainer'?); accepted: trainer, env"),
        (
            "algorithm.cfg.clip_coeff=0.1",
            "algorithm.cfg.clip_coeff: unknown key (did you mean 'clip_coef'?); accepted:",
        ),
        (
            "policy.actor.network_cfgs={}",
            "policy.actor.network_cfgs: unknown key (did you mean 'network_cfg'?)",
        ),
    ],
)
def test_a_key_typo_names_the_closest_key(params_file, override, expected):
    with pytest.raises(ConfigError, match=r"^\S+params\.yaml: ") as info:
        load(params_file, [override])
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_no_guess_when_nothing_is_close(params_file):
    with pytest.raises(ConfigError) as info:
        load(params_file, ["trainer.zzz=1"])
    assert "trainer.zzz: unknown key; accepted: exp_name" in str(info.value)


def test_did_you_mean_ignores_case_and_returns_the_real_spelling():
    assert did_you_mean("cartpole", ["CartPole", "Pendulum"]) == " (did you mean 'CartPole'?)"
    assert did_you_mean("xyz", ["CartPole"]) == ""


def test_yaml_error_names_line_and_column(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("trainer:\n  seed: 1\n   num_envs: 3\n")
    with pytest.raises(ConfigError) as info:
        load(path)
    assert str(info.value) == f"{path}:3:12: not valid YAML (mapping values are not allowed here)"


def test_yaml_flow_error_names_line_and_context(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("env: {id: CartPole}\ntrainer: {seed: [1, 2}\n")
    with pytest.raises(
        ConfigError, match=rf"^{path}:2:\d+: not valid YAML \(expected ',' or ']'.*flow sequence\)$"
    ):
        load(path)


def test_json_error_names_line_and_column(tmp_path):
    path = tmp_path / "train_config.json"
    path.write_text('{\n  "trainer": {"seed": 1,}\n}\n')
    with pytest.raises(ConfigError) as info:
        load(path)
    expected = f"{path}:2:25: not valid JSON (Expecting property name enclosed in double quotes)"
    assert str(info.value) == expected
