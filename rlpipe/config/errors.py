"""Config errors: the one-line ``ConfigError`` and pydantic reports turned into it."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any, LiteralString, TypeGuard, cast

from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from rlpipe.errors import ConfigError

__all__ = [
    "ConfigError",
    "as_yaml",
    "did_you_mean",
    "field_model",
    "format_validation_error",
    "located_error",
    "register_model",
    "unknown_key",
]

_MODELS: dict[str, type[BaseModel]] = {}  # config class name (pydantic's error title) → the class


def format_validation_error(exc: ValidationError, prefix: str = "") -> str:
    """Turn pydantic's report into one line: ``key.path: what is wrong (got X)``."""
    err = exc.errors()[0]
    path = ".".join(str(p) for p in (prefix.split(".") if prefix else []) + list(err["loc"]))
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        return f"{path}: {unknown_key(_model_at(exc.title, err['loc'][:-1]), str(err['loc'][-1]))}"
    got = err.get("input")
    quiet = (
        err["type"] == "missing"
        or isinstance(got, dict)
        or "got " in msg
        or (isinstance(got, str) and (repr(got) in msg or msg.startswith(got)))
    )
    shown = "" if quiet else f" (got {as_yaml(got)})"
    extra = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{path}: {msg}{shown}{extra}"


def as_yaml(value: object) -> str:
    """``value`` as the params file spells it: ``true``, ``null``, ``[64, true]``; strings quoted."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, list | tuple):
        return f"[{', '.join(as_yaml(item) for item in value)}]"
    if isinstance(value, dict):
        return f"{{{', '.join(f'{key}: {as_yaml(item)}' for key, item in value.items())}}}"
    return repr(value)


def unknown_key(model: type[BaseModel] | None, key: str) -> str:
    """``unknown key (did you mean 'x'?); accepted: a, b`` for ``key`` in ``model`` (no list without one)."""
    accepted = list(model.model_fields) if model is not None else []
    if not accepted:
        return "unknown key"
    return f"unknown key{did_you_mean(key, accepted)}; accepted: {', '.join(accepted)}"


def located_error(title: str, problems: Sequence[tuple[tuple[int | str, ...], str, Any]]) -> ValidationError:
    """A ``ValidationError`` of ``(loc, message, input)`` problems.

    Raised inside a validator, pydantic prefixes each ``loc`` with the field's own, so the message
    names the exact key path.
    """
    details = [
        InitErrorDetails(
            type=PydanticCustomError("value_error", cast(LiteralString, message)), loc=loc, input=value
        )
        for loc, message, value in problems
    ]
    return ValidationError.from_exception_data(title, details)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'iterations'?)"`` for the closest of ``choices`` (difflib), else ``""``."""
    choices = list(choices)
    by_lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.75)
    return f" (did you mean {by_lower[close[0]]!r}?)" if close else ""


def register_model(model: type[BaseModel]) -> None:
    """Make a config class findable by its name, the title of its validation errors (first one wins)."""
    _MODELS.setdefault(model.__name__, model)


def _model_at(model_name: str, parent: tuple[Any, ...]) -> type[BaseModel] | None:
    """The config class named ``model_name``, then the model of each field along ``parent``."""
    return field_model(_MODELS.get(model_name), parent)


def field_model(model: type[BaseModel] | None, parent: Sequence[Any]) -> type[BaseModel] | None:
    """The model of the field at ``parent`` below ``model`` (``None`` where it is not a model)."""
    for part in parent:
        if model is None:
            break
        if isinstance(part, int):  # an item of a list field: the model is the item's
            continue
        field = model.model_fields.get(str(part))
        annotation = field.annotation if field else None
        model = next((a for a in (annotation, *getattr(annotation, "__args__", ())) if _is_model(a)), None)
    return model


def _is_model(obj: object) -> TypeGuard[type[BaseModel]]:
    return isinstance(obj, type) and issubclass(obj, BaseModel)


def fail(model: str, loc: tuple[str, ...], message: str) -> None:
    """Raise a validation error located at ``loc`` (so the message names ``algorithm.cfg.<loc>``)."""
    raise located_error(model, [(loc, message, {})])
