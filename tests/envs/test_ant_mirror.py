"""ant_mirror: an involution, equivariant with gymnasium's Ant-v5 simulator, envpool's layout, zero loss.

The simulator tests build the mirrored MuJoCo state from the model itself — joints matched by
their reflected anchors and axes, bodies by their reflected centres of mass, the free joint's pose
and velocity reflected as a rotation matrix and world-frame vectors — and never read
``ant_mirror``'s tables: the observation of the mirrored state must be ``ant_mirror`` of the
observation, and stays so while both simulations step with mirrored actions.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rlpipe.algorithms.symmetry import Symmetry
from rlpipe.config.symmetry import SymmetryCfg
from rlpipe.envs.tasks.symmetry import ant_mirror
from rlpipe.policies import build_policy

mujoco = pytest.importorskip("mujoco")

REFLECT = np.diag([1.0, -1.0, 1.0])
"""y → −y: the sagittal plane of an ant walking along +x."""
WIDTHS = {(True, True): 105, (True, False): 27, (False, True): 107, (False, False): 29}
"""(exclude x, y; include cfrc_ext) → observation width."""


def mirrored_half(obs: torch.Tensor | None = None, actions: torch.Tensor | None = None):
    """The mirrored copies alone (the second half of ``ant_mirror``'s output)."""
    m_obs, m_act = ant_mirror(obs=obs, actions=actions)
    return (
        None if obs is None else m_obs[obs.shape[0] :],
        None if actions is None else m_act[actions.shape[0] :],
    )


class ModelMirror:
    """The reflection of Ant's MuJoCo state, derived from the model at its reference pose."""

    def __init__(self, model) -> None:
        data = mujoco.MjData(model)
        mujoco.mj_forward(model, data)
        self.model = model
        hinges = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
        self.joints = {}  # hinge j → (its mirror j', sign of the angle)
        for j in hinges:
            image = min(hinges, key=lambda k: np.linalg.norm(data.xanchor[k] - REFLECT @ data.xanchor[j]))
            assert np.allclose(data.xanchor[image], REFLECT @ data.xanchor[j])
            # R·Rot(a, θ)·R⁻¹ = Rot(det R · R a, θ) for the improper R: the axis −R a carries the angle
            sign = float(np.dot(-REFLECT @ data.xaxis[j], data.xaxis[image]))
            assert abs(abs(sign) - 1.0) < 1e-9, (j, image, sign)
            self.joints[j] = (image, float(round(sign)))
        self.bodies = [
            int(np.argmin(np.linalg.norm(data.xipos - REFLECT @ data.xipos[b], axis=1)))
            for b in range(model.nbody)
        ]
        assert sorted(self.bodies) == list(range(model.nbody)) and self.bodies != list(range(model.nbody))

    def state(self, qpos: np.ndarray, qvel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The mirrored ``(qpos [15], qvel [14])``."""
        qpos2, qvel2 = np.empty_like(qpos), np.empty_like(qvel)
        qpos2[:3] = REFLECT @ qpos[:3]
        rot = np.empty(9)
        mujoco.mju_quat2Mat(rot, qpos[3:7])
        rot = rot.reshape(3, 3)
        rot2 = REFLECT @ rot @ REFLECT
        mujoco.mju_mat2Quat(qpos2[3:7], rot2.ravel())
        qpos2[3:7] *= np.sign(qpos2[3] * qpos[3]) or 1.0  # q and −q are one rotation: keep w's sign
        qvel2[:3] = REFLECT @ qvel[:3]  # world-frame linear velocity
        omega = rot @ qvel[3:6]  # the free joint's angular velocity is in the body frame
        qvel2[3:6] = rot2.T @ (-REFLECT @ omega)  # a pseudo-vector: det R · R ω
        for j, (image, sign) in self.joints.items():
            qpos2[self.model.jnt_qposadr[image]] = sign * qpos[self.model.jnt_qposadr[j]]
            qvel2[self.model.jnt_dofadr[image]] = sign * qvel[self.model.jnt_dofadr[j]]
        return qpos2, qvel2

    def wrench(self, xfrc: np.ndarray) -> np.ndarray:
        """Mirrored ``xfrc_applied`` ``[nbody, 6]`` (force, torque): each body's on its mirror body."""
        out = np.empty_like(xfrc)
        for b, image in enumerate(self.bodies):
            out[image, :3] = REFLECT @ xfrc[b, :3]
            out[image, 3:] = -REFLECT @ xfrc[b, 3:]
        return out

    def action_matrix(self) -> np.ndarray:
        """``[8, 8]`` A with mirrored ctrl = A · ctrl: actuator i's image drives the image of i's joint."""
        joint_of = [int(self.model.actuator_trnid[i, 0]) for i in range(self.model.nu)]
        matrix = np.zeros((self.model.nu, self.model.nu))
        for i, j in enumerate(joint_of):
            image, sign = self.joints[j]
            target = joint_of.index(image)
            assert self.model.actuator_gear[target, 0] == self.model.actuator_gear[i, 0]
            matrix[target, i] = sign
        return matrix


def ant(exclude_positions: bool = True, contact_forces: bool = True):
    return gym.make(
        "Ant-v5",
        exclude_current_positions_from_observation=exclude_positions,
        include_cfrc_ext_in_observation=contact_forces,
    ).unwrapped


def test_mirror_twice_is_the_identity_for_every_accepted_width():
    actions = torch.randn(6, 8)
    for width in WIDTHS.values():
        obs = torch.randn(6, width)
        all_obs, all_act = ant_mirror(obs=obs, actions=actions)
        assert all_obs.shape == (12, width) and all_act.shape == (12, 8)
        assert torch.equal(all_obs[:6], obs) and torch.equal(all_act[:6], actions)
        once_obs, once_act = mirrored_half(obs, actions)
        assert not torch.allclose(once_obs, obs) and not torch.allclose(once_act, actions)
        assert torch.equal(mirrored_half(once_obs, once_act)[0], obs)
        assert torch.equal(mirrored_half(once_obs, once_act)[1], actions)
    assert ant_mirror(obs=None, actions=actions)[0] is None and ant_mirror(obs=obs, actions=None)[1] is None


def test_a_wrong_width_is_one_line_naming_it_and_the_accepted_ones():
    with pytest.raises(
        ValueError,
        match=r"^ant_mirror: observation of shape \(4, 111\) \(width 111\); "
        r"accepted: \[B, W\] with W in \[27, 29, 105, 107\]$",
    ):
        ant_mirror(obs=torch.zeros(4, 111))
    with pytest.raises(
        ValueError,
        match=r"^ant_mirror: actions of shape \(4, 6\) \(width 6\); "
        r"accepted: \[B, 8\]$",
    ):
        ant_mirror(actions=torch.zeros(4, 6))
    with pytest.raises(ValueError, match=r"width 105"):
        ant_mirror(obs=torch.zeros(105))


def test_the_action_mirror_is_the_one_the_model_implies():
    env = ant()
    expected = ModelMirror(env.model).action_matrix()
    _, images = mirrored_half(actions=torch.eye(8, dtype=torch.float64))
    assert np.array_equal(images.numpy().T, expected)  # column i: the image of actuator i's unit ctrl
    assert not np.array_equal(expected, np.eye(8))


def contact_state(env, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A state of a random rollout with at least two ground contacts, its y moved off the plane."""
    env.reset(seed=int(rng.integers(1000)))
    for _ in range(200):
        env.step(rng.uniform(-1, 1, 8))
        if env.data.ncon >= 2:
            qpos, qvel = env.data.qpos.copy(), env.data.qvel.copy()
            qpos[1] += 0.7
            return qpos, qvel
    raise AssertionError("no contact in 200 random steps")


@pytest.mark.parametrize("exclude_positions, contact_forces", list(WIDTHS))
def test_the_mirrored_state_observes_as_the_mirrored_observation_and_steps_mirrored(
    exclude_positions, contact_forces
):
    env, twin = ant(exclude_positions, contact_forces), ant(exclude_positions, contact_forces)
    mirror = ModelMirror(env.model)
    rng = np.random.default_rng(7)
    qpos, qvel = contact_state(env, rng)
    # a wrench on every body, so that each body's cfrc_ext block is non-zero and its image is checked
    xfrc = rng.normal(0.0, 0.4, (env.model.nbody, 6))
    xfrc[0] = 0.0
    pairs = ((env, (qpos, qvel), xfrc), (twin, mirror.state(qpos, qvel), mirror.wrench(xfrc)))
    for sim, (pos, vel), wrench in pairs:
        sim.data.xfrc_applied[:] = wrench
        sim.set_state(pos, vel)
        mujoco.mj_rnePostConstraint(sim.model, sim.data)  # cfrc_ext, as a step computes it
    obs, obs2 = torch.from_numpy(env._get_obs()), torch.from_numpy(twin._get_obs())
    assert obs.shape == (WIDTHS[exclude_positions, contact_forces],)
    if contact_forces:
        blocks = obs[-78:].reshape(13, 6)
        assert (blocks.abs().sum(1) > 1e-3).all()  # every body's block takes part
    assert not torch.allclose(obs2, obs, atol=1e-3)
    torch.testing.assert_close(obs2, mirrored_half(obs[None])[0][0], rtol=0, atol=1e-10)
    contacts = 0
    for _ in range(12):
        action = rng.uniform(-1, 1, 8)
        action2 = mirrored_half(actions=torch.from_numpy(action)[None])[1][0].numpy()
        obs, reward, terminated, _, _ = env.step(action)
        obs2, reward2, terminated2, _, _ = twin.step(action2)
        torch.testing.assert_close(
            torch.from_numpy(obs2), mirrored_half(torch.from_numpy(obs)[None])[0][0], rtol=0, atol=1e-9
        )
        assert reward2 == pytest.approx(reward, abs=1e-9) and terminated2 == terminated
        contacts += env.data.ncon
    assert contacts > 0  # the steps ran through ground contacts too


def test_envpool_ant_v5_observes_what_gymnasium_does():
    envpool = pytest.importorskip("envpool")
    for (exclude_positions, contact_forces), width in WIDTHS.items():
        pool = envpool.make_gymnasium(
            "Ant-v5",
            num_envs=1,
            use_contact_force=contact_forces,
            exclude_current_positions_from_observation=exclude_positions,
        )
        assert pool.observation_space.shape == (width,) and pool.action_space.shape == (8,)
    # from envpool's first state, zero actions until the ant lands: the same entries, the same contacts
    # (x and y, which envpool's default observation leaves out, move nothing on the infinite plane)
    pool, env = envpool.make_gymnasium("Ant-v5", num_envs=1, seed=3), ant()
    obs, _ = pool.reset()
    env.reset(seed=0)
    env.set_state(np.concatenate([[0.0, 0.0], obs[0, :13]]), obs[0, 13:27])
    for _ in range(4):
        obs = pool.step(np.zeros((1, 8)))[0][0]
        expected = env.step(np.zeros(8))[0]
        np.testing.assert_allclose(obs, expected, rtol=0, atol=5e-3)
    assert env.data.ncon > 0 and np.array_equal(np.flatnonzero(obs[27:]), np.flatnonzero(expected[27:]))


class Symmetrized(nn.Module):
    """``(f(s) + A f(O s)) / 2``: commutes with the mirror (O, A involutions) whatever ``f`` is."""

    def __init__(self, f: nn.Module) -> None:
        super().__init__()
        self.f = f

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        mirrored_obs, _ = mirrored_half(obs=obs)
        return (self.f(obs) + mirrored_half(actions=self.f(mirrored_obs))[1]) / 2


def test_a_policy_symmetric_by_construction_has_zero_mirror_loss():
    torch.manual_seed(0)
    symmetry = Symmetry(
        SymmetryCfg(function="rlpipe.envs.tasks.symmetry:ant_mirror", mirror_loss=True, mirror_loss_coef=1.0)
    )
    obs = torch.randn(64, 105)
    policy = build_policy(
        {"name": "actor_critic"}, gym.spaces.Box(-np.inf, np.inf, (105,)), gym.spaces.Box(-1, 1, (8,)), "cpu"
    )
    mlp = nn.Sequential(nn.Linear(105, 32), nn.Tanh(), nn.Linear(32, 8))
    policy.actor = mlp
    assert symmetry.mirror_loss(policy, obs).item() > 1e-3
    policy.actor = Symmetrized(mlp)
    assert symmetry.mirror_loss(policy, obs).item() == pytest.approx(0.0, abs=1e-12)
