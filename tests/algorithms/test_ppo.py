import math

import gymnasium as gym
import pytest
import torch

from rlpipe.algorithms import PPO, PPOCfg, build_algo
from rlpipe.algorithms.ppo import (
    approx_kl,
    clip_fraction,
    clipped_surrogate,
    clipped_value_loss,
    dual_clip,
    explained_variance,
    normalize,
    surrogate,
    value_mse,
)
from rlpipe.config import ConfigError
from rlpipe.policies import build_policy
from rlpipe.rollout import allocate_rollout


def test_clipped_surrogate_by_hand():
    # ratios e^0.5≈1.6487 (A=+1: clipped to 1.2), e^-0.5≈0.6065 (A=-2: min(−1.213, −1.6) = −1.6),
    # e^0.1≈1.1052 (A=+3: unclipped 3.3155)
    log_prob = torch.tensor([0.5, -0.5, 0.1])
    old = torch.zeros(3)
    adv = torch.tensor([1.0, -2.0, 3.0])
    loss, log_ratio = clipped_surrogate(log_prob, old, adv, 0.2)
    expected = -(1.2 * 1.0 + 0.8 * -2.0 + math.exp(0.1) * 3.0) / 3
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert clip_fraction(log_ratio, 0.2).item() == pytest.approx(2 / 3)
    kl = sum(math.exp(x) - 1 - x for x in (0.5, -0.5, 0.1)) / 3
    assert approx_kl(log_ratio).item() == pytest.approx(kl, rel=1e-6)


def test_explained_variance_bounds():
    returns = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(returns, returns).item() == pytest.approx(1.0)
    assert explained_variance(torch.full((4,), 2.5), returns).item() == pytest.approx(0.0)


def make_ppo(**cfg):
    obs_space = gym.spaces.Box(-1, 1, (3,))
    policy = build_policy({"name": "actor_critic"}, obs_space, gym.spaces.Discrete(2), "cpu")
    return build_algo("ppo", {"batch_size": 8, "n_epochs": 1, **cfg}, policy, "cpu")


def test_ppo_loss_on_fixed_batch_matches_hand_computation():
    torch.manual_seed(0)
    algo = make_ppo(clip_coef=0.1, vf_coef=0.7, ent_coef=0.05)
    mb = {
        "obs": torch.randn(8, 3),
        "action": torch.randint(0, 2, (8,)),
        "sample_log_prob": torch.full((8,), math.log(0.5)),
        "advantage": torch.randn(8),
        "return": torch.randn(8),
    }
    total, stats = algo.loss(mb)
    logits = algo.policy.actor(mb["obs"])
    dist = torch.distributions.Categorical(logits=logits)
    ratio = (dist.log_prob(mb["action"]) - mb["sample_log_prob"]).exp()
    surr = torch.min(ratio * mb["advantage"], ratio.clamp(0.9, 1.1) * mb["advantage"])
    value = algo.policy.critic(mb["obs"]).squeeze(-1)
    expected = -surr.mean() + 0.7 * ((value - mb["return"]) ** 2).mean() - 0.05 * dist.entropy().mean()
    torch.testing.assert_close(total, expected)
    torch.testing.assert_close(stats["entropy"], dist.entropy().mean())


def random_rollout(n=4, t=8):
    ro = allocate_rollout(n, t, (3,), (), torch.int64, "cpu")
    ro["obs"].normal_()
    ro["action"][:, :-1] = torch.randint(0, 2, (n, t))
    ro["sample_log_prob"][:, :-1] = math.log(0.5)
    ro["reward"][:, :-1] = torch.randn(n, t)
    ro["value"].normal_()
    return ro


