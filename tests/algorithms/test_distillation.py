"""Online distillation: a recurrent student without velocities learns a privileged teacher; exact resume."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _offline_fixtures import PARAMS, STEPS, leaves, same_leaves, set_args, tiny_cfg
from click.testing import CliRunner
from torch.distributions import Categorical, Independent, Normal, kl_divergence

from rlpipe.algorithms.distillation import TeacherMix, action_loss
from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.cli import cli
from rlpipe.config import ConfigError
from rlpipe.trainer import Trainer

GROUPS = "env.cfg={obs_groups: true}"
STUDENT = (
    "policy.name=recurrent_actor_critic",
    "policy.actor.obs_keys=[proprio]",
    "policy.critic.obs_keys=[proprio]",
    "policy.recurrent.hidden_size=16",
)
"""A recurrent student that sees positions only: it must infer the velocities the teacher reads."""


@pytest.fixture(scope="module")
def teacher(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny PPO teacher reading both groups (positions and the privileged velocities)."""
    cfg = tiny_cfg(
        tmp_path_factory.mktemp("teacher"), "trainer.exp_name=teacher", GROUPS, "trainer.iterations=2"
    )
    Trainer(cfg).train()
    return cfg.run_dir


def student_cfg(data_dir: Path, teacher: Path, *extra: str):
    block = f"algorithm.cfg={{teacher: {teacher}, batch_size: 64, n_epochs: 2, learning_rate: 0.003}}"
    return tiny_cfg(
        data_dir, "trainer.exp_name=student", GROUPS, "algorithm.name=distillation", block, *STUDENT, *extra
    )


def test_online_distillation_fits_a_fixed_teacher(tmp_path, teacher):
    trainer = Trainer(student_cfg(tmp_path, teacher, "trainer.iterations=8"))
    losses = [m["update/action_loss"] for m in trainer.iterate()]
    assert len(losses) == 8 and losses[-1] < 0.5 * losses[0], losses
    state = load_checkpoint(trainer.run_dir / "checkpoints" / "ckpt-000008.pt")
    assert state["algo"]["teacher"]["path"].endswith("ckpt-000002.pt")  # its path and hash, not its weights
    assert len(state["algo"]["teacher"]["sha256"]) == 64 and "teacher" not in state["policy"]
    assert "recurrent_state" in trainer.parts.collector.writes


def test_online_distillation_resumes_bit_for_bit(tmp_path, teacher):
    mix = f"algorithm.cfg.teacher_mix=[[0, 1.0], [{4 * STEPS}, 0.0]]"  # β 1 → 0.75 → 0.5 → 0.25
    every_2 = (f"trainer.save_freq={2 * STEPS}", mix)
    Trainer(student_cfg(tmp_path / "whole", teacher, "trainer.iterations=4", *every_2)).train()
    Trainer(student_cfg(tmp_path / "split", teacher, "trainer.iterations=2", *every_2)).train()
    split = Trainer(student_cfg(tmp_path / "split", teacher, "trainer.iterations=4", *every_2), resume=True)
    shares = [m["update/teacher_share"] for m in split.iterate()]
    assert shares == [0.5, 0.25]
    a, b = (tmp_path / run / "student" / "checkpoints" / "ckpt-000004.pt" for run in ("whole", "split"))
    drop = ("/wall_s", "/params_hash")
    sa, sb = ({k: v for k, v in leaves(load_checkpoint(p)) if k not in drop} for p in (a, b))
    assert any(k.startswith("/collector/recurrent_state") for k in sa)
    assert same_leaves(sa, sb)


