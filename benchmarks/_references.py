"""The zoo's published figures: a reference return per (env id, algorithm) or per task, with its source.

Not a benchmark itself: ``zoo.py`` puts each task's reference beside its measured return.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple


class Reference(NamedTuple):
    """A published final return: its value, the env steps it was trained for, who and where."""

    value: float
    budget: int
    by: str
    source: str


def _rl_zoo(env: str, value: float, budget: int) -> Reference:
    return Reference(
        value,
        budget,
        "rl-baselines3-zoo",
        f"rl-baselines3-zoo benchmark.md (github.com/DLR-RM/"
        f"rl-baselines3-zoo), ppo {env}: one trained agent, mean deterministic eval return",
    )


def _cleanrl(env: str, value: float) -> Reference:
    return Reference(
        value,
        8_000_000,
        "CleanRL",
        f"CleanRL docs, rl-algorithms/rpo.md (docs.cleanrl.dev): "
        f"ppo_continuous_action_8M on {env}, mean over seeds of the episodic training return",
    )


def _tianshou(env: str, value: float) -> Reference:
    return Reference(
        value,
        1_000_000,
        "Tianshou",
        f"Tianshou examples/mujoco/README.md (github.com/thu-ml/"
        f"tianshou), PPO {env}, one hyperparameter set for every task: the best test return "
        f"over the first 1M steps, mean of 10 seeds (a max over the run, not a final return)",
    )


def _versions(stem: str, versions: Iterable[str], ref: Reference) -> dict[tuple[str, str], Reference]:
    return {(f"{stem}-{v}", "ppo"): ref for v in versions}


_MUJOCO = ("v3", "v4", "v5")
_DM_CONTROL = {  # envpool id → (dm_control name, ppo_continuous_action_8M final return)
    "AcrobotSwingup-v1": ("dm_control/acrobot-swingup-v0", 26.87),
    "BallInCupCatch-v1": ("dm_control/ball_in_cup-catch-v0", 935.26),
    "CartpoleBalance-v1": ("dm_control/cartpole-balance-v0", 790.36),
    "CartpoleSwingup-v1": ("dm_control/cartpole-swingup-v0", 590.21),
    "CheetahRun-v1": ("dm_control/cheetah-run-v0", 472.14),
    "FingerSpin-v1": ("dm_control/finger-spin-v0", 630.06),
    "HopperHop-v1": ("dm_control/hopper-hop-v0", 6.48),
    "HopperStand-v1": ("dm_control/hopper-stand-v0", 3.26),
    "HumanoidRun-v1": ("dm_control/humanoid-run-v0", 5.44),
    "HumanoidStand-v1": ("dm_control/humanoid-stand-v0", 20.76),
    "HumanoidWalk-v1": ("dm_control/humanoid-walk-v0", 8.92),
    "PendulumSwingup-v1": ("dm_control/pendulum-swingup-v0", 472.19),
    "QuadrupedRun-v1": ("dm_control/quadruped-run-v0", 171.50),
    "QuadrupedWalk-v1": ("dm_control/quadruped-walk-v0", 247.29),
    "ReacherEasy-v1": ("dm_control/reacher-easy-v0", 773.01),
    "ReacherHard-v1": ("dm_control/reacher-hard-v0", 637.84),
    "WalkerRun-v1": ("dm_control/walker-run-v0", 128.18),
    "WalkerStand-v1": ("dm_control/walker-stand-v0", 439.24),
    "WalkerWalk-v1": ("dm_control/walker-walk-v0", 305.74),
}
REFERENCES: dict[tuple[str, str], Reference] = {
    **_versions("HalfCheetah", _MUJOCO, _rl_zoo("HalfCheetah-v3", 5819.099, 1_000_000)),
    **_versions("Hopper", _MUJOCO, _rl_zoo("Hopper-v3", 2410.435, 1_000_000)),
    **_versions("Walker2d", _MUJOCO, _rl_zoo("Walker2d-v3", 3478.798, 1_000_000)),
    **_versions("Ant", _MUJOCO, _rl_zoo("Ant-v3", 1327.158, 1_000_000)),
    **_versions("Swimmer", _MUJOCO, _rl_zoo("Swimmer-v3", 281.561, 1_000_000)),
    **_versions("Humanoid", _MUJOCO, _tianshou("Humanoid-v3", 787.1)),
    **_versions("HumanoidStandup", ("v2", "v4", "v5"), _cleanrl("HumanoidStandup-v4", 109325.87)),
    **_versions("InvertedPendulum", ("v4", "v5"), _cleanrl("InvertedPendulum-v4", 888.83)),
    ("CartPole-v1", "ppo"): _rl_zoo("CartPole-v1", 500.0, 100_000),
    ("CartPole", "ppo"): _rl_zoo(
        "CartPole-v1 (the torch CartPole has its dynamics and 500-step limit)", 500.0, 100_000
    ),
    ("Pendulum-v1", "ppo"): _rl_zoo("Pendulum-v1", -172.225, 100_000),
    ("Pendulum", "ppo"): _rl_zoo(
        "Pendulum-v1 (the torch Pendulum has its dynamics, cost and 200-step limit)", -172.225, 100_000
    ),
    **{(env, "ppo"): _cleanrl(name, value) for env, (name, value) in _DM_CONTROL.items()},
}
"""Published final returns by (env id, ``algorithm.name``). The rl-baselines3-zoo figures were measured
on the ``-v3`` MuJoCo envs, Tianshou's on Humanoid-v3 (budget-matched and above CleanRL's 583 at 8M
steps) and CleanRL's on ``-v4`` and dm_control; a pair not listed has none."""
TASK_REFERENCES: dict[str, Reference] = {
    "cartpole_novel": Reference(
        500.0,
        100_000,
        "rl-baselines3-zoo",
        "rl-baselines3-zoo benchmark.md (github.com/DLR-RM/"
        "rl-baselines3-zoo), ppo_lstm CartPoleNoVel-v1 (CartPole-v1 with the velocities masked): one "
        "trained agent, mean deterministic eval return",
    ),
}
"""Published figures for a task whose env id alone does not name it (a variant of a listed env)."""


PLAYGROUND_IDS = ("PandaPickCube-v1", "Go1JoystickFlatTerrain-v1")
"""The MuJoCo Playground tasks of the zoo (envpool's ids)."""


def why_none(env_id: str, algorithm: str) -> str:
    """``none found``, with what was searched for when the suite says more."""
    if algorithm == "grpo":
        return "none found: no published GRPO figure on this env"
    if env_id.startswith("MetaWorld/"):
        return "none found: no published PPO return on Meta-World v3"
    if env_id in PLAYGROUND_IDS:
        return (
            "none found: MuJoCo Playground (arXiv 2502.08844) shows its PPO results as reward curves, "
            "trained on a GPU for far more env steps, not as numbers"
        )
    if env_id == "PushCube":
        return "none found: PushCube is rlpipe's own task"
    return "none found"


def reference(env_id: str, algorithm: str, task: str | None = None) -> dict[str, Any]:
    """The published figure of ``task`` or else (env id, algorithm): ``{value, budget, by, source}``."""
    ref = TASK_REFERENCES.get(task) or REFERENCES.get((env_id, algorithm))
    return (
        ref._asdict()
        if ref
        else {"value": None, "budget": None, "by": None, "source": why_none(env_id, algorithm)}
    )
