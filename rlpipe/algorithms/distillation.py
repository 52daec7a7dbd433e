"""Teacher–student distillation (DAgger): the student acts, a frozen teacher labels, the student learns.

Each rollout is collected by the student (or, with probability β from ``teacher_mix``, by the
teacher's deterministic action, per env and step: :class:`TeacherMix`). The "advantage" stage of
distillation is the labelling: the frozen teacher's actor output on every observation the
rollout visited (``teacher_out`` ``[N, T+1, D]``, padding slot zero). The update is the shared
epochs × minibatches loop with a loss on actions: KL(teacher ‖ student) of the two distributions
(Gaussian or categorical), or MSE / Huber between their deterministic actions (the Gaussian means).
A recurrent student trains on ``seq_len`` sequences from the states it collected with
(truncated BPTT, :mod:`rlpipe.algorithms.sequences`). Ross et al. 2011, arXiv:1011.0686.

The teacher is attached after construction (``attach_teacher``, by ``rlpipe.build`` which loads
it from its run); it never enters the student's checkpoints, only its path and sha256 do.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDict
from torch.distributions import Categorical, Distribution, kl_divergence
from torch.nn import functional as F

from rlpipe.algorithms import sequences
from rlpipe.algorithms.base import BaseAlgorithm, Minibatch
from rlpipe.algorithms.schedules import Schedule
from rlpipe.config import AlgorithmCfg, ConfigError
from rlpipe.config.distillation import DistillationCfg
from rlpipe.rollout import RECURRENT_STATE

if TYPE_CHECKING:
    from rlpipe.policies.heads import ActionHead
    from rlpipe.policies.trainable import TrainablePolicy

__all__ = ["TEACHER_OUT", "Distillation", "DistillationCfg", "TeacherMix", "action_loss", "actor_out"]

TEACHER_OUT = "teacher_out"
"""Rollout key of the teacher's actor output ``[N, T+1, D]`` on each observation (its label)."""


def actor_out(policy: TrainablePolicy, obs: torch.Tensor | TensorDict) -> torch.Tensor:
    """A feedforward policy's actor output ``[B, D]`` (what its head turns into a distribution)."""
    return policy.actor(policy.actor_obs(obs))


def action_loss(
    kind: str,
    student: Distribution,
    teacher: Distribution,
    student_head: ActionHead,
    teacher_head: ActionHead,
    huber_delta: float = 1.0,
) -> torch.Tensor:
    """The mean over rows of the distillation loss ``kind`` (``kl``, ``mse``, ``huber``): a 0-dim tensor.

    ``kl``: KL(teacher ‖ student) summed over action dims; ``mse`` / ``huber``: between the heads'
    deterministic actions ``[B, A]`` (the student's carries the gradient).
    """
    if kind == "kl":
        return kl_divergence(teacher, student).mean()
    mine, target = student_head.mode(student), teacher_head.mode(teacher).detach()
    if kind == "mse":
        return F.mse_loss(mine, target)
    return F.huber_loss(mine, target, delta=huber_delta)


