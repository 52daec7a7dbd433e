import numpy as np
import pytest
import torch

from rlpipe.algorithms.normalization import RewardNormalizer, RunningMeanStd, discounted_returns


def test_running_mean_std_matches_numpy_over_uneven_batches():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 3)) for n in (1, 7, 50, 2)]
    rms = RunningMeanStd((3,))
    for batch in batches:
        rms.update(torch.as_tensor(batch, dtype=torch.float32))
    everything = np.concatenate(batches)
    np.testing.assert_allclose(rms.mean.numpy(), everything.mean(0), rtol=1e-5)
    np.testing.assert_allclose(rms.var.numpy(), everything.var(0), rtol=1e-5)  # population variance
    assert rms.count.item() == len(everything)
    assert rms.mean.dtype == torch.float64


def test_running_mean_std_before_any_update_is_identity_and_leading_dims_flatten():
    rms = RunningMeanStd((2,))
    x = torch.tensor([[1.0, -2.0]])
    torch.testing.assert_close(rms.normalize(x), x, atol=1e-6, rtol=0)
    rms.update(torch.arange(12.0).view(2, 3, 2))  # [N, T, 2]: six samples
    np.testing.assert_allclose(rms.mean.numpy(), [5.0, 6.0])
    np.testing.assert_allclose(rms.var.numpy(), np.arange(12.0).reshape(6, 2).var(0))


def test_running_mean_std_state_dict_round_trip():
    rms = RunningMeanStd(())
    rms.update(torch.tensor([1.0, 2.0, 4.0]))
    other = RunningMeanStd(())
    other.load_state_dict(rms.state_dict())
    other.update(torch.tensor([8.0]))
    rms.update(torch.tensor([8.0]))
    assert other.mean.item() == rms.mean.item() == pytest.approx(3.75)
    assert other.var.item() == pytest.approx(np.var([1.0, 2.0, 4.0, 8.0]))


def test_discounted_returns_by_hand():
    # gamma 0.5, carried R = 2: R0 = 0.5*2 + 1 = 2; R1 = 0.5*2 + 1 = 2 (done: reset to 0);
    # R2 = 0.5*0 + 1 = 1; carried out: 1.
    reward = torch.tensor([[1.0, 1.0, 1.0]])
    done = torch.tensor([[False, True, False]])
    returns, carried = discounted_returns(reward, done, 0.5, torch.tensor([2.0]))
    torch.testing.assert_close(returns, torch.tensor([[2.0, 2.0, 1.0]]))
    torch.testing.assert_close(carried, torch.tensor([1.0]))


def numpy_reward_scaling(rollouts, gamma, eps=1e-8):
    """Reference: per-env running discounted return, variance of every value it took."""
    n = rollouts[0][0].shape[0]
    running = np.zeros(n)
    seen, scaled = [], []
    for reward, done in rollouts:
        for t in range(reward.shape[1]):
            running = gamma * running + reward[:, t]
            seen.append(running.copy())
            running = np.where(done[:, t], 0.0, running)
        scaled.append(reward / np.sqrt(np.var(np.concatenate(seen)) + eps))
    return scaled


def test_reward_normalizer_matches_numpy_reference_across_rollouts():
    rng = np.random.default_rng(1)
    rollouts = [(rng.normal(1.0, 3.0, size=(4, 6)), rng.random((4, 6)) < 0.2) for _ in range(3)]
    expected = numpy_reward_scaling(rollouts, gamma=0.9)
    norm = RewardNormalizer(0.9, "cpu")
    for (reward, done), want in zip(rollouts, expected):
        got = norm(torch.as_tensor(reward, dtype=torch.float32), torch.as_tensor(done))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)
    assert norm.stats.count.item() == 3 * 4 * 6


def test_reward_normalizer_state_dict_resumes_exactly():
    rng = np.random.default_rng(2)
    data = [
        (
            torch.as_tensor(rng.normal(size=(3, 5)), dtype=torch.float32),
            torch.as_tensor(rng.random((3, 5)) < 0.3),
        )
        for _ in range(2)
    ]
    whole = RewardNormalizer(0.99, "cpu")
    whole(*data[0])
    state = whole.state_dict()
    resumed = RewardNormalizer(0.99, "cpu")
    resumed.load_state_dict(state)
    torch.testing.assert_close(resumed(*data[1]), whole(*data[1]))
    torch.testing.assert_close(resumed.returns, whole.returns)
