"""The rendering contract: ``BatchedEnv.render(env_ids)`` → RGB frames, or ``RenderUnavailable``.

``render(env_ids)`` returns ``[k, H, W, 3]`` uint8 frames (a torch tensor on any device, or a numpy
array) of the envs ``env_ids`` (k = ``len(env_ids)``) in their current state. It is called only by
the eval stage when videos are on, never while collecting, so it may be slow and sync with the host.

An env that cannot draw raises :class:`RenderUnavailable` with a one-line reason; the eval video
recorder (:mod:`rlpipe.artifacts.video`) turns it into one warning line and the evaluation carries
on without video. OpenGL-backed renderers (MuJoCo) say
which variable to set via :func:`gl_unavailable`.
"""

from __future__ import annotations

import os

__all__ = ["GL_HINT", "RenderUnavailable", "gl_errors", "gl_unavailable"]

GL_HINT = "set MUJOCO_GL=egl (or MUJOCO_GL=osmesa) for headless offscreen rendering"
"""What a user without a working OpenGL context should do."""


class RenderUnavailable(NotImplementedError):
    """An env cannot produce frames here; the message is one line saying why (and what to set)."""


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
