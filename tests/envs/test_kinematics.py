"""Batched torch kinematics of a MuJoCo site equal MuJoCo's own (mj_kinematics, mj_jacSite)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from rlpipe.envs.tasks.push_cube.kinematics import SiteKinematics, matrix_to_quat
from rlpipe.envs.tasks.push_cube.scene import build_model, scene_ids


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    return build_model(0.01, visual=False)


def test_pose_and_jacobian_match_mujoco(model):
    ids = scene_ids(model)
    kin = SiteKinematics(model, ids.tcp_site, "cpu")
    assert kin.dofs == list(ids.arm_qpos)
    qpos = np.tile(model.qpos0, (6, 1))
    qpos[:, ids.arm_qpos] += np.random.default_rng(0).normal(0, 0.7, (6, 7))
    pos, rot, jac = kin.jacobian(torch.from_numpy(qpos))
    data = mujoco.MjData(model)
    for i in range(6):
        data.qpos[:] = qpos[i]
        mujoco.mj_forward(model, data)
        jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
        mujoco.mj_jacSite(model, data, jacp, jacr, ids.tcp_site)
        np.testing.assert_allclose(pos[i].numpy(), data.site_xpos[ids.tcp_site], atol=1e-12)
        np.testing.assert_allclose(rot[i].numpy().ravel(), data.site_xmat[ids.tcp_site], atol=1e-12)
        np.testing.assert_allclose(jac[i].numpy(), np.vstack((jacp, jacr))[:, ids.robot_dof[:7]], atol=1e-12)


def test_matrix_to_quat_matches_mujoco_with_positive_w():
    rng = np.random.default_rng(1)
    quats = rng.normal(size=(64, 4))
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    mats = np.zeros((64, 9))
    for q, m in zip(quats, mats, strict=True):
        mujoco.mju_quat2Mat(m, q)
    got = matrix_to_quat(torch.from_numpy(mats.reshape(64, 3, 3))).numpy()
    want = quats * np.sign(quats[:, :1])
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_non_hinge_chain_is_refused():
    spec = mujoco.MjSpec()
    body = spec.worldbody.add_body(name="b")
    body.add_freejoint()
    body.add_geom(size=[0.1, 0, 0])
    body.add_site(name="s")
    free = spec.compile()
    with pytest.raises(ValueError, match="is not a hinge"):
        SiteKinematics(free, free.site("s").id, "cpu")
