"""``rlpipe distill``: a student trained from a teacher's stored rollouts, no simulator stepped.

The student's params are the teacher run's (env, trainer) with ``algorithm: distillation`` whose
``teacher`` is the teacher's newest checkpoint and ``stores`` its rollout folder, then the
``--set`` overrides (the student's policy and its ``obs_keys``). Everything is checked before
anything is written (:mod:`rlpipe.offline.distill_checks`): the stores' observation groups, the env
against the stores' spaces, and on ``--resume`` the params and stores of the checkpoint continued.
Each offline iteration updates the student on one stored rollout, relabelled by the frozen teacher
(its actor output on the stored observations, flat or grouped); ``offline_passes`` passes visit the
stores in a seeded order per pass. The student's run directory is a normal one — params.yaml,
checkpoints (at the end of every pass, and where a signal stopped it), curve.csv, metrics.json, an
MLflow run tagged with its teacher and stores — and resumes bit for bit; a start that fails before
its first checkpoint leaves no directory. :func:`online_config` continues it online
(``online_iterations``) as a run of its own, ``<exp>-online``, that starts from the offline
student's weights.
"""

from __future__ import annotations

import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch
from pydantic import ValidationError
from tensordict import TensorDict

from rlpipe import config as config_mod
from rlpipe.algorithms.base import update_seed
from rlpipe.algorithms.distillation import Distillation
from rlpipe.artifacts.checkpoints import latest_checkpoint, load_checkpoint
from rlpipe.artifacts.curve import truncate_curve
from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, as_path
from rlpipe.artifacts.layout import ROLLOUT_NAME, RunLayout, numbered
from rlpipe.artifacts.params import write_params
from rlpipe.artifacts.provisional import held_run_dir
from rlpipe.build import learn
from rlpipe.config import ConfigError, RunConfig
from rlpipe.config.algorithm_block import validate_algorithm
from rlpipe.config.distillation import DistillationCfg
from rlpipe.envs import build_eval_env
from rlpipe.evaluation import EVAL_SEED_OFFSET, Evaluator
from rlpipe.offline.distill_checks import (
    check_env,
    check_resume,
    check_stores,
    derived_exp_name,
    distillation_of,
    store_names,
)
from rlpipe.offline.rebuild import (
    load_algorithm_state,
    load_rollout,
    rebuild_algorithm,
    save_algorithm,
    spaces_of,
)
from rlpipe.rollout import rollout_dims
from rlpipe.teacher import teacher_checkpoint
from rlpipe.testing import faults
from rlpipe.tracking import open_tracker, source_run_id

if TYPE_CHECKING:
    from rlpipe.tracking.tracker import Tracker

__all__ = ["check_stores", "distill_config", "distill_offline", "online_config", "online_name", "store_order"]


class StopSignal(Protocol):
    """The signal a graceful stop caught (``None`` while none has): the loop ends at an update boundary."""

    @property
    def signum(self) -> int | None: ...


def distill_config(
    teacher: Path, overrides: list[str] | tuple[str, ...] = (), params: Path | None = None
) -> RunConfig:
    """The student's params: ``params`` (default: the teacher run's), set to distil from ``teacher``.

    Without ``params`` the student runs beside the teacher as ``<teacher>-student`` (a name checked
    like any ``trainer.exp_name``), with the teacher's env and trainer blocks and a fresh
    ``distillation`` algorithm block (no ``replay`` overrides). ``teacher`` and ``stores`` default to
    the teacher's newest checkpoint and rollout folder (absolute paths: the run's lineage);
    ``overrides`` go last.
    """
    checkpoint, layout = teacher_checkpoint(teacher)
    data = config_mod.read_params(params if params is not None else layout.params)
    block = data.get("algorithm") or {}
    if params is None or str(block.get("name", "")).lower() != "distillation":
        block = {"name": "distillation", "cfg": {}}
    block["cfg"] = {
        "teacher": str(checkpoint.resolve()),
        "stores": str(layout.rollouts.resolve()),
        **(block.get("cfg") or {}),
    }
    data["algorithm"] = block
    derived = f"{layout.root.name}-student"
    if params is None:
        data.pop("replay", None)
        data.setdefault("trainer", {})
        data["trainer"] |= {"exp_name": derived, "data_dir": str(layout.root.parent)}
    data = config_mod.apply_overrides(data, list(overrides))
    if params is None and (data.get("trainer") or {}).get("exp_name") == derived:
        derived_exp_name(
            derived,
            f"the student's name, derived as <teacher run>-student from {layout.root}; "
            "choose one with --set trainer.exp_name=NAME",
        )
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"params: {config_mod.format_validation_error(exc)}") from None


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
        one_pass = order[p * len(keys) : (p + 1) * len(keys)]
        plan += [one_pass[j : j + per_update] for j in range(0, len(one_pass), per_update)]
    return plan


