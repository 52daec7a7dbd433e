"""Reading a params file: YAML or the JSON train-config format, ``--set`` overrides, one-line errors.

``load(path, overrides)`` reads ``params.yaml`` (or a JSON ``train_config.json``), applies
``--set a.b.c=VALUE`` overrides (VALUE parsed as YAML, like ``dvc exp run -S``) and validates
every section. Any user mistake becomes a :class:`ConfigError` whose one-line message names the
file, the key path and what is accepted.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

import yaml
from pydantic import ValidationError

from rlpipe.config.documents import translate
from rlpipe.config.errors import format_validation_error
from rlpipe.config.sections import (
    ConfigError,
    RunConfig,
)
from rlpipe.location import AnyPath, location

__all__ = ["MAX_YAML_VALUES", "AliasExpansionError", "apply_overrides", "load", "parse_yaml", "read_params"]

REQUIRED_SECTIONS = ("trainer", "env", "policy", "algorithm")
MAX_YAML_VALUES = 100_000
"""Most values (scalars, lists, mappings) a params document may hold once every YAML alias is
expanded; the default ``params.yaml`` holds a few hundred. Aliases nested a few levels deep ("billion
laughs") would otherwise expand to billions of values in the first copy of the data."""


class AliasExpansionError(yaml.YAMLError):
    """A document whose aliases expand beyond :data:`MAX_YAML_VALUES` values, or refer to themselves."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(reason)
        self.line, self.reason = line, reason


class _Loader(yaml.SafeLoader):
    """YAML 1.1 safe loading, except that ``1e-3`` is a float (as in YAML 1.2), not the string "1e-3".

    Config types are strict (a string is never coerced to a number), so an exponent written without
    a dot must already be a number when it is read. Before any value is built, the document's size
    with every alias expanded is counted (each node once, so the count is as cheap as the text) and
    a document over :data:`MAX_YAML_VALUES` values, or with an alias inside its own anchor, is
    refused with :class:`AliasExpansionError`.
    """

    def construct_document(self, node: yaml.Node) -> Any:
        """Count the expanded values first, then build the Python data."""
        _expanded_size(node, {}, set())
        return super().construct_document(node)


def _expanded_size(node: yaml.Node, sizes: dict[int, int], open_nodes: set[int]) -> int:
    """Values under ``node`` with every alias expanded; memoized per node, so shared anchors cost once."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        raise AliasExpansionError(
            node.start_mark.line + 1,
            "an alias refers to its own anchor (a recursive structure); write the values out",
        )
    open_nodes.add(key)
    children: list[yaml.Node] = []
    if isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    elif isinstance(node, yaml.MappingNode):
        children = [item for pair in node.value for item in pair]
    size = 1 + sum(_expanded_size(child, sizes, open_nodes) for child in children)
    open_nodes.discard(key)
    if size > MAX_YAML_VALUES:
        raise AliasExpansionError(
            node.start_mark.line + 1,
            f"YAML aliases expand to more than "
            f"{MAX_YAML_VALUES} values; write the values out or use fewer aliases",
        )
    sizes[key] = size
    return size


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def parse_yaml(text: str) -> Any:
    """``yaml.safe_load`` with exponent floats (``1e-3``) read as numbers."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506  # a SafeLoader subclass


def read_params(target: str | AnyPath) -> dict[str, Any]:
    """Read a YAML or JSON params file into a dict; the documents' JSON form is translated.

    ``path`` may be a URL (the ``params.yaml`` of a run directory on an object store). A
    ``trainer.gym_config`` env file is inlined and every key of the documents' format that rlpipe
    has no use for is named in one warning line on stderr (:mod:`rlpipe.config.documents`).
    """
    path = location(target)
    if not path.is_file():
        raise ConfigError(f"{path}: params file not found")
    text = _read_text(path)
    try:
        data = parse_yaml(text) if path.suffix != ".json" else json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
    except AliasExpansionError as exc:
        raise ConfigError(f"{path}:{exc.line}: {exc.reason}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_error(path, exc)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of sections, got {type(data).__name__}")
    data, notes = translate(data, path)
    if os.environ.get("RANK", "0") == "0":  # under torchrun, rank 0 says it once
        for note in notes:
            print(f"Warning: {note}", file=sys.stderr, flush=True)
    return data


def _yaml_error(path: AnyPath, exc: yaml.YAMLError) -> str:
    """``params.yaml:3:4: not valid YAML (mapping values are not allowed here)``: line and column, 1-based."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    return f"{where}: not valid YAML ({problem}{f', {context}' if context else ''})"


def _read_text(path: AnyPath) -> str:
    """The file's UTF-8 text; a binary or non-UTF-8 file is a ``ConfigError`` naming it."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read params file ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not a UTF-8 text params file (undecodable byte at offset "
            f"{exc.start}); give a YAML or JSON file"
        ) from None
    if "\x00" in text:
        raise ConfigError(
            f"{path}: a binary file (NUL byte at offset {text.index(chr(0))}), not a YAML or JSON params file"
        )
    return text


def apply_overrides(data: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Apply ``a.b.c=VALUE`` overrides (VALUE parsed as YAML) to a nested dict copy."""
    data = json.loads(json.dumps(data))
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. trainer.iterations=50")
        try:
            value = parse_yaml(raw)
        except AliasExpansionError as exc:
            raise ConfigError(f"--set {key}: {exc.reason}") from None
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


def load(path: str | AnyPath, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Load, override and validate a params file; raise :class:`ConfigError` on any problem."""
    data = apply_overrides(read_params(path), overrides)
    missing = [s for s in REQUIRED_SECTIONS if s not in data]
    if missing:
        raise ConfigError(f"{path}: missing section {missing[0]!r}; required: {', '.join(REQUIRED_SECTIONS)}")
    try:
        cfg = RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {format_validation_error(exc)}") from None
    return cfg
