"""PPOCfg options at the algorithm level: each one changes what ``update`` does in a checkable way."""

import math

import gymnasium as gym
import pytest
import torch

from rlpipe.algorithms import PPO, build_algo
from rlpipe.algorithms.gae import compute_gae
from rlpipe.algorithms.ppo import clipped_value_loss, normalize
from rlpipe.algorithms.schedules import Progress
from rlpipe.policies import build_policy
from rlpipe.rollout import allocate_rollout

N, T = 4, 8  # 32 transitions


def make_ppo(action_space=None, **cfg) -> PPO:
    policy = build_policy(
        {"name": "actor_critic"}, gym.spaces.Box(-1, 1, (3,)), action_space or gym.spaces.Discrete(2), "cpu"
    )
    return build_algo("ppo", {"batch_size": 8, "n_epochs": 1, **cfg}, policy, "cpu")


def random_rollout(n=N, t=T, seed=0):
    gen = torch.Generator().manual_seed(seed)
    ro = allocate_rollout(n, t, (3,), (), torch.int64, "cpu")
    ro["obs"].copy_(torch.randn(ro["obs"].shape, generator=gen))
    ro["action"][:, :-1] = torch.randint(0, 2, (n, t), generator=gen)
    ro["sample_log_prob"][:, :-1] = math.log(0.5)
    ro["reward"][:, :-1] = torch.randn(n, t, generator=gen) * 5 + 2
    ro["value"].copy_(torch.randn(ro["value"].shape, generator=gen))
    ro["done"][:, 3] = True
    ro["terminated"][:, 3] = True
    return ro


def params_of(algo):
    return [p.detach().clone() for p in algo.policy.parameters()]


def fixed_minibatch(seed=0, size=8):
    gen = torch.Generator().manual_seed(seed)
    return {
        "obs": torch.randn(size, 3, generator=gen),
        "action": torch.randint(0, 2, (size,), generator=gen),
        "sample_log_prob": torch.full((size,), math.log(0.5)),
        "advantage": torch.randn(size, generator=gen) * 3 + 1,
        "return": torch.randn(size, generator=gen),
        "value": torch.randn(size, generator=gen),
    }


# --- loss options -----------------------------------------------------------------------------


def test_minibatch_advantage_normalization_normalizes_inside_the_loss():
    torch.manual_seed(0)
    algo = make_ppo(normalize_advantage="minibatch")
    mb = fixed_minibatch()
    total, _ = algo.loss(mb)
    off = make_ppo(normalize_advantage="off")
    off.policy.load_state_dict(algo.policy.state_dict())
    expected, _ = off.loss({**mb, "advantage": normalize(mb["advantage"])})
    raw, _ = off.loss(mb)
    torch.testing.assert_close(total, expected)
    assert not torch.allclose(total, raw)


def test_batch_and_minibatch_normalization_agree_with_one_minibatch_only():
    def run(mode, num_mini_batches):
        torch.manual_seed(0)
        algo = make_ppo(normalize_advantage=mode, num_mini_batches=num_mini_batches)
        algo.reseed(1)
        algo.update(random_rollout())
        return params_of(algo)

    for a, b in zip(run("batch", 1), run("minibatch", 1)):
        torch.testing.assert_close(a, b)
    assert any(not torch.allclose(a, b) for a, b in zip(run("batch", 4), run("minibatch", 4)))


def test_clip_value_loss_uses_the_collection_time_value():
    torch.manual_seed(0)
    algo = make_ppo(clip_value_loss=True, vf_clip_coef=0.1, ent_coef=0.0, vf_coef=1.0)
    mb = fixed_minibatch()
    total, stats = algo.loss(mb)
    log_prob, _, value = algo.policy.evaluate(mb["obs"], mb["action"])
    ratio = (log_prob - mb["sample_log_prob"]).exp()
    adv = mb["advantage"]
    policy_loss = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
    value_loss = clipped_value_loss(value, mb["value"], mb["return"], 0.1)
    torch.testing.assert_close(total, policy_loss + value_loss)
    torch.testing.assert_close(stats["value_loss"], value_loss)


