"""The machine's own matmul rate, measured in the calling process: the reference an update's GFLOP/s is
compared with (``benchmarks/peers/scaling.py``, and any benchmark that asks how close to the hardware it
runs).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from _bench import median

__all__ = ["bf16_native", "gemm_rate", "gemm_rates"]


def gemm_rate(m: int, k: int, n: int, dtype: Any, device: str, seconds: float = 0.3) -> float:
    """GFLOP/s of ``[m, k] @ [k, n]``: the median call over about ``seconds``.

    On CPU the calls are timed in thread CPU time, like the update (``update_cpu_s``), so both stay
    comparable when other processes take the core.
    """
    import torch

    clock = time.thread_time if device == "cpu" else time.perf_counter
    a = torch.randn(m, k, device=device).to(dtype)
    b = torch.randn(k, n, device=device).to(dtype)
    out = torch.empty(m, n, device=device, dtype=dtype)
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(times) < 3:
        start = clock()
        torch.mm(a, b, out=out)
        if device != "cpu":
            torch.cuda.synchronize()
        times.append(clock() - start)
    return 2 * m * k * n / max(median(times), 1e-9) / 1e9


def bf16_native(device: str) -> bool:
    """bf16 matmuls run in hardware: CUDA with bf16 support, or a CPU with avx512_bf16/AMX."""
    import torch

    if device.startswith("cuda"):
        return torch.cuda.is_bf16_supported()
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def gemm_rates(rows: int, width: int, device: str, bf16: bool) -> dict[str, float]:
    """GEMM GFLOP/s of the hidden layer's shape ``[rows, width] @ [width, width]`` and of a square
    1024³, fp32 (and bf16 when ``bf16``; sizes cut to 1024 rows and 256³ where bf16 is emulated)."""
    import torch

    rates = {
        "layer_fp32": gemm_rate(rows, width, width, torch.float32, device),
        "square_fp32": gemm_rate(1024, 1024, 1024, torch.float32, device),
    }
    if bf16:
        native = bf16_native(device)
        rates["layer_bf16"] = gemm_rate(
            rows if native else min(rows, 1024), width, width, torch.bfloat16, device
        )
        square = 1024 if native else 256
        rates["square_bf16"] = gemm_rate(square, square, square, torch.bfloat16, device)
    return rates
