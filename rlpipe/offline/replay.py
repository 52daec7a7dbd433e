"""Offline replay: re-run advantage + update over stored rollouts, from the weights that collected them.

Rollout k was collected by the weights after update k−1, and update k's minibatch shuffle depends
only on ``(trainer.seed, k)``. So re-updating rollout k from the online run's state after iteration
k−1 (policy + optimizer [+ GRPO reference]) with unchanged params reproduces the online update k bit
for bit on CPU; with the ``replay.algorithm`` overrides it shows what that update would have done.

Where that state comes from (non-chain mode, per rollout k):

1. the run's checkpoint k−1 (``<rollouts>/../checkpoints/ckpt-{k-1}.pt``), if it exists;
2. else the newest checkpoint j < k−1 of the same run (or the initial weights, j = 0), advanced by
   re-updating rollouts j+1 … k−1 with the run's own params (exact on CPU). This needs those
   rollouts and the run's params; ``checkpoint.every_iteration: true`` makes step 1 always apply.

Chain mode starts once (from that state for the first rollout, or from ``--from``) and re-updates
every rollout from the previous re-updated weights.

An off-policy replay algorithm (the run's own, or ``replay.algorithm.name: sac``) learns from the
stores instead: :mod:`rlpipe.offline.offpolicy_replay`.
"""

from __future__ import annotations

import copy
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch
from pydantic import ValidationError
from tensordict import TensorDict

from rlpipe.algorithms import BaseAlgorithm
from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, as_path
from rlpipe.artifacts.layout import ROLLOUT_NAME, RunLayout, iteration_from_name, numbered, rollout_name
from rlpipe.artifacts.lock import RunLock
from rlpipe.artifacts.removal import output_folder
from rlpipe.artifacts.shards import read_any_attrs
from rlpipe.build import learn, learner_state, load_learner_state
from rlpipe.config import (
    ConfigError,
    RunConfig,
    format_validation_error,
    merged_replay_policy,
    params_hash,
    replay_algorithm,
    training_hash,
)
from rlpipe.offline.offpolicy_replay import is_offpolicy, replay_offpolicy
from rlpipe.offline.rebuild import (
    load_algorithm_state,
    load_rollout,
    rebuild_algorithm,
    save_algorithm,
    spaces_of,
)
from rlpipe.offline.replay_eval import evaluate_replayed, online_eval_metrics
from rlpipe.offline.replay_plan import (
    PURPOSE,
    check_replay,
    missing_words,
    needs_weights,
    refuse_other_params,
)
from rlpipe.rollout import rollout_dims
from rlpipe.runtime.float_kernels import float_kernels, kernel_differences
from rlpipe.tracking import Tracker, open_tracker, source_run_id

__all__ = ["iteration_of", "replay", "replay_config", "update_once"]


def replay_config(cfg: RunConfig) -> RunConfig:
    """``cfg`` with ``replay.algorithm`` (``{name?, cfg?}``) merged over its ``algorithm`` block.

    A changed ``name`` starts from that algorithm's defaults; a ``null`` value keeps the run's own
    (so ``params.yaml`` can list a key for ``dvc exp run -S`` without changing anything). Raises
    ``ConfigError`` naming ``replay.algorithm…`` for unknown keys or values the algorithm rejects.
    ``replay.policy`` (an off-policy replay's) is merged over the ``policy`` block alike.
    """
    algorithm = replay_algorithm(cfg.algorithm, cfg.replay.algorithm)
    try:
        policy = merged_replay_policy(cfg.policy, cfg.replay.policy)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, "replay.policy")) from None
    return cfg.model_copy(update={"algorithm": algorithm, "policy": policy})


def iteration_of(attrs: dict[str, Any], path: AnyPath) -> int:
    """The iteration k of a stored rollout: its ``iteration`` attribute, else its file name."""
    if isinstance(attrs.get("iteration"), int):
        return attrs["iteration"]
    found = iteration_from_name(path)
    if found is None:
        raise StoreError(f"{path}: rollout has no iteration attribute and no iter-NNNNNN.zarr name")
    return found


