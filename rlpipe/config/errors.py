"""Config errors: the one-line ``ConfigError`` and pydantic reports turned into it."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ValidationError

__all__ = ["ConfigError", "did_you_mean", "format_validation_error"]


class ConfigError(ValueError):
    """A user-facing config problem; its message is one line naming the key path."""


def format_validation_error(exc: ValidationError, prefix: str = "") -> str:
    """Turn pydantic's report into one line: ``key.path: what is wrong (got X)``."""
    err = exc.errors()[0]
    path = ".".join(str(p) for p in (prefix.split(".") if prefix else []) + list(err["loc"]))
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        accepted = _accepted_keys(exc.title, err["loc"][:-1])
        if not accepted:
            return f"{path}: unknown key"
        guess = did_you_mean(str(err["loc"][-1]), accepted)
        return f"{path}: unknown key{guess}; accepted: {', '.join(accepted)}"
    got = err.get("input")
    quiet = err["type"] == "missing" or isinstance(got, dict) or "got " in msg
    shown = "" if quiet else f" (got {got!r})"
    extra = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{path}: {msg}{shown}{extra}"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'iterations'?)"`` for the closest of ``choices`` (difflib), else ``""``."""
    choices = list(choices)
    by_lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.75)
    return f" (did you mean {by_lower[close[0]]!r}?)" if close else ""


def _accepted_keys(model_name: str, parent: tuple[Any, ...]) -> list[str]:
    from rlpipe.config import algorithms, sections  # the classes import this module

    found = getattr(sections, model_name, None) or getattr(algorithms, model_name, None)
    model: type[BaseModel] | None = found if _is_model(found) else None
    for part in parent:
        if model is None:
            break
        field = model.model_fields.get(str(part))
        annotation = field.annotation if field else None
        model = next(
            (a for a in (annotation, *getattr(annotation, "__args__", ())) if _is_model(a)), None
        )
    return list(model.model_fields) if model else []


def _is_model(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, BaseModel)
