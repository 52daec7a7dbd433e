"""RND: reward shapes, fading novelty, a frozen target, the intrinsic critic's GAE, state and resume."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from _offline_fixtures import PARAMS, STEPS, leaves, same_leaves, set_args, tiny_cfg
from click.testing import CliRunner
from tensordict import TensorDict

from rlpipe.algorithms import build_algo
from rlpipe.algorithms.minibatches import minibatch_indices
from rlpipe.algorithms.normalization import RewardNormalizer, discounted_returns
from rlpipe.algorithms.rnd import INTRINSIC_RETURN, RND, RolloutRewardNormalizer
from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.cli import cli
from rlpipe.config import ConfigError
from rlpipe.config.algorithms import PPOCfg, RNDCfg
from rlpipe.policies import build_policy
from rlpipe.trainer import Trainer

N, T, D = 4, 6, 3


def _rollout(obs: torch.Tensor | None = None, seed: int = 0) -> TensorDict:
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(N, T + 1, D, generator=g) if obs is None else obs
    done = torch.zeros(N, T + 1, dtype=torch.bool)
    done[0, 2] = True
    return TensorDict({"obs": obs, "done": done}, batch_size=[N, T + 1])


def _epochs(rows: int, epochs: int, size: int = 8):
    g = torch.Generator().manual_seed(3)
    return (minibatch_indices(rows, size, torch.device("cpu"), g) for _ in range(epochs))


def test_intrinsic_reward_is_nonnegative_n_by_t_and_weighted():
    rnd = RND(RNDCfg(hidden_sizes=[32], weight=2.0), torch.device("cpu"))
    reward, stats = rnd.intrinsic_reward(_rollout(), seed=0, env_steps=0, total_env_steps=None)
    assert reward.shape == (N, T) and (reward >= 0).all() and reward.sum() > 0
    assert stats["intrinsic_reward_mean"] == pytest.approx(reward.mean().item())
    assert stats["rnd_weight"] == 2.0
    unweighted = RND(RNDCfg(hidden_sizes=[32], weight=1.0), torch.device("cpu"))
    half, _ = unweighted.intrinsic_reward(_rollout(), seed=0, env_steps=0, total_env_steps=None)
    assert torch.allclose(reward, 2.0 * half)


def test_weight_follows_its_schedule():
    cfg = RNDCfg(hidden_sizes=[8], weight=1.0, weight_schedule=[[0, 1.0], [100, 0.25]])
    rnd = RND(cfg, torch.device("cpu"))
    assert rnd.intrinsic_reward(_rollout(), 0, 50, None)[1]["rnd_weight"] == 1.0
    assert rnd.intrinsic_reward(_rollout(), 0, 150, None)[1]["rnd_weight"] == 0.25


def test_reward_reads_the_next_observation_of_each_step():
    cfg = RNDCfg(hidden_sizes=[16], reward_normalization=False, state_normalization=False)
    rnd = RND(cfg, torch.device("cpu"))
    rollout = _rollout()
    reward, _ = rnd.intrinsic_reward(rollout, 0, 0, None)
    assert torch.allclose(reward, rnd.error(rollout["obs"][:, 1:]))


def test_novelty_of_repeatedly_seen_states_decreases_and_the_target_stays_frozen():
    rnd = RND(RNDCfg(hidden_sizes=[64], learning_rate=1e-2, reward_normalization=False), torch.device("cpu"))
    seen = _rollout(seed=1)
    before, _ = rnd.intrinsic_reward(seen, 0, 0, None)
    target = [p.clone() for p in rnd.target.parameters()]
    assert all(not p.requires_grad for p in rnd.target.parameters())
    losses = [rnd.fit(seen, _epochs(N * T, 1))["rnd_loss"].item() for _ in range(40)]
    after = rnd.error(rnd.inputs(seen["obs"][:, 1:]))
    novel = rnd.error(rnd.inputs(_rollout(seed=2)["obs"][:, 1:] * 3.0))
    assert after.mean() < 0.2 * before.mean() and losses[-1] < losses[0]
    assert novel.mean() > 5 * after.mean()  # unseen states keep their novelty
    assert all(torch.equal(a, b) for a, b in zip(target, rnd.target.parameters()))


def test_state_dict_round_trips_and_building_leaves_the_global_rng_alone():
    cfg = RNDCfg(hidden_sizes=[16])
    rnd = RND(cfg, torch.device("cpu"))
    assert rnd.state_dict() == {"in_dim": None}
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    rnd.intrinsic_reward(_rollout(), seed=0, env_steps=0, total_env_steps=None)
    assert torch.equal(torch.rand(3), expected)
    rnd.fit(_rollout(), _epochs(N * T, 2))
    copy = RND(cfg, torch.device("cpu"))
    copy.load_state_dict(rnd.state_dict())
    assert same_leaves(dict(leaves(rnd.state_dict())), dict(leaves(copy.state_dict())))
    nxt = _rollout(seed=4)
    a, _ = rnd.intrinsic_reward(nxt, 0, 0, None)
    b, _ = copy.intrinsic_reward(nxt, 0, 0, None)
    assert torch.equal(a, b)


def _critic_rnd(**cfg) -> RND:
    """An ``intrinsic_critic`` RND on raw states and rewards (no normalization), γ = 0.5."""
    return RND(
        RNDCfg(
            hidden_sizes=[16],
            critic_hidden_sizes=[8],
            intrinsic_critic=True,
            gamma=0.5,
            reward_normalization=False,
            state_normalization=False,
            **cfg,
        ),
        torch.device("cpu"),
    )


def _with_flags(rollout: TensorDict) -> TensorDict:
    """``rollout`` plus ``terminated`` (= ``done``) and ``truncated`` (none)."""
    rollout.update(
        {"terminated": rollout["done"].clone(), "truncated": torch.zeros(N, T + 1, dtype=torch.bool)}
    )
    return rollout


def _discounted_sums(reward: torch.Tensor, value: torch.Tensor, done: torch.Tensor, gamma: float):
    """Plain loop, λ = 1: R_t = r_t + γ·(1 − done_t)·R_{t+1}, R_T = V(obs_T) (the bootstrap)."""
    out = torch.empty_like(reward)
    running = value[:, -1]
    for t in range(reward.shape[1] - 1, -1, -1):
        running = reward[:, t] + gamma * (~done[:, t]).float() * running
        out[:, t] = running
    return out


def test_intrinsic_advantage_shapes_and_weight():
    rollout = _with_flags(_rollout())
    heavy, light = _critic_rnd(weight=3.0), _critic_rnd(weight=1.0)
    a3, r3, stats = heavy.intrinsic_advantage(rollout, 0, 0, None, gae_lambda=0.9)
    a1, r1, _ = light.intrinsic_advantage(rollout, 0, 0, None, gae_lambda=0.9)
    assert a3.shape == r3.shape == (N, T) and stats["rnd_weight"] == 3.0
    assert torch.allclose(a3, 3.0 * a1) and torch.equal(r3, r1)  # the weight scales A_int, not the target
    with torch.no_grad():
        value = heavy.value(rollout["obs"][:, :-1])
    assert torch.allclose(r3, a1 + value)  # return = A_int + V_int (unweighted)


def test_non_episodic_intrinsic_returns_ignore_dones_and_episodic_ones_stop_there():
    rollout = _with_flags(_rollout())  # env 0 is done at step 2
    cut, through = _critic_rnd(episodic=True), _critic_rnd()
    assert through.episodic is False and cut.episodic is True
    _, returns_through, _ = through.intrinsic_advantage(rollout, 0, 0, None, gae_lambda=1.0)
    _, returns_cut, _ = cut.intrinsic_advantage(rollout, 0, 0, None, gae_lambda=1.0)
    with torch.no_grad():
        reward, value = through.error(rollout["obs"][:, 1:]), through.value(rollout["obs"])
    never = torch.zeros(N, T, dtype=torch.bool)
    assert torch.allclose(returns_through, _discounted_sums(reward, value, never, 0.5), atol=1e-6)
    cut_by_hand = _discounted_sums(reward, value, rollout["done"][:, :-1], 0.5)
    assert torch.allclose(returns_cut, cut_by_hand, atol=1e-6)
    # env 0, step 0 by hand (λ = 1): r0 + γ r1 + γ² r2, plus γ³ R_3 only when the done does not cut
    head = reward[0, 0] + 0.5 * reward[0, 1] + 0.25 * reward[0, 2]
    assert returns_cut[0, 0] == pytest.approx(float(head), abs=1e-6)
    assert returns_through[0, 0] == pytest.approx(float(head + 0.125 * returns_through[0, 3]), abs=1e-6)
    assert returns_through[0, 3] > 0 and not torch.allclose(returns_through[0, :3], returns_cut[0, :3])
    assert torch.equal(returns_through[1:], returns_cut[1:])  # no done in envs 1..3: the same


def test_non_episodic_reward_normalization_carries_the_return_across_dones():
    rollout = _rollout()
    rollout["done"][:, T - 1] = True  # every env's episode ends on the last step
    carried = {}
    for episodic in (True, False):
        rnd = RND(RNDCfg(hidden_sizes=[16], intrinsic_critic=True, episodic=episodic), torch.device("cpu"))
        rnd.novelty(rollout, seed=0)
        carried[episodic] = rnd.reward_normalizer.returns
    assert torch.equal(carried[True], torch.zeros(N)) and (carried[False] > 0).all()


def test_rollout_normalization_forgets_the_early_novelty_and_running_keeps_it():
    done = torch.zeros(N, T, dtype=torch.bool)
    early, late = torch.full((N, T), 100.0), torch.rand(N, T, generator=torch.Generator().manual_seed(0))
    running, rollout = RewardNormalizer(0.9, "cpu"), RolloutRewardNormalizer(0.9, "cpu")
    for normalizer in (running, rollout):
        normalizer(early, done)
    carried = rollout.returns.clone()
    assert torch.equal(carried, running.returns) and carried.gt(0).all()  # both carry the returns
    running(late, done)
    scaled_rollout = rollout(late, done)
    returns, _ = discounted_returns(late, done, 0.9, carried)
    assert torch.allclose(scaled_rollout, late / returns.std(unbiased=False), atol=1e-6)  # this rollout's std
    for normalizer in (running, rollout):  # much later: the carried early returns have decayed away
        for _ in range(20):
            normalizer(late, done)
    assert running(late, done).mean() < 0.1 * rollout(late, done).mean()  # the early 100s still set its scale


def test_reward_normalization_takes_its_names_and_booleans():
    assert RNDCfg(reward_normalization=True).reward_normalization == "running"
    assert RNDCfg(reward_normalization=False).reward_normalization == "off"
    kinds = {
        mode: type(RND(RNDCfg(reward_normalization=mode), torch.device("cpu")).reward_normalizer)
        for mode in ("running", "rollout", "off")
    }
    assert kinds == {"running": RewardNormalizer, "rollout": RolloutRewardNormalizer, "off": type(None)}


def _ppo(rnd: dict | None):
    torch.manual_seed(0)
    obs_space, action_space = gym.spaces.Box(-1, 1, (D,)), gym.spaces.Discrete(2)
    policy = build_policy({"name": "actor_critic"}, obs_space, action_space, "cpu")
    extra = {"rnd": rnd} if rnd else {}
    return build_algo("ppo", {"batch_size": 8, "n_epochs": 2, **extra}, policy, "cpu")


def _ppo_rollout() -> TensorDict:
    rollout = _rollout()
    rollout.update(
        {
            "reward": torch.zeros(N, T + 1),
            "value": torch.zeros(N, T + 1),
            "truncated": torch.zeros(N, T + 1, dtype=torch.bool),
            "action": torch.zeros(N, T + 1).long(),
            "terminated": rollout["done"].clone(),
            "sample_log_prob": torch.full((N, T + 1), -0.69),
        }
    )
    return rollout


def test_ppo_adds_intrinsic_reward_to_gae_and_trains_the_predictor():
    rollout = _ppo_rollout()
    plain, curious = _ppo(None), _ppo({"hidden_sizes": [16]})
    assert "obs" in curious.advantage_reads and "obs" not in plain.advantage_reads
    assert INTRINSIC_RETURN not in curious.advantage_keys and curious.rnd.critic is None
    assert plain.compute_advantages(rollout.clone()) == {}
    with_rnd = rollout.clone()
    stats = curious.compute_advantages(with_rnd)
    assert stats["intrinsic_reward_mean"] > 0 and with_rnd["return"][:, :T].gt(0).all()
    predictor = [p.clone() for p in curious.rnd.predictor.parameters()]
    metrics = curious.update(with_rnd, iteration=1)
    assert metrics["rnd_loss"] > 0 and "intrinsic_value_loss" not in metrics
    assert not all(torch.equal(a, b) for a, b in zip(predictor, curious.rnd.predictor.parameters()))
    assert "rnd" in curious.state_dict() and "rnd" not in plain.state_dict()


@pytest.mark.parametrize("target_kl", [None, 1e-6])
def test_the_predictor_steps_inside_the_update_on_the_policys_own_minibatches(target_kl):
    """One predictor step per minibatch the loop draws, on that minibatch's rows: nothing replayed."""
    curious = _ppo({"hidden_sizes": [16]})
    if target_kl is not None:  # stops at the first minibatch: the predictor stops with the policy
        curious = build_algo(
            "ppo",
            {
                "batch_size": 8,
                "n_epochs": 2,
                "rnd": {"hidden_sizes": [16]},
                "target_kl": target_kl,
                "learning_rate": 0.5,
            },
            curious.policy,
            "cpu",
        )
    policy_rows, predictor_rows = [], []
    loss, step = curious.loss_step, curious.rnd.step

    def spy_loss(mb):
        policy_rows.append(mb["obs"].clone())
        return loss(mb)

    def spy_step(obs, returns):
        predictor_rows.append(obs.clone())
        return step(obs, returns)

    curious.loss_step, curious.rnd.step = spy_loss, spy_step
    metrics = curious.update(_ppo_rollout(), iteration=1)
    drawn = metrics["minibatch_steps"] + (1 if metrics.get("early_stop_epoch") else 0)
    assert len(predictor_rows) == len(policy_rows) == drawn
    assert drawn == (1 if target_kl else 2 * N * T // 8)
    assert all(torch.equal(a, b) for a, b in zip(policy_rows, predictor_rows))


def test_ppo_with_an_intrinsic_critic_combines_the_two_advantages_and_trains_v_int():
    rollout = _ppo_rollout()
    rollout["reward"][:, :T] = torch.linspace(-1, 1, N * T).view(N, T)
    cfg = {
        "hidden_sizes": [16],
        "critic_hidden_sizes": [8],
        "intrinsic_critic": True,
        "extrinsic_coef": 0.5,
        "weight": 2.0,
    }
    plain, curious, twin = _ppo(None), _ppo(cfg), _ppo(cfg)
    assert curious.advantage_keys == ("advantage", "return", INTRINSIC_RETURN)
    assert INTRINSIC_RETURN in curious.update_keys and INTRINSIC_RETURN not in plain.update_keys
    extrinsic, combined = rollout.clone(), rollout.clone()
    plain.compute_advantages(extrinsic)
    stats = curious.compute_advantages(combined)
    intrinsic, returns, _ = twin.rnd.intrinsic_advantage(rollout.clone(), 0, 0, None, 0.95)
    assert torch.equal(combined["return"], extrinsic["return"])  # the policy's critic: extrinsic only
    assert torch.allclose(combined["advantage"][:, :T], 0.5 * extrinsic["advantage"][:, :T] + intrinsic)
    assert torch.equal(combined[INTRINSIC_RETURN][:, :T], returns)
    assert not combined[INTRINSIC_RETURN][:, T].any()  # the padding slot
    assert stats["rnd_weight"] == 2.0
    critic = [p.clone() for p in curious.rnd.critic.parameters()]
    metrics = curious.update(combined, iteration=1)
    assert metrics["rnd_loss"] > 0 and metrics["intrinsic_value_loss"] > 0
    assert not all(torch.equal(a, b) for a, b in zip(critic, curious.rnd.critic.parameters()))
    copy = _ppo(cfg)
    copy.load_state_dict(curious.state_dict())
    assert same_leaves(dict(leaves(curious.state_dict())), dict(leaves(copy.state_dict())))
    assert "critic_optimizer" in curious.state_dict()["rnd"]


@pytest.mark.parametrize(
    ("rnd", "key", "why"),
    [
        ({"weight_schedule": [[10, 1.0], [5, 0.0]]}, "weight_schedule", "strictly increasing"),
        ({"hidden_sizes": [0]}, "hidden_sizes", ">= 1"),
        ({"intrinsic_critic": True, "critic_hidden_sizes": [4, 0]}, "critic_hidden_sizes", ">= 1"),
        ({"episodic": False}, "episodic", "needs intrinsic_critic: true"),
        ({"extrinsic_coef": 1.0}, "extrinsic_coef", "only with intrinsic_critic: true"),
        ({"intrinsic_critic": True, "extrinsic_coef": -1}, "extrinsic_coef", "greater than or equal to 0"),
        ({"reward_normalization": "batch"}, "reward_normalization", "'running', 'rollout' or 'off'"),
    ],
)
def test_rnd_config_errors_name_the_key(rnd, key, why):
    with pytest.raises(ConfigError, match=rf"^algorithm\.cfg\.rnd\.{key}: .*{why}") as info:
        PPOCfg.from_dict({"rnd": rnd}, "algorithm.cfg")
    assert "\n" not in str(info.value)


def test_the_cli_refuses_a_bad_rnd_config_in_one_line_with_exit_2(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["run", str(PARAMS), "--set", "algorithm.cfg.rnd={episodic: false}"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"Error: {PARAMS}: algorithm.cfg.rnd.episodic: false needs")
    assert list(tmp_path.iterdir()) == []


def test_obs_keys_must_name_groups_of_the_env():
    box = gym.spaces.Box(-1, 1, (2,))
    groups = gym.spaces.Dict({"proprio": box, "privileged": box})
    flat = gym.spaces.Box(-1, 1, (4,))
    RND(RNDCfg(obs_keys=["proprio"]), "cpu").check_observations(groups)
    RND(RNDCfg(), "cpu").check_observations(flat)
    for keys, space, message in [
        (["nope"], groups, "the env has no observation group 'nope'; accepted: privileged, proprio"),
        (["proprio"] * 2, groups, r"needs distinct groups \(got \['proprio', 'proprio'\]\); accepted: "),
        (["proprio"], flat, "the env's observations are flat, not a dict of groups; remove obs_keys"),
    ]:
        with pytest.raises(ConfigError, match=r"^algorithm\.cfg\.rnd\.obs_keys: " + message):
            RND(RNDCfg(obs_keys=keys), "cpu").check_observations(space)


@pytest.mark.parametrize(
    "env_cfg, message",
    [
        ("env.cfg.obs_groups=true", "the env has no observation group 'nope'; accepted: privileged, proprio"),
        (
            "env.cfg.obs_groups=false",
            "the env's observations are flat, not a dict of groups; remove obs_keys",
        ),
    ],
)
def test_the_cli_refuses_obs_keys_the_env_lacks_before_writing(tmp_path, env_cfg, message):
    result = CliRunner().invoke(
        cli, ["run", str(PARAMS), *set_args(tmp_path, env_cfg, "algorithm.cfg.rnd={obs_keys: [nope]}")]
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"Error: algorithm.cfg.rnd.obs_keys: {message}"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "rnd",
    [
        "{hidden_sizes: [16], weight: 0.5}",
        "{hidden_sizes: [16], critic_hidden_sizes: [8], intrinsic_critic: true, "
        "reward_normalization: rollout}",
    ],
)
def test_a_resumed_curious_run_equals_the_uninterrupted_one(tmp_path, rnd):
    rnd = (f"algorithm.cfg.rnd={rnd}", f"trainer.save_freq={2 * STEPS}")
    whole = tiny_cfg(tmp_path / "whole", "trainer.iterations=4", *rnd)
    Trainer(whole).train()
    Trainer(tiny_cfg(tmp_path / "split", "trainer.iterations=2", *rnd)).train()
    split = tiny_cfg(tmp_path / "split", "trainer.iterations=4", *rnd)
    Trainer(split, resume=True).train()
    a, b = (load_checkpoint(cfg.run_dir / "checkpoints" / "ckpt-000004.pt") for cfg in (whole, split))
    assert a["algo"]["rnd"]["in_dim"] == 4
    assert ("critic" in a["algo"]["rnd"]) == ("intrinsic_critic" in rnd[0])
    state_a = {k: v for k, v in leaves(a) if k not in ("/wall_s", "/params_hash")}
    state_b = {k: v for k, v in leaves(b) if k not in ("/wall_s", "/params_hash")}
    assert same_leaves(state_a, state_b)
