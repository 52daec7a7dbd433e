"""The off-policy critics: the categorical projection and the reduction over critics."""

from __future__ import annotations

import pytest
import torch

from rlpipe.algorithms.q_critics import QCritics, project_returns, reduce_critics
from rlpipe.config.offpolicy import DistributionalCfg
from rlpipe.config.policy import MLPCfg


def random_probs(batch: int, atoms: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(batch, atoms, generator=gen) * 2, dim=-1)


@pytest.mark.parametrize(
    ("v_min", "v_max", "count"), [(-10.0, 10.0, 51), (-250.0, 250.0, 101), (-1.3, 7.9, 17), (0.0, 1.0, 2)]
)
def test_the_projection_conserves_mass_and_keeps_the_mean_inside_the_support(v_min, v_max, count):
    atoms = torch.linspace(v_min, v_max, count)
    gen = torch.Generator().manual_seed(0)
    probs = random_probs(512, count, 1)
    span = v_max - v_min
    shift = (torch.rand(512, generator=gen) * 3 - 1.5) * span  # many land outside and are clamped
    discount = torch.rand(512, generator=gen)
    discount[:64] = 0.0
    discount[64:128] = 1.0
    projected = project_returns(probs, shift, discount, atoms)
    assert projected.shape == probs.shape and (projected >= 0).all()
    torch.testing.assert_close(projected.sum(-1), torch.ones(512), rtol=0, atol=1e-5)
    # inside the support, linear interpolation keeps the mean: E[projected] = E[clamp(shift + γ z)]
    moved = (shift.unsqueeze(-1) + discount.unsqueeze(-1) * atoms).clamp(v_min, v_max)
    torch.testing.assert_close((projected * atoms).sum(-1), (probs * moved).sum(-1), rtol=0, atol=1e-4 * span)


def test_shifted_atoms_that_land_on_the_support_keep_their_mass_exactly():
    atoms = torch.linspace(-5.0, 5.0, 11)  # spacing 1
    probs = random_probs(4, 11, 2)
    shift = torch.tensor([0.0, 2.0, -3.0, 1.0])
    projected = project_returns(probs, shift, torch.ones(4), atoms)
    assert torch.equal(projected[0], probs[0])  # nothing moves
    expected = torch.zeros(4, 11)
    for row, k in enumerate((0, 2, -3, 1)):  # a shift by k atoms; mass past an end piles onto it
        for i in range(11):
            expected[row, min(max(i + k, 0), 10)] += probs[row, i]
    torch.testing.assert_close(projected, expected, rtol=0, atol=1e-6)


def test_half_way_between_atoms_the_mass_splits_evenly():
    atoms = torch.linspace(0.0, 4.0, 5)
    probs = torch.zeros(1, 5)
    probs[0, 1] = 1.0  # all mass at 1
    projected = project_returns(probs, torch.tensor([0.5]), torch.ones(1), atoms)
    torch.testing.assert_close(projected, torch.tensor([[0.0, 0.5, 0.5, 0.0, 0.0]]))


@pytest.mark.parametrize("shift", [-1.7, 0.0, 2.25, 40.0, -40.0])
def test_discount_zero_puts_all_mass_at_the_clamped_shift(shift):
    atoms = torch.linspace(-10.0, 10.0, 41)  # spacing 0.5
    probs = random_probs(3, 41, 3)
    projected = project_returns(probs, torch.full((3,), shift), torch.zeros(3), atoms)
    clamped = min(max(shift, -10.0), 10.0)
    expected = torch.zeros(41)
    where = (clamped + 10.0) / 0.5
    low = int(where)
    expected[low] += 1 - (where - low)
    if where > low:
        expected[low + 1] += where - low
    for row in projected:
        torch.testing.assert_close(row, expected, rtol=0, atol=1e-6)
        assert float((row * atoms).sum()) == pytest.approx(clamped, abs=1e-5)


@pytest.mark.parametrize(
    ("v_min", "v_max", "count"), [(-250.0, 250.0, 31), (-250.0, 250.0, 61), (-400.0, 20.0, 101)]
)
def test_returns_clamped_to_v_max_land_on_the_last_atom(v_min, v_max, count):
    """Supports whose ``(v_max − v_min) / delta`` rounds just past ``count − 1``."""
    atoms = torch.linspace(v_min, v_max, count)
    probs = random_probs(2, count, 4)
    projected = project_returns(probs, torch.tensor([1e6, v_max - v_min]), torch.ones(2), atoms)
    torch.testing.assert_close(projected[:, -1], torch.ones(2), rtol=0, atol=1e-5)


def test_reduce_critics_takes_the_minimum_or_the_mean():
    values = torch.tensor([[1.0, -2.0, 3.0], [0.5, 4.0, 3.0], [2.0, 0.0, -1.0]])
    assert torch.equal(reduce_critics(values, "min"), torch.tensor([0.5, -2.0, -1.0]))
    torch.testing.assert_close(reduce_critics(values, "mean"), torch.tensor([3.5, 2.0, 5.0]) / 3)


def test_critics_are_independent_networks_and_a_categorical_value_is_its_expectation():
    torch.manual_seed(0)
    dist = DistributionalCfg(v_min=-3.0, v_max=5.0, num_atoms=9)
    critics = QCritics(4, 2, 3, MLPCfg(hidden_sizes=[8], activation="relu"), dist)
    obs, action = torch.randn(6, 4), torch.randn(6, 2)
    outputs = critics.outputs(obs, action)
    assert outputs.shape == (3, 6, 9)
    assert not torch.equal(outputs[0], outputs[1])  # each critic initialized on its own
    values = critics.values(obs, action)
    expected = (torch.softmax(outputs, -1) * torch.linspace(-3.0, 5.0, 9)).sum(-1)
    torch.testing.assert_close(values, expected)
    assert ((values >= -3.0) & (values <= 5.0)).all()
    scalar = QCritics(4, 2, 2, MLPCfg(hidden_sizes=[8], activation="relu"), None)
    assert scalar.values(obs, action).shape == (2, 6)