def test_dual_clip_changes_the_loss_only_for_negative_advantages():
    torch.manual_seed(0)
    algo = make_ppo(dual_clip_coef=1.5, ent_coef=0.0, vf_coef=0.0)
    mb = fixed_minibatch()
    mb["sample_log_prob"] = torch.full((8,), math.log(0.05))  # ratios ≈ 10: far outside the clip
    plain = make_ppo(ent_coef=0.0, vf_coef=0.0)
    plain.policy.load_state_dict(algo.policy.state_dict())
    positive = {**mb, "advantage": mb["advantage"].abs()}
    torch.testing.assert_close(algo.loss(positive)[0], plain.loss(positive)[0])
    negative = {**mb, "advantage": -mb["advantage"].abs()}
    assert algo.loss(negative)[0] < plain.loss(negative)[0]
    # with ρ ≈ 10 > c every negative sample is capped at −c·A: loss = mean(c·|A|)
    expected = 1.5 * mb["advantage"].abs().mean()
    torch.testing.assert_close(algo.loss(negative)[0], expected)


# --- KL rules: early stopping and the adaptive learning rate ----------------------------------


def scripted_kl(algo, values):
    """Make the KL hook return ``values`` in turn (the decisions must read the KL through it)."""
    it = iter(values)
    algo.kl_rules.global_mean = lambda t: torch.tensor(next(it))


def test_target_kl_stops_before_the_first_minibatch_over_the_limit():
    torch.manual_seed(0)
    algo = make_ppo(target_kl=0.01, n_epochs=3, num_mini_batches=2)
    # epoch 1: 0.001, 0.002 (two steps); epoch 2: 0.010 (step), 0.0151 > 1.5 × 0.01 → stop, no step
    scripted_kl(algo, [0.001, 0.002, 0.010, 0.0151, 0.0])
    calls = []
    step = algo.optimizer.step
    algo.optimizer.step = lambda *a, **k: (calls.append(1), step(*a, **k))[1]
    stats = algo.update(random_rollout())
    assert stats["early_stop_epoch"] == 2
    assert stats["minibatch_steps"] == 3 and stats["optimizer_steps"] == 3 and len(calls) == 3


def test_target_kl_not_reached_runs_every_epoch_and_reports_zero():
    algo = make_ppo(target_kl=1e6, n_epochs=3, num_mini_batches=2)
    stats = algo.update(random_rollout())
    assert stats["early_stop_epoch"] == 0 and stats["minibatch_steps"] == 6


def test_early_stop_on_first_minibatch_leaves_parameters_unchanged():
    torch.manual_seed(0)
    algo = make_ppo(target_kl=1e-9, n_epochs=2)  # the stored log-probs (log 0.5) are off-policy: KL > 0
    before = params_of(algo)
    stats = algo.update(random_rollout())
    assert stats["early_stop_epoch"] == 1 and stats["minibatch_steps"] == 0
    assert all(torch.equal(a, b) for a, b in zip(before, params_of(algo)))
    assert math.isfinite(stats["approx_kl"]) and stats["approx_kl"] > 0


def test_adaptive_lr_follows_the_kl_of_every_minibatch():
    torch.manual_seed(0)
    algo = make_ppo(schedule="adaptive", desired_kl=0.01, learning_rate=1e-3, num_mini_batches=4)
    # 0.05 > 0.02: /1.5; 0.001 < 0.005: ×1.5; 0.01: keep; 0.03: /1.5
    scripted_kl(algo, [0.05, 0.001, 0.01, 0.03])
    stats = algo.update(random_rollout())
    assert stats["learning_rate"] == pytest.approx(1e-3 / 1.5)
    assert algo.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3 / 1.5)


