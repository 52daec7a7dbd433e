"""torch.distributed on CPU (gloo, 2 spawned processes): setup errors and update equivalence."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from _dist_workers import jobs, save_rollout
from _offline_fixtures import tiny_cfg
from click.testing import CliRunner

from rlpipe.build import learn
from rlpipe.cli import cli
from rlpipe.config import ConfigError
from rlpipe.runtime.distributed import (
    DistContext,
    global_normalize,
    init_distributed,
    launched_by_torchrun,
    rank_device,
    sharded_minibatch_indices,
)
from rlpipe.trainer import Trainer

N = 4
"""Envs per rank; the single-process reference runs 2N."""
EQUIV = [
    "trainer.buffer_size=16",
    "algorithm.cfg.batch_size=16",
    "algorithm.cfg.n_epochs=2",
    "algorithm.cfg.schedule=adaptive",
    "algorithm.cfg.desired_kl=0.002",
]
"""Per rank: 4 envs × 16 steps = 64 samples, 4 minibatches of 16 per epoch; the adaptive lr makes
the update depend on the (global) KL of every minibatch."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_single_process_without_launcher() -> None:
    assert init_distributed("cpu", False, environ={}) == DistContext(device=torch.device("cpu"))
    assert not launched_by_torchrun({})
    assert launched_by_torchrun({"RANK": "0", "WORLD_SIZE": "2"})


def test_distributed_without_launcher_variables_is_one_line() -> None:
    expected = r"^trainer\.distributed: .*MASTER_ADDR.* not set; launch with"
    with pytest.raises(ConfigError, match=expected) as err:
        init_distributed("cpu", True, environ={"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"})
    assert "\n" not in str(err.value)


def test_rank_outside_world_and_missing_device() -> None:
    env = {"RANK": "2", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "x", "MASTER_PORT": "1"}
    with pytest.raises(ConfigError, match="RANK=2 is outside WORLD_SIZE=2"):
        init_distributed("cpu", True, environ=env)
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match=r"trainer\.device: 'cuda:0' requested but this machine has no"):
            init_distributed("cuda:0", True, environ=dict(env, RANK="0"))


def test_one_gpu_per_local_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert rank_device("auto", 1) == torch.device("cuda:1")
    assert rank_device("cpu", 1) == torch.device("cpu")
    with pytest.raises(ConfigError, match=r"^trainer\.device: LOCAL_RANK=2 but this node has 2 CUDA"):
        rank_device("cuda", 2)
    with pytest.raises(ConfigError, match=r"'cuda:0' pins every rank to one GPU"):
        rank_device("cuda:0", 0)


def test_rank_zeros_stop_flag_travels_on_the_gpu_under_nccl(monkeypatch: pytest.MonkeyPatch) -> None:
    """NCCL-only process groups (CUDA runs) refuse CPU tensors: the broadcast flag must sit on the GPU."""
    import torch.distributed as dist

    from rlpipe.runtime import distributed

    sent: list[torch.device] = []
    monkeypatch.setattr(distributed, "world_size", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(dist, "broadcast", lambda tensor, src: sent.append(tensor.device))
    made: list[torch.device] = []
    real_tensor = torch.tensor
    monkeypatch.setattr(
        torch,
        "tensor",
        lambda data, device=None: made.append(torch.device(device or "cpu")) or real_tensor(data),
    )  # no CUDA here: record where it was asked for
    monkeypatch.setattr(dist, "get_backend", lambda: dist.Backend.NCCL)
    assert distributed.rank_zero_decides(True) is True
    monkeypatch.setattr(dist, "get_backend", lambda: dist.Backend.GLOO)
    assert distributed.rank_zero_decides(False) is False
    assert made == [torch.device("cuda", 1), torch.device("cpu")] and len(sent) == 2


def test_global_normalize_is_normalize_in_one_process() -> None:
    x = torch.randn(257, generator=torch.Generator().manual_seed(0)) * 3 + 1
    expected = (x - x.mean()) / (x.std() + 1e-8)
    torch.testing.assert_close(global_normalize(x), expected)


def test_sharded_minibatches_are_every_rank_slice_side_by_side() -> None:
    gen = torch.Generator().manual_seed(7)
    own = list(torch.randperm(6, generator=gen).split(4))
    gen.manual_seed(7)
    joint = list(sharded_minibatch_indices(6, 2, 4, torch.device("cpu"), gen))
    assert [mb.tolist() for mb in joint] == [[*mb.tolist(), *(mb + 6).tolist()] for mb in own]


NORMALIZED = ["policy.obs_normalization=true", "algorithm.cfg.normalize_rewards=true"]
"""Running statistics (observations, discounted returns) that must be global too."""
VARIANTS = {"plain": [], "normalized": NORMALIZED}


def reference(work: Path, extra: list[str]) -> dict[str, torch.Tensor]:
    """Save a 2N-env rollout and the initial weights to ``work``; the policy after one update over both."""
    cfg = tiny_cfg(work / "data", f"trainer.num_envs={2 * N}", *EQUIV, *extra)
    exp = Trainer(cfg).parts
    rollout, _ = exp.collector()
    save_rollout(rollout, work / "rollout.pt")
    torch.save(exp.algo.policy.state_dict(), work / "init.pt")
    exp.algo.shards = 2
    learn(exp.algo, rollout, 1, 0, cfg.trainer.iterations * exp.steps_per_iteration)
    return {k: v.clone() for k, v in exp.algo.policy.state_dict().items()}


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | dict[str, torch.Tensor]]:
    """One spawn of two ranks runs every two-rank job of this module, after the single-process references.

    ``{"coll": folder of coll-{rank}.pt, variant: folder of init.pt and rank-{rank}-{sync,nosync}.pt,
    "expected/" + variant: the reference update}`` for each of :data:`VARIANTS`.
    """
    root = tmp_path_factory.mktemp("dist")
    out: dict[str, Path | dict[str, torch.Tensor]] = {"coll": root / "coll"}
    (root / "coll").mkdir()
    todo = [("collectives", root / "coll", [], True)]
    for name, extra in VARIANTS.items():
        work = root / name
        work.mkdir()
        out[name], out[f"expected/{name}"] = work, reference(work, extra)
        todo += [("update", work, [f"trainer.num_envs={N}", *EQUIV, *extra], sync) for sync in (True, False)]
    mp.spawn(jobs, args=(2, free_port(), todo), nprocs=2, join=True)
    return out


