"""``amp: auto``: bf16 exactly where the device runs it natively, else fp32; other values unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlpipe.algorithms import optim, resolve_algo_cfg


def cpu_with(monkeypatch: pytest.MonkeyPatch, avx512_bf16: bool, amx: bool) -> None:
    flags = {"sse2", *(["avx512_bf16"] if avx512_bf16 else []), *(["amx_tile"] if amx else [])}
    monkeypatch.setattr(optim, "cpu_flags", lambda: flags)


@pytest.mark.parametrize(
    ("avx512_bf16", "amx", "expected"),
    [
        (True, False, "bf16"),
        (False, True, "bf16"),
        (False, False, "none"),
    ],
)
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


def test_cpu_flags_are_the_kernels_list():
    text = Path("/proc/cpuinfo").read_text()  # Linux, as on CI
    flags = optim.cpu_flags()
    assert len(flags) > 5 and all(f" {flag}" in text for flag in flags)
