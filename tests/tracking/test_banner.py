"""The run banner says where the run trains, which precision ``amp: auto`` chose and why."""

from __future__ import annotations

import pytest
import torch

from rlpipe.algorithms import resolve_algo_cfg
from rlpipe.config import RunConfig
from rlpipe.tracking.banner import run_banner


def banner(monkeypatch: pytest.MonkeyPatch, amp: str, native: bool, malloc_tuned: bool = True) -> str:
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    cfg = RunConfig.model_validate({"algorithm": {"name": "ppo", "cfg": {"amp": amp}}})
    algo_cfg = resolve_algo_cfg("ppo", cfg.algorithm.cfg, torch.device("cpu"))
    return run_banner(cfg, torch.device("cpu"), algo_cfg, malloc_tuned)


def test_auto_on_a_cpu_without_bf16_says_fp32_and_why(monkeypatch):
    line = banner(monkeypatch, "auto", native=False)
    assert "amp auto → none (CPU without avx512_bf16/AMX" in line
    assert "ppo on cpu" in line and "allocator glibc (mmap off)" in line


def test_auto_on_a_bf16_cpu_says_bf16(monkeypatch):
    assert "amp auto → bf16 (CPU has avx512_bf16)" in banner(monkeypatch, "auto", native=True)


def test_an_explicit_precision_is_stated_plainly(monkeypatch):
    line = banner(monkeypatch, "none", native=True, malloc_tuned=False)
    assert "amp none" in line and "auto" not in line and "allocator unchanged" in line