def test_adaptive_lr_is_kept_across_updates_and_restored():
    torch.manual_seed(0)
    algo = make_ppo(schedule="adaptive", desired_kl=100.0, learning_rate=1e-4, num_mini_batches=4)
    algo.update(random_rollout())  # tiny KL vs desired: ×1.5 per minibatch
    assert algo.learning_rate == pytest.approx(1e-4 * 1.5**4)
    fresh = make_ppo(schedule="adaptive", desired_kl=100.0, learning_rate=1e-4, num_mini_batches=4)
    fresh.load_state_dict(algo.state_dict())
    assert fresh.learning_rate == pytest.approx(1e-4 * 1.5**4)
    scripted_kl(fresh, [0.0] * 4)  # KL 0: unchanged, and not reset to learning_rate
    assert fresh.update(random_rollout())["learning_rate"] == pytest.approx(1e-4 * 1.5**4)


def test_kl_is_only_read_when_an_option_needs_it():
    algo = make_ppo(num_mini_batches=2)
    scripted_kl(algo, [])  # would raise StopIteration if consulted
    algo.update(random_rollout())


# --- minibatching and gradient accumulation ---------------------------------------------------


def test_num_mini_batches_wins_over_batch_size():
    algo = make_ppo(num_mini_batches=3, batch_size=2, n_epochs=2)
    assert algo.cfg.minibatch_size(32) == 11  # ceil(32 / 3): minibatches of 11, 11, 10
    assert algo.update(random_rollout())["minibatch_steps"] == 6
    assert make_ppo(batch_size=5).update(random_rollout())["minibatch_steps"] == 7  # ceil(32 / 5)


def test_accumulate_grads_steps_the_optimizer_once_per_epoch():
    algo = make_ppo(accumulate_grads=True, n_epochs=3, num_mini_batches=4)
    calls = []
    step = algo.optimizer.step
    algo.optimizer.step = lambda *a, **k: (calls.append(1), step(*a, **k))[1]
    stats = algo.update(random_rollout())
    assert len(calls) == 3
    assert stats["optimizer_steps"] == 3 and stats["minibatch_steps"] == 12


