"""Type stub for the part of ``mujoco`` that rlpipe uses.

mujoco's bindings are compiled (pybind11) modules without stubs, so a type checker sees none of
``MjModel``, the ``mj_*`` functions or the ``mjt*`` enums. This stub declares the names rlpipe calls:
the functions with the signatures their docstrings give, the structs as classes whose fields are not
spelled out (``__getattr__``), the enums with the members rlpipe reads. A name missing here is a
finding in rlpipe: a new use adds its line here. The pure-Python submodules are the package's own.
"""

from typing import Any, ClassVar, SupportsIndex, SupportsInt

import numpy as np
import numpy.typing as npt
from _typeshed import Incomplete
from mujoco import rollout as rollout

# ``mujoco.gl_context`` re-exports this module (a stub package cannot see the wrapper's star import).
from mujoco.rendering.classic import gl_context as gl_context
from mujoco.rendering.classic.renderer import Renderer as Renderer

_Int = SupportsInt | SupportsIndex

class FatalError(Exception): ...

class _Struct:
    """A compiled struct: its fields are not declared here."""

    def __getattr__(self, name: str) -> Incomplete: ...
    def __setattr__(self, name: str, value: Any) -> None: ...

class MjModel(_Struct): ...

class MjData(_Struct):
    def __init__(self, model: MjModel) -> None: ...

class MjsBody(_Struct): ...

class MjSpec(_Struct):
    def __init__(self) -> None: ...
    @staticmethod
    def from_file(filename: str, include: Any = None, assets: Any = None, vfs: Any = None) -> MjSpec: ...
    def compile(self) -> MjModel: ...

class MjvCamera(_Struct):
    def __init__(self) -> None: ...

class MjvOption(_Struct):
    def __init__(self) -> None: ...

class MjvPerturb(_Struct):
    def __init__(self) -> None: ...

class MjvScene(_Struct):
    def __init__(self, model: MjModel, maxgeom: _Int) -> None: ...

class MjrRect(_Struct):
    def __init__(self, left: _Int, bottom: _Int, width: _Int, height: _Int) -> None: ...

class MjrContext(_Struct):
    def __init__(self, model: MjModel, fontscale: _Int) -> None: ...

class _Enum:
    """A compiled enum: members are instances, ``value`` their integer."""

    def __init__(self, value: _Int) -> None: ...
    @property
    def value(self) -> int: ...
    def __int__(self) -> int: ...
    def __index__(self) -> int: ...

class mjtCamera(_Enum):
    mjCAMERA_FREE: ClassVar[mjtCamera]
    mjCAMERA_FIXED: ClassVar[mjtCamera]

class mjtCatBit(_Enum):
    mjCAT_ALL: ClassVar[mjtCatBit]

class mjtFontScale(_Enum):
    mjFONTSCALE_100: ClassVar[mjtFontScale]

class mjtFramebuffer(_Enum):
    mjFB_OFFSCREEN: ClassVar[mjtFramebuffer]

class mjtGeom(_Enum):
    mjGEOM_PLANE: ClassVar[mjtGeom]
    mjGEOM_CYLINDER: ClassVar[mjtGeom]
    mjGEOM_BOX: ClassVar[mjtGeom]
    mjGEOM_MESH: ClassVar[mjtGeom]

class mjtIntegrator(_Enum):
    mjINT_IMPLICITFAST: ClassVar[mjtIntegrator]

class mjtJoint(_Enum):
    mjJNT_HINGE: ClassVar[mjtJoint]

class mjtLightType(_Enum):
    mjLIGHT_DIRECTIONAL: ClassVar[mjtLightType]

class mjtObj(_Enum):
    mjOBJ_BODY: ClassVar[mjtObj]

class mjtRndFlag(_Enum):
    mjRND_SHADOW: ClassVar[mjtRndFlag]
    mjRND_REFLECTION: ClassVar[mjtRndFlag]
    mjRND_SKYBOX: ClassVar[mjtRndFlag]
    mjRND_HAZE: ClassVar[mjtRndFlag]

class mjtSensor(_Enum):
    mjSENS_CONTACT: ClassVar[mjtSensor]

class mjtState(_Enum):
    mjSTATE_TIME: ClassVar[mjtState]
    mjSTATE_QPOS: ClassVar[mjtState]
    mjSTATE_QVEL: ClassVar[mjtState]
    mjSTATE_FULLPHYSICS: ClassVar[mjtState]
    mjNSTATE: ClassVar[mjtState]

def mj_kinematics(m: MjModel, d: MjData) -> None: ...
def mj_camlight(m: MjModel, d: MjData) -> None: ...
def mj_stateSize(m: MjModel, sig: _Int) -> int: ...
def mj_getState(m: MjModel, d: MjData, state: npt.NDArray[np.float64], sig: _Int) -> None: ...
def mju_quat2Mat(res: npt.NDArray[np.float64], quat: npt.NDArray[np.float64]) -> None: ...
def mjv_updateScene(
    m: MjModel,
    d: MjData,
    opt: MjvOption,
    pert: MjvPerturb | None,
    cam: MjvCamera,
    catmask: _Int,
    scn: MjvScene,
) -> None: ...
def mjr_render(viewport: MjrRect, scn: MjvScene, con: MjrContext) -> None: ...
def mjr_readPixels(
    rgb: npt.ArrayLike | None, depth: npt.ArrayLike | None, viewport: MjrRect, con: MjrContext
) -> None: ...
def mjr_setBuffer(framebuffer: _Int, con: MjrContext) -> None: ...
