"""Process bodies of test_distributed.py (spawned, so they live in an importable module)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from _offline_fixtures import tiny_cfg
from tensordict import TensorDict

import rlpipe.algorithms.base as algo_base
import rlpipe.algorithms.ppo as ppo_module
from rlpipe.build import learn
from rlpipe.runtime.distributed import shutdown
from rlpipe.trainer import Trainer


def torchrun_env(rank: int, world: int, port: int) -> None:
    """The variables torchrun sets, for one process on one node."""
    os.environ.update(
        {
            "RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
    )


def save_rollout(rollout: TensorDict, path: Path) -> None:
    """Plain tensors, so ``torch.load(weights_only=True)`` reads them back."""
    torch.save({"batch_size": list(rollout.batch_size), "data": rollout.to_dict()}, path)


def load_rollout(path: Path) -> TensorDict:
    saved = torch.load(path, weights_only=True)
    return TensorDict(saved["data"], batch_size=saved["batch_size"])


def jobs(rank: int, world: int, port: int, todo: list[tuple[str, Path, list[str], bool]]) -> None:
    """Rank ``rank``: run every job of ``todo`` in turn, in one process group.

    A job is ``("collectives", folder, [], _)`` (:func:`collectives`) or ``("update", folder, overrides,
    sync)`` (:func:`one_update`). Each job builds its own parts; the group is made once and reused.
    """
    torchrun_env(rank, world, port)
    torch.set_num_threads(1)
    try:
        for kind, work, overrides, sync in todo:
            if kind == "collectives":
                collectives(rank, work)
            else:
                one_update(rank, work, overrides, sync)
    finally:
        dist.destroy_process_group()


def one_update(rank: int, work: Path, overrides: list[str], sync: bool) -> None:
    """Load the shared initial weights, update once on this rank's env slice, save the policy.

    Saves ``work/rank-{rank}-sync.pt``; ``sync=False`` disables the gradient all-reduce (the
    negative control) and saves ``rank-{rank}-nosync.pt``.
    """
    real = algo_base.average_gradients
    if not sync:
        algo_base.average_gradients = _no_sync
    try:
        tag = "sync" if sync else "nosync"
        cfg = tiny_cfg(work / f"data-{tag}", "trainer.distributed=true", *overrides)
        exp = Trainer(cfg).parts
        exp.algo.policy.load_state_dict(torch.load(work / "init.pt", weights_only=True))
        rollout = load_rollout(work / "rollout.pt")
        n = exp.env.num_envs
        learn(
            exp.algo,
            rollout[rank * n : (rank + 1) * n].clone(),
            1,
            0,
            cfg.trainer.iterations * exp.steps_per_iteration,
        )
        torch.save(exp.algo.policy.state_dict(), work / f"rank-{rank}-{tag}.pt")
    finally:
        algo_base.average_gradients = real


def _no_sync(params: Any) -> None:
    del params


def collectives(rank: int, work: Path) -> None:
    """Feed rank-dependent values to every collective rlpipe uses; save what came back."""
    exp = Trainer(
        tiny_cfg(
            work / "data",
            "trainer.distributed=true",
            "algorithm.cfg.target_kl=0.1",
            "trainer.enable_eval=true",
        )
    ).parts
    initial = [p.detach().clone() for p in exp.algo.policy.parameters()]
    for p in exp.algo.policy.parameters():
        p.grad = torch.full_like(p, float(rank + 1))
    algo_base.average_gradients(exp.algo.policy.parameters())
    x = torch.arange(5.0) + 10 * rank
    torch.save(
        {
            "initial": initial,
            "grads": [p.grad.clone() for p in exp.algo.policy.parameters()],
            "kl_mean": float(exp.algo.kl_rules.global_mean(torch.tensor(float(rank)))),
            "early_stop": exp.algo.kl_rules.stop_after(torch.tensor(float(rank))),
            "normalized": ppo_module.global_normalize(x),
            "steps_per_iteration": exp.steps_per_iteration,
            "has_evaluator": exp.evaluator is not None,
        },
        work / f"coll-{rank}.pt",
    )


def train(rank: int, world: int, port: int, runs: list[tuple[Path, list[str], bool]]) -> None:
    """Rank ``rank`` of ``world``-rank ``rlpipe run``s of the tiny params, one after the other.

    ``runs``: ``(data_dir, overrides, resume)`` each; they share this process and its process group.
    """
    torchrun_env(rank, world, port)
    torch.set_num_threads(1)
    try:
        for data_dir, overrides, resume in runs:
            Trainer(tiny_cfg(data_dir, "trainer.distributed=true", *overrides), resume=resume).train()
    finally:
        shutdown()


def train_recording(rank: int, world: int, port: int, data_dir: Path, overrides: list[str], key: str) -> None:
    """Rank ``rank`` of a ``world``-rank run of the tiny params; saves metric ``key`` of every iteration.

    Writes ``data_dir/rank-{rank}.pt``: ``[metrics[key] of iteration 1, 2, …]`` as this rank saw them.
    """
    torchrun_env(rank, world, port)
    torch.set_num_threads(1)
    seen: list[float] = []
    try:
        trainer = Trainer(tiny_cfg(data_dir, "trainer.distributed=true", *overrides))
        trainer.add_event("after_update", lambda ctx: seen.append(float(ctx.metrics[key])))
        trainer.train()
        torch.save(seen, data_dir / f"rank-{rank}.pt")
    finally:
        shutdown()
