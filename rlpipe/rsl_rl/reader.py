"""Reading a ``train_cfg`` dict key by key, so that every key is either mapped or refused by name."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from rlpipe.errors import ConfigError
from rlpipe.rsl_rl.keys import NO_DEFAULT, default_of, known_paths

__all__ = ["ABSENT", "TrainCfgReader", "refuse"]

ABSENT: object = NO_DEFAULT
"""What :meth:`TrainCfgReader.get` returns for a key that is missing and has no rsl_rl default."""


def refuse(path: str, problem: str) -> ConfigError:
    """The one-line error of a key: ``train_cfg.<path>: <problem>``."""
    return ConfigError(f"train_cfg.{path}: {problem}")


def _is_unset(value: object) -> bool:
    """``dataclasses.MISSING`` (an Isaac Lab configclass field left unset) counts as absent."""
    return value is dataclasses.MISSING


def _leaves(node: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """Dotted paths of every entry of ``node``, parents before their children."""
    for key, value in node.items():
        path = f"{prefix}{key}"
        yield path
        if isinstance(value, Mapping) and not path.startswith("obs_groups."):
            yield from _leaves(value, f"{path}.")


class TrainCfgReader:
    """The keys of one ``train_cfg``; :meth:`get` marks a key read, :meth:`finish` refuses the rest.

    A key whose value is ``None`` or unset counts as absent for defaults, as rsl_rl's
    ``to_dict()`` configs write optional blocks (``rnd_cfg: None``).
    """

    def __init__(self, train_cfg: Mapping[str, Any]) -> None:
        if not isinstance(train_cfg, Mapping):
            raise ConfigError(
                f"train_cfg: expected a dict (rsl_rl's runner config), got {type(train_cfg).__name__}"
            )
        self.cfg = train_cfg
        self.read: set[str] = set()

    def has(self, path: str) -> bool:
        """Whether ``path`` is present with a value other than ``None``/unset/an empty block.

        Isaac Lab 3.0's ``to_dict()`` gives an empty ``policy`` block beside ``actor``/``critic``.
        """
        value = self._lookup(path)
        return value is not ABSENT and value is not None and value != {}

    def get(self, path: str, default: object = ABSENT) -> Any:
        """The value of ``path``, else ``default``, else rsl_rl's default (:data:`ABSENT` when none)."""
        parts = path.split(".")
        self.read.update(".".join(parts[: i + 1]) for i in range(len(parts)))  # a child read reads its block
        value = self._lookup(path)
        if value is ABSENT:
            return default if default is not ABSENT else default_of(path)
        if value is None and default is not ABSENT:
            return default
        return value

    def require(self, path: str) -> Any:
        """The value of ``path``; a ``ConfigError`` when it is missing and rsl_rl has no default."""
        value = self.get(path)
        if value is ABSENT:
            raise refuse(path, "missing (rsl_rl needs it)")
        return value

    def block(self, path: str) -> Mapping[str, Any] | None:
        """The sub-dict at ``path`` (``None`` when absent or ``None``); marks it read."""
        value = self.get(path, None)
        if value is not None and not isinstance(value, Mapping):
            raise refuse(path, f"expected a dict, got {type(value).__name__}")
        return value

    def skip(self, prefix: str) -> None:
        """Mark ``prefix`` and everything under it read (a block refused or replaced as a whole)."""
        self.read.add(prefix)
        node = self._lookup(prefix)
        if isinstance(node, Mapping):
            self.read.update(f"{prefix}.{leaf}" for leaf in _leaves(node))

    def finish(self) -> None:
        """Refuse the first key nothing read, naming it and the keys accepted beside it."""
        known = known_paths()
        for path in _leaves(self.cfg):
            if path in self.read or path.startswith("obs_groups."):
                continue
            parent = path.rpartition(".")[0]
            siblings = sorted(
                k.rpartition(".")[2] for k in known if k.rpartition(".")[0] == parent and k != path
            )
            what = "not an rsl_rl 5.x key rlpipe knows" if path not in known else "not read (rlpipe bug)"
            raise refuse(path, f"{what}; accepted here: {', '.join(siblings)}")

    def _lookup(self, path: str) -> object:
        node: object = self.cfg
        for part in path.split("."):
            if not isinstance(node, Mapping) or part not in node or _is_unset(node[part]):
                return ABSENT
            node = node[part]
        return node
