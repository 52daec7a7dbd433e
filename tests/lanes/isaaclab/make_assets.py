"""Offline stand-ins for the two stock assets Isaac-Cartpole loads (the cartpole robot, the ground plane).

    python tests/lanes/isaaclab/make_assets.py ASSET_ROOT      # then ISAACSIM_ASSET_ROOT=ASSET_ROOT

Isaac Lab fetches its robot and ground USD files from the network when a task starts. The cartpole
is taken from a test stage shipped inside the ``isaaclab`` 3.0.0 wheel
(``isaaclab/source/isaaclab_tasks/test/golden_stages/cartpole/``), the ground plane is a plain
collision plane; both are written where ``ISAACSIM_ASSET_ROOT`` makes Isaac Lab look for them.
Runs with the lane's Python (it needs ``pxr`` from Isaac Lab's dependencies); does nothing when
both files exist.
"""

from __future__ import annotations

import sys
from pathlib import Path

CARTPOLE = "Isaac/IsaacLab/Robots/Classic/Cartpole/cartpole.usd"
GROUND = "Isaac/IsaacLab/Environments/Grid/default_ground_plane_checker_v1/default_ground_plane.usda"
GOLDEN = "source/isaaclab_tasks/test/golden_stages/cartpole/newton-isaacsim_rtx_renderer-rgb.usda"
"""The golden stage in the ``isaaclab`` package that holds a cartpole (flattened prototypes + the robot)."""
PROTOTYPES = 6
"""``/Flattened_Prototype_<i>`` prims of the golden stage the robot's instances reference."""


def golden_stage() -> Path:
    """The cartpole test stage shipped in the installed ``isaaclab`` package."""
    import isaaclab

    path = Path(isaaclab.__file__).parent / GOLDEN
    if not path.is_file():
        raise SystemExit(f"make_assets: {path} is missing; expected the isaaclab==3.0.0 wheel's test stages")
    return path


def write_cartpole(golden: Path, target: Path) -> None:
    """``cartpole.usda`` (the robot prim and the prototypes it references) and ``cartpole.usd`` beside it."""
    from pxr import Sdf

    src = Sdf.Layer.FindOrOpen(str(golden))
    target.parent.mkdir(parents=True, exist_ok=True)
    text = Sdf.Layer.CreateNew(str(target.with_suffix(".usda")))
    for key, value in (("upAxis", "Z"), ("metersPerUnit", 1.0), ("kilogramsPerUnit", 1.0)):
        text.pseudoRoot.SetInfo(key, value)
    for i in range(1, PROTOTYPES + 1):
        prim = f"/Flattened_Prototype_{i}"
        Sdf.CreatePrimInLayer(text, prim)  # the golden stage's 'over' specs, loadable as reference targets
        if not Sdf.CopySpec(src, prim, text, prim):
            raise SystemExit(f"make_assets: {golden} has no {prim}")
    Sdf.CreatePrimInLayer(text, "/cartpole")
    if not Sdf.CopySpec(src, "/World/envs/env_0/Robot", text, "/cartpole"):
        raise SystemExit(f"make_assets: {golden} has no /World/envs/env_0/Robot")
    text.defaultPrim = "cartpole"
    text.Save()
    usd = Sdf.Layer.CreateNew(str(target), args={"format": "usda"})  # the task's config names cartpole.usd
    usd.pseudoRoot.SetInfo("upAxis", "Z")
    usd.pseudoRoot.SetInfo("metersPerUnit", 1.0)
    usd.TransferContent(text)
    usd.Save()


def write_ground(target: Path) -> None:
    """A 100 m × 100 m collision plane at z = 0 (the stock one is a textured grid)."""
    from pxr import Usd, UsdGeom, UsdPhysics

    target.parent.mkdir(parents=True, exist_ok=True)
    stage = Usd.Stage.CreateNew(str(target))
    UsdGeom.SetStageUpAxis(stage, "Z")
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    root = UsdGeom.Xform.Define(stage, "/GroundPlane")
    stage.SetDefaultPrim(root.GetPrim())
    plane = UsdGeom.Plane.Define(stage, "/GroundPlane/CollisionPlane")
    plane.CreateAxisAttr("Z")
    plane.CreateWidthAttr(100.0)
    plane.CreateLengthAttr(100.0)
    UsdPhysics.CollisionAPI.Apply(plane.GetPrim())
    stage.Save()


def main(root: Path) -> None:
    """Write both assets under ``root`` unless they are there."""
    cartpole, ground = root / CARTPOLE, root / GROUND
    if not cartpole.is_file():
        write_cartpole(golden_stage(), cartpole)
    if not ground.is_file():
        write_ground(ground)
    print(f"assets: {cartpole}, {ground}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: make_assets.py ASSET_ROOT")
    main(Path(sys.argv[1]))
