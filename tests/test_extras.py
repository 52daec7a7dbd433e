"""rlpipe.extras: the one helper every optional import goes through, and its table of extras."""

from __future__ import annotations

import importlib
import re
import sys
import tomllib
from pathlib import Path

import pytest

from rlpipe.config import ConfigError
from rlpipe.extras import EXTRAS, install_hint, is_installed, require

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def requirement_names(requirements: list[str], extras: dict[str, list[str]]) -> set[str]:
    """Distribution names of ``requirements``, ``rlpipe[a,b]`` expanded through ``extras``."""
    names: set[str] = set()
    for requirement in requirements:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower()
        if name == "rlpipe":
            inner = requirement[requirement.index("[") + 1 : requirement.index("]")].split(",")
            names |= set().union(*(requirement_names(extras[e.strip()], extras) for e in inner))
        else:
            names.add(name)
    return names


def test_the_line_names_the_feature_the_package_and_the_extra(monkeypatch):
    assert install_hint("envpool", "env.id: HalfCheetah-v5") == (
        "env.id: HalfCheetah-v5 needs envpool: pip install 'rlpipe[envpool]'"
    )
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ConfigError) as info:
        require("onnx", "--format onnx")
    assert str(info.value) == "--format onnx needs onnx: pip install 'rlpipe[export]'"
    assert not is_installed("onnx")


def test_an_installed_package_is_returned(monkeypatch):
    fake = type(sys)("imageio_ffmpeg")
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", fake)
    assert require("imageio_ffmpeg", "eval.video") is fake and is_installed("imageio_ffmpeg")


def test_an_installed_package_that_fails_to_import_is_not_called_missing(monkeypatch):
    def broken(name: str):
        raise ImportError("libGL.so.1: cannot open shared object file", name=f"{name}._render")

    monkeypatch.setattr(importlib, "import_module", broken)
    with pytest.raises(
        ConfigError,
        match=r"^env.id: PushCube needs mujoco, which is installed but does not "
        r"import \(libGL.so.1: cannot open shared object file\)$",
    ):
        require("mujoco", "env.id: PushCube")


def test_the_table_matches_pyprojects_extras_and_the_core_has_none_of_them():
    extras = PROJECT["optional-dependencies"]
    core = requirement_names(PROJECT["dependencies"], extras)
    for module, (distribution, extra) in EXTRAS.items():
        assert distribution in requirement_names(extras[extra], extras), (module, extra)
        assert distribution not in core, module
    own_venv = ("mjlab",)  # pins MuJoCo 3.11 against the default venv's MuJoCo 4: not in `all`
    features = [reqs for name, reqs in extras.items() if name not in ("all", "test", "docs", *own_venv)]
    every_feature = set().union(*(requirement_names(reqs, extras) for reqs in features))
    assert requirement_names(extras["all"], extras) == every_feature
