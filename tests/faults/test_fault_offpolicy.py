"""A killed SAC run resumes bit for bit with no replay buffer in its checkpoints: the ring is refilled.

The ring holds 2 rollouts of a 6-iteration run (``replay_size`` 200 = 2 × 4 envs × 25 steps), so a
resume after iteration 4 refills the ring's wrapped slots from stores 3 and 4. The resumed run's
final checkpoint (policy, critics, their targets, every optimizer, α, the counters) and every
rollout equal the uninterrupted run's.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import torch
from _fault_harness import assert_same_as_reference, rlpipe
from _offline_fixtures import ROOT

from rlpipe import config
from rlpipe.artifacts.checkpoints import load_checkpoint

ITERATIONS = 6
PARAMS = ROOT / "configs" / "sac_pendulum.yaml"
SMALL = (
    "trainer.device=cpu",
    "trainer.num_envs=4",
    "trainer.buffer_size=25",
    f"trainer.iterations={ITERATIONS}",
    "trainer.enable_eval=false",
    "trainer.num_threads=1",
    "checkpoint.every_iteration=true",
    "tracking.backend=none",
    "policy.actor.network_cfg.hidden_sizes=[16]",
    "algorithm.cfg.critic.hidden_sizes=[16]",
    "algorithm.cfg.batch_size=32",
    "algorithm.cfg.replay_size=200",
    "algorithm.cfg.learning_starts=100",
    "algorithm.cfg.random_steps=100",
    "algorithm.cfg.updates_per_step=0.2",
    "algorithm.cfg.n_step=2",
)
"""6 iterations of 4 envs × 25 steps (Pendulum's 200-step episodes truncate in iterations 2, 4 and 6),
5 gradient steps per iteration from iteration 1 on, a ring of 2 rollouts."""
EXP = "sac_faulty"


def command(data_dir: Path, *extra: str) -> list[str]:
    items = [*SMALL, f"trainer.data_dir={data_dir}", f"trainer.exp_name={EXP}", *extra]
    return ["run", str(PARAMS), *(arg for item in items for arg in ("--set", item))]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted run (in this process)."""
    from rlpipe.trainer import Trainer

    data_dir = tmp_path_factory.mktemp("sac_reference")
    Trainer(config.load(PARAMS, [*SMALL, f"trainer.data_dir={data_dir}", f"trainer.exp_name={EXP}"])).train()
    return data_dir / EXP


@pytest.mark.parametrize("point", ["iteration.end:4", "update.step:40"])
def test_a_killed_sac_run_resumes_bit_exact_from_its_stores(tmp_path, reference, point):
    killed = rlpipe(*command(tmp_path), env={"RLPIPE_FAULT_KILL_AT": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    resumed = rlpipe(*command(tmp_path), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resume: continuing from" in resumed.stderr
    assert_same_as_reference(tmp_path / EXP, reference, ITERATIONS)


def test_the_checkpoint_holds_no_replay_buffer(reference):
    state = load_checkpoint(reference / "checkpoints" / f"ckpt-{ITERATIONS:06d}.pt")
    assert state["algo"]["ring_newest"] == ITERATIONS
    ring_rows = 2 * 4 * 25
    big = [
        name
        for name, tensor in _tensors(state)
        if tensor.is_floating_point() and tensor.dim() and tensor.shape[0] >= ring_rows
    ]
    assert not big, big


def test_resume_without_the_ring_s_stores_is_refused_in_one_line(tmp_path):
    killed = rlpipe(*command(tmp_path), env={"RLPIPE_FAULT_KILL_AT": "iteration.end:4"})
    assert killed.returncode == -signal.SIGKILL
    store = tmp_path / EXP / "rollouts" / "iter-000003.zarr"
    for path in sorted(store.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    store.rmdir()
    before = sorted(p.name for p in (tmp_path / EXP / "checkpoints").iterdir())
    resumed = rlpipe(*command(tmp_path), "--resume")
    assert resumed.returncode != 0
    lines = [line for line in resumed.stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1 and lines[0].startswith(f"Error: {store}: missing"), resumed.stderr
    assert "replay ring" in lines[0] and "newest 2 stores" in lines[0], lines[0]
    assert sorted(p.name for p in (tmp_path / EXP / "checkpoints").iterdir()) == before


def _tensors(tree: object, prefix: str = "") -> list[tuple[str, torch.Tensor]]:
    if isinstance(tree, torch.Tensor):
        return [(prefix, tree)]
    if isinstance(tree, dict):
        return [item for k, v in tree.items() for item in _tensors(v, f"{prefix}/{k}")]
    if isinstance(tree, list | tuple):
        return [item for i, v in enumerate(tree) for item in _tensors(v, f"{prefix}/{i}")]
    return []


def test_resume_of_a_run_without_stores_is_refused_in_one_line(tmp_path):
    killed = rlpipe(
        *command(tmp_path, "store.enabled=false"), env={"RLPIPE_FAULT_KILL_AT": "iteration.end:4"}
    )
    assert killed.returncode == -signal.SIGKILL
    resumed = rlpipe(*command(tmp_path, "store.enabled=false"), "--resume")
    assert resumed.returncode == 2, resumed.stderr[-2000:]
    lines = [line for line in resumed.stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1 and lines[0].startswith("Error: store.enabled: --resume of a SAC run refills"), (
        lines
    )
