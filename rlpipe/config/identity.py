"""What names and seeds a run: the rules for ``exp_name`` (a folder name) and for seeds (a range)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

from rlpipe.config.errors import ConfigError

__all__ = ["MAX_EXP_NAME", "SEED_RANGE", "Seed", "check_exp_name", "exp_name_problem", "seed_problem"]

MAX_EXP_NAME = 200
"""Most characters of an experiment name (a folder name; file systems allow 255 bytes)."""
SEED_RANGE = (0, 2**31 - 1)
"""Seeds every backend takes: python, numpy, torch, gymnasium (non-negative) and envpool (int32)."""
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+=@-]*")


def exp_name_problem(value: str) -> str | None:
    """Why ``value`` is no experiment name (one sentence stating the rule), else ``None``.

    An experiment name is a plain folder name: letters, digits and ``._-+=@``, not starting with
    ``.``, ``-`` …, at most :data:`MAX_EXP_NAME` characters. Names derived from another (a student's
    ``<teacher>-student``) are checked with the same rule.
    """
    if len(value) > MAX_EXP_NAME:
        return (
            f"got a name of {len(value)} characters ({value[:40]!r}…); at most {MAX_EXP_NAME} are "
            "accepted (a plain folder name)"
        )
    if not _PLAIN_NAME.fullmatch(value) or value in {".", ".."}:
        return (
            f"got {value!r}; a plain folder name of at most {MAX_EXP_NAME} characters (letters, "
            "digits, ._-+=@), not a path"
        )
    return None


def check_exp_name(value: str, key: str = "trainer.exp_name") -> str:
    """``value`` if it is an experiment name, else a :class:`ConfigError` naming ``key`` and the rule."""
    problem = exp_name_problem(value)
    if problem:
        raise ConfigError(f"{key}: {problem}")
    return value


def seed_problem(value: int) -> str | None:
    """Why ``value`` is no seed (stating :data:`SEED_RANGE`), else ``None``."""
    low, high = SEED_RANGE
    if not low <= value <= high:
        shown = str(value) if len(str(value)) <= 24 else f"{str(value)[:20]}… ({len(str(value))} digits)"
        return f"got {shown}; accepted: an integer from {low} to {high} (2**31 - 1)"
    return None


def _valid_seed(value: int) -> int:
    problem = seed_problem(value)
    if problem:
        raise ValueError(problem)
    return value


Seed = Annotated[int, AfterValidator(_valid_seed)]
"""A seed within :data:`SEED_RANGE`."""