def ranks(work: Path, tag: str) -> list[dict[str, torch.Tensor]]:
    return [torch.load(work / f"rank-{r}-{tag}.pt", weights_only=True) for r in range(2)]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_two_ranks_update_like_one_process_over_both(two_ranks: dict, variant: str) -> None:
    work, expected = two_ranks[variant], two_ranks[f"expected/{variant}"]
    initial = torch.load(work / "init.pt", weights_only=True)
    assert any(not torch.equal(initial[k], v) for k, v in expected.items())  # the update moved
    for state in ranks(work, "sync"):
        assert state.keys() == expected.keys()
        for key, value in expected.items():
            torch.testing.assert_close(state[key], value, rtol=1e-5, atol=1e-6, msg=key)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_without_gradient_sync_the_ranks_diverge(two_ranks: dict, variant: str) -> None:
    """The negative control: the equivalence above depends on the all-reduce really happening."""
    expected = two_ranks[f"expected/{variant}"]
    rank0, rank1 = ranks(two_ranks[variant], "nosync")
    assert any(not torch.allclose(rank0[k], rank1[k]) for k in expected)
    assert any(not torch.allclose(rank0[k], v, rtol=1e-5, atol=1e-6) for k, v in expected.items())


@pytest.fixture(scope="module")
def collective_results(two_ranks: dict) -> list[dict]:
    return [torch.load(two_ranks["coll"] / f"coll-{r}.pt", weights_only=True) for r in range(2)]


def test_initial_parameters_are_rank_zeros(collective_results: list[dict]) -> None:
    """Built with seed + rank, the policies only agree because rank 0's weights were broadcast."""
    for a, b in zip(*(r["initial"] for r in collective_results), strict=True):
        assert torch.equal(a, b)


def test_gradients_are_averaged(collective_results: list[dict]) -> None:
    for result in collective_results:
        assert result["grads"] and all(torch.equal(g, torch.full_like(g, 1.5)) for g in result["grads"])


def test_kl_decisions_are_global(collective_results: list[dict]) -> None:
    """Rank 0 sees KL 0, rank 1 KL 1: both read the mean 0.5 and stop (0.5 > 1.5 × target_kl 0.1)."""
    assert [r["kl_mean"] for r in collective_results] == [0.5, 0.5]
    assert [r["early_stop"] for r in collective_results] == [True, True]


def test_advantage_statistics_are_global(collective_results: list[dict]) -> None:
    joint = torch.cat([torch.arange(5.0), torch.arange(5.0) + 10])
    expected = (joint - joint.mean()) / (joint.std() + 1e-8)
    torch.testing.assert_close(torch.cat([r["normalized"] for r in collective_results]), expected)


def test_rank_zero_alone_evaluates_and_steps_count_every_rank(collective_results: list[dict]) -> None:
    assert [r["has_evaluator"] for r in collective_results] == [True, False]
    assert [r["steps_per_iteration"] for r in collective_results] == [2 * 8 * 16] * 2


def test_cli_distributed_without_torchrun_exits_2_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(
        cli, ["run", "params.yaml", "--distributed", "--set", f"trainer.data_dir={tmp_path / 'data'}"]
    )
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "trainer.distributed: RANK, WORLD_SIZE" in lines[0], result.output
    assert not (tmp_path / "data").exists()
