"""``engine: warp``: the same PushCube on MuJoCo Warp (Warp's CPU backend here).

Slow: the first use compiles Warp's kernels (minutes; cached in ~/.cache/warp afterwards).
"""

from __future__ import annotations

import pytest
import torch

from rlpipe.config import ConfigError
from rlpipe.envs import build_env

N = 4


def test_missing_warp_is_a_config_error(monkeypatch):
    import sys

    for name in ("mujoco_warp", "warp"):  # what an environment without the warp extra has
        monkeypatch.setitem(sys.modules, name, None)
    expected = r"^env.cfg.engine: warp needs mujoco-warp: pip install 'rlpipe\[warp\]'$"
    with pytest.raises(ConfigError, match=expected):
        build_env("PushCube", N, "cpu", {"engine": "warp"})


@pytest.mark.slow
def test_warp_matches_the_c_engine_and_resumes_exactly():
    pytest.importorskip("mujoco_warp")
    c_env = build_env("PushCube", N, "cpu", {})
    w_env = build_env("PushCube", N, "cpu", {"engine": "warp"})
    torch.testing.assert_close(w_env.reset(seed=7), c_env.reset(seed=7), atol=1e-4, rtol=0)
    action = torch.zeros(N, 8)
    action[:, 1] = 0.5
    for _ in range(8):
        c_obs, w_obs = c_env.step(action).obs, w_env.step(action).obs
    # tool and cube positions agree to millimetres (float32 and another solver implementation)
    torch.testing.assert_close(w_obs[:, 18:21], c_obs[:, 18:21], atol=5e-3, rtol=0)
    torch.testing.assert_close(w_obs[:, 25:28], c_obs[:, 25:28], atol=5e-3, rtol=0)
    state = w_env.state_dict()
    expected = [w_env.step(action).obs for _ in range(3)]
    w_env.load_state_dict(state)
    for want in expected:
        assert torch.equal(w_env.step(action).obs, want)
