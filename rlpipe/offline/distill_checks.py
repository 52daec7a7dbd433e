"""What ``rlpipe distill`` checks before it writes anything: names, stores, env, what a resume continues.

Each check raises one line naming the key, option or file at fault (exit code 2), so a distillation
that cannot run, or that would continue another one than asked, leaves no file changed:

* :func:`derived_exp_name`: a name rlpipe makes up (``<teacher>-student``, ``<exp>-online``) passes
  the ``trainer.exp_name`` rules and, when it does not, the message says where it came from;
* :func:`check_stores`: every store has the observation groups the student and the teacher read;
* :func:`check_env`: the student's env observes and acts in the spaces the stores recorded (the
  student is built for the stores, then evaluated and continued online in the env);
* :func:`check_resume`: a resumed distillation has the training params and the stores of the
  checkpoint it continues (only its length, ``offline_passes``, may change, like ``trainer.iterations``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from pydantic import ValidationError

from rlpipe import config as config_mod
from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, as_path
from rlpipe.artifacts.layout import RunLayout
from rlpipe.artifacts.shards import read_any_attrs
from rlpipe.config import ConfigError, RunConfig, TrainerCfg, format_validation_error
from rlpipe.config.distillation import DistillationCfg
from rlpipe.config.hashing import refuse_other_training
from rlpipe.envs import build_env
from rlpipe.offline.rebuild import spaces_of
from rlpipe.teacher import teacher_checkpoint

__all__ = [
    "LENGTH",
    "check_env",
    "check_resume",
    "check_stores",
    "derived_exp_name",
    "distillation_of",
    "store_names",
]

LENGTH = (("algorithm", "cfg", "offline_passes"), ("algorithm", "cfg", "online_iterations"))
"""The params that set how long a distillation goes: a resume may change them."""


def distillation_of(cfg: RunConfig) -> DistillationCfg:
    """The ``algorithm.cfg`` of a distillation run (``ConfigError`` naming ``algorithm.name`` otherwise)."""
    algo = cfg.algorithm.cfg
    if not isinstance(algo, DistillationCfg):
        raise ConfigError(
            f"algorithm.name: {cfg.algorithm.name!r} is not a distillation; accepted: distillation"
        )
    return algo


def derived_exp_name(name: str, source: str) -> str:
    """``name`` if ``trainer.exp_name`` accepts it; else a ``ConfigError`` saying it was ``source``."""
    try:
        TrainerCfg.model_validate({"exp_name": name})
    except ValidationError as exc:
        raise ConfigError(f"{format_validation_error(exc, 'trainer')} — {source}") from None
    return name


def check_stores(cfg: RunConfig, stored: dict[int, AnyPath]) -> dict[int, dict[str, Any]]:
    """Every store's attributes; ``ConfigError`` naming the first store without a group that is read.

    The groups read: the student's ``policy.actor.obs_keys`` / ``policy.critic.obs_keys`` and the
    teacher's actor keys (from its own params).
    """
    _, teacher_run = teacher_checkpoint(distillation_of(cfg).teacher)
    teacher_keys = config_mod.load(teacher_run.params).policy.actor.obs_keys
    wanted = [(key, "policy.actor.obs_keys") for key in cfg.policy.actor.obs_keys or ()]
    if cfg.policy.critic is not None:
        wanted += [(key, "policy.critic.obs_keys") for key in cfg.policy.critic.obs_keys or ()]
    wanted += [(key, "the teacher's policy.actor.obs_keys") for key in teacher_keys or ()]
    found = {}
    for k, path in sorted(stored.items()):
        attrs = read_any_attrs(path)
        space = spaces_of(attrs, path)[0]
        groups = sorted(space.spaces) if isinstance(space, gym.spaces.Dict) else []
        for key, where in wanted:
            if key not in groups:
                have = ", ".join(groups) or "none: its observations are flat"
                raise ConfigError(
                    f"{path}: no observation group {key!r}, which {where} reads (its groups: {have})"
                )
        found[k] = attrs
    _same_env_subset(found, stored)
    return found


def _same_env_subset(found: dict[int, dict[str, Any]], stored: dict[int, AnyPath]) -> None:
    """``StoreError`` naming the first store whose env subset (``store.envs``) differs from the first's.

    Subset and lower-precision stores are valid samples for distillation; mixing subsets would mix
    whole episodes of some envs with others, so every store must keep the same envs.
    """

    def subset(attrs: dict[str, Any]) -> tuple[Any, Any]:
        return attrs.get("stored_envs"), attrs.get("num_envs")

    first = min(found)
    for k, attrs in sorted(found.items()):
        if subset(attrs) != subset(found[first]):
            raise StoreError(
                f"{stored[k]}: keeps {_envs_words(attrs)}, {stored[first].name} keeps "
                f"{_envs_words(found[first])}; distill reads stores of one env subset "
                "(the same store.envs)"
            )


def _envs_words(attrs: dict[str, Any]) -> str:
    m, n = attrs.get("stored_envs"), attrs.get("num_envs")
    return "every env" if m is None or m == n else f"the first {m} of {n} envs"


def space_shapes(space: gym.Space) -> str:
    """What a policy is built for, in a few words: ``Box(4,) float32``, ``Discrete(2)``, ``{a: …}``."""
    if isinstance(space, gym.spaces.Dict):
        return "{" + ", ".join(f"{key}: {space_shapes(space[key])}" for key in sorted(space.spaces)) + "}"
    if isinstance(space, gym.spaces.Discrete):
        return f"Discrete({int(space.n)})"
    return f"Box{space.shape} {space.dtype}"


def check_env(cfg: RunConfig, attrs: dict[str, Any], store: AnyPath, env_from: str = "env.id") -> None:
    """``ConfigError`` naming ``env_from`` unless ``cfg``'s env has the spaces ``store`` recorded.

    The env the stores' own run trained in passes unbuilt; another one is built (one env) and its
    observation and action spaces compared with the store's.
    """
    recorded = tuple(space_shapes(s) for s in spaces_of(attrs, store))
    source = RunLayout.of_rollouts(store.parent)
    if source.params.is_file() and config_mod.load(source.params).env == cfg.env:
        return
    env = build_env(cfg.env.id, 1, "cpu", cfg.env.cfg, cfg.env.backend)
    try:
        now = space_shapes(env.observation_space), space_shapes(env.action_space)
    finally:
        env.close()
    if now != recorded:
        raise ConfigError(
            f"{env_from}: env {cfg.env.id!r} observes {now[0]} and acts in {now[1]}, but the "
            f"stores in {store.parent} hold observations {recorded[0]} and actions "
            f"{recorded[1]}; the student needs the env that wrote them"
        )


def store_names(stored: dict[int, AnyPath]) -> list[str]:
    """The stores' names in iteration order (what a student's checkpoint records it trained on)."""
    return [stored[k].name for k in sorted(stored)]


def check_resume(path: AnyPath, state: dict[str, Any], cfg: RunConfig, stored: dict[int, AnyPath]) -> None:
    """Refuse to continue checkpoint ``path`` (``state``) with other training params or other stores.

    A ``ConfigError`` names each differing param with both values; a ``StoreError`` names a store the
    checkpoint trained on that is gone, or one that is new (either would change every later update).
    """
    refuse_other_training(str(path), state, cfg, LENGTH)
    recorded = (state.get("origin") or {}).get("stores")
    if not isinstance(recorded, list):
        return  # written before checkpoints recorded their stores
    algo_cfg = cfg.algorithm.cfg
    # a distillation resumes a distillation, whose stores ``rlpipe distill`` checked are named
    assert isinstance(algo_cfg, DistillationCfg) and algo_cfg.stores is not None
    folder, now = as_path(algo_cfg.stores), store_names(stored)
    for names, problem in (
        (sorted(set(recorded) - set(now)), "is gone"),
        (sorted(set(now) - set(recorded)), "is new"),
    ):
        if names:
            more = f" (+{len(names) - 1} more)" if len(names) > 1 else ""
            raise StoreError(
                f"{folder / names[0]}{more}: {problem} since {path}, which was trained on "
                f"{len(recorded)} stores there; restore them as they were, or distil anew "
                "under another trainer.exp_name"
            )
