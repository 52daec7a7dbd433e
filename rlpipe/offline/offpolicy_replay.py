"""Off-policy learning from a run's stores: a fresh SAC/TD3 learner fed every stored rollout, no simulator.

``rlpipe replay RUN`` takes this path when the replay algorithm (the run's own, or
``replay.algorithm.name``) is off-policy. The learner is built from the replay params (``algorithm``
and ``policy`` with ``replay.algorithm`` / ``replay.policy`` merged over them) with the run's seed,
so its initial weights are the online run's. Each stored rollout k, in iteration order, goes
through :func:`rlpipe.build.learn` with its stored final observations, exactly as the online loop
hands it the collector's: the ring fills in the same order and the gradient steps draw from the
generator seeded by ``(trainer.seed, k)``. So an off-policy run replayed with unchanged params ends
with its online policy and critics bit for bit on CPU; any other run's stores (a PPO run's, every
stored one of ``store.every``) teach a new learner offline.

A store that is not complete and exact (``store.envs``, ``store.precision``) is refused in one line.
Another algorithm's actions are clamped into the action space's bounds (the env applied them so);
an off-policy run's own lie within them already.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import torch
from tensordict import TensorDict

from rlpipe.algorithms import BaseAlgorithm
from rlpipe.artifacts.errors import RefusedStoreError, StoreError
from rlpipe.artifacts.fs import AnyPath
from rlpipe.artifacts.layout import RunLayout
from rlpipe.artifacts.lock import RunLock
from rlpipe.artifacts.removal import output_folder
from rlpipe.artifacts.shards import read_any_attrs, read_any_final_obs
from rlpipe.build import learn
from rlpipe.config import ConfigError, RunConfig, params_hash
from rlpipe.config.offpolicy import OffPolicyCfg
from rlpipe.offline.rebuild import rebuild_algorithm, refuse_unusable, save_algorithm, spaces_of
from rlpipe.offline.replay_eval import evaluate_replayed, online_eval_metrics
from rlpipe.refused import RefusedDataError
from rlpipe.rollout import rollout_dims
from rlpipe.rollout_checks import RolloutError, check_finite
from rlpipe.tracking import Tracker, open_tracker, source_run_id

__all__ = [
    "PURPOSE",
    "action_bounds",
    "build_learner",
    "is_offpolicy",
    "load_with_final_obs",
    "replay_offpolicy",
]

PURPOSE = "off-policy learning from the stores"
"""What the stores feed: every transition the run saw, so each must be complete and exact."""


def is_offpolicy(rcfg: RunConfig) -> bool:
    """True when the replay params' algorithm is off-policy (SAC, TD3, or a plug-in of their kind)."""
    return isinstance(rcfg.algorithm.cfg, OffPolicyCfg)


def replay_offpolicy(
    cfg: RunConfig,
    rcfg: RunConfig,
    layout: RunLayout,
    stored: dict[int, AnyPath],
    out: RunLayout,
    iterations: tuple[int, int] | None = None,
    start: AnyPath | None = None,
    allow_rejected: bool = False,
) -> dict[str, Any]:
    """Train a fresh ``rcfg`` learner on the stored rollouts ``stored`` (``{k: path}``) in order.

    ``cfg``: the run's params; ``rcfg``: with the replay overrides. ``iterations``: ``(A, B)``,
    the stored rollouts A … B (default: all). Writes ``out/checkpoints/ckpt-k.pt`` after each
    rollout k, ``out/metrics.json`` and ``out/curve.csv``, and evaluates the final policy as the
    online run evaluated its own. Everything it refuses (``--from``, an unusable store, replay params
    the spaces reject) is refused before ``out`` exists. Returns the summary.
    """
    if start is not None:
        raise ConfigError(
            f"--from: an off-policy replay ({rcfg.algorithm.name}) trains a fresh learner from the "
            "initial weights; drop --from"
        )
    ks = _select(stored, layout, iterations)
    for k in ks:
        refuse_unusable(stored[k], read_any_attrs(stored[k]), allow_rejected, PURPOSE)
    spaces_record = read_any_attrs(stored[ks[0]]).get("spaces")
    spaces = spaces_of({"spaces": spaces_record}, stored[ks[0]])
    algo = build_learner(cfg, rcfg, spaces)
    own = isinstance(cfg.algorithm.cfg, OffPolicyCfg)  # its actions lie within the bounds already
    bounds = None if own else action_bounds(spaces[1], algo.device)
    with output_folder(out.root), RunLock(out.root, "rlpipe replay"):
        with open_tracker(rcfg, out.root, kind="replay", parent_run_id=source_run_id(layout.root)) as tracker:
            job = _Feed(cfg, rcfg, algo, layout, spaces_record, allow_rejected, bounds)
            summary = job.run(ks, stored, out.checkpoints, tracker)
            tracker.finish(summary)
    return summary


