"""Strict scalar types for every config field: no bool for a number, no string for a number or a bool.

pydantic's lax mode turns ``true`` into 1, ``"7"`` into 7 and ``"yes"`` into ``True``; its strict mode
also refuses a YAML list for a tuple field. This check sits in between: it refuses exactly the
coercions between ``bool``, numbers and strings, walking unions, lists and tuples, and leaves
everything else (an int for a float, a list for a tuple, nested models) to pydantic.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

__all__ = ["coercion_problem"]

_NUMBER = (int, float)


def coercion_problem(annotation: Any, value: Any) -> str | None:
    """Why ``value`` would fit ``annotation`` only by coercion (one sentence), else ``None``."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return coercion_problem(get_args(annotation)[0], value)
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        problems = [coercion_problem(arm, value) for arm in get_args(annotation) if arm is not type(None)]
        return None if any(p is None for p in problems) else next(p for p in problems if p)
    if origin is Literal or annotation is Any:
        return None
    if origin in (list, tuple, set, frozenset) and isinstance(value, list | tuple):
        return _sequence_problem(origin, get_args(annotation), value)
    return _scalar_problem(annotation, value)


def _sequence_problem(origin: Any, args: tuple[Any, ...], value: list[Any] | tuple[Any, ...]) -> str | None:
    if not args:
        return None
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        pairs = zip(args, value)
    else:
        pairs = ((args[0], item) for item in value)
    return next((p for arm, item in pairs if (p := coercion_problem(arm, item))), None)


def _scalar_problem(annotation: Any, value: Any) -> str | None:
    if annotation in _NUMBER:
        kind = "a valid integer" if annotation is int else "a valid number"
        if isinstance(value, bool):
            return f"Input should be {kind}, not true/false"
        if isinstance(value, str):
            return f"Input should be {kind}, not a string (write it without quotes)"
    if annotation is bool and not isinstance(value, bool) and isinstance(value, str | int | float):
        return "Input should be true or false"
    return None
