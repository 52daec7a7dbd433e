"""``algorithm.name`` and ``policy.name`` resolve like ``env.id``: built-in, entry point, ``module:Class``."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from rlpipe.config import ConfigError, describing, load
from rlpipe.config.references import load_target
from rlpipe.config.registry import BUILTIN_ALGORITHMS, BUILTIN_POLICIES, algorithm_names, code_of

PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"
ALGO = """
from pydantic import Field
from rlpipe.algorithms import PPO, PPOCfg

class SlowCfg(PPOCfg):
    slowdown: float = Field(default=1.0, gt=0)
    '''A key only this algorithm has.'''

class Slow(PPO):
    cfg_class = SlowCfg
"""
POLICY = """
from rlpipe.policies import ActorCritic

class Wide(ActorCritic):
    '''An actor-critic of its own.'''
"""
ENTRY_POINTS = """
[rlpipe.algorithms]
Slow = tinypkg.algo:Slow

[rlpipe.policies]
wide = tinypkg.policy:Wide
"""


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """A tiny installed package: its modules and a dist-info announcing two entry points."""
    package = tmp_path / "tinypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "algo.py").write_text(textwrap.dedent(ALGO))
    (package / "policy.py").write_text(textwrap.dedent(POLICY))
    info = tmp_path / "tinypkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.split(".")[0] == "tinypkg"]:
        del sys.modules[name]


def test_an_entry_point_reads_like_a_built_in_name(installed):
    assert "slow" in algorithm_names()
    with describing():  # nothing imported to say what a run needs
        assert code_of("slow", "wide") == {"algorithm": "tinypkg.algo:Slow", "policy": "tinypkg.policy:Wide"}
        assert "tinypkg.algo" not in sys.modules
    cfg = load(PARAMS, ["algorithm.name=SLOW", "algorithm.cfg.slowdown=2", "policy.name=wide"])
    assert type(cfg.algorithm.cfg).__name__ == "SlowCfg" and cfg.algorithm.cfg.model_dump()["slowdown"] == 2
    assert cfg.algorithm.name == "slow" and cfg.algorithm.cfg.learning_rate == 2.0e-3  # the file's keys

    from rlpipe.algorithms import algo_class
    from rlpipe.policies import get_registered_policy_names, policy_class

    assert algo_class("slow").__name__ == "Slow" and policy_class("wide").__name__ == "Wide"
    assert "wide" in get_registered_policy_names()


def test_a_module_class_name_validates_its_own_config(installed):
    with pytest.raises(
        ConfigError, match=r"algorithm\.cfg\.slowdwn: unknown key \(did you mean 'slowdown'\?\)"
    ):
        load(PARAMS, ["algorithm.name=tinypkg.algo:Slow", "algorithm.cfg.slowdwn=2"])
    cfg = load(PARAMS, ["algorithm.name=tinypkg.algo:Slow"])
    assert cfg.algorithm.name == "tinypkg.algo:Slow"  # a module path keeps its case


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "tinypkg.algo:Fast",
            "algorithm.name: module 'tinypkg.algo' has no attribute 'Fast'; define it there",
        ),
        ("tinypkg.nope:Slow", "algorithm.name: cannot import module 'tinypkg.nope' (ModuleNotFoundError"),
        ("tinypkg.algo:SlowCfg", "algorithm.name: tinypkg.algo:SlowCfg is not an algorithm class; accepted:"),
    ],
)
def test_a_missing_module_or_class_is_one_line_naming_the_key_and_module(installed, name, expected):
    with pytest.raises(ConfigError) as info:
        load(PARAMS, [f"algorithm.name={name}"])
    message = str(info.value)
    assert message.startswith(f"{PARAMS}: {expected}") and "\n" not in message


def test_an_unknown_name_lists_every_accepted_name_and_form():
    with pytest.raises(ConfigError) as info:
        load(PARAMS, ["algorithm.name=dqn"])
    accepted = ", ".join(algorithm_names())
    assert str(info.value) == (
        f"{PARAMS}: algorithm.name: unknown algorithm 'dqn'; accepted: {accepted}, an "
        "rlpipe.algorithms entry point or package.module:Class"
    )


def test_the_builtins_take_the_plugin_path_and_their_config_classes_match():
    from rlpipe.algorithms import algo_class
    from rlpipe.policies import policy_class

    for name, builtin in BUILTIN_ALGORITHMS.items():
        assert algo_class(name) is load_target(builtin.algorithm, "k", "f")
        assert algo_class(name).cfg_class is load_target(builtin.config, "k", "f")
    for name, reference in BUILTIN_POLICIES.items():
        assert policy_class(name) is load_target(reference, "k", "f")
