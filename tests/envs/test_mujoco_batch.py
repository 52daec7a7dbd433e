"""The batched C engine: rollout-pool stepping equals plain mj_step, for any thread count."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from rlpipe.envs.tasks.push_cube.physics import MujocoBatch
from rlpipe.envs.tasks.push_cube.scene import REST_QPOS, build_model, scene_ids

N, SUBSTEPS = 6, 5


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    return build_model(0.01, visual=False)


def starts(model: mujoco.MjModel) -> torch.Tensor:
    ids = scene_ids(model)
    qpos = torch.from_numpy(np.tile(model.qpos0, (N, 1)))
    qpos[:, ids.arm_qpos] = torch.tensor(REST_QPOS[:7], dtype=torch.float64)
    qpos[:, ids.cube_qpos] = torch.linspace(-0.1, 0.1, N, dtype=torch.float64)
    return qpos


def controls(model: mujoco.MjModel, steps: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    base = torch.tensor([*REST_QPOS[:7], 0.02], dtype=torch.float64)
    return [base + 0.2 * torch.rand(N, model.nu, generator=gen, dtype=torch.float64) for _ in range(steps)]


def test_batch_equals_mj_step_and_is_thread_count_independent(model):
    ctrls = controls(model, 4)
    results = []
    for nthread in (1, 3):
        batch = MujocoBatch(model, N, SUBSTEPS, nthread)
        batch.reset_where(torch.ones(N, dtype=torch.bool), starts(model), torch.zeros(N, model.nv))
        for ctrl in ctrls:
            batch.step(ctrl)
        results.append(batch.qpos.clone())
        batch.close()
    assert torch.equal(results[0], results[1])
    data = mujoco.MjData(model)
    for i in range(N):
        mujoco.mj_resetData(model, data)
        data.qpos[:] = starts(model)[i].numpy()
        for ctrl in ctrls:
            data.qacc_warmstart[:] = 0  # the batch starts every control step without warm-start
            data.ctrl[:] = ctrl[i].numpy()
            for _ in range(SUBSTEPS):
                mujoco.mj_step(model, data)
        np.testing.assert_allclose(results[0][i].numpy(), data.qpos, atol=1e-9)


def test_reset_where_and_state_round_trip(model):
    batch = MujocoBatch(model, N, SUBSTEPS, 2)
    batch.reset_where(torch.ones(N, dtype=torch.bool), starts(model), torch.zeros(N, model.nv))
    ctrls = controls(model, 3)
    batch.step(ctrls[0])
    saved = batch.get_state()
    mask = torch.tensor([True, False] * (N // 2))
    before = batch.qpos.clone()
    batch.reset_where(mask, starts(model), torch.zeros(N, model.nv))
    assert torch.equal(batch.qpos[mask], starts(model)[mask])
    assert torch.equal(batch.qpos[~mask], before[~mask])
    batch.set_state(saved)
    batch.step(ctrls[1])
    again = MujocoBatch(model, N, SUBSTEPS, 1)
    again.set_state(saved)
    again.step(ctrls[1])
    assert torch.equal(batch.qpos, again.qpos) and torch.equal(batch.qvel, again.qvel)