def update_once(
    algo: BaseAlgorithm, rollout: TensorDict, attrs: dict[str, Any], iteration: int, iterations: int
) -> dict[str, float]:
    """Advantage + update of a stored rollout (``attrs``: its attributes) as online update ``iteration``.

    Schedules sit where the online run had them: after ``env_steps − N·T`` of ``iterations × N·T``
    env steps (N: every rank's envs). A K-rank iteration is minibatched as the K ranks drew it.
    """
    start = time.perf_counter()
    n, t = rollout_dims(rollout)
    before = int(attrs.get("env_steps", iteration * n * t)) - n * t
    algo.shards = int(attrs.get("world_size", 1))
    metrics = learn(algo, rollout, iteration, before, iterations * n * t)
    return metrics | {"time/update_s": time.perf_counter() - start}


# ---------------------------------------------------------------------------------------- replay


class _Reader:
    """Reads stored rollouts on one background thread, the next one while the current is updated."""

    def __init__(self, paths: dict[int, AnyPath], device: torch.device, allow_rejected: bool = False) -> None:
        self.allow_rejected = allow_rejected
        self.paths, self.device = paths, device
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rlpipe-replay-read")
        self._pending: dict[int, Future[tuple[TensorDict, dict[str, Any]]]] = {}

    def path(self, k: int, why: str) -> AnyPath:
        """Path of rollout ``k``; a ``StoreError`` saying ``why`` it is needed when it is missing."""
        if k not in self.paths:
            root = next(iter(self.paths.values())).parent
            raise StoreError(f"{root / rollout_name(k)}: {missing_words(self.paths)}; {why}")
        return self.paths[k]

    def get(self, k: int, why: str) -> tuple[TensorDict, dict[str, Any], float]:
        """``(rollout, attrs, seconds waited)`` of rollout ``k``; starts reading ``k + 1``."""
        future = self._pending.pop(k, None) or self._submit(k, why)
        if k + 1 in self.paths and k + 1 not in self._pending:
            self._pending[k + 1] = self._submit(k + 1, why)
        start = time.perf_counter()
        rollout, attrs = future.result()
        return rollout, attrs, time.perf_counter() - start

    def _submit(self, k: int, why: str) -> Future[tuple[TensorDict, dict[str, Any]]]:
        return self._pool.submit(load_rollout, self.path(k, why), self.device, self.allow_rejected, PURPOSE)

    def close(self) -> None:
        """Stop the reader thread (pending reads are dropped)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


class _Replay:
    """``online``: the online run's algorithm, rebuilt on demand; ``algo``: where re-updates happen.

    With unchanged algorithm params the two are the same object; otherwise ``algo`` is built
    from the replay params and takes its start state from ``online``.
    """

    def __init__(
        self, cfg: RunConfig, layout: RunLayout, stored: dict[int, AnyPath], allow_rejected: bool = False
    ) -> None:
        self.cfg, self.rcfg, self.layout = cfg, replay_config(cfg), layout
        first_attrs = read_any_attrs(next(iter(stored.values())))
        self.spaces = first_attrs.get("spaces")
        spaces = spaces_of({"spaces": self.spaces}, next(iter(stored.values())))
        self.online = rebuild_algorithm(cfg, spaces)
        note_other_kernels(first_attrs.get("float_kernels"), layout.root)
        self.same = self.rcfg.algorithm == cfg.algorithm
        self.algo = self.online if self.same else rebuild_algorithm(self.rcfg, spaces)
        self.initial = copy.deepcopy(self.online.state_dict())
        self.reader = _Reader(stored, self.online.device, allow_rejected)
        self.checkpoint_dir, self.checkpoints = layout.checkpoints, layout.checkpoint_paths()
        self.at: int | None = 0  # ``online`` holds the online state after iteration ``at``
        self.from_disk, self.rebuilt, self.other_run = False, 0, set()

    def reach(self, m: int, want: str | None, k: int) -> None:
        """Put the online run's state after iteration ``m`` into ``online`` (for re-updating ``k``)."""
        why = needs_weights(k, m, self.checkpoint_dir)
        for j in sorted((j for j in self.checkpoints if j <= m), reverse=True):
            if self.at == j == m and self.from_disk:
                return
            if self.at is not None and j <= self.at <= m and j < m:
                break  # what is in memory is at least as far as this checkpoint
            state = self._same_run(j, want)
            if state is not None:
                load_algorithm_state(self.online, self.checkpoints[j], state)
                self.at, self.from_disk = j, True
                break
        else:
            if self.at is None or self.at > m:
                self.online.load_state_dict(copy.deepcopy(self.initial))
                self.at, self.from_disk = 0, False
        if not (self.at == m and self.from_disk):
            refuse_other_params(self.reader.path(k, why), training_hash(self.cfg), want, m, why)
        while self.at < m:
            rollout, attrs, _ = self.reader.get(self.at + 1, why)
            update_once(self.online, rollout, attrs, self.at + 1, self.cfg.trainer.iterations)
            self.at, self.from_disk, self.rebuilt = self.at + 1, False, self.rebuilt + 1

    def _same_run(self, j: int, want: str | None) -> dict[str, Any] | None:
        """Checkpoint ``j``'s state if the run that wrote the rollouts wrote it, else ``None``."""
        if j in self.other_run:
            return None
        state = load_checkpoint(self.checkpoints[j])
        got = state.get("training_hash")
        if want is None or got is None or got == want:
            return state
        self.other_run.add(j)  # e.g. kept by DVC (persist) from a run with other params
        return None

    def start_chain(self, first: int, want: str | None, start: AnyPath | None) -> None:
        """Load the chain's start: checkpoint ``start``, or the online state before ``first``."""
        if start is None:
            self.reach(first - 1, want, first)
        else:
            load_algorithm_state(self.online, start)
            self.at = None
        self.fork()

    def fork(self) -> None:
        """Copy the online state into ``algo`` (a separate one only when the params changed)."""
        if self.same:
            return
        load_learner_state(self.algo, copy.deepcopy(learner_state(self.online)))

    def update(self, k: int, rollout: TensorDict, attrs: dict[str, Any]) -> dict[str, float]:
        """Re-update rollout ``k`` on ``algo``."""
        metrics = update_once(self.algo, rollout, attrs, k, self.cfg.trainer.iterations)
        if self.same:
            self.at = k if self.at == k - 1 else None
            self.from_disk = False
        return metrics


