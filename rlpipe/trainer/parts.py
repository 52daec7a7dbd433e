"""What a run is built from: params (file, run dir or dict) and the long-lived parts they describe."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium
import torch
from pydantic import ValidationError

from rlpipe import config as config_mod
from rlpipe.algorithms import BaseAlgorithm
from rlpipe.artifacts.checkpoints import Checkpointer
from rlpipe.artifacts.fs import as_path, folder_problem, probe
from rlpipe.artifacts.layout import RunLayout
from rlpipe.artifacts.params import params_file
from rlpipe.artifacts.store import RolloutStore
from rlpipe.artifacts.video import recorder_for
from rlpipe.artifacts.writer_process import prewarm as prewarm_writer
from rlpipe.build import build_algorithm, build_collector, set_threads
from rlpipe.collector import Collector
from rlpipe.config import ConfigError, RunConfig
from rlpipe.envs import BatchedEnv, GymnasiumEnv, build_env, build_eval_env, control_dt, space_to_dict
from rlpipe.envs.backends.plugins import wrap_env
from rlpipe.envs.backends.rsl_rl_env import is_rsl_rl_env
from rlpipe.evaluation import EVAL_SEED_OFFSET, Evaluator
from rlpipe.rollout import RESET_AT_START
from rlpipe.runtime.allocator import tune_malloc
from rlpipe.runtime.cuda_graphs import check_cuda_graphs
from rlpipe.runtime.distributed import DistContext, init_distributed
from rlpipe.runtime.memory import check_memory
from rlpipe.runtime.seeding import seed_everything
from rlpipe.tracking.background import prewarm_tracking
from rlpipe.trainer import ranks
from rlpipe.trainer.guards import NonFiniteGuard
from rlpipe.trainer.stopping import Stopper

__all__ = ["EnvLike", "Parts", "build_parts", "check_key_flow", "check_run_location", "run_config"]

EnvLike = Any
"""A live env — an rlpipe ``BatchedEnv``, a gymnasium vector env (``SAME_STEP`` autoreset) or an
rsl_rl-style ``VecEnv`` — or a factory ``f(num_envs, device)`` returning one."""


@dataclass
class Parts:
    """The long-lived objects of one run, built once from its ``RunConfig``."""

    layout: RunLayout
    dist: DistContext
    env: BatchedEnv
    algo: BaseAlgorithm
    """Owns the policy, its optimizer, normalizers and schedules."""
    collector: Collector
    evaluator: Evaluator | None
    store: RolloutStore | None
    checkpointer: Checkpointer
    stopper: Stopper
    guard: NonFiniteGuard = field(default_factory=NonFiniteGuard)

    @property
    def steps_per_iteration(self) -> int:
        """N × T × world size env steps per rollout (every rank's)."""
        return self.env.num_envs * self.collector.horizon * self.dist.world_size

    @property
    def checked_keys(self) -> tuple[str, ...]:
        """Rollout keys the non-finite guard checks: the collected ones and the advantage's."""
        return (*self.collector.writes, *self.algo.advantage_keys)

    def spaces(self) -> dict[str, Any]:
        """The env's observation and action spaces as JSON (offline commands rebuild the policy from it)."""
        return {
            "observation": space_to_dict(self.env.observation_space),
            "action": space_to_dict(self.env.action_space),
        }

    def env_attrs(self) -> dict[str, Any]:
        """Rollout attributes: the env's backend, time-out bootstrap, observation keys and control step.

        ``bootstrap`` is ``approximate`` for rsl_rl-style envs; ``actor_obs_keys`` /
        ``critic_obs_keys`` are the dict-observation keys each network reads (``None``: flat obs);
        ``control_dt`` the seconds of simulated time per env step (``None``: the env does not say);
        ``reset_at_start`` whether the collector reset every env before the newest rollout.
        """
        policy = self.algo.policy
        keys = {name: getattr(policy, name, None) for name in ("actor_obs_keys", "critic_obs_keys")}
        return {
            "env_backend": type(self.env).__name__,
            "bootstrap": getattr(self.env, "bootstrap", "exact"),
            "control_dt": control_dt(self.env),
            "frame_channels": {k: int(v) for k, v in dict(getattr(self.env, "frame_channels", {})).items()},
            RESET_AT_START: bool(self.collector.reset_at_start),
            **{name: None if value is None else list(value) for name, value in keys.items()},
        }


def build_parts(
    cfg: RunConfig,
    env: EnvLike | None = None,
    eval_env: EnvLike | None = None,
    *,
    store: bool = True,
    evaluate: bool = True,
) -> Parts:
    """Validate and build every part; raises ``ConfigError`` before any env step or file write.

    ``env``/``eval_env``: live envs to use instead of building ``cfg.env`` (a script's own
    simulator); with ``env`` but no ``eval_env`` the run does not evaluate.
    """
    trainer = cfg.trainer
    probe(cfg.run_dir)  # an object store: one quick request, before any env step or write
    check_run_location(cfg)
    ctx = init_distributed(trainer.device, trainer.distributed)
    prewarm_tracking(cfg, ctx.is_main)  # MLflow's import overlaps the build instead of the first iterations
    if store:
        prewarm_writer(cfg.store, cfg.run_dir)  # so does the store's writer process's start-up
    check_cuda_graphs(trainer.cuda_graphs, ctx.device, ctx.is_main)
    tune_malloc()
    seed_everything(trainer.seed + ctx.rank)
    live = env is not None
    check_memory(cfg, device=ctx.device)  # sizes alone, before an env allocates its N states
    built = (
        _live(env, trainer.num_envs, ctx.device)
        if live
        else build_env(cfg.env.id, trainer.num_envs, ctx.device, cfg.env.cfg, cfg.env.backend)
    )
    check_memory(cfg, built.observation_space, built.action_space, ctx.device)
    algo = build_algorithm(
        cfg, built.observation_space, built.action_space, ctx.device, built.max_episode_steps
    )
    set_threads(cfg, algo, ctx.is_main)
    collector = build_collector(cfg, built, algo, ctx.rank)
    check_key_flow(collector.writes, algo)
    layout = RunLayout(cfg.run_dir)
    evaluator = None
    if evaluate and trainer.enable_eval and ctx.is_main and (eval_env is not None or not live):
        evaluator = _evaluator(
            cfg, algo, None if eval_env is None else _live(eval_env, trainer.num_eval_envs, ctx.device)
        )
    return Parts(
        layout,
        ctx,
        built,
        algo,
        collector,
        evaluator,
        ranks.open_run_store(cfg, layout, ctx, collector.rollout.exclude(*algo.advantage_keys))
        if store
        else None,
        Checkpointer(layout.checkpoints, cfg.checkpoint.keep_last),
        Stopper(trainer.stop_when),
        NonFiniteGuard(trainer.on_nonfinite, trainer.max_skipped_in_a_row),
    )


def check_run_location(cfg: RunConfig) -> None:
    """``ConfigError`` naming ``trainer.data_dir`` (or ``exp_name``) where no run directory can be made."""
    problem = folder_problem(cfg.run_dir)
    if problem:
        key = "trainer.exp_name" if problem.startswith(f"{cfg.run_dir.absolute()} ") else "trainer.data_dir"
        raise ConfigError(f"{key}: {problem}; choose a folder rlpipe can create and write")


def check_key_flow(collected: Iterable[str], algo: BaseAlgorithm) -> None:
    """``ConfigError`` if the advantage or the update reads a key nothing upstream writes (build time)."""
    available = set(collected)
    for stage, reads, writes in (
        ("advantage", algo.advantage_reads, algo.advantage_keys),
        ("update", algo.update_keys, ()),
    ):
        missing = [key for key in reads if key not in available]
        if missing:
            raise ConfigError(
                f"pipeline: {type(algo).__name__}'s {stage} reads {missing[0]!r}, which no "
                f"earlier stage writes (available: {', '.join(sorted(available))})"
            )
        available.update(writes)


def run_config(
    params: str | Path | dict[str, Any], overrides: dict[str, Any] | list[str] | tuple[str, ...] | None = None
) -> RunConfig:
    """The ``RunConfig`` of a params file, a run directory or a dict, with ``{key.path: value}`` overrides."""
    items = _override_items(overrides)
    if isinstance(params, dict):
        data = config_mod.apply_overrides(params, items)
        try:
            return RunConfig.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(f"params: {config_mod.format_validation_error(exc)}") from None
    # params_file reads any run path, local or s3:// (its annotation still says Path)
    path, layout = params_file(as_path(params))  # pyright: ignore[reportArgumentType]
    where = (
        []
        if layout is None
        else [f"trainer.data_dir={layout.root.parent}", f"trainer.exp_name={layout.root.name}"]
    )
    return config_mod.load(path, (*where, *items))


def _evaluator(cfg: RunConfig, algo: BaseAlgorithm, eval_env: BatchedEnv | None) -> Evaluator:
    problem = None
    if eval_env is None:
        eval_env, problem = build_eval_env(
            cfg.env.id, cfg.trainer.num_eval_envs, algo.device, cfg.env.cfg, cfg.eval.video, cfg.env.backend
        )
    return Evaluator(
        eval_env,
        algo.policy,
        cfg.trainer.num_eval_episodes,
        seed=cfg.trainer.seed + EVAL_SEED_OFFSET,
        video=recorder_for(cfg.eval, problem),
    )


def _live(spec: Any, num_envs: int, device: torch.device) -> BatchedEnv:
    """``spec`` as a BatchedEnv: kept, adapted (gymnasium vector env, rsl_rl VecEnv) or built."""
    if isinstance(spec, BatchedEnv):
        return spec
    if isinstance(spec, gymnasium.vector.VectorEnv):
        return GymnasiumEnv.from_vector_env(spec, device)
    if is_rsl_rl_env(spec):
        return wrap_env("env", spec, device)
    if callable(spec):
        return _live(spec(num_envs=num_envs, device=device), num_envs, device)
    raise ConfigError(
        f"env: a {type(spec).__name__} is not an env; accepted: an rlpipe BatchedEnv, a "
        "gymnasium vector env, an rsl_rl VecEnv, or a factory f(num_envs, device)"
    )


def _override_items(overrides: dict[str, Any] | list[str] | tuple[str, ...] | None) -> list[str]:
    if overrides is None:
        return []
    if isinstance(overrides, dict):
        return [f"{key}={json.dumps(value)}" for key, value in overrides.items()]
    return list(overrides)
