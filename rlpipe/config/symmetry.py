"""``algorithm.cfg.symmetry``'s config class (``SymmetryCfg``), without torch.

The mirror function is imported when the params are loaded, so a wrong ``package.module:function``
is a one-line error before training starts; :mod:`rlpipe.algorithms.symmetry` applies it.
"""

from __future__ import annotations

import importlib

from pydantic import Field, field_validator

from rlpipe.config.strict import StrictModel

__all__ = ["SymmetryCfg"]


class SymmetryCfg(StrictModel):
    """``algorithm.cfg.symmetry``: mirrored data and/or a mirror loss (rsl_rl's symmetry, Mittal et al. 2024).

    ``function(obs=..., actions=..., env=None)`` returns ``(obs, actions)`` with the originals first and
    their mirrored copies after them (``[K·B, ...]``); either input may be ``None``, and then so is its
    output. The update runs without an env (also offline, on stored rollouts), so ``env`` is ``None``.
    """

    function: str
    """``package.module:function`` of the mirror (e.g. ``rlpipe.envs.tasks.symmetry:pendulum_mirror``);
    imported when the params are loaded."""
    data_augmentation: bool = False
    """Train on every minibatch together with its mirrored copy (old log-probs, advantages, returns and
    values repeated for the copies)."""
    mirror_loss: bool = False
    """Add ``mirror_loss_coef`` × MSE between the policy's mean on mirrored observations and the mirrored
    mean on the observations; off, the loss is still logged (``update/symmetry_loss``)."""
    mirror_loss_coef: float = Field(0.0, ge=0)
    """Weight of the mirror loss."""

    @field_validator("function")
    @classmethod
    def _importable(cls, spec: str) -> str:
        module_name, sep, attr = spec.partition(":")
        if not (sep and module_name and attr):
            raise ValueError(f"expected package.module:function (got {spec!r})")
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise ValueError(f"cannot import {module_name!r} ({type(exc).__name__}: {exc})") from None
        if not callable(getattr(module, attr, None)):
            raise ValueError(f"{spec!r} is not a function; accepted: package.module:function")
        return spec
