"""``rlpipe distill``: a student trained from a teacher's stored rollouts, no simulator stepped.

The student's params are the teacher run's (env, trainer) with ``algorithm: distillation`` whose
``teacher`` is the teacher's newest checkpoint and ``stores`` its rollout folder, then the
``--set`` overrides (the student's policy and its ``obs_keys``). Every store is checked first: a
store without an observation group the student or the teacher reads is refused before anything is
written. Each offline iteration updates the student on one stored rollout, relabelled by the frozen
teacher (its actor output on the stored observations); ``offline_passes`` passes visit the stores in
a seeded order per pass. The student's run directory is a normal one — params.yaml, checkpoints (at
the end of every pass), curve.csv, metrics.json, an MLflow run tagged with its teacher and stores —
and resumes bit for bit. :func:`online_config` continues it online (``online_iterations``) as a run
of its own, ``<exp>-online``, that starts from the offline student's weights.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from pydantic import ValidationError

from rlpipe import config as config_mod
from rlpipe.algorithms.base import update_seed
from rlpipe.algorithms.distillation import Distillation
from rlpipe.artifacts.checkpoints import latest_checkpoint
from rlpipe.artifacts.curve import truncate_curve
from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import as_path
from rlpipe.artifacts.layout import ROLLOUT_NAME, RunLayout, numbered
from rlpipe.artifacts.lock import RunLock
from rlpipe.artifacts.params import write_params
from rlpipe.artifacts.shards import read_any_attrs
from rlpipe.build import learn
from rlpipe.config import ConfigError, RunConfig
from rlpipe.config.distillation import DistillationCfg
from rlpipe.config.registry import validate_algorithm
from rlpipe.envs import build_eval_env
from rlpipe.evaluation import EVAL_SEED_OFFSET, Evaluator
from rlpipe.offline.rebuild import (
    load_algorithm_state,
    load_rollout,
    rebuild_algorithm,
    save_algorithm,
    spaces_of,
)
from rlpipe.rollout import rollout_dims
from rlpipe.teacher import teacher_checkpoint
from rlpipe.tracking import open_tracker, source_run_id

__all__ = ["check_stores", "distill_config", "distill_offline", "online_config", "store_order"]


def distill_config(teacher: Path, overrides: list[str] | tuple[str, ...] = (),
                   params: Path | None = None) -> RunConfig:
    """The student's params: ``params`` (default: the teacher run's), set to distil from ``teacher``.

    Without ``params`` the student runs beside the teacher as ``<teacher>-student``, with the
    teacher's env and trainer blocks and a fresh ``distillation`` algorithm block (no ``replay``
    overrides). ``teacher`` and ``stores`` default to the teacher's newest checkpoint and rollout
    folder (absolute paths: the run's lineage); ``overrides`` go last.
    """
    checkpoint, layout = teacher_checkpoint(teacher)
    data = config_mod.read_params(params if params is not None else layout.params)
    block = data.get("algorithm") or {}
    if params is None or str(block.get("name", "")).lower() != "distillation":
        block = {"name": "distillation", "cfg": {}}
    block["cfg"] = {"teacher": str(checkpoint.resolve()), "stores": str(layout.rollouts.resolve()),
                    **(block.get("cfg") or {})}
    data["algorithm"] = block
    if params is None:
        data.pop("replay", None)
        data.setdefault("trainer", {})
        data["trainer"] |= {"exp_name": f"{layout.root.name}-student", "data_dir": str(layout.root.parent)}
    data = config_mod.apply_overrides(data, list(overrides))
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"params: {config_mod.format_validation_error(exc)}") from None


def check_stores(cfg: RunConfig, stored: dict[int, Path]) -> dict[int, dict[str, Any]]:
    """Every store's attributes; ``ConfigError`` naming the first store without a group that is read.

    The groups read: the student's ``policy.actor.obs_keys`` / ``policy.critic.obs_keys`` and the
    teacher's actor keys (from its own params).
    """
    _, teacher_run = teacher_checkpoint(cfg.algorithm.cfg.teacher)
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
                raise ConfigError(f"{path}: no observation group {key!r}, which {where} reads "
                                  f"(its groups: {have})")
        found[k] = attrs
    _same_env_subset(found, stored)
    return found


def _same_env_subset(found: dict[int, dict[str, Any]], stored: dict[int, Path]) -> None:
    """``StoreError`` naming the first store whose env subset (``store.envs``) differs from the first's.

    Subset and lower-precision stores are valid samples for distillation; mixing subsets would mix
    whole episodes of some envs with others, so every store must keep the same envs.
    """
    def subset(attrs: dict[str, Any]) -> tuple[Any, Any]:
        return attrs.get("stored_envs"), attrs.get("num_envs")

    first = min(found)
    for k, attrs in sorted(found.items()):
        if subset(attrs) != subset(found[first]):
            raise StoreError(f"{stored[k]}: keeps {_envs_words(attrs)}, {stored[first].name} keeps "
                             f"{_envs_words(found[first])}; distill reads stores of one env subset "
                             "(the same store.envs)")


def _envs_words(attrs: dict[str, Any]) -> str:
    m, n = attrs.get("stored_envs"), attrs.get("num_envs")
    return "every env" if m is None or m == n else f"the first {m} of {n} envs"


def store_order(keys: list[int], passes: int, seed: int) -> list[int]:
    """The stores of iterations 1, 2, …: each pass visits every store once, in a seeded order."""
    order = []
    for p in range(1, passes + 1):
        generator = torch.Generator().manual_seed(update_seed(seed, -p))
        order += [keys[i] for i in torch.randperm(len(keys), generator=generator).tolist()]
    return order


def update_plan(keys: list[int], passes: int, seed: int, per_update: int) -> list[list[int]]:
    """The stores of updates 1, 2, …: each pass's :func:`store_order` cut into groups of ``per_update``.

    The last group of a pass may be smaller, so every pass ends on an update boundary.
    """
    order, plan = store_order(keys, passes, seed), []
    for p in range(passes):
        one_pass = order[p * len(keys):(p + 1) * len(keys)]
        plan += [one_pass[j:j + per_update] for j in range(0, len(one_pass), per_update)]
    return plan


def load_stores(paths: list[Path], device: Any) -> Any:
    """The stored rollouts of ``paths`` joined along the env axis: ``[Σ N, T+1]``."""
    rollouts = [load_rollout(path, device, purpose=None)[0] for path in paths]  # subsets, float16: samples
    return rollouts[0] if len(rollouts) == 1 else torch.cat(rollouts, dim=0)


def distill_offline(cfg: RunConfig, resume: bool = False) -> dict[str, Any]:
    """Train the student from the teacher's stores into ``cfg.run_dir``; return its summary.

    ``resume``: continue from the run's newest checkpoint (bit for bit); otherwise a run directory
    that already holds a run is refused. The summary names the last ``checkpoint``.
    """
    dcfg = cfg.algorithm.cfg
    if not isinstance(dcfg, DistillationCfg):
        raise ConfigError(f"algorithm.name: rlpipe distill trains distillation (got {cfg.algorithm.name})")
    if dcfg.stores is None:
        raise ConfigError("algorithm.cfg.stores: required by rlpipe distill: the teacher's rollout folder")
    folder = as_path(dcfg.stores)
    stored = numbered(folder, ROLLOUT_NAME) if folder.is_dir() else {}
    if not stored:
        raise StoreError(f"{folder}: no rollout stores (iter-NNNNNN.zarr) here")
    attrs = check_stores(cfg, stored)
    layout = RunLayout(cfg.run_dir)
    if not resume and layout.params.is_file():
        raise StoreError(f"{layout.root}: already holds a run; pass --resume, or choose another "
                         "trainer.exp_name")
    first = min(stored)
    algo = rebuild_algorithm(cfg, spaces_of(attrs[first], stored[first]))
    assert isinstance(algo, Distillation)
    layout.root.mkdir(parents=True, exist_ok=True)
    with RunLock(layout.root, "rlpipe distill"):
        return _distill_locked(cfg, algo, stored, layout, attrs[first].get("spaces"), resume)


def _distill_locked(cfg: RunConfig, algo: Distillation, stored: dict[int, Path], layout: RunLayout,
                    spaces: dict[str, Any] | None, resume: bool) -> dict[str, Any]:
    dcfg = cfg.algorithm.cfg
    order = update_plan(sorted(stored), dcfg.offline_passes, cfg.trainer.seed, dcfg.stores_per_update)
    start, header = 0, None
    latest = latest_checkpoint(layout.checkpoints) if resume and layout.checkpoints.is_dir() else None
    if latest is not None:
        start = int(load_algorithm_state(algo, latest)["iteration"])
        header = truncate_curve(layout.curve, start)
        if start >= len(order):
            return {"iterations": len(order), "checkpoint": str(latest), "nothing_to_do": True}
    write_params(layout, cfg.to_dict())
    teacher_run = teacher_checkpoint(cfg.algorithm.cfg.teacher)[1].root
    with open_tracker(cfg, layout.root, kind="distill", parent_run_id=source_run_id(teacher_run),
                      curve_fields=header) as tracker:
        summary = _loop(cfg, algo, stored, order, start, layout, spaces, tracker)
        tracker.finish(summary)
    return summary


def _loop(cfg: RunConfig, algo: Distillation, stored: dict[int, Path], order: list[list[int]], start: int,
          layout: RunLayout, spaces: dict[str, Any] | None, tracker: Any) -> dict[str, Any]:
    begin, metrics, path = time.perf_counter(), {}, None
    per_pass = len(order) // cfg.algorithm.cfg.offline_passes
    for i in range(start + 1, len(order) + 1):
        tick = time.perf_counter()
        rollout = load_stores([stored[k] for k in order[i - 1]], algo.device)
        n, t = rollout_dims(rollout)
        per_store = n // len(order[i - 1]) * t  # the stores of one run share N and T
        before, total = (sum(map(len, order[:i - 1])) * per_store, sum(map(len, order)) * per_store)
        metrics = learn(algo, rollout, i, before, total)
        metrics |= {"iteration": float(i), "env_steps": 0.0, "offline/store": float(order[i - 1][0]),
                    "offline/stores": float(len(order[i - 1])), "offline/transitions": float(before + n * t),
                    "time/iteration_s": time.perf_counter() - tick}
        if i == len(order) and cfg.trainer.enable_eval:
            metrics |= evaluate_student(cfg, algo)
        tracker.log(metrics, step=before + n * t)
        if cfg.checkpoint.every_iteration or i % per_pass == 0:
            origin = {"teacher": algo.teacher_record.get("path"),
                      "rollout": ", ".join(str(stored[k]) for k in order[i - 1])}
            path = save_algorithm(algo, cfg, layout.checkpoints, i, 0, origin, spaces)
    return {
        "iterations": len(order), "stores": sorted(str(p) for p in stored.values()),
        "teacher": algo.teacher_record, "wall_s": round(time.perf_counter() - begin, 3),
        **{key: v for key, v in metrics.items() if key.startswith(("update/", "eval/"))},
        "checkpoint": str(path),
    }


def evaluate_student(cfg: RunConfig, algo: Distillation) -> dict[str, float]:
    """``eval/…`` of the student on ``trainer.num_eval_envs`` fresh envs, as the online run evaluates."""
    env, _ = build_eval_env(cfg.env.id, cfg.trainer.num_eval_envs, algo.device, cfg.env.cfg, False,
                            cfg.env.backend)
    try:
        evaluator = Evaluator(env, algo.policy, cfg.trainer.num_eval_episodes,
                              seed=cfg.trainer.seed + EVAL_SEED_OFFSET)
        return evaluator(None)
    finally:
        env.close()


def online_config(cfg: RunConfig, checkpoint: Path, iterations: int) -> RunConfig:
    """The online continuation: ``<exp>-online``, ``iterations`` long, from ``checkpoint``'s student."""
    data = cfg.algorithm.to_dict()["cfg"] | {"student_init": str(as_path(checkpoint).resolve()),
                                             "online_iterations": 0}
    trainer = cfg.trainer.replace(exp_name=f"{cfg.trainer.exp_name}-online", iterations=iterations)
    return cfg.model_copy(update={"trainer": trainer,
                                  "algorithm": validate_algorithm({"name": "distillation", "cfg": data})})