def _select(stored: dict[int, AnyPath], layout: RunLayout, iterations: tuple[int, int] | None) -> list[int]:
    """The stored iterations within ``iterations`` (all of them by default), in order."""
    if not stored:
        raise StoreError(f"{layout.rollouts}: no rollout stores (iter-NNNNNN.zarr) here")
    first, last = iterations if iterations else (min(stored), max(stored))
    if first < 1 or last < first:
        raise ConfigError(f"replay: iterations {first}:{last} is not a range A:B with 1 <= A <= B")
    ks = [k for k in sorted(stored) if first <= k <= last]
    if not ks:
        raise StoreError(f"{layout.rollouts}: no rollout of iterations {first}:{last} is stored")
    return ks


def build_learner(cfg: RunConfig, rcfg: RunConfig, spaces: tuple[Any, Any]) -> BaseAlgorithm:
    """The fresh learner of ``rcfg`` (the online run's initial weights when unchanged).

    Where the replay params change the learner, a ``ConfigError`` of an ``algorithm`` or ``policy``
    key names it below ``replay.``: the key to set for this replay.
    """
    try:
        return rebuild_algorithm(rcfg, spaces)
    except ConfigError as exc:
        message = str(exc)
        changed = rcfg.algorithm != cfg.algorithm or rcfg.policy != cfg.policy
        if changed and message.startswith(("algorithm.", "policy.")):
            raise ConfigError(f"replay.{message}") from None
        raise


def load_with_final_obs(
    path: AnyPath, device: torch.device, allow_rejected: bool
) -> tuple[TensorDict, dict[str, Any], TensorDict | None]:
    """A stored rollout ``[N, T+1]``, its attributes and its final observations ``[K]``, checked finite.

    A store the learner cannot use (see :func:`refuse_unusable`), or one with truncations but no
    final observations, is a one-line ``StoreError`` naming ``path``.
    """
    rollout, attrs, final_obs = read_any_final_obs(path, device)
    refuse_unusable(path, attrs, allow_rejected, PURPOSE)
    horizon = rollout.batch_size[1] - 1
    truncated = rollout["truncated"][:, :horizon] & ~rollout["terminated"][:, :horizon]
    if final_obs is None and bool(truncated.any()):
        raise StoreError(
            f"{path}: episodes hit their time limit here but the store keeps no final observations "
            f"(final_obs); {PURPOSE} bootstraps from them, so it is refused"
        )
    try:
        check_finite(rollout, attrs.get("iteration"))
    except RolloutError as exc:
        kind = RefusedStoreError if isinstance(exc, RefusedDataError) else StoreError
        raise kind(f"{path}: {exc}") from None
    return rollout, attrs, final_obs


