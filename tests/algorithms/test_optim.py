"""``amp: auto``: bf16 exactly where the device runs it natively, else fp32; other values unchanged."""

from __future__ import annotations

import pytest
import torch

from rlpipe.algorithms import optim, resolve_algo_cfg


def cpu_with(monkeypatch: pytest.MonkeyPatch, avx512_bf16: bool, amx: bool) -> None:
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)


@pytest.mark.parametrize(("avx512_bf16", "amx", "expected"), [
    (True, False, "bf16"), (False, True, "bf16"), (False, False, "none"),
])
def test_auto_follows_the_cpu_instructions(monkeypatch, avx512_bf16, amx, expected):
    cpu_with(monkeypatch, avx512_bf16, amx)
    assert optim.resolve_amp("auto", "cpu") == expected
    native, reason = optim.native_bf16("cpu")
    assert native is (expected == "bf16")
    assert ("avx512_bf16" in reason) or ("AMX" in reason)


@pytest.mark.parametrize("native", [True, False])
def test_auto_follows_the_gpu(monkeypatch, native):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: native)
    assert optim.resolve_amp("auto", "cuda") == ("bf16" if native else "none")


@pytest.mark.parametrize("amp", ["none", "bf16", "fp16"])
def test_explicit_values_pass_through(monkeypatch, amp):
    cpu_with(monkeypatch, True, True)
    assert optim.resolve_amp(amp, "cpu") == amp


@pytest.mark.parametrize("native", [True, False])
def test_the_algorithm_config_holds_the_resolved_precision(monkeypatch, native):
    cpu_with(monkeypatch, native, False)
    cfg = resolve_algo_cfg("ppo", {"amp": "auto"}, torch.device("cpu"))
    assert cfg.amp == ("bf16" if native else "none")


def test_an_unknown_amp_is_refused_with_the_accepted_values():
    with pytest.raises(Exception, match="auto"):
        resolve_algo_cfg("ppo", {"amp": "fp8"}, "cpu")
