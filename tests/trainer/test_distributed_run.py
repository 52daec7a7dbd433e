"""A 2-rank CPU run end to end: shards, one checkpoint series, one MLflow run, resume and replay."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from _dist_workers import train, train_recording
from _offline_fixtures import STEPS, assert_same_learner, learner, tiny_cfg
from click.testing import CliRunner

from rlpipe.artifacts.shards import read_any
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.cli import cli
from rlpipe.offline.replay import replay
from rlpipe.tracking.mlflow_query import search_runs

RUN_DIR = Path("cartpole_ppo")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


Online = tuple[Path, str, Path]
"""The online run's directory, its MLflow URI, and the data dir of its 2-iteration twin."""


def train_2_ranks(*runs: tuple[Path, list[str], bool]) -> None:
    """``(data_dir, overrides, resume)`` runs, in turn, in one spawn of two ranks."""
    mp.spawn(train, args=(2, free_port(), list(runs)), nprocs=2, join=True)


@pytest.fixture(scope="module")
def online(tmp_path_factory: pytest.TempPathFactory) -> Online:
    """4 iterations on 2 ranks × 8 envs, tracked in a fresh MLflow store; eval on (rank 0 only).

    The same spawn then runs the first 2 iterations of it again elsewhere, untracked (the third
    element: its data dir), for the resume test, whose resume runs in fresh processes.
    """
    root = tmp_path_factory.mktemp("dist")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    tracked = ["tracking.backend=mlflow", f"tracking.uri={uri}", "trainer.enable_eval=true"]
    online_run = (root / "data", tracked, False)
    train_2_ranks(online_run, (root / "split", ["trainer.iterations=2"], False))
    return root / "data" / RUN_DIR, uri, root / "split"


def test_two_shards_per_iteration_with_rank_and_world_size(online: Online) -> None:
    run_dir, _, _ = online
    iterations = sorted(p.name for p in (run_dir / "rollouts").iterdir())
    assert iterations == [f"iter-{k:06d}.zarr" for k in range(1, 5)]
    for k in range(1, 5):
        folder = run_dir / "rollouts" / f"iter-{k:06d}.zarr"
        assert sorted(p.name for p in folder.iterdir()) == ["rank-0", "rank-1"]
        shards = [read_rollout(folder / f"rank-{r}") for r in range(2)]
        assert [(a["rank"], a["world_size"], a["iteration"]) for _, a in shards] == [(0, 2, k), (1, 2, k)]
        assert not torch.equal(shards[0][0]["obs"], shards[1][0]["obs"])  # seed + rank: other envs
        joined, attrs = read_any(folder)
        assert joined.batch_size == torch.Size([16, 17]) and "rank" not in attrs
        assert attrs["env_steps"] == k * 2 * STEPS


def test_rank_zero_alone_checkpoints_and_logs(online: Online) -> None:
    run_dir, uri, _ = online
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("ckpt-*.pt")) == [
        "ckpt-000001.pt",
        "ckpt-000002.pt",
        "ckpt-000003.pt",
        "ckpt-000004.pt",
    ]  # save_freq: 2 × 128 steps
    summary = json.loads((run_dir / "metrics.json").read_text())
    assert summary["iterations"] == 4 and summary["env_steps"] == 4 * 2 * STEPS
    assert any(key.startswith("eval/") for key in summary)
    curve = (run_dir / "curve.csv").read_text().splitlines()
    assert len(curve) == 1 + 4
    runs = search_runs(uri)
    assert len(runs) == 1 and runs[0].tags["rlpipe.world_size"] == "2"


def test_inspect_shows_both_shards(online: Online) -> None:
    run_dir, _, _ = online
    result = CliRunner().invoke(cli, ["inspect", str(run_dir / "rollouts" / "iter-000001.zarr"), "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert [s["attrs"]["rank"] for s in info["shards"]] == [0, 1]
    assert [s["num_envs"] for s in info["shards"]] == [8, 8]


def test_replay_in_one_process_equals_the_two_rank_run(online: Online, tmp_path: Path) -> None:
    run_dir, _, _ = online
    cfg = tiny_cfg(run_dir.parent, "trainer.enable_eval=true")  # the online params
    replay(cfg, run_dir / "rollouts", tmp_path, chain=True)
    online_state, replayed = (
        learner(run_dir / "checkpoints" / "ckpt-000004.pt"),
        learner(tmp_path / "checkpoints" / "ckpt-000004.pt"),
    )
    assert online_state.keys() == replayed.keys()
    tensors = [k for k, v in online_state.items() if isinstance(v, torch.Tensor) and v.is_floating_point()]
    assert len(tensors) >= 12
    for key in tensors:
        torch.testing.assert_close(replayed[key], online_state[key], rtol=1e-4, atol=1e-5, msg=key)


def test_two_rank_resume_equals_the_uninterrupted_run(online: Online) -> None:
    run_dir, _, split = online
    train_2_ranks((split, ["trainer.iterations=4"], True))
    resumed = split / RUN_DIR
    final = Path("checkpoints") / "ckpt-000004.pt"
    assert_same_learner(run_dir / final, resumed / final)
    for k in (3, 4):
        for r in range(2):
            a, _ = read_rollout(run_dir / "rollouts" / f"iter-{k:06d}.zarr" / f"rank-{r}")
            b, _ = read_rollout(resumed / "rollouts" / f"iter-{k:06d}.zarr" / f"rank-{r}")
            assert torch.equal(a["obs"], b["obs"]) and torch.equal(a["action"], b["action"])


RND_WEIGHT_POINTS = [[0, 1.0], [128, 0.5], [256, 0.25], [384, 0.125], [512, 0.0625]]
"""RND's intrinsic weight steps down at every rank's iteration (128 steps) and at every 2-rank one (256)."""


def test_two_rank_rnd_weight_follows_every_ranks_env_steps(tmp_path: Path) -> None:
    rnd = json.dumps({"hidden_sizes": [8], "weight": 1.0, "weight_schedule": RND_WEIGHT_POINTS})
    overrides = [f"algorithm.cfg.rnd={rnd}", "trainer.iterations=3", "store.enabled=false"]
    mp.spawn(
        train_recording,
        args=(2, free_port(), tmp_path, overrides, "advantage/rnd_weight"),
        nprocs=2,
        join=True,
    )
    weights = [torch.load(tmp_path / f"rank-{r}.pt") for r in range(2)]
    # iteration k's advantages weigh the novelty at the env steps both ranks collected before it: 0, 256, 512
    assert weights == [[1.0, 0.25, 0.0625]] * 2