class TeacherMix:
    """The collector's policy: the student's action, or with probability β the teacher's mode.

    β is read once per step from ``share()``; at 0 the student acts alone (no teacher forward, no
    random draw), at 1 the teacher alone. ``sample_log_prob`` is the log-probability under the
    policy that chose the action. Values are zero: distillation trains no critic.
    """

    has_critic = False

    def __init__(
        self, student: TrainablePolicy, teacher: TrainablePolicy, share: Callable[[], float]
    ) -> None:
        self.student, self.teacher, self.share = student, teacher, share

    @property
    def is_recurrent(self) -> bool:
        """The student's: a recurrent student steps with its state, the teacher with none."""
        return bool(self.student.is_recurrent)

    @property
    def deterministic_policy(self) -> TrainablePolicy:
        """The policy whose deterministic action is the run's (``action_mean``, evaluation): the student."""
        return self.student

    @property
    def state_size(self) -> int:
        """The student's recurrent state size S (recurrent students only)."""
        return self.student.state_size

    def sample(self, obs: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """``(action [B, *act], log_prob [B])``: the student's sample, mixed with the teacher's mode."""
        return self._mix(obs, *self.student.sample(obs, deterministic))

    def sample_step(
        self, obs: torch.Tensor, state: torch.Tensor, deterministic: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """A recurrent student's step ``(action, log_prob, value 0, next_state)``, mixed like ``sample``."""
        action, log_prob, _, next_state = self.student.sample_step(obs, state, deterministic)
        action, log_prob = self._mix(obs, action, log_prob)
        return action, log_prob, torch.zeros_like(log_prob), next_state

    def step_value(self, obs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """Zeros ``[B]``."""
        return torch.zeros(state.shape[0], device=state.device)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Zeros ``[B]``."""
        return torch.zeros(obs.shape[0], device=self.student.device)

    def _mix(
        self, obs: torch.Tensor, action: torch.Tensor, log_prob: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        beta = self.share()
        if beta <= 0.0:
            return action, log_prob
        t_action, t_log_prob = self.teacher.sample(obs, deterministic=True)
        if beta >= 1.0:
            return t_action, t_log_prob
        take = torch.rand(action.shape[0], device=action.device) < beta
        rows = take.view(-1, *([1] * (action.dim() - 1)))
        return torch.where(rows, t_action, action), torch.where(take, t_log_prob, log_prob)


class Distillation(BaseAlgorithm):
    """A student policy regressing a frozen teacher's actions on the states the student visits."""

    cfg_class = DistillationCfg
    cfg: DistillationCfg
    advantage_keys = (TEACHER_OUT,)
    advantage_reads = ("obs",)
    update_reads = ("obs", TEACHER_OUT)

    def __init__(self, cfg: DistillationCfg, policy: TrainablePolicy) -> None:
        super().__init__(cfg, policy)
        self.teacher: TrainablePolicy | None = None
        """The frozen teacher policy (``attach_teacher``)."""
        self.teacher_record: dict[str, str] = {}
        """``{path, sha256}`` of the teacher's checkpoint."""
        self.mix_schedule = Schedule.of(cfg.teacher_mix_kind, 0.0, cfg.teacher_mix)
        self._acting: TeacherMix | None = None

    @classmethod
    def check_run(
        cls,
        cfg: AlgorithmCfg,
        num_envs: int,
        policy_name: str,
        horizon: int,
        max_episode_steps: int | None = None,
    ) -> None:
        """Reject a ``seq_len`` not dividing T, or a precision the device cannot run."""
        if isinstance(cfg, DistillationCfg):
            cfg.check_sequences(horizon)
        super().check_run(cfg, num_envs, policy_name, horizon, max_episode_steps)

    def attach_teacher(self, teacher: TrainablePolicy, record: dict[str, str]) -> None:
        """Use the frozen ``teacher`` policy (on this device), recorded as ``record`` (``{path, sha256}``).

        ``ConfigError`` for ``loss: mse|huber`` on discrete actions (they have no mean to regress).
        """
        probe = teacher.head.distribution(torch.zeros(1, teacher.head.out_dim, device=self.device))
        if self.cfg.loss != "kl" and isinstance(probe, Categorical):
            raise ConfigError(
                f"algorithm.cfg.loss: {self.cfg.loss} compares continuous actions; discrete actions take kl"
            )
        self.teacher, self.teacher_record = teacher, dict(record)
        self._acting = TeacherMix(self.policy, teacher, self.teacher_share)

    @property
    def acting_policy(self) -> TeacherMix:
        """:class:`TeacherMix` of the student and the teacher."""
        if self._acting is None:
            raise RuntimeError("distillation needs a teacher: call attach_teacher first")
        return self._acting

    @property
    def attached_teacher(self) -> TrainablePolicy:
        """The teacher ``attach_teacher`` set (``RuntimeError`` before)."""
        if self.teacher is None:
            raise RuntimeError("distillation needs a teacher: call attach_teacher first")
        return self.teacher

    def teacher_share(self) -> float:
        """β: the probability that an env executes the teacher's action at the run's ``progress``."""
        return self.mix_schedule(self.progress.env_steps) if self.cfg.teacher_mix is not None else 0.0

    # ------------------------------------------------------------------ labels, rows, loss

    def compute_advantages(self, rollout: TensorDict) -> dict[str, float]:
        """Write the teacher's actor output on ``obs[:, :T]`` as ``teacher_out`` ``[N, T+1, D]``."""
        n, t1 = rollout.batch_size
        obs = rollout.get("obs")[:, :-1].flatten(0, 1)  # [N·T, *obs]: a tensor or a TensorDict of groups
        with torch.no_grad(), self.autocast():
            out = actor_out(self.attached_teacher, obs).float()
        padded = torch.zeros(n, t1, out.shape[-1], device=out.device)
        padded[:, :-1] = out.view(n, t1 - 1, -1)
        rollout.set(TEACHER_OUT, padded)
        if self.policy.is_recurrent and RECURRENT_STATE not in rollout.keys():
            rollout.set(RECURRENT_STATE, self.collection_states(rollout))  # a stored rollout
        return {}

    def collection_states(self, rollout: TensorDict) -> torch.Tensor:
        """The recurrent student's states ``[N, T+1, S]`` at sequence starts, had it collected ``rollout``.

        The student runs over the stored observations (no gradient, its modes, no random draw) from
        a zero state, zeroed after every done and every ``seq_len × seqs_per_state_reset`` steps, as
        the collector does; other slots are zero.
        """
        n, t1 = rollout.batch_size
        length = self.cfg.seq_len or t1 - 1
        every = length * self.cfg.seqs_per_state_reset if self.cfg.seqs_per_state_reset > 0 else 0
        obs, done = rollout.get("obs"), rollout.get("done")
        states = torch.zeros(n, t1, self.policy.state_size, device=self.device)
        state = torch.zeros(n, self.policy.state_size, device=self.device)
        with torch.no_grad(), self.autocast():
            for t in range(t1 - 1):
                if every and t % every == 0:
                    state = torch.zeros_like(state)
                if t % length == 0:
                    states[:, t] = state
                state = self.policy.sample_step(obs[:, t], state, True)[3].float()
                state = state * (~done[:, t]).unsqueeze(-1).to(state.dtype)
        return states

    def update_batch(self, rollout: TensorDict) -> TensorDict:
        """Every transition ``[N·T]`` (``seq_len`` sequences ``[N·T/L]`` for a recurrent student)."""
        return sequences.update_batch(self.policy, rollout, self.update_reads, self.cfg.seq_len)

    def minibatch_loss(self, mb: Minibatch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``(action loss, stats)`` of one minibatch; ``approx_kl`` is KL(teacher ‖ student)."""
        policy = self.policy
        with self.autocast():
            if policy.is_recurrent:  # sequences: the student re-runs its core from their start states
                features = policy.unroll(mb["obs"], mb[sequences.START_STATE], mb["done"]).flatten(0, 1)
                out = policy.actor(features)
            else:
                out = actor_out(policy, mb["obs"])
        target = mb[TEACHER_OUT].reshape(out.shape[0], -1)
        student = policy.head.distribution(out.float())
        teacher_head = self.attached_teacher.head
        with torch.no_grad():
            teacher = teacher_head.distribution(target)
        total = action_loss(self.cfg.loss, student, teacher, policy.head, teacher_head, self.cfg.huber_delta)
        with torch.no_grad():
            kl = total.detach() if self.cfg.loss == "kl" else kl_divergence(teacher, student).mean()
        return total, {"action_loss": total.detach(), "approx_kl": kl}

    def diagnostics(self, rollout: TensorDict, batch: TensorDict) -> dict[str, torch.Tensor]:
        """``teacher_share``: β while this rollout was collected."""
        return {"teacher_share": torch.tensor(self.teacher_share(), dtype=torch.float64)}

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        """The shared optimizer/schedule state and the teacher's ``{path, sha256}`` (not its weights)."""
        return {**super().state_dict(), "teacher": dict(self.teacher_record)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict``; warn when the teacher now is another file than the one recorded."""
        super().load_state_dict(state)
        recorded = state.get("teacher") or {}
        now = self.teacher_record.get("sha256")
        if recorded.get("sha256") and now and recorded["sha256"] != now:
            warnings.warn(
                f"algorithm.cfg.teacher: the checkpoint was trained with teacher "
                f"{recorded.get('path')} (sha256 {recorded['sha256'][:12]}…), now "
                f"{self.teacher_record.get('path')} (sha256 {now[:12]}…)",
                stacklevel=2,
            )