def test_update_changes_parameters_and_reports_metrics():
    torch.manual_seed(0)
    algo = make_ppo(n_epochs=2)
    before = [p.clone() for p in algo.policy.parameters()]
    stats = algo.update(random_rollout())
    assert any(not torch.equal(a, b) for a, b in zip(before, algo.policy.parameters()))
    for key in (
        "policy_loss",
        "value_loss",
        "entropy",
        "approx_kl",
        "clip_fraction",
        "explained_variance",
        "learning_rate",
    ):
        assert math.isfinite(stats[key]), key
    assert 0.0 <= stats["clip_fraction"] <= 1.0


def test_update_is_deterministic_given_generator_seed():
    def run():
        torch.manual_seed(1)
        algo = make_ppo(n_epochs=3)
        algo.reseed(123)
        algo.update(random_rollout())
        return [p.detach().clone() for p in algo.policy.parameters()]

    for a, b in zip(run(), run()):
        assert torch.equal(a, b)


def test_ppo_cfg_defaults_and_errors():
    cfg = PPOCfg()
    assert (cfg.n_epochs, cfg.clip_coef, cfg.ent_coef, cfg.vf_coef) == (10, 0.2, 0.01, 0.5)
    assert cfg.normalize_advantage == "batch"
    assert cfg.replace(clip_coef=0.3).clip_coef == 0.3
    with pytest.raises(ConfigError, match=r"algorithm.cfg.batch_size"):
        make_ppo(batch_size=0)
    with pytest.raises(ConfigError, match=r"algorithm.cfg.clip_cof: unknown key"):
        make_ppo(clip_cof=0.1)
    with pytest.raises(ConfigError, match="unknown algorithm 'dqn'; accepted: .*ppo"):
        build_algo("dqn", {}, None, "cpu")


def test_ppo_instance_is_registered_class():
    assert isinstance(make_ppo(), PPO)


# --- PPOCfg: defaults, compatibility, one-line errors ------------------------------------------


def test_defaults_keep_the_seed_values_and_every_option_off():
    cfg = PPOCfg()
    assert (cfg.n_epochs, cfg.clip_coef, cfg.ent_coef, cfg.vf_coef) == (10, 0.2, 0.01, 0.5)
    assert cfg.normalize_advantage == "batch"
    assert not (cfg.normalize_rewards or cfg.clip_value_loss or cfg.accumulate_grads)
    assert (cfg.dual_clip_coef, cfg.target_kl, cfg.num_mini_batches, cfg.lr_schedule) == (None,) * 4
    assert (cfg.schedule, cfg.optimizer, cfg.amp) == ("fixed", "adam", "none")


@pytest.mark.parametrize(("value", "expected"), [(True, "batch"), (False, "off"), ("minibatch", "minibatch")])
def test_normalize_advantage_accepts_the_old_bool(value, expected):
    assert PPOCfg(normalize_advantage=value).normalize_advantage == expected


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"target_kl": 0.01, "accumulate_grads": True}, r"^algorithm\.cfg\.target_kl: cannot be combined"),
        ({"schedule": "adaptive"}, r"^algorithm\.cfg\.desired_kl: required when schedule is adaptive"),
        (
            {"schedule": "adaptive", "desired_kl": 0.01, "lr_schedule": [[0, 1]]},
            r"^algorithm\.cfg\.schedule: ",
        ),
        ({"dual_clip_coef": 1.0}, r"^algorithm\.cfg\.dual_clip_coef: .*greater than 1"),
        ({"dual_clip_coef": 0.5}, r"^algorithm\.cfg\.dual_clip_coef: "),
        ({"lr_schedule": [[100, 1e-3], [50, 1e-4]]}, r"^algorithm\.cfg\.lr_schedule: .*increasing"),
        ({"ent_coef_schedule": [[0, 0.1], [0, 0.0]]}, r"^algorithm\.cfg\.ent_coef_schedule: .*increasing"),
        (
            {"lr_schedule": [[0, 1e-3]], "lr_schedule_kind": "linear"},
            r"^algorithm\.cfg\.lr_schedule: .*interp",
        ),
        ({"num_mini_batches": 0}, r"^algorithm\.cfg\.num_mini_batches: .*greater than or equal to 1"),
        (
            {"optimizer_kwargs": {"betaz": [0.9]}},
            r"^algorithm\.cfg\.optimizer_kwargs\.betaz: not an arg.*betas",
        ),
        ({"optimizer": "sgd", "optimizer_kwargs": {"betas": [0.9]}}, r"optimizer_kwargs\.betas: .*momentum"),
        (
            {"optimizer_kwargs": {"lr": 0.1}},
            r"^algorithm\.cfg\.optimizer_kwargs\.lr: set learning_rate instead",
        ),
        ({"optimizer": "lion"}, r"^algorithm\.cfg\.optimizer: "),
        ({"amp": "fp16"}, r"^algorithm\.cfg\.amp: fp16 needs a CUDA device"),
        ({"min_lr": 0.1, "max_lr": 0.01}, r"^algorithm\.cfg\.min_lr: must be <= max_lr"),
    ],
)
def test_impossible_combinations_fail_with_one_line_naming_the_key(cfg, message):
    with pytest.raises(ConfigError, match=message) as info:
        make_ppo(**cfg)
    assert "\n" not in str(info.value)