def load_stores(paths: list[AnyPath], device: torch.device | str) -> TensorDict:
    """The stored rollouts of ``paths`` joined along the env axis: ``[Σ N, T+1]``."""
    rollouts = [load_rollout(path, device, purpose=None)[0] for path in paths]  # subsets, float16: samples
    return rollouts[0] if len(rollouts) == 1 else TensorDict.cat(rollouts, dim=0)


def distill_offline(
    cfg: RunConfig, resume: bool = False, stop: StopSignal | None = None, env_from: str = "env.id"
) -> dict[str, Any]:
    """Train the student from the teacher's stores into ``cfg.run_dir``; return its summary.

    ``resume``: continue from the run's newest checkpoint (bit for bit), refused when its training
    params or stores differ; otherwise a run directory that already holds a run is refused. A start
    that fails before its first checkpoint leaves no run directory. ``stop``: a
    :class:`~rlpipe.trainer.signals.GracefulStop`; once it caught a signal, the distillation ends at
    the next update boundary with a checkpoint, and the summary names ``interrupted_by`` (the
    signal's name, as a stopped ``rlpipe run`` records it) and the ``iteration``. ``env_from``:
    what an env unlike the stores is blamed on (``--params FILE``). The summary names the last
    ``checkpoint``.
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
    first = min(stored)
    check_env(cfg, attrs[first], stored[first], env_from)
    layout = RunLayout(cfg.run_dir)
    if not resume and layout.holds_run():
        raise StoreError(
            f"{layout.root}: already holds a run; pass --resume, or choose another trainer.exp_name"
        )
    algo = rebuild_algorithm(cfg, spaces_of(attrs[first], stored[first]))
    assert isinstance(algo, Distillation)
    plan = _Plan(
        stored,
        update_plan(sorted(stored), dcfg.offline_passes, cfg.trainer.seed, dcfg.stores_per_update),
        attrs[first].get("spaces"),
        stop,
    )
    with held_run_dir(layout, "rlpipe distill"):
        return _distill_locked(cfg, algo, plan, layout, resume)


@dataclass
class _Plan:
    """What a distillation goes through: the stores, those of each update, and the signal to stop at."""

    stored: dict[int, AnyPath]
    order: list[list[int]]
    """The stores of updates 1, 2, … (:func:`update_plan`)."""
    spaces: dict[str, Any] | None
    """The spaces the stores recorded (kept in every checkpoint)."""
    stop: StopSignal | None
    """A :class:`~rlpipe.trainer.signals.GracefulStop`, or ``None``."""


def _distill_locked(
    cfg: RunConfig, algo: Distillation, plan: _Plan, layout: RunLayout, resume: bool
) -> dict[str, Any]:
    start, header = 0, None
    latest = latest_checkpoint(layout.checkpoints) if resume and layout.checkpoints.is_dir() else None
    if latest is not None:
        state = load_checkpoint(latest)
        check_resume(latest, state, cfg, plan.stored)  # before anything is loaded or written
        start = int(load_algorithm_state(algo, latest, state)["iteration"])
        if start >= len(plan.order):
            return {"iterations": len(plan.order), "checkpoint": str(latest), "nothing_to_do": True}
        print(f"resume: continuing from {latest} (iteration {start} of {len(plan.order)})", file=sys.stderr)
    if resume:
        header = truncate_curve(layout.curve, start)
    write_params(layout, cfg.to_dict())
    teacher_run = teacher_checkpoint(distillation_of(cfg).teacher)[1].root
    with open_tracker(
        cfg, layout.root, kind="distill", parent_run_id=source_run_id(teacher_run), curve_fields=header
    ) as tracker:
        summary = _loop(cfg, algo, plan, start, layout, tracker)
        tracker.finish(summary, status="KILLED" if "interrupted_by" in summary else "FINISHED")
    return summary


def _loop(
    cfg: RunConfig, algo: Distillation, plan: _Plan, start: int, layout: RunLayout, tracker: Tracker
) -> dict[str, Any]:
    begin, metrics, path, signum = time.perf_counter(), {}, None, None
    stored, order = plan.stored, plan.order
    per_pass = len(order) // distillation_of(cfg).offline_passes
    for i in range(start + 1, len(order) + 1):
        tick = time.perf_counter()
        faults.point("update.start")
        rollout = load_stores([stored[k] for k in order[i - 1]], algo.device)
        n, t = rollout_dims(rollout)
        per_store = n // len(order[i - 1]) * t  # the stores of one run share N and T
        before, total = (sum(map(len, order[: i - 1])) * per_store, sum(map(len, order)) * per_store)
        metrics = learn(algo, rollout, i, before, total)
        metrics |= {
            "iteration": float(i),
            "env_steps": 0.0,
            "offline/store": float(order[i - 1][0]),
            "offline/stores": float(len(order[i - 1])),
            "offline/transitions": float(before + n * t),
            "time/iteration_s": time.perf_counter() - tick,
        }
        if i == len(order) and cfg.trainer.enable_eval:
            metrics |= evaluate_student(cfg, algo)
        tracker.log(metrics, step=before + n * t)
        signum = plan.stop.signum if plan.stop is not None and i < len(order) else None  # the last: done
        if cfg.checkpoint.every_iteration or i % per_pass == 0 or signum is not None:
            origin = {
                "teacher": algo.teacher_record.get("path"),
                "stores": store_names(stored),
                "rollout": ", ".join(str(stored[k]) for k in order[i - 1]),
            }
            path = save_algorithm(algo, cfg, layout.checkpoints, i, 0, origin, plan.spaces)
        if signum is not None:
            stopped = {"interrupted_by": signal.Signals(signum).name, "iteration": i}
            return _summary(algo, plan, metrics, begin, path) | stopped
    return _summary(algo, plan, metrics, begin, path)


def _summary(
    algo: Distillation, plan: _Plan, metrics: dict[str, float], begin: float, checkpoint: AnyPath | None
) -> dict[str, Any]:
    return {
        "iterations": len(plan.order),
        "stores": sorted(str(p) for p in plan.stored.values()),
        "teacher": algo.teacher_record,
        "wall_s": round(time.perf_counter() - begin, 3),
        **{key: v for key, v in metrics.items() if key.startswith(("update/", "eval/"))},
        "checkpoint": str(checkpoint),
    }


def evaluate_student(cfg: RunConfig, algo: Distillation) -> dict[str, float]:
    """``eval/…`` of the student on ``trainer.num_eval_envs`` fresh envs, as the online run evaluates."""
    env, _ = build_eval_env(
        cfg.env.id, cfg.trainer.num_eval_envs, algo.device, cfg.env.cfg, False, cfg.env.backend
    )
    try:
        evaluator = Evaluator(
            env, algo.policy, cfg.trainer.num_eval_episodes, seed=cfg.trainer.seed + EVAL_SEED_OFFSET
        )
        return evaluator(None)
    finally:
        env.close()


def online_name(cfg: RunConfig) -> str:
    """``<exp>-online``: the online continuation's ``trainer.exp_name``, checked like any other."""
    return derived_exp_name(
        f"{cfg.trainer.exp_name}-online",
        "the online continuation's name, derived as "
        "<trainer.exp_name>-online; choose a shorter trainer.exp_name",
    )


def online_config(cfg: RunConfig, checkpoint: str | AnyPath, iterations: int) -> RunConfig:
    """The online continuation: ``<exp>-online``, ``iterations`` long, from ``checkpoint``'s student.

    ``checkpoint``: a path or URL (a summary's ``checkpoint``, kept as written: an object store's URL).
    """
    data = cfg.algorithm.to_dict()["cfg"] | {
        "student_init": str(as_path(checkpoint).resolve()),
        "online_iterations": 0,
    }
    trainer = cfg.trainer.replace(exp_name=online_name(cfg), iterations=iterations)
    return cfg.model_copy(
        update={"trainer": trainer, "algorithm": validate_algorithm({"name": "distillation", "cfg": data})}
    )
