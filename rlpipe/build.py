"""From a ``RunConfig`` to the objects that learn: the policy with its algorithm, and the collector.

The online run (:class:`rlpipe.trainer.Trainer`) and the offline commands (replay, update, collect)
build through these functions, so a stored run rebuilds exactly what trained it.
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import torch
from tensordict import TensorDict

from rlpipe.algorithms import BaseAlgorithm, Distillation, algo_class, build_algo, resolve_algo_cfg
from rlpipe.algorithms.offpolicy import OffPolicyAlgorithm
from rlpipe.collector import Collector
from rlpipe.config import RunConfig
from rlpipe.envs import BatchedEnv
from rlpipe.policies import build_policy
from rlpipe.runtime.compile import compile_decision, compile_step
from rlpipe.runtime.distributed import broadcast_parameters
from rlpipe.runtime.threads import configure_threads, linear_shapes, thread_reason
from rlpipe.teacher import load_student_init, load_teacher

__all__ = [
    "attach_teacher",
    "build_algorithm",
    "build_collector",
    "compile_update",
    "largest_batch",
    "learn",
    "learner_state",
    "load_learner_state",
    "set_threads",
    "threads_reason",
    "update_algorithm",
]


def build_algorithm(
    cfg: RunConfig,
    obs_space: gym.spaces.Space,
    action_space: gym.Space,
    device: torch.device,
    max_episode_steps: int | None = None,
) -> BaseAlgorithm:
    """The algorithm ``cfg.algorithm`` names, owning a new policy for these spaces.

    ``max_episode_steps`` is the env's time limit (``None``: none or unknown). Raises
    ``ConfigError`` naming the key for bad combinations before any network exists, and for options
    that do not fit the spaces (``algorithm.cfg.rnd.obs_keys``, the mirror function) once the
    algorithm is built — before any env step or file write. The policy's
    initial weights draw from the global torch RNG (seed it first); in a distributed run every rank
    gets rank 0's weights before the algorithm copies any of them (GRPO's reference).
    """
    trainer, name = cfg.trainer, cfg.algorithm.name
    algo_cfg = resolve_algo_cfg(name, cfg.algorithm.cfg, device)
    algo_class(name).check_run(
        algo_cfg, trainer.num_envs, cfg.policy.name, trainer.buffer_size, max_episode_steps
    )
    policy = build_policy(cfg.policy, obs_space, action_space, device)
    broadcast_parameters(policy)
    algo = build_algo(name, algo_cfg, policy, device)
    algo.check_spaces(obs_space, action_space)
    if isinstance(algo, OffPolicyAlgorithm):  # its critics are sized by the spaces
        algo.build_networks(obs_space, action_space)
    algo.seed = trainer.seed
    if isinstance(algo, Distillation):
        attach_teacher(algo, obs_space, action_space, device)
    compile_update(cfg, algo)
    return algo


def compile_update(cfg: RunConfig, algo: BaseAlgorithm) -> None:
    """Under ``trainer.compile`` (:mod:`rlpipe.runtime.compile`), compile the minibatch loss (and RND's).

    The update loop then calls the compiled ``minibatch_loss`` on the minibatch's columns as a plain
    dict; every process that updates (the run, ``replay``, ``update``) compiles alike. The rank-0
    process says what the compile cost.
    """
    if not compile_decision(cfg.trainer.compile, algo.device) or isinstance(algo, OffPolicyAlgorithm):
        return  # an off-policy gradient step runs eager (its act step is compiled by build_collector)
    announce = int(os.environ.get("RANK", "0")) == 0
    loss = compile_step(algo.minibatch_loss, "minibatch loss", announce)
    algo.loss_step = lambda mb: loss(dict(mb.items()))
    rnd = getattr(algo, "rnd", None)
    if rnd is not None:
        rnd.losses_step = compile_step(rnd.losses, "RND losses", announce)


def attach_teacher(
    algo: Distillation, obs_space: gym.spaces.Space, action_space: gym.Space, device: torch.device
) -> None:
    """Load the frozen teacher ``algorithm.cfg.teacher`` names (and the student's start weights)."""
    teacher = load_teacher(algo.cfg.teacher, obs_space, action_space, device)
    algo.attach_teacher(teacher.policy, teacher.record())
    if algo.cfg.student_init is not None:
        load_student_init(algo.cfg.student_init, algo.policy)


def largest_batch(cfg: RunConfig, algo: BaseAlgorithm) -> int:
    """Rows the networks see at once: an update minibatch of the ``[N, T]`` rollout or the N envs."""
    num_envs, transitions = cfg.trainer.num_envs, cfg.trainer.num_envs * cfg.trainer.buffer_size
    return max(num_envs, min(algo.cfg.minibatch_size(transitions), transitions))


def threads_reason(cfg: RunConfig, algo: BaseAlgorithm) -> str:
    """Why :func:`set_threads` chose its count (the banner's words)."""
    return thread_reason(cfg.trainer.num_threads, largest_batch(cfg, algo), linear_shapes(algo.policy))


def set_threads(cfg: RunConfig, algo: BaseAlgorithm, announce: bool = True) -> int:
    """Set torch's CPU threads for this run (``trainer.num_threads``, :mod:`rlpipe.runtime.threads`).

    ``auto`` sizes the count by :func:`largest_batch` and the policy's Linear layers.
    """
    processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))  # ranks on this machine (torchrun)
    return configure_threads(
        cfg.trainer.num_threads, largest_batch(cfg, algo), linear_shapes(algo.policy), processes, announce
    )


