"""The heads' fast paths (``sample``/``evaluate``) compute exactly what the torch distributions compute."""

from __future__ import annotations

import pytest
import torch

from rlpipe import fast
from rlpipe.policies import BetaHead, CategoricalHead, GaussianHead, StateStdGaussianHead


def _same(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def _heads() -> list[tuple[object, tuple[int, ...]]]:
    return [
        (CategoricalHead(3), (7, 3)),
        (CategoricalHead(5), (4, 6, 5)),
        (CategoricalHead(2), (1000, 2)),
        (GaussianHead(2, -0.3), (7, 2)),
        (StateStdGaussianHead(2, -0.3), (7, 4)),
        (BetaHead(torch.tensor([-2.0, 0.0]), torch.tensor([2.0, 0.5])), (7, 4)),
    ]


@pytest.mark.parametrize("fast_paths", [True, False])  # RLPIPE_FAST on and off
@pytest.mark.parametrize(("head", "shape"), _heads())
def test_sample_draws_the_distributions_actions_and_log_probs_bit_for_bit(
    head, shape, fast_paths, monkeypatch
):
    monkeypatch.setattr(fast, "ENABLED", fast_paths)
    out = torch.randn(*shape)
    for deterministic in (False, True):
        torch.manual_seed(3)
        sampled = head.sample(out, deterministic)
        torch.manual_seed(3)
        dist = head.distribution(out)
        action = head.mode(dist) if deterministic else dist.sample()
        _same(sampled[0], action)
        _same(sampled[1], dist.log_prob(action))
        assert torch.randint(0, 2**30, ()).item() == _draw_after(head, out, deterministic)  # same RNG use


def _draw_after(head, out, deterministic):
    torch.manual_seed(3)
    head.sample(out, deterministic)
    return torch.randint(0, 2**30, ()).item()


@pytest.mark.parametrize(("head", "shape"), _heads())
def test_evaluate_equals_the_distribution_in_values_and_gradients(head, shape):
    out = torch.randn(*shape, requires_grad=True)
    dist_out = out.detach().clone().requires_grad_(True)
    action = head.distribution(out.detach()).sample()
    log_prob, entropy = head.evaluate(out, action)
    dist = head.distribution(dist_out)
    ref_log_prob, ref_entropy = dist.log_prob(action), dist.entropy()  # the order Policy.evaluate used
    _same(log_prob, ref_log_prob)
    _same(entropy, ref_entropy)
    params = [p for p in head.parameters()]
    grads = torch.autograd.grad((log_prob * 1.5 - entropy).sum(), [out, *params])
    ref = torch.autograd.grad((ref_log_prob * 1.5 - ref_entropy).sum(), [dist_out, *params])
    for a, b in zip(grads, ref, strict=True):
        _same(a, b)


@pytest.mark.parametrize(("head", "shape"), _heads())
def test_act_is_the_action_of_sample_without_its_log_prob(head, shape):
    out = torch.randn(*shape)
    for deterministic in (False, True):
        torch.manual_seed(4)
        expected = head.sample(out, deterministic)[0]
        torch.manual_seed(4)
        _same(head.act(out, deterministic), expected)
    if isinstance(head, CategoricalHead):  # the mode is the argmax of the raw logits, as exported
        _same(head.act(out, True), out.argmax(-1))
