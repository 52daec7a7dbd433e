"""The online experiment: every long-lived part of a run, built once from a ``RunConfig``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from rlpipe.artifacts.fs import probe
from rlpipe.artifacts.layout import RunLayout
from rlpipe.artifacts.store import RolloutStore
from rlpipe.artifacts.video import recorder_for
from rlpipe.config import RunConfig, params_hash, training_hash, training_params
from rlpipe.envs import BatchedEnv, build_env, build_eval_env, space_to_dict
from rlpipe.evaluation import EVAL_SEED_OFFSET, Evaluator
from rlpipe.learner import Learner
from rlpipe.run import roles
from rlpipe.run.guards import NonFiniteGuard
from rlpipe.run.stages import AdvantageStage, Checkpointer, Collector, UpdateStage, check_key_flow
from rlpipe.run.stopping import Stopper
from rlpipe.runtime.allocator import tune_malloc
from rlpipe.runtime.distributed import DistContext, init_distributed
from rlpipe.runtime.seeding import restore_rng_state, rng_state, seed_everything

if TYPE_CHECKING:
    from rlpipe.tracking.background import BackgroundRun

__all__ = ["Experiment", "build"]

@dataclass
class Experiment:
    """Every long-lived part of one run; ``iteration``/``env_steps`` count progress."""

    cfg: RunConfig
    layout: RunLayout
    env: BatchedEnv
    learner: Learner
    collect: Collector
    advantage: AdvantageStage
    update: UpdateStage
    evaluate: Evaluator | None
    checkpoint: Checkpointer
    store: RolloutStore | None
    iteration: int = 0
    env_steps: int = 0
    wall_s: float = 0.0
    last_eval: dict[str, float] = field(default_factory=dict)
    stopper: Stopper = field(default_factory=Stopper)
    dist: DistContext = field(default_factory=DistContext)
    guard: NonFiniteGuard = field(default_factory=NonFiniteGuard)
    mlflow_run: BackgroundRun | None = None
    """The open MLflow run (rank 0 with tracking on); it may still be opening."""
    restored_mlflow_run_id: str | None = None
    """The MLflow run id a resumed checkpoint names (the run to reopen)."""

    @property
    def mlflow_run_id(self) -> str | None:
        """The run's MLflow run id, kept in checkpoints so a resume reopens it; waits for it to open."""
        return self.mlflow_run.run_id if self.mlflow_run is not None else self.restored_mlflow_run_id

    @property
    def device(self) -> torch.device:
        """Where the learner runs."""
        return self.learner.device

    @property
    def policy(self) -> Any:
        """The learner's policy."""
        return self.learner.policy

    @property
    def algo(self) -> Any:
        """The learner's algorithm."""
        return self.learner.algorithm

    @property
    def steps_per_iteration(self) -> int:
        """N × T × world size env steps per rollout (every rank's)."""
        return self.env.num_envs * self.cfg.trainer.buffer_size * self.dist.world_size

    @property
    def total_env_steps(self) -> int:
        """The run's length in env steps (what linear/cosine schedules decay over)."""
        return self.cfg.trainer.iterations * self.steps_per_iteration

    def spaces(self) -> dict[str, Any]:
        """The env's observation and action spaces as JSON (offline commands build a Learner from it)."""
        return {"observation": space_to_dict(self.env.observation_space),
                "action": space_to_dict(self.env.action_space)}

    def env_attrs(self) -> dict[str, Any]:
        """Rollout attributes: the env's backend, time-out bootstrap and observation keys.

        ``bootstrap`` is ``approximate`` for rsl_rl-style envs; ``actor_obs_keys`` /
        ``critic_obs_keys`` are the dict-observation keys each network reads (``None``: flat obs).
        """
        keys = {name: getattr(self.policy, name, None) for name in ("actor_obs_keys", "critic_obs_keys")}
        return {
            "env_backend": type(self.env).__name__,
            "bootstrap": getattr(self.env, "bootstrap", "exact"),
            **{name: None if value is None else list(value) for name, value in keys.items()},
        }

    def state_dict(self) -> dict[str, Any]:
        """Everything a bit-exact resume needs (weights_only-safe)."""
        return {
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "wall_s": self.wall_s,
            "params_hash": params_hash(self.cfg),
            "training_hash": training_hash(self.cfg),
            "training_params": training_params(self.cfg),
            "spaces": self.spaces(),
            **self.learner.state_dict(),
            "collector": self.collect.state_dict(),
            "evaluator_calls": self.evaluate.calls if self.evaluate else 0,
            "last_eval": dict(self.last_eval),
            "stopper": self.stopper.state_dict(),
            "mlflow_run_id": self.mlflow_run_id,
            "rng": rng_state(),
            **(roles.rank_states(self.collect) if self.dist.active else {}),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict`` (each rank takes its own env and RNG state)."""
        state = roles.select_rank_state(state, self.dist)
        self.learner.load_state_dict(state)
        self.collect.load_state_dict(state["collector"])
        if self.evaluate:
            self.evaluate.calls = int(state["evaluator_calls"])
        self.iteration, self.env_steps = int(state["iteration"]), int(state["env_steps"])
        self.wall_s = float(state["wall_s"])
        self.last_eval = dict(state["last_eval"])
        self.stopper.load_state_dict(state.get("stopper", {}))
        self.restored_mlflow_run_id = state.get("mlflow_run_id")
        restore_rng_state(state["rng"])


def build(cfg: RunConfig, store: bool = True, evaluate: bool = True, env: BatchedEnv | None = None,
          eval_env: BatchedEnv | None = None) -> Experiment:
    """Validate and build every part; raises ``ConfigError`` before any env step or file write.

    ``store``/``evaluate`` false build no rollout store / eval envs (``rlpipe collect`` needs neither).
    ``env``/``eval_env``: live envs to use instead of building ``cfg.env`` (a script's own simulator);
    with ``env`` but no ``eval_env`` the run does not evaluate.
    """
    trainer = cfg.trainer
    probe(cfg.run_dir)  # an object store: one quick request, before any env step or write
    ctx = init_distributed(trainer.device, trainer.distributed)
    tune_malloc()
    seed_everything(trainer.seed + ctx.rank)
    live = env is not None
    env = env if live else build_env(cfg.env.id, trainer.num_envs, ctx.device, cfg.env.cfg,
                                     cfg.env.backend)
    learner = Learner.from_config(cfg, env.observation_space, env.action_space, ctx.device,
                                  env.max_episode_steps)
    learner.configure_threads(trainer.num_threads, trainer.num_envs, trainer.buffer_size, ctx.is_main)
    algo_cfg = learner.algorithm.cfg
    collect = Collector(env, learner.policy, trainer.buffer_size, trainer.seed + ctx.rank,
                        reset_every_rollout=bool(getattr(algo_cfg, "reset_every_rollout", False)),
                        group_size=int(getattr(algo_cfg, "reset_group_size", 1)),
                        horizons_per_env_reset=trainer.horizons_per_env_reset,
                        deterministic=trainer.deterministic_collect,
                        seq_len=getattr(algo_cfg, "seq_len", None),
                        seqs_per_state_reset=int(getattr(algo_cfg, "seqs_per_state_reset", -1)))
    advantage, update = AdvantageStage(learner), UpdateStage(learner)
    check_key_flow([collect, advantage, update])
    layout = RunLayout(cfg.run_dir)
    evaluate = evaluate and trainer.enable_eval and ctx.is_main and (eval_env is not None or not live)
    evaluator = _evaluator(cfg, learner, eval_env) if evaluate else None
    rollouts = roles.open_run_store(cfg, layout, ctx) if store else None
    checkpoint = Checkpointer(layout.checkpoints, cfg.checkpoint.keep_last)
    return Experiment(cfg, layout, env, learner, collect, advantage, update, evaluator, checkpoint,
                      rollouts, stopper=Stopper(trainer.stop_when), dist=ctx,
                      guard=NonFiniteGuard(trainer.on_nonfinite, trainer.max_skipped_in_a_row))


def _evaluator(cfg: RunConfig, learner: Learner, eval_env: BatchedEnv | None) -> Evaluator:
    problem = None
    if eval_env is None:
        eval_env, problem = build_eval_env(cfg.env.id, cfg.trainer.num_eval_envs, learner.device,
                                           cfg.env.cfg, cfg.eval.video, cfg.env.backend)
    return Evaluator(eval_env, learner.policy, cfg.trainer.num_eval_episodes,
                     seed=cfg.trainer.seed + EVAL_SEED_OFFSET, video=recorder_for(cfg.eval, problem))