class _Feed:
    """Feeds the stored rollouts to the learner one by one, checkpointing and logging each."""

    def __init__(
        self,
        cfg: RunConfig,
        rcfg: RunConfig,
        algo: BaseAlgorithm,
        layout: RunLayout,
        spaces: dict[str, Any] | None,
        allow_rejected: bool,
        bounds: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> None:
        self.cfg, self.rcfg, self.algo, self.layout = cfg, rcfg, algo, layout
        self.spaces, self.allow_rejected = spaces, allow_rejected
        self.bounds = bounds
        """``(low, high)`` ``[A]``: another algorithm's actions are clamped into them (``None``: kept)."""

    def run(
        self, ks: list[int], stored: dict[int, AnyPath], directory: AnyPath, tracker: Tracker
    ) -> dict[str, Any]:
        """Learn from rollouts ``ks`` in order; return the summary (``metrics.json``)."""
        begin, transitions, update_s = time.perf_counter(), 0, 0.0
        metrics: dict[str, float] = {}
        path: AnyPath | None = None
        for k in ks:
            tick = time.perf_counter()
            rollout, attrs, final_obs = load_with_final_obs(stored[k], self.algo.device, self.allow_rejected)
            metrics = self.learn_one(k, rollout, attrs, final_obs)
            env_steps = int(attrs.get("env_steps", 0))
            origin = {"rollout": str(stored[k]), "start": None}
            path = save_algorithm(self.algo, self.rcfg, directory, k, env_steps, origin, self.spaces)
            n, t = rollout_dims(rollout)
            elapsed = time.perf_counter() - tick
            transitions, update_s = transitions + n * t, update_s + metrics["time/update_s"]
            metrics |= {
                "iteration": float(k),
                "env_steps": float(env_steps),
                "time/iteration_s": elapsed,
                "time/sps": n * t / elapsed,
            }
            if k == ks[-1]:  # the learned policy, evaluated as the online run evaluated its own
                metrics |= evaluate_replayed(self.rcfg, self.algo.policy, self.algo.device, self.layout)
            tracker.log(metrics, step=env_steps)
        return self.summary(ks, metrics, transitions, time.perf_counter() - begin, update_s, path)

    def learn_one(
        self, k: int, rollout: TensorDict, attrs: dict[str, Any], final_obs: TensorDict | None
    ) -> dict[str, float]:
        """Online update ``k`` on stored rollout ``rollout`` ``[N, T+1]``: the ring takes it, the steps run.

        The schedules sit after ``env_steps − N·T`` of ``iterations × N·T`` env steps, as online.
        """
        start = time.perf_counter()
        n, t = rollout_dims(rollout)
        if self.bounds is not None:
            rollout.set("action", rollout["action"].clamp(*self.bounds))
        before = int(attrs.get("env_steps", k * n * t)) - n * t
        metrics = learn(self.algo, rollout, k, before, self.cfg.trainer.iterations * n * t, final_obs)
        return metrics | {"time/update_s": time.perf_counter() - start}

    def summary(
        self,
        ks: list[int],
        metrics: dict[str, float],
        transitions: int,
        wall: float,
        update_s: float,
        path: AnyPath | None,
    ) -> dict[str, Any]:
        """``metrics.json``: what was fed, how fast, the last update's and the final eval's metrics."""
        evaluated = any(key.startswith("eval/") for key in metrics)
        return {
            "iterations": len(ks),
            "first_iteration": ks[0],
            "last_iteration": ks[-1],
            "chain": True,
            "off_policy": True,
            "algorithm": self.rcfg.algorithm.name,
            "source_algorithm": self.cfg.algorithm.name,
            "transitions": transitions,
            "wall_s": round(wall, 3),
            "update_s": round(update_s, 3),
            "transitions_per_s": transitions / wall,
            "rebuilt_updates": 0,
            "params_changed": self.rcfg.algorithm != self.cfg.algorithm
            or self.rcfg.policy != self.cfg.policy,
            "params_hash": params_hash(self.rcfg),
            **{key: v for key, v in metrics.items() if key.startswith(("update/", "eval/"))},
            **(online_eval_metrics(self.layout, ks[-1]) if evaluated else {}),
            "checkpoint": str(path),
        }


def action_bounds(space: gym.Space, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(low, high)`` ``[A]`` of a Box action space (the off-policy learners refuse any other)."""
    assert isinstance(space, gym.spaces.Box)
    low = torch.as_tensor(space.low, dtype=torch.float32, device=device)
    return low, torch.as_tensor(space.high, dtype=torch.float32, device=device)