def build_collector(cfg: RunConfig, env: BatchedEnv, algo: BaseAlgorithm, rank: int = 0) -> Collector:
    """The collector of ``env`` for ``algo``'s policy, with the algorithm's collection options."""
    trainer, algo_cfg = cfg.trainer, algo.cfg
    options: dict[str, Any] = {
        "reset_every_rollout": bool(getattr(algo_cfg, "reset_every_rollout", False)),
        "group_size": int(getattr(algo_cfg, "reset_group_size", 1)),
        "seq_len": getattr(algo_cfg, "seq_len", None),
        "seqs_per_state_reset": int(getattr(algo_cfg, "seqs_per_state_reset", -1)),
    }
    collector = Collector(
        env,
        algo.acting_policy,
        trainer.buffer_size,
        trainer.seed + rank,
        horizons_per_env_reset=trainer.horizons_per_env_reset,
        deterministic=trainer.deterministic_collect,
        action_mean=cfg.store.action_mean,
        **options,
    )
    if compile_decision(trainer.compile, algo.device):  # trainer.compile: the policy's act step
        stepper = collector.stepper
        stepper.act_step = compile_step(stepper.act_step, "act step", announce=rank == 0)
    return collector


def learner_state(algo: BaseAlgorithm) -> dict[str, Any]:
    """A checkpoint's ``policy`` and ``algo`` entries: weights + statistics, optimizer and schedules."""
    return {"policy": algo.policy.state_dict(), "algo": algo.state_dict()}


def load_learner_state(algo: BaseAlgorithm, state: dict[str, Any]) -> None:
    """Restore :func:`learner_state` (a checkpoint's other entries are ignored)."""
    algo.policy.load_state_dict(state["policy"])
    algo.load_state_dict(state["algo"])


def learn(
    algo: BaseAlgorithm,
    rollout: TensorDict,
    iteration: int,
    env_steps_before: int,
    total_env_steps: int,
    final_obs: TensorDict | None = None,
) -> dict[str, float]:
    """Advantage + update of ``rollout`` ``[N, T+1]`` as update ``iteration``: ``advantage/…``, ``update/…``.

    The schedules are positioned at ``env_steps_before`` of ``total_env_steps``. It is what the
    online iteration does between collecting and storing; offline re-updates call it.
    ``final_obs``: the rollout's sparse true final observations, which an off-policy update reads.
    """
    algo.set_progress(env_steps_before, total_env_steps)  # the advantage reads it too (RND's weight)
    metrics = {f"advantage/{k}": v for k, v in algo.compute_advantages(rollout).items()}
    return metrics | {
        f"update/{k}": v for k, v in update_algorithm(algo, rollout, iteration, final_obs).items()
    }


def update_algorithm(
    algo: BaseAlgorithm | OffPolicyAlgorithm,
    rollout: TensorDict,
    iteration: int | None,
    final_obs: TensorDict | None,
) -> dict[str, float]:
    """``algo.update(rollout, iteration)``, handing an off-policy algorithm the final observations too."""
    if isinstance(algo, OffPolicyAlgorithm):
        return algo.update(rollout, iteration, final_obs)
    return algo.update(rollout, iteration)