def note_other_kernels(recorded: dict[str, str] | None, run: AnyPath) -> None:
    """One stderr line when the run was recorded with other float kernels than this process has.

    Replay reproduces a run bit for bit only where it computes with the same kernels (see
    :mod:`rlpipe.runtime.float_kernels`); elsewhere the last bits differ and the difference grows
    with every update, which the user should hear before comparing numbers.
    """
    differences = kernel_differences(recorded, float_kernels()) if recorded else []
    if differences:
        shown = "; ".join(differences[:3]) + (
            f"; {len(differences) - 3} more" if len(differences) > 3 else ""
        )
        print(
            f"Note: {run} was recorded with other float kernels ({shown}): replay is bit-exact only "
            "on the machine and torch build that ran it; here expect last-bit differences that grow "
            "with each update",
            file=sys.stderr,
        )


def replay(
    cfg: RunConfig,
    rollouts: AnyPath,
    out: AnyPath,
    iterations: tuple[int, int] | None = None,
    chain: bool = False,
    start: AnyPath | None = None,
    allow_rejected: bool = False,
) -> dict[str, Any]:
    """Re-update stored rollouts offline; write ``out/checkpoints``, ``out/metrics.json``, ``out/curve.csv``.

    ``rollouts``: a folder of ``iter-NNNNNN.zarr`` stores; the run's checkpoints are read from the
    ``checkpoints`` folder beside it. ``iterations``: ``(A, B)``, both included (default: every
    stored rollout). Each rollout k is re-updated with ``cfg`` plus the ``replay.algorithm``
    overrides, from the online state after k−1 (see the module docstring), or, with ``chain``,
    from the previous re-updated weights, starting from ``start`` or the online state before A.
    Checkpoint k is written for every k (same file format as online, policy and algorithm only; retention
    ``checkpoint.keep_last``). Rollouts the non-finite guard rejected are refused unless
    ``allow_rejected``. ``out`` is locked while it is written. Returns the summary (``metrics.json``).
    An off-policy replay algorithm (SAC, TD3) instead trains a fresh learner on every stored rollout
    (:mod:`rlpipe.offline.offpolicy_replay`).
    """
    rollouts, written = as_path(rollouts), RunLayout(out)
    if start is not None and not chain:
        raise ConfigError("replay: a start checkpoint (--from) replays a chain; add --chain")
    layout = RunLayout.of_rollouts(rollouts)
    stored = numbered(rollouts, ROLLOUT_NAME)
    if written.checkpoints.resolve() == layout.checkpoints.resolve():
        raise StoreError(
            f"{written.root}: replay would overwrite the run's own checkpoints; choose another out"
        )
    rcfg = replay_config(cfg)  # a replay.algorithm the algorithm rejects, before any folder is made
    if is_offpolicy(rcfg):  # a fresh off-policy learner fed every stored rollout
        return replay_offpolicy(cfg, rcfg, layout, stored, written, iterations, start, allow_rejected)
    ks = _select(stored, rollouts, iterations, chain)
    check_replay(cfg, rollouts, stored, ks, chain, start, allow_rejected)
    with output_folder(written.root), RunLock(written.root, "rlpipe replay"):
        return _replay_locked(cfg, layout, stored, ks, chain, start, written, allow_rejected)


