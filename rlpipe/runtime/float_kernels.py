"""Which floating-point kernels this process computes with, recorded in every checkpoint.

A run is bit-exact on the machine and torch build that made it; another CPU rounds differently in
the last bits. The rounding depends on code torch picks at run time by the CPU, not on rlpipe:

- **Intel MKL** (torch's BLAS on x86-64 wheels) runs every CPU matmul (``nn.Linear``: ``sgemm``)
  and torch's ``tanh``, ``exp``, ``log``… on contiguous float tensors (MKL's vector maths). It picks
  its kernels by the CPU's instruction sets (AVX2, AVX-512, AMX) and vendor; ``MKL_CBWR`` pins them
  to one instruction set, ``ATEN_CPU_CAPABILITY`` does not reach them.
- **ATen's own vectorised kernels** (reductions, the fused Adam step, element-wise ops) are built
  for AVX2 and AVX-512 and chosen by ``ATEN_CPU_CAPABILITY`` (default: the best the CPU has); a
  reduction over 16-wide vectors adds in another order than over 8-wide ones.
- **Threads**: an op split over more threads reduces in another order (rlpipe's thread count
  depends on the config only, so it is part of the params).

:func:`float_kernels` records what decides these, so a replay on another machine can say why its
last bits differ (:func:`kernel_differences`) instead of leaving the user to guess.
"""

from __future__ import annotations

import os
import platform
import re
from functools import cache

__all__ = ["KERNEL_ENV", "float_kernels", "kernel_differences"]

KERNEL_ENV = ("MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "ATEN_CPU_CAPABILITY", "DNNL_MAX_CPU_ISA")
"""Environment variables that change which kernels MKL, ATen or oneDNN run."""


def float_kernels() -> dict[str, str]:
    """``{name: value}`` strings that decide this process's CPU float rounding (checkpoint-safe).

    ``cpu`` (the model name), ``cpu_isa`` (the vector instruction sets: ``avx2``, ``avx512``,
    ``amx``), ``torch`` (version), ``aten_capability`` (ATen's chosen kernels), ``blas``, ``threads``,
    and every :data:`KERNEL_ENV` variable that is set.
    """
    import torch

    kernels = dict(_machine())
    kernels["torch"] = str(torch.__version__)
    kernels["aten_capability"] = torch.backends.cpu.get_cpu_capability().lower()
    kernels["threads"] = str(torch.get_num_threads())
    kernels.update({name.lower(): os.environ[name] for name in KERNEL_ENV if os.environ.get(name)})
    return kernels


def kernel_differences(recorded: dict[str, str], current: dict[str, str]) -> list[str]:
    """``name: recorded → current`` for every entry that differs (empty: the same kernels)."""
    names = sorted(set(recorded) | set(current))
    return [
        f"{name}: {recorded.get(name, 'unset')} → {current.get(name, 'unset')}"
        for name in names
        if recorded.get(name) != current.get(name)
    ]


ISA_FLAGS = (("avx2", "avx2"), ("avx512", "avx512f"), ("amx", "amx_tile"))
"""``(name, /proc/cpuinfo flag)`` of the vector instruction sets whose kernels round differently."""


@cache
def _machine() -> tuple[tuple[str, str], ...]:
    """The CPU model, its vector instruction sets and torch's BLAS (read once per process)."""
    model, flags = _cpuinfo()
    isa = [
        name for name, flag in (("avx2", "avx2"), ("avx512", "avx512f"), ("amx", "amx_tile")) if flag in flags
    ]
    return (("cpu", model), ("cpu_isa", "+".join(isa) or "none"), ("blas", _blas()))


def _cpuinfo() -> tuple[str, set[str]]:
    """The first CPU's model name and flags from ``/proc/cpuinfo`` (Linux), else ``platform``'s."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read(65536)
    except OSError:
        return platform.processor() or platform.machine(), set()
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.M)
    return (
        model.group(1).strip() if model else platform.machine(),
        set(flags.group(1).split()) if flags else set(),
    )


def _blas() -> str:
    """Torch's BLAS as its build reports it, e.g. ``mkl 2024.2``."""
    import torch

    config = torch.__config__.show()
    mkl = re.search(r"Math Kernel Library Version ([\d.]+)", config)
    if mkl:
        return f"mkl {mkl.group(1)}"
    blas = re.search(r"BLAS_INFO=(\w+)", config)
    return blas.group(1) if blas else "unknown"