def test_accumulated_equal_minibatches_equal_one_full_batch_step():
    # Plain SGD and equal minibatches: the mean of the 4 minibatch-mean gradients is the full-batch
    # gradient, so one accumulated step lands on the same parameters as one full-batch step.
    def run(**cfg):
        torch.manual_seed(0)
        algo = make_ppo(
            optimizer="sgd",
            learning_rate=0.1,
            max_grad_norm=1e6,
            normalize_advantage="off",
            shuffle_minibatches=False,
            **cfg,
        )
        algo.update(random_rollout())
        return params_of(algo)

    for a, b in zip(run(accumulate_grads=True, num_mini_batches=4), run(num_mini_batches=1)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert any(not torch.allclose(a, b) for a, b in zip(run(num_mini_batches=4), run(num_mini_batches=1)))


def test_shuffle_minibatches_off_ignores_the_shuffle_seed():
    def run(shuffle, seed):
        torch.manual_seed(0)
        algo = make_ppo(shuffle_minibatches=shuffle, num_mini_batches=4, n_epochs=2)
        algo.reseed(seed)
        algo.update(random_rollout())
        return params_of(algo)

    assert all(torch.equal(a, b) for a, b in zip(run(False, 1), run(False, 2)))
    assert any(not torch.equal(a, b) for a, b in zip(run(True, 1), run(True, 2)))


# --- schedules --------------------------------------------------------------------------------


def test_lr_and_entropy_step_schedules_at_chosen_env_steps():
    algo = make_ppo(lr_schedule=[[0, 1e-3], [1000, 1e-4]], ent_coef_schedule=[[0, 0.1], [500, 0.0]])
    algo.set_progress(999, 10_000)
    stats = algo.update(random_rollout())
    assert (stats["learning_rate"], stats["ent_coef"]) == (1e-3, 0.0)
    algo.set_progress(1000, 10_000)
    stats = algo.update(random_rollout())
    assert (stats["learning_rate"], stats["ent_coef"]) == (1e-4, 0.0)
    algo.set_progress(0, 10_000)
    assert algo.update(random_rollout())["ent_coef"] == 0.1


def test_interp_and_decay_schedules_at_chosen_env_steps():
    interp = make_ppo(lr_schedule=[[0, 1e-3], [1000, 0.0]], lr_schedule_kind="interp")
    interp.set_progress(250, 1000)
    assert interp.update(random_rollout())["learning_rate"] == pytest.approx(7.5e-4)
    linear = make_ppo(
        learning_rate=1e-3,
        lr_schedule_kind="linear",
        lr_final=1e-4,
        ent_coef=0.02,
        ent_coef_schedule_kind="cosine",
    )
    linear.set_progress(500, 1000)
    stats = linear.update(random_rollout())
    assert stats["learning_rate"] == pytest.approx(5.5e-4)
    assert stats["ent_coef"] == pytest.approx(0.01)


def test_the_entropy_schedule_value_is_the_one_in_the_loss():
    torch.manual_seed(0)
    algo = make_ppo(ent_coef_schedule=[[0, 0.0], [100, 1.0]], vf_coef=0.0)
    mb = fixed_minibatch()
    algo.set_progress(100, 1000)
    algo.update(random_rollout())  # applies the schedule (then the policy moved: re-read the loss)
    with_bonus, stats = algo.loss(mb)
    algo.ent_coef = 0.0
    without, _ = algo.loss(mb)
    torch.testing.assert_close(without - with_bonus, stats["entropy"])


def test_the_schedules_position_is_the_callers_the_update_never_counts():
    algo = make_ppo(lr_schedule=[[0, 1e-3], [32, 1e-4]])
    assert algo.update(random_rollout())["learning_rate"] == 1e-3  # position 0
    assert algo.progress == Progress(0, None)  # N·T env steps later: still where the caller put it
    assert algo.update(random_rollout())["learning_rate"] == 1e-3
    algo.set_progress(N * T, 2 * N * T)
    assert algo.update(random_rollout())["learning_rate"] == 1e-4  # position 32
    assert algo.progress == Progress(N * T, 2 * N * T)


def test_linear_schedule_without_the_run_length_says_how_to_fix_it():
    algo = make_ppo(lr_schedule_kind="cosine")
    with pytest.raises(RuntimeError, match=r"set_progress\(env_steps, total_env_steps\)"):
        algo.update(random_rollout())


def test_schedule_position_and_values_round_trip_through_state_dict():
    algo = make_ppo(
        learning_rate=1e-3,
        lr_schedule_kind="linear",
        ent_coef_schedule=[[0, 0.1], [64, 0.05]],
        normalize_rewards=True,
    )
    algo.set_progress(64, 128)
    algo.update(random_rollout())
    state = algo.state_dict()
    assert "env_steps" not in state and "total_env_steps" not in state  # the run's counters are the trainer's
    assert state["learning_rate"] == pytest.approx(5e-4) and state["ent_coef"] == 0.05
    buffer = __import__("io").BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    fresh = make_ppo(
        learning_rate=1e-3,
        lr_schedule_kind="linear",
        ent_coef_schedule=[[0, 0.1], [64, 0.05]],
        normalize_rewards=True,
    )
    fresh.load_state_dict(loaded)
    fresh.set_progress(96, 128)  # what the pipeline does before every rollout
    assert fresh.learning_rate == pytest.approx(5e-4) and fresh.ent_coef == 0.05
    assert fresh.reward_normalizer.stats.count.item() == algo.reward_normalizer.stats.count.item() == N * T
    fresh.policy.load_state_dict(algo.policy.state_dict())
    algo.set_progress(96, 128)  # the trainer's counters, handed to the running algorithm too
    for one in (algo, fresh):
        one.reseed(3)
    torch.testing.assert_close(fresh.update(random_rollout(seed=1)), algo.update(random_rollout(seed=1)))


def test_old_checkpoints_with_only_the_optimizer_still_load():
    algo = make_ppo()
    algo.load_state_dict({"optimizer": make_ppo().optimizer.state_dict()})
    assert algo.progress == Progress() and algo.learning_rate == algo.cfg.learning_rate


def test_an_old_state_with_the_algorithms_own_env_steps_loads_and_the_caller_positions_it():
    algo = make_ppo(lr_schedule=[[0, 1e-3], [96, 1e-4]])
    old = algo.state_dict() | {"env_steps": 96}  # what checkpoints held before the trainer owned it
    fresh = make_ppo(lr_schedule=[[0, 1e-3], [96, 1e-4]])
    fresh.load_state_dict(old)
    assert fresh.progress == Progress()  # the stored counter is not a second owner
    fresh.set_progress(96, 128)
    assert fresh.update(random_rollout())["learning_rate"] == 1e-4


# --- reward normalization ---------------------------------------------------------------------


def test_compute_advantages_without_options_is_the_seed_gae():
    ro = random_rollout()
    make_ppo().compute_advantages(ro)
    advantage, returns = compute_gae(ro, 0.99, 0.95)
    torch.testing.assert_close(ro["advantage"][:, :-1], advantage)
    torch.testing.assert_close(ro["return"][:, :-1], returns)
    assert (ro["advantage"][:, -1] == 0).all()


def test_normalize_rewards_scales_a_copy_before_gae():
    ro = random_rollout()
    raw = ro["reward"].clone()
    algo = make_ppo(normalize_rewards=True, gamma=0.9)
    algo.compute_advantages(ro)
    assert torch.equal(ro["reward"], raw)  # the stored rollout keeps its raw rewards
    scale = algo.reward_normalizer.scale().float()
    assert scale.item() > 1.5  # rewards ~ N(2, 5²): the discounted return spreads wider than 1
    scaled = ro.clone()
    scaled["reward"] = raw / scale
    advantage, returns = compute_gae(scaled, 0.9, 0.95)
    torch.testing.assert_close(ro["advantage"][:, :-1], advantage)
    torch.testing.assert_close(ro["return"][:, :-1], returns)
    stats = algo.update(ro)
    assert stats["reward_scale"] == pytest.approx(scale.item(), rel=1e-6)


# --- mixed precision --------------------------------------------------------------------------


def test_bf16_update_runs_and_keeps_parameters_and_optimizer_state_fp32():
    torch.manual_seed(0)
    algo = make_ppo(gym.spaces.Box(-1, 1, (2,)), amp="bf16", n_epochs=2)
    ro = random_rollout()
    ro["action"] = torch.randn(N, T + 1, 2)
    before = params_of(algo)
    stats = algo.update(ro)
    assert all(math.isfinite(v) for v in stats.values())
    assert any(not torch.equal(a, b) for a, b in zip(before, params_of(algo)))
    assert all(p.dtype == torch.float32 for p in algo.policy.parameters())
    for state in algo.optimizer.state.values():
        assert state["exp_avg"].dtype == torch.float32 and state["exp_avg_sq"].dtype == torch.float32
    log_prob, entropy, value = algo.evaluate(ro["obs"][:, 0], ro["action"][:, 0])
    assert log_prob.dtype == entropy.dtype == value.dtype == torch.float32


def test_bf16_autocasts_the_network_forward_only():
    torch.manual_seed(0)
    algo = make_ppo(amp="bf16")
    seen = []
    algo.policy.critic.register_forward_hook(lambda mod, inp, out: seen.append(out.dtype))
    mb = fixed_minibatch()
    total, _ = algo.loss(mb)
    assert seen == [torch.bfloat16] and total.dtype == torch.float32
    fp32 = make_ppo()
    fp32.policy.load_state_dict(algo.policy.state_dict())
    torch.testing.assert_close(total, fp32.loss(mb)[0], rtol=0.05, atol=0.05)  # bf16: ~3 digits


@pytest.mark.skipif(not torch.cuda.is_available(), reason="fp16 with a grad scaler needs CUDA")
def test_fp16_update_on_cuda_uses_the_grad_scaler():
    obs_space, action_space = gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2)
    policy = build_policy({"name": "actor_critic"}, obs_space, action_space, "cuda")
    algo = build_algo("ppo", {"batch_size": 8, "n_epochs": 1, "amp": "fp16"}, policy, "cuda")
    stats = algo.update(random_rollout().to("cuda"))
    assert math.isfinite(stats["policy_loss"]) and algo.scaler.is_enabled()
    assert "scale" in algo.state_dict()["scaler"]
