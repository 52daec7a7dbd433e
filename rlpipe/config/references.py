"""``package.module:attr`` references in params: their form checked at load, the code imported at use.

Params name code in a few places (``env.id: my_pkg.envs:make``, ``algorithm.cfg.symmetry.function``,
``trainer.events.*.func``). Reading params never imports them: loading checks only the form
(:func:`check_form`), and the command that runs the code imports it (:func:`import_reference`) from
the Python path the user set up — installed packages and ``PYTHONPATH``. rlpipe adds neither the
working directory nor a run directory to ``sys.path`` (``python -m rlpipe`` drops the working
directory Python puts first), so a run directory someone sent cannot bring code its params name.
"""

from __future__ import annotations

import importlib
import re
from types import ModuleType

from rlpipe.config.errors import ConfigError

__all__ = ["FORM", "check_form", "import_module", "import_reference"]

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
        return "; it is imported from the installed packages and PYTHONPATH, never the working directory"
    return ""
