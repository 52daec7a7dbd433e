"""``algorithm.cfg.symmetry``'s config class (``SymmetryCfg``), without torch.

Loading the params checks only how the mirror function is written: reading params imports no code.
:mod:`rlpipe.algorithms.symmetry` imports it when a command builds the algorithm, and checks it on a
sample batch before training writes anything.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from rlpipe.config.references import check_form
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
    imported from the installed packages and ``PYTHONPATH`` by the commands that build the algorithm
    (``run``, ``collect``, ``replay``, ``update``, ``advantage``); loading params only checks its form."""
    data_augmentation: bool = False
    """Train on every minibatch together with its mirrored copy (old log-probs, advantages, returns and
    values repeated for the copies)."""
    mirror_loss: bool = False
    """Add ``mirror_loss_coef`` × MSE between the policy's mean on mirrored observations and the mirrored
    mean on the observations; off, the loss is still logged (``update/symmetry_loss``)."""
    mirror_loss_coef: float = Field(default=0.0, ge=0)
    """Weight of the mirror loss."""

    @field_validator("function")
    @classmethod
    def _written_as_reference(cls, spec: str) -> str:
        return check_form(spec)
