"""``package.module:attr`` references in params: their form checked at load, the code imported at use.

Params name code in a few places (``env.id: my_pkg.envs:make``, ``algorithm.name: my_pkg.algo:MyAlgo``,
``policy.name``, ``algorithm.cfg.symmetry.function``, ``trainer.events.*.func``). A name that stands
for code resolves one way everywhere (:func:`resolve_name`): ``package.module:Class`` itself, a
built-in name, or an entry point of the kind's group (``rlpipe.envs``, ``rlpipe.algorithms``,
``rlpipe.policies``: an installed package's names then read like built-ins).

Reading params runs no code: a describing command (``rlpipe inspect``) checks only the form
(:func:`check_form`), and the command that runs the code imports it (:func:`find_target`) from the
Python path the user set up — installed packages and ``PYTHONPATH``. rlpipe adds neither the
working directory nor a run directory to ``sys.path`` (``python -m rlpipe`` drops the working
directory Python puts first), so a run directory someone sent cannot bring code its params name.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from importlib.metadata import entry_points
from types import ModuleType

from rlpipe.config.errors import ConfigError

__all__ = [
    "FORM",
    "check_form",
    "entry_point_targets",
    "find_target",
    "import_module",
    "import_reference",
    "is_reference",
    "load_target",
    "resolve_name",
]

FORM = "package.module:function"
"""How a reference is written."""
_PATTERN = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


def check_form(spec: str) -> str:
    """``spec`` when it is written ``package.module:name`` (nothing imported); else a ``ValueError``."""
    if not _PATTERN.fullmatch(spec):
        raise ValueError(f"expected {FORM} (got {spec!r})")
    return spec


def import_module(module_name: str, key: str) -> ModuleType:
    """Import ``module_name`` for ``key``; any failure is a one-line ``ConfigError`` naming both.

    A missing module says where it was looked for: the installed packages and ``PYTHONPATH``.
    """
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # any error inside the user's module
        text = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(
            f"{key}: cannot import module {module_name!r} "
            f"({type(exc).__name__}: {text}){path_hint(module_name, exc)}"
        ) from None


def import_reference(spec: str, key: str) -> object:
    """The object ``package.module:name`` names, or ``None`` when the module has no such name."""
    module_name, _, attr = spec.partition(":")
    return getattr(import_module(module_name, key), attr, None)


def path_hint(module_name: str, exc: BaseException) -> str:
    """Where the module was looked for, when the module itself (not one it imports) is missing."""
    missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    if missing and (module_name == missing or module_name.startswith(missing + ".")):
        return (
            "; it is imported from the installed packages and PYTHONPATH, never the working "
            "directory: install its package or add its folder to PYTHONPATH"
        )
    return ""


def is_reference(name: str) -> bool:
    """True for ``module:attr`` names (the others are built-in names or entry points)."""
    return ":" in name


def entry_point_targets(group: str) -> dict[str, str]:
    """``{name: "module:attr"}`` of every installed entry point of ``group`` (read, nothing imported)."""
    return {ep.name: ep.value for ep in entry_points(group=group)}


def resolve_name(name: str, builtins: Mapping[str, str], group: str, fold_case: bool = False) -> str | None:
    """The ``module:attr`` that ``name`` stands for; ``None`` when it is none of the three forms.

    In this order: ``name`` itself when written ``module:attr``, a built-in name (``builtins``:
    ``{name: "module:attr"}``), an entry point of ``group`` (``fold_case``: its name in any case,
    ``name`` given in lower case). Nothing is imported.
    """
    if is_reference(name):
        return name
    if name in builtins:
        return builtins[name]
    found = entry_point_targets(group)
    if fold_case:
        found = {key.lower(): value for key, value in found.items()}
    return found.get(name)


def find_target(spec: str, key: str, form: str) -> tuple[str, object | None]:
    """Import the module of ``module:attr``; ``(attr, the object or None when the module lacks it)``.

    ``attr`` may be dotted (``module:Outer.Inner``). An import failure, or ``spec`` not of the form
    ``module:attr``, is a one-line ``ConfigError`` naming ``key`` (``form`` says what is accepted).
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"{key}: {spec!r} is not of the form {form}")
    target: object = import_module(module_name, key)
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            return attr, None
    return attr, target


def load_target(spec: str, key: str, form: str) -> object:
    """The object ``module:attr`` names; a missing module or attribute is one ``ConfigError`` line.

    The line names ``key``, the module and what to do: where the module is looked for, or which
    attribute to define in it.
    """
    attr, target = find_target(spec, key, form)
    if target is None:
        module_name = spec.partition(":")[0]
        raise ConfigError(
            f"{key}: module {module_name!r} has no attribute {attr!r}; define it there or name another {form}"
        )
    return target
