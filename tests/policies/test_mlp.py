"""``build_mlp``: the in-place ReLU gives the out-of-place network's outputs and gradients exactly."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rlpipe.policies.mlp import MLP, build_mlp


def reference(net: nn.Sequential) -> nn.Sequential:
    """The same network with out-of-place ReLUs and the same weights."""
    layers = [nn.ReLU() if isinstance(m, nn.ReLU) else m for m in net]
    twin = nn.Sequential(
        *[type(m)(m.in_features, m.out_features) if isinstance(m, nn.Linear) else m for m in layers]
    )
    twin.load_state_dict(net.state_dict())
    return twin


@pytest.mark.parametrize("autocast", [False, True])
def test_inplace_relu_matches_out_of_place(autocast: bool) -> None:
    torch.manual_seed(0)
    net = build_mlp(4, 3, [16, 16], "relu")
    assert all(m.inplace for m in net if isinstance(m, nn.ReLU))
    twin = reference(net)
    x = torch.randn(32, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out, want = net(x), twin(x)
    out.float().square().sum().backward()
    want.float().square().sum().backward()
    assert torch.equal(out, want)
    for (name, p), q in zip(net.named_parameters(), twin.parameters()):
        assert torch.equal(p.grad, q.grad), name


def test_the_state_dict_keys_are_unchanged() -> None:
    net = build_mlp(4, 2, [8, 8], "relu")
    assert list(net.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]


@pytest.mark.parametrize("activation", ["tanh", "relu", "elu", "gelu", "silu", "leaky_relu"])
@pytest.mark.parametrize("autocast", [False, True])
def test_the_functional_forward_is_the_module_forward_bit_for_bit(activation: str, autocast: bool) -> None:
    """``MLP.forward`` (functions) against ``nn.Sequential.forward`` (module calls): outputs, gradients."""
    torch.manual_seed(1)
    net = build_mlp(5, 3, [16, 8], activation)
    assert isinstance(net, MLP)
    x = torch.randn(64, 5)
    grads = []
    for forward in (net.forward, lambda inp: nn.Sequential.forward(net, inp)):
        net.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = forward(x.clone())
        out.float().pow(2).sum().backward()
        grads.append((out.detach(), [p.grad.clone() for p in net.parameters()]))
    (out, got), (want, expected) = grads
    assert out.dtype == want.dtype and torch.equal(out, want)
    assert all(torch.equal(a, b) for a, b in zip(got, expected))


def test_a_forward_hook_still_fires() -> None:
    net = build_mlp(4, 2, [8], "tanh")
    seen: list[tuple[int, ...]] = []
    net[0].register_forward_hook(lambda module, inputs, output: seen.append(tuple(output.shape)))
    out = net(torch.randn(3, 4))
    assert seen == [(3, 8)] and out.shape == (3, 2)
