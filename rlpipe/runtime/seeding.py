"""Seeds and RNG states of the process: python, numpy, torch (and CUDA), in a checkpoint-safe form."""

from __future__ import annotations

import random
from typing import Any, cast

import numpy as np
import rich.style  # noqa: F401  # draws from python's global RNG on first import: do it before any seeding
import torch

__all__ = ["numpy_generator", "restore_rng_state", "rng_state", "seed_everything"]


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    """Return python, numpy, torch (and CUDA) RNG states in a ``weights_only``-safe form.

    ``python``: ``{"version", "state": int64 [625], "gauss_next"}``; ``numpy``: the legacy global
    ``RandomState`` as ``{"name", "key": int64 [624], "pos", "has_gauss", "cached_gaussian"}``;
    ``torch``: uint8 CPU state; ``cuda``: one uint8 state per device (when CUDA is available).
    """
    version, internal, gauss_next = random.getstate()
    # legacy=True gives the 5-tuple (numpy types it as the tuple-or-dict of both forms)
    legacy = cast("tuple[str, np.ndarray, int, int, float]", np.random.get_state(legacy=True))
    name, key, pos, has_gauss, cached = legacy
    state: dict[str, Any] = {
        "python": {
            "version": version,
            "state": torch.tensor(internal, dtype=torch.int64),
            "gauss_next": gauss_next,
        },
        "numpy": {
            "name": name,
            "key": torch.from_numpy(key.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Restore the states :func:`rng_state` returned (CUDA ones only where CUDA is available)."""
    py = state["python"]
    random.setstate((py["version"], tuple(int(x) for x in py["state"].tolist()), py["gauss_next"]))
    npy = state["numpy"]
    key = np.asarray(npy["key"].tolist(), dtype=np.uint32)
    np.random.set_state((npy["name"], key, npy["pos"], npy["has_gauss"], npy["cached_gaussian"]))
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def numpy_generator(state: dict[str, Any]) -> np.random.Generator:
    """A numpy ``Generator`` continuing from ``generator.bit_generator.state`` (an env's ``np_random``)."""
    bit_generator = getattr(np.random, state["bit_generator"])()
    bit_generator.state = state
    return np.random.Generator(bit_generator)