def test_check_run_rejects_fp16_on_cpu_before_the_policy_exists():
    cfg = PPOCfg(amp="fp16", device="cpu")
    with pytest.raises(ConfigError, match=r"algorithm\.cfg\.amp"):
        PPO.check_run(cfg, num_envs=4, policy_name="actor_critic", horizon=8)
    PPO.check_run(PPOCfg(amp="bf16", device="cpu"), num_envs=4, policy_name="actor_critic", horizon=8)


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("adam", torch.optim.Adam),
        ("adamw", torch.optim.AdamW),
        ("sgd", torch.optim.SGD),
        ("rmsprop", torch.optim.RMSprop),
    ],
)
def test_optimizer_choice_and_kwargs_reach_torch(name, cls):
    kwargs = {"sgd": {"momentum": 0.9}, "adamw": {"weight_decay": 0.05}}.get(name, {"eps": 1e-5})
    algo = make_ppo(optimizer=name, optimizer_kwargs=kwargs, learning_rate=2e-3)
    assert type(algo.optimizer) is cls
    group = algo.optimizer.param_groups[0]
    assert group["lr"] == 2e-3
    assert all(group[k] == v for k, v in kwargs.items())


# --- loss pieces, each on a fixed batch computed by hand ---------------------------------------


def test_dual_clip_bounds_negative_advantages_only():
    # clip 0.2, dual clip c = 2, ratios 3, 3, 0.5 with A = -1, +1, -1:
    #   A=-1, ρ=3:   min(-3, 1.2*-1) = -3   → dual: max(-3, 2*-1) = -2
    #   A=+1, ρ=3:   min(3, 1.2)     = 1.2  → unchanged (A ≥ 0)
    #   A=-1, ρ=0.5: min(-0.5, -0.8) = -0.8 → max(-0.8, -2) = -0.8 unchanged
    log_prob = torch.log(torch.tensor([3.0, 3.0, 0.5]))
    old = torch.zeros(3)
    adv = torch.tensor([-1.0, 1.0, -1.0])
    plain, _ = clipped_surrogate(log_prob, old, adv, 0.2)
    dual, _ = clipped_surrogate(log_prob, old, adv, 0.2, dual_clip_coef=2.0)
    assert plain.item() == pytest.approx(-(-3.0 + 1.2 - 0.8) / 3, rel=1e-6)
    assert dual.item() == pytest.approx(-(-2.0 + 1.2 - 0.8) / 3, rel=1e-6)
    objective = surrogate(torch.tensor([3.0, 3.0, 0.5]), adv, 0.2)
    torch.testing.assert_close(dual_clip(objective, adv, 2.0), torch.tensor([-2.0, 1.2, -0.8]))


