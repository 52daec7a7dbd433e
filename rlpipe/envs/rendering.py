"""The rendering contract: ``BatchedEnv.render(env_ids)`` → RGB frames, or ``RenderUnavailable``.

``render(env_ids)`` returns ``[k, H, W, 3]`` uint8 frames (a torch tensor on any device, or a numpy
array) of the envs ``env_ids`` (k = ``len(env_ids)``) in their current state. It is called only by
the eval stage when videos are on, never while collecting, so it may be slow and sync with the host.

An env that cannot draw raises :class:`RenderUnavailable` with a one-line reason; the evaluator
turns it into one warning line and carries on without video. OpenGL-backed renderers (MuJoCo) say
which variable to set via :func:`gl_unavailable`.
"""

from __future__ import annotations

import os

import numpy as np
import torch

__all__ = ["GL_HINT", "RenderUnavailable", "as_frames", "gl_errors", "gl_unavailable"]

GL_HINT = "set MUJOCO_GL=egl (or MUJOCO_GL=osmesa) for headless offscreen rendering"
"""What a user without a working OpenGL context should do."""


class RenderUnavailable(NotImplementedError):
    """This env cannot produce frames here; the message is one line saying why (and what to set)."""


def gl_errors() -> tuple[type[BaseException], ...]:
    """Exception types an OpenGL context failure surfaces as (PyOpenGL, ctypes, MuJoCo's FatalError)."""
    errors: tuple[type[BaseException], ...] = (ImportError, RuntimeError, AttributeError, OSError)
    try:
        import mujoco
    except ImportError:
        return errors
    return (*errors, mujoco.FatalError)


def gl_unavailable(what: str, exc: BaseException) -> RenderUnavailable:
    """A :class:`RenderUnavailable` for an OpenGL failure of ``what``, naming ``MUJOCO_GL`` to set."""
    detail = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
    current = os.environ.get("MUJOCO_GL")
    now = f"MUJOCO_GL={current}" if current else "MUJOCO_GL unset"
    return RenderUnavailable(f"{what}: no working OpenGL ({now}: {detail}); {GL_HINT}")


def as_frames(frames: torch.Tensor | np.ndarray, count: int) -> np.ndarray:
    """Check a ``render`` result and return it as a host ``[k, H, W, 3]`` uint8 array."""
    array = frames.detach().cpu().numpy() if isinstance(frames, torch.Tensor) else np.asarray(frames)
    if array.dtype != np.uint8 or array.ndim != 4 or array.shape[0] != count or array.shape[3] != 3:
        raise ValueError(f"render returned {array.dtype} {array.shape}; expected uint8 [{count}, H, W, 3]")
    return array