def _replay_locked(
    cfg: RunConfig,
    layout: RunLayout,
    stored: dict[int, AnyPath],
    ks: list[int],
    chain: bool,
    start: AnyPath | None,
    out: RunLayout,
    allow_rejected: bool,
) -> dict[str, Any]:
    job = _Replay(cfg, layout, stored, allow_rejected)
    try:
        with open_tracker(
            job.rcfg, out.root, kind="replay", parent_run_id=source_run_id(layout.root)
        ) as tracker:
            summary = _loop(job, ks, chain, start, out.checkpoints, tracker)
            tracker.finish(summary)
    finally:
        job.reader.close()
    return summary


def _select(
    stored: dict[int, AnyPath], root: AnyPath, iterations: tuple[int, int] | None, chain: bool
) -> list[int]:
    if not stored:
        raise StoreError(f"{root}: no rollout stores (iter-NNNNNN.zarr) here")
    first, last = iterations if iterations else (min(stored), max(stored))
    if first < 1 or last < first:
        raise ConfigError(f"replay: iterations {first}:{last} is not a range A:B with 1 <= A <= B")
    wanted = range(first, last + 1) if iterations or chain else sorted(stored)
    missing = [k for k in wanted if k not in stored]
    if missing:
        raise StoreError(
            f"{root / rollout_name(missing[0])}: {missing_words(stored)}; replaying iterations "
            f"{first}:{last}{' as a chain' if chain else ''} needs it"
        )
    return list(wanted)


def _loop(
    job: _Replay, ks: list[int], chain: bool, start: AnyPath | None, directory: AnyPath, tracker: Tracker
) -> dict[str, Any]:
    begin, transitions, update_s = time.perf_counter(), 0, 0.0
    metrics: dict[str, float] = {}
    path = None
    for k in ks:
        tick = time.perf_counter()
        rollout, attrs, waited = job.reader.get(k, f"it is in the range to replay (iteration {k})")
        want = attrs.get("training_hash")
        if chain and k == ks[0]:
            job.start_chain(k, want, start)
        elif not chain:
            job.reach(k - 1, want, k)
            job.fork()
        metrics = job.update(k, rollout, attrs)
        origin = {"rollout": str(job.reader.paths[k]), "start": str(start) if start else None}
        path = save_algorithm(
            job.algo, job.rcfg, directory, k, int(attrs.get("env_steps", 0)), origin, job.spaces
        )
        n, t = rollout_dims(rollout)
        elapsed = time.perf_counter() - tick
        transitions, update_s = transitions + n * t, update_s + metrics["time/update_s"]
        metrics |= {
            "iteration": float(k),
            "env_steps": float(attrs.get("env_steps", 0)),
            "time/read_wait_s": waited,
            "time/iteration_s": elapsed,
            "time/sps": n * t / elapsed,
        }
        if k == ks[-1]:  # the replayed policy, evaluated as the online run evaluated its own
            metrics |= evaluate_replayed(job.rcfg, job.algo.policy, job.algo.device, job.layout)
        tracker.log(metrics, step=int(attrs.get("env_steps", 0)))
    wall = time.perf_counter() - begin
    return {
        "iterations": len(ks),
        "first_iteration": ks[0],
        "last_iteration": ks[-1],
        "chain": chain,
        "transitions": transitions,
        "wall_s": round(wall, 3),
        "update_s": round(update_s, 3),
        "transitions_per_s": transitions / wall,
        "rebuilt_updates": job.rebuilt,
        "params_changed": not job.same,
        "params_hash": params_hash(job.rcfg),
        **{key: v for key, v in metrics.items() if key.startswith(("update/", "eval/"))},
        **(online_eval_metrics(job.layout, ks[-1]) if any(k.startswith("eval/") for k in metrics) else {}),
        "checkpoint": str(path),
    }