def test_clipped_value_loss_by_hand_and_its_gradient():
    # c = 0.2; per sample: (V−R)², V_old + clip(V−V_old, ±0.2), then the max of the two squares
    #   V=1.0, V_old=0.5, R=2.0:  1.0   | clipped 0.7 → 1.69 | max 1.69 (clipped branch: no gradient)
    #   V=0.0, V_old=0.5, R=-1.0: 1.0   | clipped 0.3 → 1.69 | max 1.69 (clipped branch)
    #   V=2.0, V_old=2.0, R=1.0:  1.0   | clipped 2.0 → 1.0  | 1.0 (both equal)
    #   V=1.0, V_old=0.0, R=1.0:  0.0   | clipped 0.2 → 0.64 | max 0.64 (pessimistic)
    value = torch.tensor([1.0, 0.0, 2.0, 1.0], requires_grad=True)
    old = torch.tensor([0.5, 0.5, 2.0, 0.0])
    returns = torch.tensor([2.0, -1.0, 1.0, 1.0])
    loss = clipped_value_loss(value, old, returns, 0.2)
    assert loss.item() == pytest.approx((1.69 + 1.69 + 1.0 + 0.64) / 4, rel=1e-6)
    loss.backward()
    assert value.grad[0] == 0 and value.grad[1] == 0 and value.grad[3] == 0
    assert value.grad[2].item() != 0
    assert value_mse(value, returns).item() == pytest.approx((1 + 1 + 1 + 0) / 4)


def test_normalize_by_hand_and_single_sample():
    # [1, 2, 3, 4]: mean 2.5, unbiased std sqrt(5/3) = 1.2910
    out = normalize(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    expected = torch.tensor([-1.5, -0.5, 0.5, 1.5]) / math.sqrt(5 / 3)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(normalize(torch.tensor([3.0])), torch.tensor([0.0]))  # no NaN


@pytest.mark.slow
def test_continuous_ppo_learns_pendulum(tmp_path):
    """configs/ppo_pendulum.yaml: training return ≥ −250 within 40 iterations (~330k env steps)."""
    from rlpipe.config import load
    from rlpipe.trainer import Trainer

    cfg = load(
        "configs/ppo_pendulum.yaml",
        [
            f"trainer.data_dir={tmp_path}",
            "tracking.backend=none",
            "store.enabled=false",
            "trainer.enable_eval=false",
            "trainer.iterations=40",
        ],
    )
    trainer = Trainer(cfg)
    best = -math.inf
    for metrics in trainer:
        best = max(best, metrics.get("train/episode_return_mean", -math.inf))
        if best >= -250:
            break
    assert best >= -250, f"best training return {best:.1f} after {trainer.env_steps} env steps"


def test_ppo_refuses_a_policy_without_critic():
    from rlpipe.algorithms.ppo import PPO
    from rlpipe.config import ConfigError
    from rlpipe.config.algorithms import PPOCfg

    with pytest.raises(
        ConfigError,
        match=r"^policy\.name: actor_only has no critic, .*use policy\.name: "
        r"actor_critic, or algorithm\.name: grpo$",
    ):
        PPO.check_run(PPOCfg(), 8, "actor_only", 16)
    PPO.check_run(PPOCfg(), 8, "actor_critic", 16)  # the usual pairing passes


def test_ppo_refuses_a_built_policy_without_a_critic_whatever_its_name():
    """A plug-in policy named ``module:Class`` passes the name check; the built policy is checked."""
    from rlpipe.config.algorithms import PPOCfg

    PPO.check_run(PPOCfg(), 8, "mypkg.policies:MyActor", 16)
    spaces = gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2)
    actor_only = build_policy({"name": "actor_only", "critic": None}, *spaces, "cpu")
    with pytest.raises(ConfigError, match=r"^policy\.name: ActorOnly has no critic, .*grpo$"):
        build_algo("ppo", {}, actor_only, "cpu")
