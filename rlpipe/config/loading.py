"""Reading a params file: YAML or the JSON train-config format, ``--set`` overrides, one-line errors.

``load(path, overrides)`` reads ``params.yaml`` (or a JSON ``train_config.json``), applies
``--set a.b.c=VALUE`` overrides (VALUE parsed as YAML, like ``dvc exp run -S``) and validates
every section. Any user mistake becomes a :class:`ConfigError` whose one-line message names the
file, the key path and what is accepted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rlpipe.config.algorithms import check_algorithm
from rlpipe.config.errors import format_validation_error
from rlpipe.config.sections import (
    ConfigError,
    RunConfig,
)

__all__ = ["apply_overrides", "load", "read_params"]

REQUIRED_SECTIONS = ("trainer", "env", "policy", "algorithm")


def read_params(path: str | Path) -> dict[str, Any]:
    """Read a YAML or JSON params file into a dict; a JSON ``trainer.gym_config`` env file is inlined."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: params file not found")
    try:
        data = yaml.safe_load(path.read_text()) if path.suffix != ".json" else json.loads(
            path.read_text()
        )
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not valid YAML/JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of sections, got {type(data).__name__}")
    return _inline_gym_config(data, path)


def _inline_gym_config(data: dict[str, Any], path: Path) -> dict[str, Any]:
    gym_config = (data.get("trainer") or {}).get("gym_config")
    if gym_config is None or "env" in data:
        return data
    env_path = (path.parent / gym_config) if not Path(gym_config).is_absolute() else Path(gym_config)
    if not env_path.is_file():
        env_path = Path(gym_config)
    if not env_path.is_file():
        raise ConfigError(f"{path}: trainer.gym_config: env JSON {gym_config!r} not found")
    env_json = json.loads(env_path.read_text())
    return {**data, "env": {"id": env_json.get("id"), "cfg": env_json.get("cfg", {})}}


def apply_overrides(data: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Apply ``a.b.c=VALUE`` overrides (VALUE parsed as YAML) to a nested dict copy."""
    data = json.loads(json.dumps(data))
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. trainer.iterations=50")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            raise ConfigError(f"--set {key}: value {raw!r} is not valid YAML") from None
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--set {key}: {part} is not a section")
            node = child
        node[parts[-1]] = value
    return data


def load(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Load, override and validate a params file; raise :class:`ConfigError` on any problem."""
    data = apply_overrides(read_params(path), overrides)
    missing = [s for s in REQUIRED_SECTIONS if s not in data]
    if missing:
        raise ConfigError(f"{path}: missing section {missing[0]!r}; required: {', '.join(REQUIRED_SECTIONS)}")
    try:
        cfg = RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {format_validation_error(exc)}") from None
    try:
        check_algorithm(cfg.algorithm)  # the algorithm's own config class, torch-free
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return cfg
