"""Reading params files: YAML aliases are bounded before any value is built."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from rlpipe.config import ConfigError, load
from rlpipe.config.loading import parse_yaml

MAX_YAML_VALUES = 100_000


def _laughs(levels: int) -> str:
    """A "billion laughs" document: each level an anchor of nine aliases of the one before (9**levels)."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(
        [
            *lines,
            f"trainer: {{num_envs: *l{levels - 1}}}",
            "env: {}",
            "policy: {}",
            "algorithm: {name: ppo}",
            "",
        ]
    )


def test_alias_bomb_is_refused_at_load_in_bounded_memory_and_time(tmp_path):
    """Nine levels expand to 387M strings: refused in one line before a copy, under a 1 GiB address cap."""
    path = tmp_path / "laughs.yaml"
    path.write_text(_laughs(9))
    script = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from rlpipe.config import ConfigError, load
        try:
            load({str(path)!r})
        except ConfigError as exc:
            print(exc)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-500:]
    # the first anchor over the bound is named: level 5 (line 6) holds 9**6 > 100,000 values
    assert done.stdout.strip() == (
        f"{path}:6: YAML aliases expand to more than {MAX_YAML_VALUES} values; "
        "write the values out or use fewer aliases"
    )


def test_recursive_alias_is_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("a: &a [1, *a]\ntrainer: {}\nenv: {}\npolicy: {}\nalgorithm: {}\n")
    with pytest.raises(ConfigError, match=r"loop.yaml:1: an alias refers to its own anchor"):
        load(path)


def test_set_value_with_an_alias_bomb_names_the_key():
    bomb = (
        "["
        + ", ".join(f"&l{i} [" + ", ".join([f"*l{i - 1}" if i else "1"] * 10) + "]" for i in range(6))
        + "]"
    )
    with pytest.raises(ConfigError, match=r"^--set trainer.num_envs: YAML aliases expand to more than"):
        load("params.yaml", [f"trainer.num_envs={bomb}"])


def test_small_anchors_still_load():
    data = parse_yaml(
        "base: &net {hidden_sizes: [64, 64]}\nactor: *net\ncritic: {<<: *net, activation: relu}\n"
    )
    assert data["actor"] == {"hidden_sizes": [64, 64]}
    assert data["critic"] == {"hidden_sizes": [64, 64], "activation": "relu"}
