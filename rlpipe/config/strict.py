"""``StrictModel``, the base of every config class: no unknown keys, no coercion of bool/number/str.

pydantic's lax mode turns ``true`` into 1, ``"7"`` into 7 and ``"yes"`` into ``True``; its strict mode
also refuses a YAML list for a tuple field. This check sits in between: it refuses exactly the
coercions between ``bool``, numbers and strings, walking unions, lists, tuples and dicts, and leaves
everything else (an int for a float, a list for a tuple, nested models) to pydantic. A problem
carries its location inside the value (``(1,)`` for the second item of a list), so the error names
the exact key path: ``policy.actor.network_cfg.hidden_sizes.1``.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Literal, Self, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from rlpipe.config.errors import ConfigError, format_validation_error, located_error, register_model

__all__ = ["Problem", "StrictModel", "coercion_problem"]

_NUMBER = (int, float)
Problem = tuple[tuple[int | str, ...], str]
"""``(location inside the value, one sentence)``."""


def coercion_problem(annotation: object, value: object) -> Problem | None:
    """Where and why ``value`` would fit ``annotation`` only by coercion, else ``None``."""
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
    if origin is dict and isinstance(value, dict) and len(get_args(annotation)) == 2:
        for key, item in value.items():
            problem = coercion_problem(get_args(annotation)[1], item)
            if problem:
                return (key, *problem[0]), problem[1]
        return None
    problem = _scalar_problem(annotation, value)
    return ((), problem) if problem else None


def _sequence_problem(
    origin: object, args: tuple[object, ...], value: list[object] | tuple[object, ...]
) -> Problem | None:
    if not args:
        return None
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        pairs = zip(args, value)
    else:
        pairs = ((args[0], item) for item in value)
    for index, (arm, item) in enumerate(pairs):
        problem = coercion_problem(arm, item)
        if problem:
            return (index, *problem[0]), problem[1]
    return None


def _scalar_problem(annotation: object, value: object) -> str | None:
    if annotation in _NUMBER:
        kind = "a valid integer" if annotation is int else "a valid number"
        if isinstance(value, bool):
            return f"Input should be {kind}, not true/false"
        if isinstance(value, str):
            return f"Input should be {kind}, not a string (write it without quotes)"
    if annotation is bool and not isinstance(value, bool) and isinstance(value, str | int | float):
        return "Input should be true or false"
    return None


class StrictModel(BaseModel):
    """Base of every config class: unknown keys are errors, fields carry docstrings, floats are finite.

    ``allow_inf_nan=False`` makes every ``float`` field of every config class (and of every class a
    plugin registers) refuse ``.inf``, ``-.inf`` and ``.nan`` at load, naming the key, instead of
    failing at the first update. Free-form blocks (``env.cfg``, ``params`` of events) are ``Any``
    and left to their consumers.
    """

    model_config = ConfigDict(
        extra="forbid",
        use_attribute_docstrings=True,
        validate_assignment=True,
        frozen=False,
        allow_inf_nan=False,
    )

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: object) -> None:
        """Register each config class so an unknown-key error can list the keys it accepts."""
        super().__pydantic_init_subclass__(**kwargs)
        register_model(cls)

    @field_validator("*", mode="before")
    @classmethod
    def _no_coercion(cls, value: object, info: ValidationInfo) -> object:
        """No bool for a number, no ``"7"`` for 7 or ``"yes"`` for true (an int still fits a float)."""
        field = cls.model_fields.get(info.field_name or "")
        problem = coercion_problem(field.annotation, value) if field else None
        if problem:
            loc, message = problem
            raise located_error(cls.__name__, [(loc, message, _item(value, loc))])
        return value

    def replace(self, **changes: object) -> Self:
        """Return a validated copy with ``changes`` applied."""
        return type(self).model_validate({**self.model_dump(), **changes})

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict, as written to ``params.yaml`` and logged as run params."""
        return self.model_dump(mode="json")

    def validate(self, prefix: str = "") -> list[str]:  # type: ignore[override]  # seed API name
        """Return missing-field paths; pydantic already enforces types."""
        return [f"{prefix}{name}" for name, value in self if value is None and self._required(name)]

    @classmethod
    def _required(cls, name: str) -> bool:
        return cls.model_fields[name].is_required()

    @classmethod
    def from_dict(cls, data: dict[str, Any], path: str = "") -> Self:
        """Validate ``data``; raise :class:`ConfigError` naming ``path.key`` on failure."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(format_validation_error(exc, path)) from None


def _item(value: Any, loc: tuple[int | str, ...]) -> Any:
    for part in loc:
        value = value[part]
    return value
