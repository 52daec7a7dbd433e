"""RslRlEnv against a small ``rsl_rl.env.VecEnv`` subclass: groups, time-outs, log metrics."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rlpipe.envs.backends.rsl_rl_env import RslRlEnv, is_rsl_rl_env

rsl_env = pytest.importorskip("rsl_rl.env")

LENGTH = 4


class CountingVecEnv(rsl_env.VecEnv):
    """N envs counting steps: time-out after LENGTH steps; env 0 terminates when its action > 1.

    Observation groups: ``policy`` ``[N, 2]`` (step count, env index), ``critic`` ``[N, 3]``.
    Resets itself, like Isaac Lab and mjlab, and never exposes the last observation.
    """

    def __init__(self, num_envs: int = 3, device: str = "cpu") -> None:
        self.num_envs, self.num_actions, self.device = num_envs, 2, device
        self.max_episode_length, self.cfg = LENGTH, {}
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)

    def get_observations(self) -> TensorDict:
        count = self.episode_length_buf.float()
        index = torch.arange(self.num_envs, dtype=torch.float32)
        return TensorDict(
            {
                "policy": torch.stack([count, index], -1),
                "critic": torch.stack([count, index, count * 10], -1),
            },
            batch_size=[self.num_envs],
        )

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        self.episode_length_buf += 1
        time_outs = self.episode_length_buf >= LENGTH
        terminated = torch.zeros(self.num_envs, dtype=torch.bool)
        terminated[0] = bool(actions[0, 0] > 1)
        dones = time_outs | terminated
        self.episode_length_buf[dones] = 0
        extras = {
            "time_outs": time_outs,
            "log": {"/reward_terms/alive": torch.ones(self.num_envs) * 2, "Episode/count": 3.0},
        }
        return self.get_observations(), actions.sum(-1), dones.long(), extras


def test_groups_become_dict_observations_on_the_envs_device() -> None:
    env = RslRlEnv(CountingVecEnv())
    assert is_rsl_rl_env(env.env) and env.bootstrap == "approximate"
    assert env.obs_spec == {"critic": (3,), "policy": (2,)}
    assert env.action_shape == (2,) and env.max_episode_steps == LENGTH and env.num_envs == 3
    obs = env.reset(seed=1)
    assert isinstance(obs, TensorDict) and obs.device == torch.device("cpu")
    assert obs["policy"].dtype == torch.float32


def test_time_outs_are_truncations_bootstrapped_from_the_pre_step_observation() -> None:
    env = RslRlEnv(CountingVecEnv())
    env.reset()
    for _ in range(LENGTH - 1):
        step = env.step(torch.zeros(3, 2))
        assert not (step.truncated | step.terminated).any()
    before = step.obs["policy"].clone()
    step = env.step(torch.zeros(3, 2))
    assert step.truncated.all() and not step.terminated.any()
    assert torch.equal(step.final_obs["policy"], before)  # the only information available
    assert (step.obs["policy"][:, 0] == 0).all()  # the env reset itself
    assert step.reward.dtype == torch.float32 and step.reward.shape == (3,)


def test_termination_is_not_a_truncation() -> None:
    env = RslRlEnv(CountingVecEnv())
    env.reset()
    step = env.step(torch.tensor([[2.0, 0.0], [0.0, 0.0], [0.0, 0.0]]))
    assert step.terminated.tolist() == [True, False, False] and not step.truncated.any()


def test_log_extras_are_averaged_into_env_metrics() -> None:
    env = RslRlEnv(CountingVecEnv())
    env.reset()
    for _ in range(3):
        env.step(torch.zeros(3, 2))
    assert env.pop_metrics() == {"env/reward_terms/alive": 2.0, "env/Episode/count": 3.0}
    assert env.pop_metrics() == {}


def test_group_resets_are_refused_and_resume_continues_from_the_sim() -> None:
    env = RslRlEnv(CountingVecEnv())
    with pytest.raises(ValueError, match="group_size"):
        env.reset(group_size=3)
    env.step(torch.zeros(3, 2))
    assert env.state_dict() == {}
    env.load_state_dict({})
    assert env.last_obs is not None and (env.last_obs["policy"][:, 0] == 1).all()


def test_collector_trains_on_it_with_asymmetric_keys() -> None:
    from rlpipe.collector import Collector
    from rlpipe.config import PolicyCfg
    from rlpipe.policies import build_policy

    env = RslRlEnv(CountingVecEnv())
    cfg = PolicyCfg.from_dict(
        {"actor": {"obs_keys": ["policy"]}, "critic": {"obs_keys": ["policy", "critic"]}}
    )
    policy = build_policy(cfg, env.observation_space, env.action_space, "cpu")
    assert policy.actor[0].in_features == 2 and policy.critic[0].in_features == 5
    rollout, stats = Collector(env, policy, horizon=6, seed=0)()
    assert set(rollout["obs"].keys()) == {"policy", "critic"} and rollout["obs", "critic"].shape == (3, 7, 3)
    assert rollout["truncated"][1:, LENGTH - 1].all()  # env 0 may terminate early (action > 1)
    assert stats["env/reward_terms/alive"] == 2.0


def test_run_records_the_approximate_bootstrap_and_log_metrics(tmp_path, monkeypatch) -> None:
    """The README's example (examples/rsl_rl_counting_env.py) through ``rlpipe run``."""
    from _offline_fixtures import ROOT, tiny_cfg

    from rlpipe.artifacts.zarr_read import read_rollout
    from rlpipe.trainer import Trainer

    monkeypatch.syspath_prepend(str(ROOT))  # as PYTHONPATH=. does: rlpipe never imports from the cwd
    cfg = tiny_cfg(
        tmp_path,
        "env.id=examples.rsl_rl_counting_env:make",
        "trainer.iterations=2",
        "policy.actor.obs_keys=[policy]",
        "policy.critic.obs_keys=[policy,critic]",
        "env.cfg.max_episode_length=10",
    )
    Trainer(cfg).train()
    rollout, attrs = read_rollout(cfg.run_dir / "rollouts" / "iter-000002.zarr")
    assert attrs["bootstrap"] == "approximate" and attrs["env_backend"] == "RslRlEnv"
    assert attrs["critic_obs_keys"] == ["policy", "critic"]
    assert set(rollout["obs"].keys()) == {"policy", "critic"}
    assert rollout["truncated"][:, :-1].sum() == 16  # steps 16..31: time-outs at 20 and 30, 8 envs
    header = (cfg.run_dir / "curve.csv").read_text().splitlines()[0].split(",")
    assert "env/error" in header
