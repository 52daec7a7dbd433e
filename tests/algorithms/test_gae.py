import pytest
import torch
from tensordict import TensorDict

from rlpipe.algorithms.gae import compute_gae, generalized_advantage_estimate
from rlpipe.rollout import allocate_rollout

GAMMA, LAM = 0.9, 0.8


def one_env_rollout(terminated, truncated, final_value=None):
    """N=1, T=3: rewards [1, 2, 3], values V(s0..s3) = [0.5, 1.0, 1.5, 2.0] (slot 3 = bootstrap)."""
    ro = allocate_rollout(1, 3, (1,), (), torch.int64, "cpu")
    ro["reward"][0, :3] = torch.tensor([1.0, 2.0, 3.0])
    ro["value"][0] = torch.tensor([0.5, 1.0, 1.5, 2.0])
    ro["terminated"][0, :3] = torch.tensor(terminated)
    ro["truncated"][0, :3] = torch.tensor(truncated)
    ro["done"] = ro["terminated"] | ro["truncated"]
    if final_value is None:
        del ro["final_value"]
    else:
        ro["final_value"][0, :3] = torch.tensor(final_value)
    return ro


def test_gae_by_hand_with_termination():
    # t=2: δ2 = 3 + 0.9·2.0 − 1.5 = 3.3;             A2 = 3.3
    # t=1: terminated → no bootstrap: δ1 = 2 − 1.0 = 1.0; trace cut: A1 = 1.0
    # t=0: δ0 = 1 + 0.9·1.0 − 0.5 = 1.4;             A0 = 1.4 + 0.9·0.8·1.0 = 2.12
    ro = one_env_rollout([False, True, False], [False, False, False], [0.0, 0.0, 0.0])
    adv, ret = compute_gae(ro, GAMMA, LAM)
    torch.testing.assert_close(adv[0], torch.tensor([2.12, 1.0, 3.3]))
    torch.testing.assert_close(ret[0], torch.tensor([2.62, 2.0, 4.8]))


def test_gae_by_hand_truncation_bootstraps_from_final_value():
    # t=1 truncated, V(true final obs) = 4.0: δ1 = 2 + 0.9·4.0 − 1.0 = 4.6; A1 = 4.6 (trace cut)
    # t=0: A0 = 1.4 + 0.72·4.6 = 4.712
    ro = one_env_rollout([False, False, False], [False, True, False], [0.0, 4.0, 0.0])
    adv, _ = compute_gae(ro, GAMMA, LAM)
    torch.testing.assert_close(adv[0], torch.tensor([4.712, 4.6, 3.3]))


def test_gae_without_final_value_uses_seed_semantics():
    # The seed / rsl_rl approximation: a truncated step bootstraps with its own state's value,
    # δ1 = 2 + 0.9·V(s1) − V(s1) = 2 + 0.9 − 1.0 = 1.9; A0 = 1.4 + 0.72·1.9 = 2.768
    ro = one_env_rollout([False, False, False], [False, True, False])
    adv, _ = compute_gae(ro, GAMMA, LAM)
    torch.testing.assert_close(adv[0], torch.tensor([2.768, 1.9, 3.3]))


def test_terminated_wins_over_truncated():
    ro = one_env_rollout([False, True, False], [False, True, False], [0.0, 4.0, 0.0])
    adv, _ = compute_gae(ro, GAMMA, LAM)
    torch.testing.assert_close(adv[0], torch.tensor([2.12, 1.0, 3.3]))


def plain_loop_gae(reward, value, next_value, done, trunc_value, gamma, lam):
    n, t_len = reward.shape
    adv = torch.zeros(n, t_len, dtype=torch.float64)
    for i in range(n):
        running = 0.0
        for t in reversed(range(t_len)):
            nd = 0.0 if done[i, t] else 1.0
            delta = reward[i, t] + gamma * (trunc_value[i, t] + nd * next_value[i, t]) - value[i, t]
            running = delta + gamma * lam * nd * running
            adv[i, t] = running
    return adv


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vectorized_matches_plain_loop(seed):
    g = torch.Generator().manual_seed(seed)
    n, t_len = 7, 13
    reward = torch.randn(n, t_len, generator=g)
    values = torch.randn(n, t_len + 1, generator=g)
    done = torch.rand(n, t_len, generator=g) < 0.2
    trunc = done & (torch.rand(n, t_len, generator=g) < 0.5)
    trunc_value = torch.randn(n, t_len, generator=g) * trunc
    adv, ret = generalized_advantage_estimate(
        reward, values[:, :-1], values[:, 1:], done, trunc_value, 0.97, 0.9
    )
    expected = plain_loop_gae(
        reward.double(),
        values[:, :-1].double(),
        values[:, 1:].double(),
        done,
        trunc_value.double(),
        0.97,
        0.9,
    )
    torch.testing.assert_close(adv.double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ret, adv + values[:, :-1])


def test_compute_gae_ignores_padding_slot():
    ro = one_env_rollout([False, False, False], [False, False, False], [0.0, 0.0, 0.0])
    adv_a, _ = compute_gae(ro, GAMMA, LAM)
    assert isinstance(ro, TensorDict)
    ro["reward"][0, 3] = 100.0  # padding must not matter
    adv_b, _ = compute_gae(ro, GAMMA, LAM)
    torch.testing.assert_close(adv_a, adv_b)
    assert adv_a.shape == (1, 3)
