"""``DistillationCfg``: the ``algorithm.cfg`` of teacher–student distillation (torch-free).

A frozen teacher (``teacher``: its run directory or checkpoint) labels the observations the
student visits; the student learns its actions. ``teacher_mix`` lets the teacher's action be
executed instead of the student's with a probability that follows a schedule over env steps
(DAgger's β). ``rlpipe distill`` first trains from the teacher's stored rollouts
(``offline_passes`` over them) and records where they came from (``stores``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from rlpipe.config.algorithms import SequenceCfg
from rlpipe.config.schedules import Points

__all__ = ["DISTILLATION_LOSSES", "DistillationCfg"]

DISTILLATION_LOSSES = ("kl", "mse", "huber")
"""Values of ``algorithm.cfg.loss``."""


class DistillationCfg(SequenceCfg):
    """Configuration of distillation: the teacher, the loss on actions and the teacher-mixing schedule.

    The optimizer, minibatch, schedule and precision fields come from ``UpdateCfg``; ``seq_len``
    and ``seqs_per_state_reset`` (truncated BPTT) apply to a recurrent student. It has no clip range
    and no KL rules; ``ent_coef``, ``gamma`` and ``gae_lambda`` are unused: the student regresses
    the teacher.
    """

    teacher: str | None = None
    """The teacher: a run directory (its newest checkpoint) or a checkpoint file of a run. Loaded
    frozen with its own params (policy, observation keys, observation normalizer); required."""
    loss: Literal["kl", "mse", "huber"] = "kl"
    """``kl``: KL(teacher ‖ student) of the action distributions (Gaussian or categorical); ``mse`` /
    ``huber``: on the deterministic actions (the Gaussian means; continuous actions only)."""
    huber_delta: float = Field(default=1.0, gt=0)
    """Where the Huber loss turns from quadratic to linear (``loss: huber``)."""
    teacher_mix: Points | None = None
    """``[[env_steps, β], ...]``: the probability that an env executes the teacher's action instead of
    the student's at each step, following ``teacher_mix_kind`` between points (β in [0, 1]); null:
    the student always acts."""
    teacher_mix_kind: Literal["step", "interp"] = "interp"
    """``interp``: β linear between the points; ``step``: β jumps at each point and holds."""
    stores: str | None = None
    """The folder of the teacher's rollout stores ``rlpipe distill`` trains on (the run's lineage)."""
    offline_passes: int = Field(default=1, ge=1)
    """Passes of ``rlpipe distill`` over the teacher's stored rollouts (each store once per pass)."""
    stores_per_update: int = Field(default=1, ge=1)
    """Stores joined along the env axis into each offline update (``[k·N, T+1]``), so its shuffled
    minibatches mix transitions of ``k`` stores; a pass then makes ⌈stores / k⌉ updates."""
    online_iterations: int = Field(default=0, ge=0)
    """Iterations of online distillation ``rlpipe distill`` runs after the offline passes (0: none)."""
    student_init: str | None = None
    """A checkpoint whose policy weights the student starts from (the online continuation of an
    offline distillation starts from its result); null: fresh weights."""
    learning_rate: float = Field(default=1.0e-3, gt=0)
    """Optimizer learning rate."""
    n_epochs: int = Field(default=2, ge=1)
    """Passes over the rollout per update."""
    batch_size: int = Field(default=512, ge=1)
    """Minibatch size in transitions (whole sequences of ``seq_len`` for a recurrent student)."""
    ent_coef: float = Field(default=0.0, ge=0)
    """Unused by distillation."""

    @field_validator("teacher_mix")
    @classmethod
    def _mix_points(cls, points: Points | None) -> Points | None:
        if points is not None and any(not 0.0 <= value <= 1.0 for _, value in points):
            raise ValueError(f"β must lie in [0, 1] (got {[value for _, value in points]})")
        return points

    def lineage(self) -> dict[str, str]:
        """Where the student's knowledge came from: the teacher and the stores (MLflow tags)."""
        found = {"teacher": self.teacher, "distill_stores": self.stores, "student_init": self.student_init}
        return {key: value for key, value in found.items() if value is not None}