def test_teacher_mix_executes_the_teachers_mode_with_probability_beta():
    student = torch.nn.Module()
    student.sample = lambda obs, deterministic=False: (torch.zeros(1000, 2), torch.full((1000,), -1.0))
    teacher = torch.nn.Module()
    teacher.sample = lambda obs, deterministic=False: (torch.ones(1000, 2), torch.full((1000,), -2.0))
    obs = torch.zeros(1000, 3)
    for beta, expected in ((0.0, 0.0), (1.0, 1.0)):
        action, log_prob = TeacherMix(student, teacher, lambda b=beta: b).sample(obs)
        assert action.eq(expected).all() and log_prob.eq(-1.0 - expected).all()
    torch.manual_seed(0)
    action, log_prob = TeacherMix(student, teacher, lambda: 0.3).sample(obs)
    taken = action[:, 0] == 1.0
    assert 0.25 < taken.float().mean() < 0.35 and action[:, 1].eq(action[:, 0]).all()
    assert log_prob[taken].eq(-2.0).all() and log_prob[~taken].eq(-1.0).all()


def test_action_losses_match_their_definitions():
    head = type("Head", (), {"mode": staticmethod(lambda d: d.mean)})
    s = Independent(Normal(torch.tensor([[0.0, 1.0]]), 1.0), 1)
    t = Independent(Normal(torch.tensor([[1.0, 3.0]]), 2.0), 1)
    assert action_loss("mse", s, t, head, head).item() == pytest.approx((1 + 4) / 2)
    assert action_loss("huber", s, t, head, head, 1.0).item() == pytest.approx((0.5 + 1.5) / 2)
    # KL(N(1,2²) ‖ N(0,1)) + KL(N(3,2²) ‖ N(1,1)), worked out: log(1/2) + (4 + d²)/2 − 1/2 per dim
    by_hand = sum(torch.log(torch.tensor(0.5)).item() + (4 + d * d) / 2 - 0.5 for d in (1.0, 2.0))
    assert action_loss("kl", s, t, head, head).item() == pytest.approx(by_hand)
    cs, ct = Categorical(logits=torch.tensor([[0.0, 0.0]])), Categorical(logits=torch.tensor([[2.0, 0.0]]))
    assert action_loss("kl", cs, ct, head, head).item() == pytest.approx(kl_divergence(ct, cs).item())


def test_a_missing_teacher_is_a_config_error(tmp_path, teacher):
    for ref, problem in (
        (tmp_path / "nowhere", "no such run directory or checkpoint"),
        (tmp_path, "not a run directory"),
    ):
        with pytest.raises(ConfigError, match=f"algorithm.cfg.teacher: .*{problem}"):
            _ = Trainer(student_cfg(tmp_path, ref)).parts
    args = [
        "run",
        str(PARAMS),
        *set_args(
            tmp_path,
            GROUPS,
            "algorithm.name=distillation",
            f"algorithm.cfg={{teacher: {tmp_path / 'nowhere'}}}",
            *STUDENT,
        ),
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "algorithm.cfg.teacher" in result.output, result.output
    with pytest.raises(ConfigError, match="policy.actor.obs_keys: unknown key 'joints'"):
        _ = Trainer(
            student_cfg(
                tmp_path, teacher, "policy.actor.obs_keys=[joints]", "policy.critic.obs_keys=[joints]"
            )
        ).parts
    with pytest.raises(ConfigError, match="algorithm.cfg.loss: mse compares continuous actions"):
        _ = Trainer(student_cfg(tmp_path, teacher, "algorithm.cfg.loss=mse")).parts


def test_online_distillation_labels_a_flat_teacher(tmp_path):
    """CartPole's flat observations ``[N, T+1, 4]``: the labels are ``[N, T+1, D]`` as for groups."""
    teacher = tiny_cfg(tmp_path / "teacher", "trainer.exp_name=flat", "trainer.iterations=1")
    Trainer(teacher).train()
    block = f"algorithm.cfg={{teacher: {teacher.run_dir}, batch_size: 64, n_epochs: 2}}"
    trainer = Trainer(
        tiny_cfg(
            tmp_path, "trainer.exp_name=student", "trainer.iterations=2", "algorithm.name=distillation", block
        )
    )
    losses = [m["update/action_loss"] for m in trainer.iterate()]
    assert len(losses) == 2 and all(loss >= 0.0 for loss in losses)
    assert (trainer.run_dir / "checkpoints" / "ckpt-000002.pt").is_file()
