"""rsl_rl's ``OnPolicyRunner`` API over rlpipe: Isaac Lab and mjlab train scripts switch with one import.

The names load on first use, so reading the key table (:mod:`rlpipe.rsl_rl.keys`) or mapping a
``train_cfg`` imports no torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlpipe.rsl_rl.runner import OnPolicyRunner
    from rlpipe.rsl_rl.train_cfg import params_from_train_cfg

__all__ = ["OnPolicyRunner", "params_from_train_cfg"]

_HOMES = {"OnPolicyRunner": "rlpipe.rsl_rl.runner", "params_from_train_cfg": "rlpipe.rsl_rl.train_cfg"}


def __getattr__(name: str) -> Any:
    """``OnPolicyRunner`` / ``params_from_train_cfg``, imported from their modules on first use."""
    if name not in _HOMES:
        raise AttributeError(f"module 'rlpipe.rsl_rl' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
