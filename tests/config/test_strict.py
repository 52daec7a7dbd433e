"""The base of every config class: every float field refuses non-finite values at load."""

from __future__ import annotations

import math
import types
from typing import Annotated, Union, get_args, get_origin

import pytest

import rlpipe.algorithms  # noqa: F401  # registers every algorithm's config class
from rlpipe.config import ConfigError, load
from rlpipe.config.strict import StrictModel


def _config_classes(base: type[StrictModel] = StrictModel) -> list[type[StrictModel]]:
    subs = base.__subclasses__()
    return [*subs, *(cls for sub in subs for cls in _config_classes(sub))]


def _takes_float(annotation: object) -> bool:
    origin = get_origin(annotation)
    if origin is Annotated:
        return _takes_float(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return any(_takes_float(arm) for arm in get_args(annotation))
    return annotation is float


FLOAT_FIELDS = sorted(
    {
        (cls.__name__, name, cls)
        for cls in _config_classes()
        for name, field in cls.model_fields.items()
        if _takes_float(field.annotation)
    },
    key=lambda item: item[:2],
)


def test_there_are_float_fields_to_check():
    names = {name for _, name, _ in FLOAT_FIELDS}
    assert {"learning_rate", "ent_coef", "vf_coef", "min", "log_std_init"} <= names


@pytest.mark.parametrize(("owner", "name", "cls"), FLOAT_FIELDS, ids=[f"{o}.{n}" for o, n, _ in FLOAT_FIELDS])
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_every_float_field_refuses_non_finite_values(owner, name, cls, value):
    try:
        cls.model_validate({name: value})
    except Exception as exc:  # pydantic's ValidationError: one entry per problem
        problems = [(e["loc"], e["type"]) for e in exc.errors()]
    else:
        problems = []
    # a union with a literal (``float | Literal["auto"]``) reports it under its float arm
    assert any(loc in ((name,), (name, "float")) and kind == "finite_number" for loc, kind in problems), (
        f"{owner}.{name} accepted {value}"
    )


@pytest.mark.parametrize(
    "key", ["algorithm.cfg.learning_rate", "algorithm.cfg.ent_coef", "algorithm.cfg.vf_coef"]
)
def test_inf_coefficients_are_refused_naming_the_key(key):
    with pytest.raises(ConfigError) as info:
        load("params.yaml", [f"{key}=.inf"])
    assert str(info.value) == f"params.yaml: {key}: Input should be a finite number (got inf)"
